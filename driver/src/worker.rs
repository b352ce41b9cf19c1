//! The consumer side: a [`Worker`] pulls jobs, runs a processor on each, and reports the
//! outcomes (completions batched into ACKB, failures as FAIL).

use std::any::Any;
use std::backtrace::{Backtrace, BacktraceStatus};
use std::error::Error as StdError;
use std::fmt::{self, Display};
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::task::{Context, Poll};
use std::time::Duration;

use autobatch_core::ops;
use autobatch_core::wire::{Command, Job, Value};
use autobatch_core::Error;
use futures_channel::mpsc;
use futures_util::future::{AbortHandle, Abortable};
use futures_util::{FutureExt, Stream, StreamExt};
use serde::Serialize;

use crate::client::Client;
use crate::cmd::{Cmd, Dispatch, WorkerCmd};
use crate::connect::start_links;
use crate::job::{ActiveJob, JobLink};
use crate::options::{ClientOptions, ConnectError, WorkerOptions};
use crate::runtime::{AsyncTimer, Runtime};
use crate::settle::{self, Settlement};
use crate::stats::ClientStats;
use crate::worker_events::{WorkerEvent, WorkerEvents};

/// What a processor may return on success: anything `Serialize`, or a ready-made [`Value`]
/// wrapped in [`Raw`].
///
/// ```
/// use autobatch_driver::{JobOutput, Raw, Value};
/// assert_eq!(42u32.into_value().unwrap(), Value::Int(42));
/// assert_eq!(Raw(Value::from("done")).into_value().unwrap(), Value::from("done"));
/// assert_eq!(().into_value().unwrap(), Value::Nil);
/// ```
pub trait JobOutput {
    /// The job's return value, as sent in the ACK.
    fn into_value(self) -> Result<Value, String>;
}

impl<T: Serialize> JobOutput for T {
    fn into_value(self) -> Result<Value, String> {
        Value::from_serialize(&self).map_err(|e| e.0)
    }
}

/// A job result given as a [`Value`] as it is (no serde round-trip).
///
/// ```
/// use autobatch_driver::{Raw, Value};
/// let r = Raw(Value::map([("ok", Value::Bool(true))]));
/// # let _ = r;
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Raw(pub Value);

impl JobOutput for Raw {
    fn into_value(self) -> Result<Value, String> {
        Ok(self.0)
    }
}

/// A processor error with its cause chain and, when enabled, the backtrace of where it was made:
/// what a failed job's `stacktrace` holds on the server.
///
/// Any `std::error::Error + Send + Sync` converts into it with `?`, capturing a
/// [`Backtrace`] at that point (`Backtrace::capture`: only when `RUST_BACKTRACE` or
/// `RUST_LIB_BACKTRACE` enables it, otherwise free). The FAIL then carries as `stack` the
/// error's `Display`, one `caused by: …` line per [`source`](std::error::Error::source), then
/// the backtrace's lines — at most 100, what bunqueue keeps.
///
/// A processor may return `Result<T, JobError>`, or `Result<T, Box<dyn Error + Send + Sync>>`
/// (the cause chain, no backtrace), or keep returning a plain `String` or any other `Display`
/// error (its text is the only line). To send a backtrace that your own error type captured,
/// build the `JobError` with [`with_backtrace`](Self::with_backtrace).
///
/// ```
/// use autobatch_driver::JobError;
/// #[derive(Debug)]
/// struct Parse(std::num::ParseIntError);
/// impl std::fmt::Display for Parse {
///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { f.write_str("bad order id") }
/// }
/// impl std::error::Error for Parse {
///     fn source(&self) -> Option<&(dyn std::error::Error + 'static)> { Some(&self.0) }
/// }
/// fn parse(s: &str) -> Result<u32, JobError> {
///     Ok(s.parse().map_err(Parse)?) // `?` makes the JobError
/// }
/// let err = parse("x1").unwrap_err();
/// assert_eq!(err.to_string(), "bad order id");
/// assert_eq!(&err.stack_lines()[..2], ["bad order id", "caused by: invalid digit found in string"]);
/// ```
pub struct JobError {
    error: Box<dyn StdError + Send + Sync>,
    backtrace: Backtrace,
    kind: Outcome,
}

/// What a failed processor asks for, beyond a plain (retried) failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// FAIL: the server retries while attempts remain (backoff per the job's options).
    Retry,
    /// FAIL with `unrecoverable: true`: no more attempts; the job goes to failed (and to the
    /// DLQ per the queue's config) at once. bunqueue's `UnrecoverableError`.
    Unrecoverable,
    /// MoveToDelayed: the job runs again after this delay, the attempt not counted as a
    /// failure. bunqueue's `DelayedError`.
    Delay(std::time::Duration),
    /// MoveToWait, and the worker pulls nothing for this long: a rate limit the processor hit
    /// (an upstream API's 429, say). The job is not counted as failed. bunqueue has no
    /// server-side equivalent for a whole queue without groups; this is the worker's own.
    RateLimited(std::time::Duration),
}

/// A plain message as an error, for the outcome constructors.
#[derive(Debug)]
struct Message(String);

impl Display for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl StdError for Message {}

impl JobError {
    /// Wraps `error`, capturing a backtrace here (if enabled, see the type's docs).
    pub fn new(error: impl Into<Box<dyn StdError + Send + Sync>>) -> Self {
        JobError {
            error: error.into(),
            backtrace: Backtrace::capture(),
            kind: Outcome::Retry,
        }
    }

    /// A failure that must not be retried: the FAIL says `unrecoverable`, so the job is failed
    /// at once whatever attempts remain (bunqueue's `UnrecoverableError`).
    ///
    /// ```
    /// use autobatch_driver::{JobError, Outcome};
    /// let e = JobError::unrecoverable("the account was deleted");
    /// assert_eq!(e.outcome(), Outcome::Unrecoverable);
    /// ```
    pub fn unrecoverable(error: impl Into<Box<dyn StdError + Send + Sync>>) -> Self {
        JobError {
            kind: Outcome::Unrecoverable,
            ..JobError::new(error)
        }
    }

    /// Not a failure: run the job again after `delay` (MoveToDelayed; bunqueue's
    /// `DelayedError`). The attempt does not count.
    ///
    /// ```
    /// use std::time::Duration;
    /// use autobatch_driver::{JobError, Outcome};
    /// let e = JobError::delay(Duration::from_secs(30));
    /// assert_eq!(e.outcome(), Outcome::Delay(Duration::from_secs(30)));
    /// ```
    pub fn delay(delay: std::time::Duration) -> Self {
        JobError {
            kind: Outcome::Delay(delay),
            ..JobError::with_backtrace(
                Message(format!("delayed by {} ms", delay.as_millis())),
                Backtrace::disabled(),
            )
        }
    }

    /// Not a failure: a rate limit was hit. The job goes back to waiting and this worker pulls
    /// nothing for `wait`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use autobatch_driver::{JobError, Outcome};
    /// assert_eq!(JobError::rate_limited(Duration::from_secs(1)).outcome(),
    ///     Outcome::RateLimited(Duration::from_secs(1)));
    /// ```
    pub fn rate_limited(wait: std::time::Duration) -> Self {
        JobError {
            kind: Outcome::RateLimited(wait),
            ..JobError::with_backtrace(
                Message(format!("rate limited for {} ms", wait.as_millis())),
                Backtrace::disabled(),
            )
        }
    }

    /// Makes this error unrecoverable (see [`unrecoverable`](Self::unrecoverable)).
    pub fn into_unrecoverable(mut self) -> Self {
        self.kind = Outcome::Unrecoverable;
        self
    }

    /// What the error asks for.
    pub fn outcome(&self) -> Outcome {
        self.kind
    }

    /// Wraps `error` with a backtrace captured elsewhere (by your own error type, say).
    pub fn with_backtrace(
        error: impl Into<Box<dyn StdError + Send + Sync>>,
        backtrace: Backtrace,
    ) -> Self {
        JobError {
            error: error.into(),
            backtrace,
            kind: Outcome::Retry,
        }
    }

    /// The error wrapped.
    pub fn error(&self) -> &(dyn StdError + Send + Sync + 'static) {
        &*self.error
    }

    /// The backtrace (check its [`status`](Backtrace::status): empty unless enabled).
    pub fn backtrace(&self) -> &Backtrace {
        &self.backtrace
    }

    /// The lines a FAIL carries as `stack`: the message, one `caused by: …` per source, then the
    /// backtrace's lines if one was captured; at most
    /// [`MAX_STACK_LINES`](autobatch_core::session::MAX_STACK_LINES).
    pub fn stack_lines(&self) -> Vec<String> {
        let mut lines = chain_lines(&*self.error);
        if self.backtrace.status() == BacktraceStatus::Captured {
            lines.extend(self.backtrace.to_string().lines().map(str::to_owned));
        }
        lines.truncate(autobatch_core::session::MAX_STACK_LINES);
        lines
    }
}

impl<E: StdError + Send + Sync + 'static> From<E> for JobError {
    fn from(error: E) -> Self {
        JobError::new(error)
    }
}

impl fmt::Debug for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobError")
            .field("error", &self.error)
            .field("backtrace", &self.backtrace.status())
            .field("outcome", &self.kind)
            .finish()
    }
}

impl Display for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Display::fmt(&self.error, f)
    }
}

/// An error's message, then one `caused by: …` line per source, each cause's message kept on
/// one line (a multi-line message becomes several lines).
fn chain_lines(error: &(dyn StdError + 'static)) -> Vec<String> {
    let max = autobatch_core::session::MAX_STACK_LINES;
    let mut lines: Vec<String> = error.to_string().lines().map(str::to_owned).collect();
    let mut cause = error.source();
    while let Some(c) = cause {
        if lines.len() >= max {
            break;
        }
        lines.push(format!("caused by: {c}"));
        cause = c.source();
    }
    lines.truncate(max);
    lines
}

/// What a failed processor reports: the FAIL's `error` text and its `stack` lines.
pub(crate) struct Failure {
    pub(crate) message: String,
    pub(crate) stack: Vec<String>,
    pub(crate) outcome: Outcome,
}

impl Failure {
    fn plain(message: String) -> Self {
        let stack = message.lines().map(str::to_owned).collect();
        Failure {
            message,
            stack,
            outcome: Outcome::Retry,
        }
    }

    /// Reads what the processor's error type can tell: a [`JobError`] or a boxed
    /// `std::error::Error` gives its cause chain (and backtrace), anything else its text.
    fn of<E: Display + 'static>(e: E) -> Self {
        let any: &dyn Any = &e;
        let mut outcome = Outcome::Retry;
        let stack = if let Some(j) = any.downcast_ref::<JobError>() {
            outcome = j.kind;
            j.stack_lines()
        } else if let Some(b) = any.downcast_ref::<Box<dyn StdError + Send + Sync>>() {
            chain_lines(&**b)
        } else if let Some(b) = any.downcast_ref::<Box<dyn StdError + Send>>() {
            chain_lines(&**b)
        } else if let Some(b) = any.downcast_ref::<Box<dyn StdError>>() {
            chain_lines(&**b)
        } else {
            return Failure::plain(e.to_string());
        };
        Failure {
            message: e.to_string(),
            stack,
            outcome,
        }
    }
}

/// What [`Worker::close_with_grace`] did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct CloseReport {
    /// Jobs still running at the end of the grace period, handed back to waiting at once
    /// (MoveToWait with their lock tokens); their processors were stopped.
    pub released: Vec<String>,
}

/// A timer as a future.
struct Sleep(Pin<Box<dyn AsyncTimer>>);

impl Future for Sleep {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.0.as_mut().poll(cx)
    }
}

fn sleep<R: Runtime>(rt: &R, d: Duration) -> Sleep {
    Sleep(rt.new_timer(rt.now() + d))
}

/// The state every part of one worker shares.
struct Inner<R: Runtime> {
    runtime: R,
    client: Client<R>,
    queue: Arc<str>,
    worker_id: String,
    name: String,
    concurrency: usize,
    heartbeat: Duration,
    /// One per broker: a job's handle and outcome go back to the broker it came from.
    links: Vec<JobLink>,
    /// Processors running, by job id, to stop them on a forced close.
    running: Mutex<HashMap<String, Running>>,
    /// The brokers share one store: a job whose broker was lost is settled, and its lock
    /// renewed, on a live one (see `settle.rs`).
    shared_storage: bool,
    /// The lock time to live a renewal asks for.
    lock_ttl: Duration,
    processed: AtomicU64,
    failed: AtomicU64,
    paused: AtomicBool,
    /// The heartbeat task stops when this is set.
    stopped: AtomicBool,
    /// A forced close handed the held jobs back: jobs still on their way are not started.
    forced: AtomicBool,
    events: WorkerEvents,
}

/// A job being processed: how to stop it, where it came from and its lock token.
struct Running {
    abort: AbortHandle,
    from: usize,
    token: Option<String>,
}

impl<R: Runtime> Inner<R> {
    /// Whether a job from link `from` is settled on another broker: several brokers that
    /// share one store, and `from`'s connection is down.
    fn orphaned(&self, from: usize) -> bool {
        self.shared_storage
            && self.client.links().len() > 1
            && !self.client.links().get(from).shared.is_connected()
    }

    /// Renews, on a live broker, the locks of the jobs running whose broker was lost (their
    /// own session cannot).
    async fn renew_orphans(&self) {
        if !self.shared_storage || self.client.links().len() < 2 {
            return;
        }
        let orphans: Vec<(String, Option<String>)> = self
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|(_, r)| self.orphaned(r.from))
            .map(|(id, r)| (id.clone(), r.token.clone()))
            .collect();
        // All at once: one after the other, fifty orphans on a broker slow to answer would
        // take fifty round trips, longer than the locks they renew.
        let renewals = orphans.iter().map(|(id, token)| async move {
            let op = settle::extend_lock(id, token.as_deref(), self.lock_ttl);
            if let Err(e) = self.client.run(op).await {
                tracing::debug!(job = %id, error = %e, "renewing a lock on another broker failed");
            }
        });
        futures_util::future::join_all(renewals).await;
    }

    fn running(&self) -> usize {
        self.running.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    fn register_op(&self) -> ops::RegisterWorker {
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let mut op = ops::RegisterWorker::new(
            self.name.as_str(),
            vec![self.queue.to_string()],
            i64::try_from(self.concurrency).unwrap_or(i64::MAX),
        )
        .worker_id(self.worker_id.as_str())
        .pid(i64::from(std::process::id()))
        .started_at(started);
        if let Ok(h) = std::env::var("HOSTNAME") {
            op = op.hostname(h);
        }
        op
    }

    async fn register(&self) {
        if let Err(e) = self.client.run(self.register_op()).await {
            tracing::debug!(worker = %self.worker_id, error = %e, "registering failed");
            self.events.emit_with(|| WorkerEvent::Error {
                message: format!("registering the worker failed: {e}"),
            });
        }
    }

    /// Registers, then sends a heartbeat with the counters every interval until stopped;
    /// registers again when the server forgot the worker (a restart, a lost connection).
    async fn heartbeats(self: Arc<Self>) {
        self.register().await;
        loop {
            sleep(&self.runtime, self.heartbeat).await;
            if self.stopped.load(Ordering::Acquire) {
                return;
            }
            self.renew_orphans().await;
            let op = ops::WorkerHeartbeat::new(self.worker_id.as_str()).counters(
                self.running() as i64,
                self.processed.load(Ordering::Relaxed) as i64,
                self.failed.load(Ordering::Relaxed) as i64,
            );
            match self.client.run(op).await {
                Ok(()) => {}
                Err(Error::Server(e)) if e.message().contains("Worker not found") => {
                    self.register().await;
                }
                Err(Error::Closed) => return,
                Err(e) => {
                    tracing::debug!(worker = %self.worker_id, error = %e, "worker heartbeat failed")
                }
            }
        }
    }
}

/// A worker on its own connection: pulls jobs from one queue, runs up to `concurrency`
/// processors at once, and reports each outcome.
///
/// The processor receives an [`ActiveJob`]: the job (it dereferences to [`Job`](crate::Job)) and the calls a
/// running job makes. Its `Ok` value becomes the job's result (sent in a batched ACKB); an `Err` becomes a FAIL with
/// its `Display` text (the server retries the job while attempts remain) and, as the job's
/// `stacktrace`, its cause chain and backtrace when the error is a [`JobError`] or a
/// `Box<dyn Error + Send + Sync>` (see [`JobError`]); a panic fails only that job. A
/// [`JobError`] may also ask for another [`Outcome`]: unrecoverable (no retry), delay, or rate
/// limited.
///
/// The worker registers itself (RegisterWorker, then a Heartbeat with its counters every
/// `heartbeat_interval`), so bunqueue's `ListWorkers` and dashboards list it under its
/// [`id`](Self::id) (the pull `owner`) and [`name`](Self::name) (the queue's); it unregisters on
/// close.
///
/// ```no_run
/// # async fn demo<R: autobatch_driver::Runtime + Default>() -> Result<(), Box<dyn std::error::Error>> {
/// use autobatch_driver::{ClientOptions, JobError, Worker, WorkerOptions};
///
/// let worker = Worker::<R>::start(
///     ClientOptions::default(),
///     WorkerOptions::new("emails").concurrency(10),
///     |job| async move {
///         let to: String = job.data()?;
///         if to.is_empty() {
///             return Err(JobError::unrecoverable("no address"));
///         }
///         job.update_progress(50.0).detach();
///         Ok(format!("sent to {to}"))
///     },
/// )
/// .await?;
/// // ... later:
/// worker.close().await;
/// # Ok(()) }
/// ```
pub struct Worker<R: Runtime> {
    inner: Arc<Inner<R>>,
}

impl<R: Runtime> fmt::Debug for Worker<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Worker")
            .field("queue", &&*self.inner.queue)
            .field("id", &self.inner.worker_id)
            .field("client", &self.inner.client)
            .finish()
    }
}

impl<R: Runtime> Worker<R> {
    /// Connects (as [`Client::connect`]) and starts working `worker.queue` with the runtime's
    /// default handle.
    ///
    /// # Errors
    ///
    /// As [`Client::connect`]; invalid [`WorkerOptions`] give [`ConnectError::Options`].
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime + Default>() -> Result<(), autobatch_driver::ConnectError> {
    /// use autobatch_driver::{ClientOptions, Worker, WorkerOptions};
    /// let w = Worker::<R>::start(ClientOptions::default(), WorkerOptions::new("q"), |job| async move {
    ///     println!("{} {}", job.id, job.name);
    ///     Ok::<(), String>(())
    /// })
    /// .await?;
    /// # w.close().await; Ok(()) }
    /// ```
    pub async fn start<F, Fut, T, E>(
        options: ClientOptions,
        worker: WorkerOptions,
        processor: F,
    ) -> Result<Self, ConnectError>
    where
        R: Default,
        F: Fn(ActiveJob) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
        T: JobOutput + 'static,
        E: Display + 'static,
    {
        Self::start_with(R::default(), options, worker, processor).await
    }

    /// Like [`start`](Self::start), on an explicit runtime handle.
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime + Default>() -> Result<(), autobatch_driver::ConnectError> {
    /// use autobatch_driver::{ClientOptions, Worker, WorkerOptions};
    /// let w = Worker::start_with(R::default(), ClientOptions::default(), WorkerOptions::new("q"),
    ///     |_job| async { Ok::<(), String>(()) }).await?;
    /// # w.close().await; Ok(()) }
    /// ```
    pub async fn start_with<F, Fut, T, E>(
        runtime: R,
        options: ClientOptions,
        worker: WorkerOptions,
        processor: F,
    ) -> Result<Self, ConnectError>
    where
        F: Fn(ActiveJob) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
        T: JobOutput + 'static,
        E: Display + 'static,
    {
        let config = worker.worker_config()?;
        let (jobs_tx, jobs_rx) = mpsc::unbounded::<(usize, Dispatch)>();
        let worker_id = config.owner.clone();
        let heartbeat = config.heartbeat_interval.unwrap_or(Duration::from_secs(10));
        // One pump per broker, each pulling; every job arrives tagged with its broker.
        let links = start_links(runtime.clone(), &options, Some((config, jobs_tx))).await?;
        let client = Client::<R>::from_links(links);
        let events = WorkerEvents::default();
        let in_flight = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let links = client
            .senders()
            .map(|tx| JobLink {
                tx: tx.clone(),
                in_flight: in_flight.clone(),
                lock_ttl: worker.lock_ttl,
                events: events.clone(),
            })
            .collect();
        let inner = Arc::new(Inner {
            runtime: runtime.clone(),
            client,
            queue: Arc::from(worker.queue.as_str()),
            worker_id,
            name: worker.name.clone().unwrap_or_else(|| worker.queue.clone()),
            concurrency: worker.concurrency,
            heartbeat,
            links,
            running: Mutex::new(HashMap::new()),
            shared_storage: options.shared_storage,
            lock_ttl: worker.lock_ttl,
            processed: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            paused: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
            forced: AtomicBool::new(false),
            events,
        });
        runtime.spawn(Box::pin(inner.clone().heartbeats()));
        // The dispatcher: one task per job (the session never hands out more than
        // `concurrency` at once). It ends when the pump drops the job channel.
        runtime.spawn(Box::pin(
            inner.clone().dispatch(Arc::new(processor), jobs_rx),
        ));
        tracing::debug!(queue = %worker.queue, concurrency = worker.concurrency, "worker started");
        Ok(Worker { inner })
    }

    /// The worker's unique id: the pull `owner` and the id `ListWorkers` shows.
    pub fn id(&self) -> &str {
        &self.inner.worker_id
    }

    /// The worker's name as registered (its queue's name, as bunqueue's worker does).
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The queue it works.
    pub fn queue(&self) -> &str {
        &self.inner.queue
    }

    /// The worker's events, as a bounded stream (a buffer of [`WORKER_EVENTS_BUFFER`](crate::WORKER_EVENTS_BUFFER) events
    /// and [`WORKER_EVENTS_BUFFER_BYTES`](crate::WORKER_EVENTS_BUFFER_BYTES) bytes).
    ///
    /// **From the start**: the first call gets every event since [`start`](Self::start)
    /// (within the buffer), so jobs the worker finished before the call are not missed.
    /// One subscriber at a time: a later call starts from that moment and ends the previous
    /// stream.
    ///
    /// **Slow consumers**: the worker never waits for the stream. When the buffer is full, new
    /// events are dropped and counted; the next one that fits is preceded by a
    /// [`WorkerEvent::Lagged`] with the count. The stream ends when the worker is closed, once
    /// the events it holds are read.
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(w: autobatch_driver::Worker<R>) {
    /// use futures_util::StreamExt;
    /// let mut events = w.events();
    /// while let Some(e) = events.next().await {
    ///     println!("{e:?}");
    /// }
    /// # }
    /// ```
    pub fn events(&self) -> impl Stream<Item = WorkerEvent> + Send + Unpin + 'static {
        self.inner.events.subscribe()
    }

    /// Stops pulling new jobs; the jobs held go on and are reported as usual.
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(w: autobatch_driver::Worker<R>) {
    /// w.pause();
    /// assert!(w.is_paused());
    /// w.resume();
    /// # }
    /// ```
    pub fn pause(&self) {
        self.inner.paused.store(true, Ordering::Release);
        self.inner
            .client
            .broadcast(|| Cmd::Worker(WorkerCmd::Pause(true)));
    }

    /// Resumes pulling after [`pause`](Self::pause).
    pub fn resume(&self) {
        self.inner.paused.store(false, Ordering::Release);
        self.inner
            .client
            .broadcast(|| Cmd::Worker(WorkerCmd::Pause(false)));
    }

    /// Whether [`pause`](Self::pause) is in effect.
    pub fn is_paused(&self) -> bool {
        self.inner.paused.load(Ordering::Acquire)
    }

    /// Jobs being processed now.
    pub fn running(&self) -> usize {
        self.inner.running()
    }

    /// The connection's counters (jobs received, completed, failed; ACKB frames).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(w: autobatch_driver::Worker<R>) {
    /// let s = w.stats().await;
    /// println!("{} completed, {} failed", s.session.jobs_completed, s.session.jobs_failed);
    /// # }
    /// ```
    pub async fn stats(&self) -> ClientStats {
        self.inner.client.stats().await
    }

    /// Each broker's connection counters, in the order the brokers were given (one entry with
    /// one broker): with several brokers the worker pulls from every one of them.
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(w: autobatch_driver::Worker<R>) {
    /// for (i, s) in w.broker_stats().await.iter().enumerate() {
    ///     println!("broker {i}: {} jobs received", s.session.jobs_received);
    /// }
    /// # }
    /// ```
    pub async fn broker_stats(&self) -> Vec<ClientStats> {
        self.inner.client.broker_stats().await
    }

    /// Stops pulling, waits for every job held to finish, flushes their ACKs and FAILs,
    /// unregisters the worker, then disconnects. Jobs not yet pulled stay in the queue.
    /// Dropping the worker closes it in the background (without waiting to unregister:
    /// the server marks it stale).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(w: autobatch_driver::Worker<R>) {
    /// w.close().await;
    /// # }
    /// ```
    pub async fn close(&self) {
        self.close_inner(None).await;
    }

    /// Like [`close`](Self::close), but waits at most `grace` for the jobs running: those
    /// still running then are stopped (their processor futures dropped) and handed back to
    /// waiting at once (MoveToWait with their lock tokens, the attempt not counted), instead of
    /// holding their locks until they expire.
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(w: autobatch_driver::Worker<R>) {
    /// let report = w.close_with_grace(std::time::Duration::from_secs(5)).await;
    /// println!("{} jobs handed back", report.released.len());
    /// # }
    /// ```
    pub async fn close_with_grace(&self, grace: Duration) -> CloseReport {
        self.close_inner(Some(grace)).await
    }

    /// Jobs the connection holds (running, or pulled and not yet started), plus one while a
    /// pull is out.
    async fn jobs_held(&self) -> usize {
        let mut held = 0;
        for sender in self.inner.client.senders() {
            let (tx, rx) = futures_channel::oneshot::channel();
            if sender
                .unbounded_send(Cmd::Worker(WorkerCmd::JobsHeld(tx)))
                .is_ok()
            {
                held += rx.await.unwrap_or(0);
            }
        }
        held
    }

    async fn close_inner(&self, grace: Option<Duration>) -> CloseReport {
        let inner = &self.inner;
        tracing::debug!(queue = %inner.queue, "worker closing");
        inner
            .client
            .broadcast(|| Cmd::Worker(WorkerCmd::Pause(true)));
        let deadline = grace.map(|g| inner.runtime.now() + g);
        let mut report = CloseReport::default();
        // Polls for the jobs held to be settled (running, or handed out and not yet started,
        // or on their way in a pull still out): a close is rare, a short period is cheap.
        while self.jobs_held().await > 0 {
            if deadline.is_some_and(|d| inner.runtime.now() >= d) {
                // Past the grace period: no job on its way to the dispatcher starts now, the
                // running ones stop, and every job held is handed back. A pull still out may
                // deliver more: the next round hands those back too.
                inner.forced.store(true, Ordering::Release);
                let handles: Vec<AbortHandle> = inner
                    .running
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .drain()
                    .map(|(_, r)| r.abort)
                    .collect();
                for h in handles {
                    h.abort();
                }
                for sender in inner.client.senders() {
                    let (tx, rx) = futures_channel::oneshot::channel();
                    if sender
                        .unbounded_send(Cmd::Worker(WorkerCmd::ReleaseHeld(tx)))
                        .is_err()
                    {
                        continue;
                    }
                    let released = rx.await.unwrap_or_default();
                    if !released.is_empty() {
                        inner.events.emit_with(|| WorkerEvent::Released {
                            ids: released.clone(),
                        });
                        report.released.extend(released);
                    }
                }
            }
            sleep(&inner.runtime, Duration::from_millis(20)).await;
        }
        report.released.sort();
        inner.stopped.store(true, Ordering::Release);
        // Not when every broker is down: it would wait there for the command timeout.
        if inner.client.links().any_connected() {
            let _ = inner
                .client
                .run(ops::UnregisterWorker::new(inner.worker_id.as_str()))
                .await;
        }
        inner.client.close().await;
        inner.events.close();
        report
    }
}

impl<R: Runtime> Inner<R> {
    /// Runs each job the pumps hand out on a task of its own, and takes their reports,
    /// until every pump has dropped the job channel.
    async fn dispatch<F, Fut, T, E>(
        self: Arc<Self>,
        processor: Arc<F>,
        mut jobs: mpsc::UnboundedReceiver<(usize, Dispatch)>,
    ) where
        F: Fn(ActiveJob) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
        T: JobOutput + 'static,
        E: Display + 'static,
    {
        while let Some((from, dispatch)) = jobs.next().await {
            let (job, token) = match dispatch {
                Dispatch::Job(job, token) => (job, token),
                Dispatch::Drained => {
                    self.events.emit_with(|| WorkerEvent::Drained);
                    continue;
                }
                Dispatch::LockLost(id) => {
                    self.events.emit_with(|| WorkerEvent::LockLost { id });
                    continue;
                }
                Dispatch::HandOff(cmd) => {
                    self.send_elsewhere(*cmd, "results".to_owned());
                    continue;
                }
                Dispatch::SettleFailed(id, e) => {
                    self.events.emit_with(|| WorkerEvent::Error {
                        message: format!("job {id}: result not delivered: {e}"),
                    });
                    continue;
                }
            };
            if self.forced.load(Ordering::Acquire) {
                // A forced close is under way: not started. The close hands it back (it
                // waits for every job held, including those a pull still out delivers).
                continue;
            }
            self.start_job(from, job, token, processor.clone());
        }
    }

    /// Runs `job`, from link `from`, on a task of its own, and settles it when it ends
    /// (unless a forced close aborts it).
    fn start_job<F, Fut, T, E>(
        self: &Arc<Self>,
        from: usize,
        job: Job,
        token: Option<String>,
        processor: Arc<F>,
    ) where
        F: Fn(ActiveJob) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
        T: JobOutput + 'static,
        E: Display + 'static,
    {
        let id = job.id.clone();
        let held_with = token.clone();
        let active = ActiveJob::new(job, token, self.links[from].clone());
        self.events
            .emit_with(|| WorkerEvent::Active { id: id.clone() });
        let (abort, registration) = AbortHandle::new_pair();
        let running = Running {
            abort,
            from,
            token: held_with,
        };
        self.running_jobs().insert(id.clone(), running);
        let task = Abortable::new(async move { run(&*processor, active).await }, registration);
        let inner = self.clone();
        self.runtime.spawn(Box::pin(async move {
            let outcome = task.await;
            let token = inner.running_jobs().remove(&id).and_then(|r| r.token);
            // Stopped by a forced close: the job was handed back already.
            let Ok(outcome) = outcome else { return };
            inner.settle(from, id, token, outcome);
        }));
    }

    fn running_jobs(&self) -> std::sync::MutexGuard<'_, HashMap<String, Running>> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reports a processor's outcome to the broker (link `from`) the job came from, or, if
    /// that broker was lost and the fleet shares storage, to a live one with the job's lock
    /// `token`.
    fn settle(
        self: &Arc<Self>,
        from: usize,
        id: String,
        token: Option<String>,
        outcome: Result<Value, Failure>,
    ) {
        let Some(how) = self.settlement(from, &id, outcome) else {
            return;
        };
        let tx = &self.links[from].tx;
        if self.orphaned(from) {
            // Its own session forgets it (no lock renewal, not held), and a live broker
            // settles it with its token.
            let _ = tx.unbounded_send(settle::forget(id.clone()));
            self.send_elsewhere(
                settle::command(id.clone(), token, how),
                format!("job {id}: result"),
            );
            return;
        }
        let cmd = match how {
            Settlement::Complete(result) => WorkerCmd::Complete { id, result },
            Settlement::Fail {
                error,
                stack,
                unrecoverable,
            } => WorkerCmd::Fail {
                id,
                error,
                stack,
                unrecoverable,
            },
            Settlement::Delay(delay) => WorkerCmd::Delay { id, delay },
            // Sent by `settlement`.
            Settlement::RateLimited => return,
        };
        let _ = tx.unbounded_send(Cmd::Worker(cmd));
    }

    /// Counts and reports a processor's outcome, and says how the job is settled; `None`
    /// when that is done already (a rate-limited job, sent back to its own link).
    fn settlement(
        &self,
        from: usize,
        id: &str,
        outcome: Result<Value, Failure>,
    ) -> Option<Settlement> {
        let id = id.to_owned();
        let (message, stack, outcome) = match outcome {
            Ok(result) => {
                self.processed.fetch_add(1, Ordering::Relaxed);
                self.events.emit_with(|| WorkerEvent::Completed {
                    id,
                    result: result.clone(),
                });
                return Some(Settlement::Complete(result));
            }
            Err(Failure {
                message,
                stack,
                outcome,
            }) => (message, stack, outcome),
        };
        match outcome {
            Outcome::Delay(delay) => {
                self.events.emit_with(|| WorkerEvent::Delayed { id, delay });
                Some(Settlement::Delay(delay))
            }
            Outcome::RateLimited(wait) => {
                self.events.emit_with(|| WorkerEvent::RateLimited {
                    id: id.clone(),
                    wait,
                });
                if self.orphaned(from) {
                    return Some(Settlement::RateLimited);
                }
                let cmd = Cmd::Worker(WorkerCmd::RateLimited { id, wait });
                let _ = self.links[from].tx.unbounded_send(cmd);
                None
            }
            Outcome::Retry | Outcome::Unrecoverable => {
                let unrecoverable = outcome == Outcome::Unrecoverable;
                tracing::debug!(job = %id, unrecoverable, "job failed");
                self.failed.fetch_add(1, Ordering::Relaxed);
                self.events.emit_with(|| WorkerEvent::Failed {
                    id,
                    reason: message.clone(),
                    unrecoverable,
                });
                Some(Settlement::Fail {
                    error: message,
                    stack,
                    unrecoverable,
                })
            }
        }
    }

    /// Sends a settlement through any live broker, on a task of its own; a failure is
    /// reported as an error event about `what`.
    fn send_elsewhere(self: &Arc<Self>, cmd: Command, what: String) {
        let inner = self.clone();
        self.runtime.spawn(Box::pin(async move {
            let replay = settle::replay(&cmd);
            match inner.client.command(cmd, replay).await {
                Ok(_) => tracing::debug!("{what} settled on another broker"),
                Err(e) => inner.events.emit_with(|| WorkerEvent::Error {
                    message: format!("{what} not delivered: {e}"),
                }),
            }
        }));
    }
}

impl<R: Runtime> Drop for Worker<R> {
    /// A dropped worker closes as [`close`](Worker::close) does, in the background: the
    /// processors running keep their own handle on the connection, so without this it would
    /// never end.
    fn drop(&mut self) {
        self.inner.stopped.store(true, Ordering::Release);
        self.inner.events.close();
        self.inner
            .client
            .broadcast(|| Cmd::Close(futures_channel::oneshot::channel().0));
    }
}

/// Runs the processor on one job; a panic (when called or while polled) fails the job alone.
async fn run<F, Fut, T, E>(processor: &F, job: ActiveJob) -> Result<Value, Failure>
where
    F: Fn(ActiveJob) -> Fut,
    Fut: Future<Output = Result<T, E>>,
    T: JobOutput,
    E: Display + 'static,
{
    let fut = match std::panic::catch_unwind(AssertUnwindSafe(|| processor(job))) {
        Ok(fut) => fut,
        Err(p) => return Err(Failure::plain(panic_message(&*p))),
    };
    match AssertUnwindSafe(fut).catch_unwind().await {
        Ok(Ok(v)) => v
            .into_value()
            .map_err(|e| Failure::plain(format!("job result is not serializable: {e}"))),
        Ok(Err(e)) => Err(Failure::of(e)),
        Err(p) => Err(Failure::plain(panic_message(&*p))),
    }
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    let msg = p
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic payload".into());
    format!("processor panicked: {msg}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Outer(std::num::ParseIntError);
    impl Display for Outer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("bad order id")
        }
    }
    impl StdError for Outer {
        fn source(&self) -> Option<&(dyn StdError + 'static)> {
            Some(&self.0)
        }
    }

    fn outer() -> Outer {
        Outer("x".parse::<u32>().unwrap_err())
    }

    #[test]
    fn failures_carry_what_their_error_type_can_tell() {
        let plain = Failure::of(String::from("boom"));
        assert_eq!(
            (plain.message.as_str(), plain.stack),
            ("boom", vec!["boom".to_owned()])
        );

        let chain = ["bad order id", "caused by: invalid digit found in string"];
        let boxed: Box<dyn StdError + Send + Sync> = Box::new(outer());
        let f = Failure::of(boxed);
        assert_eq!(f.message, "bad order id");
        assert_eq!(f.stack, chain);

        let f = Failure::of(JobError::with_backtrace(outer(), Backtrace::disabled()));
        assert_eq!(f.stack, chain);

        // A captured backtrace follows the causes; the whole stays within bunqueue's 100 lines.
        let f = Failure::of(JobError::with_backtrace(
            outer(),
            Backtrace::force_capture(),
        ));
        assert_eq!(f.stack[..2], chain);
        assert!(
            f.stack.len() > 2 && f.stack.len() <= 100,
            "{}",
            f.stack.len()
        );
    }
}
