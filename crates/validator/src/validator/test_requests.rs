//! Requests for the validator's tests, shared with `nri-policy`'s
//! equivalence tests: a request for container [`CTR`] (named [`NAME`]) with
//! an empty adjustment, and its owners table.

use nri_api::{
    Container, ContainerAdjustment, FieldOwners, OwningPlugins, PluginInstance, PodSandbox,
    ValidateContainerAdjustmentRequest,
};

pub const CTR: &str = "ctr0";
pub const NAME: &str = "ctr-name";

/// A request for container `CTR` (named `NAME`) with an empty adjustment,
/// made by the default validator alone.
pub fn request() -> ValidateContainerAdjustmentRequest {
    ValidateContainerAdjustmentRequest {
        pod: Some(PodSandbox {
            id: "pod0".into(),
            name: "pod".into(),
            namespace: "default".into(),
            ..Default::default()
        }),
        container: Some(Container {
            id: CTR.into(),
            name: NAME.into(),
            ..Default::default()
        }),
        adjust: Some(ContainerAdjustment::default()),
        owners: Some(OwningPlugins::default()),
        plugins: vec![instance("00", "default-validator")],
        ..Default::default()
    }
}

pub fn instance(index: &str, name: &str) -> PluginInstance {
    PluginInstance {
        name: name.into(),
        index: index.into(),
    }
}

/// The owners of container `CTR`'s fields.
pub fn fields(req: &mut ValidateContainerAdjustmentRequest) -> &mut FieldOwners {
    req.owners
        .get_or_insert_with(Default::default)
        .owners
        .entry(CTR.into())
        .or_default()
}
