//! The dead-letter queue. In bunqueue 2.9.5 every job that fails for good (a FAIL without
//! attempts left, Discard, a timeout or a stall at the last attempt) moves to its queue's DLQ,
//! and that is what `failed` counts and GetState calls `failed`. The broker's failed jobs are
//! that DLQ: [`Dlq`] keeps each queue's ids in failure order, capped
//! at the queue's `maxEntries` (bunqueue's default 10 000, or SetDlqConfig's: see
//! `dlq_config`; the oldest entry leaves for good past it), so the DLQ's memory is bounded per
//! queue as bunqueue's is.
//!
//! An entry carries the job's failed attempts (see `timeline`, in memory only). Not done:
//! automatic retries (`autoRetry: true` is refused).

use std::collections::{BTreeMap, HashMap};

use autobatch_core::ops::DlqConfig;
use autobatch_core::wire::Value;

use super::dlq_config::DlqConfigs;

#[cfg(test)]
mod lifecycle_tests;

/// Every failure reason bunqueue's GetDlqStats counts, in its order.
pub(crate) const REASONS: [&str; 7] = [
    "explicit_fail",
    "max_attempts_exceeded",
    "timeout",
    "stalled",
    "ttl_expired",
    "worker_lost",
    "unknown",
];

/// Which entries a DLQ command takes (bunqueue's `getDlqFiltered`).
#[derive(Debug, Default, Clone)]
pub(crate) struct Filter {
    pub reason: Option<String>,
    pub older_than: Option<f64>,
    pub newer_than: Option<f64>,
    /// Only entries due for an automatic retry: never any here (auto retry is off).
    pub retriable: bool,
    /// Only entries past `maxAge`.
    pub expired: bool,
    pub offset: Option<u64>,
    pub limit: Option<u64>,
}

/// One DLQ entry as the listing shows it.
pub(crate) struct Entry {
    pub job: Value,
    pub entered_at: f64,
    pub reason: &'static str,
    pub error: Option<String>,
    /// Its failed attempts, oldest first.
    pub attempts: Vec<Value>,
    /// `enteredAt` plus the queue's `maxAge` (none without one).
    pub expires_at: Option<f64>,
}

impl Entry {
    /// bunqueue's entry object (`createDlqEntry`).
    pub fn to_value(&self) -> Value {
        Value::map([
            ("job", self.job.clone()),
            ("enteredAt", Value::F64(self.entered_at)),
            ("reason", Value::from(self.reason)),
            ("error", self.error.clone().map_or(Value::Nil, Value::from)),
            ("attempts", Value::Array(self.attempts.clone())),
            ("retryCount", Value::Int(0)),
            ("lastRetryAt", Value::Nil),
            ("nextRetryAt", Value::Nil),
            ("expiresAt", self.expires_at.map_or(Value::Nil, Value::F64)),
        ])
    }
}

/// The DLQ's own state: which jobs each queue's DLQ holds, in failure order, and the queues'
/// settings. What an entry says (reason, error, attempts) is the job's.
#[derive(Debug, Default)]
pub(crate) struct Dlq {
    /// Queue → failure order → job id; a queue's map goes with its last entry.
    queues: HashMap<String, BTreeMap<u64, String>>,
    configs: DlqConfigs,
}

impl Dlq {
    /// GetDlqConfig.
    pub fn config(&self, queue: &str) -> DlqConfig {
        self.configs.get(queue)
    }

    /// SetDlqConfig (see [`DlqConfigs::set`]); the new settings.
    pub fn set_config(&mut self, queue: &str, patch: &Value) -> Result<DlqConfig, String> {
        self.configs.set(queue, patch)
    }

    /// Puts back settings kept across a restart.
    pub fn restore_config(&mut self, queue: &str, config: DlqConfig) {
        self.configs.restore(queue, config);
    }

    /// `queue`'s `maxAge`, ms.
    pub fn max_age(&self, queue: &str) -> Option<f64> {
        self.configs.max_age(queue)
    }

    /// `queue`'s `maxEntries`.
    pub fn max_entries(&self, queue: &str) -> usize {
        self.configs.max_entries(queue)
    }

    /// Files job `id` of `queue`, failed `seq`-th.
    pub fn file(&mut self, queue: &str, seq: u64, id: &str) {
        let q = match self.queues.get_mut(queue) {
            Some(q) => q,
            None => self.queues.entry(queue.to_owned()).or_default(),
        };
        q.insert(seq, id.to_owned());
    }

    /// Takes out the entry of `queue` filed `seq`-th, if there.
    pub fn remove(&mut self, queue: &str, seq: u64) {
        if let Some(q) = self.queues.get_mut(queue) {
            q.remove(&seq);
            if q.is_empty() {
                self.queues.remove(queue);
            }
        }
    }

    /// Takes out the oldest entries of `queue` until at most `max` are left: their ids,
    /// oldest first, for the caller to drop for good.
    pub fn evict(&mut self, queue: &str, max: usize) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(q) = self.queues.get_mut(queue) {
            while q.len() > max {
                let Some((_, oldest)) = q.pop_first() else {
                    break;
                };
                out.push(oldest);
            }
            if q.is_empty() {
                self.queues.remove(queue);
            }
        }
        out
    }

    /// How many entries `queue`'s DLQ holds.
    pub fn len(&self, queue: &str) -> usize {
        self.queues.get(queue).map_or(0, BTreeMap::len)
    }

    /// `GetDlqStats` of `queue`: `(total, per reason in [`REASONS`] order, expired, oldest,
    /// newest)`. `entry` as for [`select`](Self::select).
    pub fn stats(
        &self,
        queue: &str,
        now: f64,
        entry: impl Fn(&str) -> Option<(f64, &'static str)>,
    ) -> (u64, [u64; 7], u64, Option<f64>, Option<f64>) {
        let mut by = [0u64; 7];
        let (mut expired, mut oldest, mut newest) = (0, None::<f64>, None::<f64>);
        let ids = self.select(queue, None, now, &entry);
        let max_age = self.max_age(queue);
        for (at, reason) in ids.iter().filter_map(|id| entry(id)) {
            if let Some(i) = REASONS.iter().position(|r| *r == reason) {
                by[i] += 1;
            }
            if max_age.is_some_and(|age| at + age <= now) {
                expired += 1;
            }
            oldest = Some(oldest.map_or(at, |o| o.min(at)));
            newest = Some(newest.map_or(at, |n| n.max(at)));
        }
        (ids.len() as u64, by, expired, oldest, newest)
    }

    /// The ids of `queue`'s DLQ selected by `filter`, oldest first. `entry`: a job's
    /// `(enteredAt, reason)`, none for an unknown job (never selected).
    pub fn select(
        &self,
        queue: &str,
        filter: Option<&Filter>,
        now: f64,
        entry: impl Fn(&str) -> Option<(f64, &'static str)>,
    ) -> Vec<String> {
        let Some(q) = self.queues.get(queue) else {
            return Vec::new();
        };
        let all = q.values();
        let Some(f) = filter else {
            return all.cloned().collect();
        };
        let max_age = self.max_age(queue);
        let picked = all.filter(|id| {
            let Some((entered, reason)) = entry(id) else {
                return false;
            };
            // bunqueue tests each bound for truthiness: 0 means unset.
            !(f.reason.as_deref().is_some_and(|r| r != reason)
                || f.older_than.is_some_and(|t| t != 0.0 && entered > t)
                || f.newer_than.is_some_and(|t| t != 0.0 && entered < t)
                || f.retriable
                || (f.expired && max_age.is_none_or(|age| entered + age > now)))
        });
        let skip = f.offset.unwrap_or(0) as usize;
        let take = f
            .limit
            .filter(|n| *n > 0)
            .map_or(usize::MAX, |n| n as usize);
        picked.skip(skip).take(take).cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Entries leave oldest first past the cap, and a queue's map goes with its last entry.
    #[test]
    fn eviction_takes_the_oldest_and_frees_the_queue() {
        let mut d = Dlq::default();
        for (seq, id) in [(3, "c"), (1, "a"), (2, "b")] {
            d.file("q", seq, id);
        }
        assert_eq!(d.evict("q", 1), ["a", "b"]);
        assert_eq!(d.select("q", None, 0.0, |_| None), ["c"]);
        d.remove("q", 3);
        assert_eq!(d.len("q"), 0);
        assert!(d.queues.is_empty());
    }
}
