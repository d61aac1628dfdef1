//! What a runtime is known to apply: [`RuntimeCapabilities`], [`Adjustment`].
//!
//! NRI defines one protocol, but not every runtime applies all of it. Docker's own NRI
//! (Docker Engine 29, moby v2) sends only Synchronize, CreateContainer and
//! ValidateContainerAdjustment, applies only environment variables and read-only
//! mounts, and fails the whole `docker run` on any other adjustment. A plugin that
//! learns this at Configure can leave out what would fail, and say so once.

use nri_api::markers::is_marked_for_removal;
use nri_api::{ContainerAdjustment, Event, EventMask, LinuxContainerAdjustment};

/// One part of a [`ContainerAdjustment`], as a runtime applies it or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Adjustment {
    /// Annotations added or removed.
    Annotations,
    /// Mounts added (removals are [`Adjustment::Removals`]).
    Mounts,
    /// Mount options other than `ro` (e.g. `rbind`, `rw`, `nosuid`).
    MountOptions,
    /// Environment variables added or replaced.
    Env,
    /// Entries removed: annotations, mounts or environment variables marked for removal.
    Removals,
    /// OCI hooks.
    Hooks,
    /// POSIX rlimits.
    Rlimits,
    /// CDI devices.
    CdiDevices,
    /// The process arguments.
    Args,
    /// Linux devices.
    Devices,
    /// Linux resources (CPU, memory, hugepages, block I/O, pids, RDT class, unified).
    Resources,
    /// The cgroups path.
    CgroupsPath,
    /// The OOM score adjustment.
    OomScoreAdj,
    /// The I/O priority.
    IoPriority,
    /// The seccomp policy.
    SeccompPolicy,
    /// Linux namespaces.
    Namespaces,
    /// Sysctls.
    Sysctl,
    /// Network devices.
    NetDevices,
    /// The scheduler policy.
    Scheduler,
    /// Intel RDT (`linux.intelRdt`).
    Rdt,
    /// The memory policy.
    MemoryPolicy,
}

impl Adjustment {
    /// What the adjustment part is called in messages (`annotations`, `rlimits`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Adjustment::Annotations => "annotations",
            Adjustment::Mounts => "mounts",
            Adjustment::MountOptions => "mount options other than ro",
            Adjustment::Env => "environment variables",
            Adjustment::Removals => "removals",
            Adjustment::Hooks => "OCI hooks",
            Adjustment::Rlimits => "rlimits",
            Adjustment::CdiDevices => "CDI devices",
            Adjustment::Args => "process arguments",
            Adjustment::Devices => "devices",
            Adjustment::Resources => "resources",
            Adjustment::CgroupsPath => "cgroups path",
            Adjustment::OomScoreAdj => "OOM score adjustment",
            Adjustment::IoPriority => "I/O priority",
            Adjustment::SeccompPolicy => "seccomp policy",
            Adjustment::Namespaces => "namespaces",
            Adjustment::Sysctl => "sysctls",
            Adjustment::NetDevices => "network devices",
            Adjustment::Scheduler => "scheduler",
            Adjustment::Rdt => "RDT",
            Adjustment::MemoryPolicy => "memory policy",
        }
    }
}

impl std::fmt::Display for Adjustment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The parts of `adjust` that are set, in [`Adjustment`] order.
fn parts_of(adjust: &ContainerAdjustment) -> Vec<Adjustment> {
    let mut parts = Vec::new();
    let mut add = |set: bool, part| {
        if set && !parts.contains(&part) {
            parts.push(part);
        }
    };
    let removed = |key: &str| is_marked_for_removal(key).1;
    add(
        adjust.annotations.keys().any(|k| !removed(k)),
        Adjustment::Annotations,
    );
    add(
        adjust.mounts.iter().any(|m| !removed(&m.destination)),
        Adjustment::Mounts,
    );
    add(
        adjust
            .mounts
            .iter()
            .any(|m| !removed(&m.destination) && !ro_only(&m.options)),
        Adjustment::MountOptions,
    );
    add(adjust.env.iter().any(|e| !removed(&e.key)), Adjustment::Env);
    add(
        adjust.annotations.keys().any(|k| removed(k))
            || adjust.mounts.iter().any(|m| removed(&m.destination))
            || adjust.env.iter().any(|e| removed(&e.key)),
        Adjustment::Removals,
    );
    add(adjust.hooks.is_some(), Adjustment::Hooks);
    add(!adjust.rlimits.is_empty(), Adjustment::Rlimits);
    add(!adjust.cdi_devices.is_empty(), Adjustment::CdiDevices);
    add(!adjust.args.is_empty(), Adjustment::Args);
    if let Some(linux) = &adjust.linux {
        let LinuxContainerAdjustment {
            devices,
            resources,
            cgroups_path,
            oom_score_adj,
            io_priority,
            seccomp_policy,
            namespaces,
            sysctl,
            net_devices,
            scheduler,
            rdt,
            memory_policy,
        } = linux;
        add(!devices.is_empty(), Adjustment::Devices);
        add(resources.is_some(), Adjustment::Resources);
        add(!cgroups_path.is_empty(), Adjustment::CgroupsPath);
        add(oom_score_adj.is_some(), Adjustment::OomScoreAdj);
        add(io_priority.is_some(), Adjustment::IoPriority);
        add(seccomp_policy.is_some(), Adjustment::SeccompPolicy);
        add(!namespaces.is_empty(), Adjustment::Namespaces);
        add(!sysctl.is_empty(), Adjustment::Sysctl);
        add(!net_devices.is_empty(), Adjustment::NetDevices);
        add(scheduler.is_some(), Adjustment::Scheduler);
        add(rdt.is_some(), Adjustment::Rdt);
        add(memory_policy.is_some(), Adjustment::MemoryPolicy);
    }
    parts
}

fn ro_only(options: &[String]) -> bool {
    options.iter().all(|o| o == "ro")
}

/// What a runtime is known to apply, from its name and version: the events it sends
/// and the parts of a container adjustment it applies. See
/// [`RuntimeInfo::capabilities`](crate::RuntimeInfo::capabilities).
///
/// | runtime (name) | events sent | adjustments applied | after creation |
/// | --- | --- | --- | --- |
/// | Docker 29, moby v2 (`docker`) | Synchronize, CreateContainer, ValidateContainerAdjustment | env (add/replace), mounts with no option but `ro` | nothing (no updates, no evictions) |
/// | containerd, CRI-O, any other | all its NRI version delivers | all | updates and evictions |
///
/// A runtime the table does not know is taken to apply everything, as NRI defines it
/// ([`is_known`](Self::is_known) tells the two apart).
///
/// ```
/// use nri_stub::api::ContainerAdjustment;
/// use nri_stub::{Adjustment, RuntimeCapabilities};
///
/// let docker = RuntimeCapabilities::for_runtime("docker", "29.2.0");
/// assert!(docker.applies(Adjustment::Env));
/// assert!(!docker.applies(Adjustment::Annotations));
///
/// let mut adjust = ContainerAdjustment::default();
/// adjust.add_annotation("example.com/a", "x").add_env("A", "x");
/// assert_eq!(docker.retain(&mut adjust), [Adjustment::Annotations]);
/// assert!(adjust.annotations.is_empty());
/// assert_eq!(adjust.env.len(), 1);
///
/// assert!(RuntimeCapabilities::for_runtime("containerd", "v2.1.0").applies(Adjustment::Rlimits));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeCapabilities {
    known: bool,
    events: EventMask,
    applied: &'static [Adjustment],
    updates: bool,
}

/// What Docker's own NRI applies (moby v2.0.0-beta.6 and later, Docker Engine 29.2+).
const DOCKER_APPLIES: &[Adjustment] = &[Adjustment::Env, Adjustment::Mounts];
const DOCKER_EVENTS: EventMask =
    EventMask::from_events(&[Event::CreateContainer, Event::ValidateContainerAdjustment]);

impl RuntimeCapabilities {
    /// Everything NRI defines: what containerd and CRI-O apply, and what a runtime the
    /// table does not know is taken to apply.
    pub const FULL: RuntimeCapabilities = RuntimeCapabilities {
        known: false,
        events: EventMask::VALID_EVENTS,
        applied: &[],
        updates: true,
    };

    /// The table entry for the runtime `name` at `version` (as sent in Configure).
    pub fn for_runtime(name: &str, version: &str) -> RuntimeCapabilities {
        // Docker's NRI exists since Engine 29.2 (moby v2 beta); every version so far
        // applies the same, so the version is not looked at yet.
        let _ = version;
        match name {
            "docker" | "moby" => RuntimeCapabilities {
                known: true,
                events: DOCKER_EVENTS,
                applied: DOCKER_APPLIES,
                updates: false,
            },
            "containerd" | "cri-o" | "crio" | "CRI-O" => RuntimeCapabilities {
                known: true,
                ..Self::FULL
            },
            _ => Self::FULL,
        }
    }

    /// Whether the table has an entry for the runtime (`false`: an unknown runtime,
    /// taken to apply everything).
    pub fn is_known(&self) -> bool {
        self.known
    }

    /// Whether the runtime applies everything NRI defines.
    pub fn applies_everything(&self) -> bool {
        self.applied.is_empty()
    }

    /// Whether the runtime applies this part of an adjustment.
    pub fn applies(&self, part: Adjustment) -> bool {
        self.applied.is_empty() || self.applied.contains(&part)
    }

    /// Whether the runtime sends this event (Synchronize and Configure always come).
    /// Events its NRI version cannot deliver are checked by the stub at Configure.
    pub fn delivers(&self, event: Event) -> bool {
        self.events.is_set(event)
    }

    /// The events of `mask` the runtime sends.
    pub fn deliverable(&self, mask: EventMask) -> EventMask {
        EventMask::from(mask.raw() & self.events.raw())
    }

    /// Whether the runtime applies changes to containers after their creation:
    /// updates returned from handlers, unsolicited updates and evictions.
    pub fn applies_updates(&self) -> bool {
        self.updates
    }

    /// The parts of `needed` the runtime does not apply, in order.
    pub fn unapplied(&self, needed: &[Adjustment]) -> Vec<Adjustment> {
        needed
            .iter()
            .copied()
            .filter(|p| !self.applies(*p))
            .collect()
    }

    /// The parts set in `adjust` that the runtime does not apply (a runtime like Docker
    /// fails the container on any of them).
    pub fn refused(&self, adjust: &ContainerAdjustment) -> Vec<Adjustment> {
        self.unapplied(&parts_of(adjust))
    }

    /// Removes from `adjust` what the runtime does not apply, and returns those parts.
    /// A mount with options other than `ro` is removed whole; removal markers go (an
    /// environment variable added again replaces the old value anyway).
    pub fn retain(&self, adjust: &mut ContainerAdjustment) -> Vec<Adjustment> {
        let refused = self.refused(adjust);
        if refused.is_empty() {
            return refused;
        }
        let removed = |key: &str| is_marked_for_removal(key).1;
        let drop = |part| refused.contains(&part);
        if drop(Adjustment::Annotations) {
            adjust.annotations.retain(|k, _| removed(k));
        }
        if drop(Adjustment::Mounts) {
            adjust.mounts.retain(|m| removed(&m.destination));
        }
        if drop(Adjustment::MountOptions) {
            adjust
                .mounts
                .retain(|m| removed(&m.destination) || ro_only(&m.options));
        }
        if drop(Adjustment::Env) {
            adjust.env.retain(|e| removed(&e.key));
        }
        if drop(Adjustment::Removals) {
            adjust.annotations.retain(|k, _| !removed(k));
            adjust.mounts.retain(|m| !removed(&m.destination));
            adjust.env.retain(|e| !removed(&e.key));
        }
        if drop(Adjustment::Hooks) {
            adjust.hooks = None;
        }
        if drop(Adjustment::Rlimits) {
            adjust.rlimits.clear();
        }
        if drop(Adjustment::CdiDevices) {
            adjust.cdi_devices.clear();
        }
        if drop(Adjustment::Args) {
            adjust.args.clear();
        }
        if let Some(linux) = adjust.linux.as_mut() {
            if drop(Adjustment::Devices) {
                linux.devices.clear();
            }
            if drop(Adjustment::Resources) {
                linux.resources = None;
            }
            if drop(Adjustment::CgroupsPath) {
                linux.cgroups_path.clear();
            }
            if drop(Adjustment::OomScoreAdj) {
                linux.oom_score_adj = None;
            }
            if drop(Adjustment::IoPriority) {
                linux.io_priority = None;
            }
            if drop(Adjustment::SeccompPolicy) {
                linux.seccomp_policy = None;
            }
            if drop(Adjustment::Namespaces) {
                linux.namespaces.clear();
            }
            if drop(Adjustment::Sysctl) {
                linux.sysctl.clear();
            }
            if drop(Adjustment::NetDevices) {
                linux.net_devices.clear();
            }
            if drop(Adjustment::Scheduler) {
                linux.scheduler = None;
            }
            if drop(Adjustment::Rdt) {
                linux.rdt = None;
            }
            if drop(Adjustment::MemoryPolicy) {
                linux.memory_policy = None;
            }
            if *linux == LinuxContainerAdjustment::default() {
                adjust.linux = None;
            }
        }
        refused
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nri_api::{Hooks, Mount, PosixRlimit};

    fn docker() -> RuntimeCapabilities {
        RuntimeCapabilities::for_runtime("docker", "29.2.0")
    }

    fn mount(dst: &str, options: &[&str]) -> Mount {
        Mount {
            destination: dst.into(),
            source: "/src".into(),
            r#type: "bind".into(),
            options: options.iter().map(|o| o.to_string()).collect(),
        }
    }

    #[test]
    fn docker_applies_env_and_ro_mounts_on_create_only() {
        let d = docker();
        assert!(d.is_known());
        assert!(!d.applies_everything());
        assert!(d.applies(Adjustment::Env) && d.applies(Adjustment::Mounts));
        for part in [
            Adjustment::Annotations,
            Adjustment::MountOptions,
            Adjustment::Removals,
            Adjustment::Hooks,
            Adjustment::Rlimits,
            Adjustment::Devices,
            Adjustment::Resources,
            Adjustment::Rdt,
            Adjustment::NetDevices,
        ] {
            assert!(!d.applies(part), "{part}");
        }
        assert!(d.delivers(Event::CreateContainer));
        assert!(d.delivers(Event::ValidateContainerAdjustment));
        assert!(!d.delivers(Event::RunPodSandbox));
        assert!(!d.delivers(Event::StartContainer));
        assert!(!d.delivers(Event::UpdateContainer));
        assert!(!d.applies_updates());
        assert_eq!(
            d.deliverable(EventMask::VALID_EVENTS),
            EventMask::from_events(&[Event::CreateContainer, Event::ValidateContainerAdjustment])
        );
    }

    #[test]
    fn containerd_crio_and_unknown_runtimes_apply_everything() {
        for name in ["containerd", "cri-o", "nri-rs-test"] {
            let caps = RuntimeCapabilities::for_runtime(name, "v2.1.0");
            assert!(caps.applies_everything(), "{name}");
            assert!(caps.applies(Adjustment::Annotations) && caps.applies(Adjustment::Rlimits));
            assert!(caps.delivers(Event::PostUpdatePodSandbox));
            assert!(caps.applies_updates());
            assert_eq!(caps.is_known(), name != "nri-rs-test", "{name}");
        }
    }

    #[test]
    fn refused_names_what_docker_would_fail_on() {
        let mut adjust = ContainerAdjustment::default();
        adjust
            .add_annotation("a", "1")
            .remove_env("OLD")
            .add_env("NEW", "2")
            .add_mount(mount("/ro", &["ro"]))
            .add_mount(mount("/rw", &["rbind", "rw"]))
            .add_rlimit("RLIMIT_NOFILE", 10, 10);
        assert_eq!(
            docker().refused(&adjust),
            [
                Adjustment::Annotations,
                Adjustment::MountOptions,
                Adjustment::Removals,
                Adjustment::Rlimits
            ]
        );
        assert!(RuntimeCapabilities::FULL.refused(&adjust).is_empty());
        assert_eq!(
            docker().unapplied(&[Adjustment::Env, Adjustment::Hooks]),
            [Adjustment::Hooks]
        );
    }

    #[test]
    fn retain_keeps_what_docker_applies() {
        let mut adjust = ContainerAdjustment::default();
        adjust
            .add_annotation("a", "1")
            .remove_env("SET")
            .add_env("SET", "2")
            .add_mount(mount("/ro", &["ro"]))
            .add_mount(mount("/plain", &[]))
            .add_mount(mount("/rw", &["rbind", "rw"]))
            .add_hooks(&Hooks::default());
        adjust.linux_resources_mut();
        adjust.rlimits.push(PosixRlimit::default());
        let dropped = docker().retain(&mut adjust);
        assert_eq!(
            dropped,
            [
                Adjustment::Annotations,
                Adjustment::MountOptions,
                Adjustment::Removals,
                Adjustment::Hooks,
                Adjustment::Rlimits,
                Adjustment::Resources
            ]
        );
        let mut expected = ContainerAdjustment::default();
        expected
            .add_env("SET", "2")
            .add_mount(mount("/ro", &["ro"]))
            .add_mount(mount("/plain", &[]));
        assert_eq!(adjust, expected);
        assert!(docker().refused(&adjust).is_empty());
    }

    #[test]
    fn retain_leaves_a_full_runtime_s_adjustment_alone() {
        let mut adjust = ContainerAdjustment::default();
        adjust
            .add_annotation("a", "1")
            .add_rlimit("RLIMIT_CORE", 1, 1);
        let before = adjust.clone();
        assert!(RuntimeCapabilities::for_runtime("containerd", "v2.0.0")
            .retain(&mut adjust)
            .is_empty());
        assert_eq!(adjust, before);
    }
}
