//! Job schedulers (BullMQ's repeatable jobs): upsert, get, list, remove.
//!
//! bunqueue names schedulers globally (`CronList` lists every queue's); these methods work on
//! the schedulers of this queue, as the TS client's do.

use autobatch_core::ops::{self, CronInfo, CronUpsert, Schedule};
use autobatch_core::wire::{ValidationError, Value};
use serde::Serialize;

use crate::{Error, Queue, Runtime};

/// "Cron job not found": what bunqueue answers for a scheduler it does not know.
fn not_found(e: &Error) -> bool {
    matches!(e, Error::Server(s) if s.message() == "Cron job not found")
}

impl<R: Runtime> Queue<R> {
    /// Creates or replaces the job scheduler `id`, which adds a job named `job_name` with
    /// `data` to this queue on `schedule` (TS/BullMQ `upsertJobScheduler(id, {every |
    /// pattern}, {name, data})`). For every other setting (limit, time zone, job options,
    /// deduplication…) use [`upsert_job_scheduler_with`](Self::upsert_job_scheduler_with).
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] for data that does not serialise or an interval under 1 ms; the
    /// server's refusal (`Invalid cron expression: …`) as [`Error::Server`]; otherwise as
    /// [`Client::run`](crate::Client::run).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use autobatch_driver::ops::Schedule;
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// let info = q.upsert_job_scheduler("digest", Schedule::Every(Duration::from_secs(60)), "send-digest", &serde_json::json!({"kind": "daily"})).await?;
    /// println!("next run at {}", info.next_run);
    /// # Ok(()) }
    /// ```
    pub async fn upsert_job_scheduler<T: Serialize + ?Sized>(
        &self,
        id: &str,
        schedule: Schedule,
        job_name: &str,
        data: &T,
    ) -> Result<CronInfo, Error> {
        let data = Value::from_serialize(data).map_err(|e| {
            Error::Invalid(ValidationError::new(
                "data",
                format!("Job data must be serializable: {}", e.0),
            ))
        })?;
        let op = CronUpsert::new(&*self.name, id, schedule)
            .job_name(job_name)
            .data(data);
        self.client.run(op).await
    }

    /// Creates or replaces a job scheduler with every setting bunqueue stores; its `queue` is
    /// set to this queue.
    ///
    /// # Errors
    ///
    /// As [`upsert_job_scheduler`](Self::upsert_job_scheduler).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use autobatch_driver::ops::{CronJobOptions, CronUpsert};
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// let scheduler = CronUpsert::pattern(q.name(), "nightly", "0 3 * * *")
    ///     .timezone("Europe/Rome")
    ///     .max_limit(30)
    ///     .job_name("cleanup")
    ///     .job_options(CronJobOptions::new().attempts(5).remove_on_complete(true));
    /// q.upsert_job_scheduler_with(scheduler).await?;
    /// # Ok(()) }
    /// ```
    pub async fn upsert_job_scheduler_with(&self, mut op: CronUpsert) -> Result<CronInfo, Error> {
        op.queue = self.name.to_string();
        self.client.run(op).await
    }

    /// The job scheduler `id` of this queue, or `None` (TS/BullMQ `getJobScheduler`).
    ///
    /// # Errors
    ///
    /// As [`Client::run`](crate::Client::run).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// if let Some(s) = q.get_job_scheduler("digest").await? {
    ///     println!("{} runs so far", s.executions);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn get_job_scheduler(&self, id: &str) -> Result<Option<CronInfo>, Error> {
        match self.client.run(ops::CronGet::new(id)).await {
            Ok(info) if info.queue == *self.name => Ok(Some(info)),
            Ok(_) => Ok(None),
            Err(e) if not_found(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Every job scheduler of this queue (TS/BullMQ `getJobSchedulers`, without paging: the
    /// server lists them all at once).
    ///
    /// # Errors
    ///
    /// As [`Client::run`](crate::Client::run).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// for s in q.get_job_schedulers().await? {
    ///     println!("{}: next at {}", s.name, s.next_run);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn get_job_schedulers(&self) -> Result<Vec<CronInfo>, Error> {
        let all = self.client.run(ops::CronList::new()).await?;
        Ok(all.into_iter().filter(|c| c.queue == *self.name).collect())
    }

    /// How many job schedulers this queue has (TS `getJobSchedulersCount`).
    ///
    /// # Errors
    ///
    /// As [`Client::run`](crate::Client::run).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// println!("{} schedulers", q.get_job_schedulers_count().await?);
    /// # Ok(()) }
    /// ```
    pub async fn get_job_schedulers_count(&self) -> Result<usize, Error> {
        Ok(self.get_job_schedulers().await?.len())
    }

    /// Removes the job scheduler `id` (jobs it already added stay); returns whether there
    /// was one (TS/BullMQ `removeJobScheduler`).
    ///
    /// # Errors
    ///
    /// As [`Client::run`](crate::Client::run). Not replayed after a lost connection.
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// q.remove_job_scheduler("digest").await?;
    /// # Ok(()) }
    /// ```
    pub async fn remove_job_scheduler(&self, id: &str) -> Result<bool, Error> {
        match self.client.run(ops::CronDelete::new(id)).await {
            Ok(()) => Ok(true),
            Err(e) if not_found(&e) => Ok(false),
            Err(e) => Err(e),
        }
    }
}
