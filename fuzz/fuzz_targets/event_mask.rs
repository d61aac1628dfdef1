//! nri-api: event-mask parsing and printing.
//!
//! Checked: `EventMask::parse` of arbitrary strings never panics and an Ok
//! mask holds only valid event bits; printing any mask (`pretty_string`,
//! `Display`) never panics; a non-empty valid mask parses back from its
//! printed form; a mask with invalid bits says so in its printed form.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use nri_api::EventMask;

#[derive(Arbitrary, Debug)]
struct Input {
    args: Vec<String>,
    raw: i32,
}

fuzz_target!(|input: Input| {
    if let Ok(mask) = EventMask::parse(&input.args) {
        assert_eq!(mask.invalid_bits(), 0, "parse gave invalid bits: {mask:?}");
        let printed = mask.pretty_string();
        if !mask.is_empty() {
            assert_eq!(EventMask::parse(&[&printed]), Ok(mask), "via {printed:?}");
        }
    }
    for raw in [input.raw, input.raw & EventMask::VALID_EVENTS.raw()] {
        let mask = EventMask(raw);
        let printed = mask.pretty_string();
        assert_eq!(printed, mask.to_string());
        assert_eq!(
            printed.contains("unknown("),
            mask.invalid_bits() != 0,
            "{printed}"
        );
        assert_eq!(
            mask.events().count(),
            (raw & EventMask::VALID_EVENTS.raw()).count_ones() as usize
        );
        if mask.invalid_bits() == 0 && !mask.is_empty() {
            assert_eq!(printed.parse::<EventMask>(), Ok(mask), "via {printed:?}");
        }
    }
});
