//! Random plugin pools (one per batch) and random cases (one container
//! each) with the behaviour of every plugin for that container.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};

use super::fields::{self, ADJUST_FIELDS, MAP_FIELDS, UPDATE_FIELDS};
use super::prng::Prng;

/// Container events a pool plugin may subscribe to.
pub const CONTAINER_EVENTS: &[&str] = &[
    "CreateContainer",
    "UpdateContainer",
    "StopContainer",
    "StartContainer",
    "RemoveContainer",
];

/// The validation event.
pub const VALIDATE: &str = "ValidateContainerAdjustment";

/// Containers that exist from the start (update targets other than the
/// case's own container). `bg2` is listed in `fail_updates`; `gone` is in no
/// table, so updates of it fail.
pub const OTHER_TARGETS: &[&str] = &["bg0", "bg1", "bg2", "gone"];

const NAMES: &[&str] = &["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta"];

/// One plugin process of a batch.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolPlugin {
    /// Two-digit index.
    pub idx: String,
    /// Base name.
    pub name: String,
    /// Subscribed events.
    pub events: Vec<&'static str>,
    /// Updates returned from Synchronize.
    pub sync_updates: Vec<Value>,
    /// An unsolicited `UpdateContainers` request made after start-up.
    pub unsolicited: Option<Value>,
}

impl PoolPlugin {
    /// `"<idx>-<name>"`, as the runtime names it.
    pub fn full_name(&self) -> String {
        format!("{}-{}", self.idx, self.name)
    }

    /// Whether it subscribed to the event.
    pub fn has(&self, event: &str) -> bool {
        self.events.contains(&event)
    }
}

/// The plugins of one batch, sorted by index (the order both runtimes call
/// them in).
#[derive(Debug, Clone, PartialEq)]
pub struct Pool {
    /// The plugins, in index order.
    pub plugins: Vec<PoolPlugin>,
}

impl Pool {
    /// A random pool of 2–6 plugins with distinct indices and names.
    pub fn generate(p: &mut Prng) -> Self {
        let n = p.range(2, 6) as usize;
        let mut idx: Vec<usize> = p.distinct(100, n);
        idx.sort_unstable();
        let names = p.distinct(NAMES.len(), n);
        let mut order: Vec<usize> = (0..n).collect();
        p.shuffle(&mut order);
        let mut unsolicited_left = p.chance(40);
        let plugins = idx
            .iter()
            .zip(order)
            .map(|(i, o)| {
                let mut events = Vec::new();
                for (ev, pct) in CONTAINER_EVENTS.iter().zip([90, 70, 60, 30, 30]) {
                    if p.chance(pct) {
                        events.push(*ev);
                    }
                }
                if p.chance(30) || events.is_empty() {
                    events.push(VALIDATE);
                }
                let mut sync_updates = Vec::new();
                if p.chance(25) {
                    let target = *p.pick(&OTHER_TARGETS[..3]);
                    sync_updates.push(update_of(p, target, false));
                }
                let unsolicited = if unsolicited_left && p.chance(50) {
                    unsolicited_left = false;
                    let target = *p.pick(OTHER_TARGETS);
                    let mut u = json!({
                        "after_event": "",
                        "updates": [update_of(p, target, false)],
                    });
                    if p.chance(50) {
                        fields::put(
                            &mut u,
                            &["evict"],
                            json!([{ "container_id": "bg1", "reason": "pressure" }]),
                        );
                    }
                    Some(u)
                } else {
                    None
                };
                PoolPlugin {
                    idx: format!("{i:02}"),
                    name: NAMES[names[o]].to_owned(),
                    events,
                    sync_updates,
                    unsolicited,
                }
            })
            .collect();
        Self { plugins }
    }

    /// Plugins that validate.
    pub fn validators(&self) -> impl Iterator<Item = (usize, &PoolPlugin)> {
        self.plugins
            .iter()
            .enumerate()
            .filter(|(_, p)| p.has(VALIDATE))
    }
}

/// What one plugin does for the container of a case.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Behavior {
    /// The adjustment returned by CreateContainer.
    pub adjust: Option<Value>,
    /// Updates returned per event.
    pub updates: BTreeMap<&'static str, Vec<Value>>,
    /// Evictions returned per event (CreateContainer, UpdateContainer).
    pub evict: BTreeMap<&'static str, Vec<Value>>,
    /// Handler errors per event.
    pub error: BTreeMap<&'static str, String>,
    /// Rejection by the validator, with the reason.
    pub reject: Option<String>,
}

impl Behavior {
    /// The `by_container` entry of the reference plugin's configuration.
    pub fn to_config(&self) -> Value {
        let mut v = json!({});
        if let Some(a) = &self.adjust {
            fields::put(&mut v, &["adjust"], a.clone());
        }
        for (ev, u) in &self.updates {
            fields::put(&mut v, &["update", ev], Value::Array(u.clone()));
        }
        for (ev, e) in &self.evict {
            fields::put(&mut v, &["evict", ev], Value::Array(e.clone()));
        }
        for (ev, msg) in &self.error {
            fields::put(&mut v, &["error", ev], json!(msg));
        }
        if let Some(reason) = &self.reject {
            fields::put(&mut v, &["reject"], json!(true));
            fields::put(&mut v, &["reason"], json!(reason));
        }
        v
    }

    fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// One random case: a container, the plugins that act on it and the
/// lifecycle steps it goes through.
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    /// Case number (global for the seed).
    pub number: u64,
    /// Container id and name (`c<number>`).
    pub container: String,
    /// Pod of the container.
    pub pod: &'static str,
    /// The container definition in the scenario.
    pub definition: Value,
    /// Behaviour per pool plugin (pool position → behaviour).
    pub behaviors: BTreeMap<usize, Behavior>,
    /// Steps after CreateContainer.
    pub start: bool,
    /// `linux_resources` of an UpdateContainer step (`Some(null)`: step
    /// without resources).
    pub update: Option<Value>,
    /// StopContainer step.
    pub stop: bool,
    /// RemoveContainer step.
    pub remove: bool,
    /// Adjustment fields touched, for the coverage summary.
    pub fields: Vec<&'static str>,
}

/// The container name of case `number`.
pub fn container_name(number: u64) -> String {
    format!("c{number:06}")
}

/// The case number of a container name made by [`container_name`].
pub fn case_of_container(name: &str) -> Option<u64> {
    name.strip_prefix('c')?.parse().ok()
}

impl Case {
    /// Generates case `number` for `pool`.
    pub fn generate(p: &mut Prng, pool: &Pool, number: u64) -> Self {
        let container = container_name(number);
        let pod = *p.pick(&["pod0", "pod1"]);
        let definition = definition(p, &container, pod);
        let n = pool.plugins.len();
        let k = (p.range(1, 4) as usize).min(n);
        let chosen = p.distinct(n, k);
        let mut behaviors = BTreeMap::new();
        let mut used = Vec::new();
        for (rank, &i) in chosen.iter().enumerate() {
            let plugin = &pool.plugins[i];
            let tag = format!("{}{}", plugin.name, rank);
            let mut b = Behavior::default();
            if p.chance(85) {
                let mut adj = json!({});
                for _ in 0..p.range(1, 5) {
                    let f = *p.pick(ADJUST_FIELDS);
                    fields::adjust_field(p, &mut adj, f, &tag);
                    used.push(f);
                }
                b.adjust = Some(adj);
            }
            if p.chance(30) {
                b.updates
                    .insert("CreateContainer", updates(p, &container, true));
            }
            if p.chance(30) {
                b.updates
                    .insert("UpdateContainer", updates(p, &container, false));
            }
            if p.chance(20) {
                b.updates
                    .insert("StopContainer", updates(p, &container, false));
            }
            for ev in ["CreateContainer", "UpdateContainer"] {
                if p.chance(8) {
                    let target = if p.chance(50) {
                        container.as_str()
                    } else {
                        "bg0"
                    };
                    b.evict.insert(
                        ev,
                        vec![json!({ "container_id": target, "reason": format!("evict-{tag}") })],
                    );
                }
            }
            if plugin.has(super::case::VALIDATE) && p.chance(40) {
                let reason = if p.chance(10) {
                    String::new()
                } else {
                    format!("no-{tag}")
                };
                b.reject = Some(reason);
            }
            behaviors.insert(i, b);
        }
        if p.chance(10) {
            let i = *p.pick(&chosen);
            let ev = *p.pick(CONTAINER_EVENTS);
            behaviors
                .entry(i)
                .or_default()
                .error
                .insert(ev, format!("{container}: {ev} failed"));
        }
        one_shared_map_key(&mut behaviors);
        one_pids_update_per_target(&mut behaviors);
        behaviors.retain(|_, b| !b.is_empty());

        let update = if p.chance(60) {
            let mut res = json!({});
            for _ in 0..p.below(4) {
                let f = *p.pick(UPDATE_FIELDS);
                fields::resource_field(p, &mut res, &[], f);
            }
            Some(res)
        } else {
            None
        };
        let stop = p.chance(50);
        Self {
            number,
            container,
            pod,
            definition,
            behaviors,
            start: p.chance(50),
            update,
            stop,
            remove: stop && p.chance(60),
            fields: used,
        }
    }

    /// The scenario steps of the case.
    pub fn steps(&self) -> Vec<Value> {
        let c = &self.container;
        let mut steps = vec![json!({ "op": "CreateContainer", "container": c })];
        if self.start {
            steps.push(json!({ "op": "StartContainer", "container": c }));
        }
        if let Some(res) = &self.update {
            let mut st = json!({ "op": "UpdateContainer", "container": c });
            if res.as_object().is_some_and(|o| !o.is_empty()) {
                fields::put(&mut st, &["linux_resources"], res.clone());
            }
            steps.push(st);
        }
        if self.stop {
            steps.push(json!({ "op": "StopContainer", "container": c }));
        }
        if self.remove {
            steps.push(json!({ "op": "RemoveContainer", "container": c }));
        }
        steps
    }

    /// Full names of the validators that reject this case's container, in
    /// plugin order.
    pub fn rejecting_validators(&self, pool: &Pool) -> Vec<(String, String)> {
        self.behaviors
            .iter()
            .filter_map(|(i, b)| {
                let plugin = pool.plugins.get(*i)?;
                let reason = b.reject.as_ref()?;
                plugin
                    .has(VALIDATE)
                    .then(|| (plugin.full_name(), reason.clone()))
            })
            .collect()
    }
}

/// The initial container: a few entries from the same pools as the
/// adjustments, so removals and replacements meet existing entries.
fn definition(p: &mut Prng, id: &str, pod: &str) -> Value {
    let mut c = json!({
        "id": id, "pod_sandbox_id": pod, "name": id, "state": 1,
        "args": ["sleep", "10"],
    });
    if p.chance(50) {
        fields::put(&mut c, &["env"], json!(["A=0", "PATH=/bin"]));
    }
    if p.chance(50) {
        fields::put(&mut c, &["annotations"], json!({ "a": "init" }));
    }
    if p.chance(40) {
        fields::put(
            &mut c,
            &["mounts"],
            json!([{ "destination": "/m1", "type": "bind", "source": "/init" }]),
        );
    }
    if p.chance(40) {
        fields::put(
            &mut c,
            &["linux", "devices"],
            json!([{ "path": "/dev/d1", "type": "c", "major": 1, "minor": 3 }]),
        );
    }
    if p.chance(40) {
        fields::put(
            &mut c,
            &["linux", "namespaces"],
            json!([{ "type": "network" }, { "type": "ipc" }]),
        );
    }
    if p.chance(30) {
        fields::put(
            &mut c,
            &["linux", "sysctl"],
            json!({ "kernel.shmmax": "1" }),
        );
    }
    if p.chance(40) {
        fields::put(
            &mut c,
            &["linux", "resources", "memory", "limit"],
            json!({ "value": 1 << 28 }),
        );
        fields::put(
            &mut c,
            &["linux", "resources", "cpu", "shares"],
            json!({ "value": 1024 }),
        );
    }
    c
}

/// 1–2 container updates for an event of `own` (`creating`: during its
/// creation, when updating it is an error the generator produces rarely).
fn updates(p: &mut Prng, own: &str, creating: bool) -> Vec<Value> {
    (0..p.range(1, 2))
        .map(|_| {
            let target = if p.chance(if creating { 8 } else { 45 }) {
                own.to_owned()
            } else {
                (*p.pick(OTHER_TARGETS)).to_owned()
            };
            let pids = p.chance(25);
            update_of(p, &target, pids)
        })
        .collect()
}

/// One container update of `target` touching 1–3 resource fields (rarely
/// none, or no `linux` part at all); `pids` may be added later.
pub fn update_of(p: &mut Prng, target: &str, pids: bool) -> Value {
    let mut u = json!({ "container_id": target });
    if p.chance(20) {
        fields::put(&mut u, &["ignore_failure"], json!(true));
    }
    if p.chance(4) {
        return u;
    }
    let res = ["linux", "resources"];
    for _ in 0..p.range(1, 3) {
        let f = *p.pick(UPDATE_FIELDS);
        fields::resource_field(p, &mut u, &res, f);
    }
    if fields::get(&u, &res).is_none() {
        fields::put(&mut u, &res, json!({}));
    }
    if pids {
        fields::resource_field(p, &mut u, &res, "pids");
    }
    u
}

/// Whether a key of the map field at `path` is one the merge claims:
/// every key but removal markers, except in `unified`, which knows no
/// removal markers (`-key` is claimed as a key of its own).
pub fn claimed_key(path: &[&str], key: &str) -> bool {
    !key.starts_with('-') || path.last() == Some(&"unified")
}

/// Go iterates map fields in random order, so when one plugin's map holds
/// two keys that conflict with earlier plugins, the key named in Go's
/// error is random. Keep at most one key per map field that more than one
/// plugin sets; drop the others from the later plugins.
fn one_shared_map_key(behaviors: &mut BTreeMap<usize, Behavior>) {
    for path in MAP_FIELDS {
        let mut seen: BTreeSet<String> = BTreeSet::new();
        let mut shared: Option<String> = None;
        for b in behaviors.values_mut() {
            let Some(adj) = b.adjust.as_mut() else {
                continue;
            };
            let Some(Value::Object(map)) = fields::get_mut(adj, path) else {
                continue;
            };
            let keys: Vec<String> = map
                .keys()
                .filter(|k| claimed_key(path, k))
                .cloned()
                .collect();
            for k in keys {
                if !seen.contains(&k) {
                    continue;
                }
                match &shared {
                    None => shared = Some(k.clone()),
                    Some(s) if *s == k => {}
                    Some(_) => {
                        map.remove(&k);
                    }
                }
            }
            seen.extend(map.keys().filter(|k| claimed_key(path, k)).cloned());
        }
    }
}

/// Decision [7]: nri-rs claims a pids limit asked for in an update, the
/// reference ignores it. Two claims of one target's pids (one event) would
/// conflict only in nri-rs, so at most one update per target and event
/// keeps its `pids`.
fn one_pids_update_per_target(behaviors: &mut BTreeMap<usize, Behavior>) {
    for ev in ["CreateContainer", "UpdateContainer", "StopContainer"] {
        let mut claimed: BTreeSet<String> = BTreeSet::new();
        for b in behaviors.values_mut() {
            let Some(list) = b.updates.get_mut(ev) else {
                continue;
            };
            for u in list.iter_mut() {
                let target = u["container_id"].as_str().unwrap_or_default().to_owned();
                let Some(Value::Object(res)) = fields::get_mut(u, &["linux", "resources"]) else {
                    continue;
                };
                if res.contains_key("pids") && !claimed.insert(target) {
                    res.remove("pids");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cases(seed: u64, n: u64) -> (Pool, Vec<Case>) {
        let mut p = Prng::new(seed);
        let pool = Pool::generate(&mut p);
        let cases = (0..n).map(|i| Case::generate(&mut p, &pool, i)).collect();
        (pool, cases)
    }

    #[test]
    fn pools_have_distinct_sorted_indices() {
        for seed in 0..50 {
            let (pool, _) = cases(seed, 0);
            let idx: Vec<&str> = pool.plugins.iter().map(|p| p.idx.as_str()).collect();
            assert!(idx.windows(2).all(|w| w[0] < w[1]), "{idx:?}");
            let names: BTreeSet<&str> = pool.plugins.iter().map(|p| p.name.as_str()).collect();
            assert_eq!(names.len(), pool.plugins.len());
            assert!(
                pool.plugins
                    .iter()
                    .filter(|p| p.unsolicited.is_some())
                    .count()
                    <= 1
            );
        }
    }

    #[test]
    fn generation_is_deterministic() {
        assert_eq!(cases(9, 20), cases(9, 20));
        assert_ne!(cases(9, 20).1, cases(10, 20).1);
    }

    #[test]
    fn map_fields_share_at_most_one_key_per_case() {
        for seed in 0..20 {
            let (_, cs) = cases(seed, 100);
            for c in cs {
                for path in MAP_FIELDS {
                    let mut count: BTreeMap<String, usize> = BTreeMap::new();
                    for b in c.behaviors.values() {
                        let Some(Value::Object(m)) =
                            b.adjust.as_ref().and_then(|a| fields::get(a, path))
                        else {
                            continue;
                        };
                        for k in m.keys().filter(|k| claimed_key(path, k)) {
                            *count.entry(k.clone()).or_default() += 1;
                        }
                    }
                    assert!(
                        count.values().filter(|n| **n > 1).count() <= 1,
                        "{path:?}: {count:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn pids_updates_are_never_claimed_twice() {
        for seed in 0..20 {
            let (_, cs) = cases(seed, 100);
            for c in cs {
                for ev in ["CreateContainer", "UpdateContainer", "StopContainer"] {
                    let mut targets = BTreeSet::new();
                    for u in c
                        .behaviors
                        .values()
                        .filter_map(|b| b.updates.get(ev))
                        .flatten()
                    {
                        if fields::get(u, &["linux", "resources", "pids"]).is_some() {
                            assert!(targets.insert(u["container_id"].to_string()), "{u}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn container_names_round_trip() {
        assert_eq!(case_of_container(&container_name(1234)), Some(1234));
        assert_eq!(case_of_container("bg0"), None);
    }

    #[test]
    fn behavior_config_uses_the_plugin_keys() {
        let mut b = Behavior::default();
        b.error.insert("StopContainer", "x".into());
        b.reject = Some("why".into());
        assert_eq!(
            b.to_config(),
            json!({"error": {"StopContainer": "x"}, "reject": true, "reason": "why"})
        );
    }
}
