//! Write [NRI](https://github.com/containerd/nri) plugins in Rust.
//!
//! A plugin is a type implementing [`Plugin`]: one optional `async fn` per NRI event or
//! request. A [`Stub`] connects it to the container runtime (containerd, CRI-O),
//! registers it, and calls its handlers. The wire protocol is the one of the Go
//! reference (`github.com/containerd/nri`, v0.12): plugins built with this crate work
//! with runtimes from NRI v0.7 (containerd 1.7) on.
//!
//! ```no_run
//! use nri_stub::api::{Container, ContainerAdjustment, PodSandbox};
//! use nri_stub::{Adjustment, Context, CreateContainerResult, Plugin, Stub};
//!
//! #[derive(Default)]
//! struct Annotator;
//!
//! #[nri_stub::plugin]
//! impl Plugin for Annotator {
//!     async fn create_container(&self, ctx: &Context, pod: &PodSandbox, ctr: &Container)
//!         -> nri_stub::HandlerResult<CreateContainerResult> {
//!         let mut adjust = ContainerAdjustment::default();
//!         // What the runtime applies (Docker's own NRI: no annotations).
//!         if ctx.runtime().capabilities().applies(Adjustment::Annotations) {
//!             adjust.annotations.insert("example.com/plugin".into(), ctx.name().into());
//!         }
//!         Ok(adjust.into())
//!     }
//! }
//!
//! #[tokio::main(flavor = "current_thread")]
//! async fn main() -> Result<(), nri_stub::Error> {
//!     Stub::builder(Annotator).name("annotator").index("10").build()?.run().await
//! }
//! ```
//!
//! # How a run goes
//!
//! 1. **Connect**: the connection given to the builder; else the socket a runtime hands
//!    a plugin it launched (`NRI_PLUGIN_SOCKET`); else the runtime's socket
//!    (`/var/run/nri/nri.sock` by default).
//! 2. **Register** as `<index>-<name>` (`NRI_PLUGIN_IDX` / `NRI_PLUGIN_NAME` of a
//!    runtime that launched the plugin, else builder options, else the program name
//!    `NN-name`).
//! 3. **Configure**: [`Plugin::configure`] picks the events to subscribe to (default:
//!    every event it has a handler for). The stub refuses subscriptions to events
//!    without a handler, and to events the runtime's NRI version cannot deliver (the
//!    version is taken from the runtime, or inferred from its name and version).
//! 4. **Synchronize**: [`Plugin::synchronize`] gets all existing pods and containers at
//!    once, even when the runtime sends them in parts.
//! 5. **Events** until the runtime sends Shutdown (`run` returns `Ok`) or goes away
//!    (`run` returns [`Error::Disconnected`]; run again to reconnect).
//!
//! Runtimes older than NRI v0.12 deliver some events through the generic `StateChange`
//! request; the stub dispatches those to the same handlers.
//!
//! # Features
//!
//! * `async` (default): the async [`Stub`], [`Plugin`] and its [`plugin`] attribute,
//!   [`Context`] and [`RuntimeHandle`], on tokio. Without it (`default-features =
//!   false`) the crate is the [`blocking`] stub alone and brings in no tokio, no ttRPC
//!   client or server and no multiplexer: a plugin on the blocking stub links nothing it
//!   does not use.
#![warn(missing_docs)]

extern crate self as nri_stub;

/// Items of the default feature `async`, each compiled only with it.
macro_rules! with_async {
    ($($item:item)*) => { $( #[cfg(feature = "async")] $item )* };
}

pub mod blocking;
mod capabilities;
mod connect;
mod context;
mod error;
mod events;
mod identity;
mod panic;
mod plugin;
mod version;

pub use capabilities::{Adjustment, RuntimeCapabilities};
pub use context::{
    ConfigureInfo, RuntimeInfo, DEFAULT_REGISTRATION_TIMEOUT, DEFAULT_REQUEST_TIMEOUT,
};
pub use error::{BoxError, Error, HandlerResult, Result};
pub use panic::HandlerPanic;
pub use plugin::CreateContainerResult;
pub use version::PLUGIN_NRI_VERSION;

/// The NRI protocol types (`nri-api`), e.g. [`api::Container`], [`api::ContainerAdjustment`].
pub use nri_api as api;
pub use nri_api::EventMask;
/// A ttRPC status and its code: a handler that fails with a boxed [`Status`] answers the
/// runtime with that code instead of `Unknown`.
///
/// ```
/// use nri_stub::{BoxError, Code, Status};
///
/// let err: BoxError = Box::new(Status::new(Code::Unavailable, "device busy"));
/// assert_eq!(err.to_string(), "rpc error: code = Unavailable desc = device busy");
/// ```
pub use nri_ttrpc::{Code, Status};

// The async stub.
with_async! {
    mod builder;
    mod reconnect;
    mod runtime_handle;
    mod server;
    mod session;
    mod stub;
    mod sync;
    mod trace;

    pub use builder::StubBuilder;
    pub use context::Context;
    pub use plugin::Plugin;
    pub use reconnect::Backoff;
    pub use runtime_handle::RuntimeHandle;
    pub use stub::Stub;

    /// W3C trace context as received with a request; see [`Context::trace_context`].
    pub use nri_ttrpc::TraceContext;

    /// Makes `async fn` in trait impls work; applied by [`plugin`] already. Use it directly
    /// only on a `Plugin` impl written without [`plugin`].
    pub use async_trait::async_trait;

    /// Attribute for `impl Plugin for T` blocks: subscribes the plugin to the events it has
    /// handlers for, and enables `async fn` handlers. See [`Plugin`].
    pub use nri_stub_macros::plugin;
}

/// Used by code that `#[nri_stub::plugin]` generates; not a public API.
#[doc(hidden)]
#[cfg(feature = "async")]
pub mod __private {
    pub use crate::events::mask_of;
    pub use nri_api::Event;

    /// Implemented by `#[nri_stub::plugin]` for the plugin type: a [`Plugin`](crate::Plugin)
    /// without the attribute gets an error that names the fix. (Implement it by hand
    /// only with a hand-written `implemented_events` and `#[nri_stub::async_trait]`.)
    #[diagnostic::on_unimplemented(
        message = "`{Self}` implements `nri_stub::Plugin` without `#[nri_stub::plugin]`",
        label = "put `#[nri_stub::plugin]` on the `impl Plugin for {Self}` block",
        note = "the attribute makes the `async fn` handlers match the trait (without it \
                rustc also reports E0195, lifetime parameters do not match) and subscribes \
                the plugin to the events it has handlers for"
    )]
    pub trait PluginAttribute {}
}
