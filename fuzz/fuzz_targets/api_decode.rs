//! nri-api: decoding every message type from arbitrary bytes, as the stub
//! and the runtime decode what their peer sends.
//!
//! Input: one byte picks the message type; the rest is its protobuf
//! encoding (and, second, its JSON form).
//!
//! Checked for the picked type: protobuf bytes that decode re-encode to
//! bytes decoding to the same value (and re-encoding is stable); the decoded
//! value survives a JSON round trip (`to_string` then `from_str` gives it
//! back); JSON that deserializes serializes and deserializes to the same
//! value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nri_api::*;
use prost::Message;
use serde::{de::DeserializeOwned, Serialize};

fn check<M>(bytes: &[u8])
where
    M: Message + Default + PartialEq + std::fmt::Debug + Serialize + DeserializeOwned,
{
    if let Ok(m) = M::decode(bytes) {
        let enc = m.encode_to_vec();
        assert_eq!(enc.len(), m.encoded_len());
        let again = M::decode(enc.as_slice()).expect("re-encoded message decodes");
        assert_eq!(again, m, "protobuf round trip");
        assert_eq!(again.encode_to_vec(), enc, "protobuf re-encoding");
        json_round_trip(&m);
    }
    if let Ok(m) = serde_json::from_slice::<M>(bytes) {
        json_round_trip(&m);
        let enc = m.encode_to_vec();
        assert_eq!(
            M::decode(enc.as_slice()).expect("encoded JSON value decodes"),
            m
        );
    }
}

fn json_round_trip<M>(m: &M)
where
    M: PartialEq + std::fmt::Debug + Serialize + DeserializeOwned,
{
    let json = serde_json::to_string(m).expect("serializes to JSON");
    let back: M = serde_json::from_str(&json)
        .unwrap_or_else(|e| panic!("own JSON does not deserialize: {e}: {json}"));
    assert_eq!(&back, m, "JSON round trip via {json}");
}

macro_rules! dispatch {
    ($($t:ident),* $(,)?) => {
        fn pick(index: usize, bytes: &[u8]) {
            let table: &[fn(&[u8])] = &[$(check::<$t>),*];
            table[index % table.len()](bytes);
        }
    };
}
nri_fuzz::for_each_message!(dispatch);

fuzz_target!(|data: &[u8]| {
    if let Some((&sel, rest)) = data.split_first() {
        pick(usize::from(sel), rest);
    }
});
