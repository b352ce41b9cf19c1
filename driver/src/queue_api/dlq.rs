//! The dead-letter queue: list, stats, retry, purge, remove, and its configuration.

use autobatch_core::ops::{self, DlqConfig, DlqConfigUpdate, DlqEntry, DlqFilter, DlqStats};
use autobatch_core::wire::Job;

use crate::{Error, Queue, Runtime};

impl<R: Runtime> Queue<R> {
    /// The entries of this queue's dead-letter queue that `filter` selects (all with
    /// [`DlqFilter::new`]), oldest first, each with its failure history (TS `getDlqAsync`).
    ///
    /// # Errors
    ///
    /// As [`Client::run`](crate::Client::run).
    ///
    /// ```no_run
    /// use autobatch_driver::ops::{DlqFilter, FailureReason};
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// for entry in q.get_dlq(DlqFilter::new().reason(FailureReason::Stalled).limit(20)).await? {
    ///     println!("{} failed {} times: {:?}", entry.job.id, entry.attempts.len(), entry.error);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn get_dlq(&self, filter: DlqFilter) -> Result<Vec<DlqEntry>, Error> {
        let op = if filter == DlqFilter::new() {
            ops::Dlq::new(&*self.name)
        } else {
            ops::Dlq::new(&*self.name).filter(filter)
        };
        self.client.run(op).await
    }

    /// The jobs of this queue's dead-letter queue, at most `count` (all with `None`), oldest
    /// first (TS `getDlqJobsAsync`).
    ///
    /// # Errors
    ///
    /// As [`Client::run`](crate::Client::run).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// let failed = q.get_dlq_jobs(Some(10)).await?;
    /// println!("{} dead jobs", failed.len());
    /// # Ok(()) }
    /// ```
    pub async fn get_dlq_jobs(&self, count: Option<u64>) -> Result<Vec<Job>, Error> {
        let mut op = ops::Dlq::new(&*self.name);
        op.count = count;
        let entries = self.client.run(op).await?;
        Ok(entries.into_iter().map(|e| e.job).collect())
    }

    /// Counts of this queue's dead-letter queue: by reason, pending retries, expired
    /// (TS `getDlqStatsAsync`).
    ///
    /// # Errors
    ///
    /// As [`Client::run`](crate::Client::run).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// let stats = q.get_dlq_stats().await?;
    /// println!("{} dead, {} due for retry", stats.total, stats.pending_retry);
    /// # Ok(()) }
    /// ```
    pub async fn get_dlq_stats(&self) -> Result<DlqStats, Error> {
        self.client.run(ops::GetDlqStats::new(&*self.name)).await
    }

    /// Moves DLQ entries back to the queue as waiting jobs: job `id` only, or all with `None`;
    /// returns how many (TS `retryDlqAsync`).
    ///
    /// # Errors
    ///
    /// As [`Client::run`](crate::Client::run). Not replayed after a lost connection.
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// let retried = q.retry_dlq(None).await?;
    /// println!("{retried} jobs back in the queue");
    /// # Ok(()) }
    /// ```
    pub async fn retry_dlq(&self, id: Option<&str>) -> Result<u64, Error> {
        let op = match id {
            Some(id) => ops::RetryDlq::job(&*self.name, id),
            None => ops::RetryDlq::all(&*self.name),
        };
        self.client.run(op).await
    }

    /// Retries the first `count` DLQ entries; returns how many.
    ///
    /// # Errors
    ///
    /// As [`Client::run`](crate::Client::run). Not replayed after a lost connection.
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// q.retry_dlq_count(100).await?;
    /// # Ok(()) }
    /// ```
    pub async fn retry_dlq_count(&self, count: u64) -> Result<u64, Error> {
        self.client
            .run(ops::RetryDlq::first(&*self.name, count))
            .await
    }

    /// Retries the DLQ entries `filter` selects; returns how many (TS
    /// `retryDlqByFilterAsync`).
    ///
    /// # Errors
    ///
    /// As [`Client::run`](crate::Client::run). Not replayed after a lost connection.
    ///
    /// ```no_run
    /// use autobatch_driver::ops::{DlqFilter, FailureReason};
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// q.retry_dlq_by_filter(DlqFilter::new().reason(FailureReason::Timeout)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn retry_dlq_by_filter(&self, filter: DlqFilter) -> Result<u64, Error> {
        self.client
            .run(ops::RetryDlq::filtered(&*self.name, filter))
            .await
    }

    /// Removes every DLQ entry for good; returns how many (TS `purgeDlqAsync`).
    ///
    /// # Errors
    ///
    /// As [`Client::run`](crate::Client::run). Not replayed after a lost connection.
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// let purged = q.purge_dlq().await?;
    /// # Ok(()) }
    /// ```
    pub async fn purge_dlq(&self) -> Result<u64, Error> {
        self.client.run(ops::PurgeDlq::new(&*self.name)).await
    }

    /// Removes job `id`'s DLQ entry for good, without retrying it; returns whether there
    /// was one (TS `removeDlqJobAsync`).
    ///
    /// # Errors
    ///
    /// As [`Client::run`](crate::Client::run). Not replayed after a lost connection.
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// if !q.remove_dlq_job("0190-abc").await? {
    ///     println!("not in the DLQ");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn remove_dlq_job(&self, id: &str) -> Result<bool, Error> {
        self.client
            .run(ops::RemoveDlqJob::new(&*self.name, id))
            .await
    }

    /// This queue's DLQ settings (TS `getDlqConfigAsync`).
    ///
    /// # Errors
    ///
    /// As [`Client::run`](crate::Client::run).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// let config = q.get_dlq_config().await?;
    /// println!("auto retry: {}", config.auto_retry);
    /// # Ok(()) }
    /// ```
    pub async fn get_dlq_config(&self) -> Result<DlqConfig, Error> {
        self.client.run(ops::GetDlqConfig::new(&*self.name)).await
    }

    /// Changes some of this queue's DLQ settings (TS `setDlqConfigAsync`).
    ///
    /// # Errors
    ///
    /// As [`Client::run`](crate::Client::run).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use autobatch_driver::ops::DlqConfigUpdate;
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// q.set_dlq_config(DlqConfigUpdate::new().auto_retry(true).auto_retry_interval(Duration::from_secs(600))).await?;
    /// # Ok(()) }
    /// ```
    pub async fn set_dlq_config(&self, config: DlqConfigUpdate) -> Result<(), Error> {
        self.client
            .run(ops::SetDlqConfig::new(&*self.name, config))
            .await
    }
}
