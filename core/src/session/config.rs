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
pub struct SessionConfig {
    /// Auth token, sent first on every connection when set.
    pub token: Option<String>,
    /// Auto-batching of adds: `None` sends every add as its own PUSH (the "batching off" mode).
    pub batching: Option<BatchConfig>,
    /// Most commands written and not yet answered (the pipelining window). Default 100, as the
    /// official client. Further commands wait in order.
    pub max_in_flight_commands: usize,
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
pub struct WorkerConfig {
    /// Queue to work.
    pub queue: String,
    /// Most jobs held at once. Default 1.
    pub concurrency: usize,
    /// Long-poll time of each pull, ms (0..=60000). Default 1000: an empty queue costs one
    /// request a second, and a new job is picked up at once.
    pub poll_timeout_ms: i64,
    /// Lock time to live, ms. Default 30000.
    pub lock_ttl_ms: i64,
    /// Worker id, sent as `owner` so the server hands out lock tokens.
    pub owner: String,
    /// ACK batching. Default: 10 per ACKB, 50 ms linger, as bunqueue's worker.
    pub acks: BatchConfig,
    /// How often a failed ACKB is retried before its jobs are reported failed. Default 3.
    pub ack_retries: u32,
    /// First retry delay; doubles per retry. Default 100 ms.
    pub ack_retry_base: Duration,
    /// How often the locks of held jobs are renewed (one JobHeartbeatB for all of them), so a
    /// job that runs longer than `lock_ttl_ms` is not handed to another worker. Default 10 s,
    /// as bunqueue's worker; `None` sends none. Must be shorter than the lock TTL.
    pub heartbeat_interval: Option<Duration>,
}

impl WorkerConfig {
    /// A worker for `queue` with default settings.
    pub fn new(queue: impl Into<String>) -> Self {
        let queue = queue.into();
        WorkerConfig {
            owner: format!("autobatch-{queue}"),
            queue,
            concurrency: 1,
            poll_timeout_ms: 1000,
            lock_ttl_ms: 30_000,
            acks: BatchConfig {
                max_batch: 10,
                linger: Duration::from_millis(50),
                ..BatchConfig::default()
            },
            ack_retries: 3,
            ack_retry_base: Duration::from_millis(100),
            heartbeat_interval: Some(Duration::from_secs(10)),
        }
    }

    /// Sets the concurrency.
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n;
        self
    }

    fn validate(&self) -> Result<(), ConfigError> {
        validate_queue_name(&self.queue).map_err(|_| ConfigError::Field {
            field: "worker.queue",
            problem: "is not a valid queue name",
        })?;
        if self.concurrency == 0 || self.concurrency > 1000 {
            return Err(ConfigError::Field {
                field: "worker.concurrency",
                problem: "must be within 1..=1000",
            });
        }
        if !(0..=60_000).contains(&self.poll_timeout_ms) {
            return Err(ConfigError::Field {
                field: "worker.poll_timeout_ms",
                problem: "must be within 0..=60000",
            });
        }
        if self.lock_ttl_ms <= 0 {
            return Err(ConfigError::Field {
                field: "worker.lock_ttl_ms",
                problem: "must be positive",
            });
        }
        if self
            .heartbeat_interval
            .is_some_and(|h| h.is_zero() || h.as_millis() >= self.lock_ttl_ms as u128)
        {
            return Err(ConfigError::Field {
                field: "worker.heartbeat_interval",
                problem: "must be positive and shorter than worker.lock_ttl_ms",
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
