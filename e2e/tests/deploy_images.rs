//! The plugin images of deploy/: `deploy/build-images` builds static release
//! binaries and, with buildah and deploy/Containerfile, one `FROM scratch`
//! image per plugin; each image must hold exactly that one static binary and
//! start it.
//!
//! A cold static release build of all twelve plugins takes 5 to 8 minutes on
//! two shared cores, so by default the suite builds two images (logger, the
//! smallest dependency set, and network-device-injector, the largest);
//! `NRI_E2E_DEPLOY_PLUGINS=all` (or a comma-separated list) builds others.

use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use nri_e2e::deploy;
use nri_e2e::host::{self, run};

const DEFAULT_PLUGINS: &[&str] = &["logger", "network-device-injector"];

fn selected_plugins() -> Vec<String> {
    let all = deploy::plugins().expect("list plugins");
    match std::env::var("NRI_E2E_DEPLOY_PLUGINS").as_deref() {
        Ok("all") => all,
        Ok(list) if !list.trim().is_empty() => {
            list.split(',').map(|s| s.trim().to_owned()).collect()
        }
        _ => DEFAULT_PLUGINS.iter().map(|s| s.to_string()).collect(),
    }
}

fn json(path: &Path) -> serde_json::Value {
    let bytes = fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("parse {}: {e}", path.display()))
}

fn blob(layout: &Path, digest: &str) -> std::path::PathBuf {
    layout.join("blobs").join(digest.replacen(':', "/", 1))
}

#[test]
fn every_plugin_image_is_one_static_binary_on_scratch() {
    if !host::prepare("deploy images", &["buildah", "file"]) {
        return;
    }
    let plugins = selected_plugins();
    let version = deploy::workspace_version().expect("workspace version");
    let work = tempfile::tempdir().expect("temp dir");
    let storage = work.path().join("storage.conf");
    fs::write(
        &storage,
        format!(
            "[storage]\ndriver = \"vfs\"\ngraphroot = \"{0}/root\"\nrunroot = \"{0}/run\"\n",
            work.path().display()
        ),
    )
    .expect("write storage.conf");
    let archives = work.path().join("archives");

    let start = Instant::now();
    let mut args = vec![
        "--archive-dir",
        archives.to_str().unwrap(),
        "--tag-prefix",
        "localhost/nri-rs-e2e/",
    ];
    args.extend(plugins.iter().map(String::as_str));
    deploy::build_images(&args, &storage).expect("deploy/build-images");
    println!(
        "deploy/build-images: {} images in {:.1}s",
        plugins.len(),
        start.elapsed().as_secs_f64()
    );

    println!("{:<26} {:>12} {:>14}", "image", "binary", "layer (gzip)");
    for plugin in &plugins {
        let layout = work.path().join(format!("layout-{plugin}"));
        fs::create_dir_all(&layout).unwrap();
        run(Command::new("tar")
            .arg("-xf")
            .arg(archives.join(format!("{plugin}.tar")))
            .arg("-C")
            .arg(&layout))
        .expect("unpack oci-archive");

        let index = json(&layout.join("index.json"));
        let manifests = index["manifests"].as_array().expect("manifests");
        assert_eq!(manifests.len(), 1, "{plugin}: one manifest");
        assert_eq!(
            manifests[0]["annotations"]["org.opencontainers.image.ref.name"],
            format!("localhost/nri-rs-e2e/{plugin}:{version}"),
            "{plugin}: image name"
        );
        let manifest = json(&blob(&layout, manifests[0]["digest"].as_str().unwrap()));
        let layers = manifest["layers"].as_array().expect("layers");
        assert_eq!(
            layers.len(),
            1,
            "{plugin}: scratch plus one COPY is one layer"
        );
        let layer = blob(&layout, layers[0]["digest"].as_str().unwrap());
        let layer_size = layers[0]["size"].as_u64().unwrap();

        let config = json(&blob(
            &layout,
            manifest["config"]["digest"].as_str().unwrap(),
        ));
        assert_eq!(
            config["config"]["Entrypoint"],
            serde_json::json!(["/bin/nri-plugin"])
        );
        assert_eq!(config["config"]["User"], "0:0");
        assert_eq!(
            config["config"]["Labels"]["org.opencontainers.image.title"],
            format!("nri-{plugin}")
        );
        assert_eq!(
            config["config"]["Labels"]["org.opencontainers.image.version"],
            version
        );

        // Only the binary (and its directory) is in the layer.
        let listing = run(Command::new("tar").arg("-tzf").arg(&layer)).expect("list layer");
        let entries: Vec<String> = String::from_utf8_lossy(&listing.stdout)
            .lines()
            .map(|l| l.trim_start_matches("./").trim_end_matches('/').to_owned())
            .filter(|l| !l.is_empty())
            .collect();
        assert_eq!(
            entries,
            ["bin", "bin/nri-plugin"],
            "{plugin}: layer contents"
        );

        let rootfs = work.path().join(format!("rootfs-{plugin}"));
        fs::create_dir_all(&rootfs).unwrap();
        run(Command::new("tar")
            .arg("-xzf")
            .arg(&layer)
            .arg("-C")
            .arg(&rootfs))
        .expect("unpack layer");
        let bin = rootfs.join("bin/nri-plugin");
        let file = run(Command::new("file").arg(&bin)).expect("file");
        let file = String::from_utf8_lossy(&file.stdout);
        assert!(
            file.contains("statically linked") || file.contains("static-pie linked"),
            "{plugin}: {file}"
        );
        assert!(
            file.contains("stripped") && !file.contains("not stripped"),
            "{plugin}: {file}"
        );
        // It starts, and its help names the plugin and the default socket.
        let help = run(Command::new(&bin).arg("--help")).expect("plugin --help");
        let help = String::from_utf8_lossy(&help.stdout);
        assert!(
            help.contains(&format!("Usage: nri-{plugin}"))
                && help.contains("/var/run/nri/nri.sock"),
            "{plugin}: {help}"
        );
        let bin_size = fs::metadata(&bin).unwrap().len();
        println!(
            "{:<26} {:>9.2} MB {:>11.2} MB",
            plugin,
            bin_size as f64 / 1e6,
            layer_size as f64 / 1e6
        );
    }
}
