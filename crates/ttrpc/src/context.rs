//! [`RequestContext`]: what a handler learns about the call besides its payload.

use std::time::Duration;

use tokio::time::Instant;

use crate::proto;

/// Information about one incoming call, passed to every handler.
///
/// ```
/// use nri_ttrpc::RequestContext;
///
/// let ctx = RequestContext {
///     service: "demo.Echo".into(),
///     method: "Echo".into(),
///     deadline: None,
///     metadata: vec![("k".into(), "v".into())],
/// };
/// assert_eq!(ctx.metadata_value("k"), Some("v"));
/// assert_eq!(ctx.remaining(), None);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestContext {
    /// The called service.
    pub service: String,
    /// The called method.
    pub method: String,
    /// When the caller gives up, from the request's `timeout_nano` (counted
    /// from the moment the request was read). `None` without a timeout. A
    /// handler still running then is dropped, and the request left unanswered
    /// (the caller has timed out).
    pub deadline: Option<Instant>,
    /// Request metadata, in wire order.
    pub metadata: Vec<(String, String)>,
}

impl RequestContext {
    /// Builds the context for a decoded request received at `now`.
    pub(crate) fn from_request(req: &mut proto::RequestIn, now: Instant) -> Self {
        let deadline = match req.timeout_nano {
            0 => None,
            n if n < 0 => Some(now),
            n => now.checked_add(Duration::from_nanos(n.unsigned_abs())),
        };
        RequestContext {
            service: std::mem::take(&mut req.service),
            method: std::mem::take(&mut req.method),
            deadline,
            metadata: std::mem::take(&mut req.metadata)
                .into_iter()
                .map(|kv| (kv.key, kv.value))
                .collect(),
        }
    }

    /// Time left until the deadline (zero once passed), or `None` without one.
    pub fn remaining(&self) -> Option<Duration> {
        self.deadline
            .map(|d| d.saturating_duration_since(Instant::now()))
    }

    /// The first metadata value stored under `key`.
    pub fn metadata_value(&self, key: &str) -> Option<&str> {
        self.metadata
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(timeout_nano: i64) -> proto::RequestIn {
        proto::RequestIn {
            service: "s".into(),
            method: "m".into(),
            payload: Default::default(),
            timeout_nano,
            metadata: vec![proto::KeyValue {
                key: "a".into(),
                value: "b".into(),
            }],
        }
    }

    #[tokio::test]
    async fn deadline_from_timeout_nano() {
        let now = Instant::now();
        let ctx = RequestContext::from_request(&mut request(1_500_000_000), now);
        assert_eq!(ctx.deadline, Some(now + Duration::from_millis(1500)));
        assert_eq!(ctx.service, "s");
        assert_eq!(ctx.method, "m");
        assert_eq!(ctx.metadata, vec![("a".to_string(), "b".to_string())]);

        let ctx = RequestContext::from_request(&mut request(0), now);
        assert_eq!(ctx.deadline, None);

        let ctx = RequestContext::from_request(&mut request(-5), now);
        assert_eq!(ctx.deadline, Some(now));
    }
}
