//! Event subscriptions: [`EventMask`] and the names of [`Event`]s.
//!
//! A plugin tells the runtime which lifecycle events it wants in
//! `ConfigureResponse::events`, a bit mask in which event `e` (enum value
//! `e >= 1`) is bit `1 << (e - 1)`.
//!
//! ```
//! use nri_api::{Event, EventMask};
//!
//! let mask: EventMask = "CreateContainer,StopContainer".parse().unwrap();
//! assert!(mask.is_set(Event::CreateContainer));
//! assert_eq!(mask.raw(), 0x208);
//! assert_eq!(mask.to_string(), "CreateContainer,StopContainer");
//! ```

use std::fmt;
use std::ops::{BitAnd, BitOr, BitOrAssign, Not};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::gofmt;
use crate::Event;

/// Every event in pretty-name order of the enum, with its parse name.
const EVENT_NAMES: [(Event, &str, &str); 14] = [
    (Event::RunPodSandbox, "RunPodSandbox", "runpodsandbox"),
    (Event::StopPodSandbox, "StopPodSandbox", "stoppodsandbox"),
    (
        Event::RemovePodSandbox,
        "RemovePodSandbox",
        "removepodsandbox",
    ),
    (Event::CreateContainer, "CreateContainer", "createcontainer"),
    (
        Event::PostCreateContainer,
        "PostCreateContainer",
        "postcreatecontainer",
    ),
    (Event::StartContainer, "StartContainer", "startcontainer"),
    (
        Event::PostStartContainer,
        "PostStartContainer",
        "poststartcontainer",
    ),
    (Event::UpdateContainer, "UpdateContainer", "updatecontainer"),
    (
        Event::PostUpdateContainer,
        "PostUpdateContainer",
        "postupdatecontainer",
    ),
    (Event::StopContainer, "StopContainer", "stopcontainer"),
    (Event::RemoveContainer, "RemoveContainer", "removecontainer"),
    (
        Event::UpdatePodSandbox,
        "UpdatePodSandbox",
        "updatepodsandbox",
    ),
    (
        Event::PostUpdatePodSandbox,
        "PostUpdatePodSandbox",
        "postupdatepodsandbox",
    ),
    (
        Event::ValidateContainerAdjustment,
        "ValidateContainerAdjustment",
        "validatecontaineradjustment",
    ),
];

impl Event {
    /// The human-readable name of an event, e.g. `"CreateContainer"`.
    ///
    /// `Unknown` and `Last` are not real events and read `unknown(<value>)`,
    /// as any other number would (see [`pretty_event_name`]).
    ///
    /// ```
    /// use nri_api::Event;
    /// assert_eq!(Event::PostStartContainer.pretty_name(), "PostStartContainer");
    /// assert_eq!(Event::Last.pretty_name(), "unknown(15)");
    /// ```
    pub fn pretty_name(self) -> String {
        pretty_event_name(self as i32)
    }
}

/// The human-readable name of the event with enum value `event`, or
/// `unknown(<value>)` for values that are not real events.
///
/// ```
/// assert_eq!(nri_api::event::pretty_event_name(1), "RunPodSandbox");
/// assert_eq!(nri_api::event::pretty_event_name(99), "unknown(99)");
/// ```
pub fn pretty_event_name(event: i32) -> String {
    EVENT_NAMES
        .iter()
        .find(|(e, _, _)| *e as i32 == event)
        .map(|(_, pretty, _)| (*pretty).to_string())
        .unwrap_or_else(|| format!("unknown({event})"))
}

/// The mask bit of event value `event`: `1 << (event - 1)`. Values outside
/// `1..=32` have no bit and yield 0.
const fn bit_of(event: i32) -> i32 {
    if event >= 1 && event <= 32 {
        // 1 << 31 is the sign bit, as it is for Go's int32 mask.
        (1u32 << (event - 1)) as i32
    } else {
        0
    }
}

/// Error of [`EventMask::parse`]: a name that is not an event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown event {}", gofmt::quote(.name))]
pub struct ParseEventError {
    /// The offending (lower-cased, untrimmed) piece of the input.
    pub name: String,
}

/// A set of [`Event`]s as the bit mask used on the wire.
///
/// The inner value is the raw mask of `ConfigureResponse::events`.
///
/// ```
/// use nri_api::{Event, EventMask};
///
/// let mut mask = EventMask::from_events(&[Event::RunPodSandbox, Event::StopContainer]);
/// mask.set(Event::CreateContainer).clear(Event::RunPodSandbox);
/// assert_eq!(mask.pretty_string(), "CreateContainer,StopContainer");
/// assert_eq!(EventMask::parse(&["pod"]).unwrap().raw(), 0x1807);
/// assert_eq!(
///     EventMask::parse(&["bogus"]).unwrap_err().to_string(),
///     r#"unknown event "bogus""#
/// );
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct EventMask(pub i32);

impl EventMask {
    /// No events.
    pub const EMPTY: EventMask = EventMask(0);

    /// Every event a plugin can subscribe to (events 1 to 14): `0x3FFF`.
    pub const VALID_EVENTS: EventMask = EventMask(bit_of(Event::Last as i32) - 1);

    /// The mask bit of one event.
    pub const fn bit(event: Event) -> i32 {
        bit_of(event as i32)
    }

    /// A mask with exactly the given events set; usable in constants.
    ///
    /// ```
    /// use nri_api::{Event, EventMask};
    ///
    /// const CONTAINERS: EventMask =
    ///     EventMask::from_events(&[Event::CreateContainer, Event::StopContainer]);
    /// assert!(CONTAINERS.is_set(Event::StopContainer));
    /// assert!(!CONTAINERS.is_set(Event::RunPodSandbox));
    /// ```
    pub const fn from_events(events: &[Event]) -> EventMask {
        let mut bits = 0;
        let mut i = 0;
        while i < events.len() {
            bits |= Self::bit(events[i]);
            i += 1;
        }
        EventMask(bits)
    }

    /// The raw wire value.
    pub const fn raw(self) -> i32 {
        self.0
    }

    /// True when no bit is set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Sets the bit of `event`.
    pub fn set(&mut self, event: Event) -> &mut Self {
        self.0 |= Self::bit(event);
        self
    }

    /// Clears the bit of `event`.
    pub fn clear(&mut self, event: Event) -> &mut Self {
        self.0 &= !Self::bit(event);
        self
    }

    /// True when the bit of `event` is set.
    pub const fn is_set(self, event: Event) -> bool {
        self.0 & Self::bit(event) != 0
    }

    /// True when the bit of the event with raw enum value `event` is set
    /// (for `StateChangeEvent::event`, which is stored as a number).
    pub const fn is_set_raw(self, event: i32) -> bool {
        self.0 & bit_of(event) != 0
    }

    /// The bits that do not belong to any subscribable event.
    ///
    /// ```
    /// use nri_api::EventMask;
    /// assert_eq!(EventMask(0x4001).invalid_bits(), 0x4000);
    /// ```
    pub const fn invalid_bits(self) -> i32 {
        self.0 & !Self::VALID_EVENTS.0
    }

    /// The events set in this mask, in enum order.
    pub fn events(self) -> impl Iterator<Item = Event> {
        EVENT_NAMES
            .iter()
            .map(|(e, _, _)| *e)
            .filter(move |e| self.is_set(*e))
    }

    /// Parses event names into a mask.
    ///
    /// Each argument is lower-cased and split at commas. A piece is one of:
    /// `all` (every event), `pod` or `podsandbox` (the pod events),
    /// `container` (the container events, validation included), or an event
    /// name, compared case-insensitively after trimming white space. The
    /// special words are matched before trimming, so `" all"` is an error, as
    /// is an empty piece.
    pub fn parse<S: AsRef<str>>(args: &[S]) -> Result<EventMask, ParseEventError> {
        let mut mask = EventMask::EMPTY;
        for arg in args {
            let lower = arg.as_ref().to_lowercase();
            for piece in lower.split(',') {
                match piece {
                    "all" => mask.0 |= Self::VALID_EVENTS.0,
                    "pod" | "podsandbox" => mask.set_matching("pod"),
                    "container" => mask.set_matching("container"),
                    _ => {
                        let trimmed = piece.trim();
                        let event = EVENT_NAMES
                            .iter()
                            .find(|(_, _, parse)| *parse == trimmed)
                            .map(|(e, _, _)| *e)
                            .ok_or_else(|| ParseEventError {
                                name: piece.to_string(),
                            })?;
                        mask.set(event);
                    }
                }
            }
        }
        Ok(mask)
    }

    fn set_matching(&mut self, word: &str) {
        for (event, _, parse) in EVENT_NAMES.iter() {
            if parse.contains(word) {
                self.set(*event);
            }
        }
    }

    /// The names of the set events, comma-separated, in enum order; bits of
    /// no known event are appended as `unknown(0x<hex>)`. Empty for an
    /// empty mask.
    pub fn pretty_string(&self) -> String {
        let mut rest = self.0;
        let mut names: Vec<String> = Vec::new();
        for value in 1..=(Event::Last as i32) {
            let bit = bit_of(value);
            if rest & bit != 0 {
                names.push(pretty_event_name(value));
                rest &= !bit;
            }
        }
        if rest != 0 {
            if rest < 0 {
                names.push(format!("unknown(-0x{:x})", -i64::from(rest)));
            } else {
                names.push(format!("unknown(0x{rest:x})"));
            }
        }
        names.join(",")
    }
}

impl FromStr for EventMask {
    type Err = ParseEventError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        EventMask::parse(&[s])
    }
}

impl fmt::Display for EventMask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.pretty_string())
    }
}

impl From<i32> for EventMask {
    fn from(raw: i32) -> Self {
        EventMask(raw)
    }
}

impl From<EventMask> for i32 {
    fn from(mask: EventMask) -> Self {
        mask.0
    }
}

impl From<Event> for EventMask {
    fn from(event: Event) -> Self {
        EventMask(EventMask::bit(event))
    }
}

impl BitOr for EventMask {
    type Output = EventMask;
    fn bitor(self, rhs: EventMask) -> EventMask {
        EventMask(self.0 | rhs.0)
    }
}

impl BitOr<Event> for EventMask {
    type Output = EventMask;
    fn bitor(self, rhs: Event) -> EventMask {
        EventMask(self.0 | EventMask::bit(rhs))
    }
}

impl BitOrAssign for EventMask {
    fn bitor_assign(&mut self, rhs: EventMask) {
        self.0 |= rhs.0;
    }
}

impl BitAnd for EventMask {
    type Output = EventMask;
    fn bitand(self, rhs: EventMask) -> EventMask {
        EventMask(self.0 & rhs.0)
    }
}

impl Not for EventMask {
    type Output = EventMask;
    fn not(self) -> EventMask {
        EventMask(!self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_follow_enum_values() {
        assert_eq!(EventMask::bit(Event::RunPodSandbox), 0x1);
        assert_eq!(EventMask::bit(Event::CreateContainer), 0x8);
        assert_eq!(EventMask::bit(Event::RemoveContainer), 0x400);
        assert_eq!(EventMask::bit(Event::ValidateContainerAdjustment), 0x2000);
        assert_eq!(EventMask::bit(Event::Unknown), 0);
        for (event, _, _) in EVENT_NAMES {
            assert_eq!(EventMask::bit(event), 1 << (event as i32 - 1));
        }
    }

    #[test]
    fn valid_events_is_3fff() {
        assert_eq!(EventMask::VALID_EVENTS.raw(), 0x3FFF);
    }

    #[test]
    fn pretty_names_match_table() {
        let want = [
            (1, "RunPodSandbox"),
            (2, "StopPodSandbox"),
            (3, "RemovePodSandbox"),
            (4, "CreateContainer"),
            (5, "PostCreateContainer"),
            (6, "StartContainer"),
            (7, "PostStartContainer"),
            (8, "UpdateContainer"),
            (9, "PostUpdateContainer"),
            (10, "StopContainer"),
            (11, "RemoveContainer"),
            (12, "UpdatePodSandbox"),
            (13, "PostUpdatePodSandbox"),
            (14, "ValidateContainerAdjustment"),
        ];
        for (value, name) in want {
            assert_eq!(pretty_event_name(value), name);
            let event = Event::try_from(value).unwrap();
            assert_eq!(event.pretty_name(), name);
        }
        assert_eq!(pretty_event_name(0), "unknown(0)");
        assert_eq!(pretty_event_name(15), "unknown(15)");
        assert_eq!(pretty_event_name(-3), "unknown(-3)");
    }

    #[test]
    fn parse_each_name_case_insensitively() {
        for (event, pretty, lower) in EVENT_NAMES {
            let want = EventMask::from_events(&[event]);
            assert_eq!(EventMask::parse(&[pretty]).unwrap(), want);
            assert_eq!(EventMask::parse(&[lower]).unwrap(), want);
            assert_eq!(EventMask::parse(&[lower.to_uppercase()]).unwrap(), want);
        }
    }

    #[test]
    fn parse_special_words() {
        assert_eq!(EventMask::parse(&["all"]).unwrap().raw(), 0x3FFF);
        assert_eq!(EventMask::parse(&["ALL"]).unwrap().raw(), 0x3FFF);
        assert_eq!(EventMask::parse(&["pod"]).unwrap().raw(), 0x1807);
        assert_eq!(EventMask::parse(&["podsandbox"]).unwrap().raw(), 0x1807);
        assert_eq!(EventMask::parse(&["container"]).unwrap().raw(), 0x27F8);
        assert_eq!(EventMask::parse(&["pod,container"]).unwrap().raw(), 0x3FFF);
    }

    #[test]
    fn parse_splits_commas_and_joins_arguments() {
        let mask = EventMask::parse(&["RunPodSandbox,stopcontainer", "CreateContainer"]).unwrap();
        assert_eq!(mask.raw(), 0x1 | 0x200 | 0x8);
        let mask = EventMask::parse(&[" runpodsandbox , createcontainer "]).unwrap();
        assert_eq!(mask.raw(), 0x9);
    }

    #[test]
    fn parse_no_arguments_is_empty() {
        let none: [&str; 0] = [];
        assert_eq!(EventMask::parse(&none).unwrap(), EventMask::EMPTY);
    }

    #[test]
    fn special_words_are_not_trimmed() {
        let err = EventMask::parse(&[" all"]).unwrap_err();
        assert_eq!(err.to_string(), r#"unknown event " all""#);
        let err = EventMask::parse(&["pod "]).unwrap_err();
        assert_eq!(err.to_string(), r#"unknown event "pod ""#);
    }

    #[test]
    fn empty_pieces_are_errors() {
        assert_eq!(
            EventMask::parse(&[""]).unwrap_err().to_string(),
            r#"unknown event """#
        );
        assert_eq!(
            EventMask::parse(&["createcontainer,"])
                .unwrap_err()
                .to_string(),
            r#"unknown event """#
        );
    }

    #[test]
    fn error_quotes_the_untrimmed_lowercased_piece() {
        let err = EventMask::parse(&["CreateContainer, Bogus "]).unwrap_err();
        assert_eq!(err.name, " bogus ");
        assert_eq!(err.to_string(), r#"unknown event " bogus ""#);
    }

    #[test]
    fn from_str_parses_one_argument() {
        let mask: EventMask = "all".parse().unwrap();
        assert_eq!(mask, EventMask::VALID_EVENTS);
        assert!("nope".parse::<EventMask>().is_err());
    }

    #[test]
    fn set_clear_is_set() {
        let mut mask = EventMask::EMPTY;
        mask.set(Event::StartContainer).set(Event::StopPodSandbox);
        assert!(mask.is_set(Event::StartContainer));
        assert!(mask.is_set(Event::StopPodSandbox));
        assert!(!mask.is_set(Event::CreateContainer));
        assert!(mask.is_set_raw(6));
        mask.clear(Event::StartContainer);
        assert!(!mask.is_set(Event::StartContainer));
        assert_eq!(mask.raw(), 0x2);
        mask.set(Event::Unknown);
        assert_eq!(mask.raw(), 0x2);
    }

    #[test]
    fn pretty_string_lists_names_in_enum_order() {
        assert_eq!(EventMask::EMPTY.pretty_string(), "");
        let mask = EventMask::from_events(&[
            Event::ValidateContainerAdjustment,
            Event::RunPodSandbox,
            Event::UpdatePodSandbox,
        ]);
        assert_eq!(
            mask.pretty_string(),
            "RunPodSandbox,UpdatePodSandbox,ValidateContainerAdjustment"
        );
        assert_eq!(mask.to_string(), mask.pretty_string());
    }

    #[test]
    fn pretty_string_reports_unknown_bits() {
        assert_eq!(EventMask(0x4000).pretty_string(), "unknown(15)");
        assert_eq!(
            EventMask(0x1 | 0x4000 | 0x8000).pretty_string(),
            "RunPodSandbox,unknown(15),unknown(0x8000)"
        );
        assert_eq!(EventMask(0x30000).pretty_string(), "unknown(0x30000)");
        assert_eq!(EventMask(i32::MIN).pretty_string(), "unknown(-0x80000000)");
    }

    #[test]
    fn all_round_trips_through_pretty_string() {
        let all = EventMask::VALID_EVENTS;
        let again: EventMask = all.pretty_string().parse().unwrap();
        assert_eq!(again, all);
        assert_eq!(all.events().count(), 14);
    }

    #[test]
    fn invalid_bits_are_outside_valid_events() {
        assert_eq!(EventMask::VALID_EVENTS.invalid_bits(), 0);
        assert_eq!(EventMask(0x1_4001).invalid_bits(), 0x1_4000);
    }

    #[test]
    fn serde_is_a_plain_number() {
        let json = serde_json::to_string(&EventMask(0x208)).unwrap();
        assert_eq!(json, "520");
        let back: EventMask = serde_json::from_str("8").unwrap();
        assert_eq!(back, EventMask::from(Event::CreateContainer));
    }
}
