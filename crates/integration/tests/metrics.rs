//! Metrics through the integration: a Prometheus sink and a second sink
//! both see the calls to a real plugin on the socket.

#![cfg(feature = "prometheus")]

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use nri_api::*;
use nri_integration::metrics::NriMetrics;
use nri_integration::{Metrics, Nri};
use support::*;

/// Counts invocations.
#[derive(Default)]
struct Calls(AtomicUsize);

impl Metrics for Calls {
    fn record_plugin_invocation(
        &self,
        _plugin: &str,
        _operation: &str,
        _error: Option<&(dyn std::error::Error + 'static)>,
    ) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

#[tokio::test]
async fn every_sink_sees_every_call() {
    let env = Env::new();
    let prom = NriMetrics::with_prefix("containerd");
    let calls = Arc::new(Calls::default());
    let nri = Nri::builder(env.config())
        .metrics(Arc::new(prom.clone()))
        .metrics(calls.clone())
        .build();
    let domain = TestDomain::new("ns").with("pod0", &[("ctr0", ContainerState::ContainerRunning)]);
    nri.register_domain(domain).unwrap();
    bounded(nri.start()).await.unwrap();
    let log = Log::default();
    let mut rec = Recorder::new(&log);
    rec.fail_create = Some("bad".into());
    let _p = run_stub(rec, "recorder", "10", &env.socket());
    wait_plugins(&nri, &["10-recorder"]).await;

    let (p0, c1, bad) = (
        pod("pod0"),
        container("ctr1", "pod0"),
        container("bad", "pod0"),
    );
    bounded(nri.create_container(&p0, &c1)).await.unwrap();
    assert!(bounded(nri.create_container(&p0, &bad)).await.is_err());

    assert_eq!(prom.registrations("10-recorder"), 1);
    assert_eq!(prom.synchronized_objects("10-recorder", "container"), 1);
    assert_eq!(
        prom.invocations("10-recorder", "CreateContainer", "success", ""),
        1
    );
    assert_eq!(
        prom.invocations("10-recorder", "CreateContainer", "error", "unknown"),
        1
    );
    assert_eq!(prom.latency("10-recorder", "CreateContainer").count, 2);
    // Synchronize and two CreateContainer, in both sinks.
    let total = ["Synchronize", "CreateContainer"]
        .iter()
        .flat_map(|op| {
            [("success", ""), ("error", "unknown")]
                .map(|(s, e)| prom.invocations("10-recorder", op, s, e))
        })
        .sum::<u64>();
    assert_eq!(total, 3);
    assert_eq!(calls.0.load(Ordering::Relaxed), 3);
    let text = prom.encode();
    assert!(
        text.contains(r#"containerd_nri_plugin_invocations_total{plugin="10-recorder",operation="CreateContainer",status="success",error=""} 1"#),
        "{text}"
    );
    bounded(nri.stop()).await;
}
