//! The output document and the recorder that collects what the adaptation
//! tells the runtime.

use std::collections::BTreeSet;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use nri_api::{ContainerEviction, ContainerUpdate};
use serde::Serialize;
use serde_json::Value;
use tokio::time::Instant;

/// The single JSON document the runner prints.
#[derive(Debug, Default, Serialize)]
pub struct Output {
    pub steps: Vec<StepResult>,
    pub synchronize: Vec<SyncRecord>,
    pub update_calls: Vec<UpdateCall>,
    pub plugins: Vec<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub error: String,
}

/// The outcome of one step.
#[derive(Debug, Serialize)]
pub struct StepResult {
    pub op: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub pod: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub container: String,
    /// The trace the step ran in (scenarios with `trace`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub trace_id: String,
    /// The span id of the step's parent context (scenarios with `trace`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub span_id: String,
    pub error: String,
    pub result: Value,
}

/// One call of the synchronization hook.
#[derive(Debug, Clone, Serialize)]
pub struct SyncRecord {
    pub pods: usize,
    pub containers: usize,
    pub updates: Vec<ContainerUpdate>,
    pub failed: Vec<ContainerUpdate>,
    pub error: String,
}

/// One unsolicited update request of a plugin. `evict` (absent when empty)
/// holds the evictions the plugin asked for; the reference adaptation drops
/// them before the runtime sees them (decision [15]).
#[derive(Debug, Clone, Serialize)]
pub struct UpdateCall {
    pub updates: Vec<ContainerUpdate>,
    pub failed: Vec<ContainerUpdate>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub evict: Vec<ContainerEviction>,
}

#[derive(Default)]
struct State {
    syncs: Vec<SyncRecord>,
    updates: Vec<UpdateCall>,
    plugins: BTreeSet<String>,
    sync_done: usize,
}

/// Collects synchronizations, update calls, registered plugins and the
/// number of completed synchronizations. Safe for concurrent use.
#[derive(Default)]
pub struct Recorder {
    state: Mutex<State>,
}

impl Recorder {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn add_sync(&self, rec: SyncRecord) {
        self.lock().syncs.push(rec);
    }

    pub fn add_update_call(&self, rec: UpdateCall) {
        self.lock().updates.push(rec);
    }

    pub fn add_plugin(&self, name: &str) {
        self.lock().plugins.insert(name.to_string());
    }

    /// Counts plugins whose synchronization completed.
    pub fn synchronized(&self, count: usize) {
        self.lock().sync_done += count;
    }

    /// The number of plugins whose synchronization completed.
    pub fn synchronized_count(&self) -> usize {
        self.lock().sync_done
    }

    fn counts(&self) -> (usize, usize) {
        let s = self.lock();
        (s.sync_done, s.updates.len())
    }

    /// Copies the recorded data into the output document.
    pub fn fill(&self, out: &mut Output) {
        let s = self.lock();
        out.synchronize = s.syncs.clone();
        out.update_calls = s.updates.clone();
        out.plugins = s.plugins.iter().cloned().collect();
    }

    /// Waits until `count` plugins completed synchronization.
    pub async fn wait_plugins(&self, count: i64, timeout: Duration) -> Result<(), String> {
        match poll(timeout, || self.counts().0 as i64 >= count).await {
            true => Ok(()),
            false => Err(format!(
                "timed out waiting for {count} synchronized plugins (have {})",
                self.counts().0
            )),
        }
    }

    /// Waits until `count` unsolicited update calls were recorded.
    pub async fn wait_updates(&self, count: i64, timeout: Duration) -> Result<usize, String> {
        match poll(timeout, || self.counts().1 as i64 >= count).await {
            true => Ok(self.counts().1),
            false => Err(format!(
                "timed out waiting for {count} update calls (have {})",
                self.counts().1
            )),
        }
    }
}

async fn poll(timeout: Duration, done: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while !done() {
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    true
}

/// Writes the document as Go's `json.Encoder` with two-space indentation
/// does: a trailing newline, and `<`, `>`, `&`, U+2028 and U+2029 escaped.
pub fn render(out: &Output) -> Result<String, serde_json::Error> {
    let text = serde_json::to_string_pretty(out)?;
    let mut s = String::with_capacity(text.len() + 1);
    for c in text.chars() {
        match c {
            '<' => s.push_str("\\u003c"),
            '>' => s.push_str("\\u003e"),
            '&' => s.push_str("\\u0026"),
            '\u{2028}' => s.push_str("\\u2028"),
            '\u{2029}' => s.push_str("\\u2029"),
            c => s.push(c),
        }
    }
    s.push('\n');
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn document_shape_matches_the_reference() {
        let rec = Recorder::default();
        rec.add_plugin("10-b");
        rec.add_plugin("00-a");
        rec.add_update_call(UpdateCall {
            updates: vec![],
            failed: vec![],
            evict: vec![],
        });
        let mut out = Output {
            steps: vec![StepResult {
                op: "RunPodSandbox".into(),
                pod: "p<0>".into(),
                container: String::new(),
                trace_id: String::new(),
                span_id: String::new(),
                error: String::new(),
                result: Value::Null,
            }],
            ..Default::default()
        };
        rec.fill(&mut out);
        let text = render(&out).unwrap();
        assert!(text.ends_with("}\n"));
        assert!(text.contains(r#""pod": "p\u003c0\u003e""#), "{text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["plugins"], serde_json::json!(["00-a", "10-b"]));
        assert_eq!(
            v["update_calls"],
            serde_json::json!([{"updates": [], "failed": []}])
        );
        assert!(v.get("error").is_none());
        assert!(v["steps"][0].get("container").is_none());
        assert_eq!(v["steps"][0]["result"], Value::Null);
    }
}
