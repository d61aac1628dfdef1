//! Comparing the normalized output documents of the two runtimes.

use std::fmt;

use serde_json::Value;

use super::case::case_of_container;

/// One difference between the reference's and the candidate's output.
#[derive(Debug, Clone, PartialEq)]
pub struct Divergence {
    /// Seed of the run.
    pub seed: u64,
    /// Batch number.
    pub batch: u64,
    /// The case, when the difference is in a step of a case's container.
    pub case: Option<u64>,
    /// Where: `steps[N] <op> <container>`, `synchronize`, `update_calls`,
    /// `plugins`, `error`, or `run` (a runtime failed to produce output).
    pub place: String,
    /// The reference's value.
    pub reference: Value,
    /// The candidate's value.
    pub candidate: Value,
}

impl fmt::Display for Divergence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.case {
            Some(k) => write!(f, "seed {} case {} (batch {})", self.seed, k, self.batch)?,
            None => write!(f, "seed {} batch {}", self.seed, self.batch)?,
        }
        writeln!(f, ": {}", self.place)?;
        writeln!(f, "  reference: {}", self.reference)?;
        write!(f, "  candidate: {}", self.candidate)
    }
}

/// Compares two normalized output documents.
pub fn compare(seed: u64, batch: u64, reference: &Value, candidate: &Value) -> Vec<Divergence> {
    let mut out = Vec::new();
    let mut diverge = |case, place: String, r: &Value, c: &Value| {
        out.push(Divergence {
            seed,
            batch,
            case,
            place,
            reference: r.clone(),
            candidate: c.clone(),
        })
    };
    for key in ["error", "plugins", "synchronize", "update_calls"] {
        let (r, c) = (
            reference.get(key).unwrap_or(&Value::Null),
            candidate.get(key).unwrap_or(&Value::Null),
        );
        if r != c {
            diverge(None, key.to_owned(), r, c);
        }
    }
    let empty = Vec::new();
    let rs = reference["steps"].as_array().unwrap_or(&empty);
    let cs = candidate["steps"].as_array().unwrap_or(&empty);
    if rs.len() != cs.len() {
        diverge(
            None,
            "steps (count)".to_owned(),
            &Value::from(rs.len()),
            &Value::from(cs.len()),
        );
    }
    for (i, (r, c)) in rs.iter().zip(cs).enumerate() {
        if r == c {
            continue;
        }
        let container = r["container"].as_str().unwrap_or_default();
        let op = r["op"].as_str().unwrap_or_default();
        diverge(
            case_of_container(container),
            format!("steps[{i}] {op} {container}"),
            r,
            c,
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn differences_are_attributed_to_cases() {
        let r = json!({"plugins": ["10-a"], "synchronize": [], "update_calls": [], "steps": [
            {"op": "CreateContainer", "container": "c000007", "error": "", "result": {}},
            {"op": "stop", "error": "", "result": null}
        ]});
        let mut c = r.clone();
        assert!(compare(1, 0, &r, &c).is_empty());
        c["steps"][0]["error"] = json!("boom");
        c["plugins"] = json!([]);
        let d = compare(1, 0, &r, &c);
        assert_eq!(d.len(), 2);
        assert_eq!(d[0].place, "plugins");
        assert_eq!(d[1].case, Some(7));
        assert!(d[1]
            .to_string()
            .starts_with("seed 1 case 7 (batch 0): steps[0] CreateContainer"));
    }
}
