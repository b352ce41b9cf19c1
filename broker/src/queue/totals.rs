//! Server-wide figures, counted as bunqueue 2.9.5 counts them for `Stats`, `Metrics` and
//! `Prometheus`: jobs pushed, pulled, completed and failed for good since the broker started
//! (kept in memory: a restart starts them at 0, as bunqueue's), and the push and pull rates
//! (bunqueue's `RateTracker`: an exponential moving average of the events per second since the
//! rate was last read, smoothing 0.3).
//!
//! Per queue, the jobs completed and failed for good per minute (the queue form of `Metrics`,
//! bunqueue's telemetry journal in memory mode): at most [`MAX_DATA_POINTS`] minutes are kept
//! per queue and kind, the newest ones; Obliterate forgets the queue's.

use std::collections::{BTreeMap, HashMap};

/// Stats and Prometheus, from the totals and the counts handed in.
mod report;

pub(crate) use report::Gauges;

/// bunqueue's `maxMetricDataPoints`: two weeks of minutes.
pub(crate) const MAX_DATA_POINTS: i64 = 20_160;

/// One queue's count of one kind (completed or failed) per minute.
#[derive(Debug, Clone, Default)]
pub(crate) struct Series {
    /// Counted so far.
    pub total: u64,
    /// When the last one was counted, epoch ms.
    pub prev_ts: f64,
    /// The count of the minute of the last one.
    pub prev_count: u64,
    /// Minute (epoch ms / 60 000) → count.
    buckets: BTreeMap<i64, u64>,
}

impl Series {
    fn count(&mut self, now: f64) {
        let minute = (now / 60_000.0).floor() as i64;
        let n = self.buckets.entry(minute).or_insert(0);
        *n += 1;
        self.total += 1;
        self.prev_ts = now;
        self.prev_count = *n;
        let newest = *self.buckets.keys().next_back().expect("one bucket");
        let cutoff = newest - MAX_DATA_POINTS + 1;
        while self
            .buckets
            .first_key_value()
            .is_some_and(|(m, _)| *m < cutoff)
        {
            self.buckets.pop_first();
        }
    }

    /// Counts per minute, newest first, from the newest minute counted to the oldest kept
    /// (minutes with none in between are 0), as bunqueue's `expandBuckets`.
    pub fn data(&self) -> Vec<u64> {
        let (Some((&oldest, _)), Some((&newest, _))) = (
            self.buckets.first_key_value(),
            self.buckets.last_key_value(),
        ) else {
            return Vec::new();
        };
        let oldest = oldest.max(newest - MAX_DATA_POINTS + 1);
        let mut data = vec![0; (newest - oldest + 1) as usize];
        for (minute, n) in self.buckets.range(oldest..) {
            data[(newest - minute) as usize] = *n;
        }
        data
    }
}

/// An events-per-second rate, averaged as bunqueue's `RateTracker` averages it.
#[derive(Debug, Clone, Copy)]
struct Rate {
    count: u64,
    last_rate: f64,
    last_calc: f64,
}

impl Rate {
    /// bunqueue's smoothing factor.
    const ALPHA: f64 = 0.3;

    fn new(now: f64) -> Rate {
        Rate {
            count: 0,
            last_rate: 0.0,
            last_calc: now,
        }
    }

    /// The rate now, per second, rounded to hundredths; a read closer than 100 ms to the
    /// previous one answers the previous rate.
    fn read(&mut self, now: f64) -> f64 {
        let elapsed = (now - self.last_calc) / 1000.0;
        if elapsed >= 0.1 {
            let current = self.count as f64 / elapsed;
            self.last_rate = if self.last_rate == 0.0 {
                current
            } else {
                Self::ALPHA * current + (1.0 - Self::ALPHA) * self.last_rate
            };
            self.count = 0;
            self.last_calc = now;
        }
        (self.last_rate * 100.0).round() / 100.0
    }
}

/// The broker's running totals (see the module docs).
#[derive(Debug, Clone)]
pub(crate) struct Totals {
    /// Jobs added (a push answered with an existing job's id adds none).
    pub pushed: u64,
    /// Jobs handed out by pulls.
    pub pulled: u64,
    /// Jobs completed.
    pub completed: u64,
    /// Jobs failed for good (to the DLQ, or removed on failure).
    pub failed: u64,
    /// When the broker started, epoch ms.
    pub started_at: f64,
    push_rate: Rate,
    pull_rate: Rate,
    /// Queue → (completed, failed) per minute.
    per_queue: HashMap<String, [Series; 2]>,
}

impl Totals {
    /// Totals at 0, started `now`.
    pub fn new(now: f64) -> Totals {
        Totals {
            pushed: 0,
            pulled: 0,
            completed: 0,
            failed: 0,
            started_at: now,
            push_rate: Rate::new(now),
            pull_rate: Rate::new(now),
            per_queue: HashMap::new(),
        }
    }

    /// A job was added.
    pub fn pushed(&mut self) {
        self.pushed += 1;
        self.push_rate.count += 1;
    }

    /// A job was handed out.
    pub fn pulled(&mut self) {
        self.pulled += 1;
        self.pull_rate.count += 1;
    }

    /// A job of `queue` completed (`failed`: failed for good) now.
    pub fn finished(&mut self, queue: &str, failed: bool, now: f64) {
        if failed {
            self.failed += 1;
        } else {
            self.completed += 1;
        }
        let series = match self.per_queue.get_mut(queue) {
            Some(s) => s,
            None => self.per_queue.entry(queue.to_owned()).or_default(),
        };
        series[usize::from(failed)].count(now);
    }

    /// The per-minute series of `queue`'s completed (`failed`: failed) jobs, if any.
    pub fn series(&self, queue: &str, failed: bool) -> Option<&Series> {
        self.per_queue.get(queue).map(|s| &s[usize::from(failed)])
    }

    /// Obliterate: the queue's series go with it.
    pub fn forget(&mut self, queue: &str) {
        self.per_queue.remove(queue);
    }

    /// Pushes and pulls per second (see [`Rate`]).
    pub fn rates(&mut self, now: f64) -> (f64, f64) {
        (self.push_rate.read(now), self.pull_rate.read(now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_average_as_bunqueue_does() {
        let mut t = Totals::new(0.0);
        for _ in 0..10 {
            t.pushed();
        }
        assert_eq!(t.rates(50.0), (0.0, 0.0), "too soon: the previous rate");
        assert_eq!(t.rates(1000.0), (10.0, 0.0));
        for _ in 0..20 {
            t.pushed();
        }
        // 0.3 × 20 + 0.7 × 10
        assert_eq!(t.rates(2000.0).0, 13.0);
        assert_eq!(t.pushed, 30);
    }

    #[test]
    fn series_count_per_minute_newest_first() {
        let mut t = Totals::new(0.0);
        t.finished("q", false, 1_000.0);
        t.finished("q", false, 2_000.0);
        t.finished("q", false, 3.0 * 60_000.0 + 5.0);
        t.finished("q", true, 10.0);
        let s = t.series("q", false).expect("series");
        assert_eq!(s.data(), vec![1, 0, 0, 2]);
        assert_eq!((s.total, s.prev_count, s.prev_ts), (3, 1, 180_005.0));
        assert_eq!(t.series("q", true).map(Series::data), Some(vec![1]));
        assert_eq!((t.completed, t.failed), (3, 1));
        t.forget("q");
        assert!(t.series("q", false).is_none());
    }
}
