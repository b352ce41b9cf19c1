//! # autobatch-core
//!
//! The sans-IO heart of autobatch: bunqueue's TCP wire protocol and transparent auto-batching,
//! written as pure, deterministic state machines. Nothing in this crate performs I/O, reads a
//! clock, spawns a thread or depends on an async runtime: every input carries `now`, every output
//! is drained with a `poll_*` call. That is what lets the same code run under tokio, smol,
//! async-std or a loop of your own, and what makes the simulation tests and fuzzing possible.
//!
//! * [`wire`]: frames, MessagePack values with bunqueue's number rules (and serde for them),
//!   typed commands and replies; the broker's role is kept apart in [`wire::server`].
//! * [`batch`]: the generic batcher (idle flush, size, linger, completion; overflow policies).
//! * [`session`]: one client connection (auth, correlation, window, timeouts, reconnect), with a
//!   producer and a worker on top.
//! * [`Error`]: per-operation outcomes, split by who is at fault.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod batch;
mod error;
pub mod hash;
pub mod ops;
pub mod session;
pub mod wire;

pub use error::{Error, Fault, ServerError, ServerErrorKind};

/// The unit tests' clock, in one place. The core never reads a clock: its callers pass `now`
/// in. A unit test stands in for such a caller, and this is where it takes the origin of its
/// timeline (later instants are offsets of it, so no test depends on real time passing).
#[cfg(test)]
pub(crate) fn test_origin() -> std::time::Instant {
    std::time::Instant::now()
}
