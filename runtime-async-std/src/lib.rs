//! # autobatch-async-std
//!
//! A [bunqueue](https://bunqueue.dev) 2.9.5 client for [async-std] with transparent
//! auto-batching.
//!
//! **async-std is discontinued upstream** (its maintainers recommend smol). This crate stays a
//! thin shim over `autobatch-driver` for existing async-std code bases; new code should use
//! [`autobatch-smol`](https://docs.rs/autobatch-smol), which has the same API.
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
#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use autobatch_driver::{AsyncTimer, BoxFuture, Runtime};

pub use autobatch_driver::{
    Backoff, BatchConfig, BatchStats, ClientOptions, ClientStats, ConnectError, Debounce, Dedup,
    Error, Fault, FlushReason, Job, JobCounts, JobOptions, JobOutput, JobState, OptionsError,
    OverflowPolicy, Raw, ReconnectConfig, Repeat, Replay, Response, ServerError, ServerErrorKind,
    ServerInfo, SessionStats, TlsError, TlsErrorKind, TlsOptions, TlsRoots, ValidationError, Value,
    WorkerOptions, DEFAULT_PORT,
};

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
///     |_job: autobatch_async_std::Job| async { Ok::<(), String>(()) }).await?;
/// w.close().await;
/// # Ok(()) }
/// ```
pub type Worker = autobatch_driver::Worker<AsyncStdRuntime>;

/// The async-std [`Runtime`]: `async_std::task::spawn`, async-std's `TcpStream`, and the
/// async-io timer async-std itself runs on.
///
/// ```
/// let rt = autobatch_async_std::AsyncStdRuntime;
/// # let _ = rt;
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct AsyncStdRuntime;

impl Runtime for AsyncStdRuntime {
    type Socket = async_std::net::TcpStream;

    fn spawn(&self, task: BoxFuture<()>) {
        drop(async_std::task::spawn(task));
    }

    fn connect(&self, host: &str, port: u16) -> BoxFuture<io::Result<async_std::net::TcpStream>> {
        let host = host.to_owned();
        Box::pin(async move {
            let stream = async_std::net::TcpStream::connect((host.as_str(), port)).await?;
            stream.set_nodelay(true)?;
            Ok(stream)
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
