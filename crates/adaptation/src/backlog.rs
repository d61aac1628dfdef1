//! Events of a plugin that is synchronizing: queued while it is
//! synchronized and, with `AdaptationBuilder::deliver_events_during_sync`,
//! replayed in order once it is done, without the events whose effect its
//! synchronization already showed. Without that option nothing is replayed,
//! and the queue only tells which pods and containers the plugin never
//! learned of (neither listed nor replayed): their later events do not
//! reach it, so that every container is known to a plugin (listed or by a
//! CreateContainer) before any other event of it.
//!
//! `docs/adaptation.md` ("Events during synchronization") describes the
//! sequence numbers, the lock order and why each event is replayed or not.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use nri_api::*;

use crate::adaptation::Inner;
use crate::adaptation_error::PluginError;
use crate::plugin::{Plugin, PluginKind, Rpc};

/// A lifecycle event as queued for a synchronizing plugin. The variants are
/// named after their [`Event`].
// Queued events exist only while a plugin is synchronizing; boxing the
// larger requests would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub(crate) enum Queued {
    RunPodSandbox(RunPodSandboxRequest),
    UpdatePodSandbox(UpdatePodSandboxRequest),
    PostUpdatePodSandbox(PostUpdatePodSandboxRequest),
    StopPodSandbox(StopPodSandboxRequest),
    RemovePodSandbox(RemovePodSandboxRequest),
    CreateContainer(CreateContainerRequest),
    PostCreateContainer(PostCreateContainerRequest),
    StartContainer(StartContainerRequest),
    PostStartContainer(PostStartContainerRequest),
    UpdateContainer(UpdateContainerRequest),
    PostUpdateContainer(PostUpdateContainerRequest),
    StopContainer(StopContainerRequest),
    RemoveContainer(RemoveContainerRequest),
}

/// The pod or container an event is about.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Pod(String),
    Container(String),
}

fn pod_id(pod: &Option<PodSandbox>) -> String {
    pod.as_ref().map(|p| p.id.clone()).unwrap_or_default()
}

fn ctr_id(ctr: &Option<Container>) -> String {
    ctr.as_ref().map(|c| c.id.clone()).unwrap_or_default()
}

impl Queued {
    fn key(&self) -> Key {
        use Queued::*;
        match self {
            RunPodSandbox(r) => Key::Pod(pod_id(&r.pod)),
            UpdatePodSandbox(r) => Key::Pod(pod_id(&r.pod)),
            PostUpdatePodSandbox(r) => Key::Pod(pod_id(&r.pod)),
            StopPodSandbox(r) => Key::Pod(pod_id(&r.pod)),
            RemovePodSandbox(r) => Key::Pod(pod_id(&r.pod)),
            CreateContainer(r) => Key::Container(ctr_id(&r.container)),
            PostCreateContainer(r) => Key::Container(ctr_id(&r.container)),
            StartContainer(r) => Key::Container(ctr_id(&r.container)),
            PostStartContainer(r) => Key::Container(ctr_id(&r.container)),
            UpdateContainer(r) => Key::Container(ctr_id(&r.container)),
            PostUpdateContainer(r) => Key::Container(ctr_id(&r.container)),
            StopContainer(r) => Key::Container(ctr_id(&r.container)),
            RemoveContainer(r) => Key::Container(ctr_id(&r.container)),
        }
    }

    /// How far in its life the event takes its pod or container, on the
    /// scale of [`pod_stage`] and [`container_stage`]; `None` for updates,
    /// which do not move it on.
    fn stage(&self) -> Option<u8> {
        use Queued::*;
        match self {
            RunPodSandbox(_) => Some(POD_RUNNING),
            StopPodSandbox(_) => Some(POD_RUNNING + 1),
            RemovePodSandbox(_) => Some(POD_RUNNING + 2),
            CreateContainer(_) => Some(CTR_CREATING),
            PostCreateContainer(_) => Some(CTR_CREATED),
            StartContainer(_) => Some(CTR_CREATED + 1),
            PostStartContainer(_) => Some(CTR_RUNNING),
            StopContainer(_) => Some(CTR_STOPPED),
            RemoveContainer(_) => Some(CTR_STOPPED + 1),
            UpdatePodSandbox(_)
            | PostUpdatePodSandbox(_)
            | UpdateContainer(_)
            | PostUpdateContainer(_) => None,
        }
    }

    /// The event that brings the pod or container into existence.
    fn is_birth(&self) -> bool {
        matches!(self, Queued::RunPodSandbox(_) | Queued::CreateContainer(_))
    }

    /// The event that ends it.
    fn is_removal(&self) -> bool {
        matches!(
            self,
            Queued::RemovePodSandbox(_) | Queued::RemoveContainer(_)
        )
    }
}

/// A listed pod has run (pods carry no state).
const POD_RUNNING: u8 = 1;
/// CreateContainer was asked.
const CTR_CREATING: u8 = 1;
/// The container exists (PostCreateContainer).
const CTR_CREATED: u8 = 2;
/// The container runs (PostStartContainer).
const CTR_RUNNING: u8 = 4;
/// The container stopped (StopContainer).
const CTR_STOPPED: u8 = 5;

/// The stage a listed container has reached, by its state.
fn container_stage(ctr: &Container) -> u8 {
    match ContainerState::try_from(ctr.state) {
        Ok(ContainerState::ContainerRunning | ContainerState::ContainerPaused) => CTR_RUNNING,
        Ok(ContainerState::ContainerStopped) => CTR_STOPPED,
        _ => CTR_CREATED,
    }
}

/// What the runtime listed for the plugin, and when.
#[derive(Debug, Default)]
struct Snapshot {
    /// The last event sequence number given out when the runtime handed the
    /// list over.
    seq: u64,
    pods: HashSet<String>,
    /// Listed containers and their stage.
    containers: HashMap<String, u8>,
}

impl Snapshot {
    /// The stage of the pod or container, `None` if not listed.
    fn stage(&self, key: &Key) -> Option<u8> {
        match key {
            Key::Pod(id) => self.pods.contains(id).then_some(POD_RUNNING),
            Key::Container(id) => self.containers.get(id).copied(),
        }
    }
}

struct Entry {
    seq: u64,
    event: Queued,
}

/// The queue of one synchronizing plugin.
pub(crate) struct Backlog {
    pub plugin: Arc<Plugin>,
    seq: Arc<AtomicU64>,
    state: Mutex<BacklogState>,
}

#[derive(Default)]
struct BacklogState {
    events: VecDeque<Entry>,
    snapshot: Option<Snapshot>,
}

impl Backlog {
    fn state(&self) -> MutexGuard<'_, BacklogState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records what the runtime listed; called when it hands the list to
    /// the synchronizer, before the plugin sees it.
    pub fn set_snapshot(&self, pods: &[PodSandbox], containers: &[Container]) {
        let snapshot = Snapshot {
            seq: self.seq.load(Ordering::SeqCst),
            pods: pods.iter().map(|p| p.id.clone()).collect(),
            containers: containers
                .iter()
                .map(|c| (c.id.clone(), container_stage(c)))
                .collect(),
        };
        self.state().snapshot = Some(snapshot);
    }

    fn take(&self) -> Vec<Entry> {
        self.state().events.drain(..).collect()
    }
}

/// The event sequence and the plugins being synchronized, shared by all
/// lifecycle calls of one adaptation.
#[derive(Default)]
pub(crate) struct Backlogs {
    /// Sequence number of the last lifecycle event; advanced under the
    /// lifecycle lock.
    seq: Arc<AtomicU64>,
    syncing: Mutex<Vec<Arc<Backlog>>>,
    /// Plugins added after a synchronization, with the listed (or absent)
    /// objects whose live events their listing already showed.
    watched: Mutex<Vec<Watched>>,
}

/// What a synchronization showed of one pod or container whose events may
/// still arrive live, after the plugin is added.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shown {
    /// Listed at this stage: its events up to it are shown, the first
    /// later one ends the watch.
    Stage(u8),
    /// Absent from the listing although it existed before the queue was
    /// attached: gone, with every event up to its removal.
    Gone,
}

/// The objects of one added plugin whose live events its listing showed.
struct Watched {
    plugin: Arc<Plugin>,
    objects: HashMap<Key, Shown>,
}

/// Whether a plugin whose listing showed `objects` must not get `event`
/// live; forgets the object once no later event can have been shown.
fn shown_live(objects: &mut HashMap<Key, Shown>, event: &Queued) -> bool {
    let key = event.key();
    let Some(shown) = objects.get(&key).copied() else {
        return false;
    };
    let (skip, done) = match (shown, event.stage()) {
        (Shown::Gone, _) => (true, event.is_removal()),
        (Shown::Stage(_), None) => (false, false),
        (Shown::Stage(listed), Some(stage)) => (stage <= listed, stage >= listed),
    };
    if done {
        objects.remove(&key);
    }
    skip
}

impl Backlogs {
    fn syncing(&self) -> MutexGuard<'_, Vec<Arc<Backlog>>> {
        self.syncing.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn watched(&self) -> MutexGuard<'_, Vec<Watched>> {
        self.watched.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Numbers one lifecycle event and queues it for every synchronizing
    /// plugin. Returns the plugins that must not get it live, their
    /// synchronization having shown it. The caller holds the lifecycle lock.
    pub fn record(&self, event: impl FnOnce() -> Option<Queued>) -> Vec<Arc<Plugin>> {
        let seq = self.seq.fetch_add(1, Ordering::SeqCst) + 1;
        let syncing = self.syncing();
        let mut watched = self.watched();
        if syncing.is_empty() && watched.is_empty() {
            return Vec::new();
        }
        let Some(event) = event() else {
            return Vec::new();
        };
        for b in syncing.iter() {
            b.state().events.push_back(Entry {
                seq,
                event: event.clone(),
            });
        }
        drop(syncing);
        let mut skip = Vec::new();
        watched.retain_mut(|w| {
            if w.plugin.is_closed() {
                return false;
            }
            if shown_live(&mut w.objects, &event) {
                skip.push(w.plugin.clone());
            }
            !w.objects.is_empty()
        });
        skip
    }

    /// Keeps `objects` from reaching `plugin` live as far as its listing
    /// showed them. The caller holds the lifecycle lock.
    fn watch(&self, plugin: Arc<Plugin>, objects: HashMap<Key, Shown>) {
        if !objects.is_empty() {
            self.watched().push(Watched { plugin, objects });
        }
    }

    fn detach(&self, backlog: &Arc<Backlog>) {
        self.syncing().retain(|b| !Arc::ptr_eq(b, backlog));
    }
}

impl Inner {
    /// Starts queueing events for `plugin`, between two lifecycle calls:
    /// every event that started before is finished (so the runtime's
    /// listing, taken later, shows its effect), every later one is queued.
    /// The caller holds the plugin-sync lock.
    pub(crate) async fn attach_backlog(&self, plugin: Arc<Plugin>) -> Arc<Backlog> {
        let backlog = Arc::new(Backlog {
            plugin,
            seq: self.backlogs.seq.clone(),
            state: Mutex::new(BacklogState::default()),
        });
        let _lifecycle = self.lifecycle.lock().await;
        self.backlogs.syncing().push(backlog.clone());
        backlog
    }

    /// Stops queueing for a plugin whose synchronization failed.
    pub(crate) fn drop_backlog(&self, backlog: &Arc<Backlog>) {
        self.backlogs.detach(backlog);
    }

    /// Attaches a backlog for `plugin` (as [`attach_backlog`](Self::attach_backlog))
    /// that is detached again when the returned guard is dropped, also when
    /// the synchronizing future is cancelled.
    pub(crate) async fn attach_backlog_guarded(&self, plugin: Arc<Plugin>) -> AttachedBacklog<'_> {
        let backlog = self.attach_backlog(plugin).await;
        AttachedBacklog {
            inner: self,
            backlog,
        }
    }
}

/// A backlog detached when dropped (detaching twice is harmless, so
/// [`Inner::replay_and_add`] may have done it already).
pub(crate) struct AttachedBacklog<'a> {
    inner: &'a Inner,
    pub backlog: Arc<Backlog>,
}

impl Drop for AttachedBacklog<'_> {
    fn drop(&mut self) {
        self.inner.drop_backlog(&self.backlog);
    }
}

impl Inner {
    /// Replays the queued events to the synchronized plugin, then adds it
    /// to the active plugins (see `add_or_replace`). The last part of the
    /// queue is replayed under the lifecycle lock, so the plugin gets no
    /// newer event before it is added. A plugin that fails a replayed event
    /// fatally (as its policies decide) is closed and not added. Returns
    /// whether the plugin was added.
    ///
    /// An external plugin may replace another (see `swap_in`); a launched
    /// plugin being restarted is only added.
    ///
    /// Without `deliver_events_during_sync` nothing is replayed: the queue
    /// is only read to find the objects the plugin never learned of, whose
    /// live events are then kept from it ([`Filter::never_shown`]).
    pub(crate) async fn replay_and_add(&self, backlog: Arc<Backlog>) -> bool {
        let plugin = backlog.plugin.clone();
        let deliver = self.settings.policies.deliver_events_during_sync;
        let mut filter = Filter::new(backlog.state().snapshot.take());
        loop {
            let batch = backlog.take();
            if batch.is_empty() {
                break;
            }
            let events = filter.select(batch);
            if deliver && !replay(self, &plugin, events).await {
                break;
            }
        }
        let old = {
            let _lifecycle = self.lifecycle.lock().await;
            let batch = backlog.take();
            self.backlogs.detach(&backlog);
            let events = filter.select(batch);
            if deliver && !plugin.is_closed() {
                replay(self, &plugin, events).await;
            }
            if self.is_stopped() || plugin.is_closed() {
                plugin.close();
                return false;
            }
            let shown = if deliver {
                filter.still_shown()
            } else {
                filter.never_shown()
            };
            self.backlogs.watch(plugin.clone(), shown);
            if plugin.kind == PluginKind::External {
                self.swap_in(plugin.clone())
            } else {
                self.add_plugin(plugin.clone());
                None
            }
        };
        tracing::info!(plugin = %plugin.name, "plugin connected and synchronized");
        self.retire(&plugin, old);
        true
    }
}

/// What happens to the queued events of one pod or container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Decision {
    Deliver,
    Drop,
}

/// Chooses the queued events to replay, batch after batch, remembering its
/// decisions for pods and containers the runtime did not list.
struct Filter {
    snapshot: Option<Snapshot>,
    decided: HashMap<Key, Decision>,
    /// Listed objects with a queued event at or beyond their listed stage,
    /// and objects whose removal was queued.
    passed: HashSet<Key>,
}

impl Filter {
    fn new(snapshot: Option<Snapshot>) -> Filter {
        Filter {
            snapshot,
            decided: HashMap::new(),
            passed: HashSet::new(),
        }
    }

    /// What the listing showed of the objects whose events may still come
    /// live: listed objects no queued event took to their listed stage or
    /// beyond, and dropped unlisted ones whose removal is still to come.
    fn still_shown(&self) -> HashMap<Key, Shown> {
        let Some(snapshot) = &self.snapshot else {
            return HashMap::new();
        };
        let pods = snapshot
            .pods
            .iter()
            .map(|id| (Key::Pod(id.clone()), Shown::Stage(POD_RUNNING)));
        let ctrs = snapshot
            .containers
            .iter()
            .map(|(id, stage)| (Key::Container(id.clone()), Shown::Stage(*stage)));
        let gone = self
            .decided
            .iter()
            .filter(|(_, d)| **d == Decision::Drop)
            .map(|(key, _)| (key.clone(), Shown::Gone));
        pods.chain(ctrs)
            .chain(gone)
            .filter(|(key, _)| !self.passed.contains(key))
            .collect()
    }

    /// Without replay: the objects not listed whose events were queued and
    /// whose removal was not, which the plugin therefore never learned of.
    /// None of their later events reaches it, up to and including their
    /// removal.
    fn never_shown(&self) -> HashMap<Key, Shown> {
        if self.snapshot.is_none() {
            return HashMap::new();
        }
        self.decided
            .keys()
            .filter(|key| !self.passed.contains(*key))
            .map(|key| (key.clone(), Shown::Gone))
            .collect()
    }

    /// The events of `batch` to replay, in order.
    fn select(&mut self, batch: Vec<Entry>) -> Vec<Queued> {
        let Some(snapshot) = &self.snapshot else {
            // Never synchronized: the plugin knows nothing, so it gets all.
            return batch.into_iter().map(|e| e.event).collect();
        };
        let keys: Vec<Key> = batch.iter().map(|e| e.event.key()).collect();
        // For listed objects: the last event in the batch whose effect the
        // listing shows; it and everything before it are dropped.
        let mut shown: HashMap<&Key, usize> = HashMap::new();
        for (i, (e, key)) in batch.iter().zip(&keys).enumerate() {
            if let (Some(listed), Some(stage)) = (snapshot.stage(key), e.event.stage()) {
                if stage <= listed {
                    shown.insert(key, i);
                }
                if stage >= listed {
                    self.passed.insert(key.clone());
                }
            }
            if e.event.is_removal() {
                self.passed.insert(key.clone());
            }
        }
        // For objects not listed: whether their events are replayed.
        for key in &keys {
            if snapshot.stage(key).is_some() || self.decided.contains_key(key) {
                continue;
            }
            let events = || batch.iter().zip(&keys).filter(|(_, k)| *k == key);
            let removed = events().any(|(e, _)| e.event.is_removal());
            let born = events().find(|(e, _)| e.event.is_birth());
            let born_after = born.is_some_and(|(e, _)| e.seq > snapshot.seq);
            // Born before the queue was attached (its birth is not queued)
            // and not listed: gone by the time of the listing.
            let decision = if born.is_none() || (removed && !born_after) {
                Decision::Drop
            } else {
                Decision::Deliver
            };
            self.decided.insert(key.clone(), decision);
        }
        let mut out = Vec::new();
        for (i, (e, key)) in batch.iter().zip(&keys).enumerate() {
            let keep = match snapshot.stage(key) {
                Some(listed) => {
                    shown.get(key).is_none_or(|last| i > *last)
                        && e.event.stage().is_none_or(|s| s > listed)
                }
                None => self.decided.get(key) == Some(&Decision::Deliver),
            };
            if keep {
                out.push(e.event.clone());
            }
        }
        out
    }
}

/// Replays `events` to the plugin. Returns `false` once the plugin is
/// closed.
async fn replay(inner: &Inner, plugin: &Plugin, events: Vec<Queued>) -> bool {
    for event in events {
        if plugin.is_closed() {
            return false;
        }
        let ok = match event {
            // The container exists already (or is being created): the
            // plugin learns of it before any other of its events, but what
            // it would adjust is too late to apply.
            Queued::CreateContainer(r) => match call(plugin, &r).await {
                Some(Some(reply)) => {
                    if reply
                        .adjust
                        .as_ref()
                        .is_some_and(|a| *a != ContainerAdjustment::default())
                    {
                        tracing::warn!(plugin = %plugin.name,
                            container = %ctr_id(&r.container),
                            "the adjustment of a replayed CreateContainer is not applied: \
                             the container was created while the plugin synchronized");
                    }
                    apply_replayed_updates(inner, plugin, "CreateContainer", reply.update).await;
                    true
                }
                Some(None) => true,
                None => false,
            },
            // The plugin learns of the new resources through
            // PostUpdateContainer; there is nothing left to change.
            Queued::UpdateContainer(_) => true,
            Queued::RunPodSandbox(r) => call(plugin, &r).await.is_some(),
            Queued::UpdatePodSandbox(r) => call(plugin, &r).await.is_some(),
            Queued::PostUpdatePodSandbox(r) => call(plugin, &r).await.is_some(),
            Queued::StopPodSandbox(r) => call(plugin, &r).await.is_some(),
            Queued::RemovePodSandbox(r) => call(plugin, &r).await.is_some(),
            Queued::PostCreateContainer(r) => call(plugin, &r).await.is_some(),
            Queued::StartContainer(r) => call(plugin, &r).await.is_some(),
            Queued::PostStartContainer(r) => call(plugin, &r).await.is_some(),
            Queued::PostUpdateContainer(r) => call(plugin, &r).await.is_some(),
            Queued::RemoveContainer(r) => call(plugin, &r).await.is_some(),
            Queued::StopContainer(r) => match call(plugin, &r).await {
                Some(Some(reply)) => {
                    apply_replayed_updates(inner, plugin, "StopContainer", reply.update).await;
                    true
                }
                Some(None) => true,
                None => false,
            },
        };
        if !ok {
            return false;
        }
    }
    !plugin.is_closed()
}

/// The updates of other containers a replayed event's reply asks for: the
/// event is over, so they go the way of the plugin's unsolicited ones.
async fn apply_replayed_updates(
    inner: &Inner,
    plugin: &Plugin,
    event: &str,
    updates: Vec<ContainerUpdate>,
) {
    if updates.is_empty() {
        return;
    }
    let hooks = &inner.settings.hooks;
    match hooks
        .update_containers(&plugin.name, updates, Vec::new())
        .await
    {
        Ok(failed) if !failed.is_empty() => {
            tracing::warn!(plugin = %plugin.name, event, failed = failed.len(),
                "some container updates of a replayed event failed");
        }
        Ok(_) => {}
        Err(e) => {
            tracing::warn!(plugin = %plugin.name, event, error = %e,
                "failed to apply the container updates of a replayed event");
        }
    }
}

/// Calls the plugin with one replayed event. `None`: the plugin failed
/// fatally and its policies close it (it is then closed); other failures
/// are logged and the replay goes on.
async fn call<R: Rpc>(plugin: &Plugin, req: &R) -> Option<Option<Box<R::Response>>> {
    // A replayed event is a request of its own (a root span, in a new trace).
    match plugin.call_event(req, None).await {
        Ok(reply) => Some(reply),
        Err(e) => {
            if e.is_fatal() && plugin.on_fatal(&e).drop_plugin {
                tracing::warn!(plugin = %plugin.name, event = R::METHOD, error = %e,
                    "closing plugin, failed to handle a replayed request");
                plugin.close();
                return None;
            }
            log_skipped(plugin, R::METHOD, &e);
            Some(None)
        }
    }
}

fn log_skipped(plugin: &Plugin, event: &str, e: &PluginError) {
    tracing::warn!(plugin = %plugin.name, event, error = %e,
        "plugin failed to handle a replayed request; going on");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctr(id: &str, state: ContainerState) -> Container {
        Container {
            id: id.into(),
            state: state as i32,
            ..Default::default()
        }
    }

    fn some_ctr(id: &str) -> Option<Container> {
        Some(Container {
            id: id.into(),
            ..Default::default()
        })
    }

    fn some_pod(id: &str) -> Option<PodSandbox> {
        Some(PodSandbox {
            id: id.into(),
            ..Default::default()
        })
    }

    fn entries(events: Vec<(u64, Queued)>) -> Vec<Entry> {
        events
            .into_iter()
            .map(|(seq, event)| Entry { seq, event })
            .collect()
    }

    fn names(events: &[Queued]) -> Vec<String> {
        events
            .iter()
            .map(|e| {
                let key = match e.key() {
                    Key::Pod(id) | Key::Container(id) => id,
                };
                let name = format!("{e:?}");
                let name = name.split('(').next().unwrap_or_default().to_string();
                format!("{name} {key}")
            })
            .collect()
    }

    fn snapshot(seq: u64, pods: &[&str], ctrs: &[Container]) -> Snapshot {
        Snapshot {
            seq,
            pods: pods.iter().map(|p| p.to_string()).collect(),
            containers: ctrs
                .iter()
                .map(|c| (c.id.clone(), container_stage(c)))
                .collect(),
        }
    }

    #[test]
    fn listed_objects_lose_the_events_the_listing_shows() {
        let mut f = Filter::new(Some(snapshot(
            3,
            &["pod0"],
            &[ctr("c1", ContainerState::ContainerRunning)],
        )));
        let batch = entries(vec![
            (
                1,
                Queued::StartContainer(StartContainerRequest {
                    pod: None,
                    container: some_ctr("c1"),
                }),
            ),
            (
                2,
                Queued::PostUpdateContainer(PostUpdateContainerRequest {
                    pod: None,
                    container: some_ctr("c1"),
                }),
            ),
            (
                3,
                Queued::PostStartContainer(PostStartContainerRequest {
                    pod: None,
                    container: some_ctr("c1"),
                }),
            ),
            (
                4,
                Queued::PostUpdateContainer(PostUpdateContainerRequest {
                    pod: None,
                    container: some_ctr("c1"),
                }),
            ),
            (
                5,
                Queued::StopContainer(StopContainerRequest {
                    pod: None,
                    container: some_ctr("c1"),
                }),
            ),
            (
                6,
                Queued::StopPodSandbox(StopPodSandboxRequest {
                    pod: some_pod("pod0"),
                }),
            ),
        ]);
        assert_eq!(
            names(&f.select(batch)),
            [
                "PostUpdateContainer c1",
                "StopContainer c1",
                "StopPodSandbox pod0"
            ]
        );
    }

    #[test]
    fn unlisted_objects_born_after_the_listing_get_everything() {
        let mut f = Filter::new(Some(snapshot(2, &[], &[])));
        let create = |seq, id: &str| {
            (
                seq,
                Queued::CreateContainer(CreateContainerRequest {
                    pod: None,
                    container: some_ctr(id),
                }),
            )
        };
        let remove = |seq, id: &str| {
            (
                seq,
                Queued::RemoveContainer(RemoveContainerRequest {
                    pod: None,
                    container: some_ctr(id),
                }),
            )
        };
        // c1 lived and went before the listing could tell; c2 was created
        // after it; c3 is still there.
        let batch = entries(vec![
            create(1, "c1"),
            create(3, "c2"),
            remove(4, "c1"),
            create(5, "c3"),
            remove(6, "c2"),
        ]);
        assert_eq!(
            names(&f.select(batch)),
            [
                "CreateContainer c2",
                "CreateContainer c3",
                "RemoveContainer c2"
            ]
        );
        // Later batches follow the decisions taken.
        let batch = entries(vec![remove(7, "c3"), remove(8, "c9")]);
        assert_eq!(names(&f.select(batch)), ["RemoveContainer c3"]);
    }

    #[test]
    fn live_events_the_listing_showed_are_not_delivered() {
        let mut f = Filter::new(Some(snapshot(
            3,
            &["pod0"],
            &[
                ctr("c1", ContainerState::ContainerRunning),
                ctr("c3", ContainerState::ContainerCreated),
            ],
        )));
        let start = |id| {
            Queued::StartContainer(StartContainerRequest {
                pod: None,
                container: some_ctr(id),
            })
        };
        let post_start = |id| {
            Queued::PostStartContainer(PostStartContainerRequest {
                pod: None,
                container: some_ctr(id),
            })
        };
        let stop = |id| {
            Queued::StopContainer(StopContainerRequest {
                pod: None,
                container: some_ctr(id),
            })
        };
        let remove = |id| {
            Queued::RemoveContainer(RemoveContainerRequest {
                pod: None,
                container: some_ctr(id),
            })
        };
        // c1's start is queued, its post-start not yet; c2, created before
        // the queue and not listed, is gone; c3 is past its listed stage.
        let batch = entries(vec![(2, start("c1")), (3, stop("c2")), (4, start("c3"))]);
        assert_eq!(names(&f.select(batch)), ["StartContainer c3"]);
        let mut live = f.still_shown();
        assert_eq!(
            live,
            HashMap::from([
                (Key::Pod("pod0".into()), Shown::Stage(POD_RUNNING)),
                (Key::Container("c1".into()), Shown::Stage(CTR_RUNNING)),
                (Key::Container("c2".into()), Shown::Gone),
            ])
        );
        let delivered: Vec<Queued> = [
            post_start("c1"),
            remove("c2"),
            post_start("c3"),
            stop("c1"),
            remove("c1"),
            remove("c2"),
        ]
        .into_iter()
        .filter(|e| !shown_live(&mut live, e))
        .collect();
        assert_eq!(
            names(&delivered),
            [
                "PostStartContainer c3",
                "StopContainer c1",
                "RemoveContainer c1",
                "RemoveContainer c2"
            ]
        );
        assert_eq!(
            live,
            HashMap::from([(Key::Pod("pod0".into()), Shown::Stage(POD_RUNNING))])
        );
    }

    #[test]
    fn without_a_listing_everything_is_replayed() {
        let mut f = Filter::new(None);
        let batch = entries(vec![(
            1,
            Queued::RemovePodSandbox(RemovePodSandboxRequest { pod: some_pod("p") }),
        )]);
        assert_eq!(names(&f.select(batch)), ["RemovePodSandbox p"]);
    }
}
