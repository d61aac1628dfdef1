//! Command line: the flags of every sample plugin ([`CommonArgs`]: `-name`, `-idx`,
//! `-socket-path` or `-socket`, `-verbose`, `-no-reconnect`), and `-host-mount-file`, in Go's
//! single-dash style, parsed with clap by [`nri_plugin_util::parse_args`].

use clap::Parser;
use nri_plugin_util::{CommonArgs, PluginInfo};

/// Name, default index and annotations of the plugin, for `-help` and the defaults.
pub const INFO: PluginInfo = PluginInfo {
    program: "nri-writable-cgroups",
    about: "NRI plugin: read-write /sys/fs/cgroup for annotated containers",
    name: "writable-cgroups",
    index: "10",
    annotations: &[
        (
            "writable-cgroups.noderesource.dev",
            "\"true\": /sys/fs/cgroup read-write in the pod's containers",
        ),
        (
            "writable-cgroups.noderesource.dev/container.NAME",
            "the same for container NAME, over the pod's value",
        ),
    ],
};

/// Flags of the writable-cgroups plugin (those of the Go plugin, plus `-name` and `-no-reconnect`).
#[derive(Debug, Clone, Default, Parser)]
pub struct Args {
    /// The flags every sample plugin takes.
    #[command(flatten)]
    pub common: CommonArgs,
    /// The host's mountinfo file, checked for the nsdelegate option of the cgroup2 mount.
    #[arg(long, default_value = crate::mountinfo::DEFAULT_HOST_MOUNT_FILE)]
    pub host_mount_file: String,
}

#[cfg(test)]
mod tests {
    use nri_plugin_util::try_parse_flags;

    use super::*;

    #[test]
    fn host_mount_file() {
        assert_eq!(
            try_parse_flags::<Args>(&INFO, &[]).unwrap().host_mount_file,
            "/host/proc/1/mountinfo"
        );
        let a = try_parse_flags::<Args>(
            &INFO,
            &["-socket", "/s", "-host-mount-file", "/proc/1/mountinfo"],
        )
        .unwrap();
        assert_eq!(a.common.socket_path.to_str(), Some("/s"));
        assert_eq!(a.host_mount_file, "/proc/1/mountinfo");
    }
}
