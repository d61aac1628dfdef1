//! The generated protocol code checked in under `src/generated/` matches what
//! `proto/nri.proto` generates.
//!
//! nri-api ships the code `prost-build` generates from the proto (so that
//! building the crate needs neither a build script nor the protobuf compiler
//! chain); this test regenerates it into a temporary directory and compares.
//! After changing the proto, update the checked-in files with
//!
//! ```sh
//! NRI_API_UPDATE_GENERATED=1 cargo test -p nri-api --test generated
//! ```
//!
//! The proto file is parsed with `protox` (no `protoc` binary needed) and the
//! Rust code is produced by `prost-build`. Every message and enum gets serde
//! derives whose JSON form matches Go's `encoding/json` on the reference types:
//! field names are the proto field names, absent fields take their default,
//! zero values are omitted on output, enums are plain numbers.
//!
//! Besides the types, the generator writes `proto_methods.rs`: the list of
//! `(service, method)` pairs of the proto, used by the crate's unit tests to
//! check the method-name constants.

use std::error::Error;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use prost_types::field_descriptor_proto::Type;

const PROTO: &str = "proto/nri.proto";
const PACKAGE: &str = "nri.pkg.api.v1alpha1";
/// The files of `src/generated/`, as `prost-build` and this generator name them.
const FILES: [&str; 2] = ["nri.pkg.api.v1alpha1.rs", "proto_methods.rs"];
const UPDATE_VAR: &str = "NRI_API_UPDATE_GENERATED";
const HEADER: &str = "// @generated from proto/nri.proto by tests/generated.rs; do not edit.\n\
    // Update with: NRI_API_UPDATE_GENERATED=1 cargo test -p nri-api --test generated\n\n";

/// Generates the code of `src/generated/` into `out`.
fn generate(crate_dir: &Path, out: &Path) -> Result<(), Box<dyn Error>> {
    let fds = protox::compile([crate_dir.join(PROTO)], [crate_dir.join("proto")])?;

    let mut config = prost_build::Config::new();
    let pkg = format!(".{PACKAGE}");
    config.btree_map(["."]);
    config.message_attribute(
        &pkg,
        "#[derive(::serde::Serialize, ::serde::Deserialize)]\n#[serde(default)]",
    );
    config.enum_attribute(
        &pkg,
        "#[derive(::serde::Serialize, ::serde::Deserialize)]\n#[serde(into = \"i32\", try_from = \"i32\")]",
    );

    let mut methods =
        String::from("/// `(service, method)` pairs declared in `proto/nri.proto`.\n");
    methods.push_str("#[allow(dead_code)]\npub(crate) const PROTO_METHODS: &[(&str, &str)] = &[\n");

    for file in &fds.file {
        if file.package() != PACKAGE {
            continue;
        }
        for service in &file.service {
            for method in &service.method {
                writeln!(
                    methods,
                    "    (\"{PACKAGE}.{}\", \"{}\"),",
                    service.name(),
                    method.name()
                )?;
            }
        }
        let mut stack: Vec<(String, &_)> = file
            .message_type
            .iter()
            .map(|m| (format!("{pkg}.{}", m.name()), m))
            .collect();
        while let Some((path, message)) = stack.pop() {
            let is_map_entry = message.options.as_ref().is_some_and(|o| o.map_entry());
            if is_map_entry {
                continue;
            }
            // Map entries whose values are messages: Go writes a nil value as
            // `null`, which must read as an empty message.
            let message_valued_maps: Vec<String> = message
                .nested_type
                .iter()
                .filter(|n| n.options.as_ref().is_some_and(|o| o.map_entry()))
                .filter(|n| {
                    n.field
                        .iter()
                        .any(|f| f.number() == 2 && f.r#type() == Type::Message)
                })
                .map(|n| format!("{path}.{}", n.name()))
                .collect();
            for field in &message.field {
                let name = field.name();
                let reader = if message_valued_maps.iter().any(|m| m == field.type_name()) {
                    "null_as_default_map"
                } else {
                    "null_as_default"
                };
                config.field_attribute(
                    format!("{path}.{name}"),
                    format!(
                        "#[serde(rename = \"{name}\", \
                         skip_serializing_if = \"crate::serde_helpers::is_default\", \
                         deserialize_with = \"crate::serde_helpers::{reader}\")]"
                    ),
                );
            }
            for nested in &message.nested_type {
                stack.push((format!("{path}.{}", nested.name()), nested));
            }
        }
    }
    methods.push_str("];\n");

    std::fs::write(out.join("proto_methods.rs"), methods)?;
    config.out_dir(out);
    config.compile_fds(fds)?;
    for file in FILES {
        let path = out.join(file);
        let code = std::fs::read_to_string(&path)?;
        std::fs::write(&path, format!("{HEADER}{code}"))?;
    }
    Ok(())
}

#[test]
fn checked_in_code_matches_the_proto() {
    let crate_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let checked_in = crate_dir.join("src/generated");
    let tmp = tempfile::tempdir().unwrap();
    generate(&crate_dir, tmp.path()).unwrap();

    let update = std::env::var_os(UPDATE_VAR).is_some_and(|v| !v.is_empty() && v != "0");
    let mut stale = Vec::new();
    for file in FILES {
        let fresh = std::fs::read_to_string(tmp.path().join(file)).unwrap();
        let path = checked_in.join(file);
        let current = std::fs::read_to_string(&path).unwrap_or_default();
        if current == fresh {
            continue;
        }
        if update {
            std::fs::write(&path, &fresh).unwrap();
            eprintln!("updated {}", path.display());
        } else {
            stale.push(file);
        }
    }
    assert!(
        stale.is_empty(),
        "src/generated/{{{}}} differ from what {PROTO} generates; \
         after changing the proto, update them with\n\n    \
         {UPDATE_VAR}=1 cargo test -p nri-api --test generated\n",
        stale.join(", ")
    );
}
