//! `nri-hook-injector`: the hook-injector NRI plugin.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use nri_plugin_hook_injector::cli::{
    go_args, init_logging, parse_duration, parse_go_bool, plugin_name, ShortFlags,
};
use nri_plugin_hook_injector::manager::{HookManager, DEFAULT_DIR, OVERRIDE_DIR};
use nri_plugin_hook_injector::HookInjector;
use nri_stub::Stub;

/// Injects OCI hooks configured in hooks.d directories into matching containers.
#[derive(Debug, Parser)]
#[command(name = "nri-hook-injector", version)]
struct Args {
    /// Plugin name to register to NRI (default: hook-injector, or from the runtime)
    #[arg(long)]
    name: Option<String>,
    /// Plugin index to register to NRI
    #[arg(long)]
    idx: Option<String>,
    /// Path of the NRI socket file
    #[arg(long = "socket-path")]
    socket_path: Option<PathBuf>,
    /// Enable (more) verbose logging
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_parser = parse_go_bool, default_value = "false")]
    verbose: bool,
    /// Disable watching hook directories for new hooks
    #[arg(long = "disableWatch", num_args = 0..=1, default_missing_value = "true", value_parser = parse_go_bool, default_value = "false")]
    disable_watch: bool,
    /// Hook directory, lowest precedence first; repeat for several (default:
    /// /usr/share/containers/oci/hooks.d, then /etc/containers/oci/hooks.d)
    #[arg(long = "hooks-dir")]
    hooks_dirs: Vec<PathBuf>,
    /// How often to check the hook directories for changes (e.g. 500ms, 2s)
    #[arg(long = "watch-interval", value_parser = parse_duration, default_value = "1s")]
    watch_interval: Duration,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = Args::parse_from(go_args(std::env::args_os(), ShortFlags::Long));
    init_logging(args.verbose);

    let dirs = if args.hooks_dirs.is_empty() {
        vec![PathBuf::from(DEFAULT_DIR), PathBuf::from(OVERRIDE_DIR)]
    } else {
        args.hooks_dirs
    };
    let manager = HookManager::new(dirs.clone());
    let mut builder = Stub::builder(HookInjector::new(manager.clone()));
    if let Some(name) = plugin_name(args.name, "hook-injector") {
        builder = builder.name(name);
    }
    if let Some(idx) = args.idx.filter(|i| !i.is_empty()) {
        builder = builder.index(idx);
    }
    if let Some(path) = args.socket_path {
        builder = builder.socket_path(path);
    }
    let stub = match builder.build() {
        Ok(stub) => stub,
        Err(e) => {
            tracing::error!("failed to create plugin stub: {e}");
            return ExitCode::FAILURE;
        }
    };

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
            manager.watch(args.watch_interval),
        )))
    };

    match stub.run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("plugin exited with error {e}");
            ExitCode::FAILURE
        }
    }
}

/// Stops the watcher task with the plugin.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
