//! Small helpers for editing a spec held as a `serde_json::Value`.
//!
//! Absent and `null` members are treated alike (as Go's decoder does);
//! members of the wrong JSON type give [`AdjustError::InvalidSpec`].

use serde_json::{Map, Value};

use crate::error::AdjustError;

/// A JSON object.
pub(crate) type Obj = Map<String, Value>;

/// The spec's root object.
pub(crate) fn root(spec: &mut Value) -> Result<&mut Obj, AdjustError> {
    match spec {
        Value::Object(obj) => Ok(obj),
        _ => Err(AdjustError::invalid("the spec", "an object")),
    }
}

/// Joins a parent path and a member name for error messages.
fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// The object member `key` of `parent` (at `path`), created empty when
/// absent or null.
pub(crate) fn obj_mut<'a>(
    parent: &'a mut Obj,
    path: &str,
    key: &str,
) -> Result<&'a mut Obj, AdjustError> {
    let slot = parent.entry(key).or_insert(Value::Null);
    if slot.is_null() {
        *slot = Value::Object(Map::new());
    }
    match slot {
        Value::Object(obj) => Ok(obj),
        _ => Err(AdjustError::invalid(join(path, key), "an object")),
    }
}

/// The object member `key` of `parent`, if present and not null.
pub(crate) fn existing_obj_mut<'a>(
    parent: &'a mut Obj,
    path: &str,
    key: &str,
) -> Result<Option<&'a mut Obj>, AdjustError> {
    match parent.get_mut(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(obj)) => Ok(Some(obj)),
        Some(_) => Err(AdjustError::invalid(join(path, key), "an object")),
    }
}

/// The array member `key` of `parent`, created empty when absent or null.
pub(crate) fn array_mut<'a>(
    parent: &'a mut Obj,
    path: &str,
    key: &str,
) -> Result<&'a mut Vec<Value>, AdjustError> {
    let slot = parent.entry(key).or_insert(Value::Null);
    if slot.is_null() {
        *slot = Value::Array(Vec::new());
    }
    match slot {
        Value::Array(list) => Ok(list),
        _ => Err(AdjustError::invalid(join(path, key), "an array")),
    }
}

/// The array member `key` of `parent`, if present and not null.
pub(crate) fn existing_array_mut<'a>(
    parent: &'a mut Obj,
    path: &str,
    key: &str,
) -> Result<Option<&'a mut Vec<Value>>, AdjustError> {
    match parent.get_mut(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(list)) => Ok(Some(list)),
        Some(_) => Err(AdjustError::invalid(join(path, key), "an array")),
    }
}

/// The string member `key` of `obj`, `""` when absent or null.
pub(crate) fn str_member<'a>(obj: &'a Obj, path: &str, key: &str) -> Result<&'a str, AdjustError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(""),
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(AdjustError::invalid(join(path, key), "a string")),
    }
}

/// The string member `key` of an array element, `""` when the element is
/// not an object or the member is absent; an error when it is not a string.
pub(crate) fn elem_str<'a>(elem: &'a Value, path: &str, key: &str) -> Result<&'a str, AdjustError> {
    match elem {
        Value::Object(obj) => str_member(obj, path, key),
        _ => Err(AdjustError::invalid(path, "an object")),
    }
}

/// Removes member `key` when it is an empty array or object, as Go's
/// `omitempty` would drop it when the spec is written.
pub(crate) fn drop_if_empty(parent: &mut Obj, key: &str) {
    let empty = match parent.get(key) {
        Some(Value::Array(list)) => list.is_empty(),
        Some(Value::Object(obj)) => obj.is_empty(),
        _ => false,
    };
    if empty {
        parent.remove(key);
    }
}

/// Sets `key` to `value`, or removes it when `value` is `None`.
pub(crate) fn set_or_remove(parent: &mut Obj, key: &str, value: Option<Value>) {
    match value {
        Some(v) => {
            parent.insert(key.to_string(), v);
        }
        None => {
            parent.remove(key);
        }
    }
}

/// A JSON array of strings.
pub(crate) fn strings(list: &[String]) -> Value {
    Value::Array(list.iter().cloned().map(Value::String).collect())
}

/// Inserts `key: strings` only when the list is not empty (`omitempty`).
pub(crate) fn put_strings(obj: &mut Obj, key: &str, list: &[String]) {
    if !list.is_empty() {
        obj.insert(key.to_string(), strings(list));
    }
}

/// Inserts `key: value` only when the string is not empty (`omitempty`).
pub(crate) fn put_str(obj: &mut Obj, key: &str, value: &str) {
    if !value.is_empty() {
        obj.insert(key.to_string(), Value::String(value.to_string()));
    }
}

/// Inserts `key: value` only when the number is not zero (`omitempty`).
pub(crate) fn put_nonzero<N>(obj: &mut Obj, key: &str, value: N)
where
    N: Into<Value> + Default + PartialEq,
{
    if value != N::default() {
        obj.insert(key.to_string(), value.into());
    }
}

/// `v` as an object (tests build specs with `json!`).
#[cfg(test)]
pub(crate) fn obj(v: Value) -> Obj {
    match v {
        Value::Object(o) => o,
        _ => panic!("not an object"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn obj_mut_creates_missing_and_null_members() {
        let mut o = obj(json!({"a": null}));
        obj_mut(&mut o, "", "a")
            .unwrap()
            .insert("x".into(), json!(1));
        obj_mut(&mut o, "", "b").unwrap();
        assert_eq!(Value::Object(o), json!({"a": {"x": 1}, "b": {}}));
    }

    #[test]
    fn wrong_types_are_reported_with_their_path() {
        let mut o = obj(json!({"linux": {"resources": 5}, "env": "x"}));
        let linux = obj_mut(&mut o, "", "linux").unwrap();
        let err = obj_mut(linux, "linux", "resources").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid OCI Spec: linux.resources is not an object"
        );
        let err = array_mut(&mut o, "process", "env").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid OCI Spec: process.env is not an array"
        );
        assert!(existing_obj_mut(&mut o, "", "env").is_err());
        assert!(existing_obj_mut(&mut o, "", "none").unwrap().is_none());
    }

    #[test]
    fn drop_if_empty_only_drops_empty_containers() {
        let mut o = obj(json!({"a": [], "b": {}, "c": [1], "d": "", "e": 0}));
        for k in ["a", "b", "c", "d", "e"] {
            drop_if_empty(&mut o, k);
        }
        assert_eq!(Value::Object(o), json!({"c": [1], "d": "", "e": 0}));
    }

    #[test]
    fn put_helpers_skip_zero_values() {
        let mut o = Obj::new();
        put_str(&mut o, "s", "");
        put_strings(&mut o, "l", &[]);
        put_nonzero(&mut o, "n", 0u64);
        assert!(o.is_empty());
        put_str(&mut o, "s", "x");
        put_strings(&mut o, "l", &["y".to_string()]);
        put_nonzero(&mut o, "n", -3i64);
        assert_eq!(Value::Object(o), json!({"s": "x", "l": ["y"], "n": -3}));
    }
}
