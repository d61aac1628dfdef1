//! Command line: the flags of every sample plugin ([`CommonArgs`]), and `-policy`,
//! `-metrics-addr`, `-reload-interval`, in Go's single-dash style.

use clap::Parser;
use nri_plugin_util::{CommonArgs, PluginInfo};

/// Name, default index and annotations of the plugin, for `-help` and the defaults.
pub const INFO: PluginInfo = PluginInfo {
    program: "nri-policy",
    about: "NRI plugin: a policy validator (who may change what) with an audit trail",
    name: nri_policy::POLICY_VALIDATOR_NAME,
    index: "99",
    annotations: &[(
        "required-plugins.noderesource.dev[/container.NAME]",
        "plugins that must have processed the container (with requiredPlugins)",
    )],
};

/// Flags of the policy plugin.
#[derive(Debug, Clone, Default, Parser)]
pub struct Args {
    /// The flags every sample plugin takes.
    #[command(flatten)]
    pub common: CommonArgs,
    /// Policy file (YAML); reloaded when it changes and on SIGHUP. `-config FILE`
    /// names it too when `-policy` is not given.
    #[arg(long, value_name = "FILE")]
    pub policy: Option<String>,
    /// Serve Prometheus counters on `GET /metrics`: `PORT`, `:PORT` (loopback) or `IP:PORT`.
    #[arg(long, value_name = "ADDR")]
    pub metrics_addr: Option<String>,
    /// How often to look for a changed policy file, in milliseconds (0: only on SIGHUP).
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    pub reload_interval: u64,
}

impl Args {
    /// The policy file: `-policy`, else `-config`.
    pub fn policy_file(&self) -> Option<String> {
        self.policy
            .clone()
            .or_else(|| self.common.config.as_ref().map(|p| p.display().to_string()))
    }
}

#[cfg(test)]
mod tests {
    use nri_plugin_util::try_parse_flags;

    use super::*;

    #[test]
    fn flags() {
        let a = try_parse_flags::<Args>(
            &INFO,
            &[
                "-policy",
                "/p.yaml",
                "-metrics-addr",
                ":9464",
                "-reload-interval",
                "0",
            ],
        )
        .unwrap();
        assert_eq!(a.policy.as_deref(), Some("/p.yaml"));
        assert_eq!(a.metrics_addr.as_deref(), Some(":9464"));
        assert_eq!(a.reload_interval, 0);
        let b = try_parse_flags::<Args>(&INFO, &["-config", "/c"]).unwrap();
        assert_eq!(b.policy_file().as_deref(), Some("/c"));
        assert_eq!(b.reload_interval, 1000);
        assert_eq!(a.policy_file().as_deref(), Some("/p.yaml"));
    }
}
