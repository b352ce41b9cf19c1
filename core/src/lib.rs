//! # autobatch-core
//!
//! The sans-IO heart of autobatch: bunqueue's TCP wire protocol and transparent auto-batching,
//! written as pure, deterministic state machines. Nothing in this crate performs I/O, reads a
//! clock, spawns a thread or depends on an async runtime: every input carries `now`, every output
//! is drained with a `poll_*` call.
#![warn(missing_docs)]

pub mod batch;
pub mod wire;
