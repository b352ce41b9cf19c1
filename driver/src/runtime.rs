//! The little an async runtime must provide: spawn a task, open a TCP stream, a resettable
//! timer and the clock it runs on.

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
    /// A connected TCP stream. The driver wraps it in TLS itself when
    /// [`ClientOptions::tls`](crate::ClientOptions::tls) is set, so an adapter never deals with
    /// TLS; it must honour the futures-io contract (`poll_flush`, `poll_close`).
    type Socket: AsyncRead + AsyncWrite + Unpin + Send + 'static;

    /// Runs `task` in the background until it finishes.
    ///
    /// The tasks are each connection's task (timers, reconnects, commands other than adds,
    /// the end of the connection) and a worker's tasks. Adds do not wait for them: an add's
    /// own poll writes it and reads its answer, so any executor serves, on any thread.
    fn spawn(&self, task: BoxFuture<()>);

    /// Opens a TCP connection to `host:port` (resolving `host`), with `TCP_NODELAY` set: the
    /// driver writes whole frames and batches itself.
    fn connect(&self, host: &str, port: u16) -> BoxFuture<io::Result<Self::Socket>>;

    /// A timer that fires at `deadline` and can be moved.
    fn new_timer(&self, deadline: Instant) -> Pin<Box<dyn AsyncTimer>>;

    /// The current time on the clock that [`new_timer`](Self::new_timer)'s deadlines are
    /// measured against.
    ///
    /// The driver reads the time only through this, so a runtime whose clock can be
    /// simulated (tokio's `time::pause`) keeps every deadline of the driver — batch linger,
    /// command timeouts, pings, reconnect backoff — on that clock. The default is the system
    /// clock, right for any runtime whose timers follow it.
    ///
    /// ```
    /// # #[derive(Debug, Clone)] struct Nothing;
    /// # impl autobatch_driver::Runtime for Nothing {
    /// #     type Socket = futures_util::io::Cursor<Vec<u8>>;
    /// #     fn spawn(&self, _: autobatch_driver::BoxFuture<()>) {}
    /// #     fn connect(&self, _: &str, _: u16) -> autobatch_driver::BoxFuture<std::io::Result<Self::Socket>> {
    /// #         Box::pin(async { Err(std::io::Error::other("no network here")) })
    /// #     }
    /// #     fn new_timer(&self, _: std::time::Instant) -> std::pin::Pin<Box<dyn autobatch_driver::AsyncTimer>> {
    /// #         Box::pin(Never)
    /// #     }
    /// # }
    /// # #[derive(Debug)] struct Never;
    /// # impl autobatch_driver::AsyncTimer for Never {
    /// #     fn reset(self: std::pin::Pin<&mut Self>, _: std::time::Instant) {}
    /// #     fn poll(self: std::pin::Pin<&mut Self>, _: &mut std::task::Context<'_>) -> std::task::Poll<()> {
    /// #         std::task::Poll::Pending
    /// #     }
    /// # }
    /// use autobatch_driver::Runtime;
    /// let before = std::time::Instant::now();
    /// assert!(Nothing.now() >= before); // the default: the system clock
    /// ```
    fn now(&self) -> Instant {
        Instant::now()
    }

    /// Has the task polled with `cx` polled again once the tasks that are ready now have run.
    ///
    /// An add's first poll gives the add to the connection's session and yields with this, so
    /// that the adds made beside it (a `join_all`, handlers queued on the same thread) join
    /// the same batch before its next poll writes it. The default wakes the task at once,
    /// which queues it behind the tasks already ready. A runtime whose "wake" of a running
    /// task also wakes an idle thread to steal it (tokio's `multi_thread`) should defer the
    /// wake to its next idle moment instead (`tokio::task::yield_now` does).
    ///
    /// ```
    /// # #[derive(Debug, Clone)] struct Nothing;
    /// # impl autobatch_driver::Runtime for Nothing {
    /// #     type Socket = futures_util::io::Cursor<Vec<u8>>;
    /// #     fn spawn(&self, _: autobatch_driver::BoxFuture<()>) {}
    /// #     fn connect(&self, _: &str, _: u16) -> autobatch_driver::BoxFuture<std::io::Result<Self::Socket>> {
    /// #         Box::pin(async { Err(std::io::Error::other("no network here")) })
    /// #     }
    /// #     fn new_timer(&self, _: std::time::Instant) -> std::pin::Pin<Box<dyn autobatch_driver::AsyncTimer>> {
    /// #         Box::pin(Never)
    /// #     }
    /// # }
    /// # #[derive(Debug)] struct Never;
    /// # impl autobatch_driver::AsyncTimer for Never {
    /// #     fn reset(self: std::pin::Pin<&mut Self>, _: std::time::Instant) {}
    /// #     fn poll(self: std::pin::Pin<&mut Self>, _: &mut std::task::Context<'_>) -> std::task::Poll<()> {
    /// #         std::task::Poll::Pending
    /// #     }
    /// # }
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// use std::task::{Context, Wake, Waker};
    /// use autobatch_driver::Runtime;
    ///
    /// struct Count(AtomicUsize);
    /// impl Wake for Count {
    ///     fn wake(self: Arc<Self>) {
    ///         self.0.fetch_add(1, Ordering::SeqCst);
    ///     }
    /// }
    /// let count = Arc::new(Count(AtomicUsize::new(0)));
    /// let waker = Waker::from(count.clone());
    /// Nothing.yield_now(&mut Context::from_waker(&waker));
    /// assert_eq!(count.0.load(Ordering::SeqCst), 1); // the default: woken at once
    /// ```
    fn yield_now(&self, cx: &mut Context<'_>) {
        cx.waker().wake_by_ref();
    }
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
