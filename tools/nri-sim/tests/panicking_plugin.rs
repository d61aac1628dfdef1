//! A plugin on nri-stub whose handler panics: the report and the JSON show the
//! panic's message and where it happened, not only that a handler panicked.

mod common;

use common::{run_scenario, workspace_binary};

fn scenario() -> String {
    let plugin = workspace_binary("nri-rs-test-plugin");
    format!(
        r#"
plugins:
  - name: buggy
    index: "30"
    command: ["{}"]
    config:
      events: [CreateContainer]
      panic: {{CreateContainer: "no room for this container"}}
pods: [{{name: p}}]
containers: [{{name: app}}]
steps:
  - run_pod: p
  - create: app
"#,
        plugin.display()
    )
}

/// What the runtime was told, in both forms of the report.
const MESSAGE: &str = "plugin 30-buggy panicked in CreateContainer at ";
const WHERE: &str = "interop/src/bin/nri-rs-test-plugin/plugin.rs:";
const WHAT: &str = "no room for this container";

#[test]
fn the_json_report_carries_the_panic_message_and_location() {
    let (_d, run) = run_scenario(&scenario(), &["-o", "json"]);
    let doc = run.json();
    let create = doc["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["action"] == "create")
        .unwrap();
    let error = create["error"].as_str().unwrap_or_default();
    for part in [MESSAGE, WHERE, WHAT] {
        assert!(error.contains(part), "{part:?} not in {error:?}\n{doc:#}");
    }
}

#[test]
fn the_readable_report_shows_them_too() {
    let (_d, run) = run_scenario(&scenario(), &["-o", "human"]);
    for part in [MESSAGE, WHERE, WHAT] {
        assert!(
            run.stdout.contains(part),
            "{part:?} not in:\n{}",
            run.stdout
        );
    }
}

#[test]
fn the_panic_is_one_problem_in_the_summary() {
    let (_d, run) = run_scenario(&scenario(), &["-o", "json"]);
    let doc = run.json();
    let failures: Vec<&str> = doc["failures"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f.as_str())
        .filter(|f| f.contains(WHAT))
        .collect();
    assert_eq!(failures.len(), 1, "{doc:#}");
    assert!(failures[0].contains("plugin 30-buggy"), "{failures:?}");

    let (_d, run) = run_scenario(&scenario(), &["-o", "human"]);
    let summary = run
        .stdout
        .split_once("FAIL")
        .map(|(_, s)| s)
        .unwrap_or_default();
    assert_eq!(summary.matches(WHAT).count(), 1, "{}", run.stdout);
}
