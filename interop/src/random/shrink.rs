//! Minimizing a divergent case: drop plugins, behaviours, adjustment
//! fields and steps one at a time while the divergence persists.

use serde_json::Value;

use super::batch::Batch;
use super::case::Case;

/// Every batch one removal away from `batch` (a single-case batch), most
/// drastic first. Removals that would make a shape the generator excludes
/// (see `case.rs`) are skipped.
pub fn candidates(batch: &Batch) -> Vec<Batch> {
    let mut out = all_candidates(batch);
    out.retain(|b| {
        b.cases.iter().all(|c| {
            c.behaviors
                .values()
                .filter_map(|beh| beh.adjust.as_ref())
                .all(|a| super::fields::pure_mount_removals(a) <= 1)
        })
    });
    out
}

fn all_candidates(batch: &Batch) -> Vec<Batch> {
    let mut out = Vec::new();
    let Some(case) = batch.cases.first() else {
        return out;
    };
    // Whole pool plugins (behaviour positions shift down).
    for i in 0..batch.pool.plugins.len() {
        if batch.pool.plugins.len() <= 1 {
            break;
        }
        let mut b = batch.clone();
        b.pool.plugins.remove(i);
        let c = &mut b.cases[0];
        c.behaviors = std::mem::take(&mut c.behaviors)
            .into_iter()
            .filter(|(p, _)| *p != i)
            .map(|(p, beh)| (if p > i { p - 1 } else { p }, beh))
            .collect();
        out.push(b);
    }
    // Pool-wide extras.
    for i in 0..batch.pool.plugins.len() {
        let plugin = &batch.pool.plugins[i];
        if plugin.unsolicited.is_some() {
            let mut b = batch.clone();
            b.pool.plugins[i].unsolicited = None;
            out.push(b);
        }
        if !plugin.sync_updates.is_empty() {
            let mut b = batch.clone();
            b.pool.plugins[i].sync_updates.clear();
            out.push(b);
        }
        for e in 0..plugin.events.len() {
            let mut b = batch.clone();
            b.pool.plugins[i].events.remove(e);
            if !b.pool.plugins[i].events.is_empty() {
                out.push(b);
            }
        }
    }
    // Steps.
    let steps: [fn(&mut Case); 4] = [
        |c| c.start = false,
        |c| c.update = None,
        |c| c.stop = false,
        |c| c.remove = false,
    ];
    for f in steps {
        let mut b = batch.clone();
        f(&mut b.cases[0]);
        if b.cases[0] != *case {
            out.push(b);
        }
    }
    // Parts of behaviours.
    for (&p, beh) in &case.behaviors {
        let mut with = |edit: &dyn Fn(&mut super::case::Behavior)| {
            let mut b = batch.clone();
            if let Some(x) = b.cases[0].behaviors.get_mut(&p) {
                edit(x);
            }
            if b.cases[0] != *case {
                out.push(b);
            }
        };
        with(&|x| x.reject = None);
        for ev in beh.error.keys() {
            with(&|x| {
                x.error.remove(ev);
            });
        }
        for (ev, list) in &beh.updates {
            with(&|x| {
                x.updates.remove(ev);
            });
            for k in 0..list.len() {
                with(&|x| {
                    if let Some(l) = x.updates.get_mut(ev) {
                        l.remove(k);
                    }
                });
            }
        }
        for ev in beh.evict.keys() {
            with(&|x| {
                x.evict.remove(ev);
            });
        }
        if let Some(adj) = &beh.adjust {
            with(&|x| x.adjust = None);
            for path in leaf_paths(adj, 3) {
                with(&|x| {
                    if let Some(a) = x.adjust.as_mut() {
                        remove_path(a, &path);
                    }
                });
            }
        }
    }
    out
}

/// Paths of removable parts: object members down to `depth`, and list
/// elements.
fn leaf_paths(v: &Value, depth: usize) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    walk(v, depth, &mut Vec::new(), &mut out);
    out
}

fn walk(v: &Value, depth: usize, cur: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                cur.push(k.clone());
                out.push(cur.clone());
                if depth > 0 {
                    walk(child, depth - 1, cur, out);
                }
                cur.pop();
            }
        }
        Value::Array(a) if a.len() > 1 => {
            for i in 0..a.len() {
                cur.push(format!("#{i}"));
                out.push(cur.clone());
                cur.pop();
            }
        }
        _ => {}
    }
}

fn remove_path(v: &mut Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut cur = v;
    for key in parents {
        let next = match key.strip_prefix('#').and_then(|i| i.parse::<usize>().ok()) {
            Some(i) => cur.get_mut(i),
            None => cur.get_mut(key.as_str()),
        };
        let Some(next) = next else { return };
        cur = next;
    }
    match (
        last.strip_prefix('#').and_then(|i| i.parse::<usize>().ok()),
        cur,
    ) {
        (Some(i), Value::Array(a)) if i < a.len() => {
            a.remove(i);
        }
        (None, Value::Object(m)) => {
            m.remove(last.as_str());
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_cover_members_and_list_elements() {
        let v = json!({"a": {"b": 1}, "l": [1, 2]});
        let paths = leaf_paths(&v, 3);
        assert!(paths.contains(&vec!["a".to_owned(), "b".to_owned()]));
        assert!(paths.contains(&vec!["l".to_owned(), "#1".to_owned()]));
        let mut w = v.clone();
        remove_path(&mut w, &["l".to_owned(), "#0".to_owned()]);
        remove_path(&mut w, &["a".to_owned(), "b".to_owned()]);
        assert_eq!(w, json!({"a": {}, "l": [2]}));
    }

    #[test]
    fn every_candidate_is_smaller() {
        let b = Batch::generate(3, 0, [4]);
        for c in candidates(&b) {
            assert_ne!(c, b);
        }
    }
}
