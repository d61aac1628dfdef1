//! A pre-installed plugin that fails to start is visible: `nri-hostd status`
//! lists it as not running (exit status 1) beside the plugins that run, and
//! the daemon's log has an error line naming it.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Stops the daemon by pid when dropped, pass or fail.
struct Daemon(std::process::Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn executable(path: &Path, script: &str) {
    fs::write(path, script).expect("write plugin");
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).expect("chmod");
}

#[test]
fn status_lists_a_plugin_that_failed_to_start() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let d = dir.path();
    fs::create_dir_all(d.join("plugins")).expect("plugins dir");
    fs::create_dir_all(d.join("conf.d")).expect("conf.d");
    // Exits before registering, as a plugin that fails at start does.
    executable(&d.join("plugins/60-broken"), "#!/bin/sh\nexit 1\n");
    let config = d.join("nri-hostd.toml");
    fs::write(
        &config,
        format!(
            "plugin_path = {:?}\nplugin_config_path = {:?}\nsocket_path = {:?}\n\
             plugin_registration_timeout = \"2s\"\n[hostd]\ncontrol_socket = {:?}\nstate_file = {:?}\n",
            d.join("plugins"),
            d.join("conf.d"),
            d.join("nri.sock"),
            d.join("control.sock"),
            d.join("state.json"),
        ),
    )
    .expect("write config");
    let log = d.join("hostd.log");
    let _daemon = Daemon(
        Command::new(env!("CARGO_BIN_EXE_nri-hostd"))
            .arg("--config")
            .arg(&config)
            .env("NRI_HOSTD_LOG", "info")
            .stderr(fs::File::create(&log).expect("log"))
            .stdout(Stdio::null())
            .spawn()
            .expect("start nri-hostd"),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while !d.join("control.sock").exists() {
        assert!(
            Instant::now() < deadline,
            "no control socket; log:\n{}",
            fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = Command::new(env!("CARGO_BIN_EXE_nri-hostd"))
        .args(["status", "--config"])
        .arg(&config)
        .output()
        .expect("nri-hostd status");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("running: (none)"), "{stdout}");
    assert!(stdout.contains("not running: 60-broken"), "{stdout}");
    let logged = fs::read_to_string(&log).expect("read log");
    assert!(
        logged.lines().any(|l| l.contains("ERROR")
            && l.contains("pre-installed NRI plugin is not running")
            && l.contains("60-broken")),
        "{logged}"
    );
}

#[test]
fn status_without_a_daemon_says_so() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let config = dir.path().join("nri-hostd.toml");
    fs::write(
        &config,
        format!(
            "[hostd]\ncontrol_socket = {:?}\n",
            dir.path().join("control.sock")
        ),
    )
    .expect("write config");
    let out = Command::new(env!("CARGO_BIN_EXE_nri-hostd"))
        .args(["status", "--config"])
        .arg(&config)
        .output()
        .expect("nri-hostd status");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("is nri-hostd running?"), "{stderr}");
}
