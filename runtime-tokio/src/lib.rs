//! # autobatch-tokio
//!
//! A [bunqueue](https://bunqueue.dev) 2.9.5 client for [tokio] with transparent
//! auto-batching: concurrent `add()` calls leave together as one PUSHB, sequential ones go out
//! at once and pay nothing. The protocol and batching live in `autobatch-core`, the pump in
//! `autobatch-driver`; this crate only fixes the runtime.
//!
//! Call [`Client::connect`] and [`Worker::start`] from within a tokio runtime (any flavour).
//!
//! ```no_run
//! use autobatch_tokio::{Client, ClientOptions, JobOptions};
//!
//! #[tokio::main(flavor = "current_thread")]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let client = Client::connect(ClientOptions::new("127.0.0.1", 6789)).await?;
//!     let q = client.queue("emails");
//!     let id = q.add("welcome", &"a@b.c", JobOptions::new()).await?;
//!     println!("added {id}");
//!     client.close().await;
//!     Ok(())
//! }
//! ```
//!
//! TLS (rustls, no OpenSSL) is one option away; the driver wraps this runtime's socket:
//!
//! ```no_run
//! # async fn demo() -> Result<(), autobatch_tokio::ConnectError> {
//! use autobatch_tokio::{Client, ClientOptions, TlsOptions};
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
//! use autobatch_tokio::{ActiveJob, Client, MAX_FLOW_DEPTH, MAX_UNANSWERED_JOB_UPDATES, WORKER_EVENTS_BUFFER};
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

use tokio_util::compat::{Compat, TokioAsyncReadCompatExt};

// Everything the driver exports, so nothing drifts; the runtime's own aliases below
// (`Client`, `Queue`, `Worker`, `QueueEvents`, `FlowProducer`) take precedence over the
// driver's generic types of the same names.
pub use autobatch_driver::*;

/// A connection to a bunqueue server, on tokio. See [`autobatch_driver::Client`].
///
/// ```no_run
/// # async fn demo() -> Result<(), autobatch_tokio::ConnectError> {
/// let client = autobatch_tokio::Client::connect(autobatch_tokio::ClientOptions::default()).await?;
/// # Ok(()) }
/// ```
pub type Client = autobatch_driver::Client<TokioRuntime>;

/// A handle on one queue, on tokio. See [`autobatch_driver::Queue`].
///
/// ```no_run
/// # async fn demo(client: autobatch_tokio::Client) {
/// let q: autobatch_tokio::Queue = client.queue("emails");
/// # }
/// ```
pub type Queue = autobatch_driver::Queue<TokioRuntime>;

/// A worker, on tokio. See [`autobatch_driver::Worker`].
///
/// ```no_run
/// # async fn demo() -> Result<(), autobatch_tokio::ConnectError> {
/// use autobatch_tokio::{ClientOptions, Worker, WorkerOptions};
/// let w = Worker::start(ClientOptions::default(), WorkerOptions::new("q"),
///     |_job| async { Ok::<(), String>(()) }).await?;
/// w.close().await;
/// # Ok(()) }
/// ```
pub type Worker = autobatch_driver::Worker<TokioRuntime>;

/// A queue's event stream, on this runtime. See [`autobatch_driver::QueueEvents`].
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use futures_util::StreamExt;
/// let mut events = autobatch_tokio::QueueEvents::connect(autobatch_tokio::ClientOptions::default(), "emails").await?;
/// while let Some(event) = events.next().await {
///     println!("{event:?}");
/// }
/// # Ok(()) }
/// ```
pub type QueueEvents = autobatch_driver::QueueEvents<TokioRuntime>;

/// Adds and reads flows, on this runtime. See [`autobatch_driver::FlowProducer`].
///
/// ```no_run
/// # async fn demo(client: autobatch_tokio::Client) -> Result<(), autobatch_tokio::Error> {
/// use autobatch_tokio::{FlowNode, FlowProducer};
/// let flows = FlowProducer::new(&client);
/// let data = std::collections::BTreeMap::from([("month", 5)]);
/// let tree = flows.add(FlowNode::new("reports", "merge", &data)?).await?;
/// # Ok(()) }
/// ```
pub type FlowProducer = autobatch_driver::FlowProducer<TokioRuntime>;

/// The tokio [`Runtime`]: tasks go to the runtime the handle was taken from.
///
/// `Default` takes the current runtime's handle, so it must be called from within one (it
/// panics otherwise, as `tokio::spawn` does).
///
/// ```
/// let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
/// let handle = autobatch_tokio::TokioRuntime::new(rt.handle().clone());
/// # let _ = handle;
/// ```
#[derive(Debug, Clone)]
pub struct TokioRuntime {
    handle: tokio::runtime::Handle,
}

impl TokioRuntime {
    /// A runtime handle that spawns on `handle`.
    ///
    /// ```
    /// let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    /// let _ = autobatch_tokio::TokioRuntime::new(rt.handle().clone());
    /// ```
    pub fn new(handle: tokio::runtime::Handle) -> Self {
        TokioRuntime { handle }
    }
}

impl Default for TokioRuntime {
    fn default() -> Self {
        TokioRuntime {
            handle: tokio::runtime::Handle::current(),
        }
    }
}

impl Runtime for TokioRuntime {
    type Socket = TokioSocket;

    fn spawn(&self, task: BoxFuture<()>) {
        drop(self.handle.spawn(task));
    }

    fn connect(&self, host: &str, port: u16) -> BoxFuture<io::Result<TokioSocket>> {
        let host = host.to_owned();
        // The pump is a task of this runtime, so the connect runs inside it.
        Box::pin(async move {
            let stream = tokio::net::TcpStream::connect((host.as_str(), port)).await?;
            stream.set_nodelay(true)?;
            Ok(stream.compat())
        })
    }

    fn new_timer(&self, deadline: Instant) -> Pin<Box<dyn AsyncTimer>> {
        let _guard = self.handle.enter();
        Box::pin(TokioTimer(Box::pin(tokio::time::sleep_until(
            deadline.into(),
        ))))
    }

    /// On `multi_thread`, tokio's own `yield_now`: the wake is deferred until the worker has
    /// run the tasks ready beside it, where an immediate wake of a running task would also
    /// wake an idle worker to steal it (a thread woken per add). On `current_thread` an
    /// immediate wake is cheaper (the deferred one polls the I/O driver first) and wakes no
    /// other thread.
    ///
    /// ```
    /// use std::task::Context;
    /// use autobatch_driver::Runtime;
    /// let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).build().unwrap();
    /// let tokio_rt = autobatch_tokio::TokioRuntime::new(rt.handle().clone());
    /// let waker = futures_util::task::noop_waker();
    /// rt.block_on(async {
    ///     // Outside a worker, the deferred wake falls back to an immediate one.
    ///     tokio_rt.yield_now(&mut Context::from_waker(&waker));
    /// });
    /// ```
    fn yield_now(&self, cx: &mut Context<'_>) {
        if self.handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread {
            let yielded = std::pin::pin!(tokio::task::yield_now());
            // The first poll hands the waker to the scheduler and is always pending.
            let _ = yielded.poll(cx);
        } else {
            cx.waker().wake_by_ref();
        }
    }

    /// tokio's clock, so that `tokio::time::pause` and `advance` move every deadline of the
    /// driver (read through the handle's runtime, wherever this is called from).
    fn now(&self) -> Instant {
        let _guard = self.handle.enter();
        tokio::time::Instant::now().into_std()
    }
}

/// A tokio `TcpStream` seen through the `futures-io` traits the driver uses:
/// `tokio_util`'s compat adapter (`poll_close` is tokio's `poll_shutdown`).
///
/// ```no_run
/// # fn demo(s: autobatch_tokio::TokioSocket) {
/// let stream: &tokio::net::TcpStream = s.get_ref();
/// # }
/// ```
pub type TokioSocket = Compat<tokio::net::TcpStream>;

/// `Sleep` is `!Unpin`; boxing it once per timer keeps this crate free of `unsafe`.
#[derive(Debug)]
struct TokioTimer(Pin<Box<tokio::time::Sleep>>);

impl AsyncTimer for TokioTimer {
    fn reset(mut self: Pin<&mut Self>, deadline: Instant) {
        self.0.as_mut().reset(deadline.into());
    }

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.0.as_mut().poll(cx)
    }
}

/// The code blocks of the workspace README, compiled as doctests so the front page stays true.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
