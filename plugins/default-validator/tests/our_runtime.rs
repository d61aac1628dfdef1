//! The validator as an external plugin of our runtime side (`nri-adaptation`), with an
//! in-process plugin that injects an OCI hook.

mod common;

use common::ours::{container, pod, start_adaptation, wait_plugins};
use common::PluginProcess;
use nri_stub::api::{
    Container, ContainerAdjustment, CreateContainerRequest, Hook, Hooks, PodSandbox,
};
use nri_stub::{Context, CreateContainerResult, Plugin, Stub};

const BIN: &str = env!("CARGO_BIN_EXE_nri-default-validator");

struct Hooker;

#[nri_stub::plugin]
impl Plugin for Hooker {
    async fn create_container(
        &self,
        _ctx: &Context,
        _pod: &PodSandbox,
        _ctr: &Container,
    ) -> nri_stub::HandlerResult<CreateContainerResult> {
        let mut adjust = ContainerAdjustment::default();
        adjust.add_hooks(&Hooks {
            prestart: vec![Hook {
                path: "/bin/true".into(),
                ..Default::default()
            }],
            ..Default::default()
        });
        Ok(adjust.into())
    }
}

async fn create_with(config: &str) -> Result<nri_stub::api::CreateContainerResponse, String> {
    let dir = tempfile::tempdir().unwrap();
    let config_file = dir.path().join("validator.yaml");
    std::fs::write(&config_file, config).unwrap();
    let nri = start_adaptation(dir.path()).await;
    let socket = dir.path().join("nri.sock");
    let validator = PluginProcess::spawn(
        BIN,
        &[
            "-socket",
            socket.to_str().unwrap(),
            "-config",
            config_file.to_str().unwrap(),
        ],
        dir.path(),
        "validator",
    );
    let hooker = Stub::builder(Hooker)
        .name("hooker")
        .index("20")
        .socket_path(&socket)
        .build()
        .unwrap();
    let hooker = tokio::spawn(async move { hooker.run().await });
    wait_plugins(&nri, &["00-default-validator", "20-hooker"], &validator).await;

    let pod = pod("pod0", "web", &[]);
    let result = nri
        .create_container(CreateContainerRequest {
            container: Some(container("server", &pod)),
            pod: Some(pod),
        })
        .await
        .map_err(|e| e.to_string());
    nri.stop().await;
    hooker.abort();
    result
}

#[tokio::test]
async fn rejects_oci_hooks_with_our_runtime() {
    let err = create_with("rejectOCIHookAdjustment: true\n")
        .await
        .unwrap_err();
    assert!(
        err.contains(
            r#"validation error: plugin "20-hooker" attempted restricted OCI hook injection"#
        ),
        "{err}"
    );
}

#[tokio::test]
async fn accepts_hooks_when_allowed_with_our_runtime() {
    let reply = create_with("rejectNamespaceAdjustment: true\n")
        .await
        .unwrap();
    let hooks = reply.adjust.unwrap().hooks.unwrap();
    assert_eq!(hooks.prestart[0].path, "/bin/true");
}
