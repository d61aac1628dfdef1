//! ttRPC service and method names of the NRI protocol.
//!
//! On the wire a ttRPC request names its service and method separately; the
//! constants here are those two strings.
//!
//! ```
//! use nri_api::service;
//! assert_eq!(service::PLUGIN_SERVICE, "nri.pkg.api.v1alpha1.Plugin");
//! assert_eq!(service::plugin::CONFIGURE, "Configure");
//! ```

/// The service a plugin serves (on mux connection 1); the runtime calls it.
pub const PLUGIN_SERVICE: &str = "nri.pkg.api.v1alpha1.Plugin";
/// The service the runtime serves (on mux connection 2); a plugin calls it.
pub const RUNTIME_SERVICE: &str = "nri.pkg.api.v1alpha1.Runtime";
/// Functions a WebAssembly host offers to WebAssembly plugins.
pub const HOST_FUNCTIONS_SERVICE: &str = "nri.pkg.api.v1alpha1.HostFunctions";

/// Methods of [`PLUGIN_SERVICE`].
pub mod plugin {
    /// `ConfigureRequest` → `ConfigureResponse`.
    pub const CONFIGURE: &str = "Configure";
    /// `SynchronizeRequest` → `SynchronizeResponse`.
    pub const SYNCHRONIZE: &str = "Synchronize";
    /// `Empty` → `Empty`.
    pub const SHUTDOWN: &str = "Shutdown";
    /// `RunPodSandboxRequest` → `RunPodSandboxResponse`.
    pub const RUN_POD_SANDBOX: &str = "RunPodSandbox";
    /// `UpdatePodSandboxRequest` → `UpdatePodSandboxResponse`.
    pub const UPDATE_POD_SANDBOX: &str = "UpdatePodSandbox";
    /// `PostUpdatePodSandboxRequest` → `PostUpdatePodSandboxResponse`.
    pub const POST_UPDATE_POD_SANDBOX: &str = "PostUpdatePodSandbox";
    /// `StopPodSandboxRequest` → `StopPodSandboxResponse`.
    pub const STOP_POD_SANDBOX: &str = "StopPodSandbox";
    /// `RemovePodSandboxRequest` → `RemovePodSandboxResponse`.
    pub const REMOVE_POD_SANDBOX: &str = "RemovePodSandbox";
    /// `CreateContainerRequest` → `CreateContainerResponse`.
    pub const CREATE_CONTAINER: &str = "CreateContainer";
    /// `PostCreateContainerRequest` → `PostCreateContainerResponse`.
    pub const POST_CREATE_CONTAINER: &str = "PostCreateContainer";
    /// `StartContainerRequest` → `StartContainerResponse`.
    pub const START_CONTAINER: &str = "StartContainer";
    /// `PostStartContainerRequest` → `PostStartContainerResponse`.
    pub const POST_START_CONTAINER: &str = "PostStartContainer";
    /// `UpdateContainerRequest` → `UpdateContainerResponse`.
    pub const UPDATE_CONTAINER: &str = "UpdateContainer";
    /// `PostUpdateContainerRequest` → `PostUpdateContainerResponse`.
    pub const POST_UPDATE_CONTAINER: &str = "PostUpdateContainer";
    /// `StopContainerRequest` → `StopContainerResponse`.
    pub const STOP_CONTAINER: &str = "StopContainer";
    /// `RemoveContainerRequest` → `RemoveContainerResponse`.
    pub const REMOVE_CONTAINER: &str = "RemoveContainer";
    /// `StateChangeEvent` → `Empty` (deprecated generic notification).
    pub const STATE_CHANGE: &str = "StateChange";
    /// `ValidateContainerAdjustmentRequest` → `ValidateContainerAdjustmentResponse`.
    pub const VALIDATE_CONTAINER_ADJUSTMENT: &str = "ValidateContainerAdjustment";

    /// Every method of the plugin service.
    pub const ALL: &[&str] = &[
        CONFIGURE,
        SYNCHRONIZE,
        SHUTDOWN,
        RUN_POD_SANDBOX,
        UPDATE_POD_SANDBOX,
        POST_UPDATE_POD_SANDBOX,
        STOP_POD_SANDBOX,
        REMOVE_POD_SANDBOX,
        CREATE_CONTAINER,
        POST_CREATE_CONTAINER,
        START_CONTAINER,
        POST_START_CONTAINER,
        UPDATE_CONTAINER,
        POST_UPDATE_CONTAINER,
        STOP_CONTAINER,
        REMOVE_CONTAINER,
        STATE_CHANGE,
        VALIDATE_CONTAINER_ADJUSTMENT,
    ];
}

/// Methods of [`RUNTIME_SERVICE`].
pub mod runtime {
    /// `RegisterPluginRequest` → `Empty`.
    pub const REGISTER_PLUGIN: &str = "RegisterPlugin";
    /// `UpdateContainersRequest` → `UpdateContainersResponse`.
    pub const UPDATE_CONTAINERS: &str = "UpdateContainers";

    /// Every method of the runtime service.
    pub const ALL: &[&str] = &[REGISTER_PLUGIN, UPDATE_CONTAINERS];
}

/// Methods of [`HOST_FUNCTIONS_SERVICE`].
pub mod host {
    /// `LogRequest` → `Empty`.
    pub const LOG: &str = "Log";

    /// Every method of the host functions service.
    pub const ALL: &[&str] = &[LOG];
}

/// The full ttRPC method path `/<service>/<method>`, as used in logs and
/// by gRPC-style tooling.
///
/// ```
/// use nri_api::service;
/// assert_eq!(
///     service::method_path(service::PLUGIN_SERVICE, service::plugin::CONFIGURE),
///     "/nri.pkg.api.v1alpha1.Plugin/Configure"
/// );
/// ```
pub fn method_path(service: &str, method: &str) -> String {
    format!("/{service}/{method}")
}

#[cfg(test)]
mod tests {
    use super::*;

    include!("generated/proto_methods.rs");

    fn declared(service: &str) -> Vec<&'static str> {
        PROTO_METHODS
            .iter()
            .filter(|(s, _)| *s == service)
            .map(|(_, m)| *m)
            .collect()
    }

    fn assert_same_set(service: &str, constants: &[&str]) {
        let mut want = declared(service);
        let mut have = constants.to_vec();
        want.sort_unstable();
        have.sort_unstable();
        assert_eq!(have, want, "methods of {service}");
    }

    #[test]
    fn plugin_constants_match_proto() {
        assert_same_set(PLUGIN_SERVICE, plugin::ALL);
        assert_eq!(plugin::ALL.len(), 18);
    }

    #[test]
    fn runtime_constants_match_proto() {
        assert_same_set(RUNTIME_SERVICE, runtime::ALL);
    }

    #[test]
    fn host_constants_match_proto() {
        assert_same_set(HOST_FUNCTIONS_SERVICE, host::ALL);
    }

    #[test]
    fn only_three_services_exist() {
        let mut services: Vec<&str> = PROTO_METHODS.iter().map(|(s, _)| *s).collect();
        services.sort_unstable();
        services.dedup();
        assert_eq!(
            services,
            vec![HOST_FUNCTIONS_SERVICE, PLUGIN_SERVICE, RUNTIME_SERVICE]
        );
    }

    #[test]
    fn method_path_joins_service_and_method() {
        assert_eq!(
            method_path(RUNTIME_SERVICE, runtime::REGISTER_PLUGIN),
            "/nri.pkg.api.v1alpha1.Runtime/RegisterPlugin"
        );
    }
}
