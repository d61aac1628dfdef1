//! Plugins are untrusted: odd, empty or large replies must merge or fail
//! cleanly, never panic, and keep the collected state consistent.

use std::collections::BTreeSet;

use nri_adaptation::{CreateResult, StopResult, UpdateResult};
use nri_api::{
    Container, ContainerAdjustment, ContainerUpdate, CreateContainerRequest,
    CreateContainerResponse, Field, Hooks, KeyValue, LinuxContainerAdjustment, LinuxDevice,
    LinuxNamespace, LinuxNetDevice, LinuxRdt, LinuxResources, Mount, StopContainerResponse,
    UpdateContainerRequest, UpdateContainerResponse,
};

/// A small deterministic generator (xorshift), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// A key from a tiny alphabet, so plugins collide often; includes
    /// markers, double markers and the empty key.
    fn key(&mut self) -> String {
        const KEYS: &[&str] = &["", "-", "--", "a", "-a", "b", "-b", "--a", "c"];
        KEYS[self.below(KEYS.len() as u64) as usize].to_string()
    }
}

fn random_adjustment(rng: &mut Rng) -> ContainerAdjustment {
    let mut a = ContainerAdjustment::default();
    for _ in 0..rng.below(4) {
        a.annotations.insert(rng.key(), "v".into());
    }
    for _ in 0..rng.below(3) {
        a.mounts.push(Mount {
            destination: rng.key(),
            ..Default::default()
        });
    }
    for _ in 0..rng.below(3) {
        a.env.push(KeyValue {
            key: rng.key(),
            value: "v".into(),
        });
    }
    if rng.below(3) == 0 {
        a.args = (0..rng.below(3)).map(|_| rng.key()).collect();
    }
    if rng.below(3) == 0 {
        a.hooks = Some(Hooks::default());
    }
    if rng.below(2) == 0 {
        let mut linux = LinuxContainerAdjustment::default();
        for _ in 0..rng.below(3) {
            linux.devices.push(LinuxDevice {
                path: rng.key(),
                ..Default::default()
            });
        }
        for _ in 0..rng.below(3) {
            linux.namespaces.push(LinuxNamespace {
                r#type: rng.key(),
                path: String::new(),
            });
        }
        for _ in 0..rng.below(3) {
            linux.sysctl.insert(rng.key(), "1".into());
        }
        for _ in 0..rng.below(3) {
            linux
                .net_devices
                .insert(rng.key(), LinuxNetDevice::default());
        }
        if rng.below(2) == 0 {
            linux.rdt = Some(LinuxRdt {
                remove: rng.below(2) == 0,
                ..Default::default()
            });
        }
        if rng.below(2) == 0 {
            linux.resources = Some(LinuxResources::default());
        }
        a.linux = Some(linux);
    }
    a
}

#[test]
fn random_replies_merge_or_fail_cleanly() {
    let mut errors = 0;
    for seed in 1..=400u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let mut result = CreateResult::new(CreateContainerRequest {
            container: Some(Container {
                id: "c".into(),
                env: vec!["a=1".into(), "b".into(), "=x".into()],
                ..Default::default()
            }),
            ..Default::default()
        });
        let plugins = ["00-a", "10-b", "10-b", "", "-"];
        for plugin in plugins {
            let reply = CreateContainerResponse {
                adjust: Some(random_adjustment(&mut rng)),
                ..Default::default()
            };
            if result.apply(plugin, reply).is_err() {
                errors += 1;
                break;
            }
            check_invariants(&result);
        }
    }
    // The generator collides on purpose: both outcomes must have occurred.
    assert!(errors > 0 && errors < 400, "errors: {errors}");
}

/// What must hold after every successful merge.
fn check_invariants(result: &CreateResult) {
    let adjust = result.adjustment();
    let owners = result.owners();
    let container = result.request().container.as_ref().unwrap();

    // Every annotation set in the reply is owned and visible in the request.
    for (key, value) in &adjust.annotations {
        if key.starts_with('-') {
            continue;
        }
        let owner = owners.key_owner("c", Field::Annotations, key);
        assert!(owner.is_some(), "annotation {key:?} has no owner");
        assert_eq!(container.annotations.get(key), Some(value));
    }

    // Mounts added by plugins appear once in the reply.
    let mut seen = BTreeSet::new();
    for m in adjust
        .mounts
        .iter()
        .filter(|m| !m.destination.starts_with('-'))
    {
        assert!(
            seen.insert(&m.destination),
            "mount {:?} twice",
            m.destination
        );
    }

    // Environment entries in the reply are unique by name and reach the
    // request container.
    let mut names = BTreeSet::new();
    for e in &adjust.env {
        assert!(names.insert(&e.key), "env {:?} twice", e.key);
        assert!(container.env.contains(&format!("{}={}", e.key, e.value)));
    }

    // The request's namespaces hold one entry per type.
    let linux = container.linux.as_ref().unwrap();
    let types: BTreeSet<_> = linux.namespaces.iter().map(|n| &n.r#type).collect();
    assert_eq!(types.len(), linux.namespaces.len());
}

#[test]
fn empty_and_default_messages_are_fine() {
    let mut result = CreateResult::new(CreateContainerRequest::default());
    result
        .apply("", CreateContainerResponse::default())
        .unwrap();
    result
        .apply(
            "",
            CreateContainerResponse {
                adjust: Some(ContainerAdjustment {
                    linux: Some(LinuxContainerAdjustment::default()),
                    hooks: Some(Hooks::default()),
                    ..Default::default()
                }),
                update: vec![ContainerUpdate::for_container("x")],
                ..Default::default()
            },
        )
        .unwrap();
    // The created container has the empty id, so an update of "" is refused.
    let err = result
        .apply(
            "p",
            CreateContainerResponse {
                update: vec![ContainerUpdate::default()],
                ..Default::default()
            },
        )
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"plugin "p" asked update of "" during creation"#
    );

    let mut update = UpdateResult::new(UpdateContainerRequest::default());
    update
        .apply("", UpdateContainerResponse::default())
        .unwrap();
    assert!(update.into_response().update.is_empty());

    let mut stop = StopResult::new();
    stop.apply(
        "",
        StopContainerResponse {
            update: vec![ContainerUpdate::default(), ContainerUpdate::default()],
        },
    )
    .unwrap();
    assert_eq!(stop.into_response().update.len(), 1);
}

#[test]
fn large_replies_merge() {
    const N: usize = 20_000;
    let mut adjust = ContainerAdjustment::default();
    for i in 0..N {
        adjust.add_annotation(format!("k{i}"), "v");
        adjust.add_env(format!("E{i}"), "v");
        adjust.add_or_replace_namespace(LinuxNamespace {
            r#type: format!("ns{i}"),
            path: String::new(),
        });
    }
    let mut result = CreateResult::new(CreateContainerRequest::default());
    result
        .apply(
            "00-a",
            CreateContainerResponse {
                adjust: Some(adjust),
                ..Default::default()
            },
        )
        .unwrap();
    let c = result.request().container.as_ref().unwrap();
    assert_eq!(c.annotations.len(), N);
    assert_eq!(c.env.len(), N);
    assert_eq!(c.linux.as_ref().unwrap().namespaces.len(), N);

    // Many updates of one container, each with its own page size.
    let updates: Vec<_> = (0..N)
        .map(|i| {
            let mut u = ContainerUpdate::for_container("big");
            u.add_linux_hugepage_limit(format!("{i}kB"), 1);
            u
        })
        .collect();
    let mut stop = StopResult::new();
    stop.apply("00-a", StopContainerResponse { update: updates })
        .unwrap();
    let response = stop.into_response();
    let res = crate::support::update_resources(&response.update[0]);
    assert_eq!(res.hugepage_limits.len(), N);
}
