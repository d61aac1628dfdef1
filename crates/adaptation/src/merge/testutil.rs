//! Helpers shared by the unit tests of the merge rules.

use nri_api::{
    Container, ContainerAdjustment, ContainerUpdate, CreateContainerRequest,
    CreateContainerResponse, LinuxContainer, LinuxResources,
};

use super::CreateResult;
use crate::error::MergeError;

/// Id of the container being created in tests.
pub(super) const ID: &str = "ctr0";

/// A collector for creating container [`ID`] from `container`.
pub(super) fn create_from(container: Container) -> CreateResult {
    CreateResult::new(CreateContainerRequest {
        container: Some(Container {
            id: ID.into(),
            ..container
        }),
        ..Default::default()
    })
}

/// A collector for creating container [`ID`] with these Linux parts.
pub(super) fn create_linux(linux: LinuxContainer) -> CreateResult {
    create_from(Container {
        linux: Some(linux),
        ..Default::default()
    })
}

/// A collector for creating an empty container [`ID`].
pub(super) fn create() -> CreateResult {
    create_from(Container::default())
}

/// A response carrying the adjustment built by `build`.
pub(super) fn adjust(build: impl FnOnce(&mut ContainerAdjustment)) -> CreateContainerResponse {
    let mut a = ContainerAdjustment::default();
    build(&mut a);
    CreateContainerResponse {
        adjust: Some(a),
        ..Default::default()
    }
}

/// A response carrying the given updates only.
pub(super) fn updates(updates: Vec<ContainerUpdate>) -> CreateContainerResponse {
    CreateContainerResponse {
        update: updates,
        ..Default::default()
    }
}

/// Applies `plugins` in order to a fresh collector.
pub(super) fn run(
    plugins: Vec<(&str, CreateContainerResponse)>,
) -> Result<CreateResult, MergeError> {
    let mut result = create();
    for (plugin, response) in plugins {
        result.apply(plugin, response)?;
    }
    Ok(result)
}

/// The error text of applying `plugins` in order; panics if they merge.
pub(super) fn conflict(plugins: Vec<(&str, CreateContainerResponse)>) -> String {
    match run(plugins) {
        Ok(_) => panic!("expected a merge error"),
        Err(e) => e.to_string(),
    }
}

/// The request container as the next plugin sees it.
pub(super) fn container(result: &CreateResult) -> &Container {
    result.request().container.as_ref().unwrap()
}

/// The container ids of `updates`, in order.
pub(super) fn container_ids(updates: &[ContainerUpdate]) -> Vec<&str> {
    updates.iter().map(|u| u.container_id.as_str()).collect()
}

/// The Linux resources an update carries; panics if it has none.
pub(super) fn resources(u: &ContainerUpdate) -> &LinuxResources {
    u.linux.as_ref().unwrap().resources.as_ref().unwrap()
}
