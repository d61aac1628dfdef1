//! Differential scenarios: each scenario runs once on the Go reference
//! adaptation (`nri-ref-runtime`, official NRI v0.12.5) and once on ours
//! (`nri-rs-ref-runtime`), with the same Go plugins (`nri-ref-plugin`,
//! `nri-ref-plugin-old`). The output documents and every plugin's event log
//! must be equal after normalization.
//!
//! A normalization is allowed only where `docs/decisions.md` says we differ
//! on purpose; each is a named [`Norm`] that a case lists explicitly, and a
//! listed normalization must actually apply (so none is a blanket ignore).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::path::Path;

use common::runtimes::{install_go_plugin, spawn_go_plugin, Rt, Running};
use common::TIMEOUT;
use nri_interop::read_event_log;
use serde_json::{json, Value};

/// A difference between the two adaptations that `docs/decisions.md`
/// documents; applied to one side only, and only when a case lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Norm {
    /// [8] An UpdateContainer reply holds no entry for the updated container
    /// unless a plugin touched it; Go appends a nil entry, which shows as
    /// `null` in `-raw` output (stripping drops it). Drops exactly such
    /// `null` entries from Go's UpdateContainer results.
    NoEmptyUpdateEntry8,
    /// [15] Evictions are returned to the runtime (step results' `evict`,
    /// `update_calls[].evict`); Go drops them. Removed from our side after
    /// checking they are the ones the plugins asked for.
    EvictionsReturned15,
    /// [18] Stop sends Shutdown to every plugin: our plugins' logs end with
    /// a `Shutdown` entry that Go's lack.
    ShutdownOnStop18,
    /// [24] A teardown event reaches every plugin even when one fails it; Go
    /// stops at the failing plugin. Drops from our logs the entries of failed
    /// teardown steps that Go's log of the same plugin lacks.
    TeardownReachesEveryPlugin24,
}

/// The NRI version the runtime reports in Configure: ours is
/// `nri_api::NRI_VERSION` (decisions.md: the protocol level nri-rs
/// reports), Go's its module version. Applied to every case: it is the
/// identity of the implementation, not behaviour.
const GO_NRI_VERSION: &str = "v0.12.5";

/// One Go plugin of a case.
struct Plugin {
    program: &'static str,
    /// `<idx>-<name>`.
    id: &'static str,
    config: Value,
}

fn plugin(id: &'static str, config: Value) -> Plugin {
    Plugin {
        program: "nri-ref-plugin",
        id,
        config,
    }
}

fn old_plugin(id: &'static str, config: Value) -> Plugin {
    Plugin {
        program: "nri-ref-plugin-old",
        id,
        config,
    }
}

struct Case {
    name: &'static str,
    scenario: Value,
    plugins: Vec<Plugin>,
    /// Connect the plugins to the socket (in order, each after the previous
    /// one is synchronized) instead of pre-installing them.
    external: bool,
    /// Pass `-raw`: compare unstripped step results.
    raw: bool,
    norms: &'static [Norm],
}

/// What one runtime produced.
#[derive(Debug)]
struct Run {
    status: Option<i32>,
    doc: Value,
    /// Event log per plugin id.
    logs: BTreeMap<String, Vec<Value>>,
    stderr: String,
}

fn run_on(rt: Rt, case: &Case, base: &Path) -> Run {
    let dir = base.join(rt.name());
    let plugin_dir = dir.join("plugins");
    let conf_dir = dir.join("conf");
    std::fs::create_dir_all(&plugin_dir).unwrap();
    std::fs::create_dir_all(&conf_dir).unwrap();
    let log_of = |id: &str| dir.join(format!("{id}.jsonl"));
    let config_of = |p: &Plugin| {
        let mut c = p.config.clone();
        c["log"] = json!(log_of(p.id));
        c
    };
    let out = if case.external {
        let raw: &[&OsStr] = if case.raw { &["-raw".as_ref()] } else { &[] };
        let (running, socket) = Running::spawn_with_socket(rt, &dir, &case.scenario, raw);
        let mut procs = Vec::new();
        for (i, p) in case.plugins.iter().enumerate() {
            let (idx, name) = p.id.split_once('-').unwrap();
            procs.push(spawn_go_plugin(
                p.program,
                &dir,
                &socket,
                name,
                idx,
                &config_of(p),
            ));
            // Connect one at a time: Synchronize order is then fixed.
            let want = i + 1;
            nri_interop::wait_for_events(&log_of(p.id), TIMEOUT, |ev| {
                ev.iter().any(|e| e["event"] == "Synchronize")
            })
            .unwrap_or_else(|e| {
                panic!(
                    "{}: plugin {} not synchronized ({want}): {e}",
                    rt.name(),
                    p.id
                )
            });
        }
        let out = running.finish(TIMEOUT);
        drop(procs);
        out
    } else {
        for p in &case.plugins {
            install_go_plugin(&plugin_dir, &conf_dir, p.program, p.id, &config_of(p));
        }
        let mut args: Vec<&OsStr> = vec![
            "-plugin-dir".as_ref(),
            plugin_dir.as_os_str(),
            "-plugin-config-dir".as_ref(),
            conf_dir.as_os_str(),
        ];
        if case.raw {
            args.push("-raw".as_ref());
        }
        Running::spawn(rt, &dir, &case.scenario, &args).finish(TIMEOUT)
    };
    // The configuration text names this runtime's directory (the log path).
    let dir_text = dir.display().to_string();
    let logs = case
        .plugins
        .iter()
        .map(|p| {
            let mut log = read_event_log(&log_of(p.id)).unwrap();
            for e in &mut log {
                if let Some(cfg) = e["config"].as_str() {
                    e["config"] = json!(cfg.replace(&dir_text, "<dir>"));
                }
            }
            (p.id.to_string(), log)
        })
        .collect();
    Run {
        status: out.status.code(),
        doc: out.json,
        logs,
        stderr: out.stderr,
    }
}

/// Log entries that depend on timing or process teardown, not on the
/// adaptation: unsolicited update results (compared through the runtime's
/// `update_calls`), and `closed`/`exit` (a stopped launched plugin is
/// killed, so they may or may not be written).
fn deterministic(log: &[Value]) -> Vec<Value> {
    log.iter()
        .filter(|e| {
            !matches!(
                e["event"].as_str(),
                Some("UpdateContainers" | "closed" | "exit")
            )
        })
        .cloned()
        .collect()
}

struct Normalizer {
    allowed: BTreeSet<Norm>,
    applied: BTreeSet<Norm>,
}

impl Normalizer {
    fn apply(&mut self, norm: Norm) -> bool {
        if self.allowed.contains(&norm) {
            self.applied.insert(norm);
            true
        } else {
            false
        }
    }
}

/// [8]: drops Go's nil entries from UpdateContainer results.
fn normalize_go(go: &mut Run, n: &mut Normalizer) {
    let Some(steps) = go.doc["steps"].as_array_mut() else {
        return;
    };
    for st in steps {
        if st["op"] != "UpdateContainer" {
            continue;
        }
        let Some(updates) = st
            .get_mut("result")
            .and_then(|r| r.get_mut("update"))
            .and_then(Value::as_array_mut)
        else {
            continue;
        };
        if updates.iter().any(Value::is_null) && n.apply(Norm::NoEmptyUpdateEntry8) {
            updates.retain(|u| !u.is_null());
            if updates.is_empty() {
                if let Some(r) = st.get_mut("result").and_then(Value::as_object_mut) {
                    r.remove("update");
                }
            }
        }
    }
}

/// [15], [18] and the NRI version on our side. `evictions` lists what the
/// plugins asked for, per step op / `update_calls`.
fn normalize_rust(rs: &mut Run, n: &mut Normalizer, expected_evictions: &[Value]) {
    let mut seen = Vec::new();
    if let Some(steps) = rs.doc["steps"].as_array_mut() {
        for st in steps {
            if let Some(obj) = st["result"].as_object_mut() {
                if obj.contains_key("evict") && n.apply(Norm::EvictionsReturned15) {
                    if let Some(Value::Array(ev)) = obj.remove("evict") {
                        seen.extend(ev);
                    }
                }
            }
        }
    }
    if let Some(calls) = rs.doc["update_calls"].as_array_mut() {
        for c in calls {
            let obj = c.as_object_mut().unwrap();
            if obj.contains_key("evict") && n.apply(Norm::EvictionsReturned15) {
                if let Some(Value::Array(ev)) = obj.remove("evict") {
                    seen.extend(ev);
                }
            }
        }
    }
    if n.allowed.contains(&Norm::EvictionsReturned15) {
        assert_eq!(
            seen, expected_evictions,
            "[15] evictions returned by our adaptation"
        );
    }
    for log in rs.logs.values_mut() {
        let last_is_shutdown = log
            .iter()
            .rev()
            .find(|e| {
                !matches!(
                    e["event"].as_str(),
                    Some("closed" | "exit" | "UpdateContainers")
                )
            })
            .is_some_and(|e| e["event"] == "Shutdown");
        if last_is_shutdown && n.apply(Norm::ShutdownOnStop18) {
            let pos = log.iter().rposition(|e| e["event"] == "Shutdown").unwrap();
            log.remove(pos);
        }
        for e in log.iter_mut() {
            if e["event"] == "Configure" && e.get("nri_version").is_some() {
                assert_eq!(e["nri_version"], nri_api::NRI_VERSION);
                e["nri_version"] = json!(GO_NRI_VERSION);
            }
        }
    }
}

/// [24]: see [`Norm::TeardownReachesEveryPlugin24`].
fn normalize_teardown(go: &Run, rs: &mut Run, n: &mut Normalizer) {
    const TEARDOWN: [&str; 4] = [
        "StopContainer",
        "RemoveContainer",
        "StopPodSandbox",
        "RemovePodSandbox",
    ];
    fn subject(v: &Value, container: &str, pod: &str) -> String {
        let c = &v[container];
        let c = c.get("id").unwrap_or(c);
        match c.as_str() {
            Some(id) => id.to_string(),
            None => {
                let p = &v[pod];
                p.get("id")
                    .unwrap_or(p)
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            }
        }
    }
    let failed: Vec<(String, String)> = rs.doc["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|st| {
            TEARDOWN.iter().any(|t| st["op"] == *t)
                && st["error"].as_str().is_some_and(|e| !e.is_empty())
        })
        .map(|st| {
            (
                st["op"].as_str().unwrap_or_default().to_string(),
                subject(st, "container", "pod"),
            )
        })
        .collect();
    let key = |e: &Value| {
        (
            e["event"].as_str().unwrap_or_default().to_string(),
            subject(e, "container", "pod"),
        )
    };
    for (id, log) in rs.logs.iter_mut() {
        let Some(go_log) = go.logs.get(id) else {
            continue;
        };
        log.retain(|e| {
            let k = key(e);
            let extra = failed.contains(&k) && !go_log.iter().any(|g| key(g) == k);
            !(extra && n.apply(Norm::TeardownReachesEveryPlugin24))
        });
    }
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap()
}

/// Runs `case` on both runtimes and compares; returns both runs (normalized).
fn differential(case: Case, expected_evictions: &[Value]) -> (Run, Run) {
    let base = tempfile::tempdir().unwrap();
    let mut go = run_on(Rt::Go, &case, base.path());
    let mut rs = run_on(Rt::Rust, &case, base.path());
    let mut n = Normalizer {
        allowed: case.norms.iter().copied().collect(),
        applied: BTreeSet::new(),
    };
    normalize_go(&mut go, &mut n);
    normalize_rust(&mut rs, &mut n, expected_evictions);
    normalize_teardown(&go, &mut rs, &mut n);

    let ctx = || {
        format!(
            "case {}\n--- go stderr:\n{}\n--- rust stderr:\n{}",
            case.name, go.stderr, rs.stderr
        )
    };
    assert_eq!(go.status, rs.status, "exit status; {}", ctx());
    if go.doc != rs.doc {
        panic!(
            "output documents differ\n--- go:\n{}\n--- rust:\n{}\n{}",
            pretty(&go.doc),
            pretty(&rs.doc),
            ctx()
        );
    }
    for (id, go_log) in &go.logs {
        let g = deterministic(go_log);
        let r = deterministic(&rs.logs[id]);
        if g != r {
            let at = g
                .iter()
                .zip(&r)
                .position(|(a, b)| a != b)
                .unwrap_or(g.len().min(r.len()));
            panic!(
                "event logs of {id} differ at entry {at} (go {} entries, rust {})\n--- go:\n{}\n--- rust:\n{}\n{}",
                g.len(),
                r.len(),
                g.get(at).map(pretty).unwrap_or_default(),
                r.get(at).map(pretty).unwrap_or_default(),
                ctx()
            );
        }
    }
    let unused: Vec<_> = n.allowed.difference(&n.applied).collect();
    assert!(
        unused.is_empty(),
        "case {}: normalizations listed but not needed: {unused:?}",
        case.name
    );
    (go, rs)
}

// ---------------------------------------------------------------------------
// Scenarios

fn pods() -> Value {
    json!([{"id": "pod0", "name": "pod0", "uid": "uid0", "namespace": "default",
            "labels": {"app": "demo"}, "annotations": {"a": "b"}}])
}

fn containers() -> Value {
    json!([
        {"id": "ctr0", "pod_sandbox_id": "pod0", "name": "ctr0", "state": 1,
         "args": ["sleep", "10"], "env": ["A=B"], "annotations": {"keep": "me"},
         "mounts": [{"destination": "/data", "source": "/src", "type": "bind", "options": ["rbind"]}],
         "linux": {"resources": {"memory": {"limit": {"value": 1000000}}}}},
        {"id": "ctr1", "pod_sandbox_id": "pod0", "name": "ctr1", "state": 3},
        {"id": "ctr2", "pod_sandbox_id": "pod0", "name": "ctr2", "state": 3}
    ])
}

/// Every lifecycle event on ctr0, after `wait` plugins synchronized.
fn every_event(wait: usize) -> Vec<Value> {
    vec![
        json!({"op": "wait_plugins", "count": wait, "timeout_ms": 20000}),
        json!({"op": "RunPodSandbox", "pod": "pod0"}),
        json!({"op": "UpdatePodSandbox", "pod": "pod0",
               "overhead_linux_resources": {"cpu": {"shares": {"value": 2}}},
               "linux_resources": {"memory": {"limit": {"value": 2000000}}}}),
        json!({"op": "PostUpdatePodSandbox", "pod": "pod0"}),
        json!({"op": "CreateContainer", "pod": "pod0", "container": "ctr0"}),
        json!({"op": "PostCreateContainer", "container": "ctr0"}),
        json!({"op": "StartContainer", "container": "ctr0"}),
        json!({"op": "PostStartContainer", "container": "ctr0"}),
        json!({"op": "UpdateContainer", "container": "ctr0",
               "linux_resources": {"cpu": {"shares": {"value": 512}}}}),
        json!({"op": "PostUpdateContainer", "container": "ctr0"}),
        json!({"op": "StopContainer", "container": "ctr0"}),
        json!({"op": "RemoveContainer", "container": "ctr0"}),
        json!({"op": "StopPodSandbox", "pod": "pod0"}),
        json!({"op": "RemovePodSandbox", "pod": "pod0"}),
    ]
}

fn scenario(steps: Vec<Value>) -> Value {
    json!({
        "runtime": {"name": "differential", "version": "v1.0.0"},
        "pods": pods(),
        "containers": containers(),
        "fail_updates": ["ctr2"],
        "steps": steps,
    })
}

fn cpu_update(ctr: &str, shares: u64) -> Value {
    json!({"container_id": ctr, "linux": {"resources": {"cpu": {"shares": {"value": shares}}}}})
}

#[test]
fn every_event_with_adjustments_updates_and_evictions() {
    let evict_create = json!({"container_id": "ctr1", "reason": "make room"});
    let evict_update = json!({"container_id": "ctr2", "reason": "too big"});
    let config = json!({
        "adjust": {
            "annotations": {"owner": "10-all", "-keep": ""},
            "env": [{"key": "X", "value": "Y"}],
            "mounts": [{"destination": "/extra", "source": "/host", "type": "bind", "options": ["ro"]}],
            "hooks": {"prestart": [{"path": "/bin/true", "args": ["true"]}]},
            "linux": {"resources": {"memory": {"limit": {"value": 5000000}},
                                    "cpu": {"shares": {"value": 256}, "cpus": "0-1"},
                                    "pids": {"limit": 100}},
                      "oom_score_adj": {"value": 10}},
            "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 512}],
            "args": ["", "sleep", "20"]
        },
        "update": {
            "Synchronize": [cpu_update("ctr1", 10)],
            "CreateContainer": [cpu_update("ctr1", 20)],
            "UpdateContainer": [cpu_update("ctr1", 30), cpu_update("ctr0", 1024)],
            "StopContainer": [cpu_update("ctr2", 40)]
        },
        "evict": {"CreateContainer": [evict_create.clone()], "UpdateContainer": [evict_update.clone()]}
    });
    differential(
        Case {
            name: "every event",
            scenario: scenario(every_event(1)),
            plugins: vec![plugin("10-all", config)],
            external: false,
            raw: false,
            norms: &[Norm::EvictionsReturned15, Norm::ShutdownOnStop18],
        },
        &[evict_create, evict_update],
    );
}

/// Steps up to and including CreateContainer of ctr0.
fn until_create(wait: usize) -> Vec<Value> {
    every_event(wait).into_iter().take(5).collect()
}

#[test]
fn two_plugins_conflict_on_a_simple_field() {
    let mut steps = until_create(2);
    steps.push(json!({"op": "UpdateContainer", "container": "ctr1",
                      "linux_resources": {"cpu": {"shares": {"value": 64}}}}));
    differential(
        Case {
            name: "conflict",
            scenario: scenario(steps),
            plugins: vec![
                plugin(
                    "10-a",
                    json!({"adjust": {"linux": {"resources": {"memory": {"limit": {"value": 1000}}}}}}),
                ),
                plugin(
                    "20-b",
                    json!({"adjust": {"linux": {"resources": {"memory": {"limit": {"value": 2000}}}}}}),
                ),
            ],
            external: false,
            raw: false,
            norms: &[Norm::ShutdownOnStop18],
        },
        &[],
    );
}

#[test]
fn three_plugins_overlap_with_removals_and_a_conflict() {
    let mut steps = until_create(3);
    steps.extend(every_event(3).into_iter().skip(5));
    let overlap = scenario(steps);
    differential(
        Case {
            name: "three plugins, removals hand keys over",
            scenario: overlap,
            plugins: vec![
                plugin(
                    "10-a",
                    json!({"adjust": {
                    "annotations": {"k": "a", "other": "a"},
                    "env": [{"key": "X", "value": "a"}, {"key": "Y", "value": "a"}],
                    "mounts": [{"destination": "/m", "source": "/a", "type": "bind"}],
                    "linux": {"resources": {"cpu": {"shares": {"value": 100}}},
                              "sysctl": {"net.a": "1"}}}}),
                ),
                plugin(
                    "20-b",
                    json!({"adjust": {
                    "annotations": {"-k": "", "k": "b", "-keep": ""},
                    "env": [{"key": "-X"}, {"key": "X", "value": "b"}],
                    "mounts": [{"destination": "-/m"}, {"destination": "/m", "source": "/b", "type": "bind"}],
                    "linux": {"sysctl": {"-net.a": "", "net.a": "2"},
                              "resources": {"memory": {"limit": {"value": 4096}}}}}}),
                ),
                plugin(
                    "30-c",
                    json!({"adjust": {
                    "env": [{"key": "-Y"}],
                    "mounts": [{"destination": "-/data"}],
                    "linux": {"resources": {"cpu": {"cpus": "0"}}}}}),
                ),
            ],
            external: false,
            raw: false,
            norms: &[Norm::ShutdownOnStop18],
        },
        &[],
    );

    differential(
        Case {
            name: "three plugins, the third conflicts with the new owner",
            scenario: scenario(until_create(3)),
            plugins: vec![
                plugin("10-a", json!({"adjust": {"annotations": {"k": "a"}}})),
                plugin(
                    "20-b",
                    json!({"adjust": {"annotations": {"-k": "", "k": "b"}}}),
                ),
                plugin("30-c", json!({"adjust": {"annotations": {"k": "c"}}})),
            ],
            external: false,
            raw: false,
            norms: &[Norm::ShutdownOnStop18],
        },
        &[],
    );
}

#[test]
fn updates_in_update_and_stop_container() {
    let mut steps = every_event(2);
    // A second update where both plugins set the same field of ctr1.
    steps.insert(
        9,
        json!({"op": "UpdateContainer", "container": "ctr1",
                           "linux_resources": {"cpu": {"shares": {"value": 8}}}}),
    );
    differential(
        Case {
            name: "updates",
            scenario: scenario(steps),
            plugins: vec![
                plugin(
                    "10-a",
                    json!({"update": {
                    "UpdateContainer": [cpu_update("ctr1", 30)],
                    "StopContainer": [cpu_update("ctr1", 31), cpu_update("ctr2", 32)]}}),
                ),
                plugin(
                    "20-b",
                    json!({"update": {
                    "UpdateContainer": [cpu_update("ctr1", 40),
                        {"container_id": "ctr2", "linux": {"resources": {"memory": {"limit": {"value": 9999}}}}}],
                    "StopContainer": [{"container_id": "ctr1",
                        "linux": {"resources": {"memory": {"limit": {"value": 7777}}}}}]}}),
                ),
            ],
            external: false,
            raw: false,
            norms: &[Norm::ShutdownOnStop18],
        },
        &[],
    );
}

#[test]
fn validator_rejects_the_adjustment() {
    differential(
        Case {
            name: "validator",
            scenario: scenario(until_create(2)),
            plugins: vec![
                plugin(
                    "10-a",
                    json!({"adjust": {"env": [{"key": "X", "value": "1"}]}}),
                ),
                plugin(
                    "20-v",
                    json!({"events": ["ValidateContainerAdjustment"],
                                       "reject": true, "reason": "not allowed"}),
                ),
            ],
            external: false,
            raw: false,
            norms: &[Norm::ShutdownOnStop18],
        },
        &[],
    );
}

#[test]
fn plugin_errors_abort_the_call() {
    differential(
        Case {
            name: "errors",
            scenario: scenario(every_event(2)),
            plugins: vec![
                plugin(
                    "10-a",
                    json!({"error": {
                    "RunPodSandbox": "no pods today", "UpdatePodSandbox": "no pod updates",
                    "CreateContainer": "no containers", "UpdateContainer": "no updates",
                    "StopContainer": "refusing to stop", "PostStartContainer": "late"}}),
                ),
                plugin("20-b", json!({})),
            ],
            external: false,
            raw: false,
            norms: &[Norm::ShutdownOnStop18, Norm::TeardownReachesEveryPlugin24],
        },
        &[],
    );
}

#[test]
fn a_plugin_beyond_the_request_timeout_or_crashing_is_dropped() {
    let mut sc = scenario(every_event(3));
    sc["request_timeout_ms"] = json!(500);
    differential(
        Case {
            name: "timeout and crash",
            scenario: sc,
            plugins: vec![
                plugin("10-slow", json!({"delay_ms": {"StartContainer": 2000}})),
                plugin("20-crash", json!({"exit": {"UpdateContainer": 3}})),
                plugin("30-ok", json!({})),
            ],
            external: false,
            raw: false,
            norms: &[Norm::ShutdownOnStop18],
        },
        &[],
    );
}

#[test]
fn unsolicited_updates_including_failed_ones() {
    let evict = json!({"container_id": "ctr1", "reason": "unsolicited"});
    let mut steps = every_event(1);
    steps.insert(
        8,
        json!({"op": "wait_updates", "count": 1, "timeout_ms": 20000}),
    );
    differential(
        Case {
            name: "unsolicited",
            scenario: scenario(steps),
            plugins: vec![plugin(
                "10-u",
                json!({"unsolicited": [{
                "after_event": "PostStartContainer",
                "updates": [cpu_update("ctr1", 5), cpu_update("ctr2", 6), cpu_update("ctr-x", 7)],
                "evict": [evict.clone()]}]}),
            )],
            external: false,
            raw: false,
            norms: &[Norm::EvictionsReturned15, Norm::ShutdownOnStop18],
        },
        &[evict],
    );
}

#[test]
fn external_plugins_every_event() {
    differential(
        Case {
            name: "external",
            scenario: scenario(every_event(2)),
            plugins: vec![
                plugin(
                    "10-a",
                    json!({"adjust": {"annotations": {"x": "a"}},
                                       "update": {"Synchronize": [cpu_update("ctr1", 11)]}}),
                ),
                plugin(
                    "20-b",
                    json!({"adjust": {"env": [{"key": "B", "value": "b"}]},
                                       "update": {"Synchronize": [cpu_update("ctr2", 12)]}}),
                ),
            ],
            external: true,
            raw: false,
            norms: &[Norm::ShutdownOnStop18],
        },
        &[],
    );
}

#[test]
fn old_plugin_gets_notifications_by_state_change() {
    let (_, rs) = differential(
        Case {
            name: "old plugin",
            scenario: scenario(every_event(2)),
            plugins: vec![
                old_plugin(
                    "10-old",
                    json!({"adjust": {"annotations": {"old": "yes"}},
                                             "update": {"StopContainer": [cpu_update("ctr1", 3)]}}),
                ),
                plugin(
                    "20-new",
                    json!({"adjust": {"env": [{"key": "NEW", "value": "1"}]}}),
                ),
            ],
            external: false,
            raw: false,
            norms: &[Norm::ShutdownOnStop18],
        },
        &[],
    );
    let rpcs: Vec<_> = rs.logs["10-old"]
        .iter()
        .filter(|e| e["event"] == "RunPodSandbox" || e["event"] == "PostStartContainer")
        .map(|e| e["rpc"].clone())
        .collect();
    assert_eq!(rpcs, [json!("StateChange"), json!("StateChange")]);
}

/// 600 containers of 8 KiB each: the Synchronize is over 4 MiB and split.
fn big_scenario(wait: usize) -> Value {
    let filler = "x".repeat(8 * 1024);
    let ctrs: Vec<Value> = (0..600)
        .map(|i| {
            json!({"id": format!("big{i}"), "pod_sandbox_id": "pod0", "name": format!("big{i}"),
                        "state": 3, "env": [format!("FILL={filler}")]})
        })
        .collect();
    // No pod: with one, the reference cannot split (see the [9] test below).
    json!({
        "containers": ctrs,
        "steps": [
            {"op": "wait_plugins", "count": wait, "timeout_ms": 30000},
            {"op": "StopContainer", "container": "big7"}
        ]
    })
}

#[test]
fn split_synchronize_over_4_mib() {
    for external in [false, true] {
        let (go, _) = differential(
            Case {
                name: if external {
                    "split sync, external"
                } else {
                    "split sync, pre-installed"
                },
                scenario: big_scenario(1),
                plugins: vec![plugin(
                    "10-big",
                    json!({
                    "update": {"Synchronize": [cpu_update("big3", 3)]}}),
                )],
                external,
                raw: false,
                norms: &[Norm::ShutdownOnStop18],
            },
            &[],
        );
        let sync = &go.doc["synchronize"];
        let last = &sync[sync.as_array().unwrap().len() - 1];
        assert_eq!(last["containers"], 600);
        let entry = go.logs["10-big"]
            .iter()
            .find(|e| e["event"] == "Synchronize")
            .unwrap();
        assert_eq!(entry["containers"].as_array().unwrap().len(), 600);
    }
}

#[test]
fn raw_results_every_event() {
    // Unstripped results: the merged replies byte for byte in JSON form,
    // including the empty parts both adaptations put in ([6]).
    differential(
        Case {
            name: "raw",
            scenario: scenario(every_event(2)),
            plugins: vec![
                plugin(
                    "10-a",
                    json!({"adjust": {"annotations": {"x": "a"},
                                       "linux": {"resources": {"memory": {"limit": {"value": 100000}}}}},
                                       "update": {"StopContainer": [cpu_update("ctr1", 9)]}}),
                ),
                plugin(
                    "20-b",
                    json!({"adjust": {"env": [{"key": "B", "value": "b"}]}}),
                ),
            ],
            external: false,
            raw: true,
            norms: &[Norm::NoEmptyUpdateEntry8, Norm::ShutdownOnStop18],
        },
        &[],
    );
}

/// [9] With a pod in the table, the reference's split synchronization can
/// shrink the pods per message to zero and then never finish: the plugin is
/// dropped after the request timeout. Ours sizes the chunks from the encoded
/// lengths and synchronizes. Checked as what it is, not normalized away.
#[test]
fn split_synchronize_with_a_pod_only_ours_completes() {
    let mut sc = big_scenario(1);
    sc["pods"] = pods();
    sc["containers"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .for_each(|c| c["pod_sandbox_id"] = json!("pod0"));
    // Generous for ours under a loaded machine; the reference fails anyway.
    sc["request_timeout_ms"] = json!(10000);
    sc["steps"] = json!([{"op": "wait_plugins", "count": 1, "timeout_ms": 20000}]);
    let case = Case {
        name: "[9] split sync",
        scenario: sc,
        plugins: vec![plugin("10-big", json!({}))],
        external: false,
        raw: false,
        norms: &[],
    };
    let base = tempfile::tempdir().unwrap();
    let go = run_on(Rt::Go, &case, base.path());
    let rs = run_on(Rt::Rust, &case, base.path());
    assert_eq!(
        go.doc["steps"][0]["error"], "timed out waiting for 1 synchronized plugins (have 0)",
        "the reference fails here; if it stops failing, [9] needs revisiting"
    );
    assert_eq!(rs.doc["steps"][0]["error"], "", "{}", rs.stderr);
    let entry = rs.logs["10-big"]
        .iter()
        .find(|e| e["event"] == "Synchronize")
        .unwrap();
    assert_eq!(entry["pods"].as_array().unwrap().len(), 1);
    assert_eq!(entry["containers"].as_array().unwrap().len(), 600);
}
