//! The job handle a [`Worker`](crate::Worker)'s processor receives: the job itself, and what a
//! running job may do on the server (progress, log lines, its lock, its data).

use std::fmt;
use std::future::Future;
use std::ops::Deref;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use autobatch_core::ops::{self, Operation};
use autobatch_core::wire::{DataError, Job, Response, Value};
use autobatch_core::Error;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::cmd::{Cmd, InFlight};
use crate::inbox::Sender;
use crate::reply::Outcome;
use crate::worker_events::WorkerEvents;

/// Most requests the job handles of one worker may have sent and not yet had answered
/// (progress, log lines, lock extensions, data updates). Past it, a call sends nothing and its
/// [`Pending`] resolves at once to [`Error::Overflow`]: a processor that reports progress in a
/// tight loop cannot grow the connection's queue without bound.
pub const MAX_UNANSWERED_JOB_UPDATES: usize = 1024;

/// The part of a worker every job handle shares.
#[derive(Clone)]
pub(crate) struct JobLink {
    pub(crate) tx: Sender,
    pub(crate) in_flight: Arc<AtomicUsize>,
    pub(crate) lock_ttl: Duration,
    pub(crate) events: WorkerEvents,
}

/// A job being processed, as a [`Worker`](crate::Worker)'s processor receives it.
///
/// It dereferences to the [`Job`] record (`job.id`, `job.name`, `job.data`, `job.attempts`, …)
/// and adds the calls a running job makes:
/// [`update_progress`](Self::update_progress), [`log`](Self::log),
/// [`extend_lock`](Self::extend_lock), [`update_data`](Self::update_data).
///
/// **These calls never make the job wait for a round trip.** Each sends its request at once
/// (it joins the connection's next write, with the ACKs and the other jobs' updates) and
/// returns a [`Pending`] future for the server's answer: `.await` it to know the outcome, or
/// [`detach`](Pending::detach) (drop) it — the request is sent all the same and its answer is discarded. At most
/// [`MAX_UNANSWERED_JOB_UPDATES`] requests per worker are outstanding; past that a call sends
/// nothing and resolves to [`Error::Overflow`].
///
/// ```no_run
/// # async fn demo<R: autobatch_driver::Runtime + Default>() -> Result<(), Box<dyn std::error::Error>> {
/// use autobatch_driver::{ClientOptions, Worker, WorkerOptions};
/// let worker = Worker::<R>::start(ClientOptions::default(), WorkerOptions::new("reports"),
///     |job| async move {
///         let pages: u32 = job.data()?;
///         for page in 0..pages {
///             // ... render a page, then report without waiting for the server:
///             job.update_progress(100.0 * f64::from(page + 1) / f64::from(pages)).detach();
///         }
///         job.log(format!("rendered {pages} pages")).await?; // this one is awaited
///         Ok::<_, autobatch_driver::JobError>(pages)
///     }).await?;
/// # worker.close().await; Ok(()) }
/// ```
pub struct ActiveJob {
    job: Job,
    token: Option<String>,
    link: JobLink,
}

impl fmt::Debug for ActiveJob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ActiveJob")
            .field("job", &self.job)
            .field("has_token", &self.token.is_some())
            .finish()
    }
}

impl Deref for ActiveJob {
    type Target = Job;

    fn deref(&self) -> &Job {
        &self.job
    }
}

impl ActiveJob {
    pub(crate) fn new(job: Job, token: Option<String>, link: JobLink) -> Self {
        ActiveJob { job, token, link }
    }

    /// The job record.
    pub fn job(&self) -> &Job {
        &self.job
    }

    /// The job record, by value (the handle's calls are gone with it).
    pub fn into_job(self) -> Job {
        self.job
    }

    /// Job id.
    pub fn id(&self) -> &str {
        &self.job.id
    }

    /// Job name.
    pub fn name(&self) -> &str {
        &self.job.name
    }

    /// The job's data deserialised to `T` (use `job.data` for the raw [`Value`]).
    ///
    /// # Errors
    ///
    /// The data does not fit `T`; the error converts into a [`JobError`](crate::JobError)
    /// with `?`.
    pub fn data<T: DeserializeOwned>(&self) -> Result<T, DataError> {
        self.job.data.deserialize()
    }

    /// Attempts made before this one (0 on the first run).
    pub fn attempts_made(&self) -> i64 {
        self.job.attempts
    }

    /// Attempts allowed in all.
    pub fn max_attempts(&self) -> i64 {
        self.job.max_attempts
    }

    /// The lock token the server handed out with the job (`None` when it gave none).
    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// Sets the job's progress (0 to 100; the server clamps) — seen by `GetProgress`, the
    /// queue's `progress` event subscribers and dashboards. Sent at once; see the type's docs
    /// for awaiting or dropping the returned future.
    pub fn update_progress(&self, progress: f64) -> Pending<()> {
        self.link.events.progress(&self.job.id, progress, None);
        self.send(ops::UpdateProgress::new(self.job.id.as_str(), progress))
    }

    /// As [`update_progress`](Self::update_progress), with a progress message.
    pub fn update_progress_with(&self, progress: f64, message: impl Into<String>) -> Pending<()> {
        let message = message.into();
        self.link
            .events
            .progress(&self.job.id, progress, Some(message.clone()));
        self.send(ops::UpdateProgress::new(self.job.id.as_str(), progress).message(message))
    }

    /// Appends a line to the job's log (`GetLogs`, the TS client's `getJobLogs`). Sent at once.
    pub fn log(&self, message: impl Into<String>) -> Pending<()> {
        self.send(ops::AddLog::new(self.job.id.as_str(), message))
    }

    /// Extends the job's lock to `duration` from now, with its token. The worker already
    /// renews the locks of the jobs it holds (see
    /// [`WorkerOptions::heartbeat_interval`](crate::WorkerOptions::heartbeat_interval)); this
    /// is for a job that knows it needs longer. Sent at once.
    pub fn extend_lock(&self, duration: Duration) -> Pending<()> {
        let mut op = ops::ExtendLock::new(self.job.id.as_str(), duration);
        op.token = self.token.clone();
        self.send(op)
    }

    /// The worker's lock time to live, the usual argument of [`extend_lock`](Self::extend_lock).
    pub fn lock_ttl(&self) -> Duration {
        self.link.lock_ttl
    }

    /// Replaces the job's data on the server (a later attempt sees it). Sent at once.
    pub fn update_data<T: Serialize + ?Sized>(&self, data: &T) -> Pending<()> {
        match Value::from_serialize(data) {
            Ok(v) => self.send(ops::UpdateData::new(self.job.id.as_str(), v)),
            Err(e) => Pending::ready(Err(Error::Invalid(
                autobatch_core::wire::ValidationError::new("data", e.0),
            ))),
        }
    }

    fn send<O: Operation>(&self, op: O) -> Pending<O::Output> {
        send(&self.link, op)
    }
}

/// Sends `op` now, counted against [`MAX_UNANSWERED_JOB_UPDATES`].
pub(crate) fn send<O: Operation>(link: &JobLink, op: O) -> Pending<O::Output> {
    if let Err(e) = op.validate() {
        return Pending::ready(Err(Error::Invalid(e)));
    }
    let prev = link.in_flight.fetch_add(1, Ordering::AcqRel);
    if prev >= MAX_UNANSWERED_JOB_UPDATES {
        link.in_flight.fetch_sub(1, Ordering::AcqRel);
        return Pending::ready(Err(Error::Overflow));
    }
    let guard = InFlight::new(link.in_flight.clone());
    let (reply, rx) = link.tx.reply_slot();
    let cmd = Cmd::JobRequest {
        cmd: Box::new(op.to_command()),
        replay: op.replay(),
        reply,
        guard,
    };
    if link.tx.unbounded_send(cmd).is_err() {
        return Pending::ready(Err(Error::Closed));
    }
    Pending {
        state: State::Waiting(rx, read::<O>),
    }
}

fn read<O: Operation>(r: Result<Response, Error>) -> Result<O::Output, Error> {
    match r? {
        Response::Other(body) => {
            O::read_reply(&body).map_err(|e| Error::Protocol(format!("reply to {}: {e}", O::NAME)))
        }
        other => Err(Error::Protocol(format!(
            "unexpected reply to {}: {other:?}",
            O::NAME
        ))),
    }
}

type Reader<T> = fn(Result<Response, Error>) -> Result<T, Error>;

enum State<T> {
    Ready(Option<Result<T, Error>>),
    Waiting(Outcome, Reader<T>),
}

/// The answer to a request a job handle already sent. Await it for the outcome, or drop it:
/// the request is not withdrawn.
pub struct Pending<T> {
    state: State<T>,
}

impl<T> fmt::Debug for Pending<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ready = matches!(self.state, State::Ready(_));
        f.debug_struct("Pending").field("ready", &ready).finish()
    }
}

impl<T> Pending<T> {
    fn ready(r: Result<T, Error>) -> Self {
        Pending {
            state: State::Ready(Some(r)),
        }
    }

    /// Lets the request go without waiting for its answer (the same as dropping the future,
    /// said out loud): `job.update_progress(50.0).detach();`.
    pub fn detach(self) {}
}

impl<T: Unpin> Future for Pending<T> {
    type Output = Result<T, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        match &mut this.state {
            State::Ready(r) => Poll::Ready(r.take().unwrap_or(Err(Error::Closed))),
            State::Waiting(rx, read) => match Pin::new(rx).poll(cx) {
                Poll::Ready(r) => Poll::Ready(read(r.unwrap_or(Err(Error::Closed)))),
                Poll::Pending => Poll::Pending,
            },
        }
    }
}
