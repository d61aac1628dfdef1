//! What the wrapper does around each runtime command.

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use nri_hostd::protocol::{call, notify, ProtocolError, Request, Response, RuntimeRef};
use nri_hostd::state::write_atomic;
use serde_json::Value;

use crate::cli::{CommandArgs, Invocation, CREATE_BOOL_FLAGS, LIFECYCLE_BOOL_FLAGS};
use crate::config::{Config, Unreachable};

/// Exit status of the wrapper's own failures (as runc's).
pub const FAILED: i32 = 1;

/// Errors of the wrapper itself (the real runtime's are its exit status).
#[derive(Debug, thiserror::Error)]
pub enum WrapperError {
    /// The real runtime cannot be found or started.
    #[error("cannot run the real runtime {0}: {1}")]
    Runtime(String, #[source] std::io::Error),
    /// No real runtime in PATH.
    #[error("no real runtime {0:?} found in PATH (other than this wrapper)")]
    NoRuntime(String),
    /// The bundle's `config.json` cannot be read.
    #[error("cannot read {0}: {1}")]
    ReadSpec(String, #[source] std::io::Error),
    /// The bundle's `config.json` is too big.
    #[error("{path} is {size} bytes, more than the limit of {limit} bytes")]
    SpecTooLarge {
        /// The file.
        path: String,
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The bundle's `config.json` is not a JSON object.
    #[error("{0} is not a valid OCI spec: {1}")]
    BadSpec(String, String),
    /// The adjusted spec cannot be written.
    #[error("cannot write {0}: {1}")]
    WriteSpec(String, #[source] std::io::Error),
    /// A plugin rejected the container.
    #[error("container {id} rejected by NRI: {message}")]
    Rejected {
        /// Container id.
        id: String,
        /// The plugin's message.
        message: String,
    },
    /// The daemon failed or answered something unexpected.
    #[error("nri-hostd: {0}")]
    Daemon(String),
    /// The daemon cannot be reached and the policy is to fail.
    #[error("{0} (policy on_unreachable = \"fail\")")]
    UnreachableFail(ProtocolError),
    /// The daemon cannot be reached and the container needs a required plugin.
    #[error(
        "{0}; the container needs required NRI plugins ({1}), refusing to run it without them"
    )]
    RequiredPlugins(ProtocolError, String),
    /// The daemon did not answer properly.
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    /// The resources file of `update` cannot be read or written.
    #[error("update resources {0}: {1}")]
    Resources(String, String),
}

/// Finds the real runtime: `name` if it is a path, else the first `name` in
/// `PATH` that is not this executable.
pub fn find_runtime(name: &str) -> Result<PathBuf, WrapperError> {
    if name.contains('/') {
        return Ok(PathBuf::from(name));
    }
    let me = std::env::current_exe().and_then(|p| p.canonicalize()).ok();
    let path = std::env::var_os("PATH")
        .unwrap_or_else(|| "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into());
    for dir in std::env::split_paths(&path) {
        let candidate = dir.join(name);
        if !candidate.is_file() {
            continue;
        }
        if me.is_some() && candidate.canonicalize().ok() == me {
            continue;
        }
        return Ok(candidate);
    }
    Err(WrapperError::NoRuntime(name.to_string()))
}

/// One invocation of the wrapper.
pub struct Wrapper {
    config: Config,
    runtime: PathBuf,
    argv: Vec<String>,
    inv: Invocation,
}

impl Wrapper {
    /// A wrapper for `argv` (without the program name) running `runtime`.
    pub fn new(config: Config, runtime: PathBuf, argv: Vec<String>) -> Wrapper {
        let inv = Invocation::parse(&argv);
        Wrapper {
            config,
            runtime,
            argv,
            inv,
        }
    }

    fn runtime_ref(&self) -> RuntimeRef {
        RuntimeRef {
            path: self.runtime.display().to_string(),
            global_args: self.inv.global.clone(),
        }
    }

    fn ask(&self, req: &Request) -> Result<Response, ProtocolError> {
        call(&self.config.control_socket, req, self.config.timeout)
    }

    /// Tells the daemon what the runtime did, without waiting for the
    /// answer (the daemon keeps the order); problems are only logged (the
    /// runtime command itself has run).
    fn tell(&self, req: Request) {
        match notify(&self.config.control_socket, &req, self.config.timeout) {
            Ok(()) => {}
            Err(e) if e.is_unreachable() => {}
            Err(e) => eprintln!("nri-runc: {e}"),
        }
    }

    /// Asks the daemon for something whose answer only matters as a
    /// moment: it has been handled. Problems are only logged.
    fn ask_and_wait(&self, req: Request) {
        match self.ask(&req) {
            Ok(Response::Ok) => {}
            Ok(Response::Error { message }) => eprintln!("nri-runc: nri-hostd: {message}"),
            Ok(_) => {}
            Err(e) if e.is_unreachable() => {}
            Err(e) => eprintln!("nri-runc: {e}"),
        }
    }

    /// Replaces this process with the real runtime, arguments unchanged.
    fn exec(&self) -> WrapperError {
        let err = Command::new(&self.runtime).args(&self.argv).exec();
        WrapperError::Runtime(self.runtime.display().to_string(), err)
    }

    /// Runs the real runtime with `argv` and returns its exit status.
    fn run_runtime(&self, argv: &[String]) -> Result<i32, WrapperError> {
        let status = Command::new(&self.runtime)
            .args(argv)
            .status()
            .map_err(|e| WrapperError::Runtime(self.runtime.display().to_string(), e))?;
        Ok(status
            .code()
            .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)))
    }

    /// Runs the invocation; returns the exit status.
    pub fn run(&self) -> Result<i32, WrapperError> {
        let command = self.inv.command.clone().unwrap_or_default();
        match command.as_str() {
            "create" => self.create(false),
            "run" => self.create(true),
            "start" => self.around(
                LIFECYCLE_BOOL_FLAGS,
                |id| Request::Start { id },
                |id, ok| Some(Request::Started { id, ok }),
            ),
            "kill" => self.after(|id| Request::Killed { id }),
            "delete" => self.after(|id| Request::Deleted { id }),
            "pause" => self.after(|id| Request::Paused { id, paused: true }),
            "resume" => self.after(|id| Request::Paused { id, paused: false }),
            "update" => self.update(),
            _ => Err(self.exec()),
        }
    }

    fn id(&self, bool_flags: &[&str]) -> Option<String> {
        CommandArgs::parse(&self.inv.args, bool_flags)
            .id()
            .map(String::from)
    }

    /// Runs the command, then tells the daemon if it succeeded.
    fn after(&self, tell: impl Fn(String) -> Request) -> Result<i32, WrapperError> {
        let Some(id) = self.id(LIFECYCLE_BOOL_FLAGS) else {
            return Err(self.exec());
        };
        let code = self.run_runtime(&self.argv)?;
        if code == 0 {
            self.tell(tell(id));
        }
        Ok(code)
    }

    /// Tells the daemon before and after the command.
    fn around(
        &self,
        bool_flags: &[&str],
        before: impl Fn(String) -> Request,
        after: impl Fn(String, bool) -> Option<Request>,
    ) -> Result<i32, WrapperError> {
        let Some(id) = self.id(bool_flags) else {
            return Err(self.exec());
        };
        self.ask_and_wait(before(id.clone()));
        let code = self.run_runtime(&self.argv)?;
        if let Some(req) = after(id, code == 0) {
            self.tell(req);
        }
        Ok(code)
    }

    /// `create` (and `run`): NRI adjusts the bundle's spec first.
    fn create(&self, is_run: bool) -> Result<i32, WrapperError> {
        let args = CommandArgs::parse(&self.inv.args, CREATE_BOOL_FLAGS);
        let Some(id) = args.id().map(String::from) else {
            return Err(self.exec());
        };
        let bundle = match args.value(&["--bundle", "-b"]) {
            Some(b) => PathBuf::from(b),
            None => std::env::current_dir()
                .map_err(|e| WrapperError::ReadSpec("the working directory".into(), e))?,
        };
        let config_path = bundle.join("config.json");
        let (original, spec) = read_spec(&config_path, self.config.max_config_size)?;
        let request = Request::Create {
            id: id.clone(),
            bundle: bundle.display().to_string(),
            runtime: self.runtime_ref(),
            spec: spec.clone(),
        };
        let adjusted = match self.ask(&request) {
            Ok(Response::Spec { spec }) => spec,
            Ok(Response::Rejected { message }) => {
                return Err(WrapperError::Rejected { id, message })
            }
            Ok(Response::Error { message }) => return Err(WrapperError::Daemon(message)),
            Ok(other) => {
                return Err(WrapperError::Daemon(format!(
                    "unexpected answer to create: {other:?}"
                )))
            }
            Err(e) if e.is_unreachable() => {
                let required = required_plugins(&spec);
                if !required.is_empty() {
                    return Err(WrapperError::RequiredPlugins(e, required.join(", ")));
                }
                if self.config.on_unreachable == Unreachable::Fail {
                    return Err(WrapperError::UnreachableFail(e));
                }
                eprintln!(
                    "nri-runc: {e}; running container {id} without NRI (policy pass-through)"
                );
                return Err(self.exec());
            }
            Err(e) => return Err(e.into()),
        };
        let written = match adjusted {
            Some(new) => {
                let bytes = serde_json::to_vec(&new).map_err(|e| {
                    WrapperError::BadSpec(config_path.display().to_string(), e.to_string())
                })?;
                // Atomic (a crash leaves the old or the new file) but not
                // synced: a container does not outlive a power loss, and a
                // sync costs milliseconds on every create.
                if let Err(e) = write_atomic(&config_path, &bytes, false) {
                    self.tell(Request::Created { id, ok: false });
                    return Err(WrapperError::WriteSpec(
                        config_path.display().to_string(),
                        e,
                    ));
                }
                true
            }
            None => false,
        };
        if is_run {
            // `run` waits for the container: the start is reported before.
            self.tell(Request::Created {
                id: id.clone(),
                ok: true,
            });
            self.ask_and_wait(Request::Start { id });
            return Err(self.exec());
        }
        let code = self.run_runtime(&self.argv)?;
        if code != 0 && written {
            if let Err(e) = write_atomic(&config_path, &original, false) {
                eprintln!("nri-runc: cannot restore {}: {e}", config_path.display());
            }
        }
        self.tell(Request::Created { id, ok: code == 0 });
        Ok(code)
    }

    /// `update`: with `--resources FILE`, plugins may change the resources.
    fn update(&self) -> Result<i32, WrapperError> {
        let args = CommandArgs::parse(&self.inv.args, &[]);
        let (Some(id), Some(file)) = (args.id(), args.value(&["--resources", "-r"])) else {
            return Err(self.exec());
        };
        let id = id.to_string();
        let text = if file == "-" {
            let mut s = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)
                .map_err(|e| WrapperError::Resources("-".into(), e.to_string()))?;
            s
        } else {
            std::fs::read_to_string(file)
                .map_err(|e| WrapperError::Resources(file.into(), e.to_string()))?
        };
        let requested: Value = serde_json::from_str(&text)
            .map_err(|e| WrapperError::Resources(file.into(), e.to_string()))?;
        let resources = match self.ask(&Request::Update {
            id: id.clone(),
            resources: requested.clone(),
        }) {
            Ok(Response::Resources { resources }) => resources,
            Ok(Response::Rejected { message }) => {
                return Err(WrapperError::Rejected { id, message })
            }
            Ok(Response::Error { message }) => return Err(WrapperError::Daemon(message)),
            Ok(other) => {
                return Err(WrapperError::Daemon(format!(
                    "unexpected answer to update: {other:?}"
                )))
            }
            Err(e) if e.is_unreachable() => requested.clone(),
            Err(e) => return Err(e.into()),
        };
        // The real runtime reads the (possibly changed) resources from a
        // file of ours; every other argument stays as it was.
        let tmp = std::env::temp_dir().join(format!("nri-runc-update-{}.json", std::process::id()));
        let bytes = serde_json::to_vec(&resources)
            .map_err(|e| WrapperError::Resources(tmp.display().to_string(), e.to_string()))?;
        std::fs::write(&tmp, bytes)
            .map_err(|e| WrapperError::Resources(tmp.display().to_string(), e.to_string()))?;
        let argv = replace_resources(&self.argv, &tmp.display().to_string());
        let code = self.run_runtime(&argv);
        let _ = std::fs::remove_file(&tmp);
        let code = code?;
        self.tell(Request::Updated { id, ok: code == 0 });
        Ok(code)
    }

    /// Reports a failure of the wrapper as runc does: on standard error,
    /// and in the `--log` file when one is given (JSON with
    /// `--log-format json`, which containerd's shim reads).
    pub fn report(&self, err: &WrapperError) {
        let msg = format!("nri-runc: {err}");
        eprintln!("{msg}");
        if let Some(log) = self.inv.global_value("--log") {
            let line = if self.inv.global_value("--log-format") == Some("json") {
                serde_json::json!({"level": "error", "msg": msg}).to_string()
            } else {
                format!("level=error msg={msg:?}")
            };
            let _ = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
                .and_then(|mut f| {
                    std::io::Write::write_all(&mut f, format!("{line}\n").as_bytes())
                });
        }
    }
}

/// Reads and parses `config.json`, refusing files over `limit` bytes.
fn read_spec(path: &Path, limit: u64) -> Result<(Vec<u8>, Value), WrapperError> {
    let name = path.display().to_string();
    let meta = std::fs::metadata(path).map_err(|e| WrapperError::ReadSpec(name.clone(), e))?;
    if meta.len() > limit {
        return Err(WrapperError::SpecTooLarge {
            path: name,
            size: meta.len(),
            limit,
        });
    }
    let bytes = std::fs::read(path).map_err(|e| WrapperError::ReadSpec(name.clone(), e))?;
    if bytes.len() as u64 > limit {
        return Err(WrapperError::SpecTooLarge {
            path: name,
            size: bytes.len() as u64,
            limit,
        });
    }
    let spec: Value = serde_json::from_slice(&bytes)
        .map_err(|e| WrapperError::BadSpec(name.clone(), e.to_string()))?;
    if !spec.is_object() {
        return Err(WrapperError::BadSpec(name, "not a JSON object".into()));
    }
    Ok((bytes, spec))
}

/// The required-plugins annotations of a spec.
fn required_plugins(spec: &Value) -> Vec<String> {
    spec.get("annotations")
        .and_then(Value::as_object)
        .map(|m| {
            m.keys()
                .filter(|k| k.starts_with(nri_api::plugin::REQUIRED_PLUGINS_ANNOTATION))
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

/// `argv` with the value of `--resources`/`-r` replaced by `file`.
fn replace_resources(argv: &[String], file: &str) -> Vec<String> {
    let mut out = Vec::with_capacity(argv.len());
    let mut it = argv.iter();
    while let Some(a) = it.next() {
        if a == "--resources" || a == "-r" {
            out.push(a.clone());
            it.next();
            out.push(file.to_string());
        } else if a.starts_with("--resources=") {
            out.push(format!("--resources={file}"));
        } else if a.starts_with("-r=") {
            out.push(format!("-r={file}"));
        } else {
            out.push(a.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::unix::net::UnixListener;
    use std::time::Duration;

    use nri_hostd::protocol::encode;

    /// A bundle with `config` as its `config.json`, and the path of a
    /// control socket next to it.
    struct Fixture {
        dir: tempfile::TempDir,
    }

    impl Fixture {
        fn new(config: &[u8]) -> Fixture {
            let dir = tempfile::tempdir().unwrap();
            std::fs::create_dir(dir.path().join("bundle")).unwrap();
            std::fs::write(dir.path().join("bundle/config.json"), config).unwrap();
            Fixture { dir }
        }

        fn socket(&self) -> PathBuf {
            self.dir.path().join("control.sock")
        }

        fn config_json(&self) -> Vec<u8> {
            std::fs::read(self.dir.path().join("bundle/config.json")).unwrap()
        }

        /// `create` run with `runtime` as the real runtime.
        fn create(&self, runtime: &str, policy: Unreachable) -> Result<i32, WrapperError> {
            let config = Config {
                control_socket: self.socket(),
                on_unreachable: policy,
                timeout: Duration::from_millis(300),
                max_config_size: 1024,
                ..Config::default()
            };
            let bundle = self.dir.path().join("bundle").display().to_string();
            let argv = ["create", "--bundle", &bundle, "c1"]
                .map(String::from)
                .to_vec();
            Wrapper::new(config, runtime.into(), argv).run()
        }

        /// A daemon answering one connection with `answer` (raw bytes);
        /// `None`: it reads the request and never answers.
        fn daemon(&self, answer: Option<Vec<u8>>) -> std::thread::JoinHandle<()> {
            let listener = UnixListener::bind(self.socket()).unwrap();
            std::thread::spawn(move || {
                let (mut s, _) = listener.accept().unwrap();
                let mut header = [0u8; 4];
                s.read_exact(&mut header).unwrap();
                let mut body = vec![0u8; u32::from_be_bytes(header) as usize];
                s.read_exact(&mut body).unwrap();
                match answer {
                    Some(bytes) => {
                        let _ = s.write_all(&bytes);
                    }
                    None => std::thread::sleep(Duration::from_secs(2)),
                }
            })
        }
    }

    const SPEC: &[u8] = br#"{"ociVersion": "1.0.2", "process": {"args": ["sh"]}}"#;
    /// Never run: a test that reaches the real runtime fails on it.
    const NO_RUNTIME: &str = "/nonexistent/runc";

    #[test]
    fn malformed_huge_and_missing_specs_are_refused_untouched() {
        let f = Fixture::new(b"{\"ociVersion\": ");
        let err = f.create(NO_RUNTIME, Unreachable::Fail).unwrap_err();
        assert!(matches!(err, WrapperError::BadSpec(..)), "{err}");
        assert_eq!(f.config_json(), b"{\"ociVersion\": ");

        let f = Fixture::new(b"[1, 2]");
        let err = f.create(NO_RUNTIME, Unreachable::Fail).unwrap_err();
        assert!(err.to_string().contains("not a JSON object"), "{err}");

        let huge = format!("{{\"x\": \"{}\"}}", "a".repeat(2000));
        let f = Fixture::new(huge.as_bytes());
        let err = f.create(NO_RUNTIME, Unreachable::Fail).unwrap_err();
        assert!(matches!(err, WrapperError::SpecTooLarge { .. }), "{err}");
        assert_eq!(f.config_json(), huge.as_bytes());

        let f = Fixture::new(SPEC);
        std::fs::remove_dir_all(f.dir.path().join("bundle")).unwrap();
        let err = f.create(NO_RUNTIME, Unreachable::Fail).unwrap_err();
        assert!(matches!(err, WrapperError::ReadSpec(..)), "{err}");
    }

    #[test]
    fn daemon_garbage_and_hangs_fail_create_untouched() {
        let f = Fixture::new(SPEC);
        let mut garbage = 7u32.to_be_bytes().to_vec();
        garbage.extend_from_slice(b"garbage");
        let t = f.daemon(Some(garbage));
        let err = f.create(NO_RUNTIME, Unreachable::PassThrough).unwrap_err();
        assert!(err.to_string().contains("malformed message"), "{err}");
        t.join().unwrap();
        assert_eq!(f.config_json(), SPEC);

        let f = Fixture::new(SPEC);
        let t = f.daemon(Some(u32::MAX.to_be_bytes().to_vec()));
        let err = f.create(NO_RUNTIME, Unreachable::PassThrough).unwrap_err();
        assert!(err.to_string().contains("exceeds the limit"), "{err}");
        t.join().unwrap();

        let f = Fixture::new(SPEC);
        let _hung = f.daemon(None);
        let started = std::time::Instant::now();
        let err = f.create(NO_RUNTIME, Unreachable::PassThrough).unwrap_err();
        assert!(
            matches!(err, WrapperError::Protocol(ProtocolError::Io(_))),
            "{err}"
        );
        assert!(started.elapsed() < Duration::from_secs(2));
        assert_eq!(f.config_json(), SPEC);
    }

    #[test]
    fn rejection_leaves_the_bundle_alone() {
        let f = Fixture::new(SPEC);
        let answer = Response::Rejected {
            message: "validation error: plugin \"x\" said no".into(),
        };
        let t = f.daemon(Some(encode(&answer).unwrap()));
        let err = f.create(NO_RUNTIME, Unreachable::PassThrough).unwrap_err();
        assert_eq!(
            err.to_string(),
            "container c1 rejected by NRI: validation error: plugin \"x\" said no"
        );
        t.join().unwrap();
        assert_eq!(f.config_json(), SPEC);
    }

    #[test]
    fn adjusted_spec_is_written_and_restored_when_the_runtime_fails() {
        let f = Fixture::new(SPEC);
        let adjusted =
            serde_json::json!({"ociVersion": "1.0.2", "process": {"args": ["sh"], "env": ["A=1"]}});
        let t = f.daemon(Some(
            encode(&Response::Spec {
                spec: Some(adjusted),
            })
            .unwrap(),
        ));
        // The real runtime fails: its status is ours, the spec is put back.
        assert_eq!(f.create("/bin/false", Unreachable::Fail).unwrap(), 1);
        t.join().unwrap();
        assert_eq!(f.config_json(), SPEC);
        let leftovers: Vec<_> = std::fs::read_dir(f.dir.path().join("bundle"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(leftovers, ["config.json"]);
    }

    #[test]
    fn unreachable_daemon_policies() {
        let f = Fixture::new(SPEC);
        let err = f.create(NO_RUNTIME, Unreachable::Fail).unwrap_err();
        assert!(matches!(err, WrapperError::UnreachableFail(_)), "{err}");
        let f = Fixture::new(
            br#"{"annotations": {"required-plugins.noderesource.dev/container.c1": "[a]"}}"#,
        );
        let err = f.create(NO_RUNTIME, Unreachable::PassThrough).unwrap_err();
        assert!(matches!(err, WrapperError::RequiredPlugins(..)), "{err}");
    }

    #[test]
    fn resources_argument_is_replaced() {
        let argv = ["--root", "/r", "update", "-r", "/a.json", "c"].map(String::from);
        assert_eq!(
            replace_resources(&argv, "/b.json"),
            ["--root", "/r", "update", "-r", "/b.json", "c"]
        );
        let argv = ["update", "--resources=/a.json", "c"].map(String::from);
        assert_eq!(
            replace_resources(&argv, "/b.json"),
            ["update", "--resources=/b.json", "c"]
        );
    }
}
