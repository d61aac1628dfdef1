//! The report for people: a coloured summary per step, the adjusted specs
//! as diffs, and the verdict.

use std::fmt::Write;

use serde_json::Value;

use crate::report::{ContainerReport, Report, StepReport};

/// ANSI styling, or none.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    /// Whether to emit colour codes.
    pub color: bool,
}

impl Style {
    fn paint(&self, code: &str, s: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }
    /// Green.
    pub fn green(&self, s: &str) -> String {
        self.paint("32", s)
    }
    /// Red.
    pub fn red(&self, s: &str) -> String {
        self.paint("31", s)
    }
    /// Yellow.
    pub fn yellow(&self, s: &str) -> String {
        self.paint("33", s)
    }
    /// Cyan.
    pub fn cyan(&self, s: &str) -> String {
        self.paint("36", s)
    }
    /// Bold.
    pub fn bold(&self, s: &str) -> String {
        self.paint("1", s)
    }
    /// Dim.
    pub fn dim(&self, s: &str) -> String {
        self.paint("2", s)
    }
}

fn short(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        other => {
            let s = other.to_string();
            if s.len() > 160 {
                format!("{}…", s.chars().take(160).collect::<String>())
            } else {
                s
            }
        }
    }
}

/// One step, indented, as in the full report.
pub fn step(st: &Style, s: &StepReport, out: &mut String) {
    let mark = if s.passed {
        st.green("✓")
    } else {
        st.red("✗")
    };
    let _ = writeln!(
        out,
        "{:>3} {mark} {} {}",
        s.index,
        st.bold(&s.action),
        s.target.as_deref().unwrap_or("")
    );
    let pad = "        ";
    if let Some(e) = &s.error {
        let kind = s.error_kind.as_deref().unwrap_or("error");
        let text = format!("{kind}: {e}");
        let _ = writeln!(
            out,
            "{pad}{}",
            if s.passed {
                st.yellow(&text)
            } else {
                st.red(&text)
            }
        );
    }
    if !s.calls.is_empty() {
        let calls: Vec<String> = s
            .calls
            .iter()
            .map(|c| {
                let mut t = format!("{} {}", c.plugin, st.dim(&c.event));
                if c.updates > 0 {
                    t.push_str(&format!(" +{} update(s)", c.updates));
                }
                if c.evictions > 0 {
                    t.push_str(&format!(" +{} eviction(s)", c.evictions));
                }
                if c.error.is_some() {
                    t.push_str(&st.red(" (failed)"));
                }
                t
            })
            .collect();
        let _ = writeln!(out, "{pad}{} {}", st.cyan("calls  "), calls.join(", "));
    } else if s.action != "sleep" && s.action != "wait_update" {
        let _ = writeln!(
            out,
            "{pad}{} {}",
            st.cyan("calls  "),
            st.dim("no plugin subscribed")
        );
    }
    for (i, c) in s.changes.iter().enumerate() {
        let label = if i == 0 { "owners " } else { "       " };
        let field = match &c.key {
            Some(k) => format!("{}[{k}]", c.field),
            None => c.field.clone(),
        };
        let _ = writeln!(out, "{pad}{} {field} ← {}", st.cyan(label), c.plugin);
    }
    if let Some(v) = &s.validation {
        let text = match v.verdict.as_str() {
            "accepted" => st.green(&format!("accepted by {}", v.validators.join(", "))),
            _ => st.red(&format!(
                "rejected by {}",
                v.rejected_by.as_deref().unwrap_or("a validator")
            )),
        };
        let _ = writeln!(out, "{pad}{} {text}", st.cyan("valid. "));
    }
    if let Some(r) = &s.resources {
        let _ = writeln!(out, "{pad}{} {}", st.cyan("applied"), short(r));
    }
    for u in &s.updates {
        let what = match (&u.kind[..], &u.resources, &u.reason) {
            ("update", Some(r), _) => format!("update {} {}", u.container, short(r)),
            ("eviction", _, Some(reason)) => format!(
                "evict {} ({reason}){}",
                u.container,
                if u.stopped {
                    "; the runtime stopped it"
                } else {
                    ""
                }
            ),
            _ => format!("{} {}", u.kind, u.container),
        };
        let what = match &u.error {
            Some(e) => st.red(&format!("{what}: failed: {e}")),
            None => what,
        };
        let _ = writeln!(out, "{pad}{} {what}", st.cyan("updates"));
    }
    for f in &s.plugin_failures {
        let text = crate::runner::describe_failure(f, std::time::Duration::ZERO)
            .replace(" within the request timeout (0ns)", " in time");
        let text = if f.expected {
            st.yellow(&format!("{text} (expected)"))
        } else {
            st.red(&text)
        };
        let _ = writeln!(out, "{pad}{} {text}", st.red("failure"));
        if let Some(stderr) = &f.stderr {
            let _ = writeln!(out, "{pad}        {} stderr (last lines):", f.plugin);
            for l in stderr.lines() {
                let _ = writeln!(out, "{pad}        | {l}");
            }
        }
    }
    for n in &s.notes {
        let _ = writeln!(out, "{pad}{} {}", st.dim("note   "), st.dim(n));
    }
    for c in &s.checks {
        let line = if c.ok {
            format!("{} {}", st.green("✓"), c.check)
        } else {
            st.red(&format!(
                "✗ {} — found {}",
                c.check,
                c.found.as_deref().unwrap_or("?")
            ))
        };
        let _ = writeln!(out, "{pad}{} {line}", st.cyan("expect "));
    }
}

/// A container's adjusted spec as a diff against its base.
pub fn container(st: &Style, c: &ContainerReport, out: &mut String) {
    let extra = match &c.evicted {
        Some(r) => format!(", evicted: {r}"),
        None => String::new(),
    };
    let _ = writeln!(
        out,
        "  {} {}",
        st.bold(&c.name),
        st.dim(&format!("(pod {}, {}{extra})", c.pod, c.state))
    );
    if c.diff.is_empty() {
        let _ = writeln!(out, "      {}", st.dim("spec unchanged"));
    }
    changes(st, &c.diff, out);
}

/// Diff lines (`+` added, `-` removed, `~` changed, by JSON pointer),
/// indented under an entry of the report.
pub fn changes(st: &Style, diff: &[crate::diff::Change], out: &mut String) {
    for d in diff {
        let line = match d.op {
            "added" => st.green(&format!(
                "+ {}: {}",
                d.path,
                d.new.as_ref().map(short).unwrap_or_default()
            )),
            "removed" => st.red(&format!(
                "- {}: {}",
                d.path,
                d.old.as_ref().map(short).unwrap_or_default()
            )),
            _ => st.yellow(&format!(
                "~ {}: {} → {}",
                d.path,
                d.old.as_ref().map(short).unwrap_or_default(),
                d.new.as_ref().map(short).unwrap_or_default()
            )),
        };
        let _ = writeln!(out, "      {line}");
    }
}

/// The whole report.
pub fn report(st: &Style, r: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{} {}", st.bold("nri-sim"), r.scenario);
    if !r.description.is_empty() {
        let _ = writeln!(out, "  {}", st.dim(r.description.trim()));
    }
    let _ = writeln!(out, "  runtime {} {}", r.runtime.name, r.runtime.version);
    let _ = writeln!(out, "\n{}", st.bold("Plugins"));
    if r.plugins.is_empty() {
        let _ = writeln!(out, "  {}", st.dim("none"));
    }
    for p in &r.plugins {
        let _ = writeln!(
            out,
            "  {} {} {}",
            st.bold(&p.name),
            st.dim(&format!("({})", p.kind)),
            p.events.join(", ")
        );
        if p.disconnected {
            let _ = writeln!(out, "      {}", st.red("disconnected during the run"));
        }
    }
    let _ = writeln!(out, "\n{}", st.bold("Steps"));
    for s in &r.steps {
        step(st, s, &mut out);
    }
    if !r.unsolicited.is_empty() {
        let _ = writeln!(
            out,
            "\n{}",
            st.bold("Updates plugins asked for on their own")
        );
        for u in &r.unsolicited {
            let what = match (&u.resources, &u.reason) {
                (Some(res), _) => format!("update {} {}", u.container, short(res)),
                (_, Some(reason)) => format!(
                    "evict {} ({reason}){}",
                    u.container,
                    if u.stopped {
                        "; the runtime stopped it"
                    } else {
                        ""
                    }
                ),
                _ => format!("{} {}", u.kind, u.container),
            };
            let _ = writeln!(
                out,
                "  {what}{}",
                u.error
                    .as_ref()
                    .map(|e| format!(": failed: {e}"))
                    .unwrap_or_default()
            );
        }
    }
    let _ = writeln!(
        out,
        "\n{}",
        st.bold("Adjusted OCI specs (diff against the base spec)")
    );
    for c in &r.containers {
        container(st, c, &mut out);
    }
    for c in &r.checks {
        if c.ok {
            let _ = writeln!(out, "  {} {}", st.green("✓"), c.check);
        }
    }
    let _ = writeln!(out);
    if r.passed {
        let _ = writeln!(
            out,
            "{} {} step(s), {} plugin(s)",
            st.green(&st.bold("PASS")),
            r.steps.len(),
            r.plugins.len()
        );
    } else {
        let _ = writeln!(
            out,
            "{} {} problem(s):",
            st.red(&st.bold("FAIL")),
            r.failures.len()
        );
        for f in &r.failures {
            let _ = writeln!(out, "  {} {}", st.red("•"), f);
        }
    }
    out
}
