//! `nri-sim convert`: a scenario from an `nri-tap` recording. The pods and
//! containers come from the plugin's Synchronize messages (declared
//! `existing: true`) and from the pod and container payloads of its
//! events; the steps are its events in order, so that `nri-sim run` drives
//! the same lifecycle again.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde_json::Value;
use serde_norway::{Mapping, Value as Yaml};

use crate::recording::{RecordingError, Session};

fn s(v: &Value, k: &str) -> String {
    v.get(k)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn string_map(v: &Value, k: &str) -> Mapping {
    let mut m = Mapping::new();
    if let Some(Value::Object(o)) = v.get(k) {
        let sorted: BTreeMap<&String, &Value> = o.iter().collect();
        for (key, val) in sorted {
            if let Some(val) = val.as_str() {
                m.insert(key.as_str().into(), val.into());
            }
        }
    }
    m
}

fn put(m: &mut Mapping, k: &str, v: impl Into<Yaml>) {
    m.insert(k.into(), v.into());
}

/// Scenario resources (`resources:`) from NRI `LinuxResources` JSON.
fn resources(r: &Value) -> Option<Mapping> {
    let num = |p: &str| r.pointer(p).and_then(Value::as_i64);
    let text = |p: &str| {
        r.pointer(p)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    let mut m = Mapping::new();
    for (key, p) in [
        ("memory", "/memory/limit/value"),
        ("memory_reservation", "/memory/reservation/value"),
        ("memory_swap", "/memory/swap/value"),
        ("cpu_shares", "/cpu/shares/value"),
        ("cpu_quota", "/cpu/quota/value"),
        ("cpu_period", "/cpu/period/value"),
        ("pids", "/pids/limit"),
    ] {
        if let Some(n) = num(p).filter(|n| *n != 0) {
            put(&mut m, key, n);
        }
    }
    for (key, p) in [("cpuset_cpus", "/cpu/cpus"), ("cpuset_mems", "/cpu/mems")] {
        if let Some(t) = text(p) {
            put(&mut m, key, t);
        }
    }
    let unified = string_map(r, "unified");
    if !unified.is_empty() {
        put(&mut m, "unified", Yaml::Mapping(unified));
    }
    (!m.is_empty()).then_some(m)
}

#[derive(Default)]
struct Builder {
    /// Pod id -> (scenario name, entry).
    pods: Vec<(String, String, Mapping)>,
    /// Container id -> (scenario name, entry).
    ctrs: Vec<(String, String, Mapping)>,
    steps: Vec<Yaml>,
    /// Pods running, containers created (by id).
    running_pods: Vec<String>,
    created: Vec<String>,
    last: Option<(String, String)>,
    notes: Vec<String>,
}

impl Builder {
    fn pod_name(&self, id: &str) -> Option<String> {
        self.pods
            .iter()
            .find(|(i, _, _)| i == id)
            .map(|(_, n, _)| n.clone())
    }

    fn ctr_name(&self, id: &str) -> Option<String> {
        self.ctrs
            .iter()
            .find(|(i, _, _)| i == id)
            .map(|(_, n, _)| n.clone())
    }

    fn add_pod(&mut self, p: &Value, existing: bool) -> Option<String> {
        let id = s(p, "id");
        if id.is_empty() {
            return None;
        }
        if let Some(n) = self.pod_name(&id) {
            return Some(n);
        }
        let mut name = s(p, "name");
        if name.is_empty() || self.pods.iter().any(|(_, n, _)| *n == name) {
            name = id.clone();
        }
        let mut m = Mapping::new();
        put(&mut m, "name", name.as_str());
        if id != name {
            put(&mut m, "id", id.as_str());
        }
        let uid = s(p, "uid");
        if !uid.is_empty() && uid != format!("uid-{name}") {
            put(&mut m, "uid", uid);
        }
        let ns = s(p, "namespace");
        if !ns.is_empty() && ns != "default" {
            put(&mut m, "namespace", ns);
        }
        for k in ["labels", "annotations"] {
            let v = string_map(p, k);
            if !v.is_empty() {
                put(&mut m, k, Yaml::Mapping(v));
            }
        }
        let handler = s(p, "runtime_handler");
        if !handler.is_empty() {
            put(&mut m, "runtime_handler", handler);
        }
        if existing {
            put(&mut m, "existing", true);
            self.running_pods.push(id.clone());
        }
        self.pods.push((id, name.clone(), m));
        Some(name)
    }

    fn add_ctr(&mut self, c: &Value, pod: Option<&Value>, existing: bool) -> Option<String> {
        let id = s(c, "id");
        if id.is_empty() {
            return None;
        }
        if let Some(n) = self.ctr_name(&id) {
            return Some(n);
        }
        if let Some(p) = pod {
            self.add_pod(p, existing);
        }
        let pod_id = s(c, "pod_sandbox_id");
        let Some(pod_name) = self.pod_name(&pod_id) else {
            self.notes.push(format!(
                "container {id}: its pod {pod_id:?} was never seen; left out"
            ));
            return None;
        };
        let mut name = s(c, "name");
        if name.is_empty() || self.ctrs.iter().any(|(_, n, _)| *n == name) {
            name = id.clone();
        }
        let mut m = Mapping::new();
        put(&mut m, "name", name.as_str());
        if id != name {
            put(&mut m, "id", id.as_str());
        }
        put(&mut m, "pod", pod_name);
        if let Some(Value::Array(args)) = c.get("args") {
            if !args.is_empty() {
                let args: Vec<Yaml> = args
                    .iter()
                    .filter_map(Value::as_str)
                    .map(Yaml::from)
                    .collect();
                put(&mut m, "args", Yaml::Sequence(args));
            }
        }
        if let Some(Value::Array(env)) = c.get("env") {
            let mut e = Mapping::new();
            for kv in env.iter().filter_map(Value::as_str) {
                let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                e.insert(k.into(), v.into());
            }
            if !e.is_empty() {
                put(&mut m, "env", Yaml::Mapping(e));
            }
        }
        for k in ["annotations", "labels"] {
            let v = string_map(c, k);
            if !v.is_empty() {
                put(&mut m, k, Yaml::Mapping(v));
            }
        }
        if let Some(r) = c.pointer("/linux/resources").and_then(resources) {
            put(&mut m, "resources", Yaml::Mapping(r));
        }
        if existing {
            put(&mut m, "existing", true);
            self.created.push(id.clone());
        }
        self.ctrs.push((id, name.clone(), m));
        Some(name)
    }

    fn step(&mut self, action: &str, target: &str, extra: Mapping) {
        let mut m = Mapping::new();
        put(&mut m, action, target);
        for (k, v) in extra {
            m.insert(k, v);
        }
        self.steps.push(Yaml::Mapping(m));
        self.last = Some((action.to_string(), target.to_string()));
    }

    /// A pod step; `follow_up` steps (Post...) only when the main one was
    /// not just written.
    fn pod_event(&mut self, req: &Value, action: &str, follow_up: bool) {
        let Some(p) = req.get("pod") else { return };
        let Some(name) = self.add_pod(p, false) else {
            return;
        };
        if follow_up && self.last == Some((action.to_string(), name.clone())) {
            return;
        }
        let id = s(p, "id");
        if action != "run_pod" && !self.running_pods.contains(&id) {
            self.step("run_pod", &name, Mapping::new());
            self.running_pods.push(id.clone());
        }
        let mut extra = Mapping::new();
        if action == "update_pod" {
            if let Some(r) = req.get("linux_resources").and_then(resources) {
                put(&mut extra, "resources", Yaml::Mapping(r));
            }
            if let Some(r) = req.get("overhead_linux_resources").and_then(resources) {
                put(&mut extra, "overhead", Yaml::Mapping(r));
            }
        }
        match action {
            "run_pod" if !self.running_pods.contains(&id) => self.running_pods.push(id),
            "remove_pod" => self.running_pods.retain(|p| *p != id),
            _ => {}
        }
        self.step(action, &name, extra);
    }

    fn ctr_event(&mut self, req: &Value, action: &str, follow_up: bool) {
        let Some(c) = req.get("container") else {
            return;
        };
        let Some(name) = self.add_ctr(c, req.get("pod"), false) else {
            return;
        };
        if follow_up && self.last == Some((action.to_string(), name.clone())) {
            return;
        }
        let id = s(c, "id");
        let pod_id = s(c, "pod_sandbox_id");
        if !self.created.contains(&id) {
            if !self.running_pods.contains(&pod_id) {
                if let Some(pod) = self.pod_name(&pod_id) {
                    self.step("run_pod", &pod, Mapping::new());
                    self.running_pods.push(pod_id);
                }
            }
            if action != "create" {
                self.step("create", &name, Mapping::new());
            }
            self.created.push(id.clone());
        }
        let mut extra = Mapping::new();
        if action == "update" {
            if let Some(r) = req.get("linux_resources").and_then(resources) {
                put(&mut extra, "resources", Yaml::Mapping(r));
            }
        }
        if action == "remove" {
            self.created.retain(|c| *c != id);
        }
        self.step(action, &name, extra);
    }
}

/// The scenario (YAML text) of `session`'s events; `source` names the
/// recording in the header comment.
pub fn scenario(session: &Session, source: &str) -> Result<String, RecordingError> {
    use nri_api::service::plugin as pm;
    let plugin = session.plugin.clone().unwrap_or_default();
    let mut b = Builder::default();
    let mut runtime = None;
    let mut config = String::new();
    for e in session.exchanges.iter().filter(|e| e.to_plugin) {
        let r = &e.request;
        match e.method.as_str() {
            pm::CONFIGURE => {
                runtime = Some((s(r, "runtime_name"), s(r, "runtime_version")));
                config = s(r, "config");
            }
            pm::SYNCHRONIZE => {
                for p in r
                    .get("pods")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    b.add_pod(p, true);
                }
                for c in r
                    .get("containers")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    b.add_ctr(c, None, true);
                }
            }
            pm::RUN_POD_SANDBOX => b.pod_event(r, "run_pod", false),
            pm::UPDATE_POD_SANDBOX => b.pod_event(r, "update_pod", false),
            pm::POST_UPDATE_POD_SANDBOX => b.pod_event(r, "update_pod", true),
            pm::STOP_POD_SANDBOX => b.pod_event(r, "stop_pod", false),
            pm::REMOVE_POD_SANDBOX => b.pod_event(r, "remove_pod", false),
            pm::CREATE_CONTAINER => b.ctr_event(r, "create", false),
            pm::POST_CREATE_CONTAINER | pm::VALIDATE_CONTAINER_ADJUSTMENT => {
                b.ctr_event(r, "create", true)
            }
            pm::START_CONTAINER => b.ctr_event(r, "start", false),
            pm::POST_START_CONTAINER => b.ctr_event(r, "start", true),
            pm::UPDATE_CONTAINER => b.ctr_event(r, "update", false),
            pm::POST_UPDATE_CONTAINER => b.ctr_event(r, "update", true),
            pm::STOP_CONTAINER => b.ctr_event(r, "stop", false),
            pm::REMOVE_CONTAINER => b.ctr_event(r, "remove", false),
            pm::SHUTDOWN => {}
            other => b.notes.push(format!(
                "line {}: {other} has no scenario step; left out",
                e.line
            )),
        }
    }
    let mut doc = Mapping::new();
    put(
        &mut doc,
        "description",
        format!(
            "Converted from {source}: the events {plugin} received (session {}).",
            session.id
        ),
    );
    if let Some((name, version)) = runtime.filter(|(n, _)| !n.is_empty()) {
        let mut m = Mapping::new();
        put(&mut m, "name", name);
        put(&mut m, "version", version);
        put(&mut doc, "runtime", Yaml::Mapping(m));
    }
    let list = |v: Vec<(String, String, Mapping)>| {
        Yaml::Sequence(v.into_iter().map(|(_, _, m)| Yaml::Mapping(m)).collect())
    };
    put(&mut doc, "pods", list(std::mem::take(&mut b.pods)));
    put(&mut doc, "containers", list(std::mem::take(&mut b.ctrs)));
    put(
        &mut doc,
        "steps",
        Yaml::Sequence(std::mem::take(&mut b.steps)),
    );
    let body =
        serde_norway::to_string(&Yaml::Mapping(doc)).map_err(|e| RecordingError::Select {
            path: source.to_string(),
            message: format!("cannot write the scenario: {e}"),
        })?;

    let mut out = String::new();
    let _ = writeln!(
        out,
        "# nri-sim scenario converted from {source} ({plugin}, session {}).",
        session.id
    );
    let _ = writeln!(out, "# Add the plugin(s) to run, e.g.:");
    let _ = writeln!(out, "#   plugins:");
    let (idx, base) = plugin.split_once('-').unwrap_or(("50", plugin.as_str()));
    let _ = writeln!(out, "#     - name: {base}");
    let _ = writeln!(out, "#       index: \"{idx}\"");
    let _ = writeln!(out, "#       command: [/path/to/{base}]");
    if !config.is_empty() {
        let _ = writeln!(
            out,
            "#       config: {}",
            serde_json::Value::from(config.as_str())
        );
    }
    for n in &b.notes {
        let _ = writeln!(out, "# note: {n}");
    }
    out.push_str(&body);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recording::Recording;

    #[test]
    fn events_become_steps_and_payloads_pods_and_containers() {
        let rec = r#"{"session":1,"plugin":"10-a","type":"request","dir":"runtime->plugin","conn":1,"stream":1,"method":"Configure","request":{"runtime_name":"rt","runtime_version":"v9","config":"k: v"}}
{"session":1,"plugin":"10-a","type":"request","dir":"runtime->plugin","conn":1,"stream":3,"method":"Synchronize","request":{"pods":[{"id":"p0","name":"old","namespace":"kube-system"}],"containers":[{"id":"c0","name":"c0","pod_sandbox_id":"p0"}]}}
{"session":1,"plugin":"10-a","type":"request","dir":"runtime->plugin","conn":1,"stream":5,"method":"PostCreateContainer","request":{"pod":{"id":"web","name":"web"},"container":{"id":"app","name":"app","pod_sandbox_id":"web","env":["A=1"],"linux":{"resources":{"memory":{"limit":{"value":1048576}}}}}}}
{"session":1,"plugin":"10-a","type":"request","dir":"runtime->plugin","conn":1,"stream":7,"method":"StopContainer","request":{"pod":{"id":"p0","name":"old"},"container":{"id":"c0","name":"c0","pod_sandbox_id":"p0"}}}
"#;
        let r = Recording::parse(rec, "r.jsonl").unwrap();
        let text = scenario(r.select(None, None).unwrap(), "r.jsonl").unwrap();
        let sc = crate::scenario::load_str(&text, "c.yaml", std::path::Path::new("."))
            .unwrap_or_else(|e| panic!("{e}\n{text}"));
        let steps: Vec<String> = sc.steps.iter().map(|s| s.action.to_string()).collect();
        assert_eq!(steps, ["run_pod web", "create app", "stop c0"], "{text}");
        assert_eq!(sc.runtime.name, "rt");
        assert!(sc.pods.iter().any(|p| p.name == "old" && p.existing));
        let app = sc.containers.iter().find(|c| c.name == "app").unwrap();
        assert_eq!(app.env["A"], "1");
        assert_eq!(app.resources.as_ref().unwrap().memory, Some(1048576));
        assert!(text.contains("config: \"k: v\""), "{text}");
    }
}
