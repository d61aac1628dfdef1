//! Field ownership: which plugin set which field of which container.
//!
//! One [`Owners`] record lives for the duration of one runtime call
//! (CreateContainer, UpdateContainer or StopContainer). Every change a plugin
//! asks for *claims* the field it touches; a second claim of the same field,
//! or of the same key of a compound field, is a [`ConflictError`], even when
//! both claims come from the same plugin. A plugin can take over a field that
//! another plugin set by *clearing* it first (removal markers in the
//! adjustment); the record then holds `"-<plugin>"`, and only that plugin may
//! claim the field next. OCI hooks *accumulate*: their owner is the
//! comma-separated list of every plugin that added hooks.
//!
//! The record is the protocol's [`OwningPlugins`] message, so it can be handed
//! to validators as is. Owner strings are returned raw: a cleared entry reads
//! `"-<plugin>"`, accumulated hooks read `"a,b"`.
//!
//! ```
//! use nri_adaptation::Owners;
//! use nri_api::Field;
//!
//! let mut owners = Owners::new();
//! owners.claim("ctr0", Field::MemLimit, "00-bar").unwrap();
//! let err = owners.claim("ctr0", Field::MemLimit, "10-foo").unwrap_err();
//! assert_eq!(err.to_string(), r#"plugins "10-foo" and "00-bar" both tried to set MemLimit "#);
//!
//! // Clearing lets the clearing plugin, and only it, claim the field.
//! owners.clear_key("ctr0", Field::Annotations, "key", "10-foo");
//! owners.claim_key("ctr0", Field::Annotations, "key", "10-foo").unwrap();
//! assert_eq!(owners.key_owner("ctr0", Field::Annotations, "key"), Some("10-foo"));
//! ```

use std::collections::BTreeMap;

use nri_api::markers::{is_marked_for_removal, mark_for_removal};
use nri_api::{Field, FieldOwners, OwningPlugins};

use crate::error::ConflictError;

/// How ownership of a [`Field`] is tracked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FieldKind {
    /// One owner for the whole field (e.g. `MemLimit`, `Args`).
    Simple,
    /// One owner per key (e.g. `Annotations` by annotation key, `Mounts` by
    /// destination).
    Compound,
    /// One owner string listing every contributor; never conflicts
    /// (`OciHooks`).
    Accumulated,
}

/// How ownership of `field` is tracked by the merge engine.
///
/// ```
/// use nri_adaptation::{field_kind, FieldKind};
/// use nri_api::Field;
///
/// assert_eq!(field_kind(Field::Sysctl), FieldKind::Compound);
/// assert_eq!(field_kind(Field::CgroupsPath), FieldKind::Simple);
/// assert_eq!(field_kind(Field::OciHooks), FieldKind::Accumulated);
/// ```
pub fn field_kind(field: Field) -> FieldKind {
    match field {
        Field::Annotations
        | Field::Mounts
        | Field::Devices
        | Field::CdiDevices
        | Field::Env
        | Field::HugepageLimits
        | Field::CgroupsUnified
        | Field::Rlimits
        | Field::Namespace
        | Field::Sysctl
        | Field::LinuxNetDevices => FieldKind::Compound,
        Field::OciHooks => FieldKind::Accumulated,
        _ => FieldKind::Simple,
    }
}

/// Ownership records of one runtime call, keyed by container id.
///
/// A thin, typed layer over the protocol message [`OwningPlugins`]. Simple
/// fields use [`claim`](Self::claim)/[`clear`](Self::clear)/[`owner`](Self::owner),
/// compound fields the `_key` variants. Nothing here panics, whatever the
/// ids, keys or plugin names.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Owners {
    inner: OwningPlugins,
}

impl Owners {
    /// An empty record.
    pub fn new() -> Self {
        Self::default()
    }

    /// Claims simple field `field` of container `id` for `plugin`.
    ///
    /// Succeeds if the field has no owner, or was last cleared by `plugin`;
    /// `plugin` then owns it. Fails if any plugin, `plugin` included, owns
    /// it, or another plugin cleared it; the record is then unchanged.
    pub fn claim(&mut self, id: &str, field: Field, plugin: &str) -> Result<(), ConflictError> {
        let owners = self.owners_mut(id);
        let slot = owners.simple.entry(field as i32);
        if let std::collections::btree_map::Entry::Occupied(current) = &slot {
            check(current.get(), plugin, field, None)?;
        }
        *slot.or_default() = plugin.to_string();
        Ok(())
    }

    /// Claims key `key` of compound field `field` of container `id` for
    /// `plugin`, with the same rules as [`claim`](Self::claim).
    pub fn claim_key(
        &mut self,
        id: &str,
        field: Field,
        key: &str,
        plugin: &str,
    ) -> Result<(), ConflictError> {
        let map = self.compound_mut(id, field);
        if let Some(current) = map.get(key) {
            check(current, plugin, field, Some(key))?;
        }
        map.insert(key.to_string(), plugin.to_string());
        Ok(())
    }

    /// Marks simple field `field` of container `id` as cleared by `plugin`
    /// (owner `"-<plugin>"`), whoever owned it.
    pub fn clear(&mut self, id: &str, field: Field, plugin: &str) {
        self.owners_mut(id)
            .simple
            .insert(field as i32, mark_for_removal(plugin));
    }

    /// Marks key `key` of compound field `field` of container `id` as cleared
    /// by `plugin`, whoever owned it.
    pub fn clear_key(&mut self, id: &str, field: Field, key: &str, plugin: &str) {
        self.compound_mut(id, field)
            .insert(key.to_string(), mark_for_removal(plugin));
    }

    /// Adds `plugin` to the owners of an accumulated field: the owner string
    /// becomes `"<old>,<plugin>"` (or `"<plugin>"` when unowned). Never
    /// conflicts.
    pub fn accumulate(&mut self, id: &str, field: Field, plugin: &str) {
        let simple = &mut self.owners_mut(id).simple;
        match simple.get_mut(&(field as i32)) {
            // An existing entry is extended whatever it holds (even an empty
            // name or a clear marker), as in the reference.
            Some(old) => {
                old.push(',');
                old.push_str(plugin);
            }
            None => {
                simple.insert(field as i32, plugin.to_string());
            }
        }
    }

    /// Records that `plugin` added OCI hooks to container `id`
    /// ([`accumulate`](Self::accumulate) on [`Field::OciHooks`]).
    pub fn accumulate_hooks(&mut self, id: &str, plugin: &str) {
        self.accumulate(id, Field::OciHooks, plugin);
    }

    /// Clears the three RDT fields (`RdtClosID`, `RdtSchemata`,
    /// `RdtEnableMonitoring`) of container `id` on behalf of `plugin`.
    pub fn clear_rdt(&mut self, id: &str, plugin: &str) {
        for field in [
            Field::RdtClosId,
            Field::RdtSchemata,
            Field::RdtEnableMonitoring,
        ] {
            self.clear(id, field, plugin);
        }
    }

    /// The owner of simple (or accumulated) field `field` of container `id`,
    /// raw: `"-<plugin>"` if cleared.
    pub fn owner(&self, id: &str, field: Field) -> Option<&str> {
        self.container(id)?
            .simple
            .get(&(field as i32))
            .map(String::as_str)
    }

    /// The owner of key `key` of compound field `field` of container `id`,
    /// raw: `"-<plugin>"` if cleared.
    pub fn key_owner(&self, id: &str, field: Field, key: &str) -> Option<&str> {
        self.key_owners(id, field)?.get(key).map(String::as_str)
    }

    /// All key owners of compound field `field` of container `id`; `Some` as
    /// soon as any key of the field was claimed or cleared.
    pub fn key_owners(&self, id: &str, field: Field) -> Option<&BTreeMap<String, String>> {
        self.container(id)?
            .compound
            .get(&(field as i32))
            .map(|c| &c.owners)
    }

    /// The plugins that added OCI hooks to container `id`, comma-separated.
    pub fn hooks_owner(&self, id: &str) -> Option<&str> {
        self.owner(id, Field::OciHooks)
    }

    /// Owners of the namespaces of container `id`, by namespace type.
    pub fn namespace_owners(&self, id: &str) -> Option<&BTreeMap<String, String>> {
        self.key_owners(id, Field::Namespace)
    }

    /// The whole record of container `id`, if any plugin touched it.
    pub fn container(&self, id: &str) -> Option<&FieldOwners> {
        self.inner.owners.get(id)
    }

    /// True if no plugin claimed or cleared anything.
    pub fn is_empty(&self) -> bool {
        self.inner.owners.is_empty()
    }

    /// The protocol message (as sent to validators).
    pub fn as_proto(&self) -> &OwningPlugins {
        &self.inner
    }

    /// Consumes the record into the protocol message.
    pub fn into_proto(self) -> OwningPlugins {
        self.inner
    }

    fn owners_mut(&mut self, id: &str) -> &mut FieldOwners {
        self.inner.owners.entry(id.to_string()).or_default()
    }

    fn compound_mut(&mut self, id: &str, field: Field) -> &mut BTreeMap<String, String> {
        &mut self
            .owners_mut(id)
            .compound
            .entry(field as i32)
            .or_default()
            .owners
    }
}

impl From<OwningPlugins> for Owners {
    fn from(inner: OwningPlugins) -> Self {
        Self { inner }
    }
}

impl From<Owners> for OwningPlugins {
    fn from(owners: Owners) -> Self {
        owners.inner
    }
}

/// The conflict rule: `current` may be overridden by `plugin` only if it is
/// a clear marker left by `plugin` itself.
fn check(
    current: &str,
    plugin: &str,
    field: Field,
    key: Option<&str>,
) -> Result<(), ConflictError> {
    let (clearer, cleared) = is_marked_for_removal(current);
    if cleared && clearer == plugin {
        return Ok(());
    }
    Err(ConflictError {
        plugin: plugin.to_string(),
        other: clearer.to_string(),
        field,
        key: key.map(str::to_string),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "ctr0";

    #[test]
    fn first_claim_wins_second_conflicts() {
        let mut o = Owners::new();
        o.claim(ID, Field::CpuShares, "00-bar").unwrap();
        let err = o.claim(ID, Field::CpuShares, "10-foo").unwrap_err();
        assert_eq!(
            err.to_string(),
            "plugins \"10-foo\" and \"00-bar\" both tried to set CPUShares "
        );
        assert_eq!(o.owner(ID, Field::CpuShares), Some("00-bar"));
    }

    #[test]
    fn self_conflict() {
        let mut o = Owners::new();
        o.claim_key(ID, Field::Env, "X", "00-a").unwrap();
        let err = o.claim_key(ID, Field::Env, "X", "00-a").unwrap_err();
        assert_eq!(
            err.to_string(),
            "plugins \"00-a\" and \"00-a\" both tried to set Env X"
        );
        o.claim(ID, Field::Args, "00-a").unwrap();
        assert!(o.claim(ID, Field::Args, "00-a").is_err());
    }

    #[test]
    fn clear_then_claim_by_clearer_only() {
        let mut o = Owners::new();
        o.claim_key(ID, Field::Mounts, "/mnt", "00-bar").unwrap();
        o.clear_key(ID, Field::Mounts, "/mnt", "10-foo");
        assert_eq!(o.key_owner(ID, Field::Mounts, "/mnt"), Some("-10-foo"));
        let err = o
            .claim_key(ID, Field::Mounts, "/mnt", "20-baz")
            .unwrap_err();
        // The conflict names the clearer, without the marker.
        assert_eq!(
            err.to_string(),
            "plugins \"20-baz\" and \"10-foo\" both tried to set Mounts /mnt"
        );
        o.claim_key(ID, Field::Mounts, "/mnt", "10-foo").unwrap();
        assert_eq!(o.key_owner(ID, Field::Mounts, "/mnt"), Some("10-foo"));
    }

    #[test]
    fn clear_of_unowned_simple_field() {
        let mut o = Owners::new();
        o.clear(ID, Field::Args, "00-a");
        assert_eq!(o.owner(ID, Field::Args), Some("-00-a"));
        assert!(o.claim(ID, Field::Args, "01-b").is_err());
        o.claim(ID, Field::Args, "00-a").unwrap();
    }

    #[test]
    fn hooks_accumulate() {
        let mut o = Owners::new();
        assert_eq!(o.hooks_owner(ID), None);
        o.accumulate_hooks(ID, "plugin0");
        o.accumulate_hooks(ID, "plugin1");
        o.accumulate_hooks(ID, "plugin2");
        assert_eq!(o.hooks_owner(ID), Some("plugin0,plugin1,plugin2"));
    }

    #[test]
    fn accumulate_with_empty_names_keeps_separators() {
        let mut o = Owners::new();
        o.accumulate_hooks(ID, "");
        // The reference stores "" and then extends it: ",b".
        o.accumulate_hooks(ID, "b");
        assert_eq!(o.hooks_owner(ID), Some(",b"));
    }

    #[test]
    fn clear_rdt_clears_three_fields() {
        let mut o = Owners::new();
        o.claim(ID, Field::RdtClosId, "00-a").unwrap();
        o.clear_rdt(ID, "10-b");
        for f in [
            Field::RdtClosId,
            Field::RdtSchemata,
            Field::RdtEnableMonitoring,
        ] {
            assert_eq!(o.owner(ID, f), Some("-10-b"));
        }
        assert_eq!(o.owner(ID, Field::RdtClass), None);
    }

    #[test]
    fn containers_are_independent() {
        let mut o = Owners::new();
        o.claim(ID, Field::MemLimit, "00-a").unwrap();
        o.claim("other", Field::MemLimit, "10-b").unwrap();
        assert_eq!(o.owner("other", Field::MemLimit), Some("10-b"));
        assert_eq!(o.owner("none", Field::MemLimit), None);
        assert!(o.container("none").is_none());
    }

    #[test]
    fn simple_and_compound_maps_are_separate() {
        let mut o = Owners::new();
        o.claim_key(ID, Field::Annotations, "a", "00-x").unwrap();
        o.claim_key(ID, Field::Annotations, "b", "00-x").unwrap();
        assert_eq!(o.owner(ID, Field::Annotations), None);
        let keys = o.key_owners(ID, Field::Annotations).unwrap();
        assert_eq!(keys.len(), 2);
        let proto = o.as_proto();
        assert_eq!(
            proto.owners[ID].compound[&(Field::Annotations as i32)].owners["a"],
            "00-x"
        );
    }

    #[test]
    fn namespace_owners_exist_after_first_claim() {
        let mut o = Owners::new();
        assert!(o.namespace_owners(ID).is_none());
        o.claim_key(ID, Field::Namespace, "network", "00-x")
            .unwrap();
        assert_eq!(o.namespace_owners(ID).unwrap()["network"], "00-x");
    }

    #[test]
    fn empty_names_do_not_panic() {
        let mut o = Owners::new();
        o.claim("", Field::Args, "").unwrap();
        let err = o.claim("", Field::Args, "").unwrap_err();
        assert_eq!(
            err.to_string(),
            "plugins \"\" and \"\" both tried to set Args "
        );
        // Clearing with an empty name stores "-", which lets "" claim again.
        o.clear("", Field::Args, "");
        assert_eq!(o.owner("", Field::Args), Some("-"));
        o.claim("", Field::Args, "").unwrap();
    }

    #[test]
    fn round_trips_through_proto() {
        let mut o = Owners::new();
        o.claim(ID, Field::LinuxSched, "00-x").unwrap();
        let proto: OwningPlugins = o.clone().into();
        assert_eq!(Owners::from(proto), o);
        assert!(!o.is_empty());
        assert!(Owners::new().is_empty());
    }

    #[test]
    fn kinds() {
        assert_eq!(field_kind(Field::Rlimits), FieldKind::Compound);
        assert_eq!(field_kind(Field::LinuxNetDevices), FieldKind::Compound);
        assert_eq!(field_kind(Field::MemoryPolicy), FieldKind::Simple);
        assert_eq!(field_kind(Field::PidsLimit), FieldKind::Simple);
    }
}
