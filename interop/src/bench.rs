//! What the adaptation benchmark sends and gets back, shared by the bench
//! runtime (`nri-rs-adaptation-bench`) and the bench itself, which needs the
//! byte counts for its raw-chain baseline.
//!
//! ```
//! use nri_interop::bench::{create_request, create_trunk_bytes, test_plugin_reply};
//!
//! let (out, back) = create_trunk_bytes(&create_request(1), &test_plugin_reply(0));
//! assert!(out > back && back > 30, "{out} {back}");
//! ```

use nri_api::service::{plugin, PLUGIN_SERVICE};
use nri_api::{
    Container, ContainerAdjustment, ContainerState, CreateContainerRequest,
    CreateContainerResponse, PodSandbox,
};
use nri_mux::HEADER_LEN as MUX_HEADER_LEN;
use nri_ttrpc::frame::HEADER_LEN as TTRPC_HEADER_LEN;
use nri_ttrpc::proto;
use prost::Message;

/// The CreateContainer request of call `i`; the Go bench runtime sends the
/// same one.
pub fn create_request(i: i64) -> CreateContainerRequest {
    let id = format!("ctr{i}");
    CreateContainerRequest {
        pod: Some(PodSandbox {
            id: "pod0".into(),
            name: "pod0".into(),
            uid: "uid0".into(),
            namespace: "default".into(),
            ..Default::default()
        }),
        container: Some(Container {
            id: id.clone(),
            pod_sandbox_id: "pod0".into(),
            name: id,
            state: ContainerState::ContainerCreated as i32,
            args: vec!["sleep".into(), "3600".into()],
            env: vec!["PATH=/usr/bin:/bin".into()],
            ..Default::default()
        }),
    }
}

/// The reply of test plugin `i` in the bench: one annotation and one
/// environment variable of its own.
pub fn test_plugin_reply(i: usize) -> CreateContainerResponse {
    let mut adjust = ContainerAdjustment::default();
    adjust.add_annotation(format!("bench.nri.io/plugin-{i}"), "on");
    adjust.add_env(format!("BENCH_PLUGIN_{i}"), "on");
    CreateContainerResponse {
        adjust: Some(adjust),
        ..Default::default()
    }
}

/// The reply of the minimal plugin named `bench<i>`: one annotation.
pub fn min_plugin_reply(i: usize) -> CreateContainerResponse {
    let mut adjust = ContainerAdjustment::default();
    adjust.add_annotation(format!("bench.nri.io/plugin-bench{i}"), "on");
    CreateContainerResponse {
        adjust: Some(adjust),
        ..Default::default()
    }
}

/// The bytes one plugin's CreateContainer call puts on the trunk: the
/// request out and the reply back, each with its mux and ttRPC headers.
pub fn create_trunk_bytes(
    request: &CreateContainerRequest,
    reply: &CreateContainerResponse,
) -> (usize, usize) {
    let req = proto::Request {
        service: PLUGIN_SERVICE.into(),
        method: plugin::CREATE_CONTAINER.into(),
        payload: request.encode_to_vec(),
        timeout_nano: 2_000_000_000,
        metadata: Vec::new(),
    };
    let resp = proto::Response {
        status: Some(proto::Status::default()),
        payload: reply.encode_to_vec(),
    };
    (
        MUX_HEADER_LEN + TTRPC_HEADER_LEN + req.encoded_len(),
        MUX_HEADER_LEN + TTRPC_HEADER_LEN + resp.encoded_len(),
    )
}
