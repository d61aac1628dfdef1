//! What the runtime delivers and applies, as the sample plugins check it at
//! Configure: [`deliverable`], [`report_unapplied`].

use nri_stub::api::Event;
use nri_stub::{Adjustment, EventMask, RuntimeInfo};

/// Events that only runtimes speaking NRI v0.10.0 or newer deliver.
const SINCE_V0_10: [Event; 3] = [
    Event::UpdatePodSandbox,
    Event::PostUpdatePodSandbox,
    Event::ValidateContainerAdjustment,
];

/// `implemented` without the events the runtime's NRI version cannot deliver, so a
/// plugin that handles everything still runs on older runtimes (containerd 1.7).
/// An unknown runtime version leaves the mask as it is.
///
/// ```
/// use nri_plugin_util::deliverable;
/// use nri_stub::api::Event;
/// use nri_stub::{EventMask, RuntimeInfo};
///
/// let mut runtime = RuntimeInfo::default();
/// runtime.nri_version = Some("v0.9.0".into());
/// let mask = deliverable(EventMask::VALID_EVENTS, &runtime);
/// assert!(!mask.is_set(Event::ValidateContainerAdjustment));
/// assert!(mask.is_set(Event::CreateContainer));
/// ```
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

/// At Configure: the parts of `needed` (what the plugin adjusts) that the runtime
/// does not apply (see [`RuntimeInfo::capabilities`]), said once in one warning
/// naming the runtime, the parts and what the plugin does instead: leave them out
/// of its adjustments (strip them with
/// [`RuntimeCapabilities::retain`](nri_stub::RuntimeCapabilities::retain)), so that
/// the runtime does not fail the containers.
///
/// ```
/// use nri_plugin_util::report_unapplied;
/// use nri_stub::{Adjustment, RuntimeInfo};
///
/// let mut runtime = RuntimeInfo::default();
/// runtime.name = "docker".into();
/// let left_out = report_unapplied("ulimit-adjuster", &runtime, &[Adjustment::Rlimits]);
/// assert_eq!(left_out, [Adjustment::Rlimits]);
/// ```
pub fn report_unapplied(
    plugin: &str,
    runtime: &RuntimeInfo,
    needed: &[Adjustment],
) -> Vec<Adjustment> {
    let unapplied = runtime.capabilities().unapplied(needed);
    if unapplied.is_empty() {
        return unapplied;
    }
    let parts = unapplied
        .iter()
        .map(|p| p.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let rt = format!("runtime {} {}", runtime.name, runtime.version);
    if unapplied.len() == needed.len() {
        tracing::warn!(
            "{plugin}: {} does not apply {parts}: this plugin adjusts no container on it",
            rt.trim_end()
        );
    } else {
        tracing::warn!(
            "{plugin}: {} does not apply {parts}: this plugin leaves them out of its adjustments",
            rt.trim_end()
        );
    }
    unapplied
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

    #[test]
    fn docker_reports_what_it_does_not_apply() {
        let mut docker = runtime(Some("v0.12.3"));
        docker.name = "docker".into();
        docker.version = "29.2.0".into();
        let needed = [Adjustment::Annotations, Adjustment::Env];
        assert_eq!(
            report_unapplied("logger", &docker, &needed),
            [Adjustment::Annotations]
        );
        let mut containerd = docker.clone();
        containerd.name = "containerd".into();
        assert!(report_unapplied("logger", &containerd, &needed).is_empty());
    }
}
