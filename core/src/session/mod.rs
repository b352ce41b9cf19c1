//! One client connection as a deterministic state machine: auth, reqId correlation, the
//! pipelining window, timeouts, pings, reconnect backoff; a producer (adds batched into PUSHB)
//! and a worker (PULLB, ACKB, FAIL) on top.
//!
//! # Contract
//!
//! Inputs are method calls that carry `now`; outputs are drained with `poll_*`. After **any**
//! input — [`Session::add`], [`Session::add_bulk`], [`Session::request`],
//! [`Session::request_raw`], [`Session::cancel`],
//! [`Session::complete_job`], [`Session::fail_job`], [`Session::handle_input`],
//! [`Session::handle_connected`], [`Session::handle_connect_failed`],
//! [`Session::handle_disconnected`], [`Session::handle_timeout`], [`Session::close`] — the driver
//! calls, in this order:
//!
//! 1. [`Session::poll_transmit`] and writes what it appended to the socket (it is also what
//!    moves due batches into the send queue, so call it even while disconnected);
//! 2. [`Session::poll_event`] until `None`, acting on each [`Event`];
//! 3. [`Session::poll_timeout`], and arms its timer for that instant.
//!
//! Several inputs may be fed before one round of polls: adds made in one go while idle then
//! leave in one batch.
//!
//! # Guarantees
//!
//! * Every operation that returned an [`OpId`] gets exactly one [`Event::Done`].
//! * An add while nothing is in flight goes out in the next `poll_transmit`, with no timer.
//! * No PUSHB holds more than `max_batch` jobs; per queue, at most `max_in_flight` batches are out.
//! * At most `max_in_flight_commands` commands are written and unanswered. Once that many are,
//!   no more are written until half of them are answered or `full_window_wait` has passed.
//! * A request that cannot be answered in `command_timeout` fails with [`Error::Timeout`](crate::Error::Timeout).
//! * On a lost connection, lookups are re-sent on the next connection, and adds whose jobs
//!   all have a custom id are looked up by it there (`GetJob`): a job found answers the add, and
//!   the add is written again only if no job has the id on the server that took it (its
//!   uptime, from `Stats`, says it has not restarted since). An add whose job is removed when
//!   it finishes is not replayed: nothing would tell that it ran. Everything else that was
//!   written — other adds, ACK/ACKB/FAIL, pulls, any
//!   [`Command::Other`](crate::wire::Command::Other) — fails with
//!   [`Error::ConnectionLost`](crate::Error::ConnectionLost) `{ maybe_applied: true }`: it may
//!   or may not have been applied, and is never written twice. Which is which is decided by
//!   [`Command::replay_safety`](crate::wire::Command::replay_safety), or by the caller of
//!   [`Session::request_raw`]. A request not yet written is sent on the next connection.
//! * A PUSHB the server refuses for one job (`jobs[i]: …`, where it inserts nothing) fails that
//!   job alone and sends the others again.
//! * [`Session::close`] resolves everything before [`Event::Closed`].
//!
//! # The canonical run loop
//!
//! A blocking driver over `std::net` (see `core/examples/blocking.rs` for the full one):
//!
//! ```no_run
//! use std::io::{Read, Write};
//! use std::net::TcpStream;
//! use std::time::Instant;
//! use autobatch_core::session::{Event, Session, SessionConfig};
//! use autobatch_core::wire::{JobSpec, Value};
//!
//! let mut session = Session::new(SessionConfig::default(), Instant::now()).unwrap();
//! let mut socket: Option<TcpStream> = None;
//! let mut out = Vec::new();
//! let op = session.add(Instant::now(), "emails", JobSpec::new("welcome", Value::from("a@b"))).unwrap();
//! loop {
//!     let now = Instant::now();
//!     out.clear();
//!     if session.poll_transmit(now, &mut out) {
//!         socket.as_mut().unwrap().write_all(&out).unwrap();
//!     }
//!     let mut fed_input = false;
//!     while let Some(event) = session.poll_event() {
//!         match event {
//!             Event::Connect => {
//!                 fed_input = true;
//!                 match TcpStream::connect("127.0.0.1:6789") {
//!                     Ok(s) => { socket = Some(s); session.handle_connected(Instant::now()); }
//!                     Err(_) => session.handle_connect_failed(Instant::now()),
//!                 }
//!             }
//!             Event::Disconnect => socket = None,
//!             Event::Done { op: done, result } if done == op => {
//!                 println!("added: {result:?}");
//!                 session.close(Instant::now());
//!                 fed_input = true;
//!             }
//!             Event::Closed => return,
//!             _ => {}
//!         }
//!     }
//!     if fed_input {
//!         continue; // a connect is an input too: transmit before blocking
//!     }
//!     // Wait for bytes until poll_timeout() (a real loop sets a read timeout from it).
//!     if let Some(s) = socket.as_mut() {
//!         let mut buf = [0u8; 4096];
//!         match s.read(&mut buf) {
//!             Ok(0) | Err(_) => { socket = None; session.handle_disconnected(Instant::now()); }
//!             Ok(n) => session.handle_input(Instant::now(), &buf[..n]),
//!         }
//!     }
//!     session.handle_timeout(Instant::now());
//! }
//! ```

//!
//! # Module layout
//!
//! `machine` owns [`Session`] and drives the parts below it; none of them knows the machine.
//! `producer` ([`Session::add`]'s batchers) and `worker` (pulls, ACKs, FAILs) own their state,
//! return the requests they want sent, and take back the replies to them. `request` types every
//! request by kind, each carrying what its reply needs; `queue` keeps the send queue with its
//! deadlines indexed; `window` decides when a full pipelining window is refilled; `replay` decides, once, which commands may be written again after a lost
//! connection ([`Replay`]), and `check` looks a lost add up before it is written again.

mod check;
mod config;
mod event;
mod events;
mod failure;
mod machine;
mod producer;
mod queue;
mod replay;
mod request;
mod rng;
mod stats;
mod window;
mod worker;

pub use config::{ConfigError, ReconnectConfig, SessionConfig, WorkerConfig};
pub use event::{Event, OpId};
pub use events::{event_frame, QueueEvent, SubscribeEvents, UnsubscribeEvents};
pub use failure::{JobFailure, Release};
pub use machine::{PendingAdds, Session};
pub use replay::Replay;
pub use stats::SessionStats;
pub use worker::{MAX_STACK_LINES, MAX_STACK_LINE_BYTES};
