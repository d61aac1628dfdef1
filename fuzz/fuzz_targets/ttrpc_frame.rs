//! nri-ttrpc: the header codec and the envelope messages.
//!
//! Checked: `FrameHeader::decode` accepts any 10 bytes and `encode` gives
//! them back; a request or response envelope that decodes encodes to bytes
//! that decode to the same value, and re-encoding is stable.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nri_ttrpc::frame::{FrameHeader, HEADER_LEN};
use nri_ttrpc::proto;
use prost::Message;

fn round_trip<M: Message + Default + PartialEq + std::fmt::Debug>(bytes: &[u8]) {
    if let Ok(m) = M::decode(bytes) {
        let enc = m.encode_to_vec();
        assert_eq!(enc.len(), m.encoded_len());
        let again = M::decode(enc.as_slice()).expect("re-encoded message decodes");
        assert_eq!(again, m);
        assert_eq!(again.encode_to_vec(), enc);
    }
}

fuzz_target!(|data: &[u8]| {
    if let Some(raw) = data.get(..HEADER_LEN) {
        let mut bytes = [0u8; HEADER_LEN];
        bytes.copy_from_slice(raw);
        let h = FrameHeader::decode(&bytes);
        assert_eq!(h.encode(), bytes);
        assert_eq!(FrameHeader::decode(&h.encode()), h);
    }
    round_trip::<proto::Request>(data);
    round_trip::<proto::Response>(data);
    round_trip::<proto::Status>(data);
});
