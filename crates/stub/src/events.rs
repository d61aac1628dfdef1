//! Event-mask helpers: subscription checks at Configure.

use nri_api::{Event, EventMask};

use crate::version::NriVersion;
use crate::Error;

/// Events added in NRI v0.10.0: a runtime speaking an older version refuses
/// subscriptions to them (its valid mask is 0x7ff).
pub(crate) const SINCE_V0_10: &[Event] = &[
    Event::UpdatePodSandbox,
    Event::PostUpdatePodSandbox,
    Event::ValidateContainerAdjustment,
];

/// The mask of the given events (used by `#[nri_stub::plugin]`).
pub fn mask_of(events: &[Event]) -> EventMask {
    EventMask::from_events(events)
}

/// `PrettyString` of a mask, as in error texts.
pub(crate) fn pretty(events: EventMask) -> String {
    events.pretty_string()
}

/// The mask in lowercase hex the way Go's `%x` prints an int32.
pub(crate) fn hex(events: EventMask) -> String {
    let raw = events.raw();
    if raw < 0 {
        format!("-{:x}", -i64::from(raw))
    } else {
        format!("{raw:x}")
    }
}

/// What the plugin subscribes to, given the mask its `configure` returned.
///
/// * empty → every implemented event;
/// * bits without a handler → [`Error::UnhandledEvents`];
/// * events the runtime's (known) NRI version cannot deliver →
///   [`Error::EventsNotSupported`]. This goes beyond the Go stub, which sends the
///   subscription and lets the old runtime refuse it with an unexplained
///   `invalid plugin events`.
pub(crate) fn subscription(
    requested: EventMask,
    implemented: EventMask,
    runtime: &crate::RuntimeInfo,
) -> Result<EventMask, Error> {
    let events = if requested.is_empty() {
        implemented
    } else {
        requested
    };
    let extra = events & !implemented;
    if !extra.is_empty() {
        return Err(Error::UnhandledEvents { events: extra });
    }
    if let Some(version) = runtime.nri_version.as_deref().and_then(NriVersion::parse) {
        if version < NriVersion::V0_10_0 {
            let unsupported = events & mask_of(SINCE_V0_10);
            if !unsupported.is_empty() {
                let source = if runtime.nri_version_inferred {
                    " (inferred)"
                } else {
                    ""
                };
                return Err(Error::EventsNotSupported {
                    events: unsupported,
                    runtime: format!("{} {}", runtime.name, runtime.version),
                    nri_version: format!(
                        "{}{source}",
                        runtime.nri_version.as_deref().unwrap_or_default()
                    ),
                });
            }
        }
    }
    Ok(events)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RuntimeInfo;

    fn runtime(nri: Option<&str>, inferred: bool) -> RuntimeInfo {
        RuntimeInfo {
            name: "containerd".into(),
            version: "v1.7.20".into(),
            nri_version: nri.map(str::to_string),
            nri_version_inferred: inferred,
            ..RuntimeInfo::default()
        }
    }

    fn mask(events: &[Event]) -> EventMask {
        mask_of(events)
    }

    #[test]
    fn empty_request_means_all_implemented() {
        let implemented = mask(&[Event::CreateContainer, Event::StopContainer]);
        let got = subscription(EventMask::EMPTY, implemented, &runtime(None, false));
        assert_eq!(got.ok(), Some(implemented));
    }

    #[test]
    fn subset_is_accepted() {
        let implemented = mask(&[Event::CreateContainer, Event::StopContainer]);
        let got = subscription(
            mask(&[Event::StopContainer]),
            implemented,
            &runtime(Some("v0.12.2"), false),
        );
        assert_eq!(got.ok(), Some(mask(&[Event::StopContainer])));
    }

    #[test]
    fn unhandled_events_are_refused_with_go_text() {
        let implemented = mask(&[Event::CreateContainer]);
        let err = subscription(
            mask(&[
                Event::CreateContainer,
                Event::RunPodSandbox,
                Event::StopContainer,
            ]),
            implemented,
            &runtime(None, false),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "internal error: unhandled events RunPodSandbox,StopContainer (0x201)"
        );
    }

    #[test]
    fn old_runtime_cannot_deliver_new_events() {
        let implemented = mask(&[Event::CreateContainer, Event::ValidateContainerAdjustment]);
        let err = subscription(
            EventMask::EMPTY,
            implemented,
            &runtime(Some("v0.6.1"), true),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "runtime containerd v1.7.20 speaks NRI v0.6.1 (inferred), which cannot deliver the \
             events ValidateContainerAdjustment (0x2000) (they need NRI v0.10.0 or newer); leave \
             them out of the mask returned by configure()"
        );
        // Without those events the same runtime is fine.
        let ok = subscription(
            mask(&[Event::CreateContainer]),
            implemented,
            &runtime(Some("v0.6.1"), true),
        );
        assert!(ok.is_ok());
    }

    #[test]
    fn new_or_unknown_runtime_gets_everything() {
        let implemented = mask(&[Event::UpdatePodSandbox, Event::ValidateContainerAdjustment]);
        for nri in [Some("v0.10.0"), Some("0.12.2"), None, Some("garbage")] {
            assert_eq!(
                subscription(EventMask::EMPTY, implemented, &runtime(nri, false)).ok(),
                Some(implemented),
                "{nri:?}"
            );
        }
    }

    #[test]
    fn go_hex() {
        assert_eq!(hex(EventMask(0x2801)), "2801");
        assert_eq!(hex(EventMask(-1)), "-1");
    }
}
