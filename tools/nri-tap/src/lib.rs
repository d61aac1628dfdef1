//! `nri-tap`: a transparent wire tap between NRI plugins and a runtime.
//!
//! Every byte is forwarded unchanged, in both directions, as soon as it is
//! read; a copy is decoded ([`decode`]: mux frames, ttRPC messages) and
//! recorded ([`record`]: one JSON line per message, payloads decoded with
//! the nri-api types, responses matched to their requests with the time
//! they took). Decoding problems are recorded, never acted upon.
//!
//! Two ways to put it in the path ([`proxy`]):
//!
//! * socket proxy ([`proxy::serve`]): plugins connect to the tap's socket,
//!   the tap connects to the runtime's;
//! * wrapper ([`proxy::wrap`]): for plugins the runtime launches itself,
//!   the tap takes the socket the runtime hands over in
//!   `NRI_PLUGIN_SOCKET` and gives the plugin a new one.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use nri_tap::{proxy, record};
//!
//! let (recorder, writer) =
//!     record::Recorder::to_path("nri.jsonl".as_ref(), record::Options::default()).await?;
//! let listener = proxy::listen("/tmp/tap.sock".as_ref())?;
//! proxy::serve(listener, "/var/run/nri/nri.sock".into(), recorder).await;
//! writer.await??;
//! # Ok(()) }
//! ```

pub mod decode;
pub mod proxy;
pub mod record;
