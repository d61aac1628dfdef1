//! Adjustments of `process`: environment, arguments, OOM score, I/O
//! priority, scheduler and resource limits.

use std::collections::HashMap;

use nri_api::markers::is_marked_for_removal;
use nri_api::{KeyValue, LinuxIoPriority, LinuxScheduler, PosixRlimit};
use serde_json::Value;

use crate::convert;
use crate::error::AdjustError;
use crate::json::{
    array_mut, drop_if_empty, existing_obj_mut, obj_mut, set_or_remove, strings, Obj,
};

fn process(root: &mut Obj) -> Result<&mut Obj, AdjustError> {
    obj_mut(root, "", "process")
}

/// Sets `NAME=value` in place of the first entry named `NAME`, or appends
/// it. Empty names are ignored.
fn put_env(env: &mut Vec<String>, name: &str, value: &str) {
    if name.is_empty() {
        return;
    }
    let prefix = format!("{name}=");
    let entry = format!("{prefix}{value}");
    match env.iter_mut().find(|e| e.starts_with(&prefix)) {
        Some(slot) => *slot = entry,
        None => env.push(entry),
    }
}

fn read_env(process: &Obj) -> Result<Vec<String>, AdjustError> {
    match process.get("env") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(list)) => list
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| AdjustError::invalid("process.env[]", "a string"))
            })
            .collect(),
        Some(_) => Err(AdjustError::invalid("process.env", "an array")),
    }
}

/// Applies environment adjustments.
///
/// Existing variables keep their position (with a new value when
/// adjusted), variables marked for removal are dropped, new ones are
/// appended in adjustment order. Entries without `=` are dropped and
/// duplicate names collapse into the first position, as in the reference.
pub(crate) fn adjust_env(root: &mut Obj, env: &[KeyValue]) -> Result<(), AdjustError> {
    // Last adjustment entry for each (unmarked) name.
    let mut pending: HashMap<&str, &KeyValue> = HashMap::new();
    for e in env {
        pending.insert(is_marked_for_removal(&e.key).0, e);
    }
    if pending.is_empty() {
        return Ok(());
    }
    let mut current = None;
    if let Some(proc_obj) = existing_obj_mut(root, "", "process")? {
        let old = read_env(proc_obj)?;
        let mut rebuilt = Vec::with_capacity(old.len());
        for entry in &old {
            let Some((name, value)) = entry.split_once('=') else {
                continue;
            };
            if let Some(adj) = pending.remove(name) {
                if !is_marked_for_removal(&adj.key).1 {
                    put_env(&mut rebuilt, &adj.key, &adj.value);
                }
                continue;
            }
            put_env(&mut rebuilt, name, value);
        }
        current = Some(rebuilt);
    }
    let mut env_list = current.unwrap_or_default();
    let mut touched_process = false;
    for e in env {
        if is_marked_for_removal(&e.key).1 || !pending.contains_key(e.key.as_str()) {
            continue;
        }
        if !e.key.is_empty() {
            touched_process = true;
        }
        put_env(&mut env_list, &e.key, &e.value);
    }
    if touched_process || existing_obj_mut(root, "", "process")?.is_some() {
        let proc_obj = process(root)?;
        proc_obj.insert("env".into(), strings(&env_list));
        drop_if_empty(proc_obj, "env");
    }
    Ok(())
}

/// Replaces the process arguments when `args` is not empty.
pub(crate) fn adjust_args(root: &mut Obj, args: &[String]) -> Result<(), AdjustError> {
    if !args.is_empty() {
        process(root)?.insert("args".into(), strings(args));
    }
    Ok(())
}

/// Sets `process.oomScoreAdj`.
pub(crate) fn set_oom_score_adj(root: &mut Obj, value: i64) -> Result<(), AdjustError> {
    process(root)?.insert("oomScoreAdj".into(), value.into());
    Ok(())
}

/// Sets (or, for class NONE, clears) `process.ioPriority`.
pub(crate) fn set_io_priority(root: &mut Obj, p: &LinuxIoPriority) -> Result<(), AdjustError> {
    if convert::io_priority_class(p.class).is_empty() && p.class != 0 {
        tracing::warn!(
            class = p.class,
            "unknown I/O priority class, clearing the I/O priority"
        );
    }
    set_or_remove(process(root)?, "ioPriority", convert::io_priority(p));
    Ok(())
}

/// Sets (or, for SCHED_NONE, clears) `process.scheduler`.
pub(crate) fn set_scheduler(root: &mut Obj, s: &LinuxScheduler) -> Result<(), AdjustError> {
    let value = convert::scheduler(s);
    if value.as_ref().and_then(|v| v.get("policy")) == Some(&Value::from("")) {
        tracing::warn!(policy = s.policy, "unknown scheduling policy");
    }
    set_or_remove(process(root)?, "scheduler", value);
    Ok(())
}

/// Appends resource limits to `process.rlimits` (no de-duplication).
pub(crate) fn adjust_rlimits(root: &mut Obj, rlimits: &[PosixRlimit]) -> Result<(), AdjustError> {
    if rlimits.is_empty() {
        return Ok(());
    }
    let list = array_mut(process(root)?, "process", "rlimits")?;
    list.extend(rlimits.iter().map(convert::rlimit));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::obj;
    use nri_api::IoPrioClass;
    use serde_json::json;

    fn kv(k: &str, v: &str) -> KeyValue {
        KeyValue {
            key: k.into(),
            value: v.into(),
        }
    }

    fn env_of(root: &Obj) -> Value {
        root["process"].get("env").cloned().unwrap_or(Value::Null)
    }

    #[test]
    fn env_keeps_positions_and_appends_new_ones() {
        let mut root = obj(json!({"process": {"env": ["A=1", "B=2", "C=3", "NOEQ"]}}));
        adjust_env(
            &mut root,
            &[kv("B", "20"), kv("-C", ""), kv("D", "4"), kv("E", "5")],
        )
        .unwrap();
        assert_eq!(env_of(&root), json!(["A=1", "B=20", "D=4", "E=5"]));
    }

    #[test]
    fn env_duplicates_collapse_and_empty_names_are_dropped() {
        let mut root = obj(json!({"process": {"env": ["A=1", "X=y=z", "A=2", "=v"]}}));
        adjust_env(&mut root, &[kv("Z", "1")]).unwrap();
        assert_eq!(env_of(&root), json!(["A=2", "X=y=z", "Z=1"]));
    }

    #[test]
    fn env_later_entries_win_and_removal_then_add() {
        let mut root = obj(json!({"process": {"env": ["A=0"]}}));
        adjust_env(&mut root, &[kv("A", "1"), kv("A", "2")]).unwrap();
        assert_eq!(env_of(&root), json!(["A=2"]));
        // A removal after an addition of a variable that exists: removed.
        adjust_env(&mut root, &[kv("A", "3"), kv("-A", "")]).unwrap();
        assert!(root["process"].get("env").is_none());
        // ...of one that does not exist yet: the addition is applied.
        adjust_env(&mut root, &[kv("B", "3"), kv("-B", "")]).unwrap();
        assert_eq!(env_of(&root), json!(["B=3"]));
    }

    #[test]
    fn env_without_process() {
        let mut root = obj(json!({}));
        adjust_env(&mut root, &[kv("-A", "")]).unwrap();
        assert!(root.is_empty());
        adjust_env(&mut root, &[kv("A", "1")]).unwrap();
        assert_eq!(Value::Object(root), json!({"process": {"env": ["A=1"]}}));
    }

    #[test]
    fn env_rejects_non_strings() {
        let mut root = obj(json!({"process": {"env": ["A=1", 5]}}));
        let err = adjust_env(&mut root, &[kv("B", "2")]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid OCI Spec: process.env[] is not a string"
        );
    }

    #[test]
    fn args_oom_rlimits() {
        let mut root = obj(json!({"process": {"args": ["old"], "user": {"uid": 0, "gid": 0}}}));
        adjust_args(&mut root, &[]).unwrap();
        assert_eq!(root["process"]["args"], json!(["old"]));
        adjust_args(&mut root, &["a".to_string(), "b".to_string()]).unwrap();
        assert_eq!(root["process"]["args"], json!(["a", "b"]));
        set_oom_score_adj(&mut root, -999).unwrap();
        assert_eq!(root["process"]["oomScoreAdj"], -999);
        let rl = PosixRlimit {
            r#type: "RLIMIT_NOFILE".into(),
            hard: 10,
            soft: 5,
        };
        adjust_rlimits(&mut root, &[rl.clone(), rl]).unwrap();
        assert_eq!(root["process"]["rlimits"].as_array().unwrap().len(), 2);
        assert_eq!(root["process"]["user"], json!({"uid": 0, "gid": 0}));
    }

    #[test]
    fn io_priority_set_and_clear() {
        let mut root = obj(json!({"process": {}}));
        let p = LinuxIoPriority {
            class: IoPrioClass::IoprioClassIdle as i32,
            priority: 7,
        };
        set_io_priority(&mut root, &p).unwrap();
        assert_eq!(
            root["process"]["ioPriority"],
            json!({"class": "IOPRIO_CLASS_IDLE", "priority": 7})
        );
        set_io_priority(&mut root, &LinuxIoPriority::default()).unwrap();
        assert_eq!(root["process"], json!({}));
    }

    #[test]
    fn scheduler_set_and_clear() {
        let mut root = obj(json!({}));
        let s = LinuxScheduler {
            policy: nri_api::LinuxSchedulerPolicy::SchedFifo as i32,
            priority: 10,
            ..Default::default()
        };
        set_scheduler(&mut root, &s).unwrap();
        assert_eq!(
            root["process"]["scheduler"],
            json!({"policy": "SCHED_FIFO", "priority": 10})
        );
        set_scheduler(&mut root, &LinuxScheduler::default()).unwrap();
        assert_eq!(root["process"], json!({}));
    }
}
