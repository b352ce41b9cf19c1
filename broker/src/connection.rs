//! One connection: the loop that reads its frames and runs each request as its own task (at
//! most `max_handlers_per_connection` at once), and the writer that sends the replies in
//! completion order under the connection's write budget.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use autobatch_core::wire::{Value, MAX_FRAME};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch, Notify, Semaphore};
use tokio::task::JoinSet;

use crate::context::{Conn, Shared};
use crate::dispatch::{error_frame, handle};
use crate::events::EventSink;
use crate::framing::{Assembler, Refusal};

/// Largest chunk handed to one socket write.
const WRITE_CHUNK: usize = 256 * 1024;
/// How long a TLS client may take to finish its handshake.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Resolves once the broker is asked to stop (at once if it already was). The watch guard is
/// dropped inside, so the futures that await this stay `Send`.
pub(crate) async fn stopped(stop: &mut watch::Receiver<bool>) {
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
pub(crate) async fn connection(
    shared: Arc<Shared>,
    stream: TcpStream,
    mut stop: watch::Receiver<bool>,
) {
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

/// Serves one connection over its two halves: reads and runs its requests until it closes,
/// then answers or drops what is in flight and closes the writer (see [`Close`]).
async fn serve_connection<Rd, Wr>(counted: Counted, mut rd: Rd, wr: Wr, stop: watch::Receiver<bool>)
where
    Rd: AsyncRead + Unpin,
    Wr: AsyncWrite + Unpin + Send + 'static,
{
    let shared = counted.0.clone();
    let _counted = counted;
    let config = &shared.config;
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
    let mut reader = Reader::new(shared.clone(), out, stop);
    let mut buf = vec![0u8; 64 * 1024];
    let close = reader.read(&mut rd, &mut buf).await;
    let out = reader.end(&close).await;
    out.close();
    if out.is_broken() {
        // Cut for its write budget, the writer may be stuck on a peer that does not read:
        // dropping it closes the socket instead of waiting for that peer.
        writer.abort();
    }
    let _ = writer.await;
    if matches!(close, Close::Refuse(_)) && !out.is_broken() {
        let _ = tokio::time::timeout(LINGER, async {
            while let Ok(1..) = rd.read(&mut buf).await {}
        })
        .await;
    }
}

/// The reading side of one connection: the frames it assembles, the handlers running its
/// requests, and where their replies go.
struct Reader {
    shared: Arc<Shared>,
    conn: Arc<Conn>,
    out: Arc<Outbox>,
    /// At most `max_handlers_per_connection` requests run at once.
    slots: Arc<Semaphore>,
    handlers: JoinSet<()>,
    frames: Assembler,
    stop: watch::Receiver<bool>,
}

impl Reader {
    fn new(shared: Arc<Shared>, out: Arc<Outbox>, stop: watch::Receiver<bool>) -> Reader {
        let conn = Arc::new(Conn {
            id: shared.next_conn.fetch_add(1, Ordering::Relaxed),
            authed: AtomicBool::new(false),
            events: out.clone(),
        });
        let slots = Arc::new(Semaphore::new(
            shared.config.max_handlers_per_connection.max(1),
        ));
        let frames = Assembler::new(shared.budget.clone());
        Reader {
            shared,
            conn,
            out,
            slots,
            handlers: JoinSet::new(),
            frames,
            stop,
        }
    }

    /// Reads and runs requests until the connection must close, and says why.
    async fn read<Rd: AsyncRead + Unpin>(&mut self, rd: &mut Rd, buf: &mut [u8]) -> Close {
        loop {
            if let Err(close) = self.await_drain().await {
                return close;
            }
            if self.out.is_broken() {
                return Close::Gone;
            }
            // Fixed when the frame's first byte arrived: later bytes do not move it.
            let deadline = self
                .frames
                .started()
                .zip(self.shared.config.partial_frame_timeout)
                .map(|(t, d)| t + d);
            let n = tokio::select! {
                r = rd.read(buf) => match r {
                    Ok(0) | Err(_) => return Close::Gone,
                    Ok(n) => n,
                },
                _ = sleep_until(deadline) => return Close::Stalled,
                _ = stopped(&mut self.stop) => return Close::Stop,
                _ = self.out.cut.notified() => return Close::Gone,
            };
            let now = tokio::time::Instant::now();
            if let Err(close) = self.take(&buf[..n], now).await {
                return close;
            }
        }
    }

    /// A slow reader: stops reading until its replies drain.
    async fn await_drain(&mut self) -> Result<(), Close> {
        let pause = self.shared.config.write_pause_bytes;
        let out = &self.out;
        while out.pending.load(Ordering::Acquire) >= pause {
            let drained = out.changed.notified();
            tokio::pin!(drained);
            drained.as_mut().enable();
            if out.is_broken() || out.pending.load(Ordering::Acquire) < pause {
                break;
            }
            tokio::select! {
                _ = &mut drained => {}
                _ = stopped(&mut self.stop) => return Err(Close::Stop),
            }
        }
        Ok(())
    }

    /// Assembles the frames `input` completes and hands each to a handler.
    async fn take(&mut self, mut input: &[u8], now: tokio::time::Instant) -> Result<(), Close> {
        loop {
            let authed = self.shared.config.auth_tokens.is_empty()
                || self.conn.authed.load(Ordering::Acquire);
            let limit = if authed {
                MAX_FRAME
            } else {
                self.shared.config.max_unauthenticated_frame
            };
            match self.frames.feed(&mut input, limit, now) {
                Ok(None) => return Ok(()),
                Ok(Some(body)) if body.is_empty() => {
                    self.out
                        .send(error_frame(&Value::Undefined, "Invalid command format"));
                }
                Ok(Some(body)) => self.run(body).await?,
                Err(refusal) => self.refused(refusal).await?,
            }
            while self.handlers.try_join_next().is_some() {}
        }
    }

    /// Runs one request as its own task, once a slot is free.
    async fn run(&mut self, body: Vec<u8>) -> Result<(), Close> {
        // Waiting for a slot stops reading: a flood queues in the socket, not here.
        let permit = tokio::select! {
            p = self.slots.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => return Err(Close::Gone),
            },
            _ = stopped(&mut self.stop) => return Err(Close::Stop),
        };
        let (shared, conn, out) = (self.shared.clone(), self.conn.clone(), self.out.clone());
        self.handlers.spawn(async move {
            let reply = handle(&shared, &conn, body).await;
            out.send(reply);
            drop(permit);
        });
        Ok(())
    }

    /// A frame the assembler refused: the connection closes, unless the frame was too large
    /// only for want of an Auth still in flight.
    async fn refused(&mut self, refusal: Refusal) -> Result<(), Close> {
        let config = &self.shared.config;
        match refusal {
            Refusal::TooLarge { len } if len > MAX_FRAME => Err(Close::Refuse(format!(
                "Frame too large: {len} bytes exceeds maximum {MAX_FRAME}"
            ))),
            Refusal::TooLarge { len } => {
                // Too large before Auth, unless an Auth pipelined just before it is still
                // in flight: let the running requests finish (all of them are quick while
                // the connection is unauthenticated) and look again.
                if self.handlers.is_empty() {
                    return Err(Close::Refuse(format!(
                        "Frame too large: {len} bytes exceeds maximum {} before Auth",
                        config.max_unauthenticated_frame
                    )));
                }
                while !self.conn.authed.load(Ordering::Acquire) {
                    tokio::select! {
                        j = self.handlers.join_next() => if j.is_none() { break },
                        _ = stopped(&mut self.stop) => return Err(Close::Stop),
                    }
                }
                Ok(())
            }
            Refusal::OverBudget => Err(Close::Refuse(format!(
                "Server busy: incomplete frames would exceed the broker's buffer of {} bytes",
                config.partial_frame_budget
            ))),
        }
    }

    /// Stops reading for `close`: the handlers answered or dropped, the connection's jobs
    /// released, the refusal's error frame queued. Returns the outbox, for the writer's end.
    async fn end(mut self, close: &Close) -> Arc<Outbox> {
        // Nothing more is read into it: give its bytes back to the shared budget now.
        self.frames.reset();
        match close {
            Close::Gone => self.handlers.shutdown().await,
            // Requests already handed to a handler may already have taken effect: their
            // clients are owed a reply, before any error frame. Long-polls end early when the
            // broker stops.
            Close::Stop | Close::Stalled | Close::Refuse(_) => {
                while self.handlers.join_next().await.is_some() {}
            }
        }
        self.shared.lock().release_conn(self.conn.id);
        if let Close::Refuse(msg) = close {
            self.out.send(error_frame(&Value::Undefined, msg));
        }
        self.out
    }
}

/// Sleeps until `deadline`, or for ever without one.
async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}
