//! The annotation, and the adjustment that makes `/sys/fs/cgroup` writable.

use nri_stub::api::{Container, ContainerAdjustment, Mount, PodSandbox};

/// Annotation key: `"true"` enables writable cgroups; scoped to one container with
/// `/container.<name>`, to the pod with `/pod` or the bare key.
pub const WRITABLE_CGROUPS_ANNOTATION: &str = "writable-cgroups.noderesource.dev";

/// Where the cgroup file system is mounted in containers.
pub const CGROUPS_MOUNT: &str = "/sys/fs/cgroup";

/// The value of annotation `key` that applies to `container`: the container-scoped key
/// first, then the pod-scoped (`<key>/pod`), then the bare key.
pub fn effective_annotation<'a>(
    pod: &'a PodSandbox,
    key: &str,
    container: &str,
) -> Option<&'a str> {
    [
        format!("{key}/container.{container}"),
        format!("{key}/pod"),
        key.to_string(),
    ]
    .iter()
    .find_map(|k| pod.annotations.get(k))
    .map(String::as_str)
}

/// True if the pod's annotations ask for writable cgroups in `container` (exactly
/// `"true"`).
pub fn writable_cgroups_requested(pod: &PodSandbox, container: &Container) -> bool {
    effective_annotation(pod, WRITABLE_CGROUPS_ANNOTATION, &container.name) == Some("true")
}

/// The container's cgroup file system mount.
pub fn find_cgroups_mount(mounts: &[Mount]) -> Option<&Mount> {
    mounts.iter().find(|m| m.destination == CGROUPS_MOUNT)
}

/// `mount` with `ro` dropped and `rw` added (at the end, if missing); `None` when it is
/// already read-write without `ro`.
pub fn read_write_mount(mount: &Mount) -> Option<Mount> {
    let has_ro = mount.options.iter().any(|o| o == "ro");
    let has_rw = mount.options.iter().any(|o| o == "rw");
    if has_rw && !has_ro {
        return None;
    }
    let mut options: Vec<String> = mount
        .options
        .iter()
        .filter(|o| *o != "ro")
        .cloned()
        .collect();
    if !has_rw {
        options.push("rw".into());
    }
    Some(Mount {
        destination: mount.destination.clone(),
        r#type: mount.r#type.clone(),
        source: mount.source.clone(),
        options,
    })
}

/// The adjustment replacing the cgroup mount by a read-write one: the new mount, then
/// the removal of the old one (the order of the Go plugin).
pub fn adjustment(new_mount: Mount) -> ContainerAdjustment {
    let mut adjust = ContainerAdjustment::default();
    let destination = new_mount.destination.clone();
    adjust.add_mount(new_mount).remove_mount(&destination);
    adjust
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mount(options: &[&str]) -> Mount {
        Mount {
            destination: CGROUPS_MOUNT.into(),
            r#type: "cgroup".into(),
            source: "cgroup".into(),
            options: options.iter().map(|o| o.to_string()).collect(),
        }
    }

    fn pod(annotations: &[(&str, &str)]) -> PodSandbox {
        PodSandbox {
            name: "p".into(),
            annotations: annotations
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        }
    }

    fn ctr(name: &str) -> Container {
        Container {
            name: name.into(),
            ..Default::default()
        }
    }

    #[test]
    fn annotation_scopes_and_precedence() {
        let key = WRITABLE_CGROUPS_ANNOTATION;
        assert!(writable_cgroups_requested(
            &pod(&[(key, "true")]),
            &ctr("c")
        ));
        let pod_scope = format!("{key}/pod");
        assert!(writable_cgroups_requested(
            &pod(&[(&pod_scope, "true")]),
            &ctr("c")
        ));
        let c0 = format!("{key}/container.c0");
        let p = pod(&[(&c0, "false"), (&pod_scope, "true")]);
        assert!(!writable_cgroups_requested(&p, &ctr("c0")));
        assert!(writable_cgroups_requested(&p, &ctr("c1")));
        let p = pod(&[(&c0, "true"), (key, "false")]);
        assert!(writable_cgroups_requested(&p, &ctr("c0")));
        assert!(!writable_cgroups_requested(&p, &ctr("c1")));
    }

    #[test]
    fn only_exactly_true_enables() {
        let key = WRITABLE_CGROUPS_ANNOTATION;
        for value in ["True", "1", "yes", ""] {
            assert!(
                !writable_cgroups_requested(&pod(&[(key, value)]), &ctr("c")),
                "{value}"
            );
        }
        assert!(!writable_cgroups_requested(&pod(&[]), &ctr("c")));
    }

    #[test]
    fn read_only_mounts_become_read_write() {
        let rw = read_write_mount(&mount(&["ro", "nosuid", "noexec", "nodev"])).unwrap();
        assert_eq!(rw.options, ["nosuid", "noexec", "nodev", "rw"]);
        assert_eq!(
            (rw.r#type.as_str(), rw.source.as_str()),
            ("cgroup", "cgroup")
        );
        let rw = read_write_mount(&mount(&["nosuid"])).unwrap();
        assert_eq!(rw.options, ["nosuid", "rw"]);
        let rw = read_write_mount(&mount(&["rw", "ro"])).unwrap();
        assert_eq!(rw.options, ["rw"]);
        assert_eq!(read_write_mount(&mount(&["rw", "nosuid"])), None);
    }

    #[test]
    fn adjustment_adds_the_new_mount_and_removes_the_old() {
        let adjust = adjustment(mount(&["rw"]));
        assert_eq!(adjust.mounts.len(), 2);
        assert_eq!(adjust.mounts[0], mount(&["rw"]));
        assert_eq!(
            adjust.mounts[1].destination,
            nri_stub::api::markers::mark_for_removal(CGROUPS_MOUNT)
        );
    }

    #[test]
    fn finds_the_cgroup_mount() {
        let other = Mount {
            destination: "/proc".into(),
            ..Default::default()
        };
        let mounts = [other.clone(), mount(&["ro"])];
        assert_eq!(find_cgroups_mount(&mounts), Some(&mount(&["ro"])));
        assert_eq!(find_cgroups_mount(&[other]), None);
    }
}
