//! # autobatch-smol
//!
//! A [bunqueue](https://bunqueue.dev) 2.9.5 client for [smol] with transparent auto-batching:
//! concurrent `add()` calls leave together as one PUSHB, sequential ones go out at once and
//! pay nothing. The protocol and batching live in `autobatch-core`, the pump in
//! `autobatch-driver`; this crate only fixes the runtime.
//!
//! Connection tasks run on smol's global executor (`smol::spawn`), so any thread may create
//! and use clients; `smol::block_on` is enough to drive the caller.
//!
//! ```no_run
//! use autobatch_smol::{Client, ClientOptions, JobOptions};
//!
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     smol::block_on(async {
//!         let client = Client::connect(ClientOptions::new("127.0.0.1", 6789)).await?;
//!         let id = client.queue("emails").add("welcome", &"a@b.c", JobOptions::new()).await?;
//!         println!("added {id}");
//!         client.close().await;
//!         Ok(())
//!     })
//! }
//! ```
//!
//! TLS (rustls, no OpenSSL) is one option away; the driver wraps this runtime's socket:
//!
//! ```no_run
//! # async fn demo() -> Result<(), autobatch_smol::ConnectError> {
//! use autobatch_smol::{Client, ClientOptions, TlsOptions};
//! let opts = ClientOptions::new("queue.example.com", 6789).tls(TlsOptions::new());
//! let client = Client::connect(opts).await?;
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use autobatch_driver::{AsyncTimer, BoxFuture, Runtime};

pub use autobatch_driver::{
    ops, ActiveJob, Backoff, BatchConfig, BatchStats, BrokerStatus, ClientOptions, ClientStats,
    CloseReport, ConnectError, Debounce, Dedup, Error, EventsOptions, EventsStats, Fault, FlowJobs,
    FlowNode, FlowRead, FlowTree, FlushReason, Job, JobCounts, JobError, JobOptions, JobOutput,
    JobState, OptionsError, Outcome, OverflowPolicy, Pending, QueueEvent, Raw, ReconnectConfig,
    Repeat, Replay, Response, ServerError, ServerErrorKind, ServerInfo, SessionStats, TlsError,
    TlsErrorKind, TlsOptions, TlsRoots, ValidationError, Value, WorkerEvent, WorkerOptions,
    DEFAULT_PORT,
};

/// A connection to a bunqueue server, on smol. See [`autobatch_driver::Client`].
///
/// ```no_run
/// # async fn demo() -> Result<(), autobatch_smol::ConnectError> {
/// let client = autobatch_smol::Client::connect(autobatch_smol::ClientOptions::default()).await?;
/// # Ok(()) }
/// ```
pub type Client = autobatch_driver::Client<SmolRuntime>;

/// A handle on one queue, on smol. See [`autobatch_driver::Queue`].
///
/// ```no_run
/// # async fn demo(client: autobatch_smol::Client) {
/// let q: autobatch_smol::Queue = client.queue("emails");
/// # }
/// ```
pub type Queue = autobatch_driver::Queue<SmolRuntime>;

/// A worker, on smol. See [`autobatch_driver::Worker`].
///
/// ```no_run
/// # async fn demo() -> Result<(), autobatch_smol::ConnectError> {
/// use autobatch_smol::{ClientOptions, Worker, WorkerOptions};
/// let w = Worker::start(ClientOptions::default(), WorkerOptions::new("q"),
///     |_job: autobatch_smol::Job| async { Ok::<(), String>(()) }).await?;
/// w.close().await;
/// # Ok(()) }
/// ```
pub type Worker = autobatch_driver::Worker<SmolRuntime>;

/// A queue's event stream, on this runtime. See [`autobatch_driver::QueueEvents`].
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use futures_util::StreamExt;
/// let mut events = autobatch_smol::QueueEvents::connect(autobatch_smol::ClientOptions::default(), "emails").await?;
/// while let Some(event) = events.next().await {
///     println!("{event:?}");
/// }
/// # Ok(()) }
/// ```
pub type QueueEvents = autobatch_driver::QueueEvents<SmolRuntime>;

/// Adds and reads flows, on this runtime. See [`autobatch_driver::FlowProducer`].
///
/// ```no_run
/// # async fn demo(client: autobatch_smol::Client) -> Result<(), autobatch_smol::Error> {
/// use autobatch_smol::{FlowNode, FlowProducer};
/// let flows = FlowProducer::new(&client);
/// let data = std::collections::BTreeMap::from([("month", 5)]);
/// let tree = flows.add(FlowNode::new("reports", "merge", &data)?).await?;
/// # Ok(()) }
/// ```
pub type FlowProducer = autobatch_driver::FlowProducer<SmolRuntime>;

/// The smol [`Runtime`]: tasks on smol's global executor, sockets and timers from async-io.
///
/// ```
/// let rt = autobatch_smol::SmolRuntime;
/// # let _ = rt;
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct SmolRuntime;

impl Runtime for SmolRuntime {
    type Socket = smol::net::TcpStream;

    fn spawn(&self, task: BoxFuture<()>) {
        smol::spawn(task).detach();
    }

    fn connect(&self, host: &str, port: u16) -> BoxFuture<io::Result<smol::net::TcpStream>> {
        let host = host.to_owned();
        Box::pin(async move {
            let stream = smol::net::TcpStream::connect((host.as_str(), port)).await?;
            stream.set_nodelay(true)?;
            Ok(stream)
        })
    }

    fn new_timer(&self, deadline: Instant) -> Pin<Box<dyn AsyncTimer>> {
        Box::pin(SmolTimer(smol::Timer::at(deadline)))
    }
}

#[derive(Debug)]
struct SmolTimer(smol::Timer);

impl AsyncTimer for SmolTimer {
    fn reset(mut self: Pin<&mut Self>, deadline: Instant) {
        self.0.set_at(deadline);
    }

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        Pin::new(&mut self.0).poll(cx).map(|_| ())
    }
}
