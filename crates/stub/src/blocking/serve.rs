//! The Plugin service of a blocking run: each request decoded, handed to the
//! plugin's handler and its reply encoded, on the calling thread.

use nri_api::service::{plugin as method, PLUGIN_SERVICE};
use nri_api::*;
use nri_ttrpc::frame::oversize_message;
use nri_ttrpc::proto::{Request, Response};
use nri_ttrpc::{Code, Status, MAX_MESSAGE_LEN};
use prost::Message;

use super::Plugin;
use crate::context::runtime_info;
use crate::error::handler_status;
use crate::events::subscription;
use crate::identity::Identity;
use crate::panic::catching_blocking;
use crate::{ConfigureInfo, Error, HandlerPanic, HandlerResult};

/// What the run does after a reply went out.
pub(crate) enum Control {
    /// Serve the next request.
    Continue,
    /// The runtime asked the plugin to shut down.
    Shutdown,
    /// Configuration failed: the run ends with this error.
    Failed(Error),
}

/// The plugin-side state of one connection.
pub(crate) struct Session<'a, P> {
    plugin: &'a mut P,
    identity: &'a Identity,
    /// `None` until the first Configure succeeded.
    subscribed: Option<EventMask>,
    /// The pods and containers of a split Synchronize received so far.
    pending_sync: Option<(Vec<PodSandbox>, Vec<Container>)>,
    control: Control,
}

type Handled = Result<Vec<u8>, Status>;

/// Every request that carries a pod and, for container events, a container
/// and new resources: with the same fields at the same numbers in all of
/// them, one decoder serves them all instead of one per request type (26 KB
/// less code in the minimal plugin).
#[derive(Message)]
struct PodEvent {
    #[prost(message, optional, tag = "1")]
    pod: Option<PodSandbox>,
    #[prost(message, optional, tag = "2")]
    container: Option<Container>,
    /// UpdateContainer's new resources.
    #[prost(message, optional, tag = "3")]
    linux_resources: Option<LinuxResources>,
}

/// Why a request could not be decoded, in the words of Go's ttRPC.
fn undecodable(err: prost::DecodeError) -> Status {
    Status::invalid_argument(format!("unmarshal request error: {err}"))
}

/// Decodes a request, or says why it could not be.
#[inline(never)]
fn decode<M: Message + Default>(payload: &[u8]) -> Result<M, Status> {
    M::decode(payload).map_err(undecodable)
}

/// Decodes a request that carries a pod and a container, and lends them to
/// `handle` (with UpdateContainer's new resources); an empty pod or
/// container stands in for one the runtime left out. They are decoded in
/// place on the heap: they are large, and the handlers only borrow them.
#[inline(never)]
fn with_pod_event<R>(
    payload: &[u8],
    handle: impl FnOnce(&PodSandbox, &Container, Option<&LinuxResources>) -> R,
) -> Result<R, Status> {
    let mut req = Box::<PodEvent>::default();
    req.pod = Some(PodSandbox::default());
    req.container = Some(Container::default());
    // Merged from `&mut &[u8]`, as `Message::decode` merges: the decoders
    // of the messages inside are then the ones the other requests use, not
    // a second copy of them for another buffer type.
    let mut buf = payload;
    req.merge(&mut buf).map_err(undecodable)?;
    let PodEvent {
        pod: Some(pod),
        container: Some(ctr),
        linux_resources,
    } = &*req
    else {
        // Merging only fills in what the runtime sent: both stay present.
        return Err(Status::internal(
            "decoded request lost its pod or container",
        ));
    };
    Ok(handle(pod, ctr, linux_resources.as_ref()))
}

/// The reply of a handler that returns nothing: an empty message.
fn done(result: HandlerResult<()>) -> Handled {
    result.map(|()| Vec::new()).map_err(handler_status)
}

/// The reply of a handler that returns updates of containers (UpdateContainer,
/// StopContainer: the same first field in both responses).
fn updates(result: HandlerResult<Vec<ContainerUpdate>>) -> Handled {
    let update = result.map_err(handler_status)?;
    Ok(UpdateContainerResponse {
        update,
        evict: Vec::new(),
    }
    .encode_to_vec())
}

/// The event of a Plugin-service method whose handler only says whether it
/// succeeded.
fn notification(name: &str) -> Option<Event> {
    Some(match name {
        method::RUN_POD_SANDBOX => Event::RunPodSandbox,
        method::POST_UPDATE_POD_SANDBOX => Event::PostUpdatePodSandbox,
        method::STOP_POD_SANDBOX => Event::StopPodSandbox,
        method::REMOVE_POD_SANDBOX => Event::RemovePodSandbox,
        method::POST_CREATE_CONTAINER => Event::PostCreateContainer,
        method::START_CONTAINER => Event::StartContainer,
        method::POST_START_CONTAINER => Event::PostStartContainer,
        method::POST_UPDATE_CONTAINER => Event::PostUpdateContainer,
        method::REMOVE_CONTAINER => Event::RemoveContainer,
        _ => return None,
    })
}

/// The events of [`notification`], the ones the generic StateChange of
/// older runtimes delivers.
const NOTIFICATIONS: EventMask = EventMask::from_events(&[
    Event::RunPodSandbox,
    Event::PostUpdatePodSandbox,
    Event::StopPodSandbox,
    Event::RemovePodSandbox,
    Event::PostCreateContainer,
    Event::StartContainer,
    Event::PostStartContainer,
    Event::PostUpdateContainer,
    Event::RemoveContainer,
]);

/// Calls the handler of a notification event.
fn notify<P: Plugin>(
    p: &mut P,
    event: Event,
    pod: &PodSandbox,
    ctr: &Container,
) -> HandlerResult<()> {
    match event {
        Event::RunPodSandbox => p.run_pod_sandbox(pod),
        Event::PostUpdatePodSandbox => p.post_update_pod_sandbox(pod),
        Event::StopPodSandbox => p.stop_pod_sandbox(pod),
        Event::RemovePodSandbox => p.remove_pod_sandbox(pod),
        Event::PostCreateContainer => p.post_create_container(pod, ctr),
        Event::StartContainer => p.start_container(pod, ctr),
        Event::PostStartContainer => p.post_start_container(pod, ctr),
        Event::PostUpdateContainer => p.post_update_container(pod, ctr),
        Event::RemoveContainer => p.remove_container(pod, ctr),
        _ => Ok(()),
    }
}

impl<'a, P: Plugin> Session<'a, P> {
    pub(crate) fn new(plugin: &'a mut P, identity: &'a Identity) -> Self {
        Session {
            plugin,
            identity,
            subscribed: None,
            pending_sync: None,
            control: Control::Continue,
        }
    }

    /// Answers one request envelope: the encoded reply envelope, and what
    /// the run does next.
    pub(crate) fn serve(&mut self, envelope: &[u8]) -> (Vec<u8>, Control) {
        let reply = match Request::decode(envelope) {
            Err(err) => Err(undecodable(err)),
            Ok(req) if req.service != PLUGIN_SERVICE => {
                Err(Status::unimplemented(format!("service {}", req.service)))
            }
            Ok(req) => match catching_blocking(|| self.dispatch(&req.method, &req.payload)) {
                Ok(reply) => reply,
                Err(caught) => {
                    let panic = HandlerPanic {
                        plugin: self.identity.full_name(),
                        method: req.method.clone(),
                        message: caught.message,
                        location: caught.location,
                    };
                    let status = Status::internal(panic.to_string());
                    if self.subscribed.is_none() {
                        self.control = Control::Failed(Error::HandlerPanicked(panic));
                    }
                    Err(status)
                }
            },
        };
        let response = match reply {
            Ok(payload) if payload.len() > MAX_MESSAGE_LEN => Response {
                status: Some(
                    Status::new(
                        Code::ResourceExhausted,
                        oversize_message(payload.len(), MAX_MESSAGE_LEN),
                    )
                    .into(),
                ),
                payload: Vec::new(),
            },
            Ok(payload) => Response {
                status: None,
                payload,
            },
            Err(status) => Response {
                status: Some(status.into()),
                payload: Vec::new(),
            },
        };
        let control = std::mem::replace(&mut self.control, Control::Continue);
        (response.encode_to_vec(), control)
    }

    fn dispatch(&mut self, name: &str, payload: &[u8]) -> Handled {
        if name == method::CONFIGURE {
            let req = decode(payload)?;
            return self.configure(req).map(|resp| resp.encode_to_vec());
        }
        if name == method::SHUTDOWN {
            self.plugin.shutdown();
            self.control = Control::Shutdown;
            return Ok(Vec::new());
        }
        let Some(subscribed) = self.subscribed else {
            return Err(Status::new(
                Code::FailedPrecondition,
                "plugin has not been configured",
            ));
        };
        let p = &mut *self.plugin;
        // Each event's arm is guarded by the plugin's constant `EVENTS`, so
        // the arms of the events it does not handle, with the decoders and
        // encoders only they use, are left out of it.
        // A plugin that handles no notification event carries none of their code.
        let notification = if (P::EVENTS & NOTIFICATIONS).is_empty() {
            None
        } else {
            notification(name).filter(|event| P::EVENTS.is_set(*event))
        };
        if let Some(event) = notification {
            return done(with_pod_event(payload, |pod, ctr, _| {
                notify(p, event, pod, ctr)
            })?);
        }
        match name {
            method::SYNCHRONIZE => synchronize(p, &mut self.pending_sync, decode(payload)?)
                .map(|resp| resp.encode_to_vec()),
            method::CREATE_CONTAINER if P::EVENTS.is_set(Event::CreateContainer) => {
                let result = with_pod_event(payload, |pod, ctr, _| p.create_container(pod, ctr))?
                    .map_err(handler_status)?;
                Ok(CreateContainerResponse {
                    adjust: result.adjust,
                    update: result.updates,
                    evict: result.evictions,
                }
                .encode_to_vec())
            }
            method::UPDATE_CONTAINER if P::EVENTS.is_set(Event::UpdateContainer) => {
                updates(with_pod_event(payload, |pod, ctr, resources| {
                    p.update_container(pod, ctr, resources)
                })?)
            }
            method::STOP_CONTAINER if P::EVENTS.is_set(Event::StopContainer) => {
                updates(with_pod_event(payload, |pod, ctr, _| {
                    p.stop_container(pod, ctr)
                })?)
            }
            method::UPDATE_POD_SANDBOX if P::EVENTS.is_set(Event::UpdatePodSandbox) => {
                let req: UpdatePodSandboxRequest = decode(payload)?;
                done(p.update_pod_sandbox(
                    &req.pod.unwrap_or_default(),
                    req.overhead_linux_resources.as_ref(),
                    req.linux_resources.as_ref(),
                ))
            }
            method::VALIDATE_CONTAINER_ADJUSTMENT
                if P::EVENTS.is_set(Event::ValidateContainerAdjustment) =>
            {
                let req = decode(payload)?;
                let resp = match p.validate_container_adjustment(&req) {
                    Ok(()) => ValidateContainerAdjustmentResponse::default(),
                    Err(err) => ValidateContainerAdjustmentResponse {
                        reject: true,
                        reason: err.to_string(),
                    },
                };
                Ok(resp.encode_to_vec())
            }
            method::STATE_CHANGE if !(P::EVENTS & NOTIFICATIONS).is_empty() => {
                // The generic notification of runtimes before NRI v0.12, for
                // the events the plugin is subscribed to.
                let evt: StateChangeEvent = decode(payload)?;
                match Event::try_from(evt.event) {
                    Ok(event) if subscribed.is_set(event) => done(notify(
                        p,
                        event,
                        &evt.pod.unwrap_or_default(),
                        &evt.container.unwrap_or_default(),
                    )),
                    _ => Ok(Vec::new()),
                }
            }
            other => Err(Status::unimplemented(format!("method {other}"))),
        }
    }

    fn configure(&mut self, mut req: ConfigureRequest) -> Result<ConfigureResponse, Status> {
        let config = std::mem::take(&mut req.config);
        let info = ConfigureInfo {
            config,
            runtime: runtime_info(req),
        };
        let outcome = match self.plugin.configure(&info) {
            Ok(requested) => subscription(requested, P::EVENTS, &info.runtime),
            Err(err) => Err(Error::Configure(err)),
        };
        match outcome {
            Ok(events) => {
                self.subscribed = Some(events);
                Ok(ConfigureResponse {
                    events: events.raw(),
                    ..Default::default()
                })
            }
            Err(err) => {
                let status = Status::unknown(match &err {
                    Error::Configure(cause) => cause.to_string(),
                    other => other.to_string(),
                });
                // A later Configure of a configured plugin does not end the run.
                if self.subscribed.is_none() {
                    self.control = Control::Failed(err);
                }
                Err(status)
            }
        }
    }
}

/// One Synchronize message: a part kept until the last, or the last, which
/// goes to the plugin with all parts before it.
fn synchronize<P: Plugin>(
    plugin: &mut P,
    pending: &mut Option<(Vec<PodSandbox>, Vec<Container>)>,
    req: SynchronizeRequest,
) -> Result<SynchronizeResponse, Status> {
    let (mut pods, mut containers) = pending.take().unwrap_or_default();
    pods.extend(req.pods);
    containers.extend(req.containers);
    if req.more {
        *pending = Some((pods, containers));
        return Ok(SynchronizeResponse {
            update: Vec::new(),
            more: true,
        });
    }
    let update = plugin
        .synchronize(&pods, &containers)
        .map_err(handler_status)?;
    Ok(SynchronizeResponse {
        update,
        more: false,
    })
}
