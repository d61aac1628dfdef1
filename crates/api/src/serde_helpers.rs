//! Small serde helpers used by the generated protocol types.
//!
//! They make the JSON form of our types behave like Go's `encoding/json` on
//! the reference types: zero values are left out when writing (`omitempty`),
//! and an explicit `null` reads as the zero value.

use serde::{Deserialize, Deserializer};

/// True when `value` equals its type's default (zero) value.
pub(crate) fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

/// Reads a value, mapping JSON `null` to the type's default value.
pub(crate) fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// Reads a map whose values are messages, mapping JSON `null` (for the map
/// or for a value) to the default value.
pub(crate) fn null_as_default_map<'de, D, K, V>(
    deserializer: D,
) -> Result<std::collections::BTreeMap<K, V>, D::Error>
where
    D: Deserializer<'de>,
    K: Ord + Deserialize<'de>,
    V: Default + Deserialize<'de>,
{
    let map = Option::<std::collections::BTreeMap<K, Option<V>>>::deserialize(deserializer)?;
    Ok(map
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.unwrap_or_default()))
        .collect())
}
