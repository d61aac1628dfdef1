//! nri-oci: applying arbitrary adjustments and updates to arbitrary specs.
//!
//! The spec is one of the test fixtures, an arbitrary JSON value with OCI
//! member names, or arbitrary text parsed as JSON; the adjustment and the
//! update are decoded from fuzzed protobuf bytes (as the runtime decodes a
//! plugin's reply). Mount propagation is looked up from the input instead
//! of the host.
//!
//! Checked: `adjust`, `apply_update` and `apply_resources` return Ok or Err,
//! never panic.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use nri_api::{ContainerAdjustment, ContainerUpdate};
use nri_fuzz::Json;
use nri_oci::Generator;
use prost::Message;
use serde_json::Value;

const GO_BASE: &str = include_str!("../../crates/oci/tests/fixtures/go-base-spec.json");
const MAXIMAL: &str = include_str!("../../crates/oci/tests/fixtures/maximal-config.json");

#[derive(Arbitrary, Debug)]
enum Spec {
    GoBase,
    Maximal,
    Value(Json),
    Text(String),
}

#[derive(Arbitrary, Debug)]
struct Input {
    spec: Spec,
    adjust: Vec<u8>,
    update: Option<Vec<u8>>,
    /// Host propagation of every path; `None` turns the check off.
    propagation: Option<Result<String, String>>,
    resolvers: bool,
}

fuzz_target!(|input: Input| {
    let mut spec: Value = match input.spec {
        Spec::GoBase => serde_json::from_str(GO_BASE).expect("fixture parses"),
        Spec::Maximal => serde_json::from_str(MAXIMAL).expect("fixture parses"),
        Spec::Value(Json(v)) => v,
        Spec::Text(t) => match serde_json::from_str(&t) {
            Ok(v) => v,
            Err(_) => return,
        },
    };
    let Ok(adjust) = ContainerAdjustment::decode(input.adjust.as_slice()) else {
        return;
    };
    let update = input
        .update
        .and_then(|b| ContainerUpdate::decode(b.as_slice()).ok());
    let propagation = input.propagation;

    let mut gen = Generator::new(&mut spec);
    gen = match propagation.clone() {
        Some(p) => {
            gen.with_mount_propagation_lookup(move |_path: &str| p.clone().map_err(|e| e.into()))
        }
        None => gen.without_mount_propagation_check(),
    };
    if input.resolvers {
        gen = gen
            .with_blockio_resolver(|class: &str| Ok(serde_json::json!({"weight": class.len()})))
            .with_rdt_resolver(|class: &str| {
                if class.is_empty() {
                    Err("empty class".into())
                } else {
                    Ok(serde_json::json!({"closID": class}))
                }
            })
            .with_resource_checker(|_res: &Value| Ok(()))
            .with_cdi_injector(|spec: &mut Value, names: &[String]| {
                if let Some(obj) = spec.as_object_mut() {
                    obj.insert("x-cdi".into(), Value::from(names.len()));
                }
                Ok(())
            });
    }
    let adjusted = gen.adjust(&adjust);
    if let Some(update) = &update {
        let _ = gen.apply_update(update);
        if let Some(res) = update.linux.as_ref().and_then(|l| l.resources.as_ref()) {
            let _ = gen.apply_resources(res);
        }
    }
    // The spec stays serializable whatever happened.
    let _ = adjusted;
    serde_json::to_vec(gen.spec()).expect("spec serializes");
});
