//! Scenario-driven tests of the `nri-sim` binary with in-process plugins.

mod common;

use std::time::Duration;

use common::{run_in, run_scenario};

#[test]
fn the_demo_runs_and_shows_the_adjusted_spec() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_in(dir.path(), &["--color", "never"], Duration::from_secs(30));
    assert_eq!(
        run.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        run.stdout, run.stderr
    );
    assert!(run.stdout.contains("PASS"), "{}", run.stdout);
    assert!(
        run.stdout
            .contains("Annotations[demo.nri.io/annotated-by] ← 10-demo-annotator"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("+ /process/env: \"DEMO_GREETING=hello-from-nri\""),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("accepted by 00-default-validator"),
        "{}",
        run.stdout
    );
    assert!(
        !run.stdout.contains('\x1b'),
        "no colours with --color never"
    );
    // Progress goes to stderr.
    assert!(
        run.stderr
            .contains("plugins ready: 00-default-validator, 10-demo-annotator, 20-demo-resizer, 30-ulimit-adjuster"),
        "{}",
        run.stderr
    );

    let json = run_in(dir.path(), &["--output", "json"], Duration::from_secs(30));
    assert_eq!(json.code, 0, "{}", json.stderr);
    let doc = json.json();
    assert_eq!(doc["schema"], "nri-sim/v1");
    assert_eq!(doc["passed"], true);
    let spec = &doc["containers"][0]["spec"];
    assert_eq!(
        spec["annotations"]["demo.nri.io/annotated-by"],
        "demo-annotator"
    );
    assert_eq!(spec["linux"]["resources"]["memory"]["limit"], 256 << 20);
    assert_eq!(spec["linux"]["resources"]["cpu"]["shares"], 512);
    // The ulimit-adjuster sample plugin ran in-process.
    assert_eq!(spec["process"]["rlimits"][0]["type"], "RLIMIT_NOFILE");
    assert_eq!(spec["process"]["rlimits"][0]["hard"], 4096);
    assert!(doc["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["name"] == "30-ulimit-adjuster" && p["kind"] == "sample"));
    let create = &doc["steps"][1];
    assert_eq!(create["action"], "create");
    assert_eq!(create["validation"]["verdict"], "accepted");
    assert!(create["changes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["field"] == "MemLimit" && c["plugin"] == "10-demo-annotator"));
    // Colours on request.
    let colored = run_in(
        dir.path(),
        &["--color", "always", "-q"],
        Duration::from_secs(30),
    );
    assert!(colored.stdout.contains("\x1b[32m"), "{}", colored.stdout);
    assert!(colored.stderr.is_empty(), "quiet: {}", colored.stderr);
}

const CONFLICT: &str = r#"
plugins:
  - name: small
    index: "10"
    builtin:
      create: {adjust: {resources: {memory: 128Mi}}}
  - name: big
    index: "20"
    builtin:
      create: {adjust: {resources: {memory: 1Gi}, annotations: {size: big}}}
pods: [{name: p}]
containers: [{name: app}]
steps:
  - run_pod: p
  - create: app
    EXPECT
"#;

#[test]
fn a_conflict_between_two_plugins_is_reported() {
    let yaml = CONFLICT.replace("EXPECT", "expect: {error: both tried to set MemLimit}");
    let (_d, run) = run_scenario(&yaml, &["--output", "json"]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let doc = run.json();
    let step = &doc["steps"][1];
    assert_eq!(step["error_kind"], "conflict");
    assert_eq!(
        step["error"],
        "plugins \"20-big\" and \"10-small\" both tried to set MemLimit "
    );
    // The container was not created: its spec is unchanged.
    assert_eq!(doc["containers"][0]["diff"], serde_json::json!([]));
    assert_eq!(doc["containers"][0]["state"], "defined");

    // Without the expectation the conflict fails the run, with its text.
    let yaml = CONFLICT.replace("EXPECT", "");
    let (_d, run) = run_scenario(&yaml, &[]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(
        run.stdout
            .contains("conflict: plugins \"20-big\" and \"10-small\" both tried to set MemLimit"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("step 2 (create app): unexpected error"),
        "{}",
        run.stdout
    );
}

#[test]
fn the_default_validator_rejects_an_injected_hook() {
    let yaml = r#"
default_validator: {enable: true, rejectOCIHookAdjustment: true}
plugins:
  - name: hooker
    index: "10"
    builtin:
      create:
        adjust:
          hooks: {prestart: [{path: /usr/bin/evil-hook}]}
pods: [{name: p}]
containers: [{name: app}]
steps:
  - run_pod: p
  - create: app
    expect:
      error: rejected container adjustment
      called: [hooker, default-validator]
"#;
    let (_d, run) = run_scenario(yaml, &["--output", "json"]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let doc = run.json();
    let step = &doc["steps"][1];
    assert_eq!(step["error_kind"], "validation");
    assert_eq!(step["validation"]["verdict"], "rejected");
    assert_eq!(step["validation"]["rejected_by"], "00-default-validator");
    assert!(step["error"].as_str().unwrap().contains("hook"), "{step}");
    assert!(step["changes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["field"] == "OciHooks" && c["plugin"] == "10-hooker"));
    // The runtime undid the creation: plugins were told.
    assert!(step["notes"][0].as_str().unwrap().contains("undo"));
}

#[test]
fn a_hanging_plugin_is_a_timeout_naming_plugin_and_step() {
    let yaml = r#"
timeouts: {request: 300ms}
plugins:
  - name: sleepy
    index: "10"
    builtin:
      create: {delay: 1h}
  - name: fine
    index: "20"
    builtin:
      create: {adjust: {annotations: {fine: "yes"}}}
pods: [{name: p}]
containers: [{name: app}]
steps:
  - run_pod: p
  - create: app
"#;
    let (_d, run) = run_scenario(yaml, &[]);
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("step 2 (create app): plugin 10-sleepy did not answer CreateContainer within the request timeout (300ms)"),
        "{}",
        run.stdout
    );
    // The runtime went on without it: the other plugin's change is there.
    assert!(
        run.stdout.contains("+ /annotations: {\"fine\":\"yes\"}"),
        "{}",
        run.stdout
    );

    // Declared as expected, the run passes.
    let yaml = yaml.replace(
        "  - create: app\n",
        "  - create: app\n    expect: {plugin_failures: [sleepy], annotations: {fine: \"yes\"}}\n",
    );
    let (_d, run) = run_scenario(&yaml, &[]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
}

#[test]
fn a_step_that_does_not_finish_is_bounded() {
    let yaml = r#"
timeouts: {request: 1h, step: 500ms}
plugins:
  - name: stuck
    index: "10"
    builtin:
      create: {delay: 1h}
pods: [{name: p}]
containers: [{name: app}]
steps:
  - run_pod: p
  - create: app
"#;
    let (_d, run) = run_scenario(yaml, &[]);
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout
            .contains("step 2 (create app) timed out after 500ms, waiting for plugin(s) 10-stuck"),
        "{}",
        run.stdout
    );
}

#[test]
fn an_expect_mismatch_fails_with_a_useful_message() {
    let yaml = r#"
plugins:
  - name: tagger
    index: "10"
    builtin:
      create: {adjust: {annotations: {team: blue}, env: {MODE: fast}}}
pods: [{name: p}]
containers: [{name: app}]
steps:
  - run_pod: p
  - create: app
    expect:
      annotations: {team: red}
      env: {MODE: fast}
      mounts: [/data]
expect:
  app: {state: running}
"#;
    let (_d, run) = run_scenario(yaml, &[]);
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains(
            "step 2 (create app): expected app: annotation \"team\" = \"red\", found \"blue\""
        ),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("expected app: mount at /data, found mounts: /proc, /dev"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("final state: expected app: state running, found created"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("FAIL 3 problem(s)"), "{}", run.stdout);
    let (_d, run) = run_scenario(yaml, &["-o", "json"]);
    let doc = run.json();
    assert_eq!(doc["passed"], false);
    assert_eq!(doc["failures"].as_array().unwrap().len(), 3);
}

#[test]
fn syntax_errors_have_line_and_column() {
    let yaml =
        "plugins:\n  - name: x\n    index: \"10\"\n    builtin:\n      create: {adjsut: {}}\n";
    let (_d, run) = run_scenario(yaml, &[]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr
            .contains("scenario.yaml:5:16: plugins[0].builtin.create: unknown field `adjsut`")
            || run.stderr.contains("scenario.yaml:5:"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("unknown field `adjsut`"),
        "{}",
        run.stderr
    );

    let (_d, run) = run_scenario("steps:\n  - create: app\n", &["-o", "json"]);
    assert_eq!(run.code, 2);
    let doc = run.json();
    assert!(
        doc["error"]
            .as_str()
            .unwrap()
            .contains("unknown container \"app\""),
        "{doc}"
    );

    // `check` validates without running.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("s.yaml"),
        "pods: [{name: p}]\nsteps: [{run_pod: p}]\n",
    )
    .unwrap();
    let run = run_in(dir.path(), &["check", "s.yaml"], Duration::from_secs(10));
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("s.yaml: ok"));
}

#[test]
fn updates_and_evictions_from_plugins_reach_other_containers() {
    let yaml = r#"
plugins:
  - name: balancer
    index: "10"
    builtin:
      containers: [db]
      create:
        update: [{container: web, resources: {cpu_shares: 100}}]
        evict: {batch: "needs the memory"}
  - name: watcher
    index: "20"
    builtin:
      events: [StopContainer]
pods: [{name: p}]
containers: [{name: web}, {name: batch}, {name: db}]
steps:
  - run_pod: p
  - create: web
  - create: batch
  - start: batch
  - create: db
    expect:
      updated: [web]
      evicted: [batch]
expect:
  web: {resources: {cpu_shares: 100}}
  batch: {state: evicted}
"#;
    let (_d, run) = run_scenario(yaml, &["-o", "json"]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let doc = run.json();
    let step = &doc["steps"][4];
    let kinds: Vec<&str> = step["updates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["eviction", "update"]);
    assert_eq!(doc["containers"][1]["evicted"], "needs the memory");
    assert_eq!(doc["containers"][1]["state"], "evicted");
    // The runtime stopped the evicted container: StopContainer reached
    // the plugins in the same step, once.
    assert_eq!(step["updates"][0]["stopped"], true, "{step:#}");
    assert_eq!(step["updates"][1]["stopped"], false, "{step:#}");
    let stops: Vec<&serde_json::Value> = step["calls"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["event"] == "StopContainer")
        .collect();
    assert_eq!(stops.len(), 1, "{step:#}");
    assert_eq!(stops[0]["plugin"], "20-watcher");
    assert!(
        step["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().contains("batch was evicted")),
        "{step:#}"
    );
    // Removing it later does not stop it again.
    let all_stops = doc["steps"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["calls"].as_array().unwrap())
        .filter(|c| c["event"] == "StopContainer")
        .count();
    assert_eq!(all_stops, 1);

    let (_d, human) = run_scenario(yaml, &[]);
    assert!(
        human
            .stdout
            .contains("evict batch (needs the memory); the runtime stopped it"),
        "{}",
        human.stdout
    );
}

#[test]
fn update_pod_reaches_plugins_and_is_reported() {
    let yaml = r#"
plugins:
  - name: podwatch
    index: "10"
    builtin:
      events: [UpdatePodSandbox, PostUpdatePodSandbox]
  - name: other
    index: "20"
    builtin:
      events: [RunPodSandbox]
pods: [{name: p}]
steps:
  - run_pod: p
  - update_pod: p
    resources: {memory: 1Gi, cpu_shares: 2048}
    overhead: {memory: 64Mi}
    expect:
      called: [podwatch]
      not_called: [other]
  - stop_pod: p
  - update_pod: p
    expect:
      error: not running
"#;
    let (_d, run) = run_scenario(yaml, &["-o", "json"]);
    assert_eq!(
        run.code, 0,
        "{}
{}",
        run.stdout, run.stderr
    );
    let doc = run.json();
    let step = &doc["steps"][1];
    assert_eq!(step["action"], "update_pod");
    assert_eq!(step["target"], "p");
    assert_eq!(step["ok"], true);
    let events: Vec<&str> = step["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["event"].as_str().unwrap())
        .collect();
    assert_eq!(events, ["UpdatePodSandbox", "PostUpdatePodSandbox"]);
    assert_eq!(step["resources"]["memory"]["limit"]["value"], 1 << 30);
    assert!(
        step["notes"][0].as_str().unwrap().contains("overhead"),
        "{step:#}"
    );
    assert_eq!(doc["steps"][3]["ok"], false);

    let err = run_scenario(
        "pods: [{name: p}]\nsteps:\n  - run_pod: p\n    overhead: {memory: 1Mi}\n",
        &[],
    )
    .1;
    assert_eq!(err.code, 2);
    assert!(
        err.stderr
            .contains("`overhead` only applies to `update_pod` steps"),
        "{}",
        err.stderr
    );
}

#[test]
fn unknown_plugins_and_plugins_that_fail_to_register_are_explained() {
    let (_d, run) = run_scenario(
        "plugins: [{name: gpu, index: '10', command: [no-such-nri-plugin]}]\n",
        &[],
    );
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains(
            "plugin \"10-gpu\" cannot be launched: command `no-such-nri-plugin` not found on PATH"
        ),
        "{}",
        run.stderr
    );

    let yaml = r#"
plugins:
  - name: broken
    index: "10"
    command: [sh, -c, "echo 'cannot open /dev/gpu0: permission denied' >&2; exit 3"]
"#;
    let (_d, run) = run_scenario(yaml, &[]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("plugin 10-broken failed to start"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("| cannot open /dev/gpu0: permission denied"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_container_exit_reaches_plugins_once() {
    let yaml = r#"
plugins:
  - name: watcher
    index: "10"
    builtin:
      events: [StopContainer, RemoveContainer]
      stop:
        update: [{container: other, resources: {cpu_shares: 300}}]
pods: [{name: p}]
containers: [{name: app}, {name: other}]
steps:
  - run_pod: p
  - create: other
  - create: app
  - start: app
  - exit: app
    exit_code: 137
    expect: {called: [watcher], updated: [other], state: stopped}
  - remove: app
"#;
    let (_d, run) = run_scenario(yaml, &["-o", "json"]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let doc = run.json();
    let events = |i: usize| -> Vec<String> {
        doc["steps"][i]["calls"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["event"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(events(4), ["StopContainer"]);
    // The exit already told plugins about the stop: removal sends only RemoveContainer.
    assert_eq!(events(5), ["RemoveContainer"]);
    assert_eq!(
        doc["containers"][1]["spec"]["linux"]["resources"]["cpu"]["shares"],
        300
    );
}
