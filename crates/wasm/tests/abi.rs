//! The plugin ABI against small hand-written modules.

use std::time::{Duration, Instant};

use nri_wasm::{WasmError, WasmEvent, WasmOptions, WasmPlugin};

const T: Duration = Duration::from_secs(5);

fn options() -> WasmOptions {
    WasmOptions {
        cache_dir: None,
        memory_limit: 4 << 20,
        init_timeout: Duration::from_secs(5),
    }
}

/// Every export the host requires. `$body` is the handler of
/// plugin_create_container; the other handlers answer an empty response.
/// The heap is a bump allocator from 0x1000; `_initialize` counts.
fn module(version: &str, create: &str, extra: &str) -> Vec<u8> {
    let handlers = empty_handlers(&WasmEvent::ALL, &["plugin_create_container"]);
    let text = format!(
        r#"(module
  (import "env" "log" (func $log (param i32 i32) (result i64)))
  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const 0x1000))
  (global $frees (mut i32) (i32.const 0))
  (global $inits (mut i32) (i32.const 0))
  (func (export "_initialize") (global.set $inits (i32.add (global.get $inits) (i32.const 1))))
  (func (export "plugin_api_version") (result i64) {version})
  (func $malloc (export "malloc") (param $n i32) (result i32)
    (local $p i32)
    (local.set $p (global.get $heap))
    (global.set $heap (i32.add (global.get $heap) (local.get $n)))
    (local.get $p))
  (func (export "free") (param i32) (global.set $frees (i32.add (global.get $frees) (i32.const 1))))
  (func (export "plugin_create_container") (param $ptr i32) (param $len i32) (result i64)
    {create})
  {handlers}
  {extra}
)"#
    );
    wat::parse_str(&text).unwrap()
}

/// A handler answering an empty response for each of `events` but those
/// named in `skip`.
fn empty_handlers<'a>(events: impl IntoIterator<Item = &'a WasmEvent>, skip: &[&str]) -> String {
    let mut handlers = String::new();
    for event in events {
        let name = event.export_name();
        if skip.contains(&name) {
            continue;
        }
        handlers.push_str(&format!(
            "(func (export \"{name}\") (param i32 i32) (result i64) i64.const 0)\n"
        ));
    }
    handlers
}

/// A module without a heap: `version` is its plugin_api_version export and
/// its malloc always answers `malloc`.
fn bare_module(version: &str, malloc: &str, handlers: &str) -> Vec<u8> {
    wat::parse_str(format!(
        r#"(module (memory (export "memory") 1)
        {version}
        (func (export "malloc") (param i32) (result i32) i32.const {malloc})
        (func (export "free") (param i32))
        {handlers})"#
    ))
    .unwrap()
}

fn load(bytes: &[u8]) -> Result<WasmPlugin, WasmError> {
    WasmPlugin::from_bytes(bytes, "10-test", &options())
}

fn call(p: &WasmPlugin, req: &[u8]) -> Result<Vec<u8>, WasmError> {
    p.call_blocking(WasmEvent::CreateContainer, req.to_vec(), T)
}

/// Answers with the request buffer itself (the host then frees it twice;
/// the bump allocator does not care).
const ECHO: &str = r#"
    (i64.or (i64.shl (i64.extend_i32_u (local.get $ptr)) (i64.const 32))
            (i64.extend_i32_u (local.get $len)))"#;

#[test]
fn round_trip() {
    let p = load(&module("i64.const 1", ECHO, "")).unwrap();
    assert_eq!(call(&p, b"hello").unwrap(), b"hello");
    assert_eq!(call(&p, &[7u8; 3000]).unwrap(), vec![7u8; 3000]);
    // Calls of other events answer empty.
    let empty = p
        .call_blocking(WasmEvent::StopContainer, b"x".to_vec(), T)
        .unwrap();
    assert!(empty.is_empty());
}

#[tokio::test]
async fn async_call() {
    let p = load(&module("i64.const 1", ECHO, "")).unwrap();
    let out = p
        .call(WasmEvent::CreateContainer, b"async".to_vec(), T)
        .await
        .unwrap();
    assert_eq!(out, b"async");
}

#[test]
fn empty_request_is_not_allocated() {
    // Traps unless it got (0, 0).
    let create = r#"
    (if (i32.or (local.get $ptr) (local.get $len)) (then unreachable))
    (i64.const 0)"#;
    let p = load(&module("i64.const 1", create, "")).unwrap();
    assert!(call(&p, b"").unwrap().is_empty());
}

#[test]
fn error_bit_is_an_error_text() {
    let create = r#"
    (i32.store8 (i32.const 0x100) (i32.const 0x6e)) ;; n
    (i32.store8 (i32.const 0x101) (i32.const 0x6f)) ;; o
    (i64.or (i64.shl (i64.const 0x100) (i64.const 32))
            (i64.or (i64.const 2) (i64.const 0x80000000)))"#;
    let p = load(&module("i64.const 1", create, "")).unwrap();
    match call(&p, b"req") {
        Err(WasmError::Plugin(text)) => assert_eq!(text, "no"),
        other => panic!("{other:?}"),
    }
}

/// plugin_api_version may return an i32 as well.
#[test]
fn api_version_i32_is_accepted() {
    load(&module_i32_version()).unwrap();
}

fn module_i32_version() -> Vec<u8> {
    // Replace the i64 version export with an i32 one.
    bare_module(
        r#"(func (export "plugin_api_version") (result i32) i32.const 1)"#,
        "0x1000",
        &empty_handlers(&WasmEvent::ALL, &[]),
    )
}

#[test]
fn wrong_api_version() {
    let err = load(&module("i64.const 2", ECHO, "")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "WASM plugin 10-test: API version mismatch, host: 1, plugin: 2"
    );
}

#[test]
fn missing_export() {
    // A module without plugin_validate_container_adjustment (an old plugin).
    let bytes = bare_module(
        r#"(func (export "plugin_api_version") (result i64) i64.const 1)"#,
        "0x1000",
        &empty_handlers(&WasmEvent::ALL[..17], &[]),
    );
    let err = load(&bytes).unwrap_err();
    assert_eq!(
        err.to_string(),
        "WASM plugin 10-test: plugin_validate_container_adjustment is not exported"
    );
    // No version export at all.
    let err = load(&wat::parse_str("(module)").unwrap()).unwrap_err();
    assert!(matches!(
        err,
        WasmError::MissingExport {
            export: "plugin_api_version",
            ..
        }
    ));
}

#[test]
fn wrong_signature() {
    let bytes = module(
        "i64.const 1",
        ECHO,
        r#"(func (export "unused") (param i32) (result i32) local.get 0)"#,
    );
    load(&bytes).unwrap();
    let bad = wat::parse_str(
        r#"(module (func (export "plugin_api_version") (param i32) (result i64) i64.const 1))"#,
    )
    .unwrap();
    assert!(matches!(
        load(&bad).unwrap_err(),
        WasmError::Signature {
            export: "plugin_api_version",
            ..
        }
    ));
}

#[test]
fn unknown_import_fails_instantiation() {
    let bytes =
        wat::parse_str(r#"(module (import "env" "nope" (func)) (memory (export "memory") 1))"#)
            .unwrap();
    assert!(matches!(
        load(&bytes).unwrap_err(),
        WasmError::Instantiate { .. }
    ));
}

#[test]
fn not_wasm_fails_to_compile() {
    let mut bytes = nri_wasm::WASM_MAGIC.to_vec();
    bytes.extend_from_slice(b"garbage");
    assert!(matches!(
        load(&bytes).unwrap_err(),
        WasmError::Compile { .. }
    ));
}

#[test]
fn trap_then_a_fresh_instance() {
    // Traps when the request's first byte is 't'; otherwise echoes.
    let create = format!(
        r#"(if (i32.eq (i32.load8_u (local.get $ptr)) (i32.const 0x74)) (then unreachable))
        {ECHO}"#
    );
    let p = load(&module("i64.const 1", &create, "")).unwrap();
    assert_eq!(call(&p, b"ok").unwrap(), b"ok");
    let err = call(&p, b"trap").unwrap_err();
    assert!(matches!(err, WasmError::Trap { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.starts_with("WASM plugin 10-test: plugin_create_container failed:"),
        "{text}"
    );
    // Usable again, on a new instance.
    assert_eq!(call(&p, b"again").unwrap(), b"again");
}

#[test]
fn replacement_instance_is_configured_again() {
    // plugin_configure stores the first request byte; create returns it.
    let extra = r#"
    (global $conf (mut i32) (i32.const 0))
    (func (export "plugin_configure") (param $ptr i32) (param $len i32) (result i64)
      (global.set $conf (i32.load8_u (local.get $ptr)))
      (i64.const 0))
    (func (export "plugin_state_change") (param i32 i32) (result i64) unreachable)
    (func (export "conf") (result i32) (global.get $conf))"#;
    // Module with our own configure: build without the default one.
    let handlers = empty_handlers(
        &WasmEvent::ALL,
        &[
            "plugin_create_container",
            "plugin_configure",
            "plugin_state_change",
        ],
    );
    let text = format!(
        r#"(module
  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const 0x1000))
  (func (export "plugin_api_version") (result i64) i64.const 1)
  (func (export "malloc") (param $n i32) (result i32)
    (local $p i32)
    (local.set $p (global.get $heap))
    (global.set $heap (i32.add (global.get $heap) (local.get $n)))
    (local.get $p))
  (func (export "free") (param i32))
  (func (export "plugin_create_container") (param $ptr i32) (param $len i32) (result i64)
    (i32.store8 (i32.const 0x100) (global.get $conf))
    (i64.or (i64.shl (i64.const 0x100) (i64.const 32)) (i64.const 1)))
  {handlers}
  {extra}
)"#
    );
    let p = load(&wat::parse_str(text).unwrap()).unwrap();
    p.call_blocking(WasmEvent::Configure, b"Z".to_vec(), T)
        .unwrap();
    assert_eq!(call(&p, b"x").unwrap(), b"Z");
    assert!(matches!(
        p.call_blocking(WasmEvent::StateChange, b"x".to_vec(), T),
        Err(WasmError::Trap { .. })
    ));
    // The new instance got the Configure request again.
    assert_eq!(call(&p, b"x").unwrap(), b"Z");
}

#[test]
fn out_of_bounds_response() {
    // One page is 64 KiB: 0x20000 is beyond it.
    let create = r#"(i64.or (i64.shl (i64.const 0x20000) (i64.const 32)) (i64.const 4))"#;
    let p = load(&module("i64.const 1", create, "")).unwrap();
    let err = call(&p, b"x").unwrap_err();
    assert!(matches!(err, WasmError::OutOfBounds { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "WASM plugin 10-test: plugin_create_container: response 0x20000+4 is outside \
         the plugin's memory of 65536 bytes"
    );
    // A length running past the end.
    let create = r#"(i64.or (i64.shl (i64.const 0xff00) (i64.const 32)) (i64.const 0x7fffffff))"#;
    let p = load(&module("i64.const 1", create, "")).unwrap();
    assert!(matches!(
        call(&p, b"x").unwrap_err(),
        WasmError::OutOfBounds { .. }
    ));
}

#[test]
fn out_of_bounds_malloc() {
    let bytes = bare_module(
        r#"(func (export "plugin_api_version") (result i64) i64.const 1)"#,
        "0xfffffff0",
        &empty_handlers(&WasmEvent::ALL, &[]),
    );
    let p = load(&bytes).unwrap();
    assert!(matches!(
        call(&p, b"request").unwrap_err(),
        WasmError::OutOfBounds {
            what: "request buffer",
            ..
        }
    ));
}

#[test]
fn infinite_loop_times_out() {
    let create = r#"(loop $l (br $l)) (i64.const 0)"#;
    let p = load(&module("i64.const 1", create, "")).unwrap();
    let started = Instant::now();
    let err = p
        .call_blocking(
            WasmEvent::CreateContainer,
            b"x".to_vec(),
            Duration::from_millis(200),
        )
        .unwrap_err();
    let took = started.elapsed();
    assert!(err.is_timeout(), "{err:?}");
    assert!(
        took >= Duration::from_millis(200) && took < Duration::from_secs(3),
        "{took:?}"
    );
    // Still usable: the other events work on a new instance.
    assert!(p
        .call_blocking(WasmEvent::StopContainer, Vec::new(), T)
        .unwrap()
        .is_empty());
}

/// A module that spins forever does not keep a current-thread runtime from
/// its other tasks: it yields at every epoch tick, an interval on the same
/// thread keeps ticking, and the call ends with a timeout naming the
/// plugin.
#[test]
fn spinning_module_does_not_block_the_runtime() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    let create = r#"(loop $l (br $l)) (i64.const 0)"#;
    let p = load(&module("i64.const 1", create, "")).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        let ticks = Arc::new(AtomicUsize::new(0));
        let counter = ticks.clone();
        let ticking = tokio::spawn(async move {
            let mut interval = tokio::time::interval(Duration::from_millis(10));
            loop {
                interval.tick().await;
                counter.fetch_add(1, Ordering::Relaxed);
            }
        });
        // Let the interval start.
        tokio::task::yield_now().await;
        let before = ticks.load(Ordering::Relaxed);
        let started = Instant::now();
        let err = p
            .call(
                WasmEvent::CreateContainer,
                b"x".to_vec(),
                Duration::from_millis(400),
            )
            .await
            .unwrap_err();
        let took = started.elapsed();
        let during = ticks.load(Ordering::Relaxed) - before;
        ticking.abort();
        assert!(err.is_timeout(), "{err:?}");
        assert_eq!(
            err.to_string(),
            "WASM plugin 10-test: plugin_create_container did not finish within 400ms"
        );
        assert!(
            took >= Duration::from_millis(400) && took < Duration::from_secs(3),
            "{took:?}"
        );
        // About 40 at 10 ms; a loaded machine delays some.
        assert!(
            during >= 10,
            "the interval ticked {during} times in {took:?}"
        );
    });
    // Usable again, on a new instance.
    assert_eq!(p.discarded().borrow().to_owned(), 1);
    assert!(p
        .call_blocking(WasmEvent::StopContainer, Vec::new(), T)
        .unwrap()
        .is_empty());
}

/// A call dropped before it finished throws its instance away; the next
/// call runs on a fresh one.
#[tokio::test]
async fn dropped_call_discards_the_instance() {
    let create = format!(
        r#"(if (i32.eq (i32.load8_u (local.get $ptr)) (i32.const 0x73)) (then (loop $l (br $l))))
        {ECHO}"#
    );
    let p = load(&module("i64.const 1", &create, "")).unwrap();
    let mut discarded = p.discarded();
    let spin = p.call(WasmEvent::CreateContainer, b"spin".to_vec(), T);
    assert!(tokio::time::timeout(Duration::from_millis(100), spin)
        .await
        .is_err());
    assert!(discarded.has_changed().unwrap());
    assert_eq!(*discarded.borrow_and_update(), 1);
    let out = p
        .call(WasmEvent::CreateContainer, b"echo".to_vec(), T)
        .await
        .unwrap();
    assert_eq!(out, b"echo");
}

/// Calls made together run one after the other, in the order they were
/// made, also while the first one is suspended at an epoch tick.
#[tokio::test]
async fn concurrent_calls_are_serialized() {
    // Answers with a counter of the calls so far (one byte); a request
    // starting with 'w' computes for a while first (many epoch ticks).
    let create = r#"
    (local $n i32)
    (if (i32.eq (i32.load8_u (local.get $ptr)) (i32.const 0x77))
      (then
        (local.set $n (i32.const 200000000))
        (loop $l
          (local.set $n (i32.sub (local.get $n) (i32.const 1)))
          (br_if $l (local.get $n)))))
    (global.set $count (i32.add (global.get $count) (i32.const 1)))
    (i32.store8 (i32.const 0x100) (global.get $count))
    (i64.or (i64.shl (i64.const 0x100) (i64.const 32)) (i64.const 1))"#;
    let p = load(&module(
        "i64.const 1",
        create,
        "(global $count (mut i32) (i32.const 0))",
    ))
    .unwrap();
    let calls = (0..16).map(|i| {
        let request = if i == 0 { b"w" } else { b"x" };
        p.call(WasmEvent::CreateContainer, request.to_vec(), T)
    });
    let replies = join_calls(calls).await;
    // Made in this order, served in this order.
    let expected: Vec<u8> = (1..=16).collect();
    assert_eq!(replies, expected);
}

/// Polls the futures together, returns their first reply bytes in order.
async fn join_calls<F>(calls: impl Iterator<Item = F>) -> Vec<u8>
where
    F: std::future::Future<Output = Result<Vec<u8>, WasmError>>,
{
    let mut set: Vec<_> = calls.map(Box::pin).collect();
    let mut out = vec![None; set.len()];
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (i, call) in set.iter_mut().enumerate() {
            if out[i].is_some() {
                continue;
            }
            match call.as_mut().poll(cx) {
                std::task::Poll::Ready(reply) => out[i] = Some(reply.unwrap()[0]),
                std::task::Poll::Pending => pending = true,
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    out.into_iter().flatten().collect()
}

#[test]
fn infinite_loop_in_initialize_times_out() {
    let bytes =
        wat::parse_str(r#"(module (func (export "_initialize") (loop $l (br $l))))"#).unwrap();
    let opts = WasmOptions {
        init_timeout: Duration::from_millis(200),
        ..options()
    };
    let err = WasmPlugin::from_bytes(&bytes, "10-test", &opts).unwrap_err();
    assert!(err.is_timeout(), "{err:?}");
}

#[test]
fn unbounded_memory_growth_hits_the_limit() {
    let create = r#"(loop $l (drop (memory.grow (i32.const 1))) (br $l)) (i64.const 0)"#;
    let p = load(&module("i64.const 1", create, "")).unwrap();
    let err = call(&p, b"x").unwrap_err();
    assert!(matches!(err, WasmError::Trap { .. }), "{err:?}");
    // And a fresh instance serves the next call.
    assert!(p
        .call_blocking(WasmEvent::StopContainer, Vec::new(), T)
        .unwrap()
        .is_empty());
}

#[test]
fn exit_in_initialize() {
    let bytes = wat::parse_str(
        r#"(module
        (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
        (memory (export "memory") 1)
        (func (export "_initialize") (call $exit (i32.const 3))))"#,
    )
    .unwrap();
    let err = load(&bytes).unwrap_err();
    assert_eq!(
        err.to_string(),
        "WASM plugin 10-test: unexpected exit_code: 3"
    );
}

#[test]
fn host_log_reads_the_request() {
    // LogRequest{msg: "hi", level: WARN}: 0a 02 68 69 10 03
    let create = r#"
    (i64.store (i32.const 0x200) (i64.const 0x0003_1069_6802_0a))
    (drop (call $log (i32.const 0x200) (i32.const 6)))
    ;; and an out of range message traps
    (if (i32.eq (local.get $len) (i32.const 3))
      (then (drop (call $log (i32.const 0xfffff) (i32.const 100)))))
    (i64.const 0)"#;
    let p = load(&module("i64.const 1", create, "")).unwrap();
    assert!(call(&p, b"ok").unwrap().is_empty());
    assert!(matches!(
        call(&p, b"bad").unwrap_err(),
        WasmError::Trap { .. }
    ));
}

#[test]
fn name_and_drop() {
    let p = load(&module("i64.const 1", ECHO, "")).unwrap();
    assert_eq!(p.name(), "10-test");
    drop(p);
}

#[test]
fn cached_load() {
    let tmp = tempfile::tempdir().unwrap();
    let opts = WasmOptions {
        cache_dir: Some(tmp.path().join("cache")),
        ..options()
    };
    let bytes = module("i64.const 1", ECHO, "");
    let p = WasmPlugin::from_bytes(&bytes, "10-test", &opts).unwrap();
    assert_eq!(call(&p, b"one").unwrap(), b"one");
    let files = std::fs::read_dir(tmp.path().join("cache")).unwrap().count();
    assert_eq!(files, 1);
    let p = WasmPlugin::from_bytes(&bytes, "10-test", &opts).unwrap();
    assert_eq!(call(&p, b"two").unwrap(), b"two");
}

/// Loads the module named by `NRI_WASM_TEST_MODULE` (e.g. a Go plugin) and
/// reports how long compiling and loading from the cache take, then the
/// median of 2000 CreateContainer calls straight to the module (no
/// adaptation around it), after Configure with `{"tag": "bench"}`:
/// `NRI_WASM_TEST_MODULE=x.wasm cargo test -p nri-wasm --test abi -- --ignored --nocapture`.
#[test]
#[ignore]
fn load_module_from_env() {
    let Some(path) = std::env::var_os("NRI_WASM_TEST_MODULE") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let opts = WasmOptions {
        cache_dir: Some(tmp.path().join("cache")),
        memory_limit: 256 << 20,
        init_timeout: Duration::from_secs(600),
    };
    for what in ["compiled", "from cache"] {
        let started = Instant::now();
        let p = WasmPlugin::load(path.as_ref(), "10-env", &opts).unwrap();
        let loaded = started.elapsed();
        let started = Instant::now();
        p.call_blocking(WasmEvent::Synchronize, Vec::new(), T)
            .unwrap();
        println!(
            "{what}: load {loaded:?}, first call {:?}",
            started.elapsed()
        );
    }
    use prost::Message;
    let p = WasmPlugin::load(path.as_ref(), "10-env", &opts).unwrap();
    let configure = nri_api::ConfigureRequest {
        config: r#"{"tag": "bench"}"#.into(),
        ..Default::default()
    };
    p.call_blocking(WasmEvent::Configure, configure.encode_to_vec(), T)
        .unwrap();
    // The calls as the adaptation makes them: awaited on a runtime thread.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let mut samples = Vec::new();
    for i in 0..2200 {
        let id = format!("ctr{i}");
        let req = nri_api::CreateContainerRequest {
            pod: Some(nri_api::PodSandbox {
                id: "pod0".into(),
                name: "pod0".into(),
                uid: "uid0".into(),
                namespace: "default".into(),
                ..Default::default()
            }),
            container: Some(nri_api::Container {
                id: id.clone(),
                pod_sandbox_id: "pod0".into(),
                name: id,
                args: vec!["sleep".into(), "3600".into()],
                env: vec!["PATH=/usr/bin:/bin".into()],
                ..Default::default()
            }),
        };
        let req = req.encode_to_vec();
        let started = Instant::now();
        rt.block_on(p.call(WasmEvent::CreateContainer, req, T))
            .unwrap();
        if i >= 200 {
            samples.push(started.elapsed());
        }
    }
    samples.sort();
    println!(
        "CreateContainer straight to the module: median {:?}",
        samples[samples.len() / 2]
    );
}
