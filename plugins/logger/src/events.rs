//! Which events to subscribe to by default.

use nri_stub::api::Event;
use nri_stub::{EventMask, RuntimeInfo};

/// Events that only runtimes speaking NRI v0.10.0 or newer deliver.
const SINCE_V0_10: [Event; 3] = [
    Event::UpdatePodSandbox,
    Event::PostUpdatePodSandbox,
    Event::ValidateContainerAdjustment,
];

/// `implemented` without the events the runtime's NRI version cannot deliver, so a
/// plugin that handles everything still runs on older runtimes (containerd 1.7).
/// An unknown runtime version leaves the mask as it is.
pub fn deliverable(implemented: EventMask, runtime: &RuntimeInfo) -> EventMask {
    let old = runtime
        .nri_version
        .as_deref()
        .and_then(parse_version)
        .is_some_and(|v| v < (0, 10, 0));
    let mut mask = implemented;
    if old {
        for event in SINCE_V0_10 {
            mask.clear(event);
        }
    }
    mask
}

/// `v1.2.3` (with optional `v` and pre-release/build suffix) as a tuple.
fn parse_version(text: &str) -> Option<(u64, u64, u64)> {
    let core = text.trim().trim_start_matches('v');
    let core = core.split(['-', '+']).next()?;
    let mut parts = core.split('.').map(|p| p.parse::<u64>().ok());
    Some((
        parts.next()??,
        parts.next()??,
        parts.next().flatten().unwrap_or(0),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime(nri: Option<&str>) -> RuntimeInfo {
        let mut info = RuntimeInfo::default();
        info.nri_version = nri.map(str::to_string);
        info
    }

    #[test]
    fn old_runtimes_lose_the_newer_events() {
        let all = EventMask::VALID_EVENTS;
        let mask = deliverable(all, &runtime(Some("v0.9.0")));
        assert!(!mask.is_set(Event::ValidateContainerAdjustment));
        assert!(!mask.is_set(Event::UpdatePodSandbox));
        assert!(mask.is_set(Event::CreateContainer));
    }

    #[test]
    fn new_or_unknown_runtimes_keep_everything() {
        let all = EventMask::VALID_EVENTS;
        assert_eq!(deliverable(all, &runtime(Some("v0.12.5"))), all);
        assert_eq!(deliverable(all, &runtime(Some("v0.10.0-rc.1"))), all);
        assert_eq!(deliverable(all, &runtime(None)), all);
        assert_eq!(deliverable(all, &runtime(Some("garbage"))), all);
    }

    #[test]
    fn parses_versions() {
        assert_eq!(parse_version("v0.9.0"), Some((0, 9, 0)));
        assert_eq!(parse_version("1.2"), Some((1, 2, 0)));
        assert_eq!(parse_version("v0.11.0-beta+x"), Some((0, 11, 0)));
        assert_eq!(parse_version("vX"), None);
    }
}
