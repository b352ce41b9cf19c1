//! Counters kept by the batcher, for metrics and for tuning `max_batch` and `linger`.

use super::types::FlushReason;

/// Number of buckets in a [`SizeHistogram`]: one per power of two a `usize` can hold.
const BUCKETS: usize = usize::BITS as usize;

/// Batch sizes in power-of-two buckets: bucket `k` counts batches of `2^k ..= 2^(k+1) - 1` items.
///
/// Fixed-size so recording never allocates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SizeHistogram {
    counts: [u64; BUCKETS],
}

impl Default for SizeHistogram {
    fn default() -> Self {
        Self {
            counts: [0; BUCKETS],
        }
    }
}

impl SizeHistogram {
    pub(crate) fn record(&mut self, size: usize) {
        // Batches are never empty; `max(1)` only keeps `ilog2` total.
        let bucket = size.max(1).ilog2() as usize;
        self.counts[bucket] += 1;
    }

    /// How many batches fell in bucket `k` (`2^k ..= 2^(k+1) - 1` items); 0 past the last bucket.
    pub fn bucket(&self, k: usize) -> u64 {
        self.counts.get(k).copied().unwrap_or(0)
    }

    /// The non-empty buckets as `(smallest size, largest size, batches)`, smallest first.
    pub fn iter(&self) -> impl Iterator<Item = (usize, usize, u64)> + '_ {
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(k, &n)| {
                let lo = 1usize << k;
                (lo, lo.saturating_sub(1).saturating_add(lo), n)
            })
    }

    /// Total batches recorded.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }
}

/// Running totals since the batcher was built. All counters only grow.
///
/// Every accepted item ends up in exactly one of `items_sent`, `items_cancelled` or
/// `items_dropped`, or is still waiting (`Batcher::pending_items` + `Batcher::parked`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BatchStats {
    /// Pushes accepted (buffered or parked).
    pub items_pushed: u64,
    /// Of the accepted pushes, those that were parked by backpressure first.
    pub items_parked: u64,
    /// Pushes refused because the buffer was full under the `Reject` policy.
    pub items_rejected: u64,
    /// Buffered items dropped under the `DropOldest` policy.
    pub items_dropped: u64,
    /// Pushes refused because one item declared more than `max_pending_bytes`.
    pub items_too_large: u64,
    /// Pushes refused after `close`.
    pub items_after_close: u64,
    /// Items removed by `cancel` before they were sent.
    pub items_cancelled: u64,
    /// Items handed out in batches.
    pub items_sent: u64,
    /// Batches handed out.
    pub batches: u64,
    /// Batches reported complete (unknown or repeated ids are not counted).
    pub completions: u64,
    /// Batches flushed for each reason, indexed in [`FlushReason::ALL`] order; see
    /// [`BatchStats::flushes_for`].
    pub flushes: [u64; 5],
    /// Sizes of the batches handed out.
    pub batch_sizes: SizeHistogram,
    /// The most batches ever in flight at once.
    pub max_in_flight_seen: usize,
}

impl BatchStats {
    /// Batches flushed for `reason`.
    pub fn flushes_for(&self, reason: FlushReason) -> u64 {
        self.flushes[reason.index()]
    }

    /// Mean items per batch, or 0 before the first batch.
    pub fn mean_batch_size(&self) -> f64 {
        if self.batches == 0 {
            0.0
        } else {
            self.items_sent as f64 / self.batches as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_by_power_of_two() {
        let mut h = SizeHistogram::default();
        for size in [1, 2, 3, 4, 7, 8, 50, usize::MAX] {
            h.record(size);
        }
        assert_eq!(h.bucket(0), 1);
        assert_eq!(h.bucket(1), 2);
        assert_eq!(h.bucket(2), 2);
        assert_eq!(h.bucket(3), 1);
        assert_eq!(h.bucket(5), 1);
        assert_eq!(h.bucket(BUCKETS - 1), 1);
        assert_eq!(h.bucket(BUCKETS), 0);
        assert_eq!(h.total(), 8);
        let rows: Vec<_> = h.iter().collect();
        assert_eq!(rows[0], (1, 1, 1));
        assert_eq!(rows[1], (2, 3, 2));
        assert_eq!(rows[3], (8, 15, 1));
        assert_eq!(*rows.last().unwrap(), (1 << (BUCKETS - 1), usize::MAX, 1));
        assert_eq!(
            rows.len(),
            6,
            "only the buckets that hold batches: {rows:?}"
        );
    }
}
