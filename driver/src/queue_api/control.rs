//! Queue control: pause, resume, drain, clean, obliterate, and moving jobs.

use std::time::Duration;

use autobatch_core::ops;
use autobatch_core::wire::JobState;

use crate::{Error, Queue, Runtime};

impl<R: Runtime> Queue<R> {
    /// Pauses the queue: workers get no more of its jobs until [`resume`](Self::resume);
    /// adds are still accepted. Pausing a paused queue does nothing.
    ///
    /// # Errors
    ///
    /// As [`Client::run`](crate::Client::run).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// q.pause().await?;
    /// assert!(q.is_paused().await?);
    /// q.resume().await?;
    /// # Ok(()) }
    /// ```
    pub async fn pause(&self) -> Result<(), Error> {
        self.client.run(ops::Pause::new(&*self.name)).await
    }

    /// Resumes a paused queue.
    ///
    /// # Errors
    ///
    /// As [`Client::run`](crate::Client::run).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// q.resume().await?;
    /// # Ok(()) }
    /// ```
    pub async fn resume(&self) -> Result<(), Error> {
        self.client.run(ops::Resume::new(&*self.name)).await
    }

    /// Whether the queue is paused.
    ///
    /// # Errors
    ///
    /// As [`Client::run`](crate::Client::run).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// if q.is_paused().await? {
    ///     println!("{} is paused", q.name());
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn is_paused(&self) -> Result<bool, Error> {
        self.client.run(ops::IsPaused::new(&*self.name)).await
    }

    /// Removes every waiting, prioritized and delayed job (not active ones); returns how
    /// many. Never replayed after a lost connection (a second drain would remove jobs added
    /// since).
    ///
    /// # Errors
    ///
    /// As [`Client::run`](crate::Client::run).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// let removed = q.drain().await?;
    /// # Ok(()) }
    /// ```
    pub async fn drain(&self) -> Result<u64, Error> {
        self.client.run(ops::Drain::new(&*self.name)).await
    }

    /// Removes up to `limit` jobs in `state` (waiting ones when `None`) older than `grace`;
    /// returns their ids. `Waiting`, `Delayed`, `Prioritized` and `paused` all clean every
    /// ready or delayed job (bunqueue cleans those together); `Active` jobs are never
    /// cleaned.
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] for a state bunqueue does not know; otherwise as
    /// [`Client::run`](crate::Client::run).
    ///
    /// ```no_run
    /// use autobatch_driver::JobState;
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// // Completed jobs older than an hour, at most 1000.
    /// let hour = std::time::Duration::from_secs(3600);
    /// let ids = q.clean(hour, 1000, Some(JobState::Completed)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn clean(
        &self,
        grace: Duration,
        limit: u64,
        state: Option<JobState>,
    ) -> Result<Vec<String>, Error> {
        let mut op = ops::Clean::new(&*self.name, grace, limit);
        op.state = state;
        self.client.run(op).await
    }

    /// Removes the queue and everything in it.
    ///
    /// # Errors
    ///
    /// As [`Client::run`](crate::Client::run).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// q.obliterate().await?;
    /// # Ok(()) }
    /// ```
    pub async fn obliterate(&self) -> Result<(), Error> {
        self.client.run(ops::Obliterate::new(&*self.name)).await
    }

    /// Removes a job that is not active (bunqueue's `Cancel`).
    ///
    /// # Errors
    ///
    /// [`Error::Server`] `Job not found or cannot be cancelled` (kind
    /// [`JobNotFound`](crate::ServerErrorKind::JobNotFound)) for an unknown or active job;
    /// otherwise as [`Client::run`](crate::Client::run).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>, id: String) -> Result<(), autobatch_driver::Error> {
    /// q.remove(&id).await?;
    /// # Ok(()) }
    /// ```
    #[doc(alias = "cancel")]
    pub async fn remove(&self, id: &str) -> Result<(), Error> {
        self.client.run(ops::Cancel::new(id)).await
    }

    /// Fails a job for good, without retries; an active job needs the `token` it was pulled
    /// with.
    ///
    /// # Errors
    ///
    /// [`Error::Server`] `Job not found`, or `Lock token required for job <id>` (kind
    /// [`LockToken`](crate::ServerErrorKind::LockToken)); otherwise as
    /// [`Client::run`](crate::Client::run).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>, id: String) -> Result<(), autobatch_driver::Error> {
    /// q.discard(&id, None).await?;
    /// # Ok(()) }
    /// ```
    pub async fn discard(&self, id: &str, token: Option<&str>) -> Result<(), Error> {
        let mut op = ops::Discard::new(id);
        op.token = token.map(str::to_owned);
        self.client.run(op).await
    }

    /// Makes a delayed job ready now.
    ///
    /// # Errors
    ///
    /// [`Error::Server`] `Job not found or not delayed`; otherwise as
    /// [`Client::run`](crate::Client::run).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>, id: String) -> Result<(), autobatch_driver::Error> {
    /// q.promote_job(&id).await?;
    /// # Ok(()) }
    /// ```
    #[doc(alias = "promote")]
    pub async fn promote_job(&self, id: &str) -> Result<(), Error> {
        self.client.run(ops::Promote::new(id)).await
    }

    /// Makes up to `count` delayed jobs ready now (all when `None`); returns how many. One
    /// `PromoteJobs` frame.
    ///
    /// # Errors
    ///
    /// As [`Client::run`](crate::Client::run).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// let n = q.promote_jobs(Some(100)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn promote_jobs(&self, count: Option<u64>) -> Result<u64, Error> {
        let mut op = ops::PromoteJobs::new(&*self.name);
        op.count = count;
        self.client.run(op).await
    }

    /// Runs a job again (bunqueue's `MoveToWait`, as both official clients send it): a failed
    /// job is retried from the dead-letter queue, an active one released, a delayed one
    /// promoted; a waiting one is left alone.
    ///
    /// # Errors
    ///
    /// [`Error::Server`] `Cannot move job from state '<state>' to waiting` (completed or
    /// unknown jobs, the latter as state `unknown`); otherwise as
    /// [`Client::run`](crate::Client::run).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>, id: String) -> Result<(), autobatch_driver::Error> {
    /// q.retry_job(&id).await?;
    /// # Ok(()) }
    /// ```
    pub async fn retry_job(&self, id: &str) -> Result<(), Error> {
        self.client.run(ops::MoveToWait::new(id)).await
    }

    /// Moves an active job back to waiting, with the lock `token` it was pulled with (the TS
    /// client's `moveJobToWait(id, token)`; the same command as [`retry_job`](Self::retry_job)).
    ///
    /// # Errors
    ///
    /// As [`retry_job`](Self::retry_job), plus the lock-token errors.
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>, id: String, token: String) -> Result<(), autobatch_driver::Error> {
    /// q.move_job_to_wait(&id, Some(&token)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn move_job_to_wait(&self, id: &str, token: Option<&str>) -> Result<(), Error> {
        let mut op = ops::MoveToWait::new(id);
        op.token = token.map(str::to_owned);
        self.client.run(op).await
    }

    /// Moves an active job back to delayed, to run `delay` from now (the TS client's
    /// `moveJobToDelayed(id, timestamp, token)` takes a timestamp and sends this delay).
    ///
    /// # Errors
    ///
    /// [`Error::Server`] `Job not found`, or `Job is not active (current state: <state>)`;
    /// otherwise as [`Client::run`](crate::Client::run).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>, id: String, token: String) -> Result<(), autobatch_driver::Error> {
    /// q.move_job_to_delayed(&id, std::time::Duration::from_secs(60), Some(&token)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn move_job_to_delayed(
        &self,
        id: &str,
        delay: Duration,
        token: Option<&str>,
    ) -> Result<(), Error> {
        let mut op = ops::MoveToDelayed::new(id, delay);
        op.token = token.map(str::to_owned);
        self.client.run(op).await
    }

    /// Runs completed jobs again: job `id`, or every completed job of the queue when `None`;
    /// returns how many. For a count or a cut-off time, run [`ops::RetryCompleted`] through
    /// [`Client::run`](crate::Client::run).
    ///
    /// # Errors
    ///
    /// As [`Client::run`](crate::Client::run).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// let n = q.retry_completed(None).await?;
    /// # Ok(()) }
    /// ```
    pub async fn retry_completed(&self, id: Option<&str>) -> Result<u64, Error> {
        let mut op = ops::RetryCompleted::new(&*self.name);
        op.id = id.map(str::to_owned);
        self.client.run(op).await
    }

    /// Gives a waiting, prioritized or delayed job a new priority, which may hold a fraction
    /// (`1.5`, as bunqueue keeps it); with `lifo`, first among its equals. Replayed after a
    /// lost connection: it sets an absolute value.
    ///
    /// # Errors
    ///
    /// [`Error::Server`] `Job not found or not in queue` (unknown, active or finished);
    /// otherwise as [`Client::run`](crate::Client::run).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>, id: String) -> Result<(), autobatch_driver::Error> {
    /// q.change_priority(&id, 10, false).await?;
    /// # Ok(()) }
    /// ```
    #[doc(alias = "change_job_priority")]
    pub async fn change_priority(
        &self,
        id: &str,
        priority: impl Into<f64>,
        lifo: bool,
    ) -> Result<(), Error> {
        let mut op = ops::ChangePriority::new(id, priority.into());
        // Sent only when asked for, as the official clients leave it out.
        op.lifo = lifo.then_some(true);
        self.client.run(op).await
    }

    /// Makes a delayed job run `delay` from now.
    ///
    /// # Errors
    ///
    /// [`Error::Server`] `Job not found or cannot change delay`; otherwise as
    /// [`Client::run`](crate::Client::run).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>, id: String) -> Result<(), autobatch_driver::Error> {
    /// q.change_delay(&id, std::time::Duration::from_secs(5)).await?;
    /// # Ok(()) }
    /// ```
    #[doc(alias = "change_job_delay")]
    pub async fn change_delay(&self, id: &str, delay: Duration) -> Result<(), Error> {
        self.client.run(ops::ChangeDelay::new(id, delay)).await
    }

    /// Frees deduplication key `deduplication_id`, so the next job added with it is
    /// accepted; returns how many keys were removed (0 or 1).
    ///
    /// # Errors
    ///
    /// As [`Client::run`](crate::Client::run).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// q.remove_deduplication_key("user-7-welcome").await?;
    /// # Ok(()) }
    /// ```
    pub async fn remove_deduplication_key(&self, deduplication_id: &str) -> Result<u64, Error> {
        self.client
            .run(ops::RemoveDeduplicationKey::new(
                &*self.name,
                deduplication_id,
            ))
            .await
    }

    /// Frees the deduplication key job `id` holds; returns whether it held one.
    ///
    /// # Errors
    ///
    /// As [`Client::run`](crate::Client::run).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>, id: String) -> Result<(), autobatch_driver::Error> {
    /// let freed = q.remove_job_deduplication_key(&id).await?;
    /// # Ok(()) }
    /// ```
    pub async fn remove_job_deduplication_key(&self, id: &str) -> Result<bool, Error> {
        self.client
            .run(ops::RemoveJobDeduplicationKey::new(id))
            .await
    }
}
