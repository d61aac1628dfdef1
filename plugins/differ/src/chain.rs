//! The indices the differ registers at, and the snapshots handed from one index
//! to the next.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard};

use nri_stub::api::{Container, PodSandbox};

/// At most this many snapshots wait at one index for the next index; older ones
/// are dropped (the next index is not connected, or missed events).
const MAX_PENDING: usize = 1024;

/// The `-indices` list is not usable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IndicesError {
    /// Fewer than two indices.
    #[error("there must be at least two indices given, got {0:?}")]
    TooFew(String),
    /// An entry is not a number from 0 to 99.
    #[error("invalid plugin index {0:?}: expected a number from 0 to 99")]
    Invalid(String),
    /// An index appears twice.
    #[error("plugin index {0:02} given more than once")]
    Duplicate(u8),
}

/// Parses a comma-separated list of indices (`"00,20,99"`), keeping its order.
pub fn parse_indices(text: &str) -> Result<Vec<u8>, IndicesError> {
    let mut out = Vec::new();
    for part in text.split(',') {
        let part = part.trim();
        let idx = part
            .parse::<u8>()
            .ok()
            .filter(|i| *i <= 99 && !part.starts_with('+'))
            .ok_or_else(|| IndicesError::Invalid(part.to_string()))?;
        if out.contains(&idx) {
            return Err(IndicesError::Duplicate(idx));
        }
        out.push(idx);
    }
    if out.len() < 2 {
        return Err(IndicesError::TooFew(text.to_string()));
    }
    Ok(out)
}

/// What one index saw of an event: the pod and, for container events, the
/// container.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// The event's pod.
    pub pod: Option<PodSandbox>,
    /// The event's container.
    pub container: Option<Container>,
}

#[derive(Debug, Default)]
struct Slot {
    prev: Option<u8>,
    has_next: bool,
    pending: VecDeque<Snapshot>,
}

/// The indices in list order; each keeps what it saw until the next one takes it.
#[derive(Debug)]
pub struct Chain {
    slots: Mutex<HashMap<u8, Slot>>,
}

/// What an index does with an event.
#[derive(Debug, PartialEq)]
pub enum Step {
    /// The first index: nothing to compare with.
    First,
    /// The snapshot the previous index took of this event.
    Compare(Box<Snapshot>),
    /// The previous index has nothing (it connected later than this one).
    Missing,
}

impl Chain {
    /// A chain of `indices`, in the order given.
    pub fn new(indices: &[u8]) -> Chain {
        let mut slots = HashMap::new();
        let mut prev = None;
        for (pos, idx) in indices.iter().enumerate() {
            slots.insert(
                *idx,
                Slot {
                    prev,
                    has_next: pos + 1 < indices.len(),
                    pending: VecDeque::new(),
                },
            );
            prev = Some(*idx);
        }
        Chain {
            slots: Mutex::new(slots),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<u8, Slot>> {
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Index `idx` sees `now`: takes the previous index's oldest snapshot, and
    /// keeps `now` for the next index (if any and if there was something to
    /// compare with, or `idx` is the first).
    pub fn observe(&self, idx: u8, now: Snapshot) -> Step {
        let mut slots = self.lock();
        let Some(prev) = slots.get(&idx).map(|s| s.prev) else {
            return Step::Missing;
        };
        let step = match prev {
            None => Step::First,
            Some(prev) => match slots.get_mut(&prev).and_then(|s| s.pending.pop_front()) {
                Some(snapshot) => Step::Compare(Box::new(snapshot)),
                None => return Step::Missing,
            },
        };
        if let Some(slot) = slots.get_mut(&idx) {
            if slot.has_next {
                if slot.pending.len() >= MAX_PENDING {
                    slot.pending.pop_front();
                }
                slot.pending.push_back(now);
            }
        }
        step
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(name: &str) -> Snapshot {
        Snapshot {
            pod: Some(PodSandbox {
                name: name.into(),
                ..Default::default()
            }),
            container: None,
        }
    }

    #[test]
    fn parses_index_lists() {
        assert_eq!(parse_indices("00,20,99"), Ok(vec![0, 20, 99]));
        assert_eq!(parse_indices("5, 15"), Ok(vec![5, 15]));
        assert_eq!(parse_indices("10"), Err(IndicesError::TooFew("10".into())));
        assert_eq!(
            parse_indices("1,100"),
            Err(IndicesError::Invalid("100".into()))
        );
        assert_eq!(parse_indices("1,x"), Err(IndicesError::Invalid("x".into())));
        assert_eq!(parse_indices("1,"), Err(IndicesError::Invalid("".into())));
        assert_eq!(parse_indices("3,03"), Err(IndicesError::Duplicate(3)));
    }

    #[test]
    fn snapshots_travel_down_the_chain_in_order() {
        let chain = Chain::new(&[5, 15, 25]);
        assert_eq!(chain.observe(5, snap("a")), Step::First);
        assert_eq!(chain.observe(5, snap("b")), Step::First);
        assert_eq!(
            chain.observe(15, snap("a2")),
            Step::Compare(Box::new(snap("a")))
        );
        assert_eq!(
            chain.observe(15, snap("b2")),
            Step::Compare(Box::new(snap("b")))
        );
        assert_eq!(
            chain.observe(25, snap("a3")),
            Step::Compare(Box::new(snap("a2")))
        );
        assert_eq!(
            chain.observe(25, snap("b3")),
            Step::Compare(Box::new(snap("b2")))
        );
        // Nothing left; the last index keeps nothing.
        assert_eq!(chain.observe(15, snap("c")), Step::Missing);
        assert_eq!(chain.observe(25, snap("c")), Step::Missing);
        assert_eq!(chain.observe(7, snap("c")), Step::Missing);
    }

    #[test]
    fn pending_snapshots_are_bounded() {
        let chain = Chain::new(&[1, 2]);
        for i in 0..MAX_PENDING + 10 {
            chain.observe(1, snap(&i.to_string()));
        }
        assert_eq!(
            chain.observe(2, snap("x")),
            Step::Compare(Box::new(snap("10")))
        );
    }
}
