//! Normalizations of the output documents, one function per documented
//! decision of `docs/decisions.md` where nri-rs differs from the Go
//! reference on purpose. Nothing else is normalized: every other difference
//! is a divergence.

use serde_json::Value;

use super::batch::Batch;
use super::case::case_of_container;

/// Applies every normalization to both documents. `candidate_is_reference`
/// (Go against Go) relaxes decision [16]: both sides may name any of the
/// rejecting validators.
pub fn normalize(
    batch: &Batch,
    reference: &mut Value,
    candidate: &mut Value,
    candidate_is_reference: bool,
) {
    for doc in [&mut *reference, &mut *candidate] {
        decision_15_evictions(doc);
        decision_7_update_pids(doc);
        decision_20_net_device_removal_value(doc);
    }
    decision_16_first_rejecting_validator(batch, reference, candidate, candidate_is_reference);
}

fn step_results(doc: &mut Value) -> impl Iterator<Item = &mut Value> {
    doc.get_mut("steps")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(|s| s.get_mut("result"))
        .filter(|r| r.is_object())
}

/// Decision [15]: nri-rs returns the evictions plugins ask for in
/// CreateContainer/UpdateContainer replies and passes those of unsolicited
/// updates to the runtime; the reference drops them. The `evict` lists of
/// step results and of `update_calls` are removed from both documents.
pub fn decision_15_evictions(doc: &mut Value) {
    for result in step_results(doc) {
        if let Some(map) = result.as_object_mut() {
            map.remove("evict");
        }
    }
    let calls = doc.get_mut("update_calls").and_then(Value::as_array_mut);
    for call in calls.into_iter().flatten() {
        if let Some(map) = call.as_object_mut() {
            map.remove("evict");
        }
    }
}

/// Decision [7]: nri-rs honours a pids limit asked for in a container
/// update; the reference drops it (it looks at the base resources). The
/// generator never lets two updates of one event claim the same
/// container's pids and never sends pids in UpdateContainer requests, so
/// the only difference left is the `pids` of merged updates, removed here
/// from both documents. Resources (and a `linux` part) left empty by the
/// removal are removed too, as the reference's `Strip` would have.
pub fn decision_7_update_pids(doc: &mut Value) {
    for result in step_results(doc) {
        let Some(updates) = result.get_mut("update").and_then(Value::as_array_mut) else {
            continue;
        };
        for u in updates {
            let Some(linux) = u.get_mut("linux").and_then(Value::as_object_mut) else {
                continue;
            };
            let Some(res) = linux.get_mut("resources").and_then(Value::as_object_mut) else {
                continue;
            };
            if res.remove("pids").is_none() || !res.is_empty() {
                continue;
            }
            linux.remove("resources");
            if linux.is_empty() {
                if let Some(u) = u.as_object_mut() {
                    u.remove("linux");
                }
            }
        }
    }
}

/// Decision [20]: a net-device removal marker (`"-eth0"`) in a merged
/// CreateContainer reply holds an empty device in nri-rs and a nil device in
/// the reference; the value carries no meaning (runtimes look at the key).
/// The reference's `null` under a `-` key becomes `{}`.
pub fn decision_20_net_device_removal_value(doc: &mut Value) {
    for result in step_results(doc) {
        let devices = result
            .pointer_mut("/adjust/linux/net_devices")
            .and_then(Value::as_object_mut);
        for (key, value) in devices.into_iter().flatten() {
            if key.starts_with('-') && value.is_null() {
                *value = Value::Object(Default::default());
            }
        }
    }
}

/// The error text of a validator rejection (the reference's wording).
pub fn rejection_text(plugin: &str, reason: &str) -> String {
    let reason = if reason.is_empty() {
        "unknown rejection reason"
    } else {
        reason
    };
    format!("validator {plugin:?} rejected container adjustment, reason: {reason}")
}

/// Decision [16]: when several validators reject, nri-rs names the first
/// in plugin order; the reference names whichever answered first. When
/// the reference's CreateContainer error is the rejection of one of the
/// case's rejecting validators and ours is the first one's, the
/// reference's text is replaced by ours. With `any_order` (Go against Go)
/// the candidate may name any of them too.
pub fn decision_16_first_rejecting_validator(
    batch: &Batch,
    reference: &mut Value,
    candidate: &Value,
    any_order: bool,
) {
    let Some(ref_steps) = reference.get_mut("steps").and_then(Value::as_array_mut) else {
        return;
    };
    let Some(cand_steps) = candidate.get("steps").and_then(Value::as_array) else {
        return;
    };
    for (r, c) in ref_steps.iter_mut().zip(cand_steps) {
        if r["op"] != "CreateContainer" {
            continue;
        }
        let Some(case) = r["container"]
            .as_str()
            .and_then(case_of_container)
            .and_then(|k| batch.cases.iter().find(|c| c.number == k))
        else {
            continue;
        };
        let rejecting = case.rejecting_validators(&batch.pool);
        if rejecting.len() < 2 {
            continue;
        }
        let texts: Vec<String> = rejecting
            .iter()
            .map(|(p, reason)| rejection_text(p, reason))
            .collect();
        let ref_err = r["error"].as_str().unwrap_or_default();
        let cand_err = c["error"].as_str().unwrap_or_default();
        let cand_ok = if any_order {
            texts.iter().any(|t| t == cand_err)
        } else {
            cand_err == texts[0]
        };
        if texts.iter().any(|t| t == ref_err) && cand_ok {
            r["error"] = Value::String(cand_err.to_owned());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn evictions_are_dropped_from_step_results_and_update_calls() {
        let mut doc = json!({"steps": [
            {"op": "CreateContainer", "result": {"adjust": {}, "evict": [{"container_id": "x"}]}},
            {"op": "RunPodSandbox", "result": null}
        ], "update_calls": [{"evict": [1], "updates": []}], "synchronize": [{"evict": 1}]});
        decision_15_evictions(&mut doc);
        assert_eq!(doc["steps"][0]["result"], json!({"adjust": {}}));
        assert_eq!(doc["update_calls"][0], json!({"updates": []}));
        assert_eq!(doc["synchronize"][0]["evict"], json!(1));
    }

    #[test]
    fn update_pids_are_dropped() {
        let mut doc = json!({"steps": [{"op": "StopContainer", "result": {"update": [
            {"container_id": "a", "linux": {"resources": {"pids": {"limit": 5}, "cpu": {"shares": {"value": 2}}}}}
        ]}}]});
        decision_7_update_pids(&mut doc);
        assert_eq!(
            doc["steps"][0]["result"]["update"][0]["linux"]["resources"],
            json!({"cpu": {"shares": {"value": 2}}})
        );
        let mut doc = json!({"steps": [{"op": "UpdateContainer", "result": {"update": [
            {"container_id": "a", "linux": {"resources": {"pids": {"limit": 5}}}},
            {"container_id": "b", "linux": {"resources": {}}}
        ]}}]});
        decision_7_update_pids(&mut doc);
        assert_eq!(
            doc["steps"][0]["result"]["update"],
            json!([{"container_id": "a"}, {"container_id": "b", "linux": {"resources": {}}}])
        );
    }

    #[test]
    fn rejection_text_matches_the_reference() {
        assert_eq!(
            rejection_text("10-a", ""),
            "validator \"10-a\" rejected container adjustment, reason: unknown rejection reason"
        );
    }
}
