//! The documentation a new user follows, checked against the workspace:
//!
//! * every install line of README.md, the packages' READMEs and docs/ works
//!   from this checkout today (`cargo install --path`, path or git
//!   dependencies of workspace members), unless it says it is the form for
//!   after the first release on crates.io;
//! * docs/plugin-guide.md's plugin, built from an empty directory exactly as
//!   the guide writes it (its Cargo.toml and src/main.rs taken from the
//!   guide), takes the usual options and passes the guide's scenarios in
//!   nri-sim, as a launched plugin and as an external one.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nri_e2e::workspace::{build_bins_with_features, root};
use serde_json::Value;

/// Marks a line showing what works only once the crates are on crates.io.
const AFTER_RELEASE: &str = "after the first release";

/// The repository a `--git` install line must name.
const REPOSITORY: &str = "https://github.com/nri-rs/nri-rs";

/// A workspace member: its directory and whether it has a binary.
struct Member {
    dir: PathBuf,
    has_bin: bool,
}

fn members() -> BTreeMap<String, Member> {
    let out = Command::new(env!("CARGO"))
        .current_dir(root())
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .output()
        .expect("cargo metadata");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: Value = serde_json::from_slice(&out.stdout).expect("metadata JSON");
    let mut members = BTreeMap::new();
    for p in meta["packages"].as_array().expect("packages") {
        let manifest = PathBuf::from(p["manifest_path"].as_str().expect("manifest_path"));
        let has_bin = p["targets"].as_array().expect("targets").iter().any(|t| {
            t["kind"]
                .as_array()
                .is_some_and(|k| k.iter().any(|k| k == "bin"))
        });
        members.insert(
            p["name"].as_str().expect("name").to_owned(),
            Member {
                dir: manifest.parent().expect("package dir").to_path_buf(),
                has_bin,
            },
        );
    }
    members
}

/// The documents a user reads: README.md, every package's README.md and
/// docs/*.md.
fn documents() -> Vec<PathBuf> {
    let root = root();
    let mut docs = vec![root.join("README.md")];
    for dir in ["crates", "tools", "plugins", "examples", "deploy"] {
        let Ok(entries) = fs::read_dir(root.join(dir)) else {
            continue;
        };
        for e in entries.filter_map(Result::ok) {
            let readme = e.path().join("README.md");
            if readme.is_file() {
                docs.push(readme);
            }
        }
    }
    for dir in ["interop", "interop/min-plugin", "e2e", "deploy"] {
        let readme = root.join(dir).join("README.md");
        if readme.is_file() {
            docs.push(readme);
        }
    }
    for e in fs::read_dir(root.join("docs"))
        .expect("docs/")
        .filter_map(Result::ok)
    {
        if e.path().extension().is_some_and(|x| x == "md") {
            docs.push(e.path());
        }
    }
    docs.sort();
    docs.dedup();
    docs
}

/// The workspace member a documented path names: the path itself from the
/// workspace root, or its tail (a guide's `../nri-rs/crates/stub` is
/// `crates/stub` of the checkout).
fn member_at<'a>(
    path: &str,
    members: &'a BTreeMap<String, Member>,
) -> Option<(&'a str, &'a Member)> {
    let root = root();
    let parts: Vec<&str> = path
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    (0..parts.len()).find_map(|skip| {
        let candidate = root.join(parts[skip..].join("/"));
        let candidate = candidate.canonicalize().ok()?;
        members
            .iter()
            .find(|(_, m)| m.dir.canonicalize().ok().as_ref() == Some(&candidate))
            .map(|(n, m)| (n.as_str(), m))
    })
}

/// What is wrong with the `cargo install` command in `words` (the words
/// after `cargo install`), if anything.
fn check_install(words: &[&str], members: &BTreeMap<String, Member>) -> Option<String> {
    let mut path = None;
    let mut git = None;
    let mut names = Vec::new();
    let mut it = words.iter();
    while let Some(w) = it.next() {
        match *w {
            "--path" => path = it.next().copied(),
            "--git" => git = it.next().copied(),
            "--features" | "--bin" | "--root" | "--branch" | "--tag" | "--rev" | "--version"
            | "--target" | "--profile" | "-F" => {
                it.next();
            }
            w if w.starts_with('-') => {}
            w => names.push(w),
        }
    }
    let ours: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| members.contains_key(*n) || n.starts_with("nri-"))
        .collect();
    if let Some(p) = path {
        let Some((name, member)) = member_at(p, members) else {
            return Some(format!("--path {p} is no workspace member"));
        };
        if !member.has_bin {
            return Some(format!("--path {p} ({name}) has no binary to install"));
        }
        if let Some(n) = ours.iter().find(|n| **n != name) {
            return Some(format!("--path {p} is {name}, not {n}"));
        }
        return None;
    }
    if let Some(url) = git {
        if url.trim_end_matches(".git") != REPOSITORY {
            return None; // another project's tool
        }
        return match ours.as_slice() {
            [] => Some(format!("--git {url} names no package")),
            names => names.iter().find_map(|n| match members.get(*n) {
                None => Some(format!("{n} is no workspace member")),
                Some(m) if !m.has_bin => Some(format!("{n} has no binary to install")),
                Some(_) => None,
            }),
        };
    }
    ours.first()
        .map(|n| format!("`cargo install {n}` needs crates.io, which has no release yet"))
}

/// What is wrong with a dependency line `name = value` of one of our
/// crates, if anything.
fn check_dependency(name: &str, value: &str, members: &BTreeMap<String, Member>) -> Option<String> {
    let key = |k: &str| {
        let at = value.find(&format!("{k} = \""))? + k.len() + 4;
        value[at..].split('"').next()
    };
    let package = key("package").unwrap_or(name);
    if let Some(p) = key("path") {
        return match member_at(p, members) {
            None => Some(format!("path {p:?} is no workspace member")),
            Some((found, _)) if found != package => {
                Some(format!("path {p:?} is {found}, not {package}"))
            }
            Some(_) => None,
        };
    }
    if let Some(url) = key("git") {
        if url.trim_end_matches(".git") != REPOSITORY {
            return Some(format!("git {url:?} is not {REPOSITORY}"));
        }
        return (!members.contains_key(package))
            .then(|| format!("{package} is no workspace member"));
    }
    Some(format!(
        "`{name} = {value}` needs crates.io, which has no release yet (use a path or git dependency)"
    ))
}

/// The install problems of one document's text, as `line: problem`.
fn problems(text: &str, members: &BTreeMap<String, Member>) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let marked = |l: &str| l.to_ascii_lowercase().contains(AFTER_RELEASE);
        if marked(line) || (i > 0 && marked(lines[i - 1])) {
            continue;
        }
        let mut rest = *line;
        while let Some(at) = rest.find("cargo install ") {
            let tail = &rest[at + "cargo install ".len()..];
            let end = tail
                .find(['`', ';', ')', '|', '#', '&'])
                .unwrap_or(tail.len());
            let words: Vec<&str> = tail[..end].split_whitespace().collect();
            if let Some(p) = check_install(&words, members) {
                out.push(format!("{}: {p}: {}", i + 1, line.trim()));
            }
            rest = &tail[end..];
        }
        let trimmed = line.trim_start();
        if let Some((name, value)) = trimmed.split_once('=') {
            let name = name.trim();
            let ours = name.starts_with("nri-")
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
            if ours && !name.contains(' ') {
                if let Some(p) = check_dependency(name, value.trim(), members) {
                    out.push(format!("{}: {p}", i + 1));
                }
            }
        }
    }
    out
}

#[test]
fn install_lines_work_from_the_workspace() {
    let members = members();
    assert!(members.contains_key("nri-stub") && members.contains_key("nri-sim"));
    let mut failures = Vec::new();
    for doc in documents() {
        let text = fs::read_to_string(&doc).expect("read document");
        for p in problems(&text, &members) {
            failures.push(format!(
                "{}:{p}",
                doc.strip_prefix(root()).unwrap_or(&doc).display()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "install lines that do not work today:\n{}",
        failures.join("\n")
    );
}

#[test]
fn the_install_line_check_finds_what_does_not_work() {
    let members = members();
    let bad = problems(
        "`cargo install nri-sim`\n\
         cargo install --locked --path tools/no-such-tool\n\
         cargo install --path crates/stub\n\
         cargo install --git https://github.com/nri-rs/nri-rs nri-nothing\n\
         nri-stub = \"0.1\"\n\
         nri-stub = { version = \"0.1\", features = [\"x\"] }\n\
         nri-stub = { path = \"../nri-rs/crates/api\" }\n",
        &members,
    );
    assert_eq!(bad.len(), 7, "{bad:#?}");
    let good = problems(
        "cargo install --locked --path tools/nri-sim --features wasm\n\
         `cargo install --path ../nri-rs/tools/nri-sim`\n\
         cargo install --locked --git https://github.com/nri-rs/nri-rs nri-sim\n\
         cargo install nri-sim   # after the first release\n\
         nri-stub = { path = \"../nri-rs/crates/stub\" }\n\
         nri-stub = { git = \"https://github.com/nri-rs/nri-rs\", default-features = false }\n\
         cargo install cargo-fuzz --locked\n",
        &members,
    );
    assert!(good.is_empty(), "{good:#?}");
}

/// The fenced code blocks of `text` with their info strings.
fn code_blocks(text: &str) -> Vec<(String, String)> {
    let mut blocks = Vec::new();
    let mut current: Option<(String, String)> = None;
    for line in text.lines() {
        match (&mut current, line.strip_prefix("```")) {
            (None, Some(info)) => current = Some((info.trim().to_owned(), String::new())),
            (Some(_), Some(_)) => blocks.extend(current.take()),
            (Some((_, body)), None) => {
                body.push_str(line);
                body.push('\n');
            }
            (None, None) => {}
        }
    }
    blocks
}

fn block<'a>(blocks: &'a [(String, String)], info: &str, starts: &str) -> &'a str {
    blocks
        .iter()
        .find(|(i, b)| i == info && b.starts_with(starts))
        .map(|(_, b)| b.as_str())
        .unwrap_or_else(|| panic!("docs/plugin-guide.md has no {info} block starting {starts:?}"))
}

fn run_ok(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The guide's plugin, built from an empty directory under `dir` as the
/// guide writes it (its Cargo.toml and src/main.rs taken from the guide), in
/// the guide's layout: `dir/my-plugin` next to the checkout `dir/nri-rs`.
/// Returns the plugin's directory and its release binary.
fn guide_plugin(blocks: &[(String, String)], dir: &Path) -> (PathBuf, PathBuf) {
    let manifest = block(blocks, "toml", "[package]");
    let main_rs = block(blocks, "rust", "use std::process::ExitCode;");
    std::os::unix::fs::symlink(root(), dir.join("nri-rs")).expect("link the checkout");
    run_ok(Command::new(env!("CARGO")).current_dir(dir).args([
        "new",
        "--quiet",
        "--vcs",
        "none",
        "my-plugin",
    ]));
    let plugin_dir = dir.join("my-plugin");
    fs::copy(root().join("Cargo.lock"), plugin_dir.join("Cargo.lock")).expect("copy Cargo.lock");
    fs::write(plugin_dir.join("Cargo.toml"), manifest).expect("write Cargo.toml");
    fs::write(plugin_dir.join("src/main.rs"), main_rs).expect("write main.rs");
    // Built where later runs find it again; `target/` as the guide has it.
    let target = root().join("target/plugin-guide");
    fs::create_dir_all(&target).expect("target dir");
    std::os::unix::fs::symlink(&target, plugin_dir.join("target")).expect("link target/");
    run_ok(
        Command::new(env!("CARGO"))
            .current_dir(&plugin_dir)
            .env("CARGO_TARGET_DIR", &target)
            .args(["build", "--release", "--quiet"]),
    );
    let plugin = plugin_dir.join("target/release/my-plugin");
    (plugin_dir, plugin)
}

/// Stops a child process by pid when dropped, pass or fail.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_guide_plugin_takes_the_usual_options_and_passes_its_scenarios() {
    let guide = fs::read_to_string(root().join("docs/plugin-guide.md")).expect("read the guide");
    let blocks = code_blocks(&guide);
    let launched = block(&blocks, "yaml", "description: my-plugin sets");
    let external = block(&blocks, "yaml", "description: my-plugin as an external");
    let dir = tempfile::tempdir().expect("temporary directory");
    let (plugin_dir, plugin) = guide_plugin(&blocks, dir.path());
    let help = run_ok(Command::new(&plugin).arg("-h"));
    for option in [
        "--socket-path",
        "--name",
        "--idx",
        "--log-level",
        "--config",
        "--no-reconnect",
    ] {
        assert!(help.contains(option), "-h lacks {option}:\n{help}");
    }

    // nri-sim's own tests run this binary too, built with the features their
    // dev-dependency turns on; build it with the same ones.
    let sim = build_bins_with_features("tools/nri-sim", &["nri-sim"], &["wasm", "otel", "samples"])
        .expect("build nri-sim")
        .remove(0);
    fs::write(plugin_dir.join("my-plugin.yaml"), launched).expect("write scenario");
    let report = run_ok(Command::new(&sim).current_dir(&plugin_dir).args([
        "run",
        "my-plugin.yaml",
        "--output",
        "json",
    ]));
    let report: Value = serde_json::from_str(report.trim()).expect("JSON report");
    assert_eq!(report["passed"], true, "{report:#}");

    // External: the options the README's plugin takes, given by hand.
    fs::write(plugin_dir.join("my-plugin-external.yaml"), external).expect("write scenario");
    fs::write(
        plugin_dir.join("my-plugin.conf"),
        "memory_limit: 134217728\n",
    )
    .expect("conf");
    let report_file = plugin_dir.join("external-report.json");
    let mut simulation = Child(
        Command::new(&sim)
            .current_dir(&plugin_dir)
            .args(["run", "my-plugin-external.yaml", "--output", "json"])
            .stdout(fs::File::create(&report_file).expect("report file"))
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start nri-sim"),
    );
    let socket = plugin_dir.join("nri-test.sock");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !socket.exists() {
        assert!(
            Instant::now() < deadline,
            "nri-sim did not create {}",
            socket.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let log = plugin_dir.join("my-plugin.log");
    let _plugin = Child(
        Command::new(&plugin)
            .current_dir(&plugin_dir)
            .args([
                "-socket-path",
                "./nri-test.sock",
                "-name",
                "my-plugin",
                "-idx",
                "60",
            ])
            .args([
                "-log-level",
                "warn",
                "-config",
                "my-plugin.conf",
                "-no-reconnect",
            ])
            .env_remove("RUST_LOG")
            .stderr(fs::File::create(&log).expect("log file"))
            .spawn()
            .expect("start the plugin"),
    );
    let status = simulation.0.wait().expect("wait for nri-sim");
    let text = fs::read_to_string(&report_file).expect("read the report");
    let report: Value = serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(report["passed"], true, "{report:#}");
    assert!(status.success(), "{status}");
    let names: Vec<&str> = report["plugins"]
        .as_array()
        .expect("plugins")
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert_eq!(names, ["60-my-plugin"], "{report:#}");
    // -log-level warn: the plugin's info line at Configure is left out
    // (-config's limit reached the container: `resources` above).
    let logged = fs::read_to_string(&log).expect("plugin log");
    assert!(!logged.contains("configured"), "{logged}");
    assert!(!logged.contains(" INFO "), "{logged}");

    // A socket nobody listens on: the error names the plugin's own flag.
    let out = Command::new(&plugin)
        .current_dir(&plugin_dir)
        .args(["-socket-path", "./nobody.sock", "-no-reconnect"])
        .env_remove("RUST_LOG")
        .output()
        .expect("run the plugin");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot connect to the NRI socket ./nobody.sock"),
        "{err}"
    );
    assert!(err.contains("(another socket: -socket-path PATH)"), "{err}");
}

/// Section 6 of the guide, run as written but for its build line (the
/// suite's build of nri-hostd and nri-runc is used): its shell block with
/// `/tmp/nri-try` moved into a temporary directory, and `podman` keeping its
/// images, containers and configuration there too (a `podman` first on
/// `PATH` that adds `--root`, `--runroot`, `--tmpdir` and names its own
/// `containers.conf` and `storage.conf`; the configuration sets no default
/// ulimits, so the block's own `--ulimit` flags are what let runc start here).
/// What the container prints is the plugin's effect inside it: its variable
/// and its memory limit as the container's cgroup has it.
#[test]
fn the_guide_runs_its_plugin_in_a_podman_container() {
    let mut packages = nri_e2e::podman::PACKAGES.to_vec();
    packages.push("busybox-static");
    if !nri_e2e::host::prepare("plugin-guide podman", &packages) {
        return;
    }
    let guide = fs::read_to_string(root().join("docs/plugin-guide.md")).expect("read the guide");
    let blocks = code_blocks(&guide);
    let section = block(&blocks, "sh", "cd ../nri-rs\n");
    let dir = tempfile::tempdir().expect("temporary directory");
    let (plugin_dir, _) = guide_plugin(&blocks, dir.path());

    let try_dir = dir.path().join("nri-try");
    let private = dir.path().join("podman");
    nri_e2e::podman::write_private_config(&private, "").expect("podman's configuration");
    let real_podman = run_ok(Command::new("sh").args(["-c", "command -v podman"]));
    let shim_dir = private.join("bin");
    fs::create_dir_all(&shim_dir).expect("bin directory");
    let shim = shim_dir.join("podman");
    fs::write(
        &shim,
        format!(
            "#!/bin/sh\nCONTAINERS_CONF={conf:?} CONTAINERS_STORAGE_CONF={storage:?} \
             exec {podman} --root {root:?} --runroot {runroot:?} --tmpdir {tmp:?} \"$@\"\n",
            conf = private.join("containers.conf"),
            storage = private.join("storage.conf"),
            podman = real_podman.trim(),
            root = private.join("root"),
            runroot = private.join("runroot"),
            tmp = private.join("tmp"),
        ),
    )
    .expect("write the podman shim");
    fs::set_permissions(&shim, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod the podman shim");
    let path = format!(
        "{}:{}",
        shim_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // Whatever happens, podman's storage is released and every process the
    // block started (nri-hostd and its plugin) is stopped.
    struct Cleanup {
        shim: PathBuf,
        group: Option<i32>,
    }
    impl Drop for Cleanup {
        fn drop(&mut self) {
            if let Some(pgid) = self.group.and_then(rustix::process::Pid::from_raw) {
                let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
            }
            let _ = Command::new(&self.shim)
                .args(["rm", "-af", "-t", "0"])
                .output();
            let _ = Command::new(&self.shim)
                .args(["system", "reset", "-f"])
                .output();
        }
    }
    let mut cleanup = Cleanup {
        shim: shim.clone(),
        group: None,
    };

    // The block's release build of nri-hostd takes minutes (the WebAssembly
    // engine); the suite's own build of the same two programs stands in for
    // it, and the block runs them from where that build put them.
    const BUILD: &str = "cargo build --release -p nri-hostd -p nri-runc\n";
    assert!(
        section.contains(BUILD),
        "the block's build line changed:\n{section}"
    );
    let (hostd_bin, _) = nri_e2e::podman::binaries().expect("build nri-hostd and nri-runc");
    let built = hostd_bin
        .parent()
        .expect("the build's directory")
        .display()
        .to_string();
    let script = section
        .replace(BUILD, "")
        // `nri-rs` is a link to the checkout here, and `..` from inside it is
        // the checkout's own parent: the plugin's directory by its path.
        .replace("../my-plugin/", &format!("{}/", plugin_dir.display()))
        .replace(" target/release/", &format!(" {built}/"))
        .replace("\ntarget/release/", &format!("\n{built}/"))
        .replace("/tmp/nri-try", &try_dir.display().to_string());
    let out_file = dir.path().join("block.out");
    let err_file = dir.path().join("block.err");
    // `timeout` (in a process group of its own, which it signals) bounds the
    // block: its wait for nri-hostd's socket would not end if the daemon did
    // not start. The time covers a first release build of nri-hostd.
    let mut child = Command::new("timeout")
        .args([
            "--kill-after=10",
            "1800",
            "bash",
            "-euo",
            "pipefail",
            "-c",
            &script,
        ])
        .current_dir(dir.path().join("my-plugin"))
        .env("PATH", path)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(fs::File::create(&out_file).expect("output file"))
        .stderr(fs::File::create(&err_file).expect("error file"))
        .process_group(0)
        .spawn()
        .expect("run the guide's block");
    cleanup.group = i32::try_from(child.id()).ok();
    let status = child.wait().expect("wait for the block");
    let stdout = fs::read_to_string(&out_file).unwrap_or_default();
    let stderr = fs::read_to_string(&err_file).unwrap_or_default();
    let hostd_log = fs::read_to_string(try_dir.join("hostd.log")).unwrap_or_default();
    assert!(
        status.success(),
        "the guide's block failed ({status}):\n{stdout}\n{stderr}\nnri-hostd:\n{hostd_log}"
    );
    // The container's two lines come last: the plugin's variable, then the
    // memory limit its cgroup has.
    let lines: Vec<&str> = stdout.lines().map(str::trim).collect();
    assert!(
        lines.ends_with(&["50-my-plugin", "268435456"]),
        "{stdout}\n{stderr}"
    );
    drop(cleanup);
}
