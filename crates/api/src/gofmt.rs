//! Go-compatible quoting, for error texts that must read exactly like the
//! reference implementation's.
//!
//! Go's `%q` verb quotes a string with double quotes (or a character with
//! single quotes), escaping quotes, backslashes and non-printable characters.
//!
//! ```
//! use nri_api::gofmt::{quote, quote_char};
//! assert_eq!(quote("a\"b\n"), r#""a\"b\n""#);
//! assert_eq!(quote_char(','), "','");
//! assert_eq!(quote_char('\''), r"'\''");
//! ```

use std::fmt::Write as _;

/// Quotes `s` the way Go's `%q` (`strconv.Quote`) does.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        push_escaped(&mut out, c, '"');
    }
    out.push('"');
    out
}

/// Quotes `c` the way Go's `%q` does for a rune (`strconv.QuoteRune`).
pub fn quote_char(c: char) -> String {
    let mut out = String::with_capacity(4);
    out.push('\'');
    push_escaped(&mut out, c, '\'');
    out.push('\'');
    out
}

fn push_escaped(out: &mut String, c: char, quote: char) {
    if c == quote || c == '\\' {
        out.push('\\');
        out.push(c);
        return;
    }
    if is_print(c) {
        out.push(c);
        return;
    }
    match c {
        '\u{7}' => out.push_str("\\a"),
        '\u{8}' => out.push_str("\\b"),
        '\u{c}' => out.push_str("\\f"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\u{b}' => out.push_str("\\v"),
        c if (c as u32) < 0x20 || c == '\u{7f}' => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c if (c as u32) < 0x10000 => {
            let _ = write!(out, "\\u{:04x}", c as u32);
        }
        c => {
            let _ = write!(out, "\\U{:08x}", c as u32);
        }
    }
}

/// Approximates Go's `strconv.IsPrint`: letters, marks, numbers, punctuation,
/// symbols and the ASCII space are printable; controls, other spaces, format
/// characters, private-use characters and non-characters are not.
fn is_print(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    if c.is_control() || c.is_whitespace() {
        return false;
    }
    let u = c as u32;
    let format = matches!(
        u,
        0xad | 0x600..=0x605
            | 0x61c
            | 0x6dd
            | 0x70f
            | 0x180e
            | 0x200b..=0x200f
            | 0x202a..=0x202e
            | 0x2060..=0x2064
            | 0x2066..=0x206f
            | 0xfeff
            | 0xfff9..=0xfffb
            | 0xe0001
            | 0xe0020..=0xe007f
    );
    let private = matches!(u, 0xe000..=0xf8ff | 0xf0000..=0x10ffff);
    let nonchar = (u & 0xfffe) == 0xfffe || (0xfdd0..=0xfdef).contains(&u);
    !(format || private || nonchar)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_strings_are_wrapped_in_double_quotes() {
        assert_eq!(quote(""), "\"\"");
        assert_eq!(quote("foo,bar"), "\"foo,bar\"");
        assert_eq!(quote(" all"), "\" all\"");
    }

    #[test]
    fn special_characters_are_escaped_like_go() {
        assert_eq!(quote("a\\b"), r#""a\\b""#);
        assert_eq!(quote("tab\there"), r#""tab\there""#);
        assert_eq!(quote("\u{1}"), r#""\x01""#);
        assert_eq!(quote("\u{7f}"), r#""\x7f""#);
        assert_eq!(quote("\u{a0}"), r#""\u00a0""#);
        assert_eq!(quote("\u{feff}"), r#""\ufeff""#);
        assert_eq!(quote("\u{f0000}"), r#""\U000f0000""#);
        assert_eq!(quote("it's"), r#""it's""#);
    }

    #[test]
    fn printable_unicode_is_kept() {
        assert_eq!(quote("héllo ✓"), "\"héllo ✓\"");
    }

    #[test]
    fn runes_use_single_quotes() {
        assert_eq!(quote_char(','), "','");
        assert_eq!(quote_char('"'), "'\"'");
        assert_eq!(quote_char('\''), r"'\''");
        assert_eq!(quote_char(' '), "' '");
        assert_eq!(quote_char('\n'), r"'\n'");
        assert_eq!(quote_char('é'), "'é'");
    }
}
