//! The little an async runtime must provide: spawn a task, open a TCP stream, a resettable timer.

use std::fmt::Debug;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use futures_io::{AsyncRead, AsyncWrite};

/// A boxed, sendable future, as [`Runtime`] methods take and return them.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// What the driver needs from an async runtime, in the style of quinn's `Runtime`.
///
/// The three adapter crates implement it; everything else (the pump, the public API) is
/// written once against it. An implementation for another runtime is a few dozen lines:
///
/// ```
/// use std::pin::Pin;
/// use std::task::{Context, Poll};
/// use std::time::Instant;
/// use autobatch_driver::{AsyncTimer, BoxFuture, Runtime};
///
/// /// A runtime that cannot do anything, to show the shape.
/// #[derive(Debug, Clone, Default)]
/// struct Nothing;
///
/// #[derive(Debug)]
/// struct NeverTimer;
/// impl AsyncTimer for NeverTimer {
///     fn reset(self: Pin<&mut Self>, _deadline: Instant) {}
///     fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> { Poll::Pending }
/// }
///
/// impl Runtime for Nothing {
///     type Socket = futures_util::io::Cursor<Vec<u8>>;
///     fn spawn(&self, _task: BoxFuture<()>) {}
///     fn connect(&self, _host: &str, _port: u16) -> BoxFuture<std::io::Result<Self::Socket>> {
///         Box::pin(async { Err(std::io::ErrorKind::Unsupported.into()) })
///     }
///     fn new_timer(&self, _deadline: Instant) -> Pin<Box<dyn AsyncTimer>> {
///         Box::pin(NeverTimer)
///     }
/// }
/// # let _ = Nothing.new_timer(Instant::now());
/// ```
pub trait Runtime: Clone + Debug + Send + Sync + Unpin + 'static {
    /// A connected TCP stream.
    type Socket: AsyncRead + AsyncWrite + Unpin + Send + 'static;

    /// Runs `task` in the background until it finishes.
    fn spawn(&self, task: BoxFuture<()>);

    /// Opens a TCP connection to `host:port` (resolving `host`), with `TCP_NODELAY` set: the
    /// driver writes whole frames and batches itself.
    fn connect(&self, host: &str, port: u16) -> BoxFuture<io::Result<Self::Socket>>;

    /// A timer that fires at `deadline` and can be moved.
    fn new_timer(&self, deadline: Instant) -> Pin<Box<dyn AsyncTimer>>;
}

/// A timer that can be re-armed without allocating (one per connection, moved on every
/// `poll_timeout` change).
///
/// ```
/// # use std::pin::Pin;
/// # use std::task::{Context, Poll};
/// # use std::time::Instant;
/// use autobatch_driver::AsyncTimer;
///
/// /// Fires as soon as polled: a test double.
/// #[derive(Debug)]
/// struct Immediate;
/// impl AsyncTimer for Immediate {
///     fn reset(self: Pin<&mut Self>, _deadline: Instant) {}
///     fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> { Poll::Ready(()) }
/// }
/// ```
pub trait AsyncTimer: Send + Debug + 'static {
    /// Moves the deadline (earlier or later); a fired timer fires again at the new deadline.
    fn reset(self: Pin<&mut Self>, deadline: Instant);
    /// Ready once the deadline has passed; registers the waker otherwise.
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()>;
}
