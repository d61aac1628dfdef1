//! Generates the NRI protocol types from `proto/nri.proto`.
//!
//! The proto file is parsed with `protox` (no `protoc` binary needed) and the
//! Rust code is produced by `prost-build`. Every message and enum gets serde
//! derives whose JSON form matches Go's `encoding/json` on the reference types:
//! field names are the proto field names, absent fields take their default,
//! zero values are omitted on output, enums are plain numbers.
//!
//! Besides the types, the script writes `proto_methods.rs`: the list of
//! `(service, method)` pairs of the proto, used by the crate's tests to check
//! the method-name constants.

use std::error::Error;
use std::fmt::Write as _;
use std::path::PathBuf;

use prost_types::field_descriptor_proto::Type;

const PROTO: &str = "proto/nri.proto";
const PACKAGE: &str = "nri.pkg.api.v1alpha1";

fn main() -> Result<(), Box<dyn Error>> {
    println!("cargo:rerun-if-changed={PROTO}");
    println!("cargo:rerun-if-changed=build.rs");

    let fds = protox::compile([PROTO], ["proto"])?;

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

    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out_dir.join("proto_methods.rs"), methods)?;

    config.compile_fds(fds)?;
    Ok(())
}
