//! Shared harness for autobatch integration tests and benchmarks against **real peers**.
//!
//! * [`BunqueueServer`]: the real bunqueue 2.9.5 server (run with bun 1.4.5) as a child
//!   process on free loopback ports, memory, SQLite or auth mode, with stop / kill /
//!   suspend / resume / restart.
//! * [`CountingProxy`]: a loopback TCP proxy that forwards bytes unchanged and counts frames
//!   per direction, client frames per `cmd`, and the sizes of `PUSHB` / `ACKB` batches.
//! * [`TsPeer`]: runs the TypeScript scripts in `tests/peers` (`produce.ts`, `consume.ts`,
//!   `bench.ts`) with bunqueue's own client, and parses their JSON output.
//! * [`RawClient`]: a blocking one-request-at-a-time client over `std::net` with
//!   `autobatch_core::wire`, to check what landed on a server independently of the client
//!   under test.
//! * [`Target`]: the server a scenario runs against, as a parameter (plain or TLS).
//! * [`TestPki`]: a CA and a server certificate made at test time (rcgen), for TLS tests.
//! * [`Postgres`] and [`Fleet`]: a throwaway PostgreSQL server and several bunqueue brokers on
//!   it (bunqueue's multi-broker mode), each broker killable, freezable and restartable.
//! * [`compare`]: what the tests comparing two servers' answers share (times as classes).
//! * [`layers`]: import cycles between the files of a crate, found by reading its source.
//! * [`msgpack`]: a tiny hand-written MessagePack writer/scanner, independent of
//!   `autobatch-core` (which is what the tests check).
//!
//! bun and bunqueue are installed from the npm registry by `scripts/bunqueue.sh install` into
//! `<workspace root>/.bunqueue` (or `$AUTOBATCH_BUNQUEUE_DIR`). Nothing here skips silently when
//! they are missing: starting a server or a peer fails with the command to run.
//!
//! ```no_run
//! use autobatch_tests::{BunqueueServer, CountingProxy, ServerOptions, TsPeer};
//!
//! let server = BunqueueServer::start(ServerOptions::default()).unwrap();
//! let proxy = CountingProxy::start(server.addr());
//! let out = TsPeer::new("produce.ts")
//!     .target(proxy.addr())
//!     .options(&serde_json::json!({"queue": "q", "steps": [{"kind": "waves", "n": 100, "wave": 10}]}))
//!     .run_json()
//!     .unwrap();
//! assert_eq!(out["ids"].as_array().unwrap().len(), 100);
//! assert_eq!(proxy.snapshot().pushb_total(), 100);
//! ```

#![warn(missing_docs)]

pub mod compare;
mod exit_cleanup;
pub mod fleet;
pub mod install;
pub mod layers;
pub mod msgpack;
pub mod peer;
pub mod postgres;
pub mod proxy;
pub mod raw;
pub mod server;
pub mod sim;
mod spawn;
pub mod target;
pub mod tls;

pub use fleet::{Fleet, FleetOptions};
pub use install::{bunqueue_dir, workspace_root, BunqueueInstall};
pub use peer::{PeerOutput, PeerProcess, TsPeer};
pub use postgres::{Postgres, PostgresOptions};
pub use proxy::{CountingProxy, FrameCounts};
pub use raw::RawClient;
pub use server::{ping_addr, BunqueueServer, ServerOptions, ServerTls};
pub use target::{OwnedServer, Target};
pub use tls::TestPki;
