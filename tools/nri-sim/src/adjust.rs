//! The readable forms of the scenario turned into NRI messages.

use nri_api::{ContainerAdjustment, ContainerUpdate, Hook, Hooks, LinuxResources, Mount};

use crate::scenario::{AdjustSpec, HookSpec, HooksSpec, ResourcesSpec};

/// Applies the resources of `spec` through the setters of `$target`
/// (a `ContainerAdjustment` or a `ContainerUpdate`).
macro_rules! set_resources {
    ($target:expr, $spec:expr) => {{
        let t = $target;
        let r: &ResourcesSpec = $spec;
        if let Some(v) = r.memory {
            t.set_linux_memory_limit(v);
        }
        if let Some(v) = r.memory_reservation {
            t.set_linux_memory_reservation(v);
        }
        if let Some(v) = r.memory_swap {
            t.set_linux_memory_swap(v);
        }
        if let Some(v) = r.cpu_shares {
            t.set_linux_cpu_shares(v);
        }
        if let Some(v) = r.cpu_quota {
            t.set_linux_cpu_quota(v);
        }
        if let Some(v) = r.cpu_period {
            t.set_linux_cpu_period(v);
        }
        if let Some(v) = &r.cpuset_cpus {
            t.set_linux_cpuset_cpus(v.clone());
        }
        if let Some(v) = &r.cpuset_mems {
            t.set_linux_cpuset_mems(v.clone());
        }
        if let Some(v) = r.pids {
            t.set_linux_pid_limits(v);
        }
        for (k, v) in &r.unified {
            t.add_linux_unified(k.clone(), v.clone());
        }
    }};
}

/// NRI Linux resources holding the fields of `spec`.
pub fn resources(spec: &ResourcesSpec) -> LinuxResources {
    let mut u = ContainerUpdate::default();
    set_resources!(&mut u, spec);
    u.linux.and_then(|l| l.resources).unwrap_or_default()
}

/// A container update of `container_id` setting `spec`.
pub fn update(container_id: &str, spec: &ResourcesSpec, ignore_failure: bool) -> ContainerUpdate {
    let mut u = ContainerUpdate::for_container(container_id);
    set_resources!(&mut u, spec);
    if ignore_failure {
        u.set_ignore_failure();
    }
    u
}

fn hook(h: &HookSpec) -> Hook {
    Hook {
        path: h.path.clone(),
        args: h.args.clone(),
        env: h.env.clone(),
        timeout: None,
    }
}

fn hooks(h: &HooksSpec) -> Hooks {
    let all = |v: &[HookSpec]| v.iter().map(hook).collect::<Vec<_>>();
    Hooks {
        prestart: all(&h.prestart),
        create_runtime: all(&h.create_runtime),
        create_container: all(&h.create_container),
        start_container: all(&h.start_container),
        poststart: all(&h.poststart),
        poststop: all(&h.poststop),
    }
}

/// The NRI adjustment `spec` describes.
pub fn adjustment(spec: &AdjustSpec) -> Result<ContainerAdjustment, String> {
    let mut a = match &spec.nri {
        Some(raw) => serde_json::from_value::<ContainerAdjustment>(raw.clone())
            .map_err(|e| format!("invalid `nri` adjustment: {e}"))?,
        None => ContainerAdjustment::default(),
    };
    for k in &spec.remove_annotations {
        a.remove_annotation(k);
    }
    for (k, v) in &spec.annotations {
        a.add_annotation(k.clone(), v.clone());
    }
    for k in &spec.remove_env {
        a.remove_env(k);
    }
    for (k, v) in &spec.env {
        a.add_env(k.clone(), v.clone());
    }
    for d in &spec.remove_mounts {
        a.remove_mount(d);
    }
    for m in &spec.mounts {
        a.add_mount(Mount {
            destination: m.destination.clone(),
            source: m.source.clone(),
            r#type: m.kind.clone().unwrap_or_else(|| "bind".into()),
            options: if m.options.is_empty() && m.kind.is_none() {
                vec!["rbind".into(), "ro".into()]
            } else {
                m.options.clone()
            },
        });
    }
    if let Some(h) = &spec.hooks {
        a.add_hooks(&hooks(h));
    }
    if let Some(args) = &spec.args {
        a.set_args(args);
    }
    for r in &spec.rlimits {
        a.add_rlimit(r.kind.clone(), r.hard, r.soft);
    }
    for (k, v) in &spec.sysctl {
        a.set_linux_sysctl(k.clone(), v.clone());
    }
    if let Some(v) = spec.oom_score_adj {
        a.set_linux_oom_score_adj(Some(v));
    }
    if let Some(r) = &spec.resources {
        set_resources!(&mut a, r);
    }
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::MountSpec;

    #[test]
    fn readable_adjustment_becomes_nri() {
        let spec = AdjustSpec {
            annotations: [("a".to_string(), "1".to_string())].into(),
            env: [("E".to_string(), "x".to_string())].into(),
            mounts: vec![MountSpec {
                destination: "/data".into(),
                source: "/srv".into(),
                ..Default::default()
            }],
            resources: Some(ResourcesSpec {
                memory: Some(1 << 20),
                cpu_shares: Some(256),
                ..Default::default()
            }),
            ..Default::default()
        };
        let a = adjustment(&spec).unwrap();
        assert_eq!(a.annotations["a"], "1");
        assert_eq!(a.env[0].key, "E");
        assert_eq!(a.mounts[0].options, ["rbind", "ro"]);
        let res = a.linux.unwrap().resources.unwrap();
        assert_eq!(res.memory.unwrap().limit.unwrap().value, 1 << 20);
        assert_eq!(res.cpu.unwrap().shares.unwrap().value, 256);
    }

    #[test]
    fn raw_nri_adjustment_is_merged() {
        let spec = AdjustSpec {
            nri: Some(serde_json::json!({"args": ["/bin/true"]})),
            annotations: [("b".to_string(), "2".to_string())].into(),
            ..Default::default()
        };
        let a = adjustment(&spec).unwrap();
        assert_eq!(a.args, ["/bin/true"]);
        assert_eq!(a.annotations["b"], "2");
        let bad = AdjustSpec {
            nri: Some(serde_json::json!({"args": 5})),
            ..Default::default()
        };
        assert!(adjustment(&bad)
            .unwrap_err()
            .contains("invalid `nri` adjustment"));
    }
}
