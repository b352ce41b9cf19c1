//! # autobatch-smol
//!
//! A [bunqueue](https://bunqueue.dev) 2.9.5 client for [smol] with transparent auto-batching:
//! concurrent `add()` calls leave together as one PUSHB, sequential ones go out at once and
//! pay nothing. The protocol and batching live in `autobatch-core`, the pump in
//! `autobatch-driver`; this crate only fixes the runtime.
//!
//! An add's own poll writes it and reads its answer, so `smol::block_on` is all a caller
//! needs. By default each connection's task (timers, reconnects, a worker's processors) runs
//! on smol's global executor (`smol::spawn`), off the adds' path, and any thread may create
//! and use clients. [`SmolRuntime::with_executor`] puts those tasks on an [`Executor`] you
//! run instead.
//!
//! ```no_run
//! use std::sync::Arc;
//! use autobatch_smol::{Client, ClientOptions, JobOptions, SmolRuntime};
//!
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let ex = Arc::new(smol::Executor::new());
//!     // The connection's task is a task of `ex`, so it runs while this thread runs `ex`.
//!     smol::block_on(ex.run(async {
//!         let rt = SmolRuntime::with_executor(ex.clone());
//!         let client = Client::connect_with(rt, ClientOptions::new("127.0.0.1", 6789)).await?;
//!         let q = client.queue("emails");
//!         let adds = (0..100).map(|i| q.add("welcome", &i, JobOptions::new()));
//!         for id in futures_util::future::join_all(adds).await {
//!             id?;
//!         }
//!         client.close().await;
//!         Ok(())
//!     }))
//! }
//! ```
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
//!
//! Everything `autobatch-driver` exports is exported here too (options, errors, job and event
//! types, [`ops`], constants), with this runtime's aliases for the generic handles
//! ([`Client`], [`Queue`], [`Worker`], [`QueueEvents`], [`FlowProducer`]):
//!
//! ```
//! use autobatch_smol::{ActiveJob, Client, MAX_FLOW_DEPTH, MAX_UNANSWERED_JOB_UPDATES, WORKER_EVENTS_BUFFER};
//! fn takes_the_handle(_job: ActiveJob, _client: &Client) {}
//! assert!(MAX_FLOW_DEPTH > 0 && MAX_UNANSWERED_JOB_UPDATES > 0 && WORKER_EVENTS_BUFFER > 0);
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use autobatch_driver::async_io_stream::AsyncIoStream;
use smol::Executor;

// Everything the driver exports, so nothing drifts; the runtime's own aliases below
// (`Client`, `Queue`, `Worker`, `QueueEvents`, `FlowProducer`) take precedence over the
// driver's generic types of the same names.
pub use autobatch_driver::*;

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
///     |_job| async { Ok::<(), String>(()) }).await?;
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

/// The smol [`Runtime`]: sockets and timers from async-io; tasks on smol's global executor
/// ([`Default`]) or on an [`Executor`] you run ([`with_executor`](Self::with_executor)).
///
/// ```
/// let rt = autobatch_smol::SmolRuntime::default(); // smol's global executor
/// # let _ = rt;
/// ```
#[derive(Debug, Clone, Default)]
pub struct SmolRuntime {
    /// Where the connection tasks go; `None`: smol's global executor.
    executor: Option<Arc<Executor<'static>>>,
}

impl SmolRuntime {
    /// Spawns connection tasks (each connection's own task, a worker's tasks) on `executor`
    /// instead of smol's global executor.
    ///
    /// Adds do not depend on it (their own polls write and read), but the connection's timers,
    /// reconnects and commands other than adds make progress only while some thread runs
    /// `executor`: between two `block_on(ex.run(..))` they wait (the server sees a slow
    /// client, not a gone one, until the pings' deadline), and dropping the executor ends the
    /// connection (calls then fail with [`Error::Closed`]). A worker's processors run there
    /// as well.
    ///
    /// ```no_run
    /// use std::sync::Arc;
    /// use autobatch_smol::{Client, ClientOptions, JobOptions, SmolRuntime};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let ex = Arc::new(smol::Executor::new());
    /// let rt = SmolRuntime::with_executor(ex.clone());
    /// smol::block_on(ex.run(async {
    ///     let client = Client::connect_with(rt, ClientOptions::default()).await?;
    ///     client.queue("emails").add("welcome", &1, JobOptions::new()).await?;
    ///     client.close().await;
    ///     Ok::<_, Box<dyn std::error::Error>>(())
    /// }))
    /// # }
    /// ```
    pub fn with_executor(executor: Arc<Executor<'static>>) -> Self {
        SmolRuntime {
            executor: Some(executor),
        }
    }

    /// The executor given to [`with_executor`](Self::with_executor), if any.
    ///
    /// ```
    /// use std::sync::Arc;
    /// let ex = Arc::new(smol::Executor::new());
    /// let rt = autobatch_smol::SmolRuntime::with_executor(ex.clone());
    /// assert!(Arc::ptr_eq(rt.executor().unwrap(), &ex));
    /// assert!(autobatch_smol::SmolRuntime::default().executor().is_none());
    /// ```
    pub fn executor(&self) -> Option<&Arc<Executor<'static>>> {
        self.executor.as_ref()
    }
}

impl Runtime for SmolRuntime {
    type Socket = AsyncIoStream;

    fn spawn(&self, task: BoxFuture<()>) {
        match &self.executor {
            Some(ex) => ex.spawn(task).detach(),
            None => smol::spawn(task).detach(),
        }
    }

    fn connect(&self, host: &str, port: u16) -> BoxFuture<io::Result<AsyncIoStream>> {
        let host = host.to_owned();
        Box::pin(async move {
            let addrs = smol::net::resolve((host.as_str(), port)).await?;
            AsyncIoStream::connect(addrs).await
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
