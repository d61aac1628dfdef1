//! Deciding whether a hook applies to a container.

use std::collections::BTreeMap;

use crate::hook_file::When;

/// What a hook's conditions are matched against.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    /// Container and pod annotations (pod annotations win on equal keys).
    pub annotations: &'a BTreeMap<String, String>,
    /// The container's `process.args`.
    pub args: &'a [String],
    /// True when the container has mounts.
    pub has_bind_mounts: bool,
}

/// Matching failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MatchError {
    /// A hook with `commands` met a container without arguments.
    #[error("process.args must have at least one entry")]
    NoArgs,
}

impl When {
    /// True when the hook is to be injected into `target`, with podman's rules:
    /// each set condition must hold (any suffices for the 0.1.0 schema), an
    /// `always: false` or unmet condition rejects, and `commands`, when set, decides
    /// alone once the other conditions passed. A hook without conditions never matches.
    ///
    /// ```
    /// use std::collections::BTreeMap;
    /// use nri_plugin_hook_injector::hook_file::When;
    /// use nri_plugin_hook_injector::when::Target;
    ///
    /// let when = When { commands: vec![regex::Regex::new("busybox").unwrap()], ..When::default() };
    /// let annotations = BTreeMap::new();
    /// let args = vec!["/bin/busybox".to_string(), "sh".to_string()];
    /// let target = Target { annotations: &annotations, args: &args, has_bind_mounts: false };
    /// assert_eq!(when.matches(&target), Ok(true));
    /// ```
    pub fn matches(&self, target: &Target<'_>) -> Result<bool, MatchError> {
        let mut matched = 0usize;
        let conditions = [
            self.always,
            self.has_bind_mounts.map(|b| b && target.has_bind_mounts),
        ];
        for condition in conditions.into_iter().flatten() {
            if condition {
                if self.any {
                    return Ok(true);
                }
                matched += 1;
            } else if !self.any {
                return Ok(false);
            }
        }
        for (key, value) in &self.annotations {
            let found = target
                .annotations
                .iter()
                .any(|(k, v)| key.is_match(k) && value.is_match(v));
            if found {
                if self.any {
                    return Ok(true);
                }
                matched += 1;
            } else if !self.any {
                return Ok(false);
            }
        }
        if !self.commands.is_empty() {
            let command = target.args.first().ok_or(MatchError::NoArgs)?;
            return Ok(self.commands.iter().any(|c| c.is_match(command)));
        }
        Ok(matched > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use regex::Regex;

    fn re(s: &str) -> Regex {
        Regex::new(s).unwrap()
    }

    struct Fixture {
        annotations: BTreeMap<String, String>,
        args: Vec<String>,
    }

    impl Fixture {
        fn new(annotations: &[(&str, &str)], args: &[&str]) -> Self {
            Fixture {
                annotations: annotations
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                args: args.iter().map(|a| a.to_string()).collect(),
            }
        }
        fn target(&self, mounts: bool) -> Target<'_> {
            Target {
                annotations: &self.annotations,
                args: &self.args,
                has_bind_mounts: mounts,
            }
        }
    }

    #[test]
    fn all_conditions_must_hold() {
        let f = Fixture::new(&[("com.example.department", "fluid-dynamics")], &["sh"]);
        let when = When {
            always: Some(true),
            annotations: vec![(re(r"^com\.example\.department$"), re(".*fluid-dynamics$"))],
            ..When::default()
        };
        assert_eq!(when.matches(&f.target(false)), Ok(true));
        let when = When {
            has_bind_mounts: Some(true),
            ..when
        };
        assert_eq!(when.matches(&f.target(false)), Ok(false));
        assert_eq!(when.matches(&f.target(true)), Ok(true));
        let other = Fixture::new(&[("com.example.department", "math")], &["sh"]);
        assert_eq!(when.matches(&other.target(true)), Ok(false));
    }

    #[test]
    fn always_false_and_empty_conditions_do_not_match() {
        let f = Fixture::new(&[], &["sh"]);
        let never = When {
            always: Some(false),
            ..When::default()
        };
        assert_eq!(never.matches(&f.target(true)), Ok(false));
        assert_eq!(When::default().matches(&f.target(true)), Ok(false));
    }

    #[test]
    fn commands_decide_alone_after_the_rest() {
        let f = Fixture::new(&[], &["/usr/lib/systemd/systemd"]);
        let when = When {
            commands: vec![re(".*/init$"), re(".*/systemd$")],
            ..When::default()
        };
        assert_eq!(when.matches(&f.target(false)), Ok(true));
        let g = Fixture::new(&[], &["/bin/sh", "/sbin/init"]);
        assert_eq!(
            when.matches(&g.target(false)),
            Ok(false),
            "only args[0] counts"
        );
        let none = Fixture::new(&[], &[]);
        assert_eq!(when.matches(&none.target(false)), Err(MatchError::NoArgs));
        let always_then_no_command = When {
            always: Some(true),
            ..when
        };
        assert_eq!(always_then_no_command.matches(&g.target(false)), Ok(false));
    }

    #[test]
    fn any_condition_for_old_schema() {
        let f = Fixture::new(&[("x", "has-gpu")], &["sh"]);
        let when = When {
            annotations: vec![(re(".*"), re("gpu"))],
            has_bind_mounts: Some(true),
            commands: vec![re("^never$")],
            any: true,
            ..When::default()
        };
        assert_eq!(when.matches(&f.target(false)), Ok(true));
        let g = Fixture::new(&[], &["sh"]);
        assert_eq!(when.matches(&g.target(true)), Ok(true));
        assert_eq!(when.matches(&g.target(false)), Ok(false));
    }
}
