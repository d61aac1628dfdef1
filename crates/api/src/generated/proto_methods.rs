// @generated from proto/nri.proto by tests/generated.rs; do not edit.
// Update with: NRI_API_UPDATE_GENERATED=1 cargo test -p nri-api --test generated

/// `(service, method)` pairs declared in `proto/nri.proto`.
#[allow(dead_code)]
pub(crate) const PROTO_METHODS: &[(&str, &str)] = &[
    ("nri.pkg.api.v1alpha1.Runtime", "RegisterPlugin"),
    ("nri.pkg.api.v1alpha1.Runtime", "UpdateContainers"),
    ("nri.pkg.api.v1alpha1.Plugin", "Configure"),
    ("nri.pkg.api.v1alpha1.Plugin", "Synchronize"),
    ("nri.pkg.api.v1alpha1.Plugin", "Shutdown"),
    ("nri.pkg.api.v1alpha1.Plugin", "RunPodSandbox"),
    ("nri.pkg.api.v1alpha1.Plugin", "UpdatePodSandbox"),
    ("nri.pkg.api.v1alpha1.Plugin", "PostUpdatePodSandbox"),
    ("nri.pkg.api.v1alpha1.Plugin", "StopPodSandbox"),
    ("nri.pkg.api.v1alpha1.Plugin", "RemovePodSandbox"),
    ("nri.pkg.api.v1alpha1.Plugin", "CreateContainer"),
    ("nri.pkg.api.v1alpha1.Plugin", "PostCreateContainer"),
    ("nri.pkg.api.v1alpha1.Plugin", "StartContainer"),
    ("nri.pkg.api.v1alpha1.Plugin", "PostStartContainer"),
    ("nri.pkg.api.v1alpha1.Plugin", "UpdateContainer"),
    ("nri.pkg.api.v1alpha1.Plugin", "PostUpdateContainer"),
    ("nri.pkg.api.v1alpha1.Plugin", "StopContainer"),
    ("nri.pkg.api.v1alpha1.Plugin", "RemoveContainer"),
    ("nri.pkg.api.v1alpha1.Plugin", "StateChange"),
    ("nri.pkg.api.v1alpha1.Plugin", "ValidateContainerAdjustment"),
    ("nri.pkg.api.v1alpha1.HostFunctions", "Log"),
];
