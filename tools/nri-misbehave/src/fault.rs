//! What to break and when.

use std::fmt;
use std::str::FromStr;

/// The ways the plugin misbehaves.
///
/// The kebab-case names (`never-register`, `hang`, ...) are the values of
/// the binary's `--fault` option; [`FaultKind::ALL`] lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FaultKind {
    /// Connect and say nothing: no registration, no reply, the connection
    /// stays open (and is drained) until the runtime closes it.
    NeverRegister,
    /// Register, then never answer the request named by the trigger
    /// ([`Fault::at`]); every other request is answered.
    Hang,
    /// Register, then close the connection (the binary exits) right after
    /// reading the request named by the trigger, without answering it.
    Exit,
    /// Write 256 bytes of junk straight onto the connection when the
    /// trigger fires, then stay connected without writing again.
    Garbage,
    /// Write the header of a multiplexer frame one byte larger than the
    /// largest frame a peer accepts, followed by its payload, when the
    /// trigger fires.
    OversizedFrame,
    /// Announce a multiplexer frame of 4096 bytes when the trigger fires,
    /// write 16 of them, then never write again (but keep reading).
    TruncatedFrame,
    /// Acknowledge the first message of a split Synchronize, then close the
    /// connection before the rest arrives.
    CloseDuringSync,
    /// After synchronization, send unsolicited UpdateContainers requests as
    /// fast as the runtime answers them ([`Fault::flood_inflight`] at a
    /// time, [`Fault::flood_count`] in all).
    FloodUpdates,
    /// Open two connections that register with the same name and index;
    /// both then behave.
    DuplicateIdentity,
    /// Answer every CreateContainer with the annotation
    /// [`Fault::conflict_key`]`=`[`Fault::conflict_value`], meant to clash
    /// with another plugin setting the same key.
    Conflict,
}

impl FaultKind {
    /// Every kind, in documentation order.
    pub const ALL: [FaultKind; 10] = [
        FaultKind::NeverRegister,
        FaultKind::Hang,
        FaultKind::Exit,
        FaultKind::Garbage,
        FaultKind::OversizedFrame,
        FaultKind::TruncatedFrame,
        FaultKind::CloseDuringSync,
        FaultKind::FloodUpdates,
        FaultKind::DuplicateIdentity,
        FaultKind::Conflict,
    ];

    /// The kebab-case name of the kind.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::NeverRegister => "never-register",
            FaultKind::Hang => "hang",
            FaultKind::Exit => "exit",
            FaultKind::Garbage => "garbage",
            FaultKind::OversizedFrame => "oversized-frame",
            FaultKind::TruncatedFrame => "truncated-frame",
            FaultKind::CloseDuringSync => "close-during-sync",
            FaultKind::FloodUpdates => "flood-updates",
            FaultKind::DuplicateIdentity => "duplicate-identity",
            FaultKind::Conflict => "conflict",
        }
    }

    /// Whether the kind fires at a [`Trigger`].
    pub fn uses_trigger(self) -> bool {
        matches!(
            self,
            FaultKind::Hang
                | FaultKind::Exit
                | FaultKind::Garbage
                | FaultKind::OversizedFrame
                | FaultKind::TruncatedFrame
        )
    }
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown fault kind or trigger.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseFaultError {
    /// The name is not one of [`FaultKind::ALL`].
    #[error("unknown fault kind {0:?}")]
    UnknownKind(String),
    /// The trigger is empty.
    #[error("empty trigger")]
    EmptyTrigger,
}

impl FromStr for FaultKind {
    type Err = ParseFaultError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        FaultKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| ParseFaultError::UnknownKind(s.to_string()))
    }
}

/// When a triggered fault ([`FaultKind::uses_trigger`]) fires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trigger {
    /// Right after connecting, before registering.
    Connect,
    /// When a request for this method of the Plugin service arrives
    /// (`Configure`, `Synchronize`, `CreateContainer`, ...).
    Request(String),
}

impl FromStr for Trigger {
    type Err = ParseFaultError;

    /// `connect` or a method name.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "" => Err(ParseFaultError::EmptyTrigger),
            "connect" => Ok(Trigger::Connect),
            method => Ok(Trigger::Request(method.to_string())),
        }
    }
}

impl fmt::Display for Trigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Trigger::Connect => f.write_str("connect"),
            Trigger::Request(m) => f.write_str(m),
        }
    }
}

/// One fault and its parameters.
///
/// ```
/// use nri_misbehave::{Fault, FaultKind, Trigger};
///
/// let fault = Fault::new(FaultKind::Exit, "crashy", "20").at("Synchronize");
/// assert_eq!(fault.trigger, Trigger::Request("Synchronize".into()));
/// assert_eq!("exit".parse::<FaultKind>().unwrap(), fault.kind);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    /// What to do.
    pub kind: FaultKind,
    /// The plugin name to register with.
    pub name: String,
    /// The plugin index to register with (two digits).
    pub index: String,
    /// When a triggered kind fires. Default: a CreateContainer request.
    pub trigger: Trigger,
    /// Annotation key of [`FaultKind::Conflict`]. Default `owner`.
    pub conflict_key: String,
    /// Annotation value of [`FaultKind::Conflict`]. Default `nri-misbehave`.
    pub conflict_value: String,
    /// Unanswered UpdateContainers requests allowed at a time. Default 16.
    pub flood_inflight: usize,
    /// Number of UpdateContainers requests to send; `None` (the default):
    /// until the connection closes.
    pub flood_count: Option<u64>,
    /// Container id named in the flood's updates. Default `flood`.
    pub flood_container: String,
    /// Once the flood starts, stop reading from the connection: replies
    /// (and requests) from the runtime pile up on its side, and
    /// [`Fault::flood_inflight`] does not apply. Default `false`.
    pub flood_ignore_replies: bool,
}

impl Fault {
    /// A fault with the default parameters.
    pub fn new(kind: FaultKind, name: impl Into<String>, index: impl Into<String>) -> Fault {
        Fault {
            kind,
            name: name.into(),
            index: index.into(),
            trigger: Trigger::Request(nri_api::service::plugin::CREATE_CONTAINER.to_string()),
            conflict_key: "owner".into(),
            conflict_value: "nri-misbehave".into(),
            flood_inflight: 16,
            flood_count: None,
            flood_container: "flood".into(),
            flood_ignore_replies: false,
        }
    }

    /// Fires the fault when a request for `method` arrives.
    pub fn at(mut self, method: impl Into<String>) -> Fault {
        self.trigger = Trigger::Request(method.into());
        self
    }

    /// Fires the fault right after connecting.
    pub fn at_connect(mut self) -> Fault {
        self.trigger = Trigger::Connect;
        self
    }

    /// The qualified name, `<index>-<name>`.
    pub fn full_name(&self) -> String {
        format!("{}-{}", self.index, self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_through_their_names() {
        for kind in FaultKind::ALL {
            assert_eq!(kind.name().parse::<FaultKind>(), Ok(kind));
            assert_eq!(kind.to_string(), kind.name());
        }
        assert_eq!(
            "hang-forever".parse::<FaultKind>(),
            Err(ParseFaultError::UnknownKind("hang-forever".into()))
        );
    }

    #[test]
    fn triggers_parse() {
        assert_eq!("connect".parse(), Ok(Trigger::Connect));
        assert_eq!(
            "Configure".parse(),
            Ok(Trigger::Request("Configure".into()))
        );
        assert_eq!("".parse::<Trigger>(), Err(ParseFaultError::EmptyTrigger));
    }
}
