//! The number rules of the Go plugins' YAML, shared by the plugins that read
//! numbers from annotations.
//!
//! The Go plugins decode annotations with `sigs.k8s.io/yaml`: YAML 1.1 (as
//! `gopkg.in/yaml.v2` reads it) turned into JSON, then decoded by
//! `encoding/json`. So a plain `010` is 8 (octal), `1_000` is 1000, `0b101` is 5
//! and `1e3` is the float 1000, which an integer field accepts; a quoted `"1"`
//! is a JSON string, which an integer field refuses. Our YAML parser reads YAML
//! 1.2, where `010`, `1_000` and `0b101` are strings, and where quoted and plain
//! text both come back as strings: these functions tell them apart and read
//! them as the Go plugins do.
//!
//! ```
//! use nri_plugin_util::{go_integral, reads_as_yaml12_number, yaml11_int};
//!
//! // A plain `010` comes back from a YAML 1.2 parser as the text "010".
//! assert!(!reads_as_yaml12_number("010"));
//! assert_eq!(yaml11_int("010"), Some(8));
//! // Text "1" can only have been quoted: plain, it would have been a number.
//! assert!(reads_as_yaml12_number("1"));
//! // `1e3` is a float; Go's JSON decoding takes it for an integer.
//! assert_eq!(go_integral(1e3), Some(1000));
//! assert_eq!(go_integral(1.5), None);
//! ```

/// The integer a plain YAML 1.1 scalar means (`gopkg.in/yaml.v2`): decimal,
/// `0`-prefixed octal, `0x` hexadecimal, `0b` binary, with an optional sign and
/// `_` separators; `None` if it is not one.
pub fn yaml11_int(text: &str) -> Option<i64> {
    let (negative, digits) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let digits = digits.replace('_', "");
    let (radix, body) = if let Some(b) = digits.strip_prefix("0b") {
        (2, b)
    } else if let Some(h) = digits.strip_prefix("0x") {
        (16, h)
    } else if digits.len() > 1 && digits.starts_with('0') {
        (8, &digits[1..])
    } else {
        (10, digits.as_str())
    };
    if body.is_empty() || !body.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let value = i64::from_str_radix(body, radix).ok()?;
    Some(if negative { -value } else { value })
}

/// Whether a YAML 1.2 parser reads this text, written plain, as a number
/// (`5`, `-3`, `0x1F`, `0o17`, `1.5`, `1e3`). Text like that, handed back as
/// a string, was quoted in the document.
pub fn reads_as_yaml12_number(text: &str) -> bool {
    let unsigned = text.strip_prefix(['-', '+']).unwrap_or(text);
    let all = |s: &str, radix| !s.is_empty() && s.chars().all(|c| c.is_digit(radix));
    if let Some(hex) = unsigned.strip_prefix("0x") {
        return all(hex, 16);
    }
    if let Some(oct) = unsigned.strip_prefix("0o") {
        return all(oct, 8);
    }
    if all(unsigned, 10) {
        return unsigned == "0" || !unsigned.starts_with('0');
    }
    // Floats: digits with a point or an exponent.
    let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
        Some(i) => (&unsigned[..i], Some(&unsigned[i + 1..])),
        None => (unsigned, None),
    };
    let exponent_ok = exponent.is_none_or(|e| all(e.strip_prefix(['-', '+']).unwrap_or(e), 10));
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let mantissa_ok = (int.is_empty() || all(int, 10))
        && (frac.is_empty() || all(frac, 10))
        && !(int.is_empty() && frac.is_empty());
    mantissa_ok && exponent_ok && (mantissa.contains('.') || exponent.is_some())
}

/// The integer Go's `encoding/json` reads into an integer field from this
/// float, as `sigs.k8s.io/yaml` hands it over: integral values below 1e21
/// (written without an exponent); `None` for fractions and larger values.
pub fn go_integral(value: f64) -> Option<i128> {
    (value.fract() == 0.0 && value.abs() < 1e21).then_some(value as i128)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml11_integers() {
        for (text, want) in [
            ("010", 8),
            ("0640", 0o640),
            ("1_000", 1000),
            ("0b101", 5),
            ("-0b11", -3),
            ("0x1F", 31),
            ("+7", 7),
            ("0", 0),
        ] {
            assert_eq!(yaml11_int(text), Some(want), "{text}");
        }
        for text in ["09", "12a", "", "0x", "1.0", "0o17", "1e3"] {
            assert_eq!(yaml11_int(text), None, "{text}");
        }
    }

    #[test]
    fn yaml12_numbers() {
        for text in [
            "1", "-3", "+5", "0", "0x1F", "0o17", "1.5", ".5", "1.", "1e3", "1.5E-2",
        ] {
            assert!(reads_as_yaml12_number(text), "{text}");
        }
        for text in [
            "010", "1_000", "0b101", "abc", "", ".", "e3", "1e", "0x", "1.2.3",
        ] {
            assert!(!reads_as_yaml12_number(text), "{text}");
        }
    }

    #[test]
    fn integral_floats() {
        assert_eq!(go_integral(1000.0), Some(1000));
        assert_eq!(go_integral(-2.0), Some(-2));
        assert_eq!(go_integral(1e20), Some(100_000_000_000_000_000_000));
        assert_eq!(go_integral(1e21), None);
        assert_eq!(go_integral(0.5), None);
        assert_eq!(go_integral(f64::NAN), None);
    }
}
