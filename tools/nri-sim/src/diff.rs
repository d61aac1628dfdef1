//! A readable structural diff of two JSON documents (OCI specs, NRI
//! messages): changed values by JSON pointer; lists of scalars compared as
//! sets (added and removed entries), lists of objects keyed by
//! `destination`/`type`/`path`/`containerPath`/`container_id`/`id` when
//! they have one (a changed entry is compared field by field under
//! `list[key]`), other lists of objects of the same length entry by entry
//! (`list/0`).

use serde::Serialize;
use serde_json::Value;

/// One difference.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    /// JSON pointer of the changed member (for list entries, the list).
    pub path: String,
    /// `added`, `removed` or `changed`.
    pub op: &'static str,
    /// The old value (removed, changed).
    pub old: Option<Value>,
    /// The new value (added, changed).
    pub new: Option<Value>,
}

fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

fn list_key(v: &Value) -> Option<String> {
    [
        "destination",
        "type",
        "path",
        "containerPath",
        "container_id",
        "id",
    ]
    .iter()
    .find_map(|k| v.get(*k).and_then(Value::as_str))
    .map(String::from)
}

/// The differences from `old` to `new`.
pub fn diff(old: &Value, new: &Value) -> Vec<Change> {
    let mut out = Vec::new();
    walk("", old, new, &mut out);
    out
}

fn walk(path: &str, old: &Value, new: &Value, out: &mut Vec<Change>) {
    if old == new {
        return;
    }
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, va) in a {
                let p = format!("{path}/{}", escape(k));
                match b.get(k) {
                    Some(vb) => walk(&p, va, vb, out),
                    None => out.push(Change {
                        path: p,
                        op: "removed",
                        old: Some(va.clone()),
                        new: None,
                    }),
                }
            }
            for (k, vb) in b {
                if !a.contains_key(k) {
                    out.push(Change {
                        path: format!("{path}/{}", escape(k)),
                        op: "added",
                        old: None,
                        new: Some(vb.clone()),
                    });
                }
            }
        }
        (Value::Array(a), Value::Array(b))
            if a.iter().chain(b).all(|v| !v.is_object() && !v.is_array()) =>
        {
            let before = out.len();
            for v in a.iter().filter(|v| !b.contains(v)) {
                out.push(Change {
                    path: path.into(),
                    op: "removed",
                    old: Some(v.clone()),
                    new: None,
                });
            }
            for v in b.iter().filter(|v| !a.contains(v)) {
                out.push(Change {
                    path: path.into(),
                    op: "added",
                    old: None,
                    new: Some(v.clone()),
                });
            }
            if out.len() == before {
                // Same entries, other order or count.
                out.push(Change {
                    path: path.into(),
                    op: "changed",
                    old: Some(old.clone()),
                    new: Some(new.clone()),
                });
            }
        }
        (Value::Array(a), Value::Array(b)) if a.iter().chain(b).all(|v| list_key(v).is_some()) => {
            for va in a {
                let key = list_key(va);
                match b.iter().find(|vb| list_key(vb) == key) {
                    Some(vb) if vb != va => {
                        walk(&format!("{path}[{}]", key.unwrap_or_default()), va, vb, out)
                    }
                    Some(_) => {}
                    None => out.push(Change {
                        path: path.into(),
                        op: "removed",
                        old: Some(va.clone()),
                        new: None,
                    }),
                }
            }
            for vb in b {
                let key = list_key(vb);
                if !a.iter().any(|va| list_key(va) == key) {
                    out.push(Change {
                        path: path.into(),
                        op: "added",
                        old: None,
                        new: Some(vb.clone()),
                    });
                }
            }
        }
        (Value::Array(a), Value::Array(b))
            if a.len() == b.len() && a.iter().chain(b).all(Value::is_object) =>
        {
            for (i, (va, vb)) in a.iter().zip(b).enumerate() {
                walk(&format!("{path}/{i}"), va, vb, out);
            }
        }
        _ => out.push(Change {
            path: path.into(),
            op: "changed",
            old: Some(old.clone()),
            new: Some(new.clone()),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn objects_lists_and_scalars() {
        let old = json!({"process": {"env": ["A=1", "B=2"], "cwd": "/"},
                         "mounts": [{"destination": "/proc"}],
                         "gone": 1});
        let new = json!({"process": {"env": ["A=1", "C=3"], "cwd": "/srv"},
                         "mounts": [{"destination": "/proc"}, {"destination": "/data", "source": "/x"}],
                         "annotations": {"a/b": "v"}});
        let d = diff(&old, &new);
        let find = |p: &str, op: &str| d.iter().find(|c| c.path == p && c.op == op).cloned();
        assert_eq!(
            find("/process/env", "removed").unwrap().old,
            Some(json!("B=2"))
        );
        assert_eq!(
            find("/process/env", "added").unwrap().new,
            Some(json!("C=3"))
        );
        assert_eq!(
            find("/process/cwd", "changed").unwrap().new,
            Some(json!("/srv"))
        );
        assert_eq!(
            find("/mounts", "added").unwrap().new.unwrap()["destination"],
            "/data"
        );
        assert!(find("/gone", "removed").is_some());
        assert!(find("/annotations", "added").is_some());
        assert_eq!(d.len(), 6, "{d:#?}");
        assert!(diff(&old, &old).is_empty());
    }

    #[test]
    fn lists_of_objects_are_compared_field_by_field() {
        let d = diff(
            &json!({"mounts": [{"destination": "/d", "source": "/a"}], "u": [{"x": 1}]}),
            &json!({"mounts": [{"destination": "/d", "source": "/b"}], "u": [{"x": 2}]}),
        );
        let paths: Vec<&str> = d.iter().map(|c| c.path.as_str()).collect();
        assert_eq!(paths, ["/mounts[/d]/source", "/u/0/x"]);
        let d = diff(&json!([{"x": 1}]), &json!([{"x": 1}, {"x": 2}]));
        assert_eq!((d.len(), d[0].op), (1, "changed"));
    }

    #[test]
    fn reordered_scalar_lists_are_a_change() {
        let d = diff(&json!({"a": [1, 2]}), &json!({"a": [2, 1]}));
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].op, "changed");
    }
}
