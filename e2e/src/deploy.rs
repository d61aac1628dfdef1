//! Set-up of the deployment suites (`deploy_images`, `deploy_manifests`): the
//! sample plugins and their `deploy/` files, a kustomize renderer, and the
//! Kubernetes schema validator, installed into the cache directory.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::host::{cache_dir, lock_file, run};
use crate::workspace::{root, target_and_profile};
use crate::{E2eError, Result};

/// The `kubernetes-validate` release used (PyPI); it bundles the OpenAPI
/// schemas of every Kubernetes release it knows, so validation is offline.
pub const KUBERNETES_VALIDATE_VERSION: &str = "1.37.0";

/// The kustomize release installed with `go install` when no `kubectl` is
/// on `PATH`.
pub const KUSTOMIZE_VERSION: &str = "v5.5.0";

/// The sample plugins that run as programs (and so get an image and an
/// overlay): the directory names under `plugins/` with a `src/main.rs`, sorted.
pub fn plugins() -> Result<Vec<String>> {
    let dir = root().join("plugins");
    let mut names = Vec::new();
    for entry in
        fs::read_dir(&dir).map_err(|e| E2eError::io(format!("read {}", dir.display()), e))?
    {
        let entry = entry.map_err(|e| E2eError::io(format!("read {}", dir.display()), e))?;
        // A plugin that builds a program gets an image and an overlay; a
        // WebAssembly plugin (a library only) is loaded by the runtime itself.
        if entry.path().join("Cargo.toml").is_file() && entry.path().join("src/main.rs").is_file() {
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    names.sort();
    Ok(names)
}

/// The workspace version (the images' tag).
pub fn workspace_version() -> Result<String> {
    let path = root().join("Cargo.toml");
    let text = fs::read_to_string(&path)
        .map_err(|e| E2eError::io(format!("read {}", path.display()), e))?;
    let mut in_package = false;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_package = line == "[workspace.package]";
        } else if in_package && line.starts_with("version") {
            if let Some(v) = line.split('"').nth(1) {
                return Ok(v.to_owned());
            }
        }
    }
    Err(E2eError::Unsupported(
        "no version in [workspace.package]".into(),
    ))
}

/// `deploy/` in the workspace.
pub fn deploy_dir() -> PathBuf {
    root().join("deploy")
}

/// Runs `deploy/build-images` with `args`, building into the test's target
/// directory and storing images with `storage_conf` (a containers-storage
/// configuration, so that the test's images stay out of the machine's store).
pub fn build_images(args: &[&str], storage_conf: &Path) -> Result<()> {
    let (target, _) = target_and_profile();
    run(Command::new(deploy_dir().join("build-images"))
        .args(args)
        .env("CARGO", env!("CARGO"))
        .env("CARGO_TARGET_DIR", &target)
        .env("CONTAINERS_STORAGE_CONF", storage_conf)
        .env("BUILDER", "buildah"))?;
    Ok(())
}

/// Renders the kustomization in `dir`: `kubectl kustomize` when `kubectl` is
/// on `PATH`, else a kustomize built with `go install` into the cache.
pub fn kustomize(dir: &Path) -> Result<String> {
    let out = if let Some(kubectl) = on_path("kubectl") {
        run(Command::new(kubectl).arg("kustomize").arg(dir))?
    } else {
        run(Command::new(kustomize_binary()?).arg("build").arg(dir))?
    };
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn on_path(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

fn kustomize_binary() -> Result<PathBuf> {
    let dir = cache_dir()?.join(format!("kustomize-{KUSTOMIZE_VERSION}"));
    let bin = dir.join("kustomize");
    let _lock = lock_file(&cache_dir()?.join(".kustomize.lock"))?;
    if !bin.is_file() {
        run(Command::new("go")
            .args([
                "install",
                &format!("sigs.k8s.io/kustomize/kustomize/v5@{KUSTOMIZE_VERSION}"),
            ])
            .env("GOBIN", &dir))?;
    }
    Ok(bin)
}

/// A Python environment with `kubernetes-validate` (and PyYAML, which it
/// uses), in the cache directory, keyed by version.
#[derive(Debug, Clone)]
pub struct Validator {
    venv: PathBuf,
}

impl Validator {
    /// Installs it on first use (`python3 -m venv`, `pip install`).
    pub fn install() -> Result<Validator> {
        let venv = cache_dir()?.join(format!("kubernetes-validate-{KUBERNETES_VALIDATE_VERSION}"));
        let _lock = lock_file(&cache_dir()?.join(".kubernetes-validate.lock"))?;
        let done = venv.join(".installed");
        if !done.is_file() {
            let _ = fs::remove_dir_all(&venv);
            run(Command::new("python3").args(["-m", "venv"]).arg(&venv))?;
            run(Command::new(venv.join("bin/pip")).args([
                "install",
                "--quiet",
                "--disable-pip-version-check",
                &format!("kubernetes-validate=={KUBERNETES_VALIDATE_VERSION}"),
            ]))?;
            fs::write(&done, KUBERNETES_VALIDATE_VERSION)
                .map_err(|e| E2eError::io(format!("write {}", done.display()), e))?;
        }
        Ok(Validator { venv })
    }

    /// Validates the objects of the YAML file `file` against the OpenAPI
    /// schemas of Kubernetes `version` (e.g. `1.25`), rejecting unknown fields.
    pub fn validate(&self, file: &Path, version: &str) -> Result<String> {
        let out = run(Command::new(self.venv.join("bin/kubernetes-validate"))
            .args(["--strict", "--no-warn", "-k", version])
            .arg(file))?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The YAML documents of `yaml` as JSON values (with the environment's PyYAML).
    pub fn yaml_to_json(&self, yaml: &str) -> Result<Vec<serde_json::Value>> {
        let dir = tempfile::tempdir().map_err(|e| E2eError::io("create temp dir", e))?;
        let input = dir.path().join("in.yaml");
        fs::write(&input, yaml).map_err(|e| E2eError::io("write yaml", e))?;
        let out = run(Command::new(self.venv.join("bin/python"))
            .args([
                "-c",
                "import json, sys, yaml\n\
             docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d is not None]\n\
             json.dump(docs, sys.stdout)",
            ])
            .arg(&input))?;
        serde_json::from_slice(&out.stdout)
            .map_err(|e| E2eError::Unsupported(format!("YAML to JSON gave no JSON: {e}")))
    }
}

/// Builds (one cargo invocation, the test's profile) the binary `nri-<plugin>`
/// of every plugin in `plugins` and returns their paths, in the same order.
pub fn build_plugin_bins(plugins: &[String]) -> Result<Vec<PathBuf>> {
    let bins: Vec<String> = plugins.iter().map(|p| format!("nri-{p}")).collect();
    let bins: Vec<&str> = bins.iter().map(String::as_str).collect();
    crate::workspace::build_bins(&bins)
}
