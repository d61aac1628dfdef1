//! `nri-hook-injector`: the hook-injector NRI plugin.

use std::path::PathBuf;
use std::process::ExitCode;

use nri_plugin_hook_injector::cli::{Args, INFO};
use nri_plugin_hook_injector::manager::{HookManager, DEFAULT_DIR, OVERRIDE_DIR};
use nri_plugin_hook_injector::HookInjector;
use nri_stub::Stub;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = nri_plugin_util::parse_args::<Args>(&INFO);
    let _tracing = nri_plugin_util::init_tracing(&args.common, &INFO);

    let dirs = if args.hooks_dirs.is_empty() {
        vec![PathBuf::from(DEFAULT_DIR), PathBuf::from(OVERRIDE_DIR)]
    } else {
        args.hooks_dirs.clone()
    };
    let manager = HookManager::new(dirs.clone());

    let _watcher = if args.disable_watch {
        None
    } else {
        for dir in &dirs {
            if let Err(e) = std::fs::create_dir_all(dir) {
                tracing::error!("failed to create directory {}: {e}", dir.display());
                return ExitCode::FAILURE;
            }
        }
        tracing::info!(
            "watching directories {:?} for new changes (every {:?})",
            dirs,
            args.watch_interval
        );
        Some(AbortOnDrop(tokio::spawn(
            manager.clone().watch(args.watch_interval),
        )))
    };

    args.common
        .serve(Stub::builder(HookInjector::new(manager)), &INFO)
        .await
}

/// Stops the watcher task with the plugin.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
