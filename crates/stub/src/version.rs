//! NRI versions: the one this stub reports, and the runtime's (reported or inferred).

/// The NRI protocol version this stub reports to the runtime in `RegisterPlugin`: the
/// Go reference release whose wire protocol it implements.
pub const PLUGIN_NRI_VERSION: &str = "v0.12.2";

/// What runtimes report when they do not know their NRI version.
const UNKNOWN_VERSIONS: &[&str] = &["", "(devel)", "0.0.0-unknown"];

/// A `major.minor.patch` version, enough to compare NRI releases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct NriVersion(u64, u64, u64);

impl NriVersion {
    /// The release that added UpdatePodSandbox, PostUpdatePodSandbox and
    /// ValidateContainerAdjustment.
    pub(crate) const V0_10_0: NriVersion = NriVersion(0, 10, 0);

    /// Parses `v1.2.3`, `1.2.3` or `v1.2.3-<pre-release>` (the pre-release part is
    /// ignored). Anything else is `None`.
    pub(crate) fn parse(text: &str) -> Option<NriVersion> {
        let text = text.strip_prefix('v').unwrap_or(text);
        let core = text.split(['-', '+']).next()?;
        let mut parts = core.split('.');
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        let patch = parts.next()?.parse().ok()?;
        if parts.next().is_some() {
            return None;
        }
        Some(NriVersion(major, minor, patch))
    }
}

/// The runtime's NRI version: the reported one, or one inferred from the runtime's name
/// and version when the runtime does not report it. Returns `(version, inferred)`.
pub(crate) fn runtime_nri_version(
    reported: &str,
    runtime_name: &str,
    runtime_version: &str,
) -> (Option<String>, bool) {
    if !UNKNOWN_VERSIONS.contains(&reported) {
        return (Some(reported.to_string()), false);
    }
    match nri_api::version::infer_version_from_runtime(runtime_name, runtime_version) {
        Ok(version) => {
            tracing::info!(runtime = runtime_name, %runtime_version, %version, "inferred runtime NRI version");
            (Some(version.to_string()), true)
        }
        Err(err) => {
            tracing::warn!("failed to infer runtime NRI version: {err}");
            (None, false)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_release_and_prerelease_versions() {
        assert_eq!(NriVersion::parse("v0.6.1"), Some(NriVersion(0, 6, 1)));
        assert_eq!(NriVersion::parse("0.12.2"), Some(NriVersion(0, 12, 2)));
        assert_eq!(
            NriVersion::parse("v0.3.1-0.20230504231226-94185418e253"),
            Some(NriVersion(0, 3, 1))
        );
        assert_eq!(NriVersion::parse("(devel)"), None);
        assert_eq!(NriVersion::parse("v1.2"), None);
        assert_eq!(NriVersion::parse("v1.2.3.4"), None);
    }

    #[test]
    fn compares_numerically() {
        let v = |s| NriVersion::parse(s).unwrap();
        assert!(v("v0.9.1") < NriVersion::V0_10_0);
        assert!(v("v0.10.0") >= NriVersion::V0_10_0);
        assert!(v("v0.12.0") > v("v0.9.9"));
    }

    #[test]
    fn reported_version_wins() {
        assert_eq!(
            runtime_nri_version("v0.12.2", "containerd", "v1.7.20"),
            (Some("v0.12.2".to_string()), false)
        );
    }

    #[test]
    fn missing_version_is_inferred() {
        for reported in ["", "(devel)", "0.0.0-unknown"] {
            assert_eq!(
                runtime_nri_version(reported, "containerd", "v1.7.20"),
                (Some("v0.6.1".to_string()), true)
            );
        }
        assert_eq!(runtime_nri_version("", "podman", "v1"), (None, false));
    }
}
