//! A batch: one plugin pool and many cases, replayed as ONE scenario by
//! each runtime (every case has its own container; the plugins look up
//! their behaviour by container through `by_container`).

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use super::case::{Case, Pool};
use super::prng::Prng;
use crate::error::{HarnessError, Result};
use crate::files::write_json;

/// A generated batch.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    /// The seed it was generated from.
    pub seed: u64,
    /// Batch number.
    pub number: u64,
    /// The plugins.
    pub pool: Pool,
    /// The cases, in step order.
    pub cases: Vec<Case>,
}

impl Batch {
    /// Generates batch `number` of `seed` holding the cases `cases` (case
    /// numbers are global: case `k` is always generated the same way for a
    /// seed, whatever else runs with it, as long as the batch size is the
    /// same).
    pub fn generate(seed: u64, number: u64, cases: impl IntoIterator<Item = u64>) -> Self {
        let pool = Pool::generate(&mut Prng::derive(seed, &[number]));
        let cases = cases
            .into_iter()
            .map(|k| Case::generate(&mut Prng::derive(seed, &[number, k + 1]), &pool, k))
            .collect();
        Self {
            seed,
            number,
            pool,
            cases,
        }
    }

    /// The scenario document (see `interop/README.md`).
    pub fn scenario(&self) -> Value {
        let mut containers = vec![
            json!({"id": "bg0", "pod_sandbox_id": "pod0", "name": "bg0", "state": 3}),
            json!({"id": "bg1", "pod_sandbox_id": "pod0", "name": "bg1", "state": 3,
                   "linux": {"resources": {"cpu": {"shares": {"value": 512}}}}}),
            json!({"id": "bg2", "pod_sandbox_id": "pod1", "name": "bg2", "state": 3}),
        ];
        containers.extend(self.cases.iter().map(|c| c.definition.clone()));
        let mut steps = Vec::new();
        if self.pool.plugins.iter().any(|p| p.unsolicited.is_some()) {
            steps.push(json!({"op": "wait_updates", "count": 1, "timeout_ms": 10000}));
        }
        for c in &self.cases {
            steps.extend(c.steps());
        }
        steps.push(json!({"op": "stop"}));
        json!({
            "runtime": {"name": "nri-differential", "version": "v1.0.0"},
            "request_timeout_ms": 10000,
            "registration_timeout_ms": 10000,
            "pods": [
                {"id": "pod0", "name": "pod0", "uid": "uid0", "namespace": "default"},
                {"id": "pod1", "name": "pod1", "uid": "uid1", "namespace": "kube-system",
                 "labels": {"app": "x"}},
            ],
            "containers": containers,
            "fail_updates": ["bg2"],
            "steps": steps,
        })
    }

    /// The configuration of each pool plugin: `(file stem "NN-name", JSON)`.
    pub fn plugin_configs(&self) -> Vec<(String, Value)> {
        self.pool
            .plugins
            .iter()
            .enumerate()
            .map(|(i, plugin)| {
                let mut by_container = Map::new();
                for c in &self.cases {
                    if let Some(b) = c.behaviors.get(&i) {
                        by_container.insert(c.container.clone(), b.to_config());
                    }
                }
                let mut cfg = json!({ "events": plugin.events });
                if !plugin.sync_updates.is_empty() {
                    cfg["update"] = json!({ "Synchronize": plugin.sync_updates });
                }
                if let Some(u) = &plugin.unsolicited {
                    cfg["unsolicited"] = json!([u]);
                }
                if !by_container.is_empty() {
                    cfg["by_container"] = Value::Object(by_container);
                }
                (plugin.full_name(), cfg)
            })
            .collect()
    }

    /// Writes the scenario, the plugin directory (hard links to — or copies
    /// of — `plugin_bin`, named `NN-name`) and the drop-in configuration
    /// into `dir`.
    pub fn write(&self, dir: &Path, plugin_bin: &Path) -> Result<BatchFiles> {
        let plugins = dir.join("plugins");
        let conf = dir.join("conf");
        for d in [&plugins, &conf] {
            fs::create_dir_all(d)
                .map_err(|e| HarnessError::io(format!("create {}", d.display()), e))?;
        }
        for (stem, cfg) in self.plugin_configs() {
            write_json(&conf, &format!("{stem}.conf"), &cfg)?;
            let link = plugins.join(&stem);
            if !link.exists() && fs::hard_link(plugin_bin, &link).is_err() {
                fs::copy(plugin_bin, &link).map_err(|e| {
                    HarnessError::io(format!("copy plugin to {}", link.display()), e)
                })?;
            }
        }
        let scenario = write_json(dir, "scenario.json", &self.scenario())?;
        Ok(BatchFiles {
            scenario,
            plugins,
            conf,
        })
    }
}

/// Where a written batch lives.
#[derive(Debug, Clone)]
pub struct BatchFiles {
    /// The scenario file.
    pub scenario: PathBuf,
    /// The plugin directory.
    pub plugins: PathBuf,
    /// The drop-in configuration directory.
    pub conf: PathBuf,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_case_is_the_same_alone_and_in_its_batch() {
        let full = Batch::generate(5, 2, 200..300);
        let alone = Batch::generate(5, 2, [250]);
        assert_eq!(full.pool, alone.pool);
        assert_eq!(full.cases[50], alone.cases[0]);
    }

    #[test]
    fn configs_name_only_containers_of_the_batch() {
        let b = Batch::generate(1, 0, 0..50);
        let names: Vec<String> = b.cases.iter().map(|c| c.container.clone()).collect();
        for (stem, cfg) in b.plugin_configs() {
            assert!(stem.len() > 3 && stem.as_bytes()[2] == b'-', "{stem}");
            if let Some(Value::Object(m)) = cfg.get("by_container") {
                assert!(m.keys().all(|k| names.contains(k)));
            }
        }
        let sc = b.scenario();
        let steps = sc["steps"].as_array().unwrap();
        assert_eq!(steps.last().unwrap()["op"], "stop");
        let creates = steps
            .iter()
            .filter(|s| s["op"] == "CreateContainer")
            .count();
        assert_eq!(creates, 50);
    }
}
