//! The sample plugins of `plugins/` selected by name (`- sample: NAME`) and
//! run in-process, and a launched sample plugin that crashes after it
//! started.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{run_in, run_scenario};

#[test]
fn samples_selected_by_name_adjust_the_final_spec() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let run = run_in(
        &dir,
        &["run", "sample-plugins.yaml", "--output", "json"],
        Duration::from_secs(60),
    );
    let doc = run.json();
    assert_eq!(doc["passed"], true, "{doc:#}\n{}", run.stderr);
    assert_eq!(run.code, 0);
    let plugins: Vec<(&str, &str)> = doc["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["name"].as_str().unwrap(), p["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(
        plugins,
        [
            ("10-ulimit-adjuster", "sample"),
            ("20-device-injector", "sample"),
            ("30-audit", "sample")
        ]
    );
    let postgres = doc["containers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "postgres")
        .unwrap();
    let spec = &postgres["spec"];
    // ulimit-adjuster: the rlimit of the pod annotation.
    assert_eq!(
        spec["process"]["rlimits"],
        serde_json::json!([{"type": "RLIMIT_NOFILE", "hard": 4096, "soft": 1024}])
    );
    // device-injector: the mount of the pod annotation.
    assert!(spec["mounts"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["destination"] == "/var/lib/postgresql/data" && m["source"] == "/srv/pgdata"));
    // logger: the annotation its `config` asked for.
    assert!(spec["annotations"]["audited-by"]
        .as_str()
        .unwrap()
        .starts_with("logger-pid-"));
    let sidecar = &doc["containers"][1]["spec"];
    assert!(sidecar["process"].get("rlimits").is_none());
    assert!(sidecar["annotations"]["audited-by"].is_string());
}

#[test]
fn sample_arguments_and_names_are_checked() {
    // Arguments are the program's: the template's -events limits its
    // subscriptions.
    let (_d, run) = run_scenario(
        "plugins:\n  - sample: template\n    args: [-events, RunPodSandbox]\n  - sample: writable-cgroups\n    index: \"60\"\n",
        &["-o", "json"],
    );
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let doc = run.json();
    assert_eq!(doc["plugins"][0]["name"], "50-template");
    assert_eq!(
        doc["plugins"][0]["events"],
        serde_json::json!(["RunPodSandbox"])
    );
    assert_eq!(doc["plugins"][1]["name"], "60-writable-cgroups");

    // A configuration the plugin refuses: it never registers.
    let (_d, run) = run_scenario(
        "plugins:\n  - sample: logger\n    config: {events: [NoSuchEvent]}\n",
        &[],
    );
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("sample plugin logger (50-logger): it stopped before registering"),
        "{}",
        run.stderr
    );
    // A mapping reaches the plugin re-serialized: its error names the key and
    // the scenario's plugin, not a position in text the user never wrote.
    let (_d, run) = run_scenario(
        "plugins:\n  - sample: logger\n    config:\n      events: [RunPodSandbox]\n      logFile: [1]\n",
        &[],
    );
    assert_eq!(run.code, 2, "{}", run.stderr);
    let last = run.stderr.lines().last().unwrap_or_default();
    assert!(
        last.contains("logFile: invalid type: sequence, expected a string (its `config:` mapping, plugins[0] of scenario.yaml)"),
        "{}",
        run.stderr
    );
    assert!(!last.contains(" at line "), "{}", run.stderr);

    let (_d, run) = run_scenario("plugins:\n  - sample: template\n    args: [-bogus]\n", &[]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("sample plugin template (template): bad arguments"),
        "{}",
        run.stderr
    );
}

#[test]
fn an_unknown_sample_is_an_error_with_line_and_column() {
    let yaml = "pods: [{name: p}]\nplugins:\n  - name: limits\n    sample: ulimit\n";
    let (_d, run) = run_scenario(yaml, &[]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("scenario.yaml:3:5: plugins[0]: "),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("unknown sample plugin `ulimit`"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("available: default-validator, device-injector, differ, logger, network-logger, rdt, template, ulimit-adjuster, writable-cgroups"),
        "{}",
        run.stderr
    );

    let (_d, run) = run_scenario(
        "plugins:\n  - sample: network-device-injector\n",
        &["-o", "json"],
    );
    assert_eq!(run.code, 2);
    let doc = run.json();
    let err = doc["error"].as_str().unwrap();
    assert!(err.starts_with("scenario.yaml:2:"), "{err}");
    assert!(
        err.contains("cannot run in the simulator: it needs real network namespaces"),
        "{err}"
    );

    let (_d, run) = run_scenario("plugins:\n  - sample: rdt\n    env: {A: b}\n", &[]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr
            .contains("`env` applies to `command` plugins only"),
        "{}",
        run.stderr
    );
}

/// Builds the `nri-template` program into this test's target directory.
fn template_binary() -> PathBuf {
    common::workspace_binary("nri-template")
}

#[test]
fn a_launched_plugin_that_crashes_after_it_started_shows_its_stderr() {
    let plugin = template_binary();
    let dir = tempfile::tempdir().unwrap();
    // The plugin registers normally; once it has seen the pod start it
    // "crashes": a last word on stderr, then it is gone.
    let script = dir.path().join("crashy.sh");
    std::fs::write(
        &script,
        format!(
            r#"#!/bin/sh
log="$0.log"
: > "$log"
'{}' 2>"$log" &
pid=$!
until grep -q "started pod" "$log"; do sleep 0.05; done
echo "fatal error: simulated crash in the plugin" >&2
kill -9 $pid
exit 3
"#,
            plugin.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let yaml = format!(
        r#"
plugins:
  - name: crashy
    index: "40"
    command: ["{}"]
pods: [{{name: p}}]
containers: [{{name: app}}]
steps:
  - run_pod: p
  - sleep: 3s
  - create: app
"#,
        script.display()
    );
    std::fs::write(dir.path().join("scenario.yaml"), &yaml).unwrap();
    let run = run_in(
        dir.path(),
        &["run", "scenario.yaml", "-o", "json"],
        Duration::from_secs(60),
    );
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    let doc = run.json();
    let failures: Vec<(usize, &serde_json::Value)> = doc["steps"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| {
            let i = s["index"].as_u64().unwrap() as usize;
            s["plugin_failures"]
                .as_array()
                .unwrap()
                .iter()
                .map(move |f| (i, f))
        })
        .collect();
    // Found at the step it died in or a later one, reported once with its
    // stderr.
    assert!(!failures.is_empty(), "{doc:#}");
    assert!(
        failures.iter().all(|(_, f)| f["plugin"] == "40-crashy"),
        "{doc:#}"
    );
    let (_, f) = failures
        .iter()
        .find(|(_, f)| f["stderr"].is_string())
        .unwrap_or_else(|| panic!("no stderr: {doc:#}"));
    assert_eq!(f["plugin"], "40-crashy");
    assert_eq!(f["disconnected"], true);
    assert!(
        f["stderr"]
            .as_str()
            .unwrap()
            .contains("fatal error: simulated crash in the plugin"),
        "{f:#}"
    );
    assert!(
        doc["failures"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m.as_str().unwrap().contains("40-crashy")),
        "{doc:#}"
    );

    let human = run_in(
        dir.path(),
        &["run", "scenario.yaml", "--color", "never"],
        Duration::from_secs(60),
    );
    assert_eq!(human.code, 1);
    assert!(
        human.stdout.contains("40-crashy stderr (last lines):"),
        "{}",
        human.stdout
    );
    assert!(
        human
            .stdout
            .contains("| fatal error: simulated crash in the plugin"),
        "{}",
        human.stdout
    );
    assert!(
        human.stdout.contains("found gone at step") || human.stdout.contains("(disconnected)"),
        "{}",
        human.stdout
    );
}
