//! `nri-writable-cgroups`: mounts `/sys/fs/cgroup` read-write in containers annotated
//! with `writable-cgroups.noderesource.dev: "true"`, but only when the host's cgroup v2
//! hierarchy is mounted with `nsdelegate`.

use std::path::Path;
use std::process::ExitCode;

use nri_stub::Stub;

use nri_plugin_writable_cgroups::cli::{Args, INFO};
use nri_plugin_writable_cgroups::plugin::WritableCgroups;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = nri_plugin_util::parse_args::<Args>(&INFO);
    let _tracing = nri_plugin_util::init_tracing(&args.common, &INFO);

    let host_ns_delegate = match nri_plugin_writable_cgroups::mountinfo::host_has_nsdelegate(
        Path::new(&args.host_mount_file),
    ) {
        Ok(true) => {
            tracing::info!(
                "host cgroup mount has 'nsdelegate' option, enabling writable cgroups support"
            );
            true
        }
        Ok(false) => {
            tracing::warn!(
                "host cgroup mount does not have 'nsdelegate' option, disabling writable cgroups"
            );
            false
        }
        Err(err) => {
            tracing::warn!("failed to check for nsdelegate option on host cgroup mount, disabling writable cgroups: {err}");
            false
        }
    };

    args.common
        .serve(Stub::builder(WritableCgroups { host_ns_delegate }), &INFO)
        .await
}
