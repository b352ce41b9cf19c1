//! A queue's rate limit and global concurrency limit, kept and enforced as bunqueue 2.9.5's
//! `LimiterManager` does (memory mode): the state behind `crate::ops::limits`, and the check
//! [`State::pull`](super::State::pull) makes before it hands out a job.
//!
//! * Rate limit: a token bucket of `limit` tokens refilled at `limit` per `duration` ms (1 s
//!   by default), full when set; every job handed out takes a token. With a `ttl` the limit
//!   lifts itself that long after it was set (lazily, when a pull or a read looks at it).
//!   Setting it again starts a full bucket.
//! * Concurrency: a counter of the jobs handed out since the limit was set, less those that
//!   left `active` since (a finished job releases a slot even if it was pulled before the
//!   limit existed, down to 0, as bunqueue's counter does). Setting it again keeps the
//!   counter; clearing it forgets it.
//!
//! A pull that meets a limit stops there: it returns the jobs it took so far (none for a
//! PULL), and a long-poll waits for a signal or its deadline as for an empty queue. The
//! limits are checked only once a job is eligible (a job dropped for its ttl costs nothing),
//! concurrency first, and a job refused by the rate limit gives its concurrency slot back.
//!
//! Numbers are kept as the client sent them (JS numbers: `2.5` jobs per second is a bucket of
//! 2.5 tokens), so GetQueueLimits echoes them. Obliterate forgets the queue's limits, as
//! bunqueue's does; an entry is freed once both limits are cleared, so memory is bounded by
//! the queues that have a limit.

use std::collections::HashMap;

use autobatch_core::wire::Value;

use crate::events::js_number;

/// Group controls: pause, manual rate limits, concurrency and rate-limit overrides.
pub(crate) mod groups;
/// Setting, reading and keeping a queue's limits.
mod settings;

/// bunqueue's default rate-limit window, ms.
const DEFAULT_WINDOW: f64 = 1000.0;

/// bunqueue's `RateLimiter`: a token bucket.
struct Bucket {
    capacity: f64,
    /// Tokens per second.
    refill_rate: f64,
    tokens: f64,
    last_refill: f64,
}

impl Bucket {
    fn new(capacity: f64, refill_rate: f64, now: f64) -> Bucket {
        Bucket {
            capacity,
            refill_rate,
            tokens: capacity,
            last_refill: now,
        }
    }

    fn refill(&mut self, now: f64) {
        let elapsed = (now - self.last_refill) / 1000.0;
        let refilled = self.tokens + elapsed * self.refill_rate;
        // JS `Math.min`: NaN wins (an infinite rate times no time), where `f64::min` drops it.
        self.tokens = if refilled.is_nan() {
            f64::NAN
        } else {
            self.capacity.min(refilled)
        };
        self.last_refill = now;
    }

    fn try_acquire(&mut self, now: f64) -> bool {
        self.refill(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// bunqueue's `getTtl`: ms until a token is back; 0 while fewer than `max_jobs` tokens
    /// are used (a JS comparison: `None` is `undefined`, `Some(NaN)` never compares).
    fn ttl(&mut self, max_jobs: Option<f64>, now: f64) -> f64 {
        self.refill(now);
        let consumed = self.capacity - self.tokens;
        if max_jobs.is_some_and(|m| consumed < m) {
            return 0.0;
        }
        if self.tokens >= 1.0 || self.refill_rate <= 0.0 {
            return 0.0;
        }
        ((1.0 - self.tokens) / self.refill_rate * 1000.0).ceil()
    }
}

struct RateLimit {
    limit: f64,
    /// The window as set (None: bunqueue's default, reported as 1000).
    duration: Option<f64>,
    /// Epoch ms at which the limit lifts itself (the `ttl` form).
    expires_at: Option<f64>,
    bucket: Bucket,
}

struct Concurrency {
    limit: f64,
    active: u64,
}

#[derive(Default)]
struct QueueLimit {
    rate: Option<RateLimit>,
    concurrency: Option<Concurrency>,
}

/// Every queue's limits (see the module docs).
#[derive(Default)]
pub(crate) struct Limits {
    queues: HashMap<String, QueueLimit>,
    /// Queue → group → jobs of the group handed out and not released since, as bunqueue's
    /// `activeGroupCounts` counts them (GetGroupActiveCount): released by the same paths as
    /// a concurrency slot, the late ACK of a retried job included, so it may read below the
    /// jobs actually active, as there. Entries at 0 are freed.
    group_active: HashMap<String, HashMap<String, u64>>,
    /// Group controls (see `groups`).
    groups: groups::Groups,
}

impl Limits {
    /// The group controls, to read and set.
    pub(crate) fn groups(&mut self) -> &mut groups::Groups {
        &mut self.groups
    }

    /// When the first group rate limit of `queue` ends, if any holds (see `groups`).
    pub(crate) fn next_group_retry(&self, queue: &str, now: f64) -> Option<f64> {
        self.groups.next_retry(queue, now)
    }

    /// Drops a rate limit whose ttl has run out (bunqueue's `expireRateLimitIfNeeded`).
    fn expire(&mut self, queue: &str, now: f64) {
        let Some(q) = self.queues.get_mut(queue) else {
            return;
        };
        if q.rate
            .as_ref()
            .and_then(|r| r.expires_at)
            .is_some_and(|at| now >= at)
        {
            q.rate = None;
            self.free_if_empty(queue);
        }
    }

    fn free_if_empty(&mut self, queue: &str) {
        if self
            .queues
            .get(queue)
            .is_some_and(|q| q.rate.is_none() && q.concurrency.is_none())
        {
            self.queues.remove(queue);
        }
    }

    /// Takes a concurrency slot and a rate-limit token for one job of `queue` about to be
    /// handed out; false (and nothing taken) when either limit refuses.
    pub(super) fn acquire(&mut self, queue: &str, now: f64) -> bool {
        if self.queues.is_empty() {
            return true;
        }
        self.expire(queue, now);
        let Some(q) = self.queues.get_mut(queue) else {
            return true;
        };
        if let Some(c) = &mut q.concurrency {
            if (c.active as f64) < c.limit {
                c.active += 1;
            } else {
                return false;
            }
        }
        if let Some(r) = &mut q.rate {
            if !r.bucket.try_acquire(now) {
                if let Some(c) = &mut q.concurrency {
                    c.active = c.active.saturating_sub(1);
                }
                return false;
            }
        }
        true
    }

    /// A job of group `group` of `queue` was handed out.
    pub(super) fn group_started(&mut self, queue: &str, group: &str) {
        let groups = match self.group_active.get_mut(queue) {
            Some(g) => g,
            None => self.group_active.entry(queue.to_owned()).or_default(),
        };
        match groups.get_mut(group) {
            Some(n) => *n += 1,
            None => {
                groups.insert(group.to_owned(), 1);
            }
        }
    }

    /// Whether a job of `group` may be handed out now, under the pull's group defaults.
    pub(super) fn group_eligible(
        &mut self,
        queue: &str,
        group: &str,
        defaults: Option<&groups::PullGroup>,
        now: f64,
    ) -> bool {
        if defaults.is_none() && self.groups.none_in(queue) {
            return true;
        }
        let active = self.group_active(queue, group);
        self.groups.eligible(queue, group, defaults, active, now)
    }

    /// A job of `group` was handed out under the pull's group defaults: its rate window counts it.
    pub(super) fn group_acquired(
        &mut self,
        queue: &str,
        group: &str,
        defaults: Option<&groups::PullGroup>,
        now: f64,
    ) {
        self.groups.acquired(queue, group, defaults, now);
    }

    /// The groups of `queue` that have a control.
    pub(super) fn group_names(&self, queue: &str) -> Vec<String> {
        self.groups.names(queue)
    }

    /// What a restart keeps of `group`'s controls (see `groups`).
    pub(super) fn group_setting(&self, queue: &str, group: &str) -> Option<Value> {
        self.groups.setting(queue, group)
    }

    /// Puts back what [`group_setting`](Self::group_setting) kept.
    pub(super) fn restore_group(&mut self, queue: &str, group: &str, v: &Value) {
        self.groups.restore(queue, group, v);
    }

    /// Jobs of group `group` of `queue` handed out and not released.
    pub(super) fn group_active(&self, queue: &str, group: &str) -> u64 {
        self.group_active
            .get(queue)
            .and_then(|g| g.get(group))
            .copied()
            .unwrap_or(0)
    }

    /// A job of `queue` (of `group`, if any) left `active`: its concurrency slot and its
    /// group's count are released. True when the queue has a concurrency limit (a long-poll
    /// held back by it may now get a job).
    pub(super) fn release(&mut self, queue: &str, group: Option<&str>) -> bool {
        if let (Some(group), Some(groups)) = (group, self.group_active.get_mut(queue)) {
            if let Some(n) = groups.get_mut(group) {
                *n -= 1;
                if *n == 0 {
                    groups.remove(group);
                    if groups.is_empty() {
                        self.group_active.remove(queue);
                    }
                }
            }
        }
        match self
            .queues
            .get_mut(queue)
            .and_then(|q| q.concurrency.as_mut())
        {
            Some(c) => {
                c.active = c.active.saturating_sub(1);
                true
            }
            None => false,
        }
    }

    /// Obliterate: the queue's limits and group counts go with it.
    pub(super) fn forget(&mut self, queue: &str) {
        self.queues.remove(queue);
        self.group_active.remove(queue);
        self.groups.forget(queue);
    }
}
