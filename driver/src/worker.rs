//! The consumer side: a [`Worker`] pulls jobs, runs a processor on each, and reports the
//! outcomes (completions batched into ACKB, failures as FAIL).

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

/// A worker on its own connection: pulls jobs from one queue, runs up to `concurrency`
/// processors at once, and reports each outcome.
///
/// A processor's `Ok` value becomes the job's result (sent in a batched ACKB); an `Err`
/// becomes a FAIL with its `Display` text (the server retries the job while attempts remain);
/// a panic fails only that job.
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
                        Err(error) => {
                            tracing::debug!(job = %id, "job failed");
                            Cmd::Fail { id, error }
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
async fn run<F, Fut, T, E>(processor: &F, job: Job) -> Result<Value, String>
where
    F: Fn(Job) -> Fut,
    Fut: Future<Output = Result<T, E>>,
    T: JobOutput,
    E: Display,
{
    let fut = match std::panic::catch_unwind(AssertUnwindSafe(|| processor(job))) {
        Ok(fut) => fut,
        Err(p) => return Err(panic_message(&*p)),
    };
    match AssertUnwindSafe(fut).catch_unwind().await {
        Ok(Ok(v)) => v
            .into_value()
            .map_err(|e| format!("job result is not serializable: {e}")),
        Ok(Err(e)) => Err(e.to_string()),
        Err(p) => Err(panic_message(&*p)),
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
