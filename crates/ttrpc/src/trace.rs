//! W3C trace context (`traceparent` / `tracestate`) as carried in ttRPC
//! request metadata.
//!
//! containerd's `otelttrpc` interceptors put an OpenTelemetry span context
//! into a ttRPC request's metadata with the W3C trace-context propagator:
//! the key `traceparent` holds `00-<32 hex trace id>-<16 hex span id>-<2 hex
//! flags>` and the key `tracestate` (when there is one) the vendor list. This
//! module parses and formats those two values with no dependency on an
//! OpenTelemetry SDK, so both sides of NRI (the stub and the adaptation) can
//! continue a trace across the wire.
//!
//! Parsing follows what Go's `propagation.TraceContext` accepts: lowercase
//! hex only, version `ff` rejected, version `00` exactly 55 characters, later
//! versions at least 55 with a `-` after the flags, all-zero trace or span
//! ids rejected, and only the `sampled` flag kept. Invalid values are
//! ignored (`None`), never a panic. `tracestate` is carried through
//! untouched.
//!
//! ```
//! use nri_ttrpc::TraceContext;
//!
//! let tc = TraceContext::parse(
//!     "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
//!     Some("congo=t61rcWkgMzE"),
//! )
//! .unwrap();
//! assert_eq!(tc.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
//! assert!(tc.is_sampled());
//!
//! // A call made on behalf of this one: same trace, a new span id.
//! let child = tc.child();
//! assert_eq!(child.trace_id(), tc.trace_id());
//! assert_ne!(child.span_id(), tc.span_id());
//! assert_eq!(child.tracestate(), Some("congo=t61rcWkgMzE"));
//!
//! assert_eq!(TraceContext::parse("garbage", None), None);
//! ```

use std::fmt;

/// The metadata key of the W3C `traceparent` value.
pub const TRACEPARENT: &str = "traceparent";
/// The metadata key of the W3C `tracestate` value.
pub const TRACESTATE: &str = "tracestate";

/// The `sampled` trace flag.
pub const FLAG_SAMPLED: u8 = 0x01;

/// A remote span context: trace id, parent span id, trace flags and the
/// opaque `tracestate`.
///
/// ```
/// use nri_ttrpc::TraceContext;
///
/// let tc = TraceContext::generate();
/// let parsed = TraceContext::parse(&tc.traceparent(), None).unwrap();
/// assert_eq!(parsed, tc);
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct TraceContext {
    trace_id: [u8; 16],
    span_id: [u8; 8],
    flags: u8,
    tracestate: Option<String>,
}

impl TraceContext {
    /// A context from its parts; `None` if the trace id or the span id is all
    /// zeros (invalid in W3C trace context). Flags other than
    /// [`FLAG_SAMPLED`] are dropped.
    ///
    /// ```
    /// use nri_ttrpc::TraceContext;
    ///
    /// let tc = TraceContext::new([1; 16], [2; 8], 1).unwrap();
    /// assert_eq!(tc.traceparent(), format!("00-{}-{}-01", "01".repeat(16), "02".repeat(8)));
    /// assert!(TraceContext::new([0; 16], [2; 8], 1).is_none());
    /// ```
    pub fn new(trace_id: [u8; 16], span_id: [u8; 8], flags: u8) -> Option<TraceContext> {
        if trace_id == [0; 16] || span_id == [0; 8] {
            return None;
        }
        Some(TraceContext {
            trace_id,
            span_id,
            flags: flags & FLAG_SAMPLED,
            tracestate: None,
        })
    }

    /// A new sampled trace: random trace id and span id.
    ///
    /// ```
    /// use nri_ttrpc::TraceContext;
    ///
    /// let (a, b) = (TraceContext::generate(), TraceContext::generate());
    /// assert_ne!(a.trace_id(), b.trace_id());
    /// assert!(a.is_sampled());
    /// ```
    pub fn generate() -> TraceContext {
        TraceContext {
            trace_id: random_id(),
            span_id: random_id(),
            flags: FLAG_SAMPLED,
            tracestate: None,
        }
    }

    /// The context of a call made within this one: same trace id, flags and
    /// `tracestate`, a new random span id.
    ///
    /// ```
    /// use nri_ttrpc::TraceContext;
    ///
    /// let parent = TraceContext::generate();
    /// let child = parent.child();
    /// assert_eq!(child.trace_id(), parent.trace_id());
    /// assert_ne!(child.span_id(), parent.span_id());
    /// ```
    pub fn child(&self) -> TraceContext {
        TraceContext {
            trace_id: self.trace_id,
            span_id: random_id(),
            flags: self.flags,
            tracestate: self.tracestate.clone(),
        }
    }

    /// Parses a `traceparent` value, keeping `tracestate` as given. `None`
    /// when `traceparent` is invalid (the `tracestate` is then ignored too).
    ///
    /// ```
    /// use nri_ttrpc::TraceContext;
    ///
    /// let tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    /// assert!(TraceContext::parse(tp, None).is_some());
    /// // Uppercase hex, version ff and all-zero ids are invalid.
    /// assert!(TraceContext::parse(&tp.to_uppercase(), None).is_none());
    /// assert!(TraceContext::parse(&tp.replacen("00", "ff", 1), None).is_none());
    /// ```
    pub fn parse(traceparent: &str, tracestate: Option<&str>) -> Option<TraceContext> {
        let tp = traceparent.trim().as_bytes();
        if tp.len() < 55 {
            return None;
        }
        let version = hex_byte(&tp[0..2])?;
        if version == 0xff || tp[2] != b'-' || tp[35] != b'-' || tp[52] != b'-' {
            return None;
        }
        // Version 00 has exactly four fields; later versions may append
        // more after a dash.
        if (version == 0 && tp.len() != 55) || (tp.len() > 55 && tp[55] != b'-') {
            return None;
        }
        let mut trace_id = [0u8; 16];
        for (i, b) in trace_id.iter_mut().enumerate() {
            *b = hex_byte(&tp[3 + 2 * i..5 + 2 * i])?;
        }
        let mut span_id = [0u8; 8];
        for (i, b) in span_id.iter_mut().enumerate() {
            *b = hex_byte(&tp[36 + 2 * i..38 + 2 * i])?;
        }
        let flags = hex_byte(&tp[53..55])?;
        let mut tc = TraceContext::new(trace_id, span_id, flags)?;
        tc.tracestate = tracestate.filter(|s| !s.is_empty()).map(str::to_owned);
        Some(tc)
    }

    /// The trace context in ttRPC request metadata (`traceparent` and
    /// `tracestate`, first value of each, as Go's ttRPC `MD.Get` reads
    /// them); `None` without a valid `traceparent`.
    ///
    /// ```
    /// use nri_ttrpc::TraceContext;
    ///
    /// let md = vec![(
    ///     "traceparent".to_string(),
    ///     "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00".to_string(),
    /// )];
    /// let tc = TraceContext::from_metadata(&md).unwrap();
    /// assert!(!tc.is_sampled());
    /// assert!(TraceContext::from_metadata(&[]).is_none());
    /// ```
    pub fn from_metadata(metadata: &[(String, String)]) -> Option<TraceContext> {
        let get = |key: &str| {
            metadata
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(key))
                .map(|(_, v)| v.as_str())
        };
        TraceContext::parse(get(TRACEPARENT)?, get(TRACESTATE))
    }

    /// The metadata entries that carry this context: `traceparent`, then
    /// `tracestate` when there is one.
    ///
    /// ```
    /// use nri_ttrpc::TraceContext;
    ///
    /// let tc = TraceContext::generate().with_tracestate(Some("a=b".into()));
    /// let md = tc.to_metadata();
    /// assert_eq!(md[0], ("traceparent".to_string(), tc.traceparent()));
    /// assert_eq!(md[1], ("tracestate".to_string(), "a=b".to_string()));
    /// ```
    pub fn to_metadata(&self) -> Vec<(String, String)> {
        let mut md = vec![(TRACEPARENT.to_string(), self.traceparent())];
        if let Some(ts) = &self.tracestate {
            md.push((TRACESTATE.to_string(), ts.clone()));
        }
        md
    }

    /// Replaces the `tracestate` (an empty one counts as none).
    pub fn with_tracestate(mut self, tracestate: Option<String>) -> TraceContext {
        self.tracestate = tracestate.filter(|s| !s.is_empty());
        self
    }

    /// The `traceparent` value, version 00.
    pub fn traceparent(&self) -> String {
        // `00-` + 32 + `-` + 16 + `-` + 2: written digit by digit, without the
        // formatting machinery (this runs for every plugin call).
        let mut s = String::with_capacity(55);
        s.push_str("00-");
        push_hex(&mut s, &self.trace_id);
        s.push('-');
        push_hex(&mut s, &self.span_id);
        s.push('-');
        push_hex(&mut s, &[self.flags]);
        s
    }

    /// The `tracestate` value, as received.
    pub fn tracestate(&self) -> Option<&str> {
        self.tracestate.as_deref()
    }

    /// The 16-byte trace id.
    pub fn trace_id(&self) -> [u8; 16] {
        self.trace_id
    }

    /// The 8-byte span id (of the caller's span, for a received context).
    pub fn span_id(&self) -> [u8; 8] {
        self.span_id
    }

    /// The trace id as 32 lowercase hex digits.
    pub fn trace_id_hex(&self) -> String {
        hex(&self.trace_id)
    }

    /// The span id as 16 lowercase hex digits.
    pub fn span_id_hex(&self) -> String {
        hex(&self.span_id)
    }

    /// The trace flags (only [`FLAG_SAMPLED`] is kept).
    pub fn flags(&self) -> u8 {
        self.flags
    }

    /// Whether the caller sampled the trace.
    pub fn is_sampled(&self) -> bool {
        self.flags & FLAG_SAMPLED != 0
    }
}

impl fmt::Debug for TraceContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TraceContext")
            .field("traceparent", &self.traceparent())
            .field("tracestate", &self.tracestate)
            .finish()
    }
}

impl fmt::Display for TraceContext {
    /// The `traceparent` value.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.traceparent())
    }
}

fn hex_digit(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}

fn hex_byte(two: &[u8]) -> Option<u8> {
    Some(hex_digit(two[0])? << 4 | hex_digit(two[1])?)
}

fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    push_hex(&mut s, bytes);
    s
}

/// Appends `bytes` as lowercase hex digits.
fn push_hex(s: &mut String, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
}

/// A random non-zero id (`fastrand`'s per-thread generator, seeded from
/// the standard library's random hasher keys).
fn random_id<const N: usize>() -> [u8; N] {
    loop {
        let mut id = [0u8; N];
        fastrand::fill(&mut id);
        if id != [0u8; N] {
            return id;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TP: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn parses_and_formats_the_w3c_example() {
        let tc = TraceContext::parse(TP, None).unwrap();
        assert_eq!(tc.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(tc.span_id_hex(), "00f067aa0ba902b7");
        assert_eq!(tc.flags(), 1);
        assert_eq!(tc.traceparent(), TP);
        assert_eq!(tc.to_string(), TP);
        assert_eq!(tc.tracestate(), None);
    }

    #[test]
    fn rejects_invalid_values() {
        let bad = [
            "",
            "00",
            &TP[..54],
            &format!("{TP}-"),
            &format!("{TP}0"),
            &TP.replace('-', "_"),
            &TP.to_uppercase(),
            &TP.replacen("00-", "ff-", 1),
            &TP.replacen("00-", "0g-", 1),
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473z-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0x",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01é",
            "é0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ];
        for v in bad {
            assert_eq!(TraceContext::parse(v, Some("a=b")), None, "{v:?}");
        }
    }

    #[test]
    fn later_versions_may_append_fields() {
        let tc =
            TraceContext::parse(&format!("{}-extra", TP.replacen("00", "01", 1)), None).unwrap();
        assert_eq!(tc.traceparent(), TP, "formatted as version 00");
        assert!(TraceContext::parse(&TP.replacen("00", "01", 1), None).is_some());
    }

    #[test]
    fn keeps_only_the_sampled_flag_and_tracestate_untouched() {
        let tc = TraceContext::parse(&TP.replace("-01", "-ff"), Some(" x=1 ,y=2")).unwrap();
        assert_eq!(tc.flags(), 1);
        assert_eq!(tc.tracestate(), Some(" x=1 ,y=2"));
        let tc = TraceContext::parse(&TP.replace("-01", "-02"), Some("")).unwrap();
        assert!(!tc.is_sampled());
        assert_eq!(tc.tracestate(), None);
    }

    #[test]
    fn metadata_round_trip() {
        let tc = TraceContext::parse(TP, Some("k=v")).unwrap();
        let md = tc.to_metadata();
        assert_eq!(
            md,
            vec![
                ("traceparent".to_string(), TP.to_string()),
                ("tracestate".to_string(), "k=v".to_string())
            ]
        );
        assert_eq!(TraceContext::from_metadata(&md), Some(tc));
        // An invalid traceparent hides the tracestate as well.
        let md = vec![
            ("traceparent".to_string(), "nope".to_string()),
            ("tracestate".to_string(), "k=v".to_string()),
        ];
        assert_eq!(TraceContext::from_metadata(&md), None);
    }

    #[test]
    fn generated_ids_are_valid_and_distinct() {
        let mut seen = std::collections::HashSet::new();
        for _ in 0..1000 {
            let tc = TraceContext::generate();
            assert!(TraceContext::parse(&tc.traceparent(), None).is_some());
            assert!(seen.insert(tc.trace_id()));
        }
    }
}
