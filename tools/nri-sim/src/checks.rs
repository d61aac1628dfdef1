//! Evaluation of `expect` blocks against a step's report and a container's
//! adjusted spec.

use serde_json::{json, Value};

use crate::report::{CheckReport, StepReport};
use crate::scenario::{ResourcesSpec, StepExpect};

/// Whether the full plugin name `full` (`10-foo`) is `wanted` (`10-foo` or
/// `foo`).
pub fn plugin_matches(full: &str, wanted: &str) -> bool {
    full == wanted || full.split_once('-').is_some_and(|(_, base)| base == wanted)
}

fn check(check: String, ok: bool, found: impl FnOnce() -> String) -> CheckReport {
    CheckReport {
        check,
        ok,
        found: (!ok).then(found),
    }
}

fn quoted_list(items: impl IntoIterator<Item = String>) -> String {
    let v: Vec<String> = items.into_iter().collect();
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

/// The checks of `e` that are about the step itself.
pub fn step_checks(e: &StepExpect, step: &StepReport) -> Vec<CheckReport> {
    let mut out = Vec::new();
    if let Some(sub) = &e.error {
        out.push(check(
            format!("the step fails with an error containing {sub:?}"),
            step.error
                .as_deref()
                .is_some_and(|err| err.contains(sub.as_str())),
            || match &step.error {
                Some(err) => format!("error: {err}"),
                None => "the step succeeded".into(),
            },
        ));
    }
    let called = || {
        quoted_list(
            step.calls
                .iter()
                .map(|c| format!("{} ({})", c.plugin, c.event)),
        )
    };
    for p in &e.called {
        out.push(check(
            format!("plugin {p} is called"),
            step.calls.iter().any(|c| plugin_matches(&c.plugin, p)),
            || format!("called: {}", called()),
        ));
    }
    for p in &e.not_called {
        out.push(check(
            format!("plugin {p} is not called"),
            !step.calls.iter().any(|c| plugin_matches(&c.plugin, p)),
            || format!("called: {}", called()),
        ));
    }
    for p in &e.plugin_failures {
        out.push(check(
            format!("plugin {p} fails"),
            step.plugin_failures
                .iter()
                .any(|f| plugin_matches(&f.plugin, p)),
            || "it did not fail".into(),
        ));
    }
    let applied = |kind: &str| {
        quoted_list(
            step.updates
                .iter()
                .filter(|u| u.kind == kind)
                .map(|u| u.container.clone()),
        )
    };
    for c in &e.updated {
        out.push(check(
            format!("container {c} is updated"),
            step.updates
                .iter()
                .any(|u| u.kind == "update" && &u.container == c && u.error.is_none()),
            || format!("updated: {}", applied("update")),
        ));
    }
    for c in &e.evicted {
        out.push(check(
            format!("container {c} is evicted"),
            step.updates
                .iter()
                .any(|u| u.kind == "eviction" && &u.container == c && u.error.is_none()),
            || format!("evicted: {}", applied("eviction")),
        ));
    }
    for (what, plugin) in &e.owners {
        let (field, key) = match what.split_once('/') {
            Some((f, k)) => (f, Some(k)),
            None => (what.as_str(), None),
        };
        let field_name = match field.to_ascii_lowercase().as_str() {
            "annotations" | "annotation" => "Annotations".to_string(),
            "env" => "Env".into(),
            "mounts" | "mount" => "Mounts".into(),
            "hooks" => "OciHooks".into(),
            _ => field.to_string(),
        };
        let owner = step
            .changes
            .iter()
            .find(|c| c.field.eq_ignore_ascii_case(&field_name) && c.key.as_deref() == key);
        out.push(check(
            format!("{what} is set by plugin {plugin}"),
            owner.is_some_and(|o| o.plugin.split(',').any(|p| plugin_matches(p, plugin))),
            || match owner {
                Some(o) => format!("owned by {}", o.plugin),
                None => "no plugin set it".into(),
            },
        ));
    }
    out
}

fn render(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => "absent".into(),
        Some(v) => v.to_string(),
    }
}

fn resource_pointers(r: &ResourcesSpec) -> Vec<(String, Value)> {
    let mut v = Vec::new();
    let base = "/linux/resources";
    if let Some(x) = r.memory {
        v.push((format!("{base}/memory/limit"), json!(x)));
    }
    if let Some(x) = r.memory_reservation {
        v.push((format!("{base}/memory/reservation"), json!(x)));
    }
    if let Some(x) = r.memory_swap {
        v.push((format!("{base}/memory/swap"), json!(x)));
    }
    if let Some(x) = r.cpu_shares {
        v.push((format!("{base}/cpu/shares"), json!(x)));
    }
    if let Some(x) = r.cpu_quota {
        v.push((format!("{base}/cpu/quota"), json!(x)));
    }
    if let Some(x) = r.cpu_period {
        v.push((format!("{base}/cpu/period"), json!(x)));
    }
    if let Some(x) = &r.cpuset_cpus {
        v.push((format!("{base}/cpu/cpus"), json!(x)));
    }
    if let Some(x) = &r.cpuset_mems {
        v.push((format!("{base}/cpu/mems"), json!(x)));
    }
    if let Some(x) = r.pids {
        v.push((format!("{base}/pids/limit"), json!(x)));
    }
    for (k, x) in &r.unified {
        v.push((
            format!("{base}/unified/{}", k.replace('~', "~0").replace('/', "~1")),
            json!(x),
        ));
    }
    v
}

/// The spec checks of `e` for container `name` with `spec` in `state`.
pub fn spec_checks(e: &StepExpect, name: &str, spec: &Value, state: &str) -> Vec<CheckReport> {
    let mut out = Vec::new();
    for (k, want) in &e.annotations {
        let found = spec.get("annotations").and_then(|a| a.get(k));
        match want {
            Some(v) => out.push(check(
                format!("{name}: annotation {k:?} = {v:?}"),
                found.and_then(Value::as_str) == Some(v.as_str()),
                || render(found),
            )),
            None => out.push(check(
                format!("{name}: no annotation {k:?}"),
                found.is_none(),
                || render(found),
            )),
        }
    }
    let env: Vec<&str> = spec
        .pointer("/process/env")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for (k, want) in &e.env {
        let prefix = format!("{k}=");
        let found: Vec<&str> = env
            .iter()
            .copied()
            .filter(|e| e.starts_with(&prefix))
            .collect();
        let shown = || {
            if found.is_empty() {
                "absent".to_string()
            } else {
                found.join(", ")
            }
        };
        match want {
            Some(v) => out.push(check(
                format!("{name}: env {k}={v}"),
                found.contains(&format!("{k}={v}").as_str()),
                shown,
            )),
            None => out.push(check(
                format!("{name}: no env {k}"),
                found.is_empty(),
                shown,
            )),
        }
    }
    let mounts: Vec<&str> = spec
        .get("mounts")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|m| m.get("destination").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default();
    for m in &e.mounts {
        out.push(check(
            format!("{name}: mount at {m}"),
            mounts.contains(&m.as_str()),
            || format!("mounts: {}", mounts.join(", ")),
        ));
    }
    let hooks: Vec<&str> = spec
        .get("hooks")
        .and_then(Value::as_object)
        .map(|o| {
            o.values()
                .filter_map(Value::as_array)
                .flatten()
                .filter_map(|h| h.get("path").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default();
    for h in &e.hooks {
        out.push(check(
            format!("{name}: hook {h}"),
            hooks.contains(&h.as_str()),
            || {
                format!(
                    "hooks: {}",
                    quoted_list(hooks.iter().map(|s| s.to_string()))
                )
            },
        ));
    }
    let mut pointers: Vec<(String, Value)> = e
        .resources
        .as_ref()
        .map(resource_pointers)
        .unwrap_or_default();
    pointers.extend(e.spec.iter().map(|(k, v)| (k.clone(), v.clone())));
    for (ptr, want) in pointers {
        let found = spec.pointer(&ptr);
        let ok = match &want {
            Value::Null => found.is_none(),
            w => found == Some(w),
        };
        out.push(check(
            format!("{name}: {ptr} = {}", render(Some(&want))),
            ok,
            || render(found),
        ));
    }
    if let Some(s) = &e.state {
        out.push(check(
            format!("{name}: state {s}"),
            s.eq_ignore_ascii_case(state),
            || state.to_string(),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{CallReport, ChangeReport};

    #[test]
    fn spec_checks_report_what_was_found() {
        let spec = json!({
            "annotations": {"a": "1"},
            "process": {"env": ["X=1"]},
            "mounts": [{"destination": "/data"}],
            "hooks": {"prestart": [{"path": "/bin/hook"}]},
            "linux": {"resources": {"memory": {"limit": 1024}}}
        });
        let e = StepExpect {
            annotations: [
                ("a".to_string(), Some("2".to_string())),
                ("b".to_string(), None),
            ]
            .into(),
            env: [("X".to_string(), Some("1".to_string()))].into(),
            mounts: vec!["/data".into(), "/nope".into()],
            hooks: vec!["/bin/hook".into()],
            resources: Some(ResourcesSpec {
                memory: Some(1024),
                ..Default::default()
            }),
            spec: [("/process/cwd".to_string(), Value::Null)].into(),
            state: Some("running".into()),
            ..Default::default()
        };
        let r = spec_checks(&e, "app", &spec, "created");
        let failed: Vec<_> = r.iter().filter(|c| !c.ok).collect();
        assert_eq!(failed.len(), 3, "{r:#?}");
        assert_eq!(failed[0].check, "app: annotation \"a\" = \"2\"");
        assert_eq!(failed[0].found.as_deref(), Some("\"1\""));
        assert!(failed[1].check.contains("/nope"));
        assert_eq!(failed[2].found.as_deref(), Some("created"));
    }

    #[test]
    fn step_checks_cover_errors_calls_and_owners() {
        let step = StepReport {
            error: Some("plugins \"20-b\" and \"10-a\" both tried to set MemLimit ".into()),
            calls: vec![CallReport {
                plugin: "10-a".into(),
                event: "CreateContainer".into(),
                error: None,
                updates: 0,
                evictions: 0,
            }],
            changes: vec![ChangeReport {
                plugin: "10-a".into(),
                field: "Annotations".into(),
                key: Some("k".into()),
            }],
            ..Default::default()
        };
        let e = StepExpect {
            error: Some("both tried to set".into()),
            called: vec!["a".into()],
            not_called: vec!["10-a".into()],
            owners: [("annotations/k".to_string(), "a".to_string())].into(),
            ..Default::default()
        };
        let r = step_checks(&e, &step);
        assert_eq!(
            r.iter().map(|c| c.ok).collect::<Vec<_>>(),
            [true, true, false, true]
        );
        assert!(plugin_matches("10-a", "a") && !plugin_matches("10-ab", "a"));
    }
}
