//! The consumer side: a [`Worker`] pulls jobs, runs a processor on each, and reports the
//! outcomes (completions batched into ACKB, failures as FAIL).

use std::any::Any;
use std::backtrace::{Backtrace, BacktraceStatus};
use std::error::Error as StdError;
use std::fmt::{self, Display};
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use autobatch_core::wire::{Job, Value};
use futures_channel::mpsc;
use futures_util::{FutureExt, StreamExt};
use serde::Serialize;

use crate::client::{start, Client};
use crate::pump::Cmd;
use crate::runtime::Runtime;
use crate::{ClientOptions, ClientStats, ConnectError, WorkerOptions};

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
}

impl JobError {
    /// Wraps `error`, capturing a backtrace here (if enabled, see the type's docs).
    pub fn new(error: impl Into<Box<dyn StdError + Send + Sync>>) -> Self {
        JobError {
            error: error.into(),
            backtrace: Backtrace::capture(),
        }
    }

    /// Wraps `error` with a backtrace captured elsewhere (by your own error type, say).
    pub fn with_backtrace(
        error: impl Into<Box<dyn StdError + Send + Sync>>,
        backtrace: Backtrace,
    ) -> Self {
        JobError {
            error: error.into(),
            backtrace,
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
}

impl Failure {
    fn plain(message: String) -> Self {
        let stack = message.lines().map(str::to_owned).collect();
        Failure { message, stack }
    }

    /// Reads what the processor's error type can tell: a [`JobError`] or a boxed
    /// `std::error::Error` gives its cause chain (and backtrace), anything else its text.
    fn of<E: Display + 'static>(e: E) -> Self {
        let any: &dyn Any = &e;
        let stack = if let Some(j) = any.downcast_ref::<JobError>() {
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
        }
    }
}

/// A worker on its own connection: pulls jobs from one queue, runs up to `concurrency`
/// processors at once, and reports each outcome.
///
/// A processor's `Ok` value becomes the job's result (sent in a batched ACKB); an `Err`
/// becomes a FAIL with its `Display` text (the server retries the job while attempts remain)
/// and, as the job's `stacktrace`, its cause chain and backtrace when the error is a
/// [`JobError`] or a `Box<dyn Error + Send + Sync>` (see [`JobError`]); a panic fails only that
/// job.
///
/// ```no_run
/// # async fn demo<R: autobatch_driver::Runtime + Default>() -> Result<(), Box<dyn std::error::Error>> {
/// use autobatch_driver::{ClientOptions, Job, Worker, WorkerOptions};
///
/// let worker = Worker::<R>::start(
///     ClientOptions::default(),
///     WorkerOptions::new("emails").concurrency(10),
///     |job: Job| async move {
///         let to: String = job.data.deserialize().map_err(|e| e.to_string())?;
///         Ok::<_, String>(format!("sent to {to}"))
///     },
/// )
/// .await?;
/// // ... later:
/// worker.close().await;
/// # Ok(()) }
/// ```
pub struct Worker<R: Runtime> {
    client: Client<R>,
    queue: Arc<str>,
}

impl<R: Runtime> fmt::Debug for Worker<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Worker")
            .field("queue", &&*self.queue)
            .field("client", &self.client)
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
    /// let w = Worker::<R>::start(ClientOptions::default(), WorkerOptions::new("q"),
    ///     |_job| async { Ok::<(), String>(()) }).await?;
    /// # w.close().await; Ok(()) }
    /// ```
    pub async fn start<F, Fut, T, E>(
        options: ClientOptions,
        worker: WorkerOptions,
        processor: F,
    ) -> Result<Self, ConnectError>
    where
        R: Default,
        F: Fn(Job) -> Fut + Send + Sync + 'static,
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
        F: Fn(Job) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
        T: JobOutput + 'static,
        E: Display + 'static,
    {
        let config = worker.worker_config()?;
        let (jobs_tx, mut jobs_rx) = mpsc::unbounded::<Job>();
        let (tx, shared) = start(runtime.clone(), &options, Some((config, jobs_tx))).await?;
        let client = Client::<R>::from_parts(tx, shared);
        let processor = Arc::new(processor);
        let done = client.sender().clone();
        let rt = runtime.clone();
        // The dispatcher: one task per job (the session never hands out more than
        // `concurrency` at once). It ends when the pump drops the job channel.
        runtime.spawn(Box::pin(async move {
            while let Some(job) = jobs_rx.next().await {
                let processor = processor.clone();
                let done = done.clone();
                rt.spawn(Box::pin(async move {
                    let id = job.id.clone();
                    let cmd = match run(&*processor, job).await {
                        Ok(result) => Cmd::Complete { id, result },
                        Err(Failure { message, stack }) => {
                            tracing::debug!(job = %id, "job failed");
                            Cmd::Fail {
                                id,
                                error: message,
                                stack,
                            }
                        }
                    };
                    let _ = done.unbounded_send(cmd);
                }));
            }
        }));
        tracing::debug!(queue = %worker.queue, concurrency = worker.concurrency, "worker started");
        Ok(Worker {
            client,
            queue: Arc::from(worker.queue.as_str()),
        })
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
        self.client.stats().await
    }

    /// Stops pulling, waits for every job held to finish, flushes their ACKs and FAILs, then
    /// disconnects. Jobs not yet pulled stay in the queue. Dropping the worker does the same
    /// in the background.
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(w: autobatch_driver::Worker<R>) {
    /// w.close().await;
    /// # }
    /// ```
    pub async fn close(&self) {
        tracing::debug!(queue = %self.queue, "worker closing");
        self.client.close().await;
    }
}

impl<R: Runtime> Drop for Worker<R> {
    /// A dropped worker closes as [`close`](Worker::close) does, in the background: the
    /// processors running keep their own handle on the connection, so without this it would
    /// never end.
    fn drop(&mut self) {
        let (tx, _) = futures_channel::oneshot::channel();
        let _ = self.client.sender().unbounded_send(Cmd::Close(tx));
    }
}

/// Runs the processor on one job; a panic (when called or while polled) fails the job alone.
async fn run<F, Fut, T, E>(processor: &F, job: Job) -> Result<Value, Failure>
where
    F: Fn(Job) -> Fut,
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
