//! The audit trail: for every validated container, which plugin set which
//! field to what, as one JSON line.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use nri_api::ValidateContainerAdjustmentRequest;
use serde_json::{json, Value as Json};

use crate::eval::Decision;
use crate::items::{class_name, collect};

/// An append-only JSON-lines file, opened on first use and reopened when the
/// configured path changes.
#[derive(Debug, Default)]
pub(crate) struct AuditTrail {
    file: Mutex<Option<(PathBuf, File)>>,
}

impl AuditTrail {
    pub(crate) fn append(&self, path: &Path, line: &str) -> std::io::Result<()> {
        let mut guard = self.file.lock().unwrap_or_else(|p| p.into_inner());
        if guard.as_ref().is_none_or(|(p, _)| p != path) {
            let f = OpenOptions::new().create(true).append(true).open(path)?;
            *guard = Some((path.to_owned(), f));
        }
        let Some((_, f)) = guard.as_mut() else {
            return Ok(());
        };
        let mut buf = Vec::with_capacity(line.len() + 1);
        buf.extend_from_slice(line.as_bytes());
        buf.push(b'\n');
        f.write_all(&buf)
    }
}

/// The audit record of one request (one JSON object).
///
/// `{"time": "<RFC 3339 UTC>", "pod": {...}, "container": {...}, "mode": ...,
/// "verdict": ..., "set": [{"plugin", "field", "key", "value", "removed"}],
/// "violations": [{"plugin", "field", "what", "rule", "at"}]}`
pub fn record(
    req: &ValidateContainerAdjustmentRequest,
    mode: &str,
    verdict: &str,
    decision: &Decision,
) -> Json {
    record_at(req, mode, verdict, decision, SystemTime::now())
}

/// One validation, kept to make its audit record ([`record`]) when asked:
/// what [`PolicyValidator::validate_audited`](crate::PolicyValidator::validate_audited)
/// returns, for a runtime that keeps the trail in memory (cheaper than the
/// JSON record on the path that creates the container).
#[derive(Debug, Clone)]
pub struct AuditEntry {
    req: ValidateContainerAdjustmentRequest,
    mode: &'static str,
    verdict: &'static str,
    decision: Decision,
    time: SystemTime,
}

impl AuditEntry {
    pub(crate) fn new(
        req: &ValidateContainerAdjustmentRequest,
        mode: &'static str,
        verdict: &'static str,
        decision: Decision,
    ) -> AuditEntry {
        AuditEntry {
            req: req.clone(),
            mode,
            verdict,
            decision,
            time: SystemTime::now(),
        }
    }

    /// The validated container's id.
    pub fn container_id(&self) -> &str {
        self.req.container.as_ref().map_or("", |c| c.id.as_str())
    }

    /// `allowed`, `refused` or `would_refuse`.
    pub fn verdict(&self) -> &'static str {
        self.verdict
    }

    /// The audit record, as [`record`] makes it, timed when the container
    /// was validated.
    pub fn record(&self) -> Json {
        record_at(
            &self.req,
            self.mode,
            self.verdict,
            &self.decision,
            self.time,
        )
    }
}

fn record_at(
    req: &ValidateContainerAdjustmentRequest,
    mode: &str,
    verdict: &str,
    decision: &Decision,
    time: SystemTime,
) -> Json {
    let pod = req.pod.as_ref();
    let ctr = req.container.as_ref();
    let set: Vec<Json> = collect(req)
        .iter()
        .map(|item| {
            json!({
                "plugin": item.plugin,
                "field": class_name(item.field),
                "key": item.key,
                "value": item.value_json(),
                "removed": item.removed,
            })
        })
        .collect();
    let mut violations: Vec<Json> = Vec::new();
    if let Some(e) = &decision.default_refusal {
        violations.push(json!({"rule": "default-validator", "reason": e.to_string()}));
    }
    violations.extend(decision.violations.iter().map(|v| {
        json!({
            "plugin": v.plugin,
            "field": v.field,
            "what": v.what,
            "rule": v.rule_label(),
            "at": v.cite,
        })
    }));
    json!({
        "time": rfc3339(time),
        "pod": {
            "namespace": pod.map_or("", |p| p.namespace.as_str()),
            "name": pod.map_or("", |p| p.name.as_str()),
            "uid": pod.map_or("", |p| p.uid.as_str()),
        },
        "container": {
            "id": ctr.map_or("", |c| c.id.as_str()),
            "name": ctr.map_or("", |c| c.name.as_str()),
        },
        "mode": mode,
        "verdict": verdict,
        "set": set,
        "violations": violations,
    })
}

/// `time`, as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
fn rfc3339(time: SystemTime) -> String {
    let now = time
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = now.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        now.subsec_millis()
    )
}

/// Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_819), (2027, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }
}
