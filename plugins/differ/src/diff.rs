//! Differences between two snapshots of an object: as a list of changed paths, or
//! as a line diff of their YAML forms.

use std::fmt;

use serde_json::Value;

/// What happened to one path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    /// The path is new.
    Create,
    /// The path's value changed.
    Update,
    /// The path is gone.
    Delete,
}

impl fmt::Display for ChangeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ChangeKind::Create => "create",
            ChangeKind::Update => "update",
            ChangeKind::Delete => "delete",
        })
    }
}

/// One changed leaf: its path (field names, map keys, list positions), its
/// value before and after.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// Create, update or delete.
    pub kind: ChangeKind,
    /// Field names, map keys and list positions leading to the value.
    pub path: Vec<String>,
    /// The value before, `None` for a creation.
    pub from: Option<Value>,
    /// The value after, `None` for a deletion.
    pub to: Option<Value>,
}

impl fmt::Display for Change {
    /// `create: [annotations key]: From: <nil> -> To: value`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: [{}]: From: {} -> To: {}",
            self.kind,
            self.path.join(" "),
            show(self.from.as_ref()),
            show(self.to.as_ref())
        )
    }
}

fn show(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => "<nil>".to_string(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// The leaf changes from `old` to `new`: maps compared key by key, lists
/// position by position; a value whose type changed is one update.
pub fn changes(old: &Value, new: &Value) -> Vec<Change> {
    let mut out = Vec::new();
    walk(&mut Vec::new(), Some(old), Some(new), &mut out);
    out
}

fn walk(path: &mut Vec<String>, old: Option<&Value>, new: Option<&Value>, out: &mut Vec<Change>) {
    match (old, new) {
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                path.push(key.clone());
                walk(path, a.get(key), b.get(key), out);
                path.pop();
            }
        }
        (Some(Value::Array(a)), Some(Value::Array(b))) => {
            for i in 0..a.len().max(b.len()) {
                path.push(i.to_string());
                walk(path, a.get(i), b.get(i), out);
                path.pop();
            }
        }
        // A new or removed container value: one change per leaf inside it.
        (None, Some(Value::Object(_) | Value::Array(_)))
        | (Some(Value::Object(_) | Value::Array(_)), None) => {
            let empty = match old.or(new) {
                Some(Value::Object(_)) => Value::Object(Default::default()),
                _ => Value::Array(Vec::new()),
            };
            walk(path, old.or(Some(&empty)), new.or(Some(&empty)), out);
        }
        (Some(a), Some(b)) if a == b => {}
        (None, None) => {}
        (from, to) => out.push(Change {
            kind: match (from, to) {
                (None, _) => ChangeKind::Create,
                (_, None) => ChangeKind::Delete,
                _ => ChangeKind::Update,
            },
            path: path.clone(),
            from: from.cloned(),
            to: to.cloned(),
        }),
    }
}

/// Above this many line pairs the YAML diff shows the whole text replaced
/// rather than search for the common lines.
const MAX_LCS_CELLS: usize = 4_000_000;

/// A line diff of two texts: every line of the result starts with `' '`
/// (in both), `'-'` (only in `old`) or `'+'` (only in `new`), followed by a
/// space. `None` if the texts are equal.
pub fn line_diff(old: &str, new: &str) -> Option<Vec<String>> {
    if old == new {
        return None;
    }
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let mut out = Vec::with_capacity(a.len().max(b.len()));
    let cells = (a.len() + 1).saturating_mul(b.len() + 1);
    if cells > MAX_LCS_CELLS {
        out.extend(a.iter().map(|l| format!("- {l}")));
        out.extend(b.iter().map(|l| format!("+ {l}")));
        return Some(out);
    }
    // lcs[i][j]: length of the longest common subsequence of a[i..] and b[j..].
    let width = b.len() + 1;
    let mut lcs = vec![0u32; cells];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i * width + j] = if a[i] == b[j] {
                lcs[(i + 1) * width + j + 1] + 1
            } else {
                lcs[(i + 1) * width + j].max(lcs[i * width + j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            out.push(format!("  {}", a[i]));
            i += 1;
            j += 1;
        } else if i < a.len()
            && (j == b.len() || lcs[(i + 1) * width + j] >= lcs[i * width + j + 1])
        {
            out.push(format!("- {}", a[i]));
            i += 1;
        } else {
            out.push(format!("+ {}", b[j]));
            j += 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reports_created_updated_and_deleted_leaves() {
        let old = json!({"name": "c", "annotations": {"a": "1", "gone": "x"}, "env": ["A=1"]});
        let new = json!({"name": "d", "annotations": {"a": "1", "new": "y"},
                         "env": ["A=1", "B=2"], "linux": {"oom_score_adj": {"value": 5}}});
        let shown: Vec<String> = changes(&old, &new).iter().map(|c| c.to_string()).collect();
        assert_eq!(
            shown,
            [
                "delete: [annotations gone]: From: x -> To: <nil>",
                "create: [annotations new]: From: <nil> -> To: y",
                "create: [env 1]: From: <nil> -> To: B=2",
                "create: [linux oom_score_adj value]: From: <nil> -> To: 5",
                "update: [name]: From: c -> To: d",
            ]
        );
    }

    #[test]
    fn equal_values_have_no_changes() {
        let v = json!({"a": [1, {"b": null}], "c": "d"});
        assert_eq!(changes(&v, &v.clone()), []);
        let removed = changes(&json!({"l": [1, 2]}), &json!({}));
        assert_eq!(removed.len(), 2);
        assert!(removed.iter().all(|c| c.kind == ChangeKind::Delete));
        let retyped = changes(&json!({"a": 1}), &json!({"a": [1]}));
        assert_eq!(retyped[0].kind, ChangeKind::Update);
    }

    #[test]
    fn line_diff_marks_only_what_changed() {
        assert_eq!(line_diff("a\nb\n", "a\nb\n"), None);
        let d = line_diff(
            "name: c\nenv:\n- A=1\nid: x\n",
            "name: c\nenv:\n- A=1\n- B=2\nid: y\n",
        )
        .unwrap();
        assert_eq!(
            d,
            [
                "  name: c",
                "  env:",
                "  - A=1",
                "- id: x",
                "+ - B=2",
                "+ id: y"
            ]
        );
        assert_eq!(line_diff("", "x").unwrap(), ["+ x"]);
        assert_eq!(line_diff("x", "").unwrap(), ["- x"]);
    }
}
