//! # autobatch-async-std
//!
//! A [bunqueue](https://bunqueue.dev) 2.9.5 client for [async-std] with transparent
//! auto-batching.
//!
//! **async-std is discontinued upstream** (its maintainers recommend smol). This crate stays a
//! thin shim over `autobatch-driver` for existing async-std code bases; new code should use
//! [`autobatch-smol`](https://docs.rs/autobatch-smol), which has the same API.
//!
//! An add's own poll writes it and reads its answer, so `task::block_on` is all a caller
//! needs. By default each connection's task (timers, reconnects, a worker's processors) goes
//! to async-std's global executor (`task::spawn`), off the adds' path.
//! [`AsyncStdRuntime::local`] spawns those tasks on the calling thread's local executor
//! instead (`task::spawn_local`), the one `task::block_on` runs:
//!
//! ```no_run
//! use autobatch_async_std::{AsyncStdRuntime, Client, ClientOptions, JobOptions};
//!
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     async_std::task::block_on(async {
//!         let opts = ClientOptions::new("127.0.0.1", 6789);
//!         let client = Client::connect_with(AsyncStdRuntime::local(), opts).await?;
//!         let q = client.queue("emails");
//!         let adds = (0..100).map(|i| q.add("welcome", &i, JobOptions::new()));
//!         for id in futures_util::future::join_all(adds).await {
//!             id?;
//!         }
//!         client.close().await;
//!         Ok(())
//!     })
//! }
//! ```
//!
//! ```no_run
//! use autobatch_async_std::{Client, ClientOptions, JobOptions};
//!
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     async_std::task::block_on(async {
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
//! # async fn demo() -> Result<(), autobatch_async_std::ConnectError> {
//! use autobatch_async_std::{Client, ClientOptions, TlsOptions};
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
//! use autobatch_async_std::{ActiveJob, Client, MAX_FLOW_DEPTH, MAX_UNANSWERED_JOB_UPDATES, WORKER_EVENTS_BUFFER};
//! fn takes_the_handle(_job: ActiveJob, _client: &Client) {}
//! assert!(MAX_FLOW_DEPTH > 0 && MAX_UNANSWERED_JOB_UPDATES > 0 && WORKER_EVENTS_BUFFER > 0);
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use async_std::net::ToSocketAddrs;
use autobatch_driver::async_io_stream::AsyncIoStream;

// Everything the driver exports, so nothing drifts; the runtime's own aliases below
// (`Client`, `Queue`, `Worker`, `QueueEvents`, `FlowProducer`) take precedence over the
// driver's generic types of the same names.
pub use autobatch_driver::*;

/// A connection to a bunqueue server, on async-std. See [`autobatch_driver::Client`].
///
/// ```no_run
/// # async fn demo() -> Result<(), autobatch_async_std::ConnectError> {
/// let client = autobatch_async_std::Client::connect(autobatch_async_std::ClientOptions::default()).await?;
/// # Ok(()) }
/// ```
pub type Client = autobatch_driver::Client<AsyncStdRuntime>;

/// A handle on one queue, on async-std. See [`autobatch_driver::Queue`].
///
/// ```no_run
/// # async fn demo(client: autobatch_async_std::Client) {
/// let q: autobatch_async_std::Queue = client.queue("emails");
/// # }
/// ```
pub type Queue = autobatch_driver::Queue<AsyncStdRuntime>;

/// A worker, on async-std. See [`autobatch_driver::Worker`].
///
/// ```no_run
/// # async fn demo() -> Result<(), autobatch_async_std::ConnectError> {
/// use autobatch_async_std::{ClientOptions, Worker, WorkerOptions};
/// let w = Worker::start(ClientOptions::default(), WorkerOptions::new("q"),
///     |_job| async { Ok::<(), String>(()) }).await?;
/// w.close().await;
/// # Ok(()) }
/// ```
pub type Worker = autobatch_driver::Worker<AsyncStdRuntime>;

/// A queue's event stream, on this runtime. See [`autobatch_driver::QueueEvents`].
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use futures_util::StreamExt;
/// let mut events = autobatch_async_std::QueueEvents::connect(autobatch_async_std::ClientOptions::default(), "emails").await?;
/// while let Some(event) = events.next().await {
///     println!("{event:?}");
/// }
/// # Ok(()) }
/// ```
pub type QueueEvents = autobatch_driver::QueueEvents<AsyncStdRuntime>;

/// Adds and reads flows, on this runtime. See [`autobatch_driver::FlowProducer`].
///
/// ```no_run
/// # async fn demo(client: autobatch_async_std::Client) -> Result<(), autobatch_async_std::Error> {
/// use autobatch_async_std::{FlowNode, FlowProducer};
/// let flows = FlowProducer::new(&client);
/// let data = std::collections::BTreeMap::from([("month", 5)]);
/// let tree = flows.add(FlowNode::new("reports", "merge", &data)?).await?;
/// # Ok(()) }
/// ```
pub type FlowProducer = autobatch_driver::FlowProducer<AsyncStdRuntime>;

/// The async-std [`Runtime`]: async-std's `TcpStream`, the async-io timer async-std itself
/// runs on, and tasks on async-std's global executor ([`Default`]) or on the calling thread
/// ([`local`](Self::local)).
///
/// ```
/// let rt = autobatch_async_std::AsyncStdRuntime::default(); // async-std's global executor
/// # let _ = rt;
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct AsyncStdRuntime {
    /// Spawn with `task::spawn_local` instead of `task::spawn`.
    local: bool,
}

impl AsyncStdRuntime {
    /// Spawns connection tasks (each connection's own task, a worker's tasks) with
    /// `async_std::task::spawn_local`: on the local executor of the thread that connects, the
    /// one its `async_std::task::block_on` runs (async-std's own worker threads run theirs
    /// too).
    ///
    /// Adds do not depend on it (their own polls write and read), but the connection's
    /// timers, reconnects and commands other than adds make progress only while that thread
    /// is inside `block_on` (between two calls they wait), and only the outermost `block_on`
    /// of a thread runs the local executor. A worker's processors run there as well.
    ///
    /// ```no_run
    /// use autobatch_async_std::{AsyncStdRuntime, Client, ClientOptions, JobOptions};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// async_std::task::block_on(async {
    ///     let client = Client::connect_with(AsyncStdRuntime::local(), ClientOptions::default()).await?;
    ///     client.queue("emails").add("welcome", &1, JobOptions::new()).await?;
    ///     client.close().await;
    ///     Ok::<_, Box<dyn std::error::Error>>(())
    /// })
    /// # }
    /// ```
    pub fn local() -> Self {
        AsyncStdRuntime { local: true }
    }

    /// Whether tasks go to the calling thread ([`local`](Self::local)).
    ///
    /// ```
    /// use autobatch_async_std::AsyncStdRuntime;
    /// assert!(AsyncStdRuntime::local().is_local());
    /// assert!(!AsyncStdRuntime::default().is_local());
    /// ```
    pub fn is_local(&self) -> bool {
        self.local
    }
}

impl Runtime for AsyncStdRuntime {
    type Socket = AsyncIoStream;

    fn spawn(&self, task: BoxFuture<()>) {
        if self.local {
            drop(async_std::task::spawn_local(task));
        } else {
            drop(async_std::task::spawn(task));
        }
    }

    fn connect(&self, host: &str, port: u16) -> BoxFuture<io::Result<AsyncIoStream>> {
        let host = host.to_owned();
        Box::pin(async move {
            let addrs = (host.as_str(), port).to_socket_addrs().await?;
            AsyncIoStream::connect(addrs).await
        })
    }

    fn new_timer(&self, deadline: Instant) -> Pin<Box<dyn AsyncTimer>> {
        Box::pin(Timer(async_io::Timer::at(deadline)))
    }
}

#[derive(Debug)]
struct Timer(async_io::Timer);

impl AsyncTimer for Timer {
    fn reset(mut self: Pin<&mut Self>, deadline: Instant) {
        self.0.set_at(deadline);
    }

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        Pin::new(&mut self.0).poll(cx).map(|_| ())
    }
}
