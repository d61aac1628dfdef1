//! A deliberately misbehaving NRI plugin, for fault-injection tests of NRI
//! runtimes.
//!
//! The plugin speaks the NRI wire protocol itself (multiplexer frames,
//! ttRPC messages, protobuf bodies), so it can break it at any level: stay
//! silent, hang in one handler, vanish in the middle of a call, write
//! garbage, oversized or truncated frames, abandon a split
//! synchronization, flood the runtime with unsolicited updates, register
//! twice under one identity, or answer with adjustments that conflict with
//! other plugins. See [`FaultKind`] for the list.
//!
//! The same code runs in-process ([`Misbehave::run`], for tests) and as the
//! `nri-misbehave` binary (against a runtime socket, or as a pre-launched
//! plugin on the socket handed over in `NRI_PLUGIN_SOCKET`).
//!
//! # Example
//!
//! ```no_run
//! use nri_misbehave::{Fault, FaultKind, Misbehave, Target};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), nri_misbehave::Error> {
//! // Register as 10-stuck and never answer CreateContainer.
//! let fault = Fault::new(FaultKind::Hang, "stuck", "10").at("CreateContainer");
//! let bad = Misbehave::new(fault);
//! let outcome = bad.run(Target::Socket("/var/run/nri/nri.sock".into())).await?;
//! println!("{outcome:?}; requests seen: {:?}", bad.probe().requests());
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]

mod fault;
mod wire;

pub use fault::{Fault, FaultKind, ParseFaultError, Trigger};
pub use wire::{Error, Misbehave, Outcome, Probe, Target};

/// The examples of the README, compiled as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
