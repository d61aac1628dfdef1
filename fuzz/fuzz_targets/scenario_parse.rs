//! nri-sim: scenario files (YAML) as the simulator reads them.
//!
//! Checked: `load_str` of arbitrary text never panics; an error is a syntax
//! error with a position inside the text (or 0:0 when the parser has none),
//! or a consistency error; an Ok scenario only names declared pods and
//! containers in its steps, has distinct plugin names, and every step prints
//! (`Display`) without panicking.
#![no_main]

use std::collections::BTreeSet;
use std::path::Path;

use libfuzzer_sys::fuzz_target;
use nri_sim::scenario::{load_str, ScenarioError};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match load_str(text, "fuzz.yaml", Path::new("/nonexistent")) {
        Err(ScenarioError::Syntax {
            line,
            column,
            message,
            ..
        }) => {
            assert!(!message.is_empty());
            // The parser (YAML 1.1) breaks lines at \n, \r\n, a lone \r and
            // the Unicode breaks NEL, LS and PS; the end of the stream may be
            // reported on the line after the last one.
            let breaks = ['\n', '\r', '\u{85}', '\u{2028}', '\u{2029}'];
            let lines = text.replace("\r\n", "\n").matches(breaks).count() + 2;
            assert!(line <= lines, "line {line} of {lines}: {message}");
            assert!(line > 0 || column == 0, "{line}:{column}: {message}");
        }
        Err(ScenarioError::Invalid { message, .. }) => assert!(!message.is_empty()),
        Err(ScenarioError::Io { .. }) => panic!("load_str does no I/O"),
        Ok(s) => {
            let pods: BTreeSet<&str> = s.pods.iter().map(|p| p.name.as_str()).collect();
            let ctrs: BTreeSet<&str> = s.containers.iter().map(|c| c.name.as_str()).collect();
            for step in &s.steps {
                let _ = step.action.to_string();
                if let Some(t) = step.action.target() {
                    let known = if step.action.is_container() {
                        &ctrs
                    } else {
                        &pods
                    };
                    assert!(
                        known.contains(t),
                        "step {} names an undeclared target",
                        step.action
                    );
                }
            }
            let mut names = BTreeSet::new();
            for p in &s.plugins {
                assert!(!p.name.is_empty());
                let full = format!("{}-{}", p.index.as_deref().unwrap_or(""), p.name);
                assert!(names.insert(full), "plugin {} twice", p.name);
            }
        }
    }
});
