//! The collector of one CreateContainer call.

use nri_api::{
    ContainerAdjustment, ContainerEviction, ContainerUpdate, CreateContainerRequest,
    CreateContainerResponse, LinuxContainerAdjustment,
};

use super::updates::{Scope, UpdateSet};
use super::{empty_resources, linux_of, resources_of, Merge};
use crate::error::MergeError;
use crate::owners::Owners;

/// Collects the results of all plugins for one CreateContainer call.
///
/// Create it from the runtime's request, then, for each plugin in order,
/// send the plugin [`request`](Self::request) (which reflects every earlier
/// plugin's changes) and [`apply`](Self::apply) its response. Finally take the
/// merged reply with [`into_response`](Self::into_response) (or
/// [`into_outcome`](Self::into_outcome), which also yields the ownership
/// record validators need).
///
/// ```
/// use nri_adaptation::CreateResult;
/// use nri_api::{Container, ContainerAdjustment, CreateContainerRequest, CreateContainerResponse};
///
/// let request = CreateContainerRequest {
///     container: Some(Container { id: "ctr0".into(), ..Default::default() }),
///     ..Default::default()
/// };
/// let mut result = CreateResult::new(request);
///
/// let mut adjust = ContainerAdjustment::default();
/// adjust.add_annotation("owner", "00-bar").set_linux_memory_limit(1 << 30);
/// let reply = CreateContainerResponse { adjust: Some(adjust), ..Default::default() };
/// result.apply("00-bar", reply.clone()).unwrap();
///
/// // The next plugin sees the annotation in its request...
/// let container = result.request().container.as_ref().unwrap();
/// assert_eq!(container.annotations["owner"], "00-bar");
///
/// // ...and cannot set the same things again.
/// let err = result.apply("10-foo", reply).unwrap_err();
/// assert_eq!(err.to_string(), r#"plugins "10-foo" and "00-bar" both tried to set Annotations owner"#);
/// ```
///
/// Validators must see the container as the runtime sent it: clone
/// `request().container` right after [`new`](Self::new), before the first
/// [`apply`](Self::apply).
#[derive(Debug, Clone)]
pub struct CreateResult {
    request: CreateContainerRequest,
    id: String,
    reply: ContainerAdjustment,
    updates: UpdateSet,
    evictions: Vec<ContainerEviction>,
    owners: Owners,
}

/// Everything a finished [`CreateResult`] holds.
#[derive(Debug, Clone)]
pub struct CreateOutcome {
    /// The request as the last plugin saw it.
    pub request: CreateContainerRequest,
    /// The merged reply for the runtime.
    pub response: CreateContainerResponse,
    /// Who set what, for validation.
    pub owners: Owners,
}

impl CreateResult {
    /// Starts collecting for `request`.
    ///
    /// The request container is normalized first: a missing container, hooks,
    /// Linux part, resources, memory or CPU part is replaced by an empty one,
    /// so every plugin sees them present.
    pub fn new(mut request: CreateContainerRequest) -> Self {
        let container = request.container.get_or_insert_with(Default::default);
        container.hooks.get_or_insert_with(Default::default);
        let resources = resources_of(container);
        resources.memory.get_or_insert_with(Default::default);
        resources.cpu.get_or_insert_with(Default::default);
        let id = container.id.clone();

        let reply = ContainerAdjustment {
            hooks: Some(Default::default()),
            linux: Some(LinuxContainerAdjustment {
                resources: Some(empty_resources()),
                ..Default::default()
            }),
            ..Default::default()
        };

        Self {
            request,
            id,
            reply,
            updates: UpdateSet::default(),
            evictions: Vec::new(),
            owners: Owners::new(),
        }
    }

    /// Id of the container being created.
    pub fn container_id(&self) -> &str {
        &self.id
    }

    /// Merges the response of `plugin` (its full name, `"<idx>-<base>"`).
    ///
    /// The adjustment is applied field by field in the reference order
    /// (annotations, mounts, environment, arguments, hooks, then the Linux
    /// part: devices, resources, cgroups path, OOM score, I/O priority,
    /// seccomp policy, namespaces, sysctl, network devices, scheduler, RDT,
    /// memory policy; then rlimits and CDI devices), then the updates of
    /// other containers. Evictions are collected.
    ///
    /// On error the whole call must fail; the collector's state is then
    /// unspecified.
    pub fn apply(
        &mut self,
        plugin: &str,
        response: CreateContainerResponse,
    ) -> Result<(), MergeError> {
        let CreateContainerResponse {
            adjust,
            update,
            evict,
        } = response;

        if let Some(adjust) = adjust {
            self.adjust(plugin, adjust)?;
        }

        self.updates.merge(
            &mut self.owners,
            &mut Scope::Create { id: &self.id },
            plugin,
            update,
        )?;

        for eviction in evict {
            tracing::info!(
                plugin,
                container = %eviction.container_id,
                reason = %eviction.reason,
                "plugin requested eviction during CreateContainer"
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

    fn adjust(&mut self, plugin: &str, adjust: ContainerAdjustment) -> Result<(), MergeError> {
        let ContainerAdjustment {
            annotations,
            mounts,
            env,
            hooks,
            linux,
            rlimits,
            cdi_devices,
            args,
        } = adjust;

        let container = self.request.container.get_or_insert_with(Default::default);
        // Keep the request normalized even if a caller replaced parts of it.
        linux_of(container);
        let mut m = Merge {
            owners: &mut self.owners,
            id: &self.id,
            plugin,
            container,
            reply: &mut self.reply,
        };

        m.annotations(annotations)?;
        m.mounts(mounts)?;
        m.env(env)?;
        m.args(args)?;
        m.hooks(hooks);
        if let Some(linux) = linux {
            m.devices(linux.devices)?;
            m.resources(linux.resources)?;
            m.cgroups_path(linux.cgroups_path)?;
            m.oom_score_adj(linux.oom_score_adj)?;
            m.io_priority(linux.io_priority)?;
            m.seccomp_policy(linux.seccomp_policy)?;
            m.namespaces(linux.namespaces)?;
            m.sysctl(linux.sysctl)?;
            m.net_devices(linux.net_devices)?;
            m.scheduler(linux.scheduler)?;
            m.rdt(linux.rdt)?;
            m.memory_policy(linux.memory_policy)?;
        }
        m.rlimits(rlimits)?;
        m.cdi_devices(cdi_devices)?;
        Ok(())
    }

    /// The request as the next plugin must see it: the runtime's request with
    /// the changes of every plugin applied so far.
    pub fn request(&self) -> &CreateContainerRequest {
        &self.request
    }

    /// The adjustment collected so far.
    pub fn adjustment(&self) -> &ContainerAdjustment {
        &self.reply
    }

    /// The updates of other containers collected so far, in order of first
    /// appearance.
    pub fn updates(&self) -> &[ContainerUpdate] {
        self.updates.others()
    }

    /// Evictions requested so far, in the order plugins asked for them.
    pub fn evictions(&self) -> &[ContainerEviction] {
        &self.evictions
    }

    /// Who set what so far.
    pub fn owners(&self) -> &Owners {
        &self.owners
    }

    /// The merged reply for the runtime: the collected adjustment (its
    /// collections always present, possibly empty), the updates of other
    /// containers and the requested evictions.
    pub fn into_response(self) -> CreateContainerResponse {
        self.into_outcome().response
    }

    /// The merged reply together with the final request and the ownership
    /// record.
    pub fn into_outcome(self) -> CreateOutcome {
        CreateOutcome {
            response: CreateContainerResponse {
                adjust: Some(self.reply),
                update: self.updates.into_others(),
                evict: self.evictions,
            },
            request: self.request,
            owners: self.owners,
        }
    }
}

#[cfg(test)]
mod tests {
    use nri_api::{ContainerEviction, CreateContainerRequest, CreateContainerResponse};

    use super::CreateResult;
    use crate::merge::testutil::*;

    #[test]
    fn request_is_normalized() {
        let r = CreateResult::new(CreateContainerRequest::default());
        assert_eq!(r.container_id(), "");
        let c = r.request().container.as_ref().unwrap();
        assert!(c.hooks.is_some());
        let res = c.linux.as_ref().unwrap().resources.as_ref().unwrap();
        assert!(res.memory.is_some() && res.cpu.is_some());
    }

    #[test]
    fn empty_response_has_present_collections() {
        let mut r = create();
        r.apply("00-a", CreateContainerResponse::default()).unwrap();
        let response = r.into_response();
        let adjust = response.adjust.unwrap();
        assert!(adjust.hooks.is_some());
        let linux = adjust.linux.unwrap();
        let res = linux.resources.unwrap();
        assert!(res.memory.is_some() && res.cpu.is_some());
        // No Linux part from any plugin: no RDT either.
        assert!(linux.rdt.is_none());
        assert!(response.update.is_empty() && response.evict.is_empty());
    }

    #[test]
    fn outcome_carries_request_and_owners() {
        let mut r = create();
        r.apply(
            "00-a",
            adjust(|a| {
                a.add_annotation("k", "v");
            }),
        )
        .unwrap();
        let out = r.into_outcome();
        assert_eq!(out.request.container.unwrap().annotations["k"], "v");
        assert!(!out.owners.is_empty());
        assert_eq!(out.response.adjust.unwrap().annotations["k"], "v");
    }

    #[test]
    fn evictions_are_collected_in_order() {
        let mut r = create();
        let ev = |id: &str| ContainerEviction {
            container_id: id.into(),
            reason: "r".into(),
        };
        for (plugin, id) in [("00-a", "x"), ("10-b", "y")] {
            r.apply(
                plugin,
                CreateContainerResponse {
                    evict: vec![ev(id)],
                    ..Default::default()
                },
            )
            .unwrap();
        }
        assert_eq!(r.evictions(), [ev("x"), ev("y")]);
        assert_eq!(r.into_response().evict, [ev("x"), ev("y")]);
    }

    #[test]
    fn adjustment_and_updates_of_one_plugin_both_apply() {
        let mut response = adjust(|a| {
            a.add_env("A", "1");
        });
        let mut u = nri_api::ContainerUpdate::for_container("other");
        u.set_linux_cpu_shares(5);
        response.update.push(u);
        let r = run(vec![("00-a", response)]).unwrap();
        assert_eq!(r.adjustment().env.len(), 1);
        assert_eq!(r.updates().len(), 1);
    }

    #[test]
    fn adjustment_error_stops_before_updates() {
        let mut r = create();
        r.apply(
            "00-a",
            adjust(|a| {
                a.add_env("A", "1");
            }),
        )
        .unwrap();
        let mut response = adjust(|a| {
            a.add_env("A", "2");
        });
        response
            .update
            .push(nri_api::ContainerUpdate::for_container("other"));
        assert!(r.apply("10-b", response).is_err());
        assert!(r.updates().is_empty());
    }
}
