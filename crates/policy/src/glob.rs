//! Glob patterns of the policy language: `*` matches any run of characters
//! (slashes included), `?` exactly one character; everything else matches
//! itself.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer};

/// A compiled glob pattern.
///
/// ```
/// use nri_policy::Glob;
///
/// let g = Glob::new("acme.com/*");
/// assert!(g.matches("acme.com/cpu"));
/// assert!(!g.matches("other.io/cpu"));
/// assert!(Glob::new("ctr-?").matches("ctr-1"));
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Glob {
    text: String,
    kind: Kind,
}

#[derive(Clone, PartialEq, Eq)]
enum Kind {
    Any,
    Literal,
    Prefix(String),
    Pattern(Vec<char>),
}

impl Glob {
    /// Compiles `pattern`.
    pub fn new(pattern: &str) -> Glob {
        let kind = if pattern == "*" {
            Kind::Any
        } else if !pattern.contains(['*', '?']) {
            Kind::Literal
        } else if let Some(prefix) = pattern
            .strip_suffix('*')
            .filter(|p| !p.contains(['*', '?']))
        {
            Kind::Prefix(prefix.to_owned())
        } else {
            Kind::Pattern(pattern.chars().collect())
        };
        Glob {
            text: pattern.to_owned(),
            kind,
        }
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether `s` matches the whole pattern.
    pub fn matches(&self, s: &str) -> bool {
        match &self.kind {
            Kind::Any => true,
            Kind::Literal => self.text == s,
            Kind::Prefix(p) => s.starts_with(p.as_str()),
            Kind::Pattern(p) => {
                let s: Vec<char> = s.chars().collect();
                wildcard(p, &s)
            }
        }
    }
}

/// Iterative wildcard matching with single-star backtracking (linear in
/// practice, quadratic at worst).
fn wildcard(p: &[char], s: &[char]) -> bool {
    let (mut pi, mut si) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, si));
                pi += 1;
            }
            Some(c) if *c == '?' || Some(c) == s.get(si) => {
                pi += 1;
                si += 1;
            }
            _ => match star {
                Some((sp, ss)) => {
                    pi = sp + 1;
                    si = ss + 1;
                    star = Some((sp, ss + 1));
                }
                None => return false,
            },
        }
    }
    p.get(pi..)
        .is_some_and(|rest| rest.iter().all(|c| *c == '*'))
}

impl fmt::Debug for Glob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Glob({:?})", self.text)
    }
}

impl fmt::Display for Glob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for Glob {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if s.is_empty() {
            return Err(de::Error::custom("empty pattern"));
        }
        Ok(Glob::new(&s))
    }
}

/// Whether any of `globs` matches `s`.
pub(crate) fn any_match(globs: &[Glob], s: &str) -> bool {
    globs.iter().any(|g| g.matches(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds() {
        assert!(Glob::new("*").matches(""));
        assert!(Glob::new("*").matches("/a/b"));
        assert!(Glob::new("abc").matches("abc"));
        assert!(!Glob::new("abc").matches("abcd"));
        assert!(Glob::new("ab*").matches("ab"));
        assert!(Glob::new("ab*").matches("ab/c"));
        assert!(!Glob::new("ab*").matches("a"));
        assert!(Glob::new("*.io/x").matches("acme.io/x"));
        assert!(!Glob::new("*.io/x").matches("acme.io/y"));
        assert!(Glob::new("a*b*c").matches("a--b--c"));
        assert!(!Glob::new("a*b*c").matches("a--c--b"));
        assert!(Glob::new("a?c").matches("abc"));
        assert!(!Glob::new("a?c").matches("ac"));
        assert!(Glob::new("*a").matches("aaa"));
        assert!(Glob::new("**").matches("x"));
        assert!(Glob::new("né*").matches("névé"));
    }
}
