//! Host mount propagation, as seen in `/proc/self/mountinfo`.
//!
//! A mount adjustment with the `rshared` or `rslave` option only makes
//! sense when its source lives on a host mount with shared (or, for
//! `rslave`, slave) propagation; the generator checks this with a lookup
//! function, by default [`host_mount_propagation`] on Linux.

use std::fmt;

/// Why the host propagation of a path could not be determined.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MountInfoError {
    /// No mount point is a prefix of the path.
    #[error("failed to get mount info for {}", nri_api::gofmt::quote(.0))]
    NoMountInfo(String),
    /// The mount table could not be read.
    #[error("failed to read {path}: {source}")]
    Read {
        /// The file that was read.
        path: &'static str,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A line of the mount table is malformed.
    #[error("parsing '{line}' failed: {reason}")]
    Parse {
        /// The offending line.
        line: String,
        /// What is wrong with it.
        reason: ParseReason,
    },
}

/// What is wrong with a mount table line.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ParseReason {
    /// Fewer than 10 space-separated fields.
    NotEnoughFields(usize),
    /// No ` - ` separator before the file system type.
    MissingSeparator,
    /// A bad octal escape in the mount point.
    BadEscape,
}

impl fmt::Display for ParseReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseReason::NotEnoughFields(n) => write!(f, "not enough fields ({n})"),
            ParseReason::MissingSeparator => f.write_str("missing - separator"),
            ParseReason::BadEscape => f.write_str("mount point: bad escape sequence"),
        }
    }
}

const MOUNTINFO: &str = "/proc/self/mountinfo";

/// The propagation of the host mount holding `path`: `"rshared"` for a
/// shared mount, `"rslave"` for a slave mount, `""` otherwise.
///
/// The mount is the one with the longest mount point that is a string
/// prefix of the cleaned path (the first such one on ties), as the
/// reference implementation picks it.
pub fn host_mount_propagation(path: &str) -> Result<String, MountInfoError> {
    let table = std::fs::read_to_string(MOUNTINFO).map_err(|source| MountInfoError::Read {
        path: MOUNTINFO,
        source,
    })?;
    propagation_in(&table, path)
}

/// Like [`host_mount_propagation`], on the given `mountinfo` text.
///
/// ```
/// use nri_oci::propagation::propagation_in;
///
/// let table = "\
/// 1 0 8:1 / / rw shared:1 - ext4 /dev/sda1 rw
/// 2 1 8:2 / /mnt rw master:3 - ext4 /dev/sda2 rw
/// 3 1 0:5 / /tmp rw - tmpfs tmpfs rw";
/// assert_eq!(propagation_in(table, "/data").unwrap(), "rshared");
/// assert_eq!(propagation_in(table, "/mnt/x").unwrap(), "rslave");
/// assert_eq!(propagation_in(table, "/tmp/y").unwrap(), "");
/// ```
pub fn propagation_in(mountinfo: &str, path: &str) -> Result<String, MountInfoError> {
    let dir = crate::mounts::clean_path(path);
    let mut best: Option<(usize, String)> = None;
    for line in mountinfo.lines().filter(|l| !l.is_empty()) {
        let entry = parse_line(line)?;
        if !dir.starts_with(entry.mount_point.as_str()) {
            continue;
        }
        let len = entry.mount_point.len();
        if best.as_ref().is_none_or(|(l, _)| len > *l) {
            best = Some((len, entry.optional));
        }
    }
    let Some((_, optional)) = best else {
        return Err(MountInfoError::NoMountInfo(path.to_string()));
    };
    for field in optional.split(' ') {
        if field.starts_with("shared:") {
            return Ok("rshared".into());
        }
        if field.starts_with("master:") {
            return Ok("rslave".into());
        }
    }
    Ok(String::new())
}

struct Entry {
    mount_point: String,
    optional: String,
}

fn parse_line(line: &str) -> Result<Entry, MountInfoError> {
    let bad = |reason| MountInfoError::Parse {
        line: line.to_string(),
        reason,
    };
    let fields: Vec<&str> = line.split(' ').collect();
    if fields.len() < 10 {
        return Err(bad(ParseReason::NotEnoughFields(fields.len())));
    }
    let mut sep = fields.len() - 4;
    while fields.get(sep) != Some(&"-") {
        sep -= 1;
        if sep <= 5 {
            return Err(bad(ParseReason::MissingSeparator));
        }
    }
    let raw_mount_point = fields.get(4).copied().unwrap_or_default();
    let mount_point = unescape(raw_mount_point).ok_or_else(|| bad(ParseReason::BadEscape))?;
    let optional = fields.get(6..sep).map(|f| f.join(" ")).unwrap_or_default();
    Ok(Entry {
        mount_point,
        optional,
    })
}

/// Undoes the kernel's `\NNN` octal escapes (space, tab, newline,
/// backslash) in a mount table field.
fn unescape(s: &str) -> Option<String> {
    if !s.contains('\\') {
        return Some(s.to_string());
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b != b'\\' {
            out.push(b);
            i += 1;
            continue;
        }
        let digits = bytes.get(i + 1..i + 4)?;
        let mut v: u32 = 0;
        for d in digits {
            if !(b'0'..=b'7').contains(d) {
                return None;
            }
            v = (v << 3) | u32::from(d - b'0');
        }
        out.push(u8::try_from(v).ok()?);
        i += 4;
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "\
22 27 0:21 / /proc rw,relatime shared:5 - proc proc rw
27 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw
30 27 8:2 / /var/lib rw shared:7 master:2 - ext4 /dev/sda2 rw
31 30 8:3 / /var/lib/slave rw master:9 - ext4 /dev/sda3 rw
32 27 0:40 / /with\\040space rw shared:11 - tmpfs tmpfs rw
";

    #[test]
    fn longest_prefix_wins() {
        assert_eq!(propagation_in(TABLE, "/etc").unwrap(), "");
        assert_eq!(propagation_in(TABLE, "/var/lib/x").unwrap(), "rshared");
        assert_eq!(propagation_in(TABLE, "/var/lib/slave/y").unwrap(), "rslave");
        assert_eq!(propagation_in(TABLE, "/proc/1").unwrap(), "rshared");
    }

    #[test]
    fn prefix_is_a_string_prefix_and_path_is_cleaned() {
        // "/var/lib" is a string prefix of "/var/library", as in the reference.
        assert_eq!(propagation_in(TABLE, "/var/library").unwrap(), "rshared");
        assert_eq!(
            propagation_in(TABLE, "/var/lib/slave/../slave//z").unwrap(),
            "rslave"
        );
    }

    #[test]
    fn escaped_mount_points() {
        assert_eq!(propagation_in(TABLE, "/with space/a").unwrap(), "rshared");
        assert_eq!(unescape(r"a\134b\011"), Some("a\\b\t".to_string()));
        assert_eq!(unescape(r"a\9"), None);
        assert_eq!(unescape(r"a\08x"), None);
    }

    #[test]
    fn no_match_and_bad_lines() {
        let only_proc = "22 27 0:21 / /proc rw,relatime shared:5 - proc proc rw";
        let err = propagation_in(only_proc, "relative").unwrap_err();
        assert_eq!(err.to_string(), "failed to get mount info for \"relative\"");
        let err = propagation_in("1 2 3", "/").unwrap_err();
        assert_eq!(
            err.to_string(),
            "parsing '1 2 3' failed: not enough fields (3)"
        );
        let err = propagation_in("1 2 3 4 5 6 7 8 9 10", "/").unwrap_err();
        assert!(err.to_string().ends_with("missing - separator"), "{err}");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn host_table_has_a_root_mount() {
        // Every Linux mount namespace has "/"; the lookup must succeed.
        let prop = host_mount_propagation("/").unwrap();
        assert!(["", "rshared", "rslave"].contains(&prop.as_str()));
    }
}
