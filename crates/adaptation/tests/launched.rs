//! Plugins launched from the plugin directory.
//!
//! This test has its own `main` (`harness = false`): started by the
//! adaptation (with `NRI_PLUGIN_SOCKET` in its environment) the same binary
//! acts as the plugin, an nri-stub plugin that reports what it was started
//! with (environment, file descriptors, configuration, pid) in the
//! adjustment it returns for CreateContainer. Otherwise it runs the test
//! scenarios below, each bounded by a timeout.

mod support;

use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use nri_adaptation::PluginKind;
use nri_api::*;
use nri_stub::{ConfigureInfo, Context, CreateContainerResult, Plugin};
use support::*;

struct SelfReport {
    config: Mutex<String>,
}

fn link(fd: u32) -> String {
    std::fs::read_link(format!("/proc/self/fd/{fd}"))
        .map(|p| p.display().to_string())
        .unwrap_or_default()
}

#[nri_stub::plugin]
impl Plugin for SelfReport {
    async fn configure(
        &self,
        _ctx: &Context,
        info: &ConfigureInfo,
    ) -> nri_stub::HandlerResult<EventMask> {
        *self.config.lock().unwrap() = info.config.clone();
        Ok(EventMask::default())
    }

    async fn create_container(
        &self,
        ctx: &Context,
        _p: &PodSandbox,
        _c: &Container,
    ) -> nri_stub::HandlerResult<CreateContainerResult> {
        let mut env: Vec<String> = std::env::vars().map(|(k, v)| format!("{k}={v}")).collect();
        env.sort();
        let mut adjust = ContainerAdjustment::default();
        adjust
            .add_annotation("env", env.join(","))
            .add_annotation("config", self.config.lock().unwrap().clone())
            .add_annotation("pid", std::process::id().to_string())
            .add_annotation("stdin", link(0))
            .add_annotation("stderr", link(2))
            .add_annotation("fd3", link(3))
            .add_annotation("name", ctx.name());
        Ok(adjust.into())
    }
}

fn plugin_main() {
    support::run_launched_plugin(SelfReport {
        config: Mutex::new(String::new()),
    });
}

fn exe(path: &Path, body: &str) {
    std::fs::write(path, body).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn alive(pid: &str) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

async fn launched_plugin_gets_fd3_env_and_config() {
    let env = Env::new();
    let dir = env.plugin_dir();
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::create_dir_all(env.conf_dir()).unwrap();
    let me = std::env::current_exe().unwrap();
    symlink(&me, dir.join("10-selftest")).unwrap();
    // Skipped: a bad name, a WASM module, a file without execute bit.
    symlink(&me, dir.join("badname")).unwrap();
    let mut wasm = vec![0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00];
    wasm.extend_from_slice(&[0; 16]);
    std::fs::write(dir.join("20-wasm"), &wasm).unwrap();
    std::fs::set_permissions(dir.join("20-wasm"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(dir.join("30-noexec"), "").unwrap();
    std::fs::write(env.conf_dir().join("selftest.conf"), "hello: world\n").unwrap();

    let nri = env.builder().disable_external_connections().build();
    bounded(nri.start()).await.unwrap();
    let plugins = nri.plugins();
    assert_eq!(plugins.len(), 1, "{plugins:?}");
    assert_eq!(plugins[0].name, "selftest");
    assert_eq!(plugins[0].index, "10");
    assert_eq!(plugins[0].kind, PluginKind::Launched);

    let reply = bounded(nri.create_container(CreateContainerRequest {
        pod: Some(pod("pod0")),
        container: Some(container("ctr0", "pod0")),
    }))
    .await
    .unwrap();
    let a = reply.adjust.unwrap().annotations;
    assert_eq!(
        a["env"],
        "NRI_PLUGIN_IDX=10,NRI_PLUGIN_NAME=selftest,NRI_PLUGIN_SOCKET=3"
    );
    assert_eq!(a["config"], "hello: world\n");
    assert_eq!(a["stdin"], "/dev/null");
    assert_eq!(a["stderr"], "/dev/null");
    assert!(a["fd3"].starts_with("socket:"), "{}", a["fd3"]);
    assert_eq!(a["name"], "10-selftest");
    let pid = a["pid"].clone();
    assert!(alive(&pid));

    bounded(nri.stop()).await;
    // Killed and reaped: no process, not even a zombie.
    assert!(!alive(&pid), "plugin process {pid} still exists");
    assert!(nri.plugins().is_empty());
}

async fn launched_plugin_that_does_not_register_is_killed() {
    let env = Env::new();
    let dir = env.plugin_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let pid_file = env.dir.path().join("sleeper.pid");
    exe(
        &dir.join("40-sleeper"),
        &format!(
            "#!/bin/sh\necho $$ > {}\nexec sleep 30\n",
            pid_file.display()
        ),
    );
    let nri = env
        .builder()
        .registration_timeout(Duration::from_millis(500))
        .disable_external_connections()
        .build();
    bounded(nri.start()).await.unwrap();
    assert!(nri.plugins().is_empty());
    let pid = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .to_string();
    assert!(!pid.is_empty());
    assert!(!alive(&pid), "sleeper {pid} still exists");
    bounded(nri.stop()).await;
}

fn main() {
    if std::env::var_os(nri_api::plugin::PLUGIN_SOCKET_ENV).is_some() {
        plugin_main();
        return;
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        println!("test launched_plugin_gets_fd3_env_and_config ...");
        launched_plugin_gets_fd3_env_and_config().await;
        println!("test launched_plugin_that_does_not_register_is_killed ...");
        launched_plugin_that_does_not_register_is_killed().await;
    });
    println!("test result: ok. 2 passed");
}
