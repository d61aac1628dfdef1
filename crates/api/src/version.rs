//! NRI protocol versions: the version this crate implements, and inference
//! of a runtime's NRI version from the runtime's own name and version.
//!
//! Each side reports the NRI version it was built with (`NRI_version` in
//! `RegisterPluginRequest` and `ConfigureRequest`). Older runtimes report
//! nothing; a plugin can then estimate the NRI version from the runtime's
//! name and version with [`infer_version_from_runtime`].
//!
//! ```
//! use nri_api::version::infer_version_from_runtime;
//!
//! assert_eq!(infer_version_from_runtime("containerd", "v1.7.20").unwrap(), "v0.6.1");
//! assert_eq!(infer_version_from_runtime("cri-o", "v1.34.9").unwrap(), "v0.10.0");
//! ```

use std::cmp::Ordering;

use crate::gofmt::quote;

/// The NRI protocol level this crate implements (wire-compatible with the
/// reference implementation of this version).
pub const NRI_VERSION: &str = "v0.12.2";

/// Reported when the version is not known.
pub const UNKNOWN_VERSION: &str = "0.0.0-unknown";

/// Reported by Go builds from a development tree.
pub const DEVEL_VERSION: &str = "(devel)";

/// True for version strings that carry no information: empty,
/// [`UNKNOWN_VERSION`] or [`DEVEL_VERSION`].
pub fn is_unknown_version(version: &str) -> bool {
    version.is_empty() || version == UNKNOWN_VERSION || version == DEVEL_VERSION
}

/// Failure to infer an NRI version.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionError {
    /// The runtime is neither containerd nor CRI-O.
    #[error("can't infer version for unknown runtime {}", quote(.0))]
    UnknownRuntime(String),
    /// The runtime version is older than every known release (or malformed).
    #[error("failed to find latest version for {}", quote(.0))]
    NoMatch(String),
    /// The table has no NRI version for the matched runtime release.
    #[error("unknown runtime version {} {}", quote(.runtime), quote(.version))]
    UnknownRuntimeVersion {
        /// Runtime name.
        runtime: String,
        /// Runtime version.
        version: String,
    },
}

const CONTAINERD: &[(&str, &str)] = &[
    ("v1.7.0", "v0.3.0"),
    ("v1.7.7", "v0.4.0"),
    ("v1.7.14", "v0.6.0"),
    ("v1.7.16", "v0.6.1"),
    ("v1.7.26", "v0.8.0"),
    ("v2.0.0", "v0.8.0"),
    ("v2.1.0", "v0.8.0"),
    ("v2.2.0", "v0.10.0"),
    ("v2.2.1", "v0.11.0"),
];

const CRIO_PSEUDO_0_3_1: &str = "v0.3.1-0.20230504231226-94185418e253";
const CRIO_PSEUDO_0_9_1: &str = "v0.9.1-0.20250219030224-e597e7849f24";

const CRIO: &[(&str, &str)] = &[
    ("v1.26.0", "v0.2.0"),
    ("v1.26.2", "v0.3.0"),
    ("v1.26.4", CRIO_PSEUDO_0_3_1),
    ("v1.27.0", "v0.3.0"),
    ("v1.27.1", CRIO_PSEUDO_0_3_1),
    ("v1.29.0", "v0.5.0"),
    ("v1.29.2", "v0.6.0"),
    ("v1.31.0", "v0.6.1"),
    ("v1.32.0", "v0.9.0"),
    ("v1.33.0", CRIO_PSEUDO_0_9_1),
    // The reference maps v1.34.0 and later to v0.10.0, but CRI-O v1.34.0's go.mod requires
    // the v0.9.1 pre-release, which refuses ValidateContainerAdjustment
    // subscriptions ("invalid plugin events: 0x2000"); decision [21].
    ("v1.34.0", CRIO_PSEUDO_0_9_1),
    ("v1.34.1", "v0.10.0"),
    ("v1.35.0", "v0.11.0"),
];

/// Estimates the NRI version a runtime uses from its name (`containerd` or
/// `cri-o`) and version. The newest known runtime release not newer than
/// `runtime_version` decides.
///
/// Unlike the Go reference, a version without the `v` prefix (CRI-O reports
/// `1.34.0`) or with build metadata (a containerd built without release flags
/// reports `2.4.2+unknown`) is understood: see decision [21] in
/// `docs/decisions.md`.
///
/// ```
/// use nri_api::version::infer_version_from_runtime;
/// assert_eq!(
///     infer_version_from_runtime("cri-o", "1.34.0").unwrap(),
///     "v0.9.1-0.20250219030224-e597e7849f24"
/// );
/// assert_eq!(infer_version_from_runtime("containerd", "v1.7.35").unwrap(), "v0.8.0");
/// assert_eq!(infer_version_from_runtime("containerd", "1.7.35+unknown").unwrap(), "v0.8.0");
/// ```
pub fn infer_version_from_runtime(
    runtime: &str,
    runtime_version: &str,
) -> Result<String, VersionError> {
    let normalized = normalize_runtime_version(runtime_version);
    let runtime_version = normalized.as_str();
    let table = match runtime {
        "containerd" => CONTAINERD,
        "cri-o" => CRIO,
        _ => return Err(VersionError::UnknownRuntime(runtime.to_string())),
    };
    let candidates: Vec<&str> = table.iter().map(|(k, _)| *k).collect();
    let tag = find_closest_match(runtime_version, &candidates);
    if tag.is_empty() {
        return Err(VersionError::NoMatch(runtime_version.to_string()));
    }
    table
        .iter()
        .find(|(k, _)| *k == tag)
        .map(|(_, nri)| (*nri).to_string())
        .ok_or_else(|| VersionError::UnknownRuntimeVersion {
            runtime: runtime.to_string(),
            version: runtime_version.to_string(),
        })
}

/// `1.34.0` becomes `v1.34.0`; build metadata (`+unknown`) is dropped, as
/// semantic versioning ignores it in comparisons.
fn normalize_runtime_version(version: &str) -> String {
    let version = version.split_once('+').map_or(version, |(v, _)| v);
    if version.starts_with(|c: char| c.is_ascii_digit()) {
        format!("v{version}")
    } else {
        version.to_owned()
    }
}

/// Returns the largest candidate not greater than `version` (after removing
/// a git-describe suffix from it), or `""` when there is none.
///
/// Versions compare as semantic versions with a mandatory `v` prefix;
/// `v1` and `v1.2` are short for `v1.0.0` and `v1.2.0`. Malformed versions
/// sort before all well-formed ones.
///
/// ```
/// use nri_api::version::find_closest_match;
/// assert_eq!(find_closest_match("v2.0.6", &["v1.0", "v2.0.5", "v2.1"]), "v2.0.5");
/// assert_eq!(find_closest_match("v0.11.0-37-g41b9c58", &["v0.10.9", "v0.11.0"]), "v0.11.0");
/// ```
pub fn find_closest_match<'a>(version: &str, candidates: &[&'a str]) -> &'a str {
    let version = strip_git_suffix(version);
    let mut sorted = candidates.to_vec();
    sorted.sort_by(|a, b| compare_versions(a, b));
    let mut latest = "";
    for candidate in sorted {
        if compare_versions(candidate, version) == Ordering::Greater {
            break;
        }
        latest = candidate;
    }
    latest
}

/// Removes a git-describe suffix: `vX.Y.Z-N-g<hex>[.<anything>]` becomes
/// `vX.Y.Z`. Any other version is returned unchanged.
///
/// ```
/// use nri_api::version::strip_git_suffix;
/// assert_eq!(strip_git_suffix("v0.11.0-37-g41b9c58"), "v0.11.0");
/// assert_eq!(strip_git_suffix("v1.2.3-alpha.1"), "v1.2.3-alpha.1");
/// ```
pub fn strip_git_suffix(version: &str) -> &str {
    let Ok(parsed) = SemVer::parse(version) else {
        return version;
    };
    if parsed.canonical() != version || parsed.pre.is_empty() {
        return version;
    }
    let Some((commits, gsha)) = parsed.pre.split_once('-') else {
        return version;
    };
    let Some(sha_part) = gsha.strip_prefix('g') else {
        return version;
    };
    let sha = sha_part.split_once('.').map_or(sha_part, |(s, _)| s);
    let fits_u64 = |s: &str, radix: u32| {
        !s.is_empty()
            && s.chars().all(|c| c.is_digit(radix))
            && u64::from_str_radix(s, radix).is_ok()
    };
    if !fits_u64(commits, 10) || !fits_u64(sha, 16) {
        return version;
    }
    // The canonical form equals `version`, so the core is its prefix.
    let core_len = version.len() - parsed.pre.len() - 1;
    version.get(..core_len).unwrap_or(version)
}

/// Compares two versions as [`find_closest_match`] does.
pub fn compare_versions(a: &str, b: &str) -> Ordering {
    match (SemVer::parse(a), SemVer::parse(b)) {
        (Err(()), Err(())) => Ordering::Equal,
        (Err(()), Ok(_)) => Ordering::Less,
        (Ok(_), Err(())) => Ordering::Greater,
        (Ok(x), Ok(y)) => x.cmp_to(&y),
    }
}

/// A parsed version; the numbers stay decimal strings (no overflow).
struct SemVer<'a> {
    major: &'a str,
    minor: &'a str,
    patch: &'a str,
    pre: &'a str,
}

impl<'a> SemVer<'a> {
    fn parse(s: &'a str) -> Result<SemVer<'a>, ()> {
        let rest = s.strip_prefix('v').ok_or(())?;
        let (rest, build) = match rest.split_once('+') {
            Some((r, b)) => (r, Some(b)),
            None => (rest, None),
        };
        if let Some(build) = build {
            valid_identifiers(build, false)?;
        }
        let (core, pre) = match rest.split_once('-') {
            Some((c, p)) => (c, Some(p)),
            None => (rest, None),
        };
        if let Some(pre) = pre {
            valid_identifiers(pre, true)?;
        }
        let parts: Vec<&str> = core.split('.').collect();
        if parts.len() > 3 || (parts.len() < 3 && (pre.is_some() || build.is_some())) {
            return Err(());
        }
        let mut nums = ["0"; 3];
        for (slot, part) in nums.iter_mut().zip(parts.iter()) {
            if !is_num(part) || (part.len() > 1 && part.starts_with('0')) {
                return Err(());
            }
            *slot = part;
        }
        Ok(SemVer {
            major: nums[0],
            minor: nums[1],
            patch: nums[2],
            pre: pre.unwrap_or(""),
        })
    }

    fn canonical(&self) -> String {
        if self.pre.is_empty() {
            format!("v{}.{}.{}", self.major, self.minor, self.patch)
        } else {
            format!("v{}.{}.{}-{}", self.major, self.minor, self.patch, self.pre)
        }
    }

    fn cmp_to(&self, other: &SemVer<'_>) -> Ordering {
        compare_numbers(self.major, other.major)
            .then_with(|| compare_numbers(self.minor, other.minor))
            .then_with(|| compare_numbers(self.patch, other.patch))
            .then_with(|| compare_prerelease(self.pre, other.pre))
    }
}

fn is_num(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

fn valid_identifiers(s: &str, pre: bool) -> Result<(), ()> {
    for id in s.split('.') {
        if id.is_empty()
            || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            || (pre && is_num(id) && id.len() > 1 && id.starts_with('0'))
        {
            return Err(());
        }
    }
    Ok(())
}

/// Compares decimal strings without leading zeros.
fn compare_numbers(x: &str, y: &str) -> Ordering {
    x.len().cmp(&y.len()).then_with(|| x.cmp(y))
}

fn compare_prerelease(x: &str, y: &str) -> Ordering {
    if x == y {
        return Ordering::Equal;
    }
    if x.is_empty() {
        return Ordering::Greater;
    }
    if y.is_empty() {
        return Ordering::Less;
    }
    let mut xs = x.split('.');
    let mut ys = y.split('.');
    loop {
        match (xs.next(), ys.next()) {
            (Some(dx), Some(dy)) => {
                if dx == dy {
                    continue;
                }
                let (nx, ny) = (is_num(dx), is_num(dy));
                return match (nx, ny) {
                    (true, false) => Ordering::Less,
                    (false, true) => Ordering::Greater,
                    (true, true) => compare_numbers(dx, dy),
                    (false, false) => dx.cmp(dy),
                };
            }
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (None, None) => return Ordering::Equal,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn containerd_table() {
        let cases = [
            ("v1.7.0", "v0.3.0"),
            ("v1.7.6", "v0.3.0"),
            ("v1.7.7", "v0.4.0"),
            ("v1.7.13", "v0.4.0"),
            ("v1.7.14", "v0.6.0"),
            ("v1.7.15", "v0.6.0"),
            ("v1.7.16", "v0.6.1"),
            ("v1.7.25", "v0.6.1"),
            ("v1.7.26", "v0.8.0"),
            ("v1.7.30", "v0.8.0"),
            ("v2.0.0", "v0.8.0"),
            ("v2.0.7", "v0.8.0"),
            ("v2.1.0", "v0.8.0"),
            ("v2.1.6", "v0.8.0"),
            ("v2.2.0", "v0.10.0"),
            ("v2.2.1", "v0.11.0"),
            ("v2.3.0", "v0.11.0"),
            ("v2.2.0-225-ge9dc15b7a.m", "v0.10.0"),
        ];
        for (rt, nri) in cases {
            assert_eq!(
                infer_version_from_runtime("containerd", rt).unwrap(),
                nri,
                "{rt}"
            );
        }
    }

    #[test]
    fn crio_table() {
        let cases = [
            ("v1.26.0", "v0.2.0"),
            ("v1.26.1", "v0.2.0"),
            ("v1.26.2", "v0.3.0"),
            ("v1.26.3", "v0.3.0"),
            ("v1.26.4", CRIO_PSEUDO_0_3_1),
            ("v1.27.0", "v0.3.0"),
            ("v1.27.1", CRIO_PSEUDO_0_3_1),
            ("v1.28.11", CRIO_PSEUDO_0_3_1),
            ("v1.29.0", "v0.5.0"),
            ("v1.29.1", "v0.5.0"),
            ("v1.29.2", "v0.6.0"),
            ("v1.30.14", "v0.6.0"),
            ("v1.31.0", "v0.6.1"),
            ("v1.31.13", "v0.6.1"),
            ("v1.32.0", "v0.9.0"),
            ("v1.32.12", "v0.9.0"),
            ("v1.33.0", CRIO_PSEUDO_0_9_1),
            ("v1.33.8", CRIO_PSEUDO_0_9_1),
            ("v1.34.0", CRIO_PSEUDO_0_9_1),
            ("v1.34.1", "v0.10.0"),
            ("v1.34.4", "v0.10.0"),
            ("v1.35.0", "v0.11.0"),
        ];
        for (rt, nri) in cases {
            assert_eq!(
                infer_version_from_runtime("cri-o", rt).unwrap(),
                nri,
                "{rt}"
            );
        }
    }

    #[test]
    fn inference_errors() {
        assert_eq!(
            infer_version_from_runtime("docker", "v1.0.0")
                .unwrap_err()
                .to_string(),
            r#"can't infer version for unknown runtime "docker""#
        );
        assert_eq!(
            infer_version_from_runtime("containerd", "v1.6.9")
                .unwrap_err()
                .to_string(),
            r#"failed to find latest version for "v1.6.9""#
        );
        // No "v" prefix, build metadata: understood (decision [21]), unlike Go.
        assert_eq!(
            infer_version_from_runtime("containerd", "2.1.0").unwrap(),
            "v0.8.0"
        );
        assert_eq!(
            infer_version_from_runtime("cri-o", "1.35.0+dev").unwrap(),
            "v0.11.0"
        );
        assert_eq!(
            infer_version_from_runtime("containerd", "1.6.9").unwrap_err(),
            VersionError::NoMatch("v1.6.9".into())
        );
        assert_eq!(
            VersionError::UnknownRuntimeVersion {
                runtime: "cri-o".into(),
                version: "v1".into()
            }
            .to_string(),
            r#"unknown runtime version "cri-o" "v1""#
        );
    }

    #[test]
    fn strip_git_suffix_cases() {
        let cases = [
            ("", ""),
            ("v1.2.3", "v1.2.3"),
            ("v1.2", "v1.2"),
            ("v1", "v1"),
            ("v1.2.3-alpha.1", "v1.2.3-alpha.1"),
            ("v0.11.0-37-g41b9c58", "v0.11.0"),
            ("v0.11.0-37-g41b9c58.m", "v0.11.0"),
            ("v1.2.3-45", "v1.2.3-45"),
            ("v1.2.3-45-g", "v1.2.3-45-g"),
            ("v1.2.3-45-gz", "v1.2.3-45-gz"),
            ("v1.2.3-45-g12+meta", "v1.2.3-45-g12+meta"),
            ("v1.2.3-x5-g12", "v1.2.3-x5-g12"),
        ];
        for (input, want) in cases {
            assert_eq!(strip_git_suffix(input), want, "{input:?}");
        }
    }

    #[test]
    fn find_closest_match_cases() {
        let candidates = [
            "v0.0.10", "v0.1.0", "v0.1.1", "v0.2.0", "v0.10.9", "v1.0", "v1.2.3", "v2", "v2.0.5",
            "v2.1", "v2.1.2", "v3.0.5", "v4",
        ];
        assert_eq!(find_closest_match("v1.2.3", &[]), "");
        let cases = [
            ("v0.0.1", ""),
            ("v1.2.3", "v1.2.3"),
            ("v1.1.1", "v1.0"),
            ("v2.0.6", "v2.0.5"),
            ("v2.0.1", "v2"),
            ("v3.1", "v3.0.5"),
            ("v5", "v4"),
            ("v1.2.4-alpha.1", "v1.2.3"),
            ("v0.11.0-37-g41b9c58", "v0.10.9"),
            ("v0.10.9-37-g41b9c58", "v0.10.9"),
        ];
        for (version, want) in cases {
            assert_eq!(find_closest_match(version, &candidates), want, "{version}");
        }
    }

    #[test]
    fn version_ordering() {
        use Ordering::*;
        let cases = [
            ("v1.2.3", "v1.2.3", Equal),
            ("v1.2.3-pre", "v1.2.3", Less),
            ("v1.2.3+meta", "v1.2.3", Equal),
            ("v1.0.0-alpha", "v1.0.0-alpha.1", Less),
            ("v1.0.0-alpha.1", "v1.0.0-alpha.beta", Less),
            ("v1.0.0-alpha.beta", "v1.0.0-beta", Less),
            ("v1.0.0-beta", "v1.0.0-beta.2", Less),
            ("v1.0.0-beta.2", "v1.0.0-beta.11", Less),
            ("v1.0.0-beta.11", "v1.0.0-rc.1", Less),
            ("v1.0.0-rc.1", "v1", Less),
            ("v1", "v1.0", Equal),
            ("v1.0", "v1.0.0", Equal),
            ("v1.2.0", "v1.2.3-456", Less),
            ("v1.2.3-456", "v1.2.3-456.789", Less),
            ("v1.2.3-456.789", "v1.2.3-456-789", Less),
            ("v1.2.3-456-789", "v1.2.3-456a", Less),
            ("v1.2.3-456a", "v1.2.3-pre", Less),
            ("v1.2.3-pre", "v1.2.3-pre+meta", Equal),
            ("v1.2.3-zzz", "v1.2.3", Less),
            ("v99999999999999999999.0", "v1.0", Greater),
            ("1.2.3", "v0.0.1", Less),
            ("v01.2.3", "v0.0.1", Less),
            ("v1.2.3-01", "v0.0.1", Less),
            ("v1.2.3-", "v0.0.1", Less),
            ("v1.2.3++", "v0.0.1", Less),
            ("v1.2.3+", "v0.0.1", Less),
            ("v1.2.3.4", "v0.0.1", Less),
            ("v1.2-pre", "v0.0.1", Less),
            ("bad", "v1-pre", Equal),
        ];
        for (a, b, want) in cases {
            assert_eq!(compare_versions(a, b), want, "{a} vs {b}");
            assert_eq!(compare_versions(b, a), want.reverse(), "{b} vs {a}");
        }
    }

    #[test]
    fn unknown_versions() {
        assert!(is_unknown_version(""));
        assert!(is_unknown_version("0.0.0-unknown"));
        assert!(is_unknown_version("(devel)"));
        assert!(!is_unknown_version(NRI_VERSION));
    }
}
