//! # autobatch-driver
//!
//! The runtime-generic half of autobatch's async clients. Each connection's state — the
//! sans-IO [`Session`](autobatch_core::session::Session), the socket, the timer — is moved on
//! by whoever polls it: an add's own poll hands the add to the session, writes what it
//! transmits and, while it waits, reads the answers, so an add's path stays on its caller's
//! task; one task per connection (the *pump*) does what no caller would (timers, reconnects,
//! a worker's pulls, event streams, the end). Every protocol and batching decision stays in
//! `autobatch-core`.
//!
//! The async runtime is a type parameter behind the small [`Runtime`] trait (spawn, connect,
//! timer, clock), in the style of quinn. Use an adapter crate, which fixes it:
//! `autobatch-tokio`, `autobatch-smol` or `autobatch-async-std`. The feature `async-io` adds
//! `async_io_stream`, the socket the two adapters on async-io's reactor give the driver.
//!
//! * [`Client`]: one connection, or one per broker of a PostgreSQL-mode deployment
//!   ([`ClientOptions::broker`]); [`Client::queue`] gives a cheap [`Queue`] handle for adds
//!   (auto-batched into PUSHB) and lookups.
//! * [`Worker`]: pulls jobs and runs a processor on each, with completions batched into ACKB.
//! * TLS for every runtime from one place: with [`ClientOptions::tls`] the pump wraps the
//!   runtime's socket in rustls (futures-rustls, *ring*; no OpenSSL). Certificate problems fail
//!   `connect` at once with [`ConnectError::Tls`], whose [`TlsErrorKind`] says why.
//!
//! ```no_run
//! # async fn demo<R: autobatch_driver::Runtime + Default>() -> Result<(), Box<dyn std::error::Error>> {
//! use autobatch_driver::{Client, ClientOptions, JobOptions};
//!
//! let client = Client::<R>::connect(ClientOptions::from_addr("127.0.0.1:6789")?).await?;
//! let q = client.queue("emails");
//! let adds = (0..100).map(|i| q.add("welcome", &i, JobOptions::new()));
//! for id in futures_util::future::join_all(adds).await {
//!     id?;
//! }
//! client.close().await;
//! # Ok(()) }
//! ```
//!
//! Over TLS, trusting a private CA:
//!
//! ```no_run
//! # async fn demo<R: autobatch_driver::Runtime + Default>() -> Result<(), Box<dyn std::error::Error>> {
//! use autobatch_driver::{Client, ClientOptions, TlsOptions};
//!
//! let tls = TlsOptions::new().ca_file("/etc/bunqueue/ca.pem");
//! let client = Client::<R>::connect(ClientOptions::new("queue.internal", 6789).tls(tls)).await?;
//! # client.close().await; Ok(()) }
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod add;
mod add_ids;
#[cfg(feature = "async-io")]
pub mod async_io_stream;
mod call;
mod client;
mod cmd;
mod conn;
mod connect;
mod direct;
mod event_buffer;
mod events;
mod flow;
mod inbox;
mod job;
mod links;
mod millis;
mod options;
mod pump;
mod queue_api;
mod relay;
mod reply;
mod runtime;
mod seq_map;
mod settle;
mod stats;
#[cfg(test)]
mod test_wake;
mod tls;
mod uuid;
mod worker;
mod worker_events;

pub use client::{Client, Queue, ServerInfo};
pub use event_buffer::{EventsOptions, EventsStats};
pub use events::QueueEvents;
pub use flow::{FlowJobs, FlowNode, FlowProducer, FlowRead, FlowTree, MAX_FLOW_DEPTH};
pub use job::{ActiveJob, Pending, MAX_UNANSWERED_JOB_UPDATES};
pub use links::BrokerStatus;
pub use options::{ClientOptions, ConnectError, OptionsError, WorkerOptions, DEFAULT_PORT};
pub use runtime::{AsyncTimer, BoxFuture, Runtime};
pub use stats::ClientStats;
pub use tls::{TlsError, TlsErrorKind, TlsOptions, TlsRoots};
pub use worker::{CloseReport, JobError, JobOutput, Outcome, Raw, Worker};
pub use worker_events::{WorkerEvent, WORKER_EVENTS_BUFFER, WORKER_EVENTS_BUFFER_BYTES};

pub use autobatch_core::batch::{
    BatchConfig, BatchStats, ConfigError, FlushReason, OverflowPolicy,
};
pub use autobatch_core::ops;
pub use autobatch_core::session::{QueueEvent, ReconnectConfig, Replay, SessionStats};
pub use autobatch_core::wire::{
    Backoff, ChildFailure, ChildFailures, CommandKind, DataError, Debounce, Dedup, Job, JobCounts,
    JobOptions, JobState, ProtocolError, Repeat, Response, ValidationError, Value,
};
pub use autobatch_core::{Error, Fault, ServerError, ServerErrorKind};
