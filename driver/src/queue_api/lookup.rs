//! Lookups: jobs by state or custom id, counts per priority, limits, deduplication keys,
//! workers, metrics; and, on [`Client`], the server-wide ones (queues, workers, stats).

use std::time::Duration;

use autobatch_core::ops::{self, MetricsReply, MetricsType};
use autobatch_core::wire::{Job, JobState};
use autobatch_core::ServerErrorKind;

use crate::millis::wait_from_ms;
use crate::{Client, Error, Queue, Runtime};

impl<R: Runtime> Queue<R> {
    /// Up to `limit` of the queue's jobs in any of `states` (every state when empty), oldest
    /// first, skipping the first `offset`. For newest first, run
    /// [`ops::GetJobs`] with [`asc(false)`](ops::GetJobs::asc) through
    /// [`Client::run`].
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] for a state bunqueue does not know (the server would silently
    /// answer with nothing); otherwise as [`Client::run`].
    ///
    /// ```no_run
    /// use autobatch_driver::JobState;
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// for job in q.get_jobs(&[JobState::Waiting, JobState::Delayed], 0, 50).await? {
    ///     println!("{} {:?}", job.id, job.state);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn get_jobs(
        &self,
        states: &[JobState],
        offset: u64,
        limit: u64,
    ) -> Result<Vec<Job>, Error> {
        let op = ops::GetJobs::new(&*self.name)
            .states(states.iter().cloned())
            .offset(offset)
            .limit(limit);
        self.client.run(op).await
    }

    /// Jobs `start..end` in one state, as the TS client's `getWaiting(start, end)` and its
    /// siblings page.
    async fn jobs_in(&self, state: JobState, start: u64, end: u64) -> Result<Vec<Job>, Error> {
        self.get_jobs(&[state], start, end.saturating_sub(start))
            .await
    }

    /// Waiting jobs `start..end` (oldest first).
    ///
    /// # Errors
    ///
    /// As [`Client::run`].
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// let first_ten = q.get_waiting(0, 10).await?;
    /// # Ok(()) }
    /// ```
    pub async fn get_waiting(&self, start: u64, end: u64) -> Result<Vec<Job>, Error> {
        self.jobs_in(JobState::Waiting, start, end).await
    }

    /// Prioritized jobs `start..end`.
    ///
    /// # Errors
    ///
    /// As [`Client::run`].
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// let jobs = q.get_prioritized(0, 10).await?;
    /// # Ok(()) }
    /// ```
    pub async fn get_prioritized(&self, start: u64, end: u64) -> Result<Vec<Job>, Error> {
        self.jobs_in(JobState::Prioritized, start, end).await
    }

    /// Delayed jobs `start..end`.
    ///
    /// # Errors
    ///
    /// As [`Client::run`].
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// let jobs = q.get_delayed(0, 10).await?;
    /// # Ok(()) }
    /// ```
    pub async fn get_delayed(&self, start: u64, end: u64) -> Result<Vec<Job>, Error> {
        self.jobs_in(JobState::Delayed, start, end).await
    }

    /// Active jobs `start..end`.
    ///
    /// # Errors
    ///
    /// As [`Client::run`].
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// let jobs = q.get_active(0, 10).await?;
    /// # Ok(()) }
    /// ```
    pub async fn get_active(&self, start: u64, end: u64) -> Result<Vec<Job>, Error> {
        self.jobs_in(JobState::Active, start, end).await
    }

    /// Completed jobs `start..end`.
    ///
    /// # Errors
    ///
    /// As [`Client::run`].
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// let jobs = q.get_completed(0, 10).await?;
    /// # Ok(()) }
    /// ```
    pub async fn get_completed(&self, start: u64, end: u64) -> Result<Vec<Job>, Error> {
        self.jobs_in(JobState::Completed, start, end).await
    }

    /// Failed jobs `start..end`.
    ///
    /// # Errors
    ///
    /// As [`Client::run`].
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// let jobs = q.get_failed(0, 10).await?;
    /// # Ok(()) }
    /// ```
    pub async fn get_failed(&self, start: u64, end: u64) -> Result<Vec<Job>, Error> {
        self.jobs_in(JobState::Failed, start, end).await
    }

    /// The job added with this custom id (the `job_id` option); `None` if there is none.
    /// Custom ids are server-wide: the job may be in another queue.
    ///
    /// # Errors
    ///
    /// As [`Client::run`] (bunqueue's `Job not found` is `Ok(None)`).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// if let Some(job) = q.get_job_by_custom_id("order-42").await? {
    ///     println!("order-42 is job {}", job.id);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn get_job_by_custom_id(&self, custom_id: &str) -> Result<Option<Job>, Error> {
        match self.client.run(ops::GetJobByCustomId::new(custom_id)).await {
            Ok(job) => Ok(Some(job)),
            Err(Error::Server(e)) if e.kind() == ServerErrorKind::JobNotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// How many ready jobs the queue holds at each priority.
    ///
    /// # Errors
    ///
    /// As [`Client::run`].
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// for (priority, n) in q.get_counts_per_priority().await? {
    ///     println!("priority {priority}: {n}");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn get_counts_per_priority(&self) -> Result<Vec<(f64, u64)>, Error> {
        let c = self
            .client
            .run(ops::GetCountsPerPriority::new(&*self.name))
            .await?;
        Ok(c.counts)
    }

    /// The queue's rate limit, concurrency limit and whether it is maxed out; the rate-limit
    /// wait is computed for taking `max_jobs` jobs when given.
    ///
    /// # Errors
    ///
    /// As [`Client::run`].
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// let limits = q.get_queue_limits(None).await?;
    /// println!("concurrency limit: {:?}", limits.concurrency_limit);
    /// # Ok(()) }
    /// ```
    pub async fn get_queue_limits(&self, max_jobs: Option<u64>) -> Result<ops::QueueLimits, Error> {
        let mut op = ops::GetQueueLimits::new(&*self.name);
        op.max_jobs = max_jobs;
        self.client.run(op).await
    }

    /// How long until jobs may be taken again under the rate limit (`Some(Duration::ZERO)`:
    /// now), or `None` when the queue has no rate limit; the TS client's
    /// `getRateLimitTtl(maxJobs)`, which says `-2` for `None`.
    ///
    /// # Errors
    ///
    /// As [`Client::run`].
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// if let Some(wait) = q.get_rate_limit_ttl(Some(10)).await? {
    ///     println!("next job in {wait:?}");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn get_rate_limit_ttl(
        &self,
        max_jobs: Option<u64>,
    ) -> Result<Option<Duration>, Error> {
        let ttl = self.get_queue_limits(max_jobs).await?.rate_limit_ttl;
        Ok(wait_from_ms(ttl))
    }

    /// Whether every global concurrency slot of the queue is taken.
    ///
    /// # Errors
    ///
    /// As [`Client::run`].
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// if q.is_maxed().await? {
    ///     println!("all slots busy");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn is_maxed(&self) -> Result<bool, Error> {
        Ok(self.get_queue_limits(None).await?.maxed)
    }

    /// The id of the job that holds deduplication key `deduplication_id`; `None` if none.
    ///
    /// # Errors
    ///
    /// As [`Client::run`].
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// let holder = q.get_deduplication_job_id("user-7-welcome").await?;
    /// # Ok(()) }
    /// ```
    pub async fn get_deduplication_job_id(
        &self,
        deduplication_id: &str,
    ) -> Result<Option<String>, Error> {
        self.client
            .run(ops::GetDeduplicationJobId::new(
                &*self.name,
                deduplication_id,
            ))
            .await
    }

    /// The registered workers that take jobs from this queue (the TS client's
    /// `getWorkers()`: every worker, filtered by queue here).
    ///
    /// # Errors
    ///
    /// As [`Client::run`].
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// println!("{} workers", q.get_workers().await?.len());
    /// # Ok(()) }
    /// ```
    pub async fn get_workers(&self) -> Result<Vec<ops::ListedWorker>, Error> {
        let all = self.client.list_workers().await?;
        Ok(all
            .workers
            .into_iter()
            .filter(|w| w.queues.iter().any(|q| **q == *self.name))
            .collect())
    }

    /// The queue's per-minute counts of completed or failed jobs, data points
    /// `start..=end` (`end` -1: to the last), as the TS client's `getMetrics(type, start,
    /// end)`.
    ///
    /// # Errors
    ///
    /// As [`Client::run`].
    ///
    /// ```no_run
    /// use autobatch_driver::ops::MetricsType;
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// let m = q.get_metrics(MetricsType::Completed, 0, -1).await?;
    /// println!("{} completed", m.count);
    /// # Ok(()) }
    /// ```
    pub async fn get_metrics(
        &self,
        kind: MetricsType,
        start: i64,
        end: i64,
    ) -> Result<ops::QueueMetrics, Error> {
        let op = ops::Metrics::queue(&*self.name, kind).range(start, end);
        match self.client.run(op).await? {
            MetricsReply::Queue(m) => Ok(m),
            _ => Err(Error::Protocol(
                "reply to Metrics: server-wide totals for a queue's metrics".into(),
            )),
        }
    }
}

impl<R: Runtime> Client<R> {
    /// Every queue the server knows.
    ///
    /// # Errors
    ///
    /// As [`Client::run`].
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(client: autobatch_driver::Client<R>) -> Result<(), autobatch_driver::Error> {
    /// for name in client.list_queues().await? {
    ///     println!("{name}");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn list_queues(&self) -> Result<Vec<String>, Error> {
        self.run(ops::ListQueues::new()).await
    }

    /// Every registered worker, with totals.
    ///
    /// # Errors
    ///
    /// As [`Client::run`].
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(client: autobatch_driver::Client<R>) -> Result<(), autobatch_driver::Error> {
    /// let list = client.list_workers().await?;
    /// println!("{} of {} workers active", list.stats.active, list.stats.total);
    /// # Ok(()) }
    /// ```
    pub async fn list_workers(&self) -> Result<ops::WorkerList, Error> {
        self.run(ops::ListWorkers::new()).await
    }

    /// Server-wide job totals and throughput (bunqueue's `Stats`; [`stats`](Self::stats) is
    /// this client's own).
    ///
    /// # Errors
    ///
    /// As [`Client::run`].
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(client: autobatch_driver::Client<R>) -> Result<(), autobatch_driver::Error> {
    /// let s = client.server_stats().await?;
    /// println!("{} waiting, {} active", s.waiting, s.active);
    /// # Ok(()) }
    /// ```
    pub async fn server_stats(&self) -> Result<ops::ServerStats, Error> {
        self.run(ops::Stats::new()).await
    }

    /// Server-wide counters and latencies since start (bunqueue's `Metrics` without a queue).
    ///
    /// # Errors
    ///
    /// As [`Client::run`].
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(client: autobatch_driver::Client<R>) -> Result<(), autobatch_driver::Error> {
    /// let m = client.server_metrics().await?;
    /// println!("{} pushed", m.total_pushed);
    /// # Ok(()) }
    /// ```
    pub async fn server_metrics(&self) -> Result<ops::ServerMetrics, Error> {
        match self.run(ops::Metrics::server()).await? {
            MetricsReply::Server(m) => Ok(m),
            _ => Err(Error::Protocol(
                "reply to Metrics: a queue's metrics for server-wide totals".into(),
            )),
        }
    }

    /// Whether the server's storage is healthy.
    ///
    /// # Errors
    ///
    /// As [`Client::run`].
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(client: autobatch_driver::Client<R>) -> Result<(), autobatch_driver::Error> {
    /// if client.storage_status().await?.disk_full {
    ///     eprintln!("bunqueue's disk is full");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn storage_status(&self) -> Result<ops::StorageHealth, Error> {
        self.run(ops::StorageStatus::new()).await
    }
}
