//! Conversions for the `Optional*` wrapper messages.
//!
//! Proto3 scalars cannot tell "zero" from "unset", so the protocol wraps
//! values whose absence matters in small messages (`OptionalInt64`,
//! `OptionalString`, ...). In Rust such a field is an
//! `Option<OptionalInt64>`; [`opt`] builds one from a plain value and the
//! `From` conversions go both ways.
//!
//! ```
//! use nri_api::{opt, LinuxMemory, OptionalInt64};
//!
//! let mut mem = LinuxMemory::default();
//! mem.limit = opt(1 << 30);
//! assert_eq!(mem.limit, Some(OptionalInt64 { value: 1 << 30 }));
//! assert_eq!(OptionalInt64::from(5).value, 5);
//! assert_eq!(mem.limit.map(i64::from), Some(1 << 30));
//! ```

use crate::{
    OptionalBool, OptionalFileMode, OptionalInt, OptionalInt32, OptionalInt64,
    OptionalRepeatedString, OptionalString, OptionalUInt32, OptionalUInt64,
};

/// Wraps a plain value into `Some(wrapper)`, the wrapper type being taken
/// from the context (usually the field assigned to).
///
/// ```
/// use nri_api::{opt, LinuxCpu};
///
/// let cpu = LinuxCpu { shares: opt(512u64), quota: opt(-1), ..Default::default() };
/// assert_eq!(cpu.shares.unwrap().value, 512);
/// assert_eq!(cpu.quota.unwrap().value, -1);
/// ```
pub fn opt<W, T>(value: T) -> Option<W>
where
    W: From<T>,
{
    Some(W::from(value))
}

macro_rules! scalar_wrapper {
    ($wrapper:ty, $inner:ty) => {
        impl From<$inner> for $wrapper {
            fn from(value: $inner) -> Self {
                Self { value }
            }
        }

        impl From<$wrapper> for $inner {
            fn from(wrapper: $wrapper) -> Self {
                wrapper.value
            }
        }

        impl $wrapper {
            /// The wrapped value.
            pub fn get(&self) -> $inner {
                self.value
            }
        }
    };
}

scalar_wrapper!(OptionalInt, i64);
scalar_wrapper!(OptionalInt32, i32);
scalar_wrapper!(OptionalUInt32, u32);
scalar_wrapper!(OptionalInt64, i64);
scalar_wrapper!(OptionalUInt64, u64);
scalar_wrapper!(OptionalBool, bool);
scalar_wrapper!(OptionalFileMode, u32);

impl From<String> for OptionalString {
    fn from(value: String) -> Self {
        Self { value }
    }
}

impl From<&str> for OptionalString {
    fn from(value: &str) -> Self {
        Self {
            value: value.to_string(),
        }
    }
}

impl From<OptionalString> for String {
    fn from(wrapper: OptionalString) -> Self {
        wrapper.value
    }
}

impl OptionalString {
    /// The wrapped value.
    pub fn get(&self) -> &str {
        &self.value
    }
}

impl From<Vec<String>> for OptionalRepeatedString {
    fn from(value: Vec<String>) -> Self {
        Self { value }
    }
}

impl From<&[String]> for OptionalRepeatedString {
    fn from(value: &[String]) -> Self {
        Self {
            value: value.to_vec(),
        }
    }
}

impl From<&[&str]> for OptionalRepeatedString {
    fn from(value: &[&str]) -> Self {
        Self {
            value: value.iter().map(|s| (*s).to_string()).collect(),
        }
    }
}

impl<const N: usize> From<[&str; N]> for OptionalRepeatedString {
    fn from(value: [&str; N]) -> Self {
        Self {
            value: value.iter().map(|s| (*s).to_string()).collect(),
        }
    }
}

impl From<OptionalRepeatedString> for Vec<String> {
    fn from(wrapper: OptionalRepeatedString) -> Self {
        wrapper.value
    }
}

impl OptionalRepeatedString {
    /// The wrapped values.
    pub fn get(&self) -> &[String] {
        &self.value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_convert_both_ways() {
        assert_eq!(OptionalInt::from(-7).value, -7);
        assert_eq!(OptionalInt32::from(3).get(), 3);
        assert_eq!(u32::from(OptionalUInt32::from(9)), 9);
        assert_eq!(OptionalUInt64::from(u64::MAX).value, u64::MAX);
        assert!(OptionalBool::from(true).value);
        assert_eq!(OptionalFileMode::from(0o644).value, 0o644);
    }

    #[test]
    fn strings_convert() {
        assert_eq!(OptionalString::from("x").get(), "x");
        assert_eq!(String::from(OptionalString::from("y".to_string())), "y");
        let rs = OptionalRepeatedString::from(["a", "b"]);
        assert_eq!(rs.get(), ["a".to_string(), "b".to_string()]);
        let v: Vec<String> = rs.into();
        assert_eq!(v.len(), 2);
    }

    #[test]
    fn opt_wraps_in_some() {
        let o: Option<OptionalInt64> = opt(42);
        assert_eq!(o, Some(OptionalInt64 { value: 42 }));
        let s: Option<OptionalString> = opt("cls");
        assert_eq!(s.unwrap().value, "cls");
    }
}
