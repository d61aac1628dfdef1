//! Does the host's cgroup v2 hierarchy delegate safely (`nsdelegate`)?

use std::path::Path;

/// Where the host's mount table is looked for by default (the host's `/proc` mounted
/// at `/host/proc` in the plugin's container).
pub const DEFAULT_HOST_MOUNT_FILE: &str = "/host/proc/1/mountinfo";

/// The mount table could not be read.
#[derive(Debug, thiserror::Error)]
#[error("failed to open mount file {path:?}: {source}")]
pub struct MountFileError {
    /// The file.
    pub path: String,
    /// Why.
    #[source]
    pub source: std::io::Error,
}

/// True if the first cgroup2 mount at `/sys/fs/cgroup` (or `/sys/fs/cgroup/unified`)
/// in the mountinfo file at `path` has the `nsdelegate` super-block option.
pub fn host_has_nsdelegate(path: &Path) -> Result<bool, MountFileError> {
    let text = std::fs::read_to_string(path).map_err(|source| MountFileError {
        path: path.display().to_string(),
        source,
    })?;
    Ok(has_nsdelegate(&text))
}

/// [`host_has_nsdelegate`] on the text of a mountinfo file. Malformed lines are skipped.
pub fn has_nsdelegate(mountinfo: &str) -> bool {
    mountinfo
        .lines()
        .filter_map(parse_line)
        .find(|m| {
            m.fs_type == "cgroup2"
                && (m.mount_point == "/sys/fs/cgroup" || m.mount_point == "/sys/fs/cgroup/unified")
        })
        .is_some_and(|m| m.super_options.split(',').any(|o| o == "nsdelegate"))
}

struct MountLine<'a> {
    mount_point: &'a str,
    fs_type: &'a str,
    super_options: &'a str,
}

/// `id parent major:minor root mount-point options [optional...] - fstype source super-options`
fn parse_line(line: &str) -> Option<MountLine<'_>> {
    let (before, after) = line.split_once(" - ")?;
    let mount_point = before.split(' ').nth(4)?;
    let mut after = after.split(' ');
    let fs_type = after.next()?;
    let _source = after.next()?;
    let super_options = after.next().unwrap_or("");
    Some(MountLine {
        mount_point,
        fs_type,
        super_options,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const CG2_DELEGATE: &str =
        "36 35 98:0 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw,nsdelegate\n";
    const TMPFS: &str = "35 24 0:31 / /run rw,nosuid,nodev,relatime - tmpfs tmpfs rw,mode=755\n";

    #[test]
    fn finds_nsdelegate_on_the_cgroup2_mount() {
        assert!(has_nsdelegate(CG2_DELEGATE));
        assert!(has_nsdelegate(&format!("{TMPFS}{CG2_DELEGATE}")));
        let hybrid = "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate\n";
        assert!(has_nsdelegate(hybrid));
    }

    #[test]
    fn no_nsdelegate_wrong_place_or_no_cgroup2() {
        assert!(!has_nsdelegate(
            "36 35 98:0 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n"
        ));
        assert!(!has_nsdelegate(
            "36 35 98:0 / /other/path rw - cgroup2 cgroup2 rw,nsdelegate\n"
        ));
        assert!(!has_nsdelegate(TMPFS));
        // The option must be a super-block option, not a per-mount one.
        assert!(!has_nsdelegate(
            "36 35 98:0 / /sys/fs/cgroup rw,nsdelegate - cgroup2 cgroup2 rw\n"
        ));
        assert!(!has_nsdelegate(""));
        assert!(!has_nsdelegate("garbage\n - \n"));
    }

    #[test]
    fn the_first_matching_mount_decides() {
        let second = "37 35 98:0 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        assert!(!has_nsdelegate(&format!("{second}{CG2_DELEGATE}")));
    }

    #[test]
    fn reads_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mountinfo");
        std::fs::write(&path, CG2_DELEGATE).unwrap();
        assert!(host_has_nsdelegate(&path).unwrap());
        let err = host_has_nsdelegate(&dir.path().join("missing")).unwrap_err();
        assert!(
            err.to_string().starts_with("failed to open mount file"),
            "{err}"
        );
    }
}
