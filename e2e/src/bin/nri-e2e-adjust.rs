//! `nri-e2e-adjust`: a plugin that makes, at CreateContainer, the adjustments
//! the sample plugins do not offer for every container: a read-only bind
//! mount, a memory limit, an annotation. The Docker suite uses it where Docker's own NRI
//! applies mounts (`ro` only) and where only `nri-runc` can apply a limit.
//!
//! ```text
//! nri-e2e-adjust --socket PATH [--name NAME] [--idx NN]
//!                [--ro-mount HOST_DIR:CONTAINER_DIR] [--mount-options LIST]
//!                [--memory-limit BYTES] [--annotation KEY=VALUE]
//! ```
//!
//! It adjusts without looking at what the runtime applies (as a plugin
//! written for containerd does), so that the suites see what a runtime
//! makes of an adjustment it cannot apply.
//!
//! The mount's options are `ro` unless `--mount-options` says otherwise
//! (Docker's NRI takes `ro` and nothing else; runc binds with `rbind,ro`).
//!
//! It exits when the runtime goes away (no reconnection).

use std::path::PathBuf;

use nri_stub::api::{Container, ContainerAdjustment, Mount, PodSandbox};
use nri_stub::{Context, CreateContainerResult, Plugin, Stub};

#[derive(Clone)]
struct Adjust {
    mount: Option<(String, String)>,
    mount_options: Vec<String>,
    memory_limit: Option<i64>,
    annotation: Option<(String, String)>,
}

#[nri_stub::plugin]
impl Plugin for Adjust {
    async fn create_container(
        &self,
        _ctx: &Context,
        _pod: &PodSandbox,
        _ctr: &Container,
    ) -> nri_stub::HandlerResult<CreateContainerResult> {
        let mut adjust = ContainerAdjustment::default();
        if let Some((source, destination)) = &self.mount {
            adjust.add_mount(Mount {
                destination: destination.clone(),
                r#type: "bind".into(),
                source: source.clone(),
                options: self.mount_options.clone(),
            });
        }
        if let Some(limit) = self.memory_limit {
            adjust.set_linux_memory_limit(limit);
        }
        if let Some((key, value)) = &self.annotation {
            adjust.add_annotation(key.clone(), value.clone());
        }
        Ok(CreateContainerResult::adjust(adjust))
    }
}

struct Args {
    socket: Option<PathBuf>,
    name: String,
    idx: String,
    adjust: Adjust,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        socket: None,
        name: "e2e-adjust".into(),
        idx: "60".into(),
        adjust: Adjust {
            mount: None,
            mount_options: vec!["ro".into()],
            memory_limit: None,
            annotation: None,
        },
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = |name: &str| it.next().ok_or_else(|| format!("{name} needs a value"));
        match flag.as_str() {
            "--socket" => args.socket = Some(PathBuf::from(value("--socket")?)),
            "--name" => args.name = value("--name")?,
            "--idx" => args.idx = value("--idx")?,
            "--ro-mount" => {
                let v = value("--ro-mount")?;
                let (host, ctr) = v
                    .split_once(':')
                    .ok_or_else(|| format!("--ro-mount {v:?}: want HOST_DIR:CONTAINER_DIR"))?;
                args.adjust.mount = Some((host.to_owned(), ctr.to_owned()));
            }
            "--mount-options" => {
                args.adjust.mount_options = value("--mount-options")?
                    .split(',')
                    .map(str::to_owned)
                    .collect();
            }
            "--annotation" => {
                let v = value("--annotation")?;
                let (key, val) = v
                    .split_once('=')
                    .ok_or_else(|| format!("--annotation {v:?}: want KEY=VALUE"))?;
                args.adjust.annotation = Some((key.to_owned(), val.to_owned()));
            }
            "--memory-limit" => {
                let v = value("--memory-limit")?;
                let n = v
                    .parse()
                    .map_err(|e| format!("--memory-limit {v:?}: {e}"))?;
                args.adjust.memory_limit = Some(n);
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(args)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("nri-e2e-adjust: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let mut builder = Stub::builder(args.adjust).name(args.name).index(args.idx);
    if let Some(socket) = args.socket {
        builder = builder.socket_path(socket);
    }
    let result = match builder.build() {
        Ok(stub) => stub.run().await,
        Err(e) => Err(e),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nri-e2e-adjust: {e}");
            std::process::ExitCode::from(1)
        }
    }
}
