//! Read-only queries over the field ownership of a validation request.
//!
//! A [`ValidateContainerAdjustmentRequest`](nri_api::ValidateContainerAdjustmentRequest)
//! carries an [`OwningPlugins`] object telling which plugin set which field of
//! which container. Owner values are qualified plugin names (`"10-foo"`); a
//! field that a plugin cleared holds `"-<plugin>"`; the OCI hooks owner is a
//! comma-separated list of every plugin that injected hooks.
//!
//! The helpers here answer the questions validators ask. Each returns `None`
//! when the field was not claimed (nor cleared) for the container. Cleared
//! entries are returned as they are stored (`"-10-foo"`), as the reference
//! does.
//!
//! ```
//! use nri_api::{CompoundFieldOwners, Field, FieldOwners, OwningPlugins};
//! use nri_validator::owners;
//!
//! let mut fields = FieldOwners::default();
//! fields.simple.insert(Field::OciHooks as i32, "10-a,20-b".into());
//! fields.compound.insert(
//!     Field::Sysctl as i32,
//!     CompoundFieldOwners { owners: [("net.ipv4.ip_forward".into(), "30-c".into())].into() },
//! );
//! let mut all = OwningPlugins::default();
//! all.owners.insert("ctr0".into(), fields);
//!
//! assert_eq!(owners::hooks_owner(&all, "ctr0"), Some("10-a,20-b"));
//! assert_eq!(owners::sysctl_owner(&all, "ctr0", "net.ipv4.ip_forward"), Some("30-c"));
//! assert_eq!(owners::seccomp_policy_owner(&all, "ctr0"), None);
//! assert_eq!(owners::namespace_owners(&all, "ctr0"), None);
//! assert_eq!(owners::hooks_owner(&all, "other"), None);
//! ```

use std::collections::BTreeMap;

use nri_api::{Field, FieldOwners, OwningPlugins};

/// The ownership record of one container, if any field of it was touched.
pub fn field_owners<'a>(owners: &'a OwningPlugins, ctr_id: &str) -> Option<&'a FieldOwners> {
    owners.owners.get(ctr_id)
}

/// The owner of a simple (whole-value) field of a container.
pub fn simple_owner<'a>(owners: &'a OwningPlugins, ctr_id: &str, field: Field) -> Option<&'a str> {
    field_owners(owners, ctr_id)?
        .simple
        .get(&(field as i32))
        .map(String::as_str)
}

/// The per-key owners of a compound field of a container (annotations by
/// key, mounts by destination, sysctls by key, namespaces by type, ...).
///
/// `Some` as soon as any key of the field was claimed or cleared, even if the
/// map is empty.
pub fn compound_owners<'a>(
    owners: &'a OwningPlugins,
    ctr_id: &str,
    field: Field,
) -> Option<&'a BTreeMap<String, String>> {
    field_owners(owners, ctr_id)?
        .compound
        .get(&(field as i32))
        .map(|c| &c.owners)
}

/// The owner of one key of a compound field of a container.
pub fn compound_owner<'a>(
    owners: &'a OwningPlugins,
    ctr_id: &str,
    field: Field,
    key: &str,
) -> Option<&'a str> {
    compound_owners(owners, ctr_id, field)?
        .get(key)
        .map(String::as_str)
}

/// The plugins that injected OCI hooks into a container, comma-separated in
/// invocation order (`"10-a,20-b"`).
pub fn hooks_owner<'a>(owners: &'a OwningPlugins, ctr_id: &str) -> Option<&'a str> {
    simple_owner(owners, ctr_id, Field::OciHooks)
}

/// The plugin that set the seccomp policy of a container.
pub fn seccomp_policy_owner<'a>(owners: &'a OwningPlugins, ctr_id: &str) -> Option<&'a str> {
    simple_owner(owners, ctr_id, Field::SeccompPolicy)
}

/// The plugins that adjusted the Linux namespaces of a container, keyed by
/// namespace type (`"network"`, `"pid"`, ...).
pub fn namespace_owners<'a>(
    owners: &'a OwningPlugins,
    ctr_id: &str,
) -> Option<&'a BTreeMap<String, String>> {
    compound_owners(owners, ctr_id, Field::Namespace)
}

/// The plugin that adjusted the namespace of type `ns_type` of a container.
pub fn namespace_owner<'a>(
    owners: &'a OwningPlugins,
    ctr_id: &str,
    ns_type: &str,
) -> Option<&'a str> {
    compound_owner(owners, ctr_id, Field::Namespace, ns_type)
}

/// The plugin that set the sysctl `key` of a container.
pub fn sysctl_owner<'a>(owners: &'a OwningPlugins, ctr_id: &str, key: &str) -> Option<&'a str> {
    compound_owner(owners, ctr_id, Field::Sysctl, key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nri_api::CompoundFieldOwners;

    fn sample() -> OwningPlugins {
        let mut f = FieldOwners::default();
        f.simple.insert(Field::SeccompPolicy as i32, "-05-x".into());
        f.simple.insert(Field::MemLimit as i32, "10-mem".into());
        f.compound.insert(
            Field::Namespace as i32,
            CompoundFieldOwners {
                owners: [("network".to_string(), "20-net".to_string())].into(),
            },
        );
        f.compound
            .insert(Field::Sysctl as i32, CompoundFieldOwners::default());
        let mut o = OwningPlugins::default();
        o.owners.insert("c1".into(), f);
        o
    }

    #[test]
    fn simple_fields_are_looked_up_by_field_number() {
        let o = sample();
        assert_eq!(simple_owner(&o, "c1", Field::MemLimit), Some("10-mem"));
        assert_eq!(simple_owner(&o, "c1", Field::CpuShares), None);
        assert_eq!(simple_owner(&o, "c2", Field::MemLimit), None);
        assert_eq!(hooks_owner(&o, "c1"), None);
    }

    #[test]
    fn cleared_entries_are_reported_as_stored() {
        assert_eq!(seccomp_policy_owner(&sample(), "c1"), Some("-05-x"));
    }

    #[test]
    fn compound_fields_exist_even_when_empty() {
        let o = sample();
        let ns = namespace_owners(&o, "c1").unwrap();
        assert_eq!(ns.get("network").map(String::as_str), Some("20-net"));
        assert_eq!(namespace_owner(&o, "c1", "network"), Some("20-net"));
        assert_eq!(namespace_owner(&o, "c1", "pid"), None);
        assert!(compound_owners(&o, "c1", Field::Sysctl).unwrap().is_empty());
        assert_eq!(sysctl_owner(&o, "c1", "kernel.shmmax"), None);
        assert_eq!(compound_owners(&o, "c1", Field::Mounts), None);
        assert_eq!(namespace_owners(&o, "c2"), None);
    }
}
