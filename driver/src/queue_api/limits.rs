//! Limits: rate limit, global concurrency, stall detection, and per-group controls.

use std::time::Duration;

use autobatch_core::ops::{self, GroupRateLimit, StallConfig, StallConfigUpdate};

use crate::millis::wait_from_ms;
use crate::{Error, Queue, Runtime};

impl<R: Runtime> Queue<R> {
    /// At most `max` jobs of this queue start per `duration`, over all workers (TS
    /// `setGlobalRateLimitAsync`).
    ///
    /// # Errors
    ///
    /// As [`Client::run`](crate::Client::run).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// q.set_global_rate_limit(100, Duration::from_secs(1)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn set_global_rate_limit(&self, max: i64, duration: Duration) -> Result<(), Error> {
        self.client
            .run(ops::RateLimit::new(&*self.name, max).duration(duration))
            .await
    }

    /// Lifts this queue's rate limit (TS `removeGlobalRateLimitAsync`).
    ///
    /// # Errors
    ///
    /// As [`Client::run`](crate::Client::run).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// q.remove_global_rate_limit().await?;
    /// # Ok(()) }
    /// ```
    pub async fn remove_global_rate_limit(&self) -> Result<(), Error> {
        self.client.run(ops::RateLimitClear::new(&*self.name)).await
    }

    /// Holds the whole queue back to one job at a time for `expire` (TS/BullMQ
    /// `rateLimit(expireTimeMs)`: `limit: 1` with a `ttl`, kept by the server).
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] for a zero `expire` (the TS client's own check); otherwise as
    /// [`Client::run`](crate::Client::run).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// q.rate_limit(Duration::from_secs(30)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn rate_limit(&self, expire: Duration) -> Result<(), Error> {
        if expire.as_millis() == 0 {
            return Err(Error::Invalid(autobatch_core::wire::ValidationError::new(
                "ttl",
                format!(
                    "rateLimit: expireTimeMs must be a positive finite number, got {}",
                    expire.as_millis()
                ),
            )));
        }
        self.client
            .run(ops::RateLimit::new(&*self.name, 1).ttl(expire))
            .await
    }

    /// At most `limit` jobs of this queue active at once, over all workers (TS
    /// `setGlobalConcurrencyAsync`).
    ///
    /// # Errors
    ///
    /// As [`Client::run`](crate::Client::run).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// q.set_global_concurrency(4).await?;
    /// # Ok(()) }
    /// ```
    pub async fn set_global_concurrency(&self, limit: i64) -> Result<(), Error> {
        self.client
            .run(ops::SetConcurrency::new(&*self.name, limit))
            .await
    }

    /// Lifts this queue's global concurrency limit (TS `removeGlobalConcurrencyAsync`).
    ///
    /// # Errors
    ///
    /// As [`Client::run`](crate::Client::run).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// q.remove_global_concurrency().await?;
    /// # Ok(()) }
    /// ```
    pub async fn remove_global_concurrency(&self) -> Result<(), Error> {
        self.client
            .run(ops::ClearConcurrency::new(&*self.name))
            .await
    }

    /// This queue's stall detection settings (TS `getStallConfigAsync`).
    ///
    /// # Errors
    ///
    /// As [`Client::run`](crate::Client::run).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// let stall = q.get_stall_config().await?;
    /// println!("checked every {:?}", stall.stall_interval);
    /// # Ok(()) }
    /// ```
    pub async fn get_stall_config(&self) -> Result<StallConfig, Error> {
        self.client.run(ops::GetStallConfig::new(&*self.name)).await
    }

    /// Changes some of this queue's stall detection settings (TS `setStallConfigAsync`).
    ///
    /// # Errors
    ///
    /// As [`Client::run`](crate::Client::run).
    ///
    /// ```no_run
    /// use autobatch_driver::ops::StallConfigUpdate;
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// q.set_stall_config(StallConfigUpdate::new().max_stalls(1)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn set_stall_config(&self, config: StallConfigUpdate) -> Result<(), Error> {
        self.client
            .run(ops::SetStallConfig::new(&*self.name, config))
            .await
    }

    /// Jobs of group `group_id` waiting to run (TS `getGroupJobsCount`).
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] for an empty or bad group id; otherwise as
    /// [`Client::run`](crate::Client::run).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// println!("{} waiting for tenant-1", q.get_group_jobs_count("tenant-1").await?);
    /// # Ok(()) }
    /// ```
    pub async fn get_group_jobs_count(&self, group_id: &str) -> Result<u64, Error> {
        self.client
            .run(ops::GetGroupJobsCount::new(&*self.name, group_id))
            .await
    }

    /// Jobs waiting in any group of this queue (TS `getGroupsJobsCount`).
    ///
    /// # Errors
    ///
    /// As [`Client::run`](crate::Client::run).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// println!("{} grouped jobs", q.get_groups_jobs_count().await?);
    /// # Ok(()) }
    /// ```
    pub async fn get_groups_jobs_count(&self) -> Result<u64, Error> {
        self.client
            .run(ops::GetGroupsJobsCount::new(&*self.name))
            .await
    }

    /// Jobs of group `group_id` active now (TS `getGroupActiveCount`).
    ///
    /// # Errors
    ///
    /// As [`get_group_jobs_count`](Self::get_group_jobs_count).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// let active = q.get_group_active_count("tenant-1").await?;
    /// # Ok(()) }
    /// ```
    pub async fn get_group_active_count(&self, group_id: &str) -> Result<u64, Error> {
        self.client
            .run(ops::GetGroupActiveCount::new(&*self.name, group_id))
            .await
    }

    /// Gives group `group_id` its own rate limit (TS `setGroupRateLimit`).
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] for a bad group id, a zero `max` or a `duration` under 1 ms
    /// (`max must be a positive safe integer`); otherwise as
    /// [`Client::run`](crate::Client::run).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use autobatch_driver::ops::GroupRateLimit;
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// q.set_group_rate_limit("tenant-1", GroupRateLimit::new(10, Duration::from_secs(1))).await?;
    /// # Ok(()) }
    /// ```
    pub async fn set_group_rate_limit(
        &self,
        group_id: &str,
        limit: GroupRateLimit,
    ) -> Result<(), Error> {
        self.client
            .run(ops::SetGroupRateLimit::new(&*self.name, group_id, limit))
            .await
    }

    /// Group `group_id`'s own rate limit, if it has one (TS `getGroupRateLimit`).
    ///
    /// # Errors
    ///
    /// As [`get_group_jobs_count`](Self::get_group_jobs_count).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// if let Some(l) = q.get_group_rate_limit("tenant-1").await? {
    ///     println!("{} per {:?}", l.max, l.duration);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn get_group_rate_limit(
        &self,
        group_id: &str,
    ) -> Result<Option<GroupRateLimit>, Error> {
        self.client
            .run(ops::GetGroupRateLimit::new(&*self.name, group_id))
            .await
    }

    /// Drops group `group_id`'s own rate limit; returns whether it had one (TS
    /// `removeGroupRateLimit`).
    ///
    /// # Errors
    ///
    /// As [`get_group_jobs_count`](Self::get_group_jobs_count). Not replayed after a lost
    /// connection.
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// q.remove_group_rate_limit("tenant-1").await?;
    /// # Ok(()) }
    /// ```
    pub async fn remove_group_rate_limit(&self, group_id: &str) -> Result<bool, Error> {
        self.client
            .run(ops::RemoveGroupRateLimit::new(&*self.name, group_id))
            .await
    }

    /// How long until group `group_id` may start another job, or `None` when no window is
    /// open, optionally as if its limit were `max_jobs` (TS `getGroupRateLimitTtl`, which
    /// says `-2` for `None`).
    ///
    /// # Errors
    ///
    /// As [`get_group_jobs_count`](Self::get_group_jobs_count).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// if let Some(wait) = q.get_group_rate_limit_ttl("tenant-1", None).await? {
    ///     println!("tenant-1 may start another job in {wait:?}");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn get_group_rate_limit_ttl(
        &self,
        group_id: &str,
        max_jobs: Option<u64>,
    ) -> Result<Option<Duration>, Error> {
        let mut op = ops::GetGroupRateLimitTtl::new(&*self.name, group_id);
        op.max_jobs = max_jobs;
        Ok(wait_from_ms(self.client.run(op).await?))
    }

    /// Holds group `group_id` back for `duration` (a worker's answer to an external rate
    /// limit for that group).
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] for a bad group id or a `duration` under 1 ms; otherwise as
    /// [`Client::run`](crate::Client::run). Not replayed after a lost connection.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// q.rate_limit_group("tenant-1", Duration::from_secs(10)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn rate_limit_group(&self, group_id: &str, duration: Duration) -> Result<(), Error> {
        self.client
            .run(ops::RateLimitGroup::new(&*self.name, group_id, duration))
            .await
    }

    /// At most `concurrency` jobs of group `group_id` active at once (TS
    /// `setGroupConcurrency`).
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] for a bad group id or a zero `concurrency`; otherwise as
    /// [`Client::run`](crate::Client::run).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// q.set_group_concurrency("tenant-1", 1).await?;
    /// # Ok(()) }
    /// ```
    pub async fn set_group_concurrency(
        &self,
        group_id: &str,
        concurrency: u64,
    ) -> Result<(), Error> {
        self.client
            .run(ops::SetGroupConcurrency::new(
                &*self.name,
                group_id,
                concurrency,
            ))
            .await
    }

    /// Group `group_id`'s own concurrency limit, if it has one (TS `getGroupConcurrency`).
    ///
    /// # Errors
    ///
    /// As [`get_group_jobs_count`](Self::get_group_jobs_count).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// let limit = q.get_group_concurrency("tenant-1").await?;
    /// # Ok(()) }
    /// ```
    pub async fn get_group_concurrency(&self, group_id: &str) -> Result<Option<u64>, Error> {
        self.client
            .run(ops::GetGroupConcurrency::new(&*self.name, group_id))
            .await
    }

    /// Drops group `group_id`'s own concurrency limit; returns whether it had one (TS
    /// `removeGroupConcurrency`).
    ///
    /// # Errors
    ///
    /// As [`get_group_jobs_count`](Self::get_group_jobs_count). Not replayed after a lost
    /// connection.
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// q.remove_group_concurrency("tenant-1").await?;
    /// # Ok(()) }
    /// ```
    pub async fn remove_group_concurrency(&self, group_id: &str) -> Result<bool, Error> {
        self.client
            .run(ops::RemoveGroupConcurrency::new(&*self.name, group_id))
            .await
    }

    /// Workers get no more jobs of group `group_id` until
    /// [`resume_group`](Self::resume_group); returns whether it changed anything (TS
    /// `pauseGroup`).
    ///
    /// # Errors
    ///
    /// As [`get_group_jobs_count`](Self::get_group_jobs_count). Not replayed after a lost
    /// connection.
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// q.pause_group("tenant-1").await?;
    /// assert!(q.is_group_paused("tenant-1").await?);
    /// q.resume_group("tenant-1").await?;
    /// # Ok(()) }
    /// ```
    pub async fn pause_group(&self, group_id: &str) -> Result<bool, Error> {
        self.client
            .run(ops::PauseGroup::new(&*self.name, group_id))
            .await
    }

    /// Undoes [`pause_group`](Self::pause_group); returns whether it changed anything (TS
    /// `resumeGroup`).
    ///
    /// # Errors
    ///
    /// As [`pause_group`](Self::pause_group).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// q.resume_group("tenant-1").await?;
    /// # Ok(()) }
    /// ```
    pub async fn resume_group(&self, group_id: &str) -> Result<bool, Error> {
        self.client
            .run(ops::ResumeGroup::new(&*self.name, group_id))
            .await
    }

    /// Whether group `group_id` is paused (TS `isGroupPaused`).
    ///
    /// # Errors
    ///
    /// As [`get_group_jobs_count`](Self::get_group_jobs_count).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// let paused = q.is_group_paused("tenant-1").await?;
    /// # Ok(()) }
    /// ```
    pub async fn is_group_paused(&self, group_id: &str) -> Result<bool, Error> {
        self.client
            .run(ops::IsGroupPaused::new(&*self.name, group_id))
            .await
    }
}
