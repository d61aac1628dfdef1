//! The Kubernetes manifests of deploy/kustomize: every plugin has an overlay;
//! each renders; the objects validate against the OpenAPI schemas of the
//! oldest and newest Kubernetes release `kubernetes-validate` knows (offline,
//! unknown fields rejected); and what the schemas cannot check is checked
//! here: references to ConfigMaps resolve, every `$(VAR)` of the arguments is
//! defined, the plugin accepts the arguments, the NRI socket directory is
//! mounted, the image is the one deploy/build-images tags.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::process::Command;

use nri_e2e::deploy::{self, Validator};
use nri_e2e::host::{self, run};
use serde_json::Value;

/// The oldest (DaemonSet maxSurge is GA since 1.25) and the newest release
/// kubernetes-validate 1.37.0 has schemas for.
const KUBERNETES_VERSIONS: &[&str] = &["1.25", "1.37"];

/// Replaces every `$(NAME)` of `arg` by `env[NAME]`, as the kubelet does;
/// panics on an undefined one (the kubelet would pass it on verbatim).
fn expand(arg: &str, env: &BTreeMap<String, String>, plugin: &str) -> String {
    let mut out = String::new();
    let mut rest = arg;
    while let Some(start) = rest.find("$(") {
        out.push_str(&rest[..start]);
        let end = rest[start..].find(')').expect("closing parenthesis") + start;
        let name = &rest[start + 2..end];
        let value = env
            .get(name)
            .unwrap_or_else(|| panic!("{plugin}: argument {arg:?} uses undefined $({name})"));
        out.push_str(value);
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}

#[test]
fn every_plugin_overlay_renders_validates_and_is_accepted_by_the_plugin() {
    if !host::prepare("deploy manifests", &["python3-venv"]) {
        return;
    }
    let plugins = deploy::plugins().expect("list plugins");
    let overlays_dir = deploy::deploy_dir().join("kustomize/overlays");
    let overlays: Vec<String> = fs::read_dir(&overlays_dir)
        .expect("read overlays")
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(overlays, plugins, "one overlay per plugin under plugins/");

    let validator = Validator::install().expect("install kubernetes-validate");
    let version = deploy::workspace_version().expect("workspace version");
    let bins = deploy::build_plugin_bins(&plugins).expect("build plugins");
    let work = tempfile::tempdir().expect("temp dir");

    for (plugin, bin) in plugins.iter().zip(&bins) {
        let rendered = deploy::kustomize(&overlays_dir.join(plugin)).expect("kustomize");
        let file = work.path().join(format!("{plugin}.yaml"));
        fs::write(&file, &rendered).unwrap();
        for k8s in KUBERNETES_VERSIONS {
            validator
                .validate(&file, k8s)
                .unwrap_or_else(|e| panic!("{plugin}: Kubernetes {k8s} schemas: {e}"));
        }

        let objects = validator.yaml_to_json(&rendered).expect("YAML to JSON");
        let config_maps: BTreeMap<&str, &Value> = objects
            .iter()
            .filter(|o| o["kind"] == "ConfigMap")
            .map(|o| (o["metadata"]["name"].as_str().unwrap(), o))
            .collect();
        let daemonsets: Vec<&Value> = objects
            .iter()
            .filter(|o| o["kind"] == "DaemonSet")
            .collect();
        assert_eq!(daemonsets.len(), 1, "{plugin}: one DaemonSet");
        assert_eq!(
            objects.len(),
            config_maps.len() + 1,
            "{plugin}: only ConfigMaps besides"
        );
        let ds = daemonsets[0];
        assert_eq!(ds["metadata"]["name"], format!("nri-plugin-{plugin}"));
        for o in &objects {
            assert_eq!(
                o["metadata"]["namespace"], "kube-system",
                "{plugin}: namespace"
            );
        }
        let pod = &ds["spec"]["template"]["spec"];
        assert_eq!(
            ds["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"],
            format!("nri-plugin-{plugin}")
        );
        assert_eq!(
            pod["tolerations"],
            serde_json::json!([{"operator": "Exists"}])
        );
        let containers = pod["containers"].as_array().unwrap();
        assert_eq!(containers.len(), 1, "{plugin}: one container");
        let c = &containers[0];
        assert_eq!(c["image"], format!("localhost/nri-rs/{plugin}:{version}"));
        assert!(
            c["resources"]["requests"]["cpu"].is_string(),
            "{plugin}: cpu request"
        );
        assert!(
            c["resources"]["requests"]["memory"].is_string(),
            "{plugin}: memory request"
        );
        assert_eq!(
            c["securityContext"]["runAsUser"], 0,
            "{plugin}: the socket is root's"
        );

        // Every ConfigMap referenced is rendered (kustomize renames them).
        let mut env = BTreeMap::new();
        for from in c["envFrom"].as_array().expect("envFrom") {
            let name = from["configMapRef"]["name"].as_str().unwrap();
            let cm = config_maps
                .get(name)
                .unwrap_or_else(|| panic!("{plugin}: envFrom {name} is not rendered"));
            for (k, v) in cm["data"].as_object().unwrap() {
                env.insert(k.clone(), v.as_str().unwrap().to_owned());
            }
        }
        let volumes = pod["volumes"].as_array().unwrap();
        for v in volumes {
            if let Some(name) = v["configMap"]["name"].as_str() {
                assert!(
                    config_maps.contains_key(name),
                    "{plugin}: volume ConfigMap {name} is not rendered"
                );
            }
        }
        // The NRI socket directory, from the host.
        let socket_volume = volumes
            .iter()
            .find(|v| v["hostPath"]["path"] == "/var/run/nri")
            .unwrap_or_else(|| panic!("{plugin}: no /var/run/nri volume"));
        assert!(
            c["volumeMounts"]
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m["name"] == socket_volume["name"] && m["mountPath"] == "/var/run/nri"),
            "{plugin}: /var/run/nri not mounted"
        );

        // The plugin accepts the arguments: with --help after them it parses them
        // all, then prints its usage and exits 0, never connecting.
        let args: Vec<String> = c["args"]
            .as_array()
            .expect("args")
            .iter()
            .map(|a| expand(a.as_str().unwrap(), &env, plugin))
            .collect();
        let out = run(Command::new(bin).args(&args).arg("--help"))
            .unwrap_or_else(|e| panic!("{plugin}: rejects its manifest's arguments {args:?}: {e}"));
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("Usage:"),
            "{plugin}: usage"
        );
        println!("{plugin}: rendered, valid for Kubernetes {KUBERNETES_VERSIONS:?}, args {args:?} accepted");
    }
}
