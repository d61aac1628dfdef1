//! The policy validator (`nri-policy`, external) on a real containerd through
//! CRI: device-injector asks for a read-write bind mount of the host's `/`
//! and the logger adds an environment variable, under a policy that allows
//! the variable only. In enforce mode the creation fails with the policy's
//! refusal in crictl's error; switched to audit mode (the plugin reloads the
//! changed file), the container is created, the violation is counted on
//! `/metrics` and logged with the offending plugin, and the audit trail names
//! the plugin that set the variable.

use std::fs;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::time::Duration;

use nri_e2e::containerd::{Containerd, PACKAGES};
use nri_e2e::cri::{ContainerSpec, CriRuntime, Options, PodSpec};
use nri_e2e::host::{self, wait_for, Daemon};
use nri_e2e::plugins::{bin, start_external};

const WAIT: Duration = Duration::from_secs(60);

fn prepare() -> bool {
    let mut packages = PACKAGES.to_vec();
    packages.extend_from_slice(nri_e2e::image::PACKAGES);
    host::prepare("containerd", &packages)
}

fn wait_registered(ctrd: &dyn CriRuntime, plugin: &str, process: &mut Daemon) {
    wait_for(&format!("containerd to synchronize {plugin}"), WAIT, || {
        assert!(
            process.is_running(),
            "{} exited:\n{}",
            process.name(),
            process.log()
        );
        ctrd.plugin_synchronized(plugin).then_some(())
    })
    .unwrap_or_else(|e| panic!("{e}\ncontainerd log:\n{}", ctrd.log()));
}

/// A free loopback port (bound, read, released).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn get_metrics(port: u16) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

fn policy(mode: &str, audit: &Path) -> String {
    format!(
        "mode: {mode}\n\
         default: deny\n\
         auditFile: {}\n\
         rules:\n\
         \x20 - name: logger-env\n\
         \x20   plugins: {{names: [logger]}}\n\
         \x20   allow:\n\
         \x20     env: [NRI_POLICY_E2E]\n\
         \x20 - name: no-host-root\n\
         \x20   deny:\n\
         \x20     mounts: [{{sources: [/], access: rw}}]\n",
        audit.display()
    )
}

#[test]
fn policy_refuses_then_audits_a_root_mount_on_containerd() {
    if !prepare() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let policy_file = dir.path().join("policy.yaml");
    fs::write(&policy_file, policy("enforce", &audit)).unwrap();

    let ctrd = Containerd::start(Options::default()).unwrap();
    let crictl = ctrd.crictl();
    let socket = ctrd.layout().nri_socket.to_string_lossy().into_owned();
    let port = free_port().to_string();
    let p = policy_file.to_string_lossy().into_owned();
    let mut plugins = Vec::new();
    for (idx, name, program, extra) in [
        (
            "20",
            "device-injector",
            "nri-device-injector",
            vec!["-socket-path", &socket],
        ),
        (
            "30",
            "logger",
            "nri-logger",
            vec!["-socket", &socket, "-add-env", "NRI_POLICY_E2E"],
        ),
        (
            "90",
            "policy",
            "nri-policy",
            vec![
                "-socket",
                &socket,
                "-policy",
                &p,
                "-metrics-addr",
                &port,
                "-reload-interval",
                "100",
            ],
        ),
    ] {
        let mut args = vec!["-idx", idx, "-name", name];
        args.extend(extra);
        let mut proc = start_external(name, &bin(program).unwrap(), &args, dir.path()).unwrap();
        wait_registered(&ctrd, &format!("{idx}-{name}"), &mut proc);
        plugins.push(proc);
    }
    let port: u16 = port.parse().unwrap();

    let pod = PodSpec::new("rooted").annotation(
        "mounts.noderesource.dev/container.c0",
        "- source: /\n  destination: /host\n  type: bind\n  options: [rbind, rw]\n",
    );
    let pod_id = crictl.run_pod(&pod).unwrap();

    // Enforce: the policy's refusal, word for word, in crictl's error.
    let err = crictl
        .try_create_container(&pod_id, &pod, &ContainerSpec::new("c0"))
        .expect_err("the policy must refuse the container");
    let expected = format!(
        r#"validation error: plugin \"20-device-injector\" may not set mounts \"/host\" (source \"/\", type \"bind\", rw): denied by rule \"no-host-root\" ({}:9)"#,
        policy_file.display()
    );
    assert!(
        err.stderr.contains(&expected),
        "{}\nexpected: {expected}",
        err.stderr
    );
    assert!(crictl.call(&["ps", "-a", "-q"]).unwrap().is_empty());

    // Audit: the plugin reloads the changed file, the container is created.
    fs::write(&policy_file, policy("audit", &audit)).unwrap();
    wait_for("the audit policy to be in force", WAIT, || {
        get_metrics(port)
            .contains("nri_policy_reloads_total{result=\"ok\"} 2")
            .then_some(())
    })
    .unwrap();
    let id = crictl
        .run_container(&pod_id, &pod, &ContainerSpec::new("c0"))
        .unwrap_or_else(|e| panic!("{e}\ncontainerd log:\n{}", ctrd.log()));
    // Where the effects land: the mount and the variable are in the container.
    let env = crictl
        .exec(&id, &["sh", "-c", "echo $NRI_POLICY_E2E"])
        .unwrap();
    assert!(!env.is_empty(), "NRI_POLICY_E2E not set in the container");
    let root = crictl.exec(&id, &["ls", "/host/proc/1"]).unwrap();
    assert!(root.contains("cmdline"), "{root}");

    let metrics = get_metrics(port);
    assert!(
        metrics.contains(
            "nri_policy_violations_total{mode=\"audit\",plugin=\"20-device-injector\",field=\"mounts\",rule=\"no-host-root\"} 1"
        ),
        "{metrics}"
    );
    assert!(
        metrics.contains("nri_policy_decisions_total{mode=\"audit\",verdict=\"would_refuse\"} 1"),
        "{metrics}"
    );
    let log = plugins[2].log();
    assert!(
        log.lines().any(|l| l.contains("policy violation")
            && l.contains("mode=\"audit\"")
            && l.contains("plugin=20-device-injector")),
        "{log}"
    );

    // The audit trail: the refused and the audited creation, and who set the variable.
    let lines: Vec<serde_json::Value> = fs::read_to_string(&audit)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0]["verdict"], "refused");
    assert_eq!(lines[1]["verdict"], "would_refuse");
    let set = lines[1]["set"].as_array().unwrap();
    assert!(
        set.iter().any(|s| s["field"] == "env"
            && s["key"] == "NRI_POLICY_E2E"
            && s["plugin"] == "30-logger"),
        "{set:?}"
    );
    assert!(
        set.iter().any(|s| s["field"] == "mounts"
            && s["key"] == "/host"
            && s["plugin"] == "20-device-injector"),
        "{set:?}"
    );
}

// ---------------------------------------------------------------------------
// nri-hostd under podman: the same policy as nri-hostd's builtin validator.

fn podman_stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn hostd_builtin_policy_refuses_then_audits_under_podman() {
    use nri_e2e::podman::{Hostd, Podman, PACKAGES as PODMAN_PACKAGES};
    if !host::prepare("podman", PODMAN_PACKAGES) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let policy_file = dir.path().join("policy.yaml");
    fs::write(&policy_file, policy("enforce", &audit)).unwrap();
    let config = format!(
        "[policy_validator]\nenable = true\npolicy_file = {:?}\n",
        policy_file.to_string_lossy()
    );
    let mut hostd = Hostd::start(dir.path(), &config).unwrap();
    let socket = hostd.nri_socket.to_string_lossy().into_owned();
    let start_plugins = |hostd: &Hostd| {
        let mut plugins = Vec::new();
        for (idx, name, program, extra) in [
            ("20", "device-injector", "nri-device-injector", vec![]),
            (
                "30",
                "logger",
                "nri-logger",
                vec!["-add-env", "NRI_POLICY_E2E"],
            ),
        ] {
            let mut args = vec!["-idx", idx, "-name", name, "-socket-path", &socket];
            args.extend(extra);
            plugins.push(start_external(name, &bin(program).unwrap(), &args, dir.path()).unwrap());
            hostd.wait_registered(&format!("{idx}-{name}")).unwrap();
        }
        plugins
    };
    let mut plugins = start_plugins(&hostd);
    let podman = Podman::with_busybox(dir.path()).unwrap();
    let run_args = [
        "--hostname",
        "c0",
        "--annotation",
        // podman reads the flag as CSV: the whole value is quoted.
        "\"mounts.noderesource.dev/container.c0=[{source: /, destination: /host, type: bind, options: [rbind, rw]}]\"",
        Podman::BUSYBOX,
        "sh",
        "-c",
        "echo env=$NRI_POLICY_E2E; ls /host/proc/1 >/dev/null && echo host-root-mounted",
    ];

    // Enforce: podman run fails with the policy's refusal.
    let out = podman.run(&[&["--rm"][..], &run_args[..]].concat());
    assert!(!out.status.success());
    let err = podman_stderr(&out);
    let expected = format!(
        "plugin \"20-device-injector\" may not set mounts \"/host\" (source \"/\", type \"bind\", rw): denied by rule \"no-host-root\" ({}:9)",
        policy_file.display()
    );
    assert!(
        err.contains(&expected) || err.contains(&expected.replace('"', "\\\"")),
        "{err}\nexpected: {expected}"
    );

    // Audit: restarted with the audit policy, the container runs with both.
    fs::write(&policy_file, policy("audit", &audit)).unwrap();
    // The plugins are stopped (by pid) and started again for the new daemon.
    plugins.clear();
    hostd.restart().unwrap();
    plugins = start_plugins(&hostd);
    let out = podman.run(&[&["--rm"][..], &run_args[..]].concat());
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{}", podman_stderr(&out));
    assert!(stdout.contains("host-root-mounted"), "{stdout}");
    assert!(!stdout.contains("env=\n"), "{stdout}");

    let lines: Vec<serde_json::Value> = fs::read_to_string(&audit)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let last = lines.last().unwrap();
    assert_eq!(last["verdict"], "would_refuse", "{lines:?}");
    let set = last["set"].as_array().unwrap();
    assert!(
        set.iter().any(|s| s["field"] == "env"
            && s["key"] == "NRI_POLICY_E2E"
            && s["plugin"] == "30-logger"),
        "{set:?}"
    );
    assert_eq!(last["violations"][0]["plugin"], "20-device-injector");
    assert!(lines.iter().any(|l| l["verdict"] == "refused"), "{lines:?}");
    drop(plugins);
}
