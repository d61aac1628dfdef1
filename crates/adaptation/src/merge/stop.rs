//! The collector of one StopContainer call.

use nri_api::{ContainerUpdate, StopContainerResponse};

use super::updates::{Scope, UpdateSet};
use crate::error::MergeError;
use crate::owners::Owners;

/// Collects the container updates plugins return for one StopContainer call.
///
/// Any container may be updated, the one being stopped included; updates are
/// merged per container with the usual conflict rules.
///
/// ```
/// use nri_adaptation::StopResult;
/// use nri_api::{ContainerUpdate, StopContainerResponse};
///
/// let mut result = StopResult::new();
/// let mut update = ContainerUpdate::for_container("ctr1");
/// update.set_linux_cpuset_cpus("0-3");
/// let reply = StopContainerResponse { update: vec![update.clone()] };
/// result.apply("00-a", reply.clone()).unwrap();
/// let err = result.apply("10-b", reply).unwrap_err();
/// assert_eq!(err.to_string(), r#"plugins "10-b" and "00-a" both tried to set CPUSetCPUs "#);
/// ```
#[derive(Debug, Clone, Default)]
pub struct StopResult {
    updates: UpdateSet,
    owners: Owners,
}

impl StopResult {
    /// Starts collecting.
    pub fn new() -> Self {
        Self::default()
    }

    /// Merges the updates `plugin` returned.
    ///
    /// On error the whole call must fail; the collector's state is then
    /// unspecified.
    pub fn apply(
        &mut self,
        plugin: &str,
        response: StopContainerResponse,
    ) -> Result<(), MergeError> {
        self.updates
            .merge(&mut self.owners, &mut Scope::Stop, plugin, response.update)
    }

    /// The merged updates so far, in order of first appearance.
    pub fn updates(&self) -> &[ContainerUpdate] {
        self.updates.others()
    }

    /// Who set what so far.
    pub fn owners(&self) -> &Owners {
        &self.owners
    }

    /// The merged reply.
    pub fn into_response(self) -> StopContainerResponse {
        StopContainerResponse {
            update: self.updates.into_others(),
        }
    }
}

#[cfg(test)]
mod tests {
    use nri_api::{ContainerUpdate, StopContainerResponse};

    use super::StopResult;
    use crate::merge::testutil::{container_ids, resources};

    fn reply(u: ContainerUpdate) -> StopContainerResponse {
        StopContainerResponse { update: vec![u] }
    }

    #[test]
    fn any_container_may_be_updated_and_merged() {
        let mut r = StopResult::new();
        let mut a = ContainerUpdate::for_container("stopping");
        a.set_linux_cpu_shares(1);
        let mut b = ContainerUpdate::for_container("other");
        b.set_linux_memory_limit(2);
        let mut c = ContainerUpdate::for_container("stopping");
        c.set_linux_memory_limit(3);
        r.apply("00-a", reply(a)).unwrap();
        r.apply("10-b", reply(b)).unwrap();
        r.apply("20-c", reply(c)).unwrap();
        let response = r.into_response();
        let ids = container_ids(&response.update);
        assert_eq!(ids, ["stopping", "other"]);
        let res = resources(&response.update[0]);
        assert_eq!(res.cpu.as_ref().unwrap().shares.unwrap().value, 1);
        assert_eq!(res.memory.as_ref().unwrap().limit.unwrap().value, 3);
    }

    #[test]
    fn empty_reply_changes_nothing() {
        let mut r = StopResult::new();
        r.apply("00-a", StopContainerResponse::default()).unwrap();
        assert!(r.updates().is_empty());
        assert!(r.owners().is_empty());
    }
}
