//! Queue methods for flows: children's values and failures, and waiting for a job to finish.
//! Adding flows is [`FlowProducer`](crate::FlowProducer)'s.

use std::time::Duration;

use autobatch_core::ops::{self, WaitOutcome};

use crate::{Error, Queue, Runtime, Value};

/// Longest single `WaitJob` [`Queue::wait_until_finished`] sends: far below the default
/// 30 s command timeout, so a held reply is never mistaken for a dead connection.
const WAIT_CHUNK: Duration = Duration::from_secs(5);

impl<R: Runtime> Queue<R> {
    /// The return values of parent job `id`'s completed children, keyed
    /// `"<queue>:<childId>"`, in the parent's order (`GetChildrenValues`). Children not
    /// completed are absent; an unknown parent gives an empty list.
    ///
    /// # Errors
    ///
    /// As [`Client::run`](crate::Client::run).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// for (child, value) in q.get_children_values("parent-id").await? {
    ///     println!("{child}: {value:?}");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn get_children_values(&self, id: &str) -> Result<Vec<(String, Value)>, Error> {
        self.client.run(ops::GetChildrenValues::new(id)).await
    }

    /// The errors of parent job `id`'s children that failed for good with a
    /// `FailParent`/`ContinueParent` policy (`GetFailedChildrenValues`).
    ///
    /// # Errors
    ///
    /// As [`Client::run`](crate::Client::run).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// let failed = q.get_failed_children_values("parent-id").await?;
    /// # Ok(()) }
    /// ```
    pub async fn get_failed_children_values(
        &self,
        id: &str,
    ) -> Result<Vec<(String, Value)>, Error> {
        self.client.run(ops::GetFailedChildrenValues::new(id)).await
    }

    /// The failures of parent job `id`'s children that had the `Ignore` policy
    /// (`GetIgnoredChildrenFailures`).
    ///
    /// # Errors
    ///
    /// As [`Client::run`](crate::Client::run).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// let ignored = q.get_ignored_children_failures("parent-id").await?;
    /// # Ok(()) }
    /// ```
    pub async fn get_ignored_children_failures(
        &self,
        id: &str,
    ) -> Result<Vec<(String, Value)>, Error> {
        self.client
            .run(ops::GetIgnoredChildrenFailures::new(id))
            .await
    }

    /// One `WaitJob`: holds until job `id` completes or `timeout` (at most 10 minutes)
    /// passes. Keep `timeout` below the client's command timeout; prefer
    /// [`wait_until_finished`](Self::wait_until_finished).
    ///
    /// # Errors
    ///
    /// `Job not found` ([`Error::Server`]) for an unknown id; [`Error::Invalid`] for a
    /// timeout over 10 minutes; otherwise as [`Client::run`](crate::Client::run).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// use autobatch_driver::ops::WaitOutcome;
    /// match q.wait_job("job-id", std::time::Duration::from_secs(2)).await? {
    ///     WaitOutcome::Completed(value) => println!("done: {value:?}"),
    ///     _ => println!("not yet"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn wait_job(&self, id: &str, timeout: Duration) -> Result<WaitOutcome, Error> {
        self.client
            .run(ops::WaitJob::new(id).timeout(timeout))
            .await
    }

    /// Waits until job `id` completes and returns its return value, or `None` when
    /// `timeout` passes first. Long waits are split into `WaitJob`s of at most 5 s, so
    /// any command timeout above that works and a lost connection costs one short wait
    /// (`WaitJob` is a read: it is sent again after a reconnect). A job that fails for good
    /// never completes: this then returns `None` at the timeout.
    ///
    /// # Errors
    ///
    /// `Job not found` ([`Error::Server`]) for an unknown id; otherwise as
    /// [`Client::run`](crate::Client::run).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// if let Some(value) = q.wait_until_finished("job-id", std::time::Duration::from_secs(60)).await? {
    ///     println!("result: {value:?}");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn wait_until_finished(
        &self,
        id: &str,
        timeout: Duration,
    ) -> Result<Option<Value>, Error> {
        let mut left = timeout;
        loop {
            // A TimedOut reply means the server waited the whole chunk: no clock is needed.
            let chunk = left.min(WAIT_CHUNK);
            match self.wait_job(id, chunk).await? {
                WaitOutcome::Completed(v) => return Ok(Some(v)),
                _ if left <= chunk => return Ok(None),
                _ => left -= chunk,
            }
        }
    }
}
