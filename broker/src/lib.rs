//! # autobatch-broker
//!
//! A small broker that speaks bunqueue 2.9.5's TCP protocol, so bunqueue's own clients (and
//! autobatch's) can run against it: for demos, tests, benchmarks and single-node use.
//!
//! * Framing, pipelining and errors as bunqueue: replies by `reqId` in completion order, at
//!   most 50 requests handled at once per connection, a 64 MiB frame cap, long-poll pulls that
//!   never block other requests.
//! * Limits a hostile client cannot get around (see [`BrokerConfig`]): a small frame cap
//!   before Auth, checked from the length header; a partial-frame deadline counted from the
//!   frame's first byte; one budget for the bytes of incomplete frames across all connections;
//!   a connection cap. Large frames are decoded off the runtime's workers.
//! * The queue state lives in memory ([`queue`](crate) internals); a [`store::Store`] is the
//!   durable log behind it: nothing ([`store::MemoryStore`]) or SQLite
//!   ([`store::SqliteStore`]: WAL, `synchronous=NORMAL`, group commit; `durable` pushes commit
//!   before their reply, others just after).
//! * A running job's rules as bunqueue's: its lock lasts the pull's `lockTtl` (a heartbeat
//!   renews it by that much), an expired lock or a job silent past its queue's stall settings
//!   (SetStallConfig) is requeued or, past its attempts or `maxStalls`, failed with bunqueue's
//!   `stalled`/`failed` events; a job's `timeout` fails it, its `ttl` drops it unrun, a group's
//!   `maxSize` refuses adds. Failed jobs are the dead-letter queue (Dlq, RetryDlq, PurgeDlq,
//!   …), bounded at bunqueue's 10,000 entries per queue.
//! * A queue's rate limit (RateLimit, its `ttl` form, RateLimitClear) and global concurrency
//!   limit (SetConcurrency, ClearConcurrency) hold pulls back as bunqueue's do: a token bucket
//!   and a slot count, asked only for a job about to be handed out; a pull that meets one
//!   returns what it has, a long-poll waits on. GetQueueLimits reads them (`isMaxed`,
//!   `getRateLimitTtl`), and a group's counts and controls are served (pulls pass over the
//!   jobs of a paused or held-back group).
//! * Flows as bunqueue's (PUSHF checked whole, then added at once): a job with `dependsOn`
//!   waits in `waiting-children` until they complete; a child failing for good applies its
//!   policy to its parent (fail it, release it, drop or ignore the dependency); the parent
//!   reads its children's values and failures; WaitJob is held like a long-poll. In SQLite
//!   mode a job's links survive a restart: a job that waited for its children waits again.
//! * Job schedulers as bunqueue's (Cron, CronGet, CronList, CronDelete): every N ms or on a
//!   cron pattern read with bunqueue's rules (its seconds field, Bun 1.4's calendar syntax,
//!   error texts and next-run rule) in UTC or an IANA `timezone`; fired on their own timer
//!   with bunqueue's limit, overlap, `skipIfNoWorker` and `preventOverlap` rules. Kept across
//!   a restart in SQLite mode.
//! * Jobs read back as bunqueue 2.9.5's whole record (GetJob, GetJobs, PULL, PULLB, PUSHF,
//!   Dlq): every add option as sent ([`store::AddOptions`], kept by SQLite too), the timeline,
//!   FAIL's stack capped at `stackTraceLimit`, a DLQ entry's attempts; jobs sent in the legacy
//!   `data.name` envelope are unpacked on every add path.
//! * TLS on the port when [`BrokerConfig::tls`] is set ([`BrokerTls`]: rustls with *ring*,
//!   through tokio-rustls), as bunqueue serves it with `TLS_CERT_FILE` / `TLS_KEY_FILE`.
//!
//! ```
//! use std::io::{Read, Write};
//! use autobatch_broker::{BrokerConfig, EmbeddedBroker};
//! use autobatch_core::wire::{write_frame, Command, FrameDecoder, Value};
//!
//! let broker = EmbeddedBroker::start(BrokerConfig::default()).unwrap();
//! let mut s = std::net::TcpStream::connect(broker.addr()).unwrap();
//! let mut out = Vec::new();
//! write_frame(&mut out, |b| Command::Ping.encode(Some(&Value::from("1")), b)).unwrap();
//! s.write_all(&out).unwrap();
//! let mut frames = FrameDecoder::new();
//! let mut buf = [0u8; 256];
//! let reply = loop {
//!     let n = s.read(&mut buf).unwrap();
//!     frames.extend(&buf[..n]);
//!     if let Some(f) = frames.next_frame().unwrap() { break Value::decode(&f).unwrap(); }
//! };
//! assert_eq!(reply.get("ok"), Some(&Value::Bool(true)));
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod auth;
mod clock;
mod config;
mod conn_id;
mod connection;
mod context;
mod dispatch;
mod embedded;
mod envelope;
mod error;
mod events;
mod framing;
mod ops;
mod queue;
mod routes;
mod server;
pub mod store;
mod tls;

pub use config::BrokerConfig;
pub use embedded::EmbeddedBroker;
pub use server::{Broker, ShutdownHandle};
pub use tls::BrokerTls;
