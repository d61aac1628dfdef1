//! nri-adaptation: merging arbitrary plugin replies.
//!
//! The runtime decodes each plugin's reply to CreateContainer,
//! UpdateContainer or StopContainer and merges it with the replies of the
//! plugins before it. Here the request and up to four replies are decoded
//! from fuzzed protobuf bytes and merged in order, as the adaptation does;
//! a merged CreateContainer adjustment is then applied to the reference
//! base spec with nri-oci.
//!
//! Checked: merging returns Ok or Err and never panics; the merged reply
//! encodes and decodes to itself; applying it to a spec never panics.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use nri_adaptation::{CreateResult, StopResult, UpdateResult};
use nri_api::*;
use prost::Message;

const GO_BASE: &str = include_str!("../../crates/oci/tests/fixtures/go-base-spec.json");
const PLUGINS: &[&str] = &["00-default-validator", "05-a", "10-b", "10-b", "99-z"];

#[derive(Arbitrary, Debug)]
enum Op {
    Create,
    Update,
    Stop,
}

#[derive(Arbitrary, Debug)]
struct Input {
    op: Op,
    request: Vec<u8>,
    replies: Vec<(u8, Vec<u8>)>,
}

fn round_trip<M: Message + Default + PartialEq + std::fmt::Debug>(m: &M) {
    let back = M::decode(m.encode_to_vec().as_slice()).expect("merged reply decodes");
    assert_eq!(&back, m);
}

fuzz_target!(|input: Input| {
    let replies: Vec<(&str, &[u8])> = input
        .replies
        .iter()
        .take(4)
        .map(|(p, b)| (PLUGINS[usize::from(*p) % PLUGINS.len()], b.as_slice()))
        .collect();
    match input.op {
        Op::Create => {
            let Ok(req) = CreateContainerRequest::decode(input.request.as_slice()) else {
                return;
            };
            let mut result = CreateResult::new(req);
            for (plugin, bytes) in replies {
                let Ok(reply) = CreateContainerResponse::decode(bytes) else {
                    return;
                };
                if result.apply(plugin, reply).is_err() {
                    return;
                }
            }
            let _ = result.container_id();
            let _ = result.owners();
            let response = result.into_response();
            round_trip(&response);
            if let Some(adjust) = &response.adjust {
                let mut spec: serde_json::Value =
                    serde_json::from_str(GO_BASE).expect("fixture parses");
                let _ = nri_oci::Generator::new(&mut spec)
                    .without_mount_propagation_check()
                    .adjust(adjust);
            }
        }
        Op::Update => {
            let Ok(req) = UpdateContainerRequest::decode(input.request.as_slice()) else {
                return;
            };
            let mut result = UpdateResult::new(req);
            for (plugin, bytes) in replies {
                let Ok(reply) = UpdateContainerResponse::decode(bytes) else {
                    return;
                };
                if result.apply(plugin, reply).is_err() {
                    return;
                }
            }
            let _ = result.updates();
            round_trip(&result.into_response());
        }
        Op::Stop => {
            let mut result = StopResult::new();
            for (plugin, bytes) in replies {
                let Ok(reply) = StopContainerResponse::decode(bytes) else {
                    return;
                };
                if result.apply(plugin, reply).is_err() {
                    return;
                }
            }
            round_trip(&result.into_response());
        }
    }
});
