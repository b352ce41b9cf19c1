//! The TCP side: the accept loop, and one loop per connection that reads frames, runs each
//! request as its own task (at most `max_handlers_per_connection` at once) and writes replies in
//! completion order.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use autobatch_core::wire::{Value, MAX_FRAME};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, Notify, Semaphore};
use tokio::task::JoinSet;

use crate::clock::now_ms;
use crate::config::BrokerConfig;
use crate::context::{Conn, Shared};
use crate::dispatch::{error_frame, handle, max_large_decodes};
use crate::error::context;
use crate::events::EventSink;
use crate::framing::{Assembler, Budget, Refusal};
use crate::queue::State;
use crate::store::settings::SettingsStore;
use crate::store::{MemoryStore, SqliteStore, Store};

/// Longest wait of the scheduler timer, ms: how soon a newly upserted scheduler is seen.
const CRON_POLL_MS: f64 = 50.0;

/// How often running jobs are checked for a timeout (stall detection and expired locks run on
/// bunqueue's slower 5 s period inside the sweep). bunqueue times jobs out on a timer: a
/// quarter second keeps a job's `timeout` close without costing much.
const LOCK_SWEEP: Duration = Duration::from_millis(250);
/// Largest chunk handed to one socket write.
const WRITE_CHUNK: usize = 256 * 1024;
/// How long a TLS client may take to finish its handshake.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A bound, not yet serving, bunqueue-compatible broker.
///
/// ```
/// use autobatch_broker::{Broker, BrokerConfig};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// let broker = Broker::bind(BrokerConfig::default()).await?;
/// let addr = broker.local_addr();
/// let stop = broker.shutdown_handle();
/// let serving = tokio::spawn(broker.serve());
/// // … clients connect to `addr` …
/// # let _ = addr;
/// stop.shutdown();
/// serving.await.unwrap()?;
/// # Ok(())
/// # }
/// ```
pub struct Broker {
    listener: TcpListener,
    shared: Arc<Shared>,
    shutdown: ShutdownHandle,
}

impl std::fmt::Debug for Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broker")
            .field("addr", &self.local_addr())
            .finish()
    }
}

/// Stops a serving [`Broker`]: it stops accepting and reading, lets the requests already in
/// flight finish and answers them (a long-poll answers at once, empty), closes every connection
/// (their pulled jobs go back to waiting), commits what is pending and returns from
/// [`Broker::serve`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// let broker = autobatch_broker::Broker::bind(Default::default()).await?;
/// let stop = broker.shutdown_handle();
/// stop.shutdown(); // may come before serve(): serve then returns at once
/// broker.serve().await
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct ShutdownHandle {
    tx: Arc<watch::Sender<bool>>,
}

impl ShutdownHandle {
    /// Asks the broker to stop. Idempotent.
    pub fn shutdown(&self) {
        self.tx.send_replace(true);
    }
}

impl Broker {
    /// Opens the storage (recovering the jobs of an earlier run in SQLite mode) and binds the
    /// listener. Port 0 picks a free port.
    pub async fn bind(config: BrokerConfig) -> io::Result<Broker> {
        let store: Box<dyn Store> = match &config.data_path {
            Some(path) => Box::new(SqliteStore::open_with(path, config.sqlite.clone()).map_err(
                |e| {
                    context(
                        e,
                        format_args!("cannot open the SQLite database at {}", path.display()),
                    )
                },
            )?),
            None => Box::new(MemoryStore::new()),
        };
        let mut state = State::new(store, now_ms()).map_err(|e| match &config.data_path {
            Some(path) => context(
                e,
                format_args!("cannot recover the jobs stored at {}", path.display()),
            ),
            None => e,
        })?;
        if let Some(path) = &config.data_path {
            let settings = SettingsStore::open(path, config.sqlite.busy_timeout)
                .and_then(|s| state.attach_settings(s, now_ms()));
            settings.map_err(|e| {
                context(
                    e,
                    format_args!("cannot recover the settings stored at {}", path.display()),
                )
            })?;
        }
        let listener = TcpListener::bind((config.host.as_str(), config.port))
            .await
            .map_err(|e| {
                context(
                    e,
                    format_args!("cannot listen on {}:{}", config.host, config.port),
                )
            })?;
        let (tx, stop) = watch::channel(false);
        let budget = Arc::new(Budget {
            used: AtomicUsize::new(0),
            max: config.partial_frame_budget,
        });
        Ok(Broker {
            listener,
            shared: Arc::new(Shared {
                state: Mutex::new(state),
                config,
                next_conn: AtomicU64::new(1),
                connections: AtomicUsize::new(0),
                budget,
                large_decodes: Semaphore::new(max_large_decodes()),
                stop,
            }),
            shutdown: ShutdownHandle { tx: Arc::new(tx) },
        })
    }

    /// The address the listener is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], 0)))
    }

    /// The state every connection shares (for [`EmbeddedBroker`](crate::EmbeddedBroker)'s
    /// introspection).
    pub(crate) fn shared(&self) -> Arc<Shared> {
        self.shared.clone()
    }

    /// A handle that stops [`serve`](Self::serve).
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        self.shutdown.clone()
    }

    /// Serves connections until [`ShutdownHandle::shutdown`], then answers the requests in
    /// flight, closes every connection and commits what the store still holds.
    pub async fn serve(self) -> io::Result<()> {
        let Broker {
            listener,
            shared,
            shutdown,
        } = self;
        let mut stop = shutdown.tx.subscribe();
        let mut conns = JoinSet::new();
        let sweeper = tokio::spawn({
            let shared = shared.clone();
            async move {
                let mut tick = tokio::time::interval(LOCK_SWEEP);
                loop {
                    tick.tick().await;
                    shared.lock().sweep(now_ms());
                }
            }
        });
        // Schedulers fire on their own timer, at their next run (bunqueue arms a timeout for
        // the earliest one), not on the sweep's quarter second, which would merge the runs of
        // a shorter interval into overlaps. The wait is capped so a new scheduler is seen soon.
        let cron_timer = tokio::spawn({
            let shared = shared.clone();
            async move {
                loop {
                    let now = now_ms();
                    let next = {
                        let mut state = shared.lock();
                        state.fire_crons(now);
                        state.crons().next_due()
                    };
                    let wait = next.map_or(CRON_POLL_MS, |t| (t - now).clamp(1.0, CRON_POLL_MS));
                    tokio::time::sleep(Duration::from_micros((wait * 1000.0) as u64)).await;
                }
            }
        });
        loop {
            tokio::select! {
                _ = stopped(&mut stop) => break,
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => {
                        // Only this loop adds connections, so the count cannot overshoot.
                        if shared.connections.load(Ordering::Acquire) >= shared.config.max_connections {
                            tracing::warn!(
                                max = shared.config.max_connections,
                                "connection refused: too many open connections"
                            );
                            refuse(stream);
                        } else {
                            shared.connections.fetch_add(1, Ordering::AcqRel);
                            conns.spawn(connection(shared.clone(), stream, shutdown.tx.subscribe()));
                        }
                    }
                    // Out of descriptors and the like: back off briefly, keep serving.
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(10)).await
                    }
                },
                Some(_) = conns.join_next(), if !conns.is_empty() => {}
            }
        }
        drop(listener);
        while conns.join_next().await.is_some() {}
        sweeper.abort();
        cron_timer.abort();
        let shared2 = shared.clone();
        tokio::task::spawn_blocking(move || shared2.lock().close_store())
            .await
            .map_err(io::Error::other)?;
        Ok(())
    }
}

/// A connection past `max_connections`: accepted and closed at once, after one error frame
/// that says why. Accepted rather than left in the listen backlog, where the client would sit
/// connected (the kernel completes the handshake) and unanswered until its own timeout, and
/// where it would hold a backlog slot that a client could use once a connection closes.
fn refuse(stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    // A fresh socket's send buffer is empty: this small write does not block or come short.
    let _ = stream.try_write(&error_frame(&Value::Undefined, "Too many connections"));
}

/// Resolves once the broker is asked to stop (at once if it already was). The watch guard is
/// dropped inside, so the futures that await this stay `Send`.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// Replies waiting to be written, with their byte count for the write budget.
struct Outbox {
    tx: mpsc::UnboundedSender<Option<Vec<u8>>>,
    pending: AtomicUsize,
    max: usize,
    /// The write budget was exceeded or the socket failed: the connection must close.
    broken: AtomicBool,
    changed: Notify,
    /// Signalled once when the outbox breaks, with a stored permit: the read loop, blocked on
    /// a socket an event subscriber never writes to, wakes and closes the connection.
    cut: Notify,
}

impl Outbox {
    fn send(&self, frame: Vec<u8>) {
        if self.is_broken() {
            // The connection is being cut: nothing more is queued for it.
            return;
        }
        let n = frame.len();
        if self.pending.fetch_add(n, Ordering::AcqRel) + n > self.max {
            self.pending.fetch_sub(n, Ordering::AcqRel);
            self.break_off();
            return;
        }
        if self.tx.send(Some(frame)).is_err() {
            self.pending.fetch_sub(n, Ordering::AcqRel);
        }
    }

    fn close(&self) {
        let _ = self.tx.send(None);
    }

    /// Marks the connection for closing and wakes whoever waits on it.
    fn break_off(&self) {
        if !self.broken.swap(true, Ordering::AcqRel) {
            self.cut.notify_one();
        }
        self.changed.notify_waiters();
    }

    fn is_broken(&self) -> bool {
        self.broken.load(Ordering::Acquire)
    }
}

/// Event frames go through the outbox like replies, under the same write budget
/// (see [`crate::events`]).
impl EventSink for Outbox {
    fn push_event(&self, frame: Vec<u8>) {
        self.send(frame);
    }
}

async fn write_loop<W: AsyncWrite + Unpin>(
    mut wr: W,
    mut rx: mpsc::UnboundedReceiver<Option<Vec<u8>>>,
    out: Arc<Outbox>,
) {
    let mut buf = Vec::with_capacity(WRITE_CHUNK);
    let mut closing = false;
    while !closing {
        let Some(first) = rx.recv().await else { break };
        buf.clear();
        match first {
            Some(f) => buf.extend_from_slice(&f),
            None => closing = true,
        }
        while !closing && buf.len() < WRITE_CHUNK {
            match rx.try_recv() {
                Ok(Some(f)) => buf.extend_from_slice(&f),
                Ok(None) => closing = true,
                Err(_) => break,
            }
        }
        if out.is_broken() {
            break;
        }
        if !buf.is_empty() && wr.write_all(&buf).await.is_err() {
            out.break_off();
            break;
        }
        out.pending.fetch_sub(buf.len(), Ordering::AcqRel);
        out.changed.notify_waiters();
    }
    if out.is_broken() {
        // Budget exceeded or socket dead: drop the connection without a graceful close.
        return;
    }
    let _ = wr.shutdown().await;
}

/// How long a connection closed with an error frame keeps reading (and discarding) what the
/// client still sends, so that closing with unread bytes does not turn into a reset that
/// destroys the error frame before the client reads it.
const LINGER: Duration = Duration::from_secs(1);

/// Why a connection's read loop ended.
enum Close {
    /// The peer closed or failed, or its replies could not be written: nothing more to say.
    Gone,
    /// The broker is stopping: in-flight requests finish and are answered.
    Stop,
    /// An incomplete frame outlived its deadline: in-flight requests finish, then the
    /// connection closes without a reply for the frame (as bunqueue).
    Stalled,
    /// A protocol limit: in-flight requests finish and are answered, then this error frame
    /// (without reqId) and a graceful close.
    Refuse(String),
}

/// Counts a connection out when its task ends, however it ends.
struct Counted(Arc<Shared>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Serves one connection until it closes, fails, breaks a limit or the broker stops: plain,
/// or after a TLS handshake when the broker serves TLS.
async fn connection(shared: Arc<Shared>, stream: TcpStream, mut stop: watch::Receiver<bool>) {
    let counted = Counted(shared.clone());
    let _ = stream.set_nodelay(true);
    let Some(tls) = &shared.config.tls else {
        let (rd, wr) = stream.into_split();
        return serve_connection(counted, rd, wr, stop).await;
    };
    let handshake = tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, tls.acceptor().accept(stream));
    let stream = tokio::select! {
        r = handshake => match r {
            Ok(Ok(s)) => s,
            // A client that does not speak TLS, or refuses our certificate: nothing to answer.
            Ok(Err(_)) | Err(_) => return,
        },
        _ = stopped(&mut stop) => return,
    };
    // One lock shared by the halves: rustls keeps one state for both directions.
    let (rd, wr) = tokio::io::split(stream);
    serve_connection(counted, rd, wr, stop).await
}

async fn serve_connection<Rd, Wr>(
    counted: Counted,
    mut rd: Rd,
    wr: Wr,
    mut stop: watch::Receiver<bool>,
) where
    Rd: AsyncRead + Unpin,
    Wr: AsyncWrite + Unpin + Send + 'static,
{
    let shared = counted.0.clone();
    let _counted = counted;
    let config = &shared.config;
    let needs_auth = !config.auth_tokens.is_empty();
    let (tx, rx) = mpsc::unbounded_channel();
    let out = Arc::new(Outbox {
        tx,
        pending: AtomicUsize::new(0),
        max: config.max_write_queue_bytes,
        broken: AtomicBool::new(false),
        changed: Notify::new(),
        cut: Notify::new(),
    });
    let writer = tokio::spawn(write_loop(wr, rx, out.clone()));
    let conn = Arc::new(Conn {
        id: shared.next_conn.fetch_add(1, Ordering::Relaxed),
        authed: AtomicBool::new(false),
        events: out.clone(),
    });
    let slots = Arc::new(Semaphore::new(config.max_handlers_per_connection.max(1)));
    let mut handlers = JoinSet::new();
    let mut frames = Assembler::new(shared.budget.clone());
    let mut buf = vec![0u8; 64 * 1024];
    let close = 'conn: loop {
        // A slow reader: stop reading until its replies drain.
        while out.pending.load(Ordering::Acquire) >= config.write_pause_bytes {
            let drained = out.changed.notified();
            tokio::pin!(drained);
            drained.as_mut().enable();
            if out.is_broken() || out.pending.load(Ordering::Acquire) < config.write_pause_bytes {
                break;
            }
            tokio::select! {
                _ = &mut drained => {}
                _ = stopped(&mut stop) => break 'conn Close::Stop,
            }
        }
        if out.is_broken() {
            break Close::Gone;
        }
        // Fixed when the frame's first byte arrived: later bytes do not move it.
        let deadline = frames
            .started()
            .zip(config.partial_frame_timeout)
            .map(|(t, d)| t + d);
        let n = tokio::select! {
            r = rd.read(&mut buf) => match r {
                Ok(0) | Err(_) => break Close::Gone,
                Ok(n) => n,
            },
            _ = sleep_until(deadline) => break Close::Stalled,
            _ = stopped(&mut stop) => break Close::Stop,
            _ = out.cut.notified() => break Close::Gone,
        };
        let now = tokio::time::Instant::now();
        let mut input = &buf[..n];
        loop {
            let authed = !needs_auth || conn.authed.load(Ordering::Acquire);
            let limit = if authed {
                MAX_FRAME
            } else {
                config.max_unauthenticated_frame
            };
            match frames.feed(&mut input, limit, now) {
                Ok(None) => break,
                Ok(Some(body)) if body.is_empty() => {
                    out.send(error_frame(&Value::Undefined, "Invalid command format"));
                }
                Ok(Some(body)) => {
                    // Waiting for a slot stops reading: a flood queues in the socket, not here.
                    let permit = tokio::select! {
                        p = slots.clone().acquire_owned() => match p {
                            Ok(p) => p,
                            Err(_) => break 'conn Close::Gone,
                        },
                        _ = stopped(&mut stop) => break 'conn Close::Stop,
                    };
                    let (shared, conn, out) = (shared.clone(), conn.clone(), out.clone());
                    handlers.spawn(async move {
                        let reply = handle(&shared, &conn, body).await;
                        out.send(reply);
                        drop(permit);
                    });
                }
                Err(Refusal::TooLarge { len }) if len > MAX_FRAME => {
                    break 'conn Close::Refuse(format!(
                        "Frame too large: {len} bytes exceeds maximum {MAX_FRAME}"
                    ));
                }
                Err(Refusal::TooLarge { len }) => {
                    // Too large before Auth, unless an Auth pipelined just before it is still
                    // in flight: let the running requests finish (all of them are quick while
                    // the connection is unauthenticated) and look again.
                    if handlers.is_empty() {
                        break 'conn Close::Refuse(format!(
                            "Frame too large: {len} bytes exceeds maximum {} before Auth",
                            config.max_unauthenticated_frame
                        ));
                    }
                    while !conn.authed.load(Ordering::Acquire) {
                        tokio::select! {
                            j = handlers.join_next() => if j.is_none() { break },
                            _ = stopped(&mut stop) => break 'conn Close::Stop,
                        }
                    }
                }
                Err(Refusal::OverBudget) => {
                    break 'conn Close::Refuse(format!(
                        "Server busy: incomplete frames would exceed the broker's buffer of {} bytes",
                        config.partial_frame_budget
                    ));
                }
            }
            while handlers.try_join_next().is_some() {}
        }
    };
    // Nothing more is read into it: give its bytes back to the shared budget now.
    frames.reset();
    match close {
        Close::Gone => handlers.shutdown().await,
        // Requests already handed to a handler may already have taken effect: their clients
        // are owed a reply, before any error frame. Long-polls end early when the broker stops.
        Close::Stop | Close::Stalled | Close::Refuse(_) => {
            while handlers.join_next().await.is_some() {}
        }
    }
    shared.lock().release_conn(conn.id);
    let linger = match close {
        Close::Refuse(msg) => {
            out.send(error_frame(&Value::Undefined, &msg));
            true
        }
        _ => false,
    };
    out.close();
    if out.is_broken() {
        // Cut for its write budget, the writer may be stuck on a peer that does not read:
        // dropping it closes the socket instead of waiting for that peer.
        writer.abort();
    }
    let _ = writer.await;
    if linger && !out.is_broken() {
        let _ = tokio::time::timeout(LINGER, async {
            while let Ok(1..) = rd.read(&mut buf).await {}
        })
        .await;
    }
}

/// Sleeps until `deadline`, or for ever without one.
async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}
