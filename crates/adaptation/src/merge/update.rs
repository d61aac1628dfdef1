//! The collector of one UpdateContainer call.

use nri_api::{
    ContainerEviction, ContainerUpdate, LinuxContainerUpdate, UpdateContainerRequest,
    UpdateContainerResponse,
};

use super::empty_resources;
use super::updates::{Scope, UpdateSet};
use crate::error::MergeError;
use crate::owners::Owners;

/// Collects the results of all plugins for one UpdateContainer call.
///
/// Plugins may override or extend the resources requested for the container
/// being updated (the *target*) and request updates of other containers.
/// Changes to the target are written into the request's `linux_resources`,
/// so the next plugin sees them in [`request`](Self::request).
///
/// The response lists the updates of other containers in order of first
/// appearance, then the target's merged update: the request's resources with
/// every plugin change applied. If no plugin named the target, the response
/// has no entry for it (decision \[8\]; the reference appends an empty entry):
/// the runtime applies the resources it requested.
///
/// ```
/// use nri_adaptation::UpdateResult;
/// use nri_api::{Container, ContainerUpdate, LinuxResources, UpdateContainerRequest,
///     UpdateContainerResponse};
///
/// let mut request = UpdateContainerRequest {
///     container: Some(Container { id: "ctr0".into(), ..Default::default() }),
///     linux_resources: Some(LinuxResources::default()),
///     ..Default::default()
/// };
/// request.linux_resources.as_mut().unwrap().memory_mut().limit = nri_api::opt(1 << 30);
/// let mut result = UpdateResult::new(request);
///
/// let mut update = ContainerUpdate::for_container("ctr0");
/// update.set_linux_cpu_shares(512);
/// let reply = UpdateContainerResponse { update: vec![update], ..Default::default() };
/// result.apply("00-test", reply).unwrap();
///
/// let response = result.into_response();
/// assert_eq!(response.update.len(), 1);
/// let res = response.update[0].linux.as_ref().unwrap().resources.as_ref().unwrap();
/// assert_eq!(res.cpu.as_ref().unwrap().shares.unwrap().value, 512);
/// assert_eq!(res.memory.as_ref().unwrap().limit.unwrap().value, 1 << 30);
/// ```
#[derive(Debug, Clone)]
pub struct UpdateResult {
    request: UpdateContainerRequest,
    id: String,
    updates: UpdateSet,
    evictions: Vec<ContainerEviction>,
    owners: Owners,
}

impl UpdateResult {
    /// Starts collecting for `request`. Missing requested resources, and
    /// their memory and CPU parts, are replaced by empty ones.
    pub fn new(mut request: UpdateContainerRequest) -> Self {
        let resources = request.linux_resources.get_or_insert_with(Default::default);
        resources.memory.get_or_insert_with(Default::default);
        resources.cpu.get_or_insert_with(Default::default);
        let id = request
            .container
            .as_ref()
            .map(|c| c.id.clone())
            .unwrap_or_default();
        Self {
            request,
            id,
            updates: UpdateSet::default(),
            evictions: Vec::new(),
            owners: Owners::new(),
        }
    }

    /// Id of the container being updated.
    pub fn container_id(&self) -> &str {
        &self.id
    }

    /// Merges the updates `plugin` returned and collects its evictions.
    ///
    /// On error the whole call must fail; the collector's state is then
    /// unspecified.
    pub fn apply(
        &mut self,
        plugin: &str,
        response: UpdateContainerResponse,
    ) -> Result<(), MergeError> {
        let UpdateContainerResponse { update, evict } = response;
        let resources = self
            .request
            .linux_resources
            .get_or_insert_with(Default::default);
        let mut scope = Scope::Update {
            id: &self.id,
            resources,
        };
        self.updates
            .merge(&mut self.owners, &mut scope, plugin, update)?;
        for eviction in evict {
            tracing::info!(
                plugin,
                container = %eviction.container_id,
                reason = %eviction.reason,
                "plugin requested eviction during UpdateContainer"
            );
            if eviction.container_id.is_empty() {
                tracing::warn!(
                    plugin,
                    reason = %eviction.reason,
                    "container eviction without a container id cannot be performed"
                );
            }
            self.evictions.push(eviction);
        }
        Ok(())
    }

    /// The request as the next plugin must see it.
    pub fn request(&self) -> &UpdateContainerRequest {
        &self.request
    }

    /// Evictions requested so far.
    pub fn evictions(&self) -> &[ContainerEviction] {
        &self.evictions
    }

    /// Who set what so far.
    pub fn owners(&self) -> &Owners {
        &self.owners
    }

    /// The merged updates as they would be returned now: other containers
    /// in order of first appearance, then the target's (if named).
    pub fn updates(&self) -> Vec<ContainerUpdate> {
        let mut update = self.updates.others().to_vec();
        if let Some(state) = self.updates.target() {
            let resources = match &self.request.linux_resources {
                Some(requested) if state.written => requested.clone(),
                _ => empty_resources(),
            };
            update.push(ContainerUpdate {
                container_id: self.id.clone(),
                linux: Some(LinuxContainerUpdate {
                    resources: Some(resources),
                }),
                ignore_failure: state.ignore_failure,
            });
        }
        update
    }

    /// The merged reply: updates of other containers in order of first
    /// appearance, then the target's (only if a plugin named it), and the
    /// requested evictions.
    pub fn into_response(self) -> UpdateContainerResponse {
        UpdateContainerResponse {
            update: self.updates(),
            evict: self.evictions,
        }
    }
}

#[cfg(test)]
mod tests {
    use nri_api::{
        opt, Container, ContainerEviction, ContainerUpdate, Field, LinuxCpu, LinuxMemory,
        LinuxPids, LinuxResources, UpdateContainerRequest, UpdateContainerResponse,
    };

    use super::UpdateResult;
    use crate::merge::testutil::{container_ids, resources};

    const TARGET: &str = "ctr0";

    fn requested() -> LinuxResources {
        LinuxResources {
            cpu: Some(LinuxCpu {
                shares: opt(999u64),
                quota: opt(888),
                period: opt(777u64),
                realtime_runtime: opt(666),
                realtime_period: opt(555u64),
                cpus: "444".into(),
                mems: "333".into(),
            }),
            memory: Some(LinuxMemory {
                limit: opt(9999),
                reservation: opt(8888),
                swap: opt(7777),
                kernel: opt(6666),
                kernel_tcp: opt(5555),
                swappiness: opt(444u64),
                disable_oom_killer: opt(false),
                use_hierarchy: opt(false),
            }),
            ..Default::default()
        }
    }

    fn result_with(resources: LinuxResources) -> UpdateResult {
        UpdateResult::new(UpdateContainerRequest {
            container: Some(Container {
                id: TARGET.into(),
                ..Default::default()
            }),
            linux_resources: Some(resources),
            ..Default::default()
        })
    }

    fn reply(updates: Vec<ContainerUpdate>) -> UpdateContainerResponse {
        UpdateContainerResponse {
            update: updates,
            ..Default::default()
        }
    }

    fn cpu_update(id: &str) -> ContainerUpdate {
        let mut u = ContainerUpdate::for_container(id);
        u.set_linux_cpu_shares(123)
            .set_linux_cpu_quota(456)
            .set_linux_cpu_period(789)
            .set_linux_cpu_realtime_runtime(321)
            .set_linux_cpu_realtime_period(654)
            .set_linux_cpuset_cpus("0-1")
            .set_linux_cpuset_mems("2-3");
        u
    }

    #[test]
    fn plugin_cpu_over_requested_memory() {
        let mut r = result_with(requested());
        r.apply("00-test", reply(vec![cpu_update(TARGET)])).unwrap();
        let response = r.into_response();
        assert_eq!(response.update.len(), 1);
        let u = &response.update[0];
        assert_eq!(u.container_id, TARGET);
        let expected = LinuxResources {
            cpu: cpu_update(TARGET)
                .linux
                .and_then(|l| l.resources)
                .and_then(|r| r.cpu),
            memory: requested().memory,
            ..Default::default()
        };
        assert_eq!(resources(u), &expected);
    }

    #[test]
    fn two_plugins_same_cpu_field_conflict() {
        let mut r = result_with(requested());
        r.apply("00-bar", reply(vec![cpu_update(TARGET)])).unwrap();
        let err = r
            .apply("10-foo", reply(vec![cpu_update(TARGET)]))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"plugins "10-foo" and "00-bar" both tried to set CPUShares "#
        );
    }

    #[test]
    fn next_plugin_sees_mutated_request() {
        let mut r = result_with(requested());
        let mut u = ContainerUpdate::for_container(TARGET);
        u.set_linux_memory_limit(42);
        r.apply("00-a", reply(vec![u])).unwrap();
        let seen = r.request().linux_resources.as_ref().unwrap();
        assert_eq!(seen.memory.as_ref().unwrap().limit.unwrap().value, 42);
        assert_eq!(seen.cpu.as_ref().unwrap().shares.unwrap().value, 999);
    }

    #[test]
    fn no_entry_for_untouched_target() {
        let mut r = result_with(requested());
        r.apply("00-a", reply(vec![cpu_update("other")])).unwrap();
        r.apply("10-b", reply(vec![])).unwrap();
        let response = r.into_response();
        let ids = container_ids(&response.update);
        assert_eq!(ids, ["other"]);
    }

    #[test]
    fn no_plugins_no_updates() {
        assert!(result_with(requested()).into_response().update.is_empty());
    }

    #[test]
    fn target_comes_last() {
        let mut r = result_with(requested());
        r.apply(
            "00-a",
            reply(vec![cpu_update(TARGET), cpu_update("b"), cpu_update("a")]),
        )
        .unwrap();
        let ids: Vec<_> = r.updates().iter().map(|u| u.container_id.clone()).collect();
        assert_eq!(ids, ["b", "a", TARGET]);
        assert_eq!(r.into_response().update.len(), 3);
    }

    #[test]
    fn target_named_without_resources_is_empty_entry() {
        let mut r = result_with(requested());
        r.apply("00-a", reply(vec![ContainerUpdate::for_container(TARGET)]))
            .unwrap();
        let response = r.into_response();
        assert_eq!(response.update.len(), 1);
        let res = resources(&response.update[0]);
        assert_eq!(res.memory, Some(Default::default()));
        assert!(res.cpu.as_ref().unwrap().shares.is_none());
    }

    #[test]
    fn requested_pids_do_not_make_plugins_conflict() {
        let mut resources = requested();
        resources.pids = Some(LinuxPids { limit: 10 });
        let mut r = result_with(resources);
        let mut a = ContainerUpdate::for_container(TARGET);
        a.set_linux_memory_limit(1);
        let mut b = ContainerUpdate::for_container(TARGET);
        b.set_linux_cpu_shares(1);
        r.apply("00-a", reply(vec![a])).unwrap();
        r.apply("10-b", reply(vec![b])).unwrap();
        assert_eq!(r.owners().owner(TARGET, Field::PidsLimit), None);
        let response = r.into_response();
        assert_eq!(resources_pids(&response.update[0]), Some(10));
    }

    fn resources_pids(u: &ContainerUpdate) -> Option<i64> {
        resources(u).pids.map(|p| p.limit)
    }

    #[test]
    fn pids_requested_by_plugin_are_honoured() {
        let mut r = result_with(requested());
        let mut u = ContainerUpdate::for_container(TARGET);
        u.set_linux_pid_limits(77);
        r.apply("00-a", reply(vec![u])).unwrap();
        assert_eq!(resources_pids(&r.updates()[0]), Some(77));
        assert_eq!(r.owners().owner(TARGET, Field::PidsLimit), Some("00-a"));
    }

    #[test]
    fn failed_ignorable_target_update_leaves_request() {
        let mut r = result_with(requested());
        let mut a = ContainerUpdate::for_container(TARGET);
        a.set_linux_cpu_shares(1);
        let mut b = ContainerUpdate::for_container(TARGET);
        b.set_linux_memory_limit(5)
            .set_linux_cpu_shares(2)
            .set_ignore_failure();
        r.apply("00-a", reply(vec![a])).unwrap();
        r.apply("10-b", reply(vec![b])).unwrap();
        let seen = r.request().linux_resources.as_ref().unwrap();
        assert_eq!(seen.memory.as_ref().unwrap().limit.unwrap().value, 9999);
        assert_eq!(seen.cpu.as_ref().unwrap().shares.unwrap().value, 1);
    }

    #[test]
    fn evictions_are_collected() {
        let mut r = result_with(requested());
        let eviction = ContainerEviction {
            container_id: "victim".into(),
            reason: "memory pressure".into(),
        };
        r.apply(
            "00-a",
            UpdateContainerResponse {
                evict: vec![eviction.clone()],
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(r.evictions(), std::slice::from_ref(&eviction));
        assert_eq!(r.into_response().evict, [eviction]);
    }

    #[test]
    fn missing_container_and_resources_are_tolerated() {
        let mut r = UpdateResult::new(UpdateContainerRequest::default());
        assert_eq!(r.container_id(), "");
        let req = r.request().linux_resources.as_ref().unwrap();
        assert!(req.memory.is_some() && req.cpu.is_some());
        let mut u = ContainerUpdate::for_container("");
        u.set_linux_cpu_shares(3);
        r.apply("00-a", reply(vec![u])).unwrap();
        let response = r.into_response();
        assert_eq!(response.update.len(), 1);
        assert_eq!(response.update[0].container_id, "");
    }
}
