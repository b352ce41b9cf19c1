//! Batcher limits and overflow policy, validated once when a [`Batcher`](super::Batcher) is built.

use std::time::Duration;

/// The longest [`BatchConfig::linger`] accepted.
///
/// Linger trades latency for batch size; past a minute it buys no more throughput and almost
/// certainly is a unit mistake (seconds given as milliseconds), so it is refused rather than
/// honoured.
pub const MAX_LINGER: Duration = Duration::from_secs(60);

/// What [`Batcher::push`](super::Batcher::push) does when the buffer is full.
///
/// "Full" means that buffering the new item would take the buffered items past
/// [`BatchConfig::max_pending_items`] or their bytes past [`BatchConfig::max_pending_bytes`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum OverflowPolicy {
    /// Nothing is lost: the item is accepted but parked in a FIFO outside the buffer and admitted,
    /// in order, as room appears. Every push made while any item is parked is parked too, so
    /// order is kept. The caller should hold back new pushes while
    /// [`Batcher::parked`](super::Batcher::parked) is non-zero.
    #[default]
    Backpressure,
    /// The new item is refused at once with [`PushError::Rejected`](super::PushError::Rejected).
    Reject,
    /// bunqueue's behaviour: the oldest 10% of the buffered items (at least one, and as many more
    /// as it takes to make room) are dropped and reported through
    /// [`Batcher::poll_rejected`](super::Batcher::poll_rejected); the new item is buffered.
    DropOldest,
}

/// Limits of one [`Batcher`](super::Batcher).
///
/// Fields are public so a configuration reads as data; [`BatchConfig::validate`] (also run by
/// [`Batcher::new`](super::Batcher::new)) refuses inconsistent values instead of adjusting them.
///
/// The defaults are bunqueue's add batcher (50 items, 5 ms) plus explicit bounds. The same type
/// configures ACK batching, for example:
///
/// ```
/// use std::time::Duration;
/// use autobatch_core::batch::BatchConfig;
///
/// let acks = BatchConfig::new()
///     .max_batch(10)
///     .linger(Duration::from_millis(50));
/// assert!(acks.validate().is_ok());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BatchConfig {
    /// Most items in one batch. Default 50. Must be at least 1.
    pub max_batch: usize,
    /// Longest time an item waits in the buffer, counted from its push, while a batch is in
    /// flight and an in-flight slot is free. Default 5 ms. At most [`MAX_LINGER`].
    pub linger: Duration,
    /// Most batches handed out and not yet [`complete`](super::Batcher::complete)d. Default 4.
    /// Must be at least 1.
    pub max_in_flight: usize,
    /// Most items held in the buffer (in-flight items do not count). Default 10 000. Must be at
    /// least `max_batch`, or a full batch could never form.
    pub max_pending_items: usize,
    /// Most bytes, as declared on each push, held in the buffer. Default 64 MiB. Must be non-zero.
    ///
    /// A memory bound on what waits, not a batch size: each batch is bounded separately, by
    /// `max_batch` and by the batcher's byte cap
    /// ([`Batcher::with_max_batch_bytes`](super::Batcher::with_max_batch_bytes)). The producer
    /// caps each PUSHB at the frame's budget for items (64 MiB less its envelope, see
    /// [`pushb_jobs_budget`](crate::wire::pushb_jobs_budget)), so the default holds one full
    /// frame's worth of adds waiting, per queue, besides the batches in flight. A smaller value
    /// makes smaller batches, never larger frames; an add that declares more than this alone is
    /// refused with [`PushError::TooLarge`](super::PushError::TooLarge).
    pub max_pending_bytes: usize,
    /// What to do with a push that does not fit. Default [`OverflowPolicy::Backpressure`].
    pub overflow: OverflowPolicy,
}

impl Default for BatchConfig {
    fn default() -> Self {
        Self {
            max_batch: 50,
            linger: Duration::from_millis(5),
            max_in_flight: 4,
            max_pending_items: 10_000,
            max_pending_bytes: 64 * 1024 * 1024,
            overflow: OverflowPolicy::Backpressure,
        }
    }
}

impl BatchConfig {
    /// The defaults: 50 items, 5 ms linger, 4 batches in flight, 10 000 items or 64 MiB
    /// pending, backpressure.
    ///
    /// ```
    /// use std::time::Duration;
    /// use autobatch_core::batch::{BatchConfig, OverflowPolicy};
    /// let c = BatchConfig::new()
    ///     .max_batch(100)
    ///     .linger(Duration::from_millis(2))
    ///     .overflow(OverflowPolicy::Reject);
    /// assert!(c.validate().is_ok());
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets [`max_batch`](Self::max_batch).
    pub fn max_batch(mut self, n: usize) -> Self {
        self.max_batch = n;
        self
    }

    /// Sets [`linger`](Self::linger).
    pub fn linger(mut self, linger: Duration) -> Self {
        self.linger = linger;
        self
    }

    /// Sets [`max_in_flight`](Self::max_in_flight).
    pub fn max_in_flight(mut self, n: usize) -> Self {
        self.max_in_flight = n;
        self
    }

    /// Sets [`max_pending_items`](Self::max_pending_items).
    pub fn max_pending_items(mut self, n: usize) -> Self {
        self.max_pending_items = n;
        self
    }

    /// Sets [`max_pending_bytes`](Self::max_pending_bytes).
    pub fn max_pending_bytes(mut self, n: usize) -> Self {
        self.max_pending_bytes = n;
        self
    }

    /// Sets [`overflow`](Self::overflow).
    pub fn overflow(mut self, policy: OverflowPolicy) -> Self {
        self.overflow = policy;
        self
    }

    /// Checks every limit, reporting the first field that is out of range.
    ///
    /// Nothing is coerced: a configuration that passes is used exactly as written.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.max_batch == 0 {
            return Err(ConfigError::MaxBatchZero);
        }
        if self.max_in_flight == 0 {
            return Err(ConfigError::MaxInFlightZero);
        }
        if self.max_pending_items < self.max_batch {
            return Err(ConfigError::MaxPendingItemsBelowMaxBatch {
                max_pending_items: self.max_pending_items,
                max_batch: self.max_batch,
            });
        }
        if self.max_pending_bytes == 0 {
            return Err(ConfigError::MaxPendingBytesZero);
        }
        if self.linger > MAX_LINGER {
            return Err(ConfigError::LingerTooLong {
                linger: self.linger,
            });
        }
        Ok(())
    }
}

/// A [`BatchConfig`] field out of range. Local misuse: fix the configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// `max_batch` is 0.
    #[error("max_batch must be at least 1")]
    MaxBatchZero,
    /// `max_in_flight` is 0.
    #[error("max_in_flight must be at least 1")]
    MaxInFlightZero,
    /// `max_pending_items` is smaller than `max_batch`.
    #[error("max_pending_items ({max_pending_items}) must be at least max_batch ({max_batch})")]
    MaxPendingItemsBelowMaxBatch {
        /// The value given.
        max_pending_items: usize,
        /// The `max_batch` it must reach.
        max_batch: usize,
    },
    /// `max_pending_bytes` is 0.
    #[error("max_pending_bytes must be at least 1")]
    MaxPendingBytesZero,
    /// The per-batch byte cap given to
    /// [`Batcher::with_max_batch_bytes`](super::Batcher::with_max_batch_bytes) is 0.
    #[error("max_batch_bytes must be at least 1")]
    MaxBatchBytesZero,
    /// `linger` is longer than [`MAX_LINGER`].
    #[error("linger ({linger:?}) must be at most {MAX_LINGER:?}")]
    LingerTooLong {
        /// The value given.
        linger: Duration,
    },
}

impl ConfigError {
    /// The name of the offending [`BatchConfig`] field, for messages and logs.
    pub fn field(&self) -> &'static str {
        match self {
            ConfigError::MaxBatchZero => "max_batch",
            ConfigError::MaxInFlightZero => "max_in_flight",
            ConfigError::MaxPendingItemsBelowMaxBatch { .. } => "max_pending_items",
            ConfigError::MaxPendingBytesZero => "max_pending_bytes",
            ConfigError::MaxBatchBytesZero => "max_batch_bytes",
            ConfigError::LingerTooLong { .. } => "linger",
        }
    }
}
