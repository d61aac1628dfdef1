//! What both differ tests run between the differ's indices.

use std::path::Path;

use nri_interop::plugin_tests::PluginProcess;
use nri_interop::write_json;
use serde_json::json;

/// Starts the Go reference plugin `bin` (`nri-ref-plugin`) as `10-ref` on `socket`,
/// configured to add the annotation `differ.example.com/added: yes` and the
/// environment variable `ADDED=1` to every new container.
pub fn spawn_ref_plugin(dir: &Path, bin: &Path, socket: &str) -> PluginProcess {
    let config = write_json(
        dir,
        "ref.json",
        &json!({"adjust": {"annotations": {"differ.example.com/added": "yes"},
                           "env": [{"key": "ADDED", "value": "1"}]}}),
    )
    .expect("write the reference plugin's configuration");
    let config = config.to_str().expect("a UTF-8 path");
    PluginProcess::spawn(
        bin.to_str().expect("a UTF-8 path"),
        &[
            "-config", config, "-name", "ref", "-idx", "10", "-socket", socket,
        ],
        dir,
        "ref",
    )
}
