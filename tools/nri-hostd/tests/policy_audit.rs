//! nri-hostd with the builtin policy validator: `nri-hostd audit` prints who
//! set what on each container (and the violations), and the validator's
//! counters are on `/metrics`. A real plugin (nri-stub, over the NRI
//! socket) adjusts containers created through the control socket.

use std::io::{Read, Write};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nri_api::{Container, ContainerAdjustment, Mount, PodSandbox};
use nri_hostd::protocol::{call, Request, Response, RuntimeRef};
use nri_hostd::{server, Hostd, HostdConfig};
use nri_stub::{Context, CreateContainerResult, Plugin};

const WAIT: Duration = Duration::from_secs(20);

/// Sets `SET_BY`; on container `c-mount` also a read-write bind mount of `/`.
struct Vendor;

#[nri_stub::plugin]
impl Plugin for Vendor {
    async fn create_container(
        &self,
        _ctx: &Context,
        _pod: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<CreateContainerResult> {
        let mut adjust = ContainerAdjustment::default();
        adjust.add_env("SET_BY", "vendor");
        if ctr.id == "c-mount" {
            adjust.add_mount(Mount {
                destination: "/host".into(),
                source: "/".into(),
                r#type: "bind".into(),
                options: vec!["rbind".into(), "rw".into()],
            });
        }
        Ok(adjust.into())
    }
}

/// Stops the in-process daemon (NRI and its control server), pass or fail.
struct Daemon {
    hostd: Arc<Hostd>,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
    plugin: tokio::task::JoinHandle<()>,
}

impl Daemon {
    async fn stop(self) {
        self.plugin.abort();
        self.server.abort();
        self.hostd.stop().await;
    }
}

fn create(socket: &Path, id: &str) -> Response {
    call(
        socket,
        &Request::Create {
            id: id.into(),
            bundle: "/nonexistent".into(),
            runtime: RuntimeRef::default(),
            spec: serde_json::json!({}),
        },
        Duration::from_secs(10),
    )
    .expect("create over the control socket")
}

/// `nri-hostd audit ARGS --config CONFIG`: exit code, stdout, stderr.
fn audit_cli(config: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_nri-hostd"))
        .arg("audit")
        .args(args)
        .arg("--config")
        .arg(config)
        .output()
        .expect("nri-hostd audit");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn scrape(addr: std::net::SocketAddr) -> String {
    let mut s = std::net::TcpStream::connect(addr).expect("connect to /metrics");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).expect("read /metrics");
    assert!(body.starts_with("HTTP/1.1 200"), "{body}");
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_names_the_plugin_and_field_and_metrics_count_the_decisions() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let d = dir.path();
    std::fs::create_dir_all(d.join("plugins")).unwrap();
    std::fs::create_dir_all(d.join("conf.d")).unwrap();
    let policy = d.join("policy.yaml");
    std::fs::write(
        &policy,
        "default: deny\nrules:\n  - name: vendor-env\n    plugins: {glob: 'vendor'}\n    \
         allow: {env: ['SET_BY']}\n",
    )
    .unwrap();
    let config_file = d.join("nri-hostd.toml");
    std::fs::write(
        &config_file,
        format!(
            "plugin_path = {:?}\nplugin_config_path = {:?}\nsocket_path = {:?}\n\
             [policy_validator]\nenable = true\npolicy_file = {:?}\n\
             [hostd]\ncontrol_socket = {:?}\nstate_file = {:?}\n\
             metrics_address = \"127.0.0.1:0\"\n",
            d.join("plugins"),
            d.join("conf.d"),
            d.join("nri.sock"),
            policy,
            d.join("control.sock"),
            d.join("state.json"),
        ),
    )
    .unwrap();
    let config = HostdConfig::load(&config_file).expect("config");
    let control = config.hostd.control_socket.clone();
    let nri_socket = config.nri.socket_path.clone();
    let hostd = Arc::new(Hostd::start(config).await.expect("start nri-hostd"));
    let listener = server::bind(&control, &Default::default()).expect("control socket");
    let server = tokio::spawn(server::serve_listener(hostd.clone(), listener));
    let stub = nri_stub::Stub::builder(Vendor)
        .name("vendor")
        .index("10")
        .socket_path(&nri_socket)
        .build()
        .expect("stub");
    let plugin = tokio::spawn(async move {
        let _ = stub.run().await;
    });
    let daemon = Daemon {
        hostd: hostd.clone(),
        server,
        plugin,
    };
    let result = tokio::time::timeout(WAIT * 3, scenario(&hostd, &control, &config_file)).await;
    daemon.stop().await;
    result.expect("scenario in time");
}

async fn scenario(hostd: &Arc<Hostd>, control: &Path, config_file: &Path) {
    let deadline = Instant::now() + WAIT;
    while !hostd.plugins().0.iter().any(|p| p == "10-vendor") {
        assert!(Instant::now() < deadline, "the plugin did not register");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let metrics = hostd.metrics_addr().expect("metrics address");

    let (c, config) = (control.to_owned(), config_file.to_owned());
    let (env, mount, one, all, unknown, text) = tokio::task::spawn_blocking(move || {
        let env = create(&c, "c-env");
        let mount = create(&c, "c-mount");
        let one = audit_cli(&config, &["c-env"]);
        let all = audit_cli(&config, &[]);
        let unknown = audit_cli(&config, &["c-none"]);
        (env, mount, one, all, unknown, scrape(metrics))
    })
    .await
    .unwrap();

    assert!(matches!(env, Response::Spec { spec: Some(_) }), "{env:?}");
    let Response::Rejected { message } = mount else {
        panic!("the rw mount of / is not refused: {mount:?}");
    };
    assert!(message.contains("plugin \"10-vendor\""), "{message}");

    // One container: its record, naming the plugin and the field it set.
    let (code, stdout, stderr) = one;
    assert_eq!(code, Some(0), "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{stdout}");
    let rec: serde_json::Value = serde_json::from_str(lines[0]).expect("a JSON line");
    assert_eq!(rec["container"]["id"], "c-env");
    assert_eq!(rec["verdict"], "allowed");
    let set = rec["set"].as_array().expect("set");
    assert!(
        set.iter()
            .any(|s| s["plugin"] == "10-vendor" && s["field"] == "env" && s["key"] == "SET_BY"),
        "{rec}"
    );
    assert_eq!(rec["violations"], serde_json::json!([]));

    // All containers, oldest first; the refused one says who mounted `/`.
    let (code, stdout, stderr) = all;
    assert_eq!(code, Some(0), "{stderr}");
    let recs: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let ids: Vec<&str> = recs
        .iter()
        .map(|r| r["container"]["id"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(ids, ["c-env", "c-mount"], "{stdout}");
    let refused = &recs[1];
    assert_eq!(refused["verdict"], "refused");
    assert!(
        refused["set"]
            .as_array()
            .expect("set")
            .iter()
            .any(|s| s["plugin"] == "10-vendor" && s["field"] == "mounts"),
        "{refused}"
    );
    assert!(
        refused["violations"]
            .as_array()
            .expect("violations")
            .iter()
            .any(|v| v["plugin"] == "10-vendor" && v["field"] == "mounts"),
        "{refused}"
    );

    let (code, stdout, stderr) = unknown;
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stderr.contains("no audit record of container \"c-none\""),
        "{stderr}"
    );

    // The builtin's counters are on nri-hostd's /metrics, with the plugin
    // call metrics, in one exposition.
    assert!(
        text.contains("nri_policy_decisions_total{mode=\"enforce\",verdict=\"allowed\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("nri_policy_decisions_total{mode=\"enforce\",verdict=\"refused\"} 1"),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("nri_policy_violations_total{")
                && l.contains("plugin=\"10-vendor\"")
                && l.contains("field=\"mounts\"")
                && l.ends_with(" 1")),
        "{text}"
    );
    assert!(text.contains("nri_policy_rules 1"), "{text}");
    assert_eq!(text.matches("# EOF").count(), 1, "{text}");
}

#[tokio::test]
async fn audit_without_the_policy_validator_says_it_is_not_enabled() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let d = dir.path();
    let mut config = HostdConfig::default();
    config.nri.socket_path = d.join("nri.sock");
    config.nri.plugin_path = d.join("plugins");
    config.nri.plugin_config_path = d.join("conf.d");
    config.hostd.state_file = d.join("state.json");
    let hostd = Arc::new(Hostd::start(config).await.expect("start nri-hostd"));
    let answer = hostd.handle(Request::Audit { id: None }).await;
    hostd.stop().await;
    let Response::Error { message } = answer else {
        panic!("{answer:?}");
    };
    assert!(
        message.contains("policy validator is not enabled"),
        "{message}"
    );
}
