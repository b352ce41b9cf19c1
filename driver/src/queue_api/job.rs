//! One job's records from the queue's side: progress, logs, data, and its lock; the TS
//! client's `updateJobProgress`, `getJobLogs`, `addJobLog`, `clearJobLogs`, `updateJobData`,
//! `extendJobLock`, `moveJobToDelayed`, `moveJobToWait`. A worker's processor usually makes
//! these calls through its [`ActiveJob`](crate::ActiveJob) instead.

use autobatch_core::ops::{self, JobLogs, JobProgress};

use crate::{Error, Queue, Runtime, Value};

impl<R: Runtime> Queue<R> {
    /// Sets an active job's progress (0 to 100, clamped by the server), optionally with a
    /// message. bunqueue refuses a job that is not active.
    ///
    /// # Errors
    ///
    /// As [`Client::run`](crate::Client::run); `Job not found` or
    /// `Job is not active (current state: …)` from the server.
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// q.update_job_progress("42", 50.0, Some("half way")).await?;
    /// # Ok(()) }
    /// ```
    pub async fn update_job_progress(
        &self,
        id: &str,
        progress: f64,
        message: Option<&str>,
    ) -> Result<(), Error> {
        let mut op = ops::UpdateProgress::new(id, progress);
        op.message = message.map(str::to_owned);
        self.client.run(op).await
    }

    /// An active job's progress and message.
    ///
    /// # Errors
    ///
    /// As [`update_job_progress`](Self::update_job_progress).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// let p = q.get_job_progress("42").await?;
    /// println!("{}% {:?}", p.progress, p.message);
    /// # Ok(()) }
    /// ```
    pub async fn get_job_progress(&self, id: &str) -> Result<JobProgress, Error> {
        self.client.run(ops::GetProgress::new(id)).await
    }

    /// Appends a line to a job's log (any state).
    ///
    /// # Errors
    ///
    /// As [`Client::run`](crate::Client::run); `Job not found` for an unknown job.
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// q.add_job_log("42", "checked by hand").await?;
    /// # Ok(()) }
    /// ```
    pub async fn add_job_log(&self, id: &str, message: &str) -> Result<(), Error> {
        self.client.run(ops::AddLog::new(id, message)).await
    }

    /// A job's log lines, all of them (`range: None`) or lines `start..=end`, and how many it
    /// has in all. An unknown job has an empty log.
    ///
    /// # Errors
    ///
    /// As [`Client::run`](crate::Client::run).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// let logs = q.get_job_logs("42", None).await?;
    /// for line in &logs.logs {
    ///     println!("[{}] {}", line.level, line.message);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn get_job_logs(
        &self,
        id: &str,
        range: Option<(i64, i64)>,
    ) -> Result<JobLogs, Error> {
        let mut op = ops::GetLogs::new(id);
        if let Some((start, end)) = range {
            op = op.range(start, end);
        }
        self.client.run(op).await
    }

    /// Empties a job's log, or keeps its newest `keep` lines.
    ///
    /// # Errors
    ///
    /// As [`Client::run`](crate::Client::run).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// q.clear_job_logs("42", Some(10)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn clear_job_logs(&self, id: &str, keep: Option<i64>) -> Result<(), Error> {
        let mut op = ops::ClearLogs::new(id);
        op.keep_logs = keep;
        self.client.run(op).await
    }

    /// Replaces a job's data.
    ///
    /// # Errors
    ///
    /// As [`Client::run`](crate::Client::run); `Job not found or cannot be updated` from the
    /// server; data that does not serialize is [`Error::Invalid`].
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// q.update_job_data("42", &serde_json::json!({ "step": 2 })).await?;
    /// # Ok(()) }
    /// ```
    pub async fn update_job_data<T: serde::Serialize + ?Sized>(
        &self,
        id: &str,
        data: &T,
    ) -> Result<(), Error> {
        let data = Value::from_serialize(data).map_err(|e| {
            Error::Invalid(crate::ValidationError::new(
                "data",
                format!("Job data must be serializable: {}", e.0),
            ))
        })?;
        self.client.run(ops::UpdateData::new(id, data)).await
    }

    /// Extends a held job's lock to `duration` from now, with its lock token.
    ///
    /// # Errors
    ///
    /// As [`Client::run`](crate::Client::run); `Lock not found or invalid token` from the
    /// server.
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// q.extend_job_lock("42", Some("token"), std::time::Duration::from_secs(60)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn extend_job_lock(
        &self,
        id: &str,
        token: Option<&str>,
        duration: std::time::Duration,
    ) -> Result<(), Error> {
        let mut op = ops::ExtendLock::new(id, duration);
        op.token = token.map(str::to_owned);
        self.client.run(op).await
    }

    /// Extends several locks at once: `(id, token, duration)` each; returns how many were
    /// extended.
    ///
    /// # Errors
    ///
    /// As [`Client::run`](crate::Client::run).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// let n = q.extend_job_locks(&[("42", Some("t"), std::time::Duration::from_secs(60))]).await?;
    /// # let _ = n; Ok(()) }
    /// ```
    pub async fn extend_job_locks(
        &self,
        locks: &[(&str, Option<&str>, std::time::Duration)],
    ) -> Result<u64, Error> {
        let locks = locks
            .iter()
            .map(|(id, t, d)| ((*id).to_owned(), t.map(str::to_owned), *d))
            .collect();
        self.client.run(ops::ExtendLocks::new(locks)).await
    }
}
