//! WebAssembly plugins in the plugin directory (feature `wasm`), with small
//! hand-written modules: loaded, configured with their conf.d file,
//! synchronized, called; a module running past the request timeout is a
//! timeout of the plugin. The Go-built plugins are exercised against the
//! reference in `interop/tests/wasm_plugins.rs`.
#![cfg(feature = "wasm")]

use crate::support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use nri_api::*;
use prost::Message;
use support::*;

/// `\xx` escapes of `bytes`, for a data segment.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("\\{b:02x}")).collect()
}

/// A module with a bump `malloc` and `data` (segments) and `globals`; the
/// handlers in `custom` (export name, body over `$ptr` and `$len`) do what
/// they say, every other handler answers an empty reply.
fn wat_module(data: &str, globals: &str, custom: &[(&str, String)]) -> Vec<u8> {
    let mut handlers = String::new();
    for event in nri_adaptation::nri_wasm::WasmEvent::ALL {
        let name = event.export_name();
        let body = custom
            .iter()
            .find(|(n, _)| *n == name)
            .map_or("(i64.const 0)", |(_, body)| body.as_str());
        handlers.push_str(&format!(
            "(func (export \"{name}\") (param $ptr i32) (param $len i32) (result i64) {body})\n"
        ));
    }
    wat::parse_str(format!(
        r#"(module
  (memory (export "memory") 1)
  {data}
  (global $heap (mut i32) (i32.const 0x8000))
  {globals}
  (func (export "plugin_api_version") (result i64) i64.const 1)
  (func (export "malloc") (param $n i32) (result i32)
    (local $p i32)
    (local.set $p (global.get $heap))
    (global.set $heap (i32.add (global.get $heap) (local.get $n)))
    (local.get $p))
  (func (export "free") (param i32))
  {handlers}
)"#
    ))
    .unwrap()
}

/// A module answering CreateContainer with `create` (an encoded
/// CreateContainerResponse); every other handler answers an empty reply.
/// With `spin`, CreateContainer never returns.
fn module(create: &[u8], spin: bool) -> Vec<u8> {
    let body = if spin {
        "(loop $l (br $l)) (i64.const 0)".to_string()
    } else {
        format!(
            "(i64.or (i64.shl (i64.const 0x100) (i64.const 32)) (i64.const {}))",
            create.len()
        )
    };
    wat_module(
        &format!(r#"(data (i32.const 0x100) "{}")"#, hex(create)),
        "",
        &[("plugin_create_container", body)],
    )
}

/// A builder for the tests' runtime: no socket, no cache of compiled
/// modules.
fn wasm_builder(env: &Env) -> nri_adaptation::AdaptationBuilder {
    env.builder().disable_external_connections().wasm_options(
        nri_adaptation::nri_wasm::WasmOptions {
            cache_dir: None,
            ..Default::default()
        },
    )
}

fn install(dir: &Path, name: &str, bytes: &[u8]) {
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn create_request() -> CreateContainerRequest {
    CreateContainerRequest {
        pod: Some(pod("pod0")),
        container: Some(container("ctr0", "pod0")),
    }
}

#[tokio::test]
async fn wasm_plugin_is_loaded_configured_and_adjusts() {
    let env = Env::new();
    let mut adjust = ContainerAdjustment::default();
    adjust.add_annotation("from", "wasm");
    let reply = CreateContainerResponse {
        adjust: Some(adjust),
        ..Default::default()
    };
    install(
        &env.plugin_dir(),
        "10-wat",
        &module(&reply.encode_to_vec(), false),
    );
    // Not started: no execute bit, as in the reference.
    let noexec = env.plugin_dir().join("20-noexec");
    std::fs::write(&noexec, module(&[], false)).unwrap();
    std::fs::set_permissions(&noexec, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::create_dir_all(env.conf_dir()).unwrap();
    std::fs::write(env.conf_dir().join("wat.conf"), "some: config\n").unwrap();

    let nri = wasm_builder(&env).build();
    bounded(nri.start()).await.unwrap();
    let plugins = nri.plugins();
    assert_eq!(plugins.len(), 1, "{plugins:?}");
    assert_eq!(plugins[0].name, "wat");
    assert_eq!(plugins[0].index, "10");
    // Configure answered no events: everything.
    assert_eq!(plugins[0].events, EventMask::VALID_EVENTS);

    let reply = bounded(nri.create_container(create_request()))
        .await
        .unwrap();
    assert_eq!(reply.adjust.unwrap().annotations["from"], "wasm");
    bounded(nri.stop()).await;
    assert!(nri.plugins().is_empty());
}

#[tokio::test]
async fn wasm_plugin_past_the_request_timeout_is_dropped() {
    let env = Env::new();
    install(&env.plugin_dir(), "10-spin", &module(&[], true));
    let nri = wasm_builder(&env)
        .request_timeout(Duration::from_millis(300))
        .build();
    bounded(nri.start()).await.unwrap();
    assert_eq!(nri.plugins().len(), 1);
    let started = std::time::Instant::now();
    // The default timeout policy drops the plugin; the call goes on.
    let reply = bounded(nri.create_container(create_request()))
        .await
        .unwrap();
    assert!(reply.adjust.is_none_or(|a| a.annotations.is_empty()));
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(nri.plugins().is_empty(), "{:?}", nri.plugins());
    bounded(nri.stop()).await;
}

#[tokio::test]
async fn invalid_wasm_file_is_skipped() {
    let env = Env::new();
    let mut bytes = nri_adaptation::nri_wasm::WASM_MAGIC.to_vec();
    bytes.extend_from_slice(b"not really");
    install(&env.plugin_dir(), "10-broken", &bytes);
    let nri = env.builder().disable_external_connections().build();
    bounded(nri.start()).await.unwrap();
    assert!(nri.plugins().is_empty());
    bounded(nri.stop()).await;
}

/// A module that keeps state from Synchronize: its Synchronize sets a flag
/// and answers `sync` (an encoded SynchronizeResponse); its CreateContainer
/// answers `create` once synchronized, fails with "not synchronized"
/// before, and traps on a request longer than 600 bytes.
fn stateful_module(create: &[u8], sync: &[u8]) -> Vec<u8> {
    let not_synced = b"not synchronized";
    let data = format!(
        r#"(data (i32.const 0x100) "{}") (data (i32.const 0x400) "{}") (data (i32.const 0x600) "{}")"#,
        hex(create),
        hex(sync),
        hex(not_synced)
    );
    let synchronize = format!(
        "(global.set $synced (i32.const 1))
         (i64.or (i64.shl (i64.const 0x400) (i64.const 32)) (i64.const {}))",
        sync.len()
    );
    // Bit 31 of the size: an error text.
    let create = format!(
        "(if (i32.gt_u (local.get $len) (i32.const 600)) (then unreachable))
         (if (i32.eqz (global.get $synced))
           (then (return (i64.or (i64.shl (i64.const 0x600) (i64.const 32))
                                 (i64.const {})))))
         (i64.or (i64.shl (i64.const 0x100) (i64.const 32)) (i64.const {}))",
        not_synced.len() | (1 << 31),
        create.len()
    );
    wat_module(
        &data,
        "(global $synced (mut i32) (i32.const 0))",
        &[
            ("plugin_synchronize", synchronize),
            ("plugin_create_container", create),
        ],
    )
}

/// Starts a runtime with the stateful module as `10-stateful`: its
/// CreateContainer adds the annotation `from: wasm` once synchronized, and
/// each of its Synchronizes shows in the runtime by an update of
/// `ctr-synced` (one so far).
async fn start_stateful(env: &Env) -> nri_adaptation::Adaptation {
    let mut adjust = ContainerAdjustment::default();
    adjust.add_annotation("from", "wasm");
    let create = CreateContainerResponse {
        adjust: Some(adjust),
        ..Default::default()
    };
    let sync = SynchronizeResponse {
        update: vec![ContainerUpdate {
            container_id: "ctr-synced".into(),
            ..Default::default()
        }],
        more: false,
    };
    install(
        &env.plugin_dir(),
        "10-stateful",
        &stateful_module(&create.encode_to_vec(), &sync.encode_to_vec()),
    );
    let nri = wasm_builder(env).build();
    bounded(nri.start()).await.unwrap();
    assert_eq!(env.runtime.synced.lock().unwrap().len(), 1);
    nri
}

/// A container request long enough to make the stateful module trap.
fn trapping_request() -> CreateContainerRequest {
    let mut trapping = create_request();
    if let Some(c) = trapping.container.as_mut() {
        c.name = "x".repeat(1000);
    }
    assert!(create_request().encoded_len() < 600);
    trapping
}

#[tokio::test]
async fn a_replaced_instance_is_configured_and_synchronized_again() {
    let env = Env::new();
    let nri = start_stateful(&env).await;
    let syncs = || env.runtime.synced.lock().unwrap().len();
    let reply = bounded(nri.create_container(create_request()))
        .await
        .unwrap();
    assert_eq!(reply.adjust.unwrap().annotations["from"], "wasm");

    let err = bounded(nri.create_container(trapping_request()))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("plugin_create_container"), "{err}");
    // A trap is an error of the call; the plugin stays.
    assert_eq!(nri.plugins().len(), 1);

    // The fresh instance is synchronized with the runtime's state again,
    // without waiting for an event.
    bounded(async {
        while syncs() < 2 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert_eq!(syncs(), 2);
    assert!(env.runtime.sync_errors.lock().unwrap().is_empty());
    // Without its Synchronize, the module would answer "not synchronized".
    let reply = bounded(nri.create_container(create_request()))
        .await
        .unwrap();
    assert_eq!(reply.adjust.unwrap().annotations["from"], "wasm");
    bounded(nri.stop()).await;
}

/// A runtime that blocks plugin synchronization around each event never
/// reaches a replaced instance before it is synchronized again: the event
/// whose call trapped returns only once the re-synchronization has queued
/// for the lock, so the next event's block waits for it.
#[tokio::test]
async fn the_event_after_a_trap_waits_for_the_fresh_instance_to_be_synchronized() {
    let env = Env::new();
    let nri = start_stateful(&env).await;
    let syncs = || env.runtime.synced.lock().unwrap().len();
    let trapping = trapping_request();
    for round in 0..3 {
        let block = bounded(nri.block_plugin_sync()).await;
        bounded(nri.create_container(trapping.clone()))
            .await
            .unwrap_err();
        drop(block);
        // No waiting here: the block itself must wait for the Synchronize.
        let block = bounded(nri.block_plugin_sync()).await;
        assert_eq!(syncs(), 2 + round, "round {round}");
        let reply = bounded(nri.create_container(create_request()))
            .await
            .unwrap_or_else(|e| panic!("round {round}: {e}"));
        assert_eq!(reply.adjust.unwrap().annotations["from"], "wasm");
        drop(block);
    }
    assert!(env.runtime.sync_errors.lock().unwrap().is_empty());
    bounded(nri.stop()).await;
}
