//! Linux CPU and memory-node lists (`0-3,8,10-11`), as cpusets take them.

use std::collections::BTreeSet;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer};

/// Largest CPU or node number accepted in a list.
const MAX_ID: u32 = 1 << 16;

/// A set of CPU (or memory node) numbers.
///
/// ```
/// use nri_policy::CpuSet;
///
/// let allowed = CpuSet::parse("0-7,16").unwrap();
/// assert!(CpuSet::parse("2-3,16").unwrap().is_subset(&allowed));
/// assert!(!CpuSet::parse("7-8").unwrap().is_subset(&allowed));
/// assert!(CpuSet::parse("1-x").is_err());
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct CpuSet {
    text: String,
    ids: BTreeSet<u32>,
}

/// A list that is not a CPU list.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid CPU list {text:?}: {why}")]
pub struct CpuSetError {
    text: String,
    why: &'static str,
}

impl CpuSet {
    /// Parses a list such as `0-3,8`; an empty text is the empty set.
    pub fn parse(text: &str) -> Result<CpuSet, CpuSetError> {
        let err = |why| CpuSetError {
            text: text.to_owned(),
            why,
        };
        let mut ids = BTreeSet::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (lo, hi) = match part.split_once('-') {
                Some((lo, hi)) => (lo.trim(), hi.trim()),
                None => (part, part),
            };
            let lo: u32 = lo.parse().map_err(|_| err("not a number"))?;
            let hi: u32 = hi.parse().map_err(|_| err("not a number"))?;
            if lo > hi {
                return Err(err("range ends before it starts"));
            }
            if hi > MAX_ID {
                return Err(err("number too large"));
            }
            ids.extend(lo..=hi);
        }
        Ok(CpuSet {
            text: text.to_owned(),
            ids,
        })
    }

    /// Whether every member of `self` is in `other`.
    pub fn is_subset(&self, other: &CpuSet) -> bool {
        self.ids.is_subset(&other.ids)
    }

    /// Whether `self` and `other` share a member.
    pub fn intersects(&self, other: &CpuSet) -> bool {
        self.ids.intersection(&other.ids).next().is_some()
    }
}

impl fmt::Debug for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CpuSet({:?})", self.text)
    }
}

impl fmt::Display for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for CpuSet {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        CpuSet::parse(&s).map_err(de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists() {
        let s = CpuSet::parse(" 0-2, 5 ,7-7").unwrap();
        assert_eq!(s.ids.iter().copied().collect::<Vec<_>>(), [0, 1, 2, 5, 7]);
        assert!(CpuSet::parse("").unwrap().ids.is_empty());
        assert!(CpuSet::parse("3-1").is_err());
        assert!(CpuSet::parse("a").is_err());
        assert!(CpuSet::parse("1-99999999").is_err());
        assert!(CpuSet::parse("1").unwrap().intersects(&s));
        assert!(!CpuSet::parse("3-4").unwrap().intersects(&s));
    }
}
