//! Session configuration, validated when built: nothing is coerced silently.

use std::time::Duration;

use crate::batch::{self, BatchConfig};
use crate::wire::validate_queue_name;

/// Configuration of one client connection.
///
/// ```
/// use autobatch_core::session::SessionConfig;
/// let config = SessionConfig::default().with_token("secret");
/// assert!(config.validate().is_ok());
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SessionConfig {
    /// Auth token, sent first on every connection when set.
    pub token: Option<String>,
    /// Auto-batching of adds: `None` sends every add as its own PUSH (the "batching off" mode).
    pub batching: Option<BatchConfig>,
    /// Most commands written and not yet answered (the pipelining window). Default 100, as the
    /// official client. Further commands wait in order.
    pub max_in_flight_commands: usize,
    /// Once the window is full, how long it waits for half of it to be answered before it is
    /// refilled anyway; `None` refills each slot as soon as its reply comes. Default 5 ms, the
    /// batch linger's budget.
    ///
    /// Refilling one slot per reply writes a few frames at a time when commands come faster
    /// than their replies (batching off with thousands of concurrent adds): waiting for half
    /// the window writes them fifty at a time, for the client's and the server's sake. The
    /// bound in time keeps a window held by slow commands (long-poll pulls, `WaitJob`) from
    /// waiting on them.
    pub full_window_wait: Option<Duration>,
    /// How long a command may wait for its reply, counted from when it is queued and restarted
    /// when it is written. Default 30 s.
    pub command_timeout: Duration,
    /// Consecutive timeouts that force a reconnect. Default 3.
    pub max_command_timeouts: u32,
    /// Ping period on an otherwise quiet connection; `None` disables pings. Default 30 s.
    pub ping_interval: Option<Duration>,
    /// Reconnect backoff.
    pub reconnect: ReconnectConfig,
    /// Seed for the reconnect jitter: the only randomness in the session.
    pub seed: u64,
    /// A worker on this connection, if any.
    pub worker: Option<WorkerConfig>,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            token: None,
            batching: Some(BatchConfig::default()),
            max_in_flight_commands: 100,
            full_window_wait: Some(Duration::from_millis(5)),
            command_timeout: Duration::from_secs(30),
            max_command_timeouts: 3,
            ping_interval: Some(Duration::from_secs(30)),
            reconnect: ReconnectConfig::default(),
            seed: 0x5eed,
            worker: None,
        }
    }
}

impl SessionConfig {
    /// Sets the auth token.
    pub fn with_token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// Turns auto-batching off: every add is its own PUSH.
    pub fn without_batching(mut self) -> Self {
        self.batching = None;
        self
    }

    crate::setters! {
        /// Sets [`batching`](Self::batching) (`None`: every add is its own PUSH).
        ///
        /// ```
        /// use std::time::Duration;
        /// use autobatch_core::batch::BatchConfig;
        /// use autobatch_core::session::SessionConfig;
        /// let c = SessionConfig::default()
        ///     .batching(Some(BatchConfig::new().max_batch(100)))
        ///     .ping_interval(None)
        ///     .command_timeout(Duration::from_secs(5));
        /// assert!(c.validate().is_ok());
        /// ```
        batching = Option<BatchConfig>,
        /// Sets [`max_in_flight_commands`](Self::max_in_flight_commands).
        max_in_flight_commands = usize,
        /// Sets [`full_window_wait`](Self::full_window_wait) (`None`: refill at once).
        full_window_wait = Option<Duration>,
        /// Sets [`command_timeout`](Self::command_timeout).
        command_timeout = Duration,
        /// Sets [`max_command_timeouts`](Self::max_command_timeouts).
        max_command_timeouts = u32,
        /// Sets [`ping_interval`](Self::ping_interval) (`None`: no pings).
        ping_interval = Option<Duration>,
        /// Sets [`reconnect`](Self::reconnect).
        reconnect = ReconnectConfig,
        /// Sets [`seed`](Self::seed).
        seed = u64,
        /// Sets [`worker`](Self::worker).
        worker = Option<WorkerConfig>,
    }

    /// Checks every field; the first problem is reported with the field's name.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if let Some(b) = &self.batching {
            b.validate().map_err(ConfigError::Batching)?;
        }
        if self.max_in_flight_commands == 0 {
            return Err(ConfigError::Field {
                field: "max_in_flight_commands",
                problem: "must be at least 1",
            });
        }
        if self.command_timeout.is_zero() {
            return Err(ConfigError::Field {
                field: "command_timeout",
                problem: "must be positive",
            });
        }
        if self.max_command_timeouts == 0 {
            return Err(ConfigError::Field {
                field: "max_command_timeouts",
                problem: "must be at least 1",
            });
        }
        if self.full_window_wait.is_some_and(|w| w.is_zero()) {
            return Err(ConfigError::Field {
                field: "full_window_wait",
                problem: "must be positive (use None to refill at once)",
            });
        }
        if self.ping_interval.is_some_and(|p| p.is_zero()) {
            return Err(ConfigError::Field {
                field: "ping_interval",
                problem: "must be positive (use None to disable pings)",
            });
        }
        if matches!(&self.token, Some(t) if t.is_empty()) {
            return Err(ConfigError::Field {
                field: "token",
                problem: "must not be empty (use None for no auth)",
            });
        }
        self.reconnect.validate()?;
        if let Some(w) = &self.worker {
            w.validate()?;
        }
        Ok(())
    }
}

/// Reconnect backoff: `min(base · 2^(attempt-1), max)` plus 0..`jitter` of that, as bunqueue's
/// client does (never shorter than the base delay).
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct ReconnectConfig {
    /// First delay. Default 100 ms.
    pub base: Duration,
    /// Cap. Default 30 s.
    pub max: Duration,
    /// Added fraction, drawn uniformly in `[0, jitter)`. Default 0.3.
    pub jitter: f64,
}

impl Default for ReconnectConfig {
    fn default() -> Self {
        ReconnectConfig {
            base: Duration::from_millis(100),
            max: Duration::from_secs(30),
            jitter: 0.3,
        }
    }
}

impl ReconnectConfig {
    crate::setters! {
        /// Sets [`base`](Self::base).
        ///
        /// ```
        /// use std::time::Duration;
        /// use autobatch_core::session::ReconnectConfig;
        /// let r = ReconnectConfig::default().base(Duration::from_millis(50)).jitter(0.0);
        /// assert_eq!(r.delay(2, 0.5), Duration::from_millis(100));
        /// ```
        base = Duration,
        /// Sets [`max`](Self::max).
        max = Duration,
        /// Sets [`jitter`](Self::jitter).
        jitter = f64,
    }

    fn validate(&self) -> Result<(), ConfigError> {
        if self.base.is_zero() || self.max < self.base {
            return Err(ConfigError::Field {
                field: "reconnect.base",
                problem: "must be positive and at most reconnect.max",
            });
        }
        if !(0.0..=1.0).contains(&self.jitter) {
            return Err(ConfigError::Field {
                field: "reconnect.jitter",
                problem: "must be within 0..=1",
            });
        }
        Ok(())
    }

    /// The delay before reconnect attempt `attempt` (1-based), given a uniform draw in `[0, 1)`.
    pub fn delay(&self, attempt: u32, unit: f64) -> Duration {
        let exp = attempt.saturating_sub(1).min(30);
        let base = self.base.saturating_mul(1u32 << exp).min(self.max);
        base + base.mul_f64(self.jitter * unit)
    }
}

/// A worker on the session's connection: it pulls jobs, hands them out, and batches their
/// completions into ACKB.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct WorkerConfig {
    /// Queue to work.
    pub queue: String,
    /// Most jobs held at once: any number from 1 (thousands for I/O-bound processors). It
    /// is not the pull size: each PULLB asks for the free slots, at most 1,000 at a time,
    /// as bunqueue's own clients cap their `batchSize`. Default 1.
    pub concurrency: usize,
    /// Long-poll time of each pull (at most 60 s; sent as whole ms). Default 1 s: an empty
    /// queue costs one request a second, and a new job is picked up at once.
    pub poll_timeout: Duration,
    /// Lock time to live (sent as whole ms). Default 30 s.
    pub lock_ttl: Duration,
    /// Worker id, sent as `owner` so the server hands out lock tokens. Default
    /// `autobatch-<queue>`; it must be unique among the workers of the queue (the core reads
    /// no pid or clock: the driver sets `autobatch-<queue>-<pid>-<n>`).
    pub owner: String,
    /// ACK batching. Default: 10 per ACKB, 50 ms linger, as bunqueue's worker.
    pub acks: BatchConfig,
    /// How often a failed ACKB is retried before its jobs are reported failed. Default 3.
    pub ack_retries: u32,
    /// First retry delay; doubles per retry. Default 100 ms.
    pub ack_retry_base: Duration,
    /// How often the locks of held jobs are renewed (one JobHeartbeatB for all of them), so a
    /// job that runs longer than `lock_ttl` is not handed to another worker. Default 10 s,
    /// as bunqueue's worker; `None` sends none. Must be shorter than the lock TTL.
    pub heartbeat_interval: Option<Duration>,
    /// Client-side rate limit: at most this many jobs pulled per window (`max`, `window`),
    /// windows starting at the first pull after the previous one ended. Default `None`.
    pub limiter: Option<(u32, Duration)>,
    /// Remove each job this worker completes instead of keeping it as completed (sent with
    /// the ACKB as `removeOnCompletes`, as the TS worker's `removeOnComplete`). Default false:
    /// the job's own option decides.
    pub remove_on_complete: bool,
    /// Remove each job whose failure by this worker is final (FAIL's `removeOnFail`, as the TS
    /// worker's `removeOnFail`). Default false: the job's own option decides.
    pub remove_on_fail: bool,
}

impl WorkerConfig {
    /// A worker for `queue` with default settings.
    pub fn new(queue: impl Into<String>) -> Self {
        let queue = queue.into();
        WorkerConfig {
            owner: format!("autobatch-{queue}"),
            queue,
            concurrency: 1,
            poll_timeout: Duration::from_secs(1),
            lock_ttl: Duration::from_secs(30),
            acks: BatchConfig::new()
                .max_batch(10)
                .linger(Duration::from_millis(50)),
            ack_retries: 3,
            ack_retry_base: Duration::from_millis(100),
            heartbeat_interval: Some(Duration::from_secs(10)),
            limiter: None,
            remove_on_complete: false,
            remove_on_fail: false,
        }
    }

    /// Sets the concurrency.
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n;
        self
    }

    crate::setters! {
        /// Sets [`poll_timeout`](Self::poll_timeout).
        ///
        /// ```
        /// use std::time::Duration;
        /// use autobatch_core::session::WorkerConfig;
        /// let w = WorkerConfig::new("q").poll_timeout(Duration::ZERO).owner("host-1-q".into());
        /// assert_eq!(w.owner, "host-1-q");
        /// ```
        poll_timeout = Duration,
        /// Sets [`lock_ttl`](Self::lock_ttl).
        lock_ttl = Duration,
        /// Sets [`owner`](Self::owner).
        owner = String,
        /// Sets [`acks`](Self::acks).
        acks = BatchConfig,
        /// Sets [`ack_retries`](Self::ack_retries).
        ack_retries = u32,
        /// Sets [`ack_retry_base`](Self::ack_retry_base).
        ack_retry_base = Duration,
        /// Sets [`heartbeat_interval`](Self::heartbeat_interval) (`None`: no heartbeats).
        heartbeat_interval = Option<Duration>,
        /// Sets [`limiter`](Self::limiter) (`None`: no client-side limit).
        limiter = Option<(u32, Duration)>,
        /// Sets [`remove_on_complete`](Self::remove_on_complete).
        remove_on_complete = bool,
        /// Sets [`remove_on_fail`](Self::remove_on_fail).
        remove_on_fail = bool,
    }

    fn validate(&self) -> Result<(), ConfigError> {
        validate_queue_name(&self.queue).map_err(|_| ConfigError::Field {
            field: "worker.queue",
            problem: "is not a valid queue name",
        })?;
        if self
            .limiter
            .is_some_and(|(max, window)| max == 0 || window.is_zero())
        {
            return Err(ConfigError::Field {
                field: "worker.limiter",
                problem: "needs at least 1 job per non-zero window",
            });
        }
        if self.concurrency == 0 {
            return Err(ConfigError::Field {
                field: "worker.concurrency",
                problem: "must be at least 1",
            });
        }
        if self.poll_timeout > Duration::from_secs(60) {
            return Err(ConfigError::Field {
                field: "worker.poll_timeout",
                problem: "must be at most 60 s",
            });
        }
        if self.lock_ttl.as_millis() == 0 {
            return Err(ConfigError::Field {
                field: "worker.lock_ttl",
                problem: "must be at least 1 ms",
            });
        }
        if self
            .heartbeat_interval
            .is_some_and(|h| h.is_zero() || h >= self.lock_ttl)
        {
            return Err(ConfigError::Field {
                field: "worker.heartbeat_interval",
                problem: "must be positive and shorter than worker.lock_ttl",
            });
        }
        if self.owner.is_empty() {
            return Err(ConfigError::Field {
                field: "worker.owner",
                problem: "must not be empty",
            });
        }
        self.acks.validate().map_err(ConfigError::Batching)
    }
}

/// A configuration field out of range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A batching limit.
    #[error("batching: {0}")]
    Batching(batch::ConfigError),
    /// Another field.
    #[error("{field} {problem}")]
    Field {
        /// The field's name.
        field: &'static str,
        /// What is wrong.
        problem: &'static str,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconnect_delay_doubles_caps_and_never_undershoots() {
        let r = ReconnectConfig::default();
        assert_eq!(r.delay(1, 0.0), Duration::from_millis(100));
        assert_eq!(r.delay(2, 0.0), Duration::from_millis(200));
        assert_eq!(r.delay(1, 0.999).as_millis(), 129);
        assert_eq!(r.delay(40, 0.0), Duration::from_secs(30));
    }

    #[test]
    fn bad_fields_are_named() {
        let mut c = SessionConfig {
            max_in_flight_commands: 0,
            ..Default::default()
        };
        assert_eq!(
            c.validate().unwrap_err().to_string(),
            "max_in_flight_commands must be at least 1"
        );
        c.max_in_flight_commands = 1;
        c.worker = Some(WorkerConfig::new("bad queue"));
        assert!(c.validate().is_err());
        c.worker = Some(WorkerConfig::new("q").concurrency(0));
        assert!(c.validate().is_err());
        assert!(SessionConfig::default().with_token("").validate().is_err());
    }
}
