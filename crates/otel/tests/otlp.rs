//! The OTLP/HTTP exporter end to end: a runtime request's span, exported by
//! `nri_otel::otlp` to a receiver this test runs on the loopback interface,
//! arrives as an OTLP protobuf `ExportTraceServiceRequest` in the runtime's
//! trace, with the runtime's span as its parent.

mod support;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::mpsc;
use std::sync::Arc;

use nri_adaptation::{with_trace_parent, Adaptation};
use nri_api::*;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use prost::Message;
use support::*;
use tracing_subscriber::layer::SubscriberExt;

/// One received POST: path, content type, body.
type Post = (String, String, Vec<u8>);

/// An OTLP/HTTP receiver on 127.0.0.1: answers every POST with an empty
/// protobuf response and hands it to the returned channel.
fn receiver() -> (String, mpsc::Receiver<Post>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let mut raw = Vec::new();
            let mut buf = [0u8; 8192];
            let (head_end, len) = loop {
                let n = conn.read(&mut buf).unwrap();
                assert!(n > 0, "request cut short");
                raw.extend_from_slice(&buf[..n]);
                if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
                    let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
                    let len = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .map(|v| v.trim().parse::<usize>().unwrap())
                        .expect("content-length");
                    break (end + 4, len);
                }
            };
            while raw.len() < head_end + len {
                let n = conn.read(&mut buf).unwrap();
                assert!(n > 0, "body cut short");
                raw.extend_from_slice(&buf[..n]);
            }
            let head = String::from_utf8_lossy(&raw[..head_end]).into_owned();
            let path = head.split(' ').nth(1).unwrap_or_default().to_string();
            let content_type = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-type")
                        .then(|| v.trim().to_string())
                })
                .unwrap_or_default();
            conn.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n",
            )
            .unwrap();
            let body = raw[head_end..head_end + len].to_vec();
            if tx.send((path, content_type, body)).is_err() {
                return;
            }
        }
    });
    (format!("http://{addr}"), rx)
}

fn string_attr(attrs: &[KeyValue], key: &str) -> Option<String> {
    attrs.iter().find(|kv| kv.key == key).and_then(|kv| {
        match kv.value.as_ref()?.value.as_ref()? {
            Value::StringValue(s) => Some(s.clone()),
            _ => None,
        }
    })
}

#[tokio::test]
async fn runtime_request_reaches_an_otlp_receiver_in_the_runtime_trace() {
    let (endpoint, posts) = receiver();
    let (layer, export) = nri_otel::otlp(&endpoint, "nri-otlp-test").unwrap();
    let _guard = tracing::subscriber::set_default(tracing_subscriber::registry().with(layer));

    let dir = tempfile::tempdir().unwrap();
    let nri = Adaptation::builder("test-runtime", "v1", Arc::new(Runtime))
        .plugin_path(dir.path().join("plugins"))
        .plugin_config_path(dir.path().join("conf.d"))
        .socket_path(dir.path().join("nri.sock"))
        .build();
    tokio::time::timeout(WAIT, nri.start())
        .await
        .unwrap()
        .unwrap();
    let parent = nri_adaptation::TraceContext::parse(
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        None,
    )
    .unwrap();
    let req = CreateContainerRequest {
        pod: Some(pod("pod0")),
        container: Some(ctr("ctr0")),
    };
    tokio::time::timeout(
        WAIT,
        with_trace_parent(parent.clone(), nri.create_container(req)),
    )
    .await
    .unwrap()
    .unwrap();
    nri.stop().await;
    // Sends what the batch processor holds, from its own thread.
    tokio::task::spawn_blocking(move || export.shutdown())
        .await
        .unwrap();

    let (path, content_type, body) = posts.recv_timeout(WAIT).expect("an export");
    assert_eq!(path, "/v1/traces");
    assert_eq!(content_type, "application/x-protobuf");
    let export = ExportTraceServiceRequest::decode(body.as_slice()).expect("OTLP protobuf");
    let resource = export.resource_spans[0].resource.as_ref().unwrap();
    assert_eq!(
        string_attr(&resource.attributes, "service.name").as_deref(),
        Some("nri-otlp-test")
    );
    let scope = &export.resource_spans[0].scope_spans[0];
    assert_eq!(scope.scope.as_ref().unwrap().name, "nri-otel");
    let span = scope
        .spans
        .iter()
        .find(|s| s.name == "nri.request")
        .expect("the request span");
    assert_eq!(span.trace_id, parent.trace_id());
    assert_eq!(span.parent_span_id, parent.span_id());
    assert_eq!(span.span_id.len(), 8);
    assert_ne!(span.span_id, parent.span_id());
    assert_eq!(
        string_attr(&span.attributes, "nri.event").as_deref(),
        Some("CreateContainer")
    );
    assert_eq!(
        string_attr(&span.attributes, "nri.container").as_deref(),
        Some("ctr0")
    );
    assert_eq!(
        string_attr(&span.attributes, "nri.outcome").as_deref(),
        Some("ok")
    );
    assert!(span.end_time_unix_nano >= span.start_time_unix_nano);
}
