//! The network device injector with the Go reference runtime, on real network
//! namespaces: a device of the plugin's namespace moves into the pod's namespace at
//! RunPodSandbox (renamed, with MTU and address) and comes back at StopPodSandbox.
//!
//! The test makes its own namespaces (`ip netns`), so it needs root (CAP_SYS_ADMIN and
//! CAP_NET_ADMIN); without them it says so and does nothing.

mod common;

use std::path::Path;
use std::process::Command;

use common::{spawn_go_runtime, PluginProcess, TIMEOUT};
use nri_interop::RuntimeOutput;
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_nri-network-device-injector");

/// A named network namespace, deleted on drop.
struct NetNs(String);

impl NetNs {
    fn create(name: String) -> Option<NetNs> {
        let ok = ip(&["netns", "add", &name]).is_some();
        ok.then_some(NetNs(name))
    }

    fn path(&self) -> String {
        format!("/var/run/netns/{}", self.0)
    }

    /// `ip -n <ns> <args>` output, `None` on failure.
    fn ip(&self, args: &[&str]) -> Option<String> {
        let mut all = vec!["-n", self.0.as_str()];
        all.extend_from_slice(args);
        ip(&all)
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        let _ = ip(&["netns", "del", &self.0]);
    }
}

fn ip(args: &[&str]) -> Option<String> {
    let out = Command::new("ip").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

fn scenario(pod_ns: &str, steps: Value) -> Value {
    let devices =
        "- name: nriifb0\n  new_name: eth7\n  address: 192.168.77.2\n  prefix: 24\n  mtu: 1400\n";
    json!({
        "runtime": {"name": "containerd", "version": "v2.2.0"},
        "pods": [
            {"id": "pod0", "name": "netpod", "uid": "u0", "namespace": "default",
             "annotations": {"netdevice.noderesource.dev": devices},
             "linux": {"namespaces": [{"type": "network", "path": pod_ns}]}},
            {"id": "hostnet", "name": "hostnet", "uid": "u1", "namespace": "default",
             "annotations": {"netdevices.nri.containerd.io": devices}},
            {"id": "bad", "name": "bad", "uid": "u2", "namespace": "default",
             "annotations": {"netdevice.noderesource.dev": "- name: x\n  address: 1.2.3"},
             "linux": {"namespaces": [{"type": "network", "path": pod_ns}]}}
        ],
        "steps": steps
    })
}

/// Runs the steps with the plugin inside network namespace `host`.
fn run(dir: &Path, host: &NetNs, pod_ns: &str, steps: Value) -> RuntimeOutput {
    let (runtime, socket) = spawn_go_runtime(dir, &scenario(pod_ns, steps));
    let _plugin = PluginProcess::spawn(
        "ip",
        &[
            "netns",
            "exec",
            &host.0,
            BIN,
            "-socket",
            socket.to_str().unwrap(),
            "-name",
            "netdev",
            "-idx",
            "10",
            "-verbose",
        ],
        dir,
        "plugin",
    );
    let out = runtime.finish(TIMEOUT).unwrap();
    assert!(out.status.success(), "{}", out.stderr);
    out
}

fn step_error<'a>(out: &'a RuntimeOutput, op: &str, pod: &str) -> &'a str {
    out.steps()
        .iter()
        .find(|s| s["op"] == op && s["pod"] == pod)
        .and_then(|s| s["error"].as_str())
        .unwrap_or_else(|| panic!("no {op} {pod}: {:#}", out.json))
}

#[test]
fn moves_the_device_into_the_pod_and_back() {
    let tag = std::process::id();
    let (Some(host), Some(pod)) = (
        NetNs::create(format!("nri-ndi-host-{tag}")),
        NetNs::create(format!("nri-ndi-pod-{tag}")),
    ) else {
        eprintln!("skipped: cannot create network namespaces here (needs root)");
        return;
    };
    host.ip(&["link", "add", "nriifb0", "type", "ifb"])
        .expect("create an ifb device");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("plugin.stderr");

    let run_steps = json!([
        {"op": "wait_plugins", "count": 1, "timeout_ms": 30000},
        {"op": "RunPodSandbox", "pod": "pod0"},
        {"op": "RunPodSandbox", "pod": "hostnet"},
        {"op": "RunPodSandbox", "pod": "bad"},
        {"op": "stop"}
    ]);
    let out = run(dir.path(), &host, &pod.path(), run_steps);
    let plugin_log = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(
        step_error(&out, "RunPodSandbox", "pod0"),
        "",
        "{plugin_log}"
    );
    assert!(
        step_error(&out, "RunPodSandbox", "hostnet")
            .contains("trying to inject network device on host network Pod"),
        "{:#}",
        out.json
    );
    assert!(
        step_error(&out, "RunPodSandbox", "bad").contains("error parsing address 1.2.3"),
        "{:#}",
        out.json
    );

    assert!(
        host.ip(&["link", "show", "nriifb0"]).is_none(),
        "still on the host"
    );
    let link = pod
        .ip(&["-d", "link", "show", "eth7"])
        .unwrap_or_else(|| panic!("eth7 not in the pod; plugin log:\n{plugin_log}"));
    assert!(link.contains("mtu 1400"), "{link}");
    assert!(link.contains("<BROADCAST,NOARP,UP"), "{link}");
    assert!(link.contains("alias nriifb0"), "{link}");
    let addr = pod.ip(&["addr", "show", "eth7"]).unwrap();
    assert!(addr.contains("inet 192.168.77.2/24"), "{addr}");

    let dir = tempfile::tempdir().unwrap();
    let stop_steps = json!([
        {"op": "wait_plugins", "count": 1, "timeout_ms": 30000},
        {"op": "StopPodSandbox", "pod": "pod0"},
        {"op": "stop"}
    ]);
    let out = run(dir.path(), &host, &pod.path(), stop_steps);
    assert_eq!(step_error(&out, "StopPodSandbox", "pod0"), "");
    assert!(
        pod.ip(&["link", "show", "eth7"]).is_none(),
        "still in the pod"
    );
    let back = host
        .ip(&["link", "show", "nriifb0"])
        .expect("back on the host");
    assert!(!back.contains(",UP"), "left down: {back}");
}
