//! The plugin binary on our runtime adaptation (`nri-adaptation`): the same
//! annotations give the same adjustments as on the Go runtime.

mod common;

use std::path::Path;

use common::os_args;
use common::ours::{container, pod, OurRuntime};
use nri_stub::api::{CreateContainerRequest, LinuxDevice};

const BIN: &str = env!("CARGO_BIN_EXE_nri-device-injector");

#[tokio::test(flavor = "current_thread")]
async fn annotations_become_adjustments_on_our_adaptation() {
    let dir = tempfile::tempdir().unwrap();
    let rt = OurRuntime::start(
        dir.path(),
        Path::new(BIN),
        |socket| os_args(&[&"-idx", &"10", &"-socket-path", &socket]),
        &[],
    )
    .await;
    assert_eq!(rt.plugin_names(), ["10-device-injector"]);

    let pod = pod(
        "pod0",
        &[
            (
                "devices.noderesource.dev/container.c0",
                "- {path: /dev/nri-null, type: c, major: 1, minor: 3}",
            ),
            (
                "mounts.nri.io/pod",
                "- {source: /home, destination: /host-home, type: bind, options: [bind, ro]}",
            ),
            (
                "sysctl.noderesource.dev/container.c1",
                "net.core.somaxconn: 256",
            ),
            (
                "cdi-devices.noderesource.dev/container.c1",
                "[vendor0.com/device=zero]",
            ),
            (
                "memory-policy.noderesource.dev/container.bad",
                "mode: MPOL_NONSENSE",
            ),
        ],
    );
    let create = |name: &str| CreateContainerRequest {
        pod: Some(pod.clone()),
        container: Some(container("pod0", name, &["sh"])),
    };

    let c0 = rt.nri.create_container(create("c0")).await.unwrap();
    let adjust = c0.adjust.unwrap();
    assert_eq!(adjust.mounts.len(), 1, "the pod-wide legacy mount applies");
    assert_eq!(adjust.mounts[0].options, ["bind", "ro"]);
    assert_eq!(
        adjust.linux.unwrap().devices,
        [LinuxDevice {
            path: "/dev/nri-null".into(),
            r#type: "c".into(),
            major: 1,
            minor: 3,
            ..Default::default()
        }]
    );

    let c1 = rt.nri.create_container(create("c1")).await.unwrap();
    let adjust = c1.adjust.unwrap();
    assert_eq!(adjust.cdi_devices[0].name, "vendor0.com/device=zero");
    assert_eq!(adjust.linux.unwrap().sysctl["net.core.somaxconn"], "256");

    let err = rt.nri.create_container(create("bad")).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("invalid memory policy mode \"MPOL_NONSENSE\""),
        "{err}"
    );
    rt.stop().await;
}

/// Under Docker's own NRI (runtime name `docker`), which applies only environment
/// variables and mounts whose only option is `ro`, the plugin says once at Configure
/// what it leaves out, and gives each container only the read-only mount instead of
/// an adjustment Docker would fail it on.
#[tokio::test(flavor = "current_thread")]
async fn under_docker_only_the_read_only_mount_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let (nri, plugin) = nri_interop::plugin_tests::run_with_runtime_named(
        dir.path(),
        "docker",
        BIN,
        &["-idx", "10"],
        "10-device-injector",
    )
    .await;
    let pod = pod(
        "pod0",
        &[
            (
                "devices.noderesource.dev/container.c0",
                "- {path: /dev/nri-null, type: c, major: 1, minor: 3}",
            ),
            (
                "mounts.noderesource.dev/container.c0",
                "- {source: /home, destination: /host-home, type: bind, options: [ro]}\n\
                 - {source: /tmp, destination: /host-tmp, type: bind, options: [rbind, rw]}",
            ),
            (
                "sysctl.noderesource.dev/container.c0",
                "net.core.somaxconn: 256",
            ),
        ],
    );
    for _ in 0..2 {
        let reply = nri
            .create_container(CreateContainerRequest {
                pod: Some(pod.clone()),
                container: Some(container("pod0", "c0", &["sh"])),
            })
            .await
            .unwrap();
        let adjust = reply.adjust.unwrap();
        let mounts: Vec<_> = adjust
            .mounts
            .iter()
            .map(|m| m.destination.as_str())
            .collect();
        assert_eq!(mounts, ["/host-home"], "{adjust:?}");
        let linux = adjust.linux.unwrap_or_default();
        assert!(linux.devices.is_empty(), "{linux:?}");
        assert!(linux.sysctl.is_empty(), "{linux:?}");
    }
    nri.stop().await;
    let log = plugin.log();
    let warning = "device-injector: runtime docker 29.2.0 does not apply devices, CDI devices, \
                   mount options other than ro, I/O priority, scheduler, network devices, \
                   sysctls, memory policy: this plugin leaves them out of its adjustments";
    assert_eq!(log.matches(warning).count(), 1, "{log}");
}
