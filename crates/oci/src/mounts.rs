//! Mount adjustments, rootfs propagation and mount ordering.

use nri_api::markers::is_marked_for_removal;
use nri_api::Mount;

use crate::convert;
use crate::error::{AdjustError, PropagationError};
use crate::generator::PropagationLookup;
use crate::json::{
    array_mut, drop_if_empty, elem_str, existing_array_mut, obj_mut, str_member, Obj,
};

/// Applies mount adjustments in order, then sorts all mounts.
///
/// A marked destination removes the first mount with that destination; an
/// unmarked one replaces the first mount with the same destination (the
/// new mount is appended). `rshared`/`rslave` options are checked against
/// the host propagation of the source and raise the rootfs propagation.
pub(crate) fn adjust_mounts(
    root: &mut Obj,
    mounts: &[Mount],
    lookup: Option<&PropagationLookup<'_>>,
) -> Result<(), AdjustError> {
    if mounts.is_empty() {
        return Ok(());
    }
    for m in mounts {
        let (destination, marked) = is_marked_for_removal(&m.destination);
        remove_mount(root, destination)?;
        if marked {
            continue;
        }
        match propagation_of(m) {
            Some("rshared") => {
                ensure_propagation(lookup, &m.source, &["rshared"])?;
                let linux = obj_mut(root, "", "linux")?;
                linux.insert("rootfsPropagation".into(), "rshared".into());
            }
            Some("rslave") => {
                ensure_propagation(lookup, &m.source, &["rshared", "rslave"])?;
                let linux = obj_mut(root, "", "linux")?;
                let current = str_member(linux, "linux", "rootfsPropagation")?;
                if current != "rshared" && current != "rslave" {
                    linux.insert("rootfsPropagation".into(), "rslave".into());
                }
            }
            _ => {}
        }
        array_mut(root, "", "mounts")?.push(convert::mount(m));
    }
    sort_mounts(root)?;
    drop_if_empty(root, "mounts");
    Ok(())
}

/// The propagation a mount asks for: the last of its `rprivate`, `rshared`
/// and `rslave` options. Each mount is looked at on its own (the reference
/// carries the value over to later mounts without such an option).
fn propagation_of(m: &Mount) -> Option<&str> {
    m.options
        .iter()
        .rev()
        .map(String::as_str)
        .find(|o| matches!(*o, "rprivate" | "rshared" | "rslave"))
}

fn ensure_propagation(
    lookup: Option<&PropagationLookup<'_>>,
    source: &str,
    accepted: &[&'static str],
) -> Result<(), AdjustError> {
    let Some(lookup) = lookup else {
        return Ok(());
    };
    let actual = lookup(source).map_err(|e| AdjustError::Mounts(PropagationError::Lookup(e)))?;
    if accepted.contains(&actual.as_str()) {
        return Ok(());
    }
    Err(AdjustError::Mounts(PropagationError::NotAccepted {
        path: source.to_string(),
        actual,
        accepted: accepted.to_vec(),
    }))
}

fn remove_mount(root: &mut Obj, destination: &str) -> Result<(), AdjustError> {
    let Some(list) = existing_array_mut(root, "", "mounts")? else {
        return Ok(());
    };
    let mut found = None;
    for (i, m) in list.iter().enumerate() {
        if elem_str(m, "mounts[]", "destination")? == destination {
            found = Some(i);
            break;
        }
    }
    if let Some(i) = found {
        list.remove(i);
    }
    Ok(())
}

/// Orders mounts by the number of path separators in their cleaned
/// destination, then by destination; the sort is stable.
fn sort_mounts(root: &mut Obj) -> Result<(), AdjustError> {
    let Some(list) = existing_array_mut(root, "", "mounts")? else {
        return Ok(());
    };
    let mut keyed = Vec::with_capacity(list.len());
    for m in list.drain(..) {
        let dest = elem_str(&m, "mounts[]", "destination")?.to_string();
        let depth = clean_path(&dest).matches('/').count();
        keyed.push((depth, dest, m));
    }
    keyed.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    list.extend(keyed.into_iter().map(|(_, _, m)| m));
    Ok(())
}

/// Lexically cleans a slash-separated path: repeated slashes and `.`
/// elements go, `..` removes the element before it (and is dropped right
/// after the root), the empty path becomes `.`.
pub(crate) fn clean_path(path: &str) -> String {
    if path.is_empty() {
        return ".".into();
    }
    let rooted = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for comp in path.split('/') {
        match comp {
            "" | "." => {}
            ".." => match parts.last() {
                Some(&last) if last != ".." => {
                    parts.pop();
                }
                _ if !rooted => parts.push(".."),
                _ => {}
            },
            c => parts.push(c),
        }
    }
    let joined = parts.join("/");
    if rooted {
        format!("/{joined}")
    } else if joined.is_empty() {
        ".".into()
    } else {
        joined
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::obj;
    use serde_json::{json, Value};

    fn dest(v: &Value) -> &str {
        v.get("destination").and_then(Value::as_str).unwrap_or("")
    }

    fn mnt(dest: &str, src: &str, opts: &[&str]) -> Mount {
        Mount {
            destination: dest.into(),
            r#type: "bind".into(),
            source: src.into(),
            options: opts.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn dests(root: &Obj) -> Vec<String> {
        root["mounts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| dest(m).to_string())
            .collect()
    }

    #[test]
    fn clean_path_matches_lexical_rules() {
        for (input, want) in [
            ("", "."),
            ("/", "/"),
            ("//a//b/", "/a/b"),
            ("/a/./b/../c", "/a/c"),
            ("/..", "/"),
            ("/../a", "/a"),
            ("a/../..", ".."),
            ("../../a", "../../a"),
            ("a/..", "."),
            ("./", "."),
            ("a/b/../../../c", "../c"),
        ] {
            assert_eq!(clean_path(input), want, "clean({input:?})");
        }
    }

    #[test]
    fn mounts_are_replaced_removed_and_sorted() {
        let mut root = obj(json!({"mounts": [
            {"destination": "/proc", "type": "proc", "x-vendor": 1},
            {"destination": "/dev/shm"},
            {"destination": "/dev"},
            {"destination": "/a/b/c"},
            {"destination": "/data", "source": "/old"}
        ]}));
        let adj = [
            mnt("/data", "/new", &["rbind"]),
            mnt("-/dev/shm", "", &[]),
            mnt("/b", "/src", &[]),
            mnt("-/nothing", "", &[]),
        ];
        adjust_mounts(&mut root, &adj, None).unwrap();
        assert_eq!(dests(&root), ["/b", "/data", "/dev", "/proc", "/a/b/c"]);
        assert_eq!(root["mounts"][1]["source"], "/new");
        // Untouched mounts keep every member.
        assert_eq!(
            root["mounts"][3],
            json!({"destination": "/proc", "type": "proc", "x-vendor": 1})
        );
    }

    #[test]
    fn depth_uses_cleaned_destination_and_sort_is_stable() {
        let mut root = obj(json!({"mounts": [
            {"destination": "/x", "n": 1},
            {"destination": "/a//b/../"},
            {"destination": "/x", "n": 2}
        ]}));
        adjust_mounts(&mut root, &[mnt("-/none", "", &[])], None).unwrap();
        assert_eq!(
            root["mounts"],
            json!([
                {"destination": "/a//b/../"},
                {"destination": "/x", "n": 1},
                {"destination": "/x", "n": 2}
            ])
        );
    }

    #[test]
    fn removing_the_last_mount_drops_the_list() {
        let mut root = obj(json!({"mounts": [{"destination": "/x"}]}));
        adjust_mounts(&mut root, &[mnt("-/x", "", &[])], None).unwrap();
        assert!(!root.contains_key("mounts"));
    }

    #[test]
    fn empty_adjustment_does_not_sort() {
        let mut root = obj(json!({"mounts": [{"destination": "/b/c"}, {"destination": "/a"}]}));
        adjust_mounts(&mut root, &[], None).unwrap();
        assert_eq!(dests(&root), ["/b/c", "/a"]);
    }

    #[test]
    fn propagation_checks_and_rootfs_propagation() {
        let lookup: PropagationLookup<'_> = Box::new(|p: &str| {
            Ok(match p {
                "/shared" => "rshared".to_string(),
                "/slave" => "rslave".to_string(),
                _ => String::new(),
            })
        });
        let mut root = obj(json!({"linux": {"rootfsPropagation": "private"}}));
        adjust_mounts(
            &mut root,
            &[mnt("/s", "/slave", &["rslave"])],
            Some(&lookup),
        )
        .unwrap();
        assert_eq!(root["linux"]["rootfsPropagation"], "rslave");
        adjust_mounts(
            &mut root,
            &[mnt("/h", "/shared", &["rslave", "rshared"])],
            Some(&lookup),
        )
        .unwrap();
        assert_eq!(root["linux"]["rootfsPropagation"], "rshared");
        // rslave never lowers rshared.
        adjust_mounts(
            &mut root,
            &[mnt("/t", "/shared", &["rslave"])],
            Some(&lookup),
        )
        .unwrap();
        assert_eq!(root["linux"]["rootfsPropagation"], "rshared");

        let err = adjust_mounts(
            &mut root,
            &[mnt("/u", "/slave", &["rshared"])],
            Some(&lookup),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"failed to adjust mounts in OCI Spec: path "/slave" mount propagation is "rslave", not "rshared""#
        );
        let err = adjust_mounts(
            &mut root,
            &[mnt("/u", "/private", &["rslave"])],
            Some(&lookup),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"failed to adjust mounts in OCI Spec: path "/private" mount propagation is "", not "rshared or rslave""#
        );
    }

    #[test]
    fn propagation_is_per_mount() {
        let lookup: PropagationLookup<'_> = Box::new(|p: &str| {
            Ok(if p == "/shared" {
                "rshared".into()
            } else {
                String::new()
            })
        });
        let mut root = obj(json!({}));
        // The second mount has no propagation option, so its private source
        // is not checked.
        let adj = [
            mnt("/a", "/shared", &["rshared"]),
            mnt("/b", "/private", &[]),
        ];
        adjust_mounts(&mut root, &adj, Some(&lookup)).unwrap();
        assert_eq!(dests(&root), ["/a", "/b"]);
        assert_eq!(root["linux"]["rootfsPropagation"], "rshared");
        // rprivate after rshared in the same mount: no check.
        let adj = [mnt("/c", "/private", &["rshared", "rprivate"])];
        adjust_mounts(&mut root, &adj, Some(&lookup)).unwrap();
    }

    #[test]
    fn lookup_failures_are_wrapped() {
        let lookup: PropagationLookup<'_> = Box::new(|p: &str| {
            Err(crate::propagation::MountInfoError::NoMountInfo(p.to_string()).into())
        });
        let mut root = obj(json!({}));
        let err =
            adjust_mounts(&mut root, &[mnt("/a", "rel", &["rslave"])], Some(&lookup)).unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"failed to adjust mounts in OCI Spec: failed to get mount info for "rel""#
        );
    }

    #[test]
    fn bad_mount_lists_are_errors() {
        let mut root = obj(json!({"mounts": [{"destination": 5}]}));
        assert!(adjust_mounts(&mut root, &[mnt("/a", "", &[])], None).is_err());
        let mut root = obj(json!({"mounts": {}}));
        assert!(adjust_mounts(&mut root, &[mnt("/a", "", &[])], None).is_err());
    }
}
