//! Annotation YAML read the way the Go plugins read it.
//!
//! The Go plugins decode annotations with `sigs.k8s.io/yaml`: the YAML is read
//! by `go.yaml.in/yaml/v2` (YAML 1.1 scalar rules), turned into JSON, and the
//! JSON decoded by `encoding/json`. A *plain* scalar is resolved by the YAML 1.1
//! rules: `010` is 8 (octal), `0o17` 15, `1_000` 1000, `0b101` 5, `1e3` the float
//! 1000 (which an integer field accepts), `yes` and `off` booleans. A *quoted*
//! scalar is always a string, whatever it looks like, and an integer field
//! refuses a string.
//!
//! [`load`] reads a document into a [`serde_norway::Value`] with these rules:
//! it sees each scalar's style, so a quoted `"0644"` stays the string `"0644"`
//! while a plain `0644` becomes the number 420. [`resolve_plain`] is the rule
//! for one plain scalar and [`go_integral`] the float-to-integer rule of Go's
//! JSON decoding.
//!
//! ```
//! use nri_plugin_util::{go_integral, go_yaml_load, resolve_plain};
//! use serde_norway::Value;
//!
//! let doc = go_yaml_load("{plain: 0644, quoted: \"0644\", exp: 1e3}").unwrap();
//! assert_eq!(doc["plain"], Value::from(0o644));
//! assert_eq!(doc["quoted"], Value::from("0644"));
//! assert_eq!(doc["exp"].as_f64().and_then(go_integral), Some(1000));
//! assert_eq!(resolve_plain("1_000"), Value::from(1000));
//! assert_eq!(resolve_plain("on"), Value::Bool(true));
//! ```

use std::collections::HashMap;
use std::ffi::CStr;
use std::marker::PhantomData;
use std::mem::MaybeUninit;

use serde_norway::{Mapping, Value};
use unsafe_libyaml_norway as unsafe_libyaml;

/// Why a document could not be read.
#[derive(Debug, thiserror::Error)]
pub enum GoYamlError {
    /// The text is not one YAML document.
    #[error("{0}")]
    Syntax(#[from] serde_norway::Error),
    /// A tagged scalar does not match its tag (`!!int abc`).
    #[error("cannot decode {value:?} as {tag}")]
    Tag {
        /// The tag, e.g. `tag:yaml.org,2002:int`.
        tag: String,
        /// The scalar.
        value: String,
    },
    /// Collections nest deeper than [`MAX_DEPTH`].
    #[error("YAML nests deeper than {MAX_DEPTH} levels")]
    TooDeep,
    /// Aliases expand the document beyond [`MAX_NODES`] values.
    #[error("YAML expands to more than {MAX_NODES} values")]
    TooLarge,
    /// The YAML parser stopped where the syntax check had passed.
    #[error("YAML parser failed")]
    Parser,
}

const TAG_PREFIX: &str = "tag:yaml.org,2002:";

/// How deep sequences and mappings may nest.
pub const MAX_DEPTH: usize = 128;
/// How many values a document may hold once its aliases are expanded.
pub const MAX_NODES: usize = 100_000;

/// Reads one YAML document as `sigs.k8s.io/yaml` does before its JSON step:
/// plain scalars resolved by the YAML 1.1 rules of [`resolve_plain`], quoted and
/// block scalars kept as strings, the standard tags (`!!str`, `!!int`, `!!float`,
/// `!!bool`, `!!null`) applied, aliases expanded. An empty document is
/// [`Value::Null`]; more than one document is an error.
///
/// ```
/// use nri_plugin_util::go_yaml_load;
/// use serde_norway::Value;
///
/// let doc = go_yaml_load("- {major: '1', minor: 0b11}").unwrap();
/// assert_eq!(doc[0]["major"], Value::from("1"));
/// assert_eq!(doc[0]["minor"], Value::from(3));
/// assert!(go_yaml_load("[unclosed").is_err());
/// ```
pub fn load(text: &str) -> Result<Value, GoYamlError> {
    // serde_norway checks the syntax and the number of documents and words the
    // errors (without resolving anything); the event pass below then reads a
    // document known to be well formed.
    serde_norway::from_str::<serde::de::IgnoredAny>(text)?;
    let mut events = Events::new(text);
    let mut builder = Builder {
        events: &mut events,
        anchors: HashMap::new(),
        depth: 0,
        nodes: 0,
    };
    builder.document()
}

/// The value of a plain (unquoted, untagged) scalar under the YAML 1.1 rules of
/// `go.yaml.in/yaml/v2`: null (`~`, `null`, empty), booleans (`true`, `yes`,
/// `on`, `y`, ... in their three casings), integers as Go's `strconv.ParseInt`
/// and `ParseUint` read them with base 0 after dropping `_` (`010` octal, `0o`,
/// `0x`, `0b`, signs), floats (`1e3`, `.5`, `09`, `.inf`, `.nan`); anything else
/// is a string. Timestamps stay strings.
///
/// ```
/// use nri_plugin_util::resolve_plain;
/// use serde_norway::Value;
///
/// assert_eq!(resolve_plain("0644"), Value::from(0o644));
/// assert_eq!(resolve_plain("-0x1F"), Value::from(-31));
/// assert_eq!(resolve_plain("18446744073709551615"), Value::from(u64::MAX));
/// assert_eq!(resolve_plain("09"), Value::from(9.0));
/// assert_eq!(resolve_plain("Off"), Value::Bool(false));
/// assert_eq!(resolve_plain("0o9"), Value::from("0o9"));
/// ```
pub fn resolve_plain(text: &str) -> Value {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            return Value::Bool(true)
        }
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            return Value::Bool(false)
        }
        ".nan" | ".NaN" | ".NAN" => return Value::from(f64::NAN),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return Value::from(f64::INFINITY)
        }
        "-.inf" | "-.Inf" | "-.INF" => return Value::from(f64::NEG_INFINITY),
        _ => {}
    }
    match text.as_bytes()[0] {
        b'.' => {
            if let Ok(f) = text.parse::<f64>() {
                return Value::from(f);
            }
        }
        b'+' | b'-' | b'0'..=b'9' => {
            let plain = text.replace('_', "");
            if let Some(i) = go_parse_int(&plain) {
                return match i64::try_from(i) {
                    Ok(i) => Value::from(i),
                    Err(_) => Value::from(i as u64),
                };
            }
            if yaml_style_float(&plain) {
                if let Ok(f) = plain.parse::<f64>() {
                    return Value::from(f);
                }
            }
        }
        _ => {}
    }
    Value::String(text.to_string())
}

/// Go's `strconv.ParseInt(s, 0, 64)`, falling back to `ParseUint(s, 0, 64)`:
/// an optional sign (`ParseInt` only), a base prefix (`0x`, `0o`, `0b`, either
/// case, or a leading `0` for octal), digits. The result fits `i64` or `u64`.
fn go_parse_int(text: &str) -> Option<i128> {
    let (negative, signed, unsigned) = match text.as_bytes().first() {
        Some(b'-') => (true, true, &text[1..]),
        Some(b'+') => (false, true, &text[1..]),
        _ => (false, false, text),
    };
    let lower = unsigned.get(..2).map(str::to_ascii_lowercase);
    let (radix, digits) = match lower.as_deref() {
        Some("0x") => (16, &unsigned[2..]),
        Some("0o") => (8, &unsigned[2..]),
        Some("0b") => (2, &unsigned[2..]),
        _ if unsigned.len() > 1 && unsigned.starts_with('0') => (8, &unsigned[1..]),
        _ => (10, unsigned),
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let magnitude = u128::from_str_radix(digits, radix).ok()?;
    let value = if negative {
        -i128::try_from(magnitude).ok()?
    } else {
        i128::try_from(magnitude).ok()?
    };
    let fits_i64 = i64::try_from(value).is_ok();
    let fits_u64 = !signed && u64::try_from(value).is_ok();
    (fits_i64 || fits_u64).then_some(value)
}

/// `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`, the float syntax of
/// `go.yaml.in/yaml/v2`.
fn yaml_style_float(text: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let body = text.strip_prefix(['-', '+']).unwrap_or(text);
    let (mantissa, exponent) = match body.find(['e', 'E']) {
        Some(i) => (&body[..i], Some(&body[i + 1..])),
        None => (body, None),
    };
    let mantissa_ok = match mantissa.split_once('.') {
        Some(("", frac)) => digits(frac),
        Some((int, frac)) => digits(int) && (frac.is_empty() || digits(frac)),
        None => digits(mantissa),
    };
    mantissa_ok && exponent.is_none_or(|e| digits(e.strip_prefix(['-', '+']).unwrap_or(e)))
}

/// The integer Go's `encoding/json` reads into an integer field from this
/// float, as `sigs.k8s.io/yaml` hands it over: integral values below 1e21
/// (written without an exponent); `None` for fractions and larger values.
///
/// ```
/// use nri_plugin_util::go_integral;
///
/// assert_eq!(go_integral(1e3), Some(1000));
/// assert_eq!(go_integral(1.5), None);
/// ```
pub fn go_integral(value: f64) -> Option<i128> {
    (value.fract() == 0.0 && value.abs() < 1e21).then_some(value as i128)
}

/// One parser event, copied out of libyaml.
enum Event {
    Other,
    DocumentStart,
    StreamEnd,
    Alias(Vec<u8>),
    Scalar {
        anchor: Option<Vec<u8>>,
        tag: Option<String>,
        value: String,
        plain: bool,
    },
    SequenceStart(Option<Vec<u8>>),
    SequenceEnd,
    MappingStart(Option<Vec<u8>>),
    MappingEnd,
}

/// The libyaml event parser over a borrowed text.
struct Events<'a> {
    parser: Box<MaybeUninit<unsafe_libyaml::yaml_parser_t>>,
    initialized: bool,
    failed: bool,
    _input: PhantomData<&'a str>,
}

impl<'a> Events<'a> {
    fn new(input: &'a str) -> Self {
        let mut parser = Box::new(MaybeUninit::<unsafe_libyaml::yaml_parser_t>::uninit());
        // SAFETY: `yaml_parser_initialize` initializes the whole parser (it only
        // fails on allocation failure, which aborts in Rust anyway); the input
        // outlives the parser (`'a`), and the parser stays at its heap address.
        let initialized = unsafe {
            let raw = parser.as_mut_ptr();
            let ok = unsafe_libyaml::yaml_parser_initialize(raw).ok;
            if ok {
                unsafe_libyaml::yaml_parser_set_encoding(raw, unsafe_libyaml::YAML_UTF8_ENCODING);
                unsafe_libyaml::yaml_parser_set_input_string(
                    raw,
                    input.as_ptr(),
                    input.len() as u64,
                );
            }
            ok
        };
        Events {
            parser,
            initialized,
            failed: !initialized,
            _input: PhantomData,
        }
    }

    fn next(&mut self) -> Result<Event, GoYamlError> {
        if self.failed {
            return Err(GoYamlError::Parser);
        }
        let mut event = MaybeUninit::<unsafe_libyaml::yaml_event_t>::uninit();
        // SAFETY: the parser is initialized (checked by `failed`); a successful
        // `yaml_parser_parse` initializes the event, whose strings are
        // NUL-terminated (anchor, tag) or `length` bytes long (value); the
        // event is deleted once copied.
        unsafe {
            if unsafe_libyaml::yaml_parser_parse(self.parser.as_mut_ptr(), event.as_mut_ptr()).fail
            {
                self.failed = true;
                return Err(GoYamlError::Parser);
            }
            let ev = &*event.as_ptr();
            let out = match ev.type_ {
                unsafe_libyaml::YAML_DOCUMENT_START_EVENT => Event::DocumentStart,
                unsafe_libyaml::YAML_STREAM_END_EVENT => Event::StreamEnd,
                unsafe_libyaml::YAML_ALIAS_EVENT => Event::Alias(c_bytes(ev.data.alias.anchor)),
                unsafe_libyaml::YAML_SCALAR_EVENT => {
                    let s = ev.data.scalar;
                    let value = std::slice::from_raw_parts(s.value, s.length as usize);
                    Event::Scalar {
                        anchor: opt_c_bytes(s.anchor),
                        tag: opt_c_bytes(s.tag).map(|t| String::from_utf8_lossy(&t).into_owned()),
                        value: String::from_utf8_lossy(value).into_owned(),
                        plain: s.style == unsafe_libyaml::YAML_PLAIN_SCALAR_STYLE,
                    }
                }
                unsafe_libyaml::YAML_SEQUENCE_START_EVENT => {
                    Event::SequenceStart(opt_c_bytes(ev.data.sequence_start.anchor))
                }
                unsafe_libyaml::YAML_SEQUENCE_END_EVENT => Event::SequenceEnd,
                unsafe_libyaml::YAML_MAPPING_START_EVENT => {
                    Event::MappingStart(opt_c_bytes(ev.data.mapping_start.anchor))
                }
                unsafe_libyaml::YAML_MAPPING_END_EVENT => Event::MappingEnd,
                _ => Event::Other,
            };
            unsafe_libyaml::yaml_event_delete(event.as_mut_ptr());
            Ok(out)
        }
    }
}

impl Drop for Events<'_> {
    fn drop(&mut self) {
        if self.initialized {
            // SAFETY: the parser was initialized in `new` and is deleted once.
            unsafe { unsafe_libyaml::yaml_parser_delete(self.parser.as_mut_ptr()) }
        }
    }
}

/// # Safety
/// `ptr` is a NUL-terminated string.
unsafe fn c_bytes(ptr: *const u8) -> Vec<u8> {
    // SAFETY: guaranteed by the caller.
    unsafe { CStr::from_ptr(ptr.cast()) }.to_bytes().to_vec()
}

/// # Safety
/// `ptr` is null or a NUL-terminated string.
unsafe fn opt_c_bytes(ptr: *const u8) -> Option<Vec<u8>> {
    // SAFETY: guaranteed by the caller.
    (!ptr.is_null()).then(|| unsafe { c_bytes(ptr) })
}

/// Builds values from events.
struct Builder<'e, 'a> {
    events: &'e mut Events<'a>,
    /// Anchored values and how many values each holds.
    anchors: HashMap<Vec<u8>, (Value, usize)>,
    depth: usize,
    /// Values built so far, aliases counted at their expanded size.
    nodes: usize,
}

impl Builder<'_, '_> {
    fn document(&mut self) -> Result<Value, GoYamlError> {
        loop {
            match self.events.next()? {
                Event::StreamEnd => return Ok(Value::Null),
                Event::DocumentStart => break,
                _ => {}
            }
        }
        let first = self.events.next()?;
        self.node(first)
    }

    fn count(&mut self, nodes: usize) -> Result<(), GoYamlError> {
        self.nodes += nodes;
        if self.nodes > MAX_NODES {
            return Err(GoYamlError::TooLarge);
        }
        Ok(())
    }

    fn node(&mut self, event: Event) -> Result<Value, GoYamlError> {
        let start = self.nodes;
        self.count(1)?;
        let (anchor, value) = match event {
            Event::Alias(name) => {
                let Some((value, size)) = self.anchors.get(&name) else {
                    return Ok(Value::Null);
                };
                let (value, size) = (value.clone(), *size);
                self.count(size)?;
                return Ok(value);
            }
            Event::Scalar {
                anchor,
                tag,
                value,
                plain,
            } => (anchor, scalar(tag.as_deref(), value, plain)?),
            Event::SequenceStart(_) | Event::MappingStart(_) if self.depth >= MAX_DEPTH => {
                return Err(GoYamlError::TooDeep)
            }
            Event::SequenceStart(anchor) => {
                self.depth += 1;
                let mut items = Vec::new();
                loop {
                    match self.events.next()? {
                        Event::SequenceEnd => break,
                        event => items.push(self.node(event)?),
                    }
                }
                self.depth -= 1;
                (anchor, Value::Sequence(items))
            }
            Event::MappingStart(anchor) => {
                self.depth += 1;
                let mut map = Mapping::new();
                loop {
                    let key = match self.events.next()? {
                        Event::MappingEnd => break,
                        event => self.node(event)?,
                    };
                    let next = self.events.next()?;
                    let value = self.node(next)?;
                    map.insert(key, value);
                }
                self.depth -= 1;
                (anchor, Value::Mapping(map))
            }
            _ => return Ok(Value::Null),
        };
        if let Some(anchor) = anchor {
            let size = self.nodes - start;
            self.anchors.insert(anchor, (value.clone(), size));
        }
        Ok(value)
    }
}

/// A scalar's value from its tag, text and style.
fn scalar(tag: Option<&str>, text: String, plain: bool) -> Result<Value, GoYamlError> {
    let Some(kind) = tag.and_then(|t| t.strip_prefix(TAG_PREFIX)) else {
        // No tag (or a local one): plain text is resolved, quoted text is a string.
        return Ok(if plain && tag.is_none() {
            resolve_plain(&text)
        } else {
            Value::String(text)
        });
    };
    let resolved = resolve_plain(&text);
    let ok = match (kind, &resolved) {
        ("str", _) => return Ok(Value::String(text)),
        ("int", Value::Number(n)) => n.is_i64() || n.is_u64(),
        ("float", Value::Number(n)) => {
            return Ok(Value::from(n.as_f64().unwrap_or(f64::NAN)));
        }
        ("bool", Value::Bool(_)) | ("null", Value::Null) => true,
        ("int" | "float" | "bool" | "null", _) => false,
        _ => return Ok(Value::String(text)),
    };
    if ok {
        Ok(resolved)
    } else {
        Err(GoYamlError::Tag {
            tag: format!("!!{kind}"),
            value: text,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_integers_as_go_reads_them() {
        for (text, want) in [
            ("010", 8),
            ("0644", 0o644),
            ("0o644", 0o644),
            ("0O17", 15),
            ("0x1A4", 0x1a4),
            ("0X1f", 31),
            ("1_000", 1000),
            ("0b101", 5),
            ("0B11", 3),
            ("-0b11", -3),
            ("-0x1F", -31),
            ("+12", 12),
            ("-0", 0),
            ("0", 0),
        ] {
            assert_eq!(resolve_plain(text), Value::from(want), "{text}");
        }
        assert_eq!(resolve_plain("18446744073709551615"), Value::from(u64::MAX));
        assert_eq!(resolve_plain("-9223372036854775808"), Value::from(i64::MIN));
    }

    #[test]
    fn plain_floats_as_go_reads_them() {
        for (text, want) in [
            ("1e3", 1000.0),
            ("09", 9.0),
            ("0644.0", 644.0),
            (".5", 0.5),
            ("1.", 1.0),
            ("-1_0.5", -10.5),
            ("1e30", 1e30),
        ] {
            assert_eq!(resolve_plain(text), Value::from(want), "{text}");
        }
        assert_eq!(resolve_plain(".inf"), Value::from(f64::INFINITY));
        assert_eq!(resolve_plain("-.INF"), Value::from(f64::NEG_INFINITY));
        assert!(resolve_plain(".NaN").as_f64().is_some_and(f64::is_nan));
    }

    #[test]
    fn plain_words_as_go_reads_them() {
        for text in ["y", "Yes", "ON", "true", "TRUE"] {
            assert_eq!(resolve_plain(text), Value::Bool(true), "{text}");
        }
        for text in ["n", "No", "off", "False"] {
            assert_eq!(resolve_plain(text), Value::Bool(false), "{text}");
        }
        for text in ["", "~", "null", "NULL"] {
            assert_eq!(resolve_plain(text), Value::Null, "{text}");
        }
        for text in [
            "0o9",
            "0x",
            "12a",
            "1e",
            ".",
            "e3",
            "1.2.3",
            "tRUE",
            "/dev/d",
            "2001-12-14",
        ] {
            assert_eq!(resolve_plain(text), Value::from(text), "{text}");
        }
        // Beyond u64 and i64: a prefixed number is a string, decimal digits a
        // float (`_` dropped first).
        assert_eq!(
            resolve_plain("-0x8000000000000001"),
            Value::from("-0x8000000000000001")
        );
        assert_eq!(
            resolve_plain("18446744073709551616"),
            Value::from(18446744073709551616.0)
        );
        assert_eq!(
            resolve_plain("9223372036854775808_0_0_0"),
            Value::from(9223372036854775808000.0)
        );
    }

    #[test]
    fn quoted_scalars_stay_strings() {
        let doc = load("[\"0644\", '0644', \"1\", '1_0', \"0b1\", \"1e3\", \"yes\", \"~\", 0644]")
            .unwrap();
        let want: Vec<Value> = ["0644", "0644", "1", "1_0", "0b1", "1e3", "yes", "~"]
            .into_iter()
            .map(Value::from)
            .chain([Value::from(0o644)])
            .collect();
        assert_eq!(doc, Value::Sequence(want));
        // Block scalars are strings too.
        let doc = load("a: |\n  0644\nb: >-\n  0644").unwrap();
        assert_eq!(doc["a"], Value::from("0644\n"));
        assert_eq!(doc["b"], Value::from("0644"));
    }

    #[test]
    fn standard_tags_apply() {
        let doc =
            load("{a: !!str 0644, b: !!int \"0644\", c: !!float 1, d: !!bool 'on', e: !local 010}")
                .unwrap();
        assert_eq!(doc["a"], Value::from("0644"));
        assert_eq!(doc["b"], Value::from(0o644));
        assert_eq!(doc["c"], Value::from(1.0));
        assert_eq!(doc["d"], Value::Bool(true));
        assert_eq!(doc["e"], Value::from("010"));
        let err = load("a: !!int abc").unwrap_err();
        assert_eq!(err.to_string(), "cannot decode \"abc\" as !!int");
    }

    #[test]
    fn keys_anchors_and_documents() {
        let doc = load("010: a\nbase: &b {x: 0x10}\ncopy: *b").unwrap();
        assert_eq!(doc[8], Value::from("a"));
        assert_eq!(doc["copy"]["x"], Value::from(16));
        assert_eq!(load("").unwrap(), Value::Null);
        assert_eq!(load("# nothing\n").unwrap(), Value::Null);
        assert!(matches!(
            load("a: 1\n---\nb: 2"),
            Err(GoYamlError::Syntax(_))
        ));
        assert!(matches!(load("{a: [1"), Err(GoYamlError::Syntax(_))));
    }

    #[test]
    fn nesting_and_alias_expansion_are_bounded() {
        let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        assert!(matches!(load(&deep), Err(GoYamlError::TooDeep)));
        let ok = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(load(&ok).is_ok());
        // Each level doubles the previous one: 2^20 values once expanded.
        let mut laughs = String::from("a0: &a0 [x, x]\n");
        for i in 1..20 {
            laughs += &format!("a{i}: &a{i} [*a{}, *a{}]\n", i - 1, i - 1);
        }
        assert!(matches!(load(&laughs), Err(GoYamlError::TooLarge)));
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
