//! What an add costs the other tasks, counted: a sequential add runs on its caller's task
//! alone, a wave of adds yields once and leaves together, the read role passes from caller to
//! caller without the connection's task, and a caller holding that role that is never polled
//! again, or is dropped, stalls nobody (docs/runtimes.md, "Where an add runs").
//!
//! The client runs on tokio's `current_thread` runtime behind a runtime of these tests' own
//! ([`Counted`]): it counts the polls of the task the driver spawns for the connection and the
//! adds that yield, holds the driver's clock still until a test moves it (no timer of the
//! driver fires unless the test says so), and hands the client the server's answers only as
//! the test lets them through ([`Gate`]). The adds under test are polled by hand, each with a
//! waker that counts its wake-ups. So every assertion is on counts and on what was answered,
//! never on how long anything took; the durations are hang guards.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use autobatch_driver::{AsyncTimer, BoxFuture, Client, Error, JobOptions, Queue, Runtime};
use autobatch_tests::Target;
use autobatch_tokio::TokioRuntime;
use futures_io::{AsyncRead, AsyncWrite};
use futures_util::future::join_all;
use futures_util::FutureExt;

#[macro_use]
mod common;

use common::*;

/// How long a caller may hold the read role before the connection's task reads anyway.
const CALLER_WATCH: Duration = Duration::from_millis(10);

// ------------------------------------------------------------------------------ the runtime

/// What the tests read off the runtime, its clock, and the gate on the server's answers.
#[derive(Debug)]
struct Probe {
    /// Polls of the tasks the driver spawned (one client: its connection's task).
    task_polls: AtomicUsize,
    /// Calls of `yield_now`: adds that wait for the rest of their burst.
    yields: AtomicUsize,
    /// The driver's clock, still until [`Counted::advance`].
    now: Mutex<Instant>,
    /// Every timer's wait, woken when the clock passes its deadline.
    sleepers: Mutex<Vec<Arc<Mutex<Sleeper>>>>,
    gate: Arc<Gate>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// tokio's runtime, counted, on a clock that only the test moves.
#[derive(Debug, Clone)]
struct Counted {
    tokio: TokioRuntime,
    probe: Arc<Probe>,
}

impl Counted {
    /// Within a tokio runtime.
    fn new() -> Self {
        Counted {
            tokio: TokioRuntime::default(),
            probe: Arc::new(Probe {
                task_polls: AtomicUsize::new(0),
                yields: AtomicUsize::new(0),
                now: Mutex::new(Instant::now()),
                sleepers: Mutex::new(Vec::new()),
                gate: Arc::default(),
            }),
        }
    }

    fn task_polls(&self) -> usize {
        self.probe.task_polls.load(Ordering::SeqCst)
    }

    fn yields(&self) -> usize {
        self.probe.yields.load(Ordering::SeqCst)
    }

    fn gate(&self) -> &Gate {
        &self.probe.gate
    }

    /// Moves the driver's clock on by `by`, waking every task whose timer is then due.
    fn advance(&self, by: Duration) {
        let now = {
            let mut now = lock(&self.probe.now);
            *now += by;
            *now
        };
        for sleeper in lock(&self.probe.sleepers).iter() {
            let mut sleeper = lock(sleeper);
            if sleeper.deadline > now {
                continue;
            }
            if let Some(waker) = sleeper.waker.take() {
                waker.wake();
            }
        }
    }
}

impl Runtime for Counted {
    type Socket = GatedSocket;

    fn spawn(&self, task: BoxFuture<()>) {
        let probe = self.probe.clone();
        self.tokio.spawn(Box::pin(CountPolls { task, probe }));
    }

    fn connect(&self, host: &str, port: u16) -> BoxFuture<io::Result<GatedSocket>> {
        Box::pin(connect_through(
            self.probe.gate.clone(),
            host.to_owned(),
            port,
        ))
    }

    fn new_timer(&self, deadline: Instant) -> Pin<Box<dyn AsyncTimer>> {
        let sleeper = Arc::new(Mutex::new(Sleeper {
            deadline,
            waker: None,
        }));
        lock(&self.probe.sleepers).push(sleeper.clone());
        Box::pin(StillTimer {
            sleeper,
            probe: self.probe.clone(),
        })
    }

    fn now(&self) -> Instant {
        *lock(&self.probe.now)
    }

    fn yield_now(&self, cx: &mut Context<'_>) {
        self.probe.yields.fetch_add(1, Ordering::SeqCst);
        self.tokio.yield_now(cx);
    }
}

/// A spawned task, its polls counted.
struct CountPolls {
    task: BoxFuture<()>,
    probe: Arc<Probe>,
}

impl Future for CountPolls {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.probe.task_polls.fetch_add(1, Ordering::SeqCst);
        self.task.as_mut().poll(cx)
    }
}

/// A timer on the test's clock.
#[derive(Debug)]
struct StillTimer {
    sleeper: Arc<Mutex<Sleeper>>,
    probe: Arc<Probe>,
}

/// A timer's deadline, and the task it wakes then.
#[derive(Debug)]
struct Sleeper {
    deadline: Instant,
    waker: Option<Waker>,
}

impl AsyncTimer for StillTimer {
    fn reset(self: Pin<&mut Self>, deadline: Instant) {
        lock(&self.sleeper).deadline = deadline;
    }

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let now = *lock(&self.probe.now);
        let mut sleeper = lock(&self.sleeper);
        if now >= sleeper.deadline {
            return Poll::Ready(());
        }
        sleeper.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

// ------------------------------------------------------------------------------ the gate

/// The server's bytes on their way to the client: they arrive in the background (read off the
/// TCP stream by a task of the test's own), and reach the client's reads as the gate lets
/// them: all of them while open; while held, only the frames let through.
#[derive(Debug, Default)]
struct Gate(Mutex<GateState>);

#[derive(Debug, Default)]
struct GateState {
    /// Arrived, not yet read by the client.
    buf: Vec<u8>,
    /// Frames that arrived in all.
    frames_arrived: usize,
    /// What is left of a frame that arrived in part.
    arriving: Vec<u8>,
    /// The server closed the stream.
    ended: bool,
    held: bool,
    /// Frames still let through while held.
    passes: usize,
    /// Bytes of a frame let through not yet read.
    passing: usize,
    /// The next read that finds nothing to deliver lets one more frame through, as if it
    /// arrived right then: its reader is told "readable" after its read came back empty.
    arrive_after_empty_read: bool,
    /// The client's reader, woken when bytes can be read.
    reader: Option<Waker>,
}

impl GateState {
    /// How many bytes the client may read now.
    /// Whole frames only (or the rest of one being read), so that a frame coming in pieces
    /// tells the reader "readable" once.
    fn readable(&mut self) -> usize {
        if !self.held && self.passing == 0 {
            return whole_frames(&self.buf);
        }
        while self.passing == 0 && self.passes > 0 {
            let Some(len) = frame_len(&self.buf) else {
                break;
            };
            self.passes -= 1;
            self.passing = len;
        }
        self.passing.min(self.buf.len())
    }

    fn count_frames(&mut self, bytes: &[u8]) {
        self.arriving.extend_from_slice(bytes);
        while let Some(len) = frame_len(&self.arriving) {
            self.arriving.drain(..len);
            self.frames_arrived += 1;
        }
    }

    /// Wakes the client's reader if it can read now.
    fn wake_if_readable(&mut self) {
        if self.ended || self.readable() > 0 {
            if let Some(reader) = self.reader.take() {
                reader.wake();
            }
        }
    }
}

impl Gate {
    fn state(&self) -> MutexGuard<'_, GateState> {
        lock(&self.0)
    }

    fn hold(&self) {
        self.state().held = true;
    }

    /// Lets the next `frames` through.
    fn pass(&self, frames: usize) {
        let mut g = self.state();
        g.passes += frames;
        g.wake_if_readable();
    }

    fn open(&self) {
        let mut g = self.state();
        g.held = false;
        g.wake_if_readable();
    }

    /// The frame after those let through arrives just after a read found nothing (see
    /// `arrive_after_empty_read`).
    fn pass_one_after_an_empty_read(&self) {
        self.state().arrive_after_empty_read = true;
    }

    /// Waits until `frames` frames in all have come from the server.
    async fn arrived(&self, frames: usize) {
        eventually::<Tokio>("the server's answers", || {
            self.state().frames_arrived >= frames
        })
        .await;
    }

    fn frames_arrived(&self) -> usize {
        self.state().frames_arrived
    }

    /// Bytes from the server.
    fn arrive(&self, bytes: &[u8]) {
        let mut g = self.state();
        g.buf.extend_from_slice(bytes);
        g.count_frames(bytes);
        g.wake_if_readable();
    }

    fn end(&self) {
        let mut g = self.state();
        g.ended = true;
        g.wake_if_readable();
    }

    /// The client's read.
    fn poll_read(&self, cx: &mut Context<'_>, out: &mut [u8]) -> Poll<usize> {
        let mut g = self.state();
        let n = g.readable().min(out.len());
        if n > 0 {
            out[..n].copy_from_slice(&g.buf[..n]);
            g.buf.drain(..n);
            g.passing = g.passing.saturating_sub(n);
            return Poll::Ready(n);
        }
        if g.ended && g.buf.is_empty() {
            return Poll::Ready(0);
        }
        if std::mem::take(&mut g.arrive_after_empty_read) {
            g.passes += 1;
            cx.waker().wake_by_ref();
        } else {
            g.reader = Some(cx.waker().clone());
        }
        Poll::Pending
    }
}

/// The bytes of the whole frames at the start of `buf`.
fn whole_frames(buf: &[u8]) -> usize {
    let mut whole = 0;
    while let Some(len) = frame_len(&buf[whole..]) {
        whole += len;
    }
    whole
}

/// The length of the first frame of `buf` (its 4-byte header included), once complete.
fn frame_len(buf: &[u8]) -> Option<usize> {
    let header: [u8; 4] = buf.get(..4)?.try_into().ok()?;
    let len = 4 + u32::from_be_bytes(header) as usize;
    (buf.len() >= len).then_some(len)
}

/// Connects to the server, reading what it sends into `gate` on a task of its own.
async fn connect_through(gate: Arc<Gate>, host: String, port: u16) -> io::Result<GatedSocket> {
    let stream = tokio::net::TcpStream::connect((host.as_str(), port)).await?;
    stream.set_nodelay(true)?;
    let (mut from_server, to_server) = stream.into_split();
    let arrivals = gate.clone();
    tokio::spawn(async move {
        use tokio::io::AsyncReadExt;
        let mut chunk = vec![0u8; 64 * 1024];
        while let Ok(n @ 1..) = from_server.read(&mut chunk).await {
            arrivals.arrive(&chunk[..n]);
        }
        arrivals.end();
    });
    Ok(GatedSocket { to_server, gate })
}

/// The client's socket: it writes to the server directly and reads through the [`Gate`].
struct GatedSocket {
    to_server: tokio::net::tcp::OwnedWriteHalf,
    gate: Arc<Gate>,
}

impl AsyncRead for GatedSocket {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        self.gate.poll_read(cx, out).map(Ok)
    }
}

impl AsyncWrite for GatedSocket {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        tokio::io::AsyncWrite::poll_write(Pin::new(&mut self.to_server), cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        tokio::io::AsyncWrite::poll_flush(Pin::new(&mut self.to_server), cx)
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        tokio::io::AsyncWrite::poll_shutdown(Pin::new(&mut self.to_server), cx)
    }
}

// ------------------------------------------------------------------------------ adds by hand

/// Counts its wake-ups.
#[derive(Default)]
struct Wakes(AtomicUsize);

impl Wake for Wakes {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// An add polled by hand, with a waker of its own that counts its wake-ups.
struct ByHand<F> {
    add: Pin<Box<F>>,
    wakes: Arc<Wakes>,
    waker: Waker,
    /// The wake-ups seen by its last poll: one since then asks for another poll.
    seen: usize,
}

impl<F: Future> ByHand<F> {
    fn new(add: F) -> Self {
        ByHand::sharing(add, Arc::default())
    }

    /// An add polled with the waker of `wakes`, as adds made on one task are.
    fn sharing(add: F, wakes: Arc<Wakes>) -> Self {
        ByHand {
            add: Box::pin(add),
            waker: Waker::from(wakes.clone()),
            seen: wakes.0.load(Ordering::SeqCst),
            wakes,
        }
    }

    fn poll(&mut self) -> Poll<F::Output> {
        self.seen = self.wakes();
        self.add
            .as_mut()
            .poll(&mut Context::from_waker(&self.waker))
    }

    fn wakes(&self) -> usize {
        self.wakes.0.load(Ordering::SeqCst)
    }

    /// From here on the add is polled by another task (as a future handed to a spawned task
    /// is): with a waker of its own, new.
    fn move_to_another_task(&mut self) {
        self.wakes = Arc::default();
        self.waker = Waker::from(self.wakes.clone());
        self.seen = 0;
    }

    /// Polls whenever woken since its last poll, as its task would, until the add resolves.
    async fn answer(&mut self) -> F::Output {
        within::<Tokio, _>("an add polled by hand", async {
            loop {
                if self.wakes() != self.seen {
                    if let Poll::Ready(out) = self.poll() {
                        return out;
                    }
                }
                Tokio::sleep(Duration::from_millis(1)).await;
            }
        })
        .await
    }
}

// ------------------------------------------------------------------------------ setup

type AddResult = Result<String, Error>;

struct Setup {
    client: Client<Counted>,
    rt: Counted,
    names: [String; 2],
    q: Queue<Counted>,
    /// Another queue: its adds are written at once while those of `q` are out (each queue
    /// batches its own adds), so their answers come one after the other.
    other: Queue<Counted>,
}

/// A client on the counted runtime, against the embedded broker. Command timeouts are far
/// beyond any clock the tests move.
async fn setup(scenario: &str) -> Setup {
    let rt = Counted::new();
    let opts = options(Target::Broker.shared()).command_timeout(Duration::from_secs(3600));
    let client = within::<Tokio, _>("connect", Client::connect_with(rt.clone(), opts))
        .await
        .expect("connect");
    let names = [scenario, &format!("{scenario}-other")].map(queue_name::<Tokio>);
    Setup {
        q: client.queue(&names[0]),
        other: client.queue(&names[1]),
        client,
        rt,
        names,
    }
}

impl Setup {
    /// One add, awaited: the connection's first turns coalescing off, so that the adds after
    /// it start as sequential ones do.
    async fn warm_up(&self) {
        within::<Tokio, _>("a first add", self.q.add("warm-up", &0, JobOptions::new()))
            .await
            .expect("add");
    }

    fn gate(&self) -> &Gate {
        self.rt.gate()
    }

    /// Holds the server's answers, and starts an add that is written at once and reads for
    /// its answer (coalescing is off after the warm-up: nothing else is out). Returns once
    /// that answer has come, held: the answers of adds made after it come after it.
    async fn start_a_reader_its_answer_held(&self) -> ByHand<impl Future<Output = AddResult> + '_> {
        self.gate().hold();
        let answered = self.gate().frames_arrived();
        let mut reader = ByHand::new(self.q.add("reader", &0, JobOptions::new()));
        assert!(
            reader.poll().is_pending(),
            "answered while answers are held"
        );
        self.gate().arrived(answered + 1).await;
        reader
    }

    /// Closes the client; then every job added must be on the server.
    async fn close_with_jobs_on_server(&self, jobs: u64) {
        within::<Tokio, _>("close", self.client.close()).await;
        let mut raw = raw(Target::Broker.shared());
        let on_server: u64 = self.names.iter().map(|name| raw.count(name)).sum();
        assert_eq!(on_server, jobs);
    }
}

fn run<F: Future>(f: F) -> F::Output {
    Tokio::block_on(f)
}

/// Polls `add` twice, as its task would: its first poll gives it to the session (written at
/// once, or yielding for its burst), its second writes what the session has to send, and
/// stands by for the read role while another add reads.
fn write_by_hand<F: Future>(add: &mut ByHand<F>) {
    assert!(
        add.poll().is_pending(),
        "answered before its answers were let through"
    );
    assert!(
        add.poll().is_pending(),
        "answered before its answers were let through"
    );
}

// ------------------------------------------------------------------------------ scenarios

/// Sequential adds: each is written by its own poll and read by its own later poll; the
/// connection's task is never woken for them, and none yields.
#[test]
fn sequential_adds_leave_the_connections_task_asleep() {
    run(async {
        let s = setup("seq-asleep").await;
        s.warm_up().await;
        let (polls, yields) = (s.rt.task_polls(), s.rt.yields());
        let q = &s.q;
        for i in 0..200 {
            within::<Tokio, _>("a sequential add", q.add("seq", &i, JobOptions::new()))
                .await
                .expect("add");
        }
        assert_eq!(s.rt.task_polls() - polls, 0, "the connection's task ran");
        assert_eq!(s.rt.yields() - yields, 0, "a sequential add yielded");
        s.close_with_jobs_on_server(201).await;
    });
}

/// A sequential add's task is woken once per add: by its answer coming in. The poll that
/// reads the answer completes the add and wakes nobody.
#[test]
fn a_sequential_add_is_woken_once_by_its_answer() {
    const ADDS: usize = 20;
    run(async {
        let s = setup("seq-woken-once").await;
        s.warm_up().await;
        for i in 0..ADDS {
            let mut add = ByHand::new(s.q.add("seq", &i, JobOptions::new()));
            assert!(add.poll().is_pending(), "answered before it was sent");
            add.answer().await.expect("add");
            assert_eq!(add.wakes(), 1, "wake-ups of add {i}");
        }
        s.close_with_jobs_on_server(1 + ADDS as u64).await;
    });
}

/// Waves of concurrent adds on one task: the first add of each wave yields once, the rest
/// join it, and the wave leaves as one PUSHB, without the connection's task.
#[test]
fn each_wave_of_adds_yields_once_and_leaves_in_one_frame() {
    const WAVES: usize = 20;
    run(async {
        let s = setup("waves-once").await;
        let q = &s.q;
        let wave = || join_all((0..10).map(|i| q.add("wave", &i, JobOptions::new())));
        // The first wave after sequential adds: its first add leaves alone (nothing was out
        // when it came), and turns coalescing on for the next.
        s.warm_up().await;
        within::<Tokio, _>("a first wave", wave()).await;
        let before = s.client.stats().await.session;
        let (polls, yields) = (s.rt.task_polls(), s.rt.yields());
        for _ in 0..WAVES {
            let ids = within::<Tokio, _>("a wave", wave()).await;
            assert!(ids.iter().all(Result::is_ok), "{ids:?}");
        }
        assert_eq!(s.rt.yields() - yields, WAVES, "yields per wave");
        assert_eq!(s.rt.task_polls() - polls, 0, "the connection's task ran");
        let after = s.client.stats().await.session;
        assert_eq!(after.pushb_frames - before.pushb_frames, WAVES as u64);
        assert_eq!(after.push_frames - before.push_frames, 0);
        s.close_with_jobs_on_server(1 + 10 + 10 * WAVES as u64)
            .await;
    });
}

/// An add dropped while it holds the read role hands it back at once: the adds after it are
/// answered without the clock moving (no watch has to pass).
#[test]
fn a_reader_dropped_hands_the_read_role_back_at_once() {
    run(async {
        let s = setup("dropped-reader").await;
        s.warm_up().await;
        let q = &s.q;
        drop(s.start_a_reader_its_answer_held().await);
        s.gate().open();
        for i in 0..20 {
            within::<Tokio, _>(
                "an add after a dropped reader",
                q.add("after", &i, JobOptions::new()),
            )
            .await
            .expect("add");
        }
        s.close_with_jobs_on_server(22).await;
    });
}

/// An add polled once and then kept holds the read role with a waker that is never woken:
/// once the clock passes its watch (10 ms), the connection's task reads for the add beside it.
#[test]
fn a_reader_kept_unpolled_is_relieved_by_the_task_once_its_watch_passes() {
    run(async {
        let s = setup("kept-reader").await;
        s.warm_up().await;
        let mut kept = s.start_a_reader_its_answer_held().await;
        let mut beside = ByHand::new(s.q.add("beside", &1, JobOptions::new()));
        write_by_hand(&mut beside);
        s.gate().open();
        s.rt.advance(CALLER_WATCH);
        beside.answer().await.expect("the add beside");
        kept.answer().await.expect("the kept add");
        s.close_with_jobs_on_server(3).await;
    });
}

/// The add of a burst that yielded and is then never polled again owes the write of its
/// burst: once the clock passes its watch, the connection's task writes it.
#[test]
fn a_burst_whose_yielded_add_is_kept_unpolled_is_written_once_its_watch_passes() {
    run(async {
        let s = setup("kept-yielded").await;
        let q = &s.q;
        // A connection's first add yields: its burst may be a wave.
        let mut kept = ByHand::new(q.add("kept", &0, JobOptions::new()));
        assert!(kept.poll().is_pending());
        assert_eq!(s.rt.yields(), 1, "the first add did not yield");
        s.rt.advance(CALLER_WATCH);
        let mut raw = raw(Target::Broker.shared());
        eventually::<Tokio>("the kept add on the server", || raw.count(&s.names[0]) == 1).await;
        kept.answer().await.expect("the kept add");
        s.close_with_jobs_on_server(1).await;
    });
}

/// An add made once the client is closed fails at its first poll: it waits for nothing.
#[test]
fn an_add_on_a_closed_client_fails_at_its_first_poll() {
    run(async {
        let s = setup("closed").await;
        s.warm_up().await;
        within::<Tokio, _>("close", s.client.close()).await;
        let q = &s.q;
        match q.add("late", &0, JobOptions::new()).now_or_never() {
            Some(Err(Error::Closed)) => {}
            other => panic!("an add on a closed client: {other:?}"),
        }
    });
}

/// The reader's answer comes first: the read role passes to the add standing by (the last
/// that found another reading while its answer was out), not to the connection's task. A
/// command through the task meanwhile does not take the role from it.
#[test]
fn the_read_role_passes_to_the_add_standing_by() {
    run(async {
        let s = setup("standby").await;
        s.warm_up().await;
        let mut reader = s.start_a_reader_its_answer_held().await;
        let mut standing = ByHand::new(s.other.add("standing", &1, JobOptions::new()));
        write_by_hand(&mut standing);
        let polls = s.rt.task_polls();
        s.gate().pass(1);
        reader.answer().await.expect("the reader's add");
        within::<Tokio, _>("stats", s.client.stats()).await;
        s.gate().open();
        standing.answer().await.expect("the add standing by");
        assert_eq!(
            s.rt.task_polls() - polls,
            1,
            "the connection's task ran for more than the stats"
        );
        s.close_with_jobs_on_server(3).await;
    });
}

/// The answer of the add standing by arrives just as the reader's own is read, after its
/// last read came back empty: the reader, its answer in, reads once more for the add the
/// role passes to, which would not be told of bytes that came before it was the reader.
#[test]
fn an_answer_arriving_as_the_reader_finishes_is_read_for_the_add_standing_by() {
    run(async {
        let s = setup("standby-late").await;
        s.warm_up().await;
        let mut reader = s.start_a_reader_its_answer_held().await;
        let answered = s.gate().frames_arrived();
        let mut standing = ByHand::new(s.other.add("standing", &1, JobOptions::new()));
        write_by_hand(&mut standing);
        s.gate().arrived(answered + 1).await;
        s.gate().pass_one_after_an_empty_read();
        s.gate().pass(1);
        reader.answer().await.expect("the reader's add");
        standing.answer().await.expect("the add standing by");
        s.close_with_jobs_on_server(3).await;
    });
}

/// An add standing by for the read role and then polled from another task is woken on that
/// task when the role comes to it.
#[test]
fn an_add_standing_by_is_woken_on_the_task_that_polled_it_last() {
    run(async {
        let s = setup("standby-moved").await;
        s.warm_up().await;
        let mut reader = s.start_a_reader_its_answer_held().await;
        let mut standing = ByHand::new(s.other.add("standing", &1, JobOptions::new()));
        write_by_hand(&mut standing);
        standing.move_to_another_task();
        assert!(standing.poll().is_pending());
        s.gate().pass(1);
        reader.answer().await.expect("the reader's add");
        s.gate().open();
        standing.answer().await.expect("the add standing by");
        s.close_with_jobs_on_server(3).await;
    });
}

/// An add dropped while it stands by for the read role is not handed it: the reader's
/// answer in, the role goes to the connection's task, and the adds after are answered
/// without the clock moving.
#[test]
fn an_add_dropped_while_standing_by_is_not_handed_the_read_role() {
    run(async {
        let s = setup("standby-dropped").await;
        s.warm_up().await;
        let mut reader = s.start_a_reader_its_answer_held().await;
        let mut dropped = ByHand::new(s.other.add("dropped", &1, JobOptions::new()));
        write_by_hand(&mut dropped);
        let polls = s.rt.task_polls();
        drop(dropped);
        // Its withdrawal reaches the connection's task before the reader's answer.
        eventually::<Tokio>("the task takes the withdrawal", || {
            s.rt.task_polls() > polls
        })
        .await;
        s.gate().pass(1);
        reader.answer().await.expect("the reader's add");
        s.gate().open();
        for i in 0..5 {
            within::<Tokio, _>("an add after", s.q.add("after", &i, JobOptions::new()))
                .await
                .expect("add");
        }
        s.close_with_jobs_on_server(8).await;
    });
}

/// A close while an add reads for its answer returns once that answer is in: the caller's
/// poll that reads the last answer wakes the connection's task to end the connection.
#[test]
fn a_close_while_an_add_reads_returns_once_the_add_is_answered() {
    run(async {
        let s = setup("close-reading").await;
        s.warm_up().await;
        let mut reader = s.start_a_reader_its_answer_held().await;
        let polls = s.rt.task_polls();
        let answer = async {
            eventually::<Tokio>("the task takes the close", || s.rt.task_polls() > polls).await;
            s.gate().open();
            reader.answer().await
        };
        let ((), id) = within::<Tokio, _>(
            "close",
            futures_util::future::join(s.client.close(), answer),
        )
        .await;
        id.expect("the reader's add");
        let mut raw = raw(Target::Broker.shared());
        assert_eq!(raw.count(&s.names[0]), 2);
    });
}

/// Two adds of one task stand by in turn, and the first is then kept unpolled (a `select`
/// can hand such a future back): the read role passes to the last to stand by, which its
/// task goes on polling, and everything is answered without the clock moving.
#[test]
fn the_read_role_passes_to_the_last_add_standing_by() {
    run(async {
        let s = setup("standby-last").await;
        s.warm_up().await;
        let mut reader = s.start_a_reader_its_answer_held().await;
        let one_task = Arc::<Wakes>::default();
        let mut kept =
            ByHand::sharing(s.other.add("kept", &1, JobOptions::new()), one_task.clone());
        write_by_hand(&mut kept);
        let mut last = ByHand::sharing(s.other.add("last", &2, JobOptions::new()), one_task);
        write_by_hand(&mut last);
        s.gate().pass(1);
        reader.answer().await.expect("the reader's add");
        s.gate().open();
        last.answer().await.expect("the last add standing by");
        s.close_with_jobs_on_server(4).await;
    });
}

/// The add holding the read role reads the answer of another add before its own: the role
/// stays with it, and its own answer wakes it, not the connection's task.
#[test]
fn an_answer_read_for_another_add_leaves_the_read_role_with_the_reader() {
    run(async {
        let s = setup("role-stays").await;
        s.warm_up().await;
        let mut reader = s.start_a_reader_its_answer_held().await;
        let mut first = ByHand::new(s.other.add("first", &1, JobOptions::new()));
        write_by_hand(&mut first);
        // Buffered behind `first` (its queue has one batch out): written once that is answered.
        let mut last = ByHand::new(s.other.add("last", &2, JobOptions::new()));
        write_by_hand(&mut last);
        let polls = s.rt.task_polls();
        s.gate().pass(1);
        reader.answer().await.expect("the reader's add");
        // The role went to `last`, the last add standing by: woken by `first`'s answer, it
        // reads it, and is written then; its own answer is let through once `first` has its.
        s.gate().pass(1);
        let (last_id, first_id) = futures_util::future::join(last.answer(), async {
            let id = first.answer().await;
            s.gate().open();
            id
        })
        .await;
        first_id.expect("the first add");
        last_id.expect("the last add");
        assert_eq!(
            s.rt.task_polls(),
            polls,
            "the connection's task ran: the read role left the add holding it"
        );
        s.close_with_jobs_on_server(4).await;
    });
}

/// On a runtime with several threads, the caller woken to read may find the connection held
/// by a poll on another thread, and cannot read. Whoever holds it reads for that caller when
/// it lets go, and the read role goes back to the connection's task if that read answered
/// the caller. Here the driver's clock stands still, so the task's watch never relieves a
/// caller that missed its read: 16 tasks adding one job after another, as request handlers
/// do, all finish only if no read is ever missed.
#[test]
fn adds_from_several_threads_never_wait_for_the_read_watch() {
    const TASKS: u64 = 16;
    const ADDS: u64 = 3000;
    let threads = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    threads.block_on(async {
        let s = setup("several-threads").await;
        s.warm_up().await;
        let handlers = (0..TASKS).map(|t| {
            let q = s.q.clone();
            tokio::spawn(async move {
                for i in 0..ADDS {
                    q.add("order", &(t * ADDS + i), JobOptions::new())
                        .await
                        .expect("add");
                }
            })
        });
        let done = within::<Tokio, _>("every add answered", join_all(handlers)).await;
        assert!(done.iter().all(Result::is_ok), "a handler panicked");
        s.close_with_jobs_on_server(TASKS * ADDS + 1).await;
    });
}
