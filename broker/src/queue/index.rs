//! A queue's jobs by state, as pulls, counts and listings read them: the ready jobs in
//! bunqueue's pull order, with how many of them have a priority, the delayed ones by due time,
//! the counts of the other states, the pause, and the long-poll signal.
//!
//! The ready jobs are kept in two indexes, as bunqueue 2.9.5 pulls them: those without a
//! group in the queue's ready order ([`ReadyKey`]), and the grouped ones in their groups'
//! lanes (`lanes`). A pull takes the ungrouped ones first, then the groups' in turn. While a
//! queue holds no grouped ready job the lanes are empty and a pull is the ready order alone,
//! which is bunqueue's order for a queue without grouped jobs.

use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::sync::Arc;

use autobatch_core::wire::JobCounts;
use tokio::sync::Notify;

use crate::store::JobRecord;
use lanes::{group_of, GroupLanes};
pub(crate) use rank::priority_rank;

/// A queue's grouped ready jobs, lane by group, in bunqueue's group-scheduler order.
mod lanes;
mod rank;

/// One queue's index.
#[derive(Default)]
pub(crate) struct QueueIndex {
    /// The ready jobs without a group: bunqueue's pull order ([`ReadyKey`]) → id.
    ready: BTreeMap<ReadyKey, String>,
    /// The ready jobs with a group, lane by group (see `lanes`).
    lanes: GroupLanes,
    /// (run_at rounded up, seq) → id, and whether the job has a group.
    delayed: BTreeMap<(i64, u64), (String, bool)>,
    /// How many delayed jobs have a group (see [`holds_grouped`](Self::holds_grouped)).
    delayed_grouped: u64,
    /// The ready jobs with a priority above 0.
    prioritized: u64,
    /// Jobs in `waiting-children` (they are in no other index).
    pub waiting_children: u64,
    pub active: u64,
    pub completed: u64,
    pub failed: u64,
    pub notify: Arc<Notify>,
    /// Paused: pulls hand out nothing (see `admin`).
    pub paused: bool,
}

impl QueueIndex {
    /// Files a waiting job as ready: in its group's lane, or in the ready order without one.
    pub fn file_ready(&mut self, rec: &JobRecord) {
        if rec.priority > 0.0 {
            self.prioritized += 1;
        }
        match group_of(rec) {
            Some(group) => self.lanes.file(group, rec),
            None => {
                self.ready.insert(ready_key(rec), rec.id.clone());
            }
        }
    }

    /// Takes a waiting job out of the ready jobs (by its record as it was filed).
    pub fn unready(&mut self, rec: &JobRecord) {
        match group_of(rec) {
            Some(group) => self.lanes.unfile(group, rec),
            None => {
                self.ready.remove(&ready_key(rec));
            }
        }
        if rec.priority > 0.0 {
            self.prioritized = self.prioritized.saturating_sub(1);
        }
    }

    /// Files a delayed job under its due time.
    pub fn file_delayed(&mut self, rec: &JobRecord) {
        let grouped = group_of(rec).is_some();
        let before = self
            .delayed
            .insert(delayed_key(rec), (rec.id.clone(), grouped));
        if grouped && before.is_none() {
            self.delayed_grouped += 1;
        }
    }

    /// Takes a delayed job out (by its record as it was filed).
    pub fn undelay(&mut self, rec: &JobRecord) {
        if let Some((_, true)) = self.delayed.remove(&delayed_key(rec)) {
            self.delayed_grouped = self.delayed_grouped.saturating_sub(1);
        }
    }

    /// Takes out the first delayed job due at `now`, if any.
    pub fn pop_due(&mut self, now: f64) -> Option<String> {
        let entry = self.delayed.first_entry()?;
        if (entry.key().0 as f64) > now {
            return None;
        }
        let (id, grouped) = entry.remove();
        if grouped {
            self.delayed_grouped = self.delayed_grouped.saturating_sub(1);
        }
        Some(id)
    }

    /// When the first delayed job is due.
    pub fn next_due(&self) -> Option<f64> {
        self.delayed.first_key_value().map(|(k, _)| k.0 as f64)
    }

    /// The ready job a pull takes next, as bunqueue's group scheduler picks it: the first
    /// without a group, else the head of the first lane from the cursor whose group is
    /// `eligible` (each group asked once). A pull's `affinity` narrows that while the queue
    /// holds a grouped job: `Some(None)` takes only jobs without a group, `Some(Some(g))` only
    /// the head of `g`'s lane. It stays filed: the caller takes it out with
    /// [`take`](Self::take), or with [`unready`](Self::unready) when it drops it.
    pub fn next_ready(
        &self,
        affinity: Option<Option<&str>>,
        mut eligible: impl FnMut(&str) -> bool,
    ) -> Option<&String> {
        let first = self.ready.first_key_value().map(|(_, id)| id);
        match affinity.filter(|_| self.holds_grouped()) {
            None => first.or_else(|| self.lanes.first_eligible(eligible).map(|(_, id)| id)),
            Some(None) => first,
            Some(Some(group)) => self.lanes.head(group).filter(|_| eligible(group)),
        }
    }

    /// Whether a job with a group is ready or delayed: when bunqueue's queue has a group
    /// scheduler, which a pull's affinity needs.
    fn holds_grouped(&self) -> bool {
        !self.lanes.is_empty() || self.delayed_grouped > 0
    }

    /// Takes out a ready job a pull hands out (by its record as it was filed): its group's
    /// turn ends.
    pub fn take(&mut self, rec: &JobRecord) {
        self.unready(rec);
        if let Some(group) = group_of(rec) {
            self.lanes.advance(group);
        }
    }

    /// Takes id `id` out of the ready jobs wherever it is filed, when its record is gone: a
    /// walk of them all.
    pub fn purge(&mut self, id: &str) {
        self.ready.retain(|_, x| x != id);
        self.lanes.purge(id);
    }

    /// The groups with ready jobs, each with its jobs' ids.
    pub fn lane_groups(&self) -> impl Iterator<Item = (&String, impl Iterator<Item = &String>)> {
        self.lanes.groups()
    }

    /// Takes the groups' turns in `order`, the first's now (see [`GroupLanes::relink`]).
    pub fn relink_lanes(&mut self, order: &[String]) {
        self.lanes.relink(order);
    }

    /// The ready jobs (those without a group, then the groups', lane by lane), then the
    /// delayed ones, in index order.
    pub fn queued_ids(&self) -> impl Iterator<Item = &String> {
        self.ready
            .values()
            .chain(self.lanes.ids())
            .chain(self.delayed_ids())
    }

    /// The delayed jobs, soonest due first.
    pub fn delayed_ids(&self) -> impl Iterator<Item = &String> {
        self.delayed.values().map(|(id, _)| id)
    }

    /// How many ready jobs there are.
    pub fn ready_len(&self) -> u64 {
        self.ready.len() as u64 + self.lanes.len()
    }

    /// How many ready jobs have a priority.
    pub fn prioritized(&self) -> u64 {
        self.prioritized
    }

    /// How many delayed jobs there are.
    pub fn delayed_len(&self) -> u64 {
        self.delayed.len() as u64
    }

    /// Whether it holds nothing: no job in any state, no pause, and no long-poll waiting on
    /// its signal (each waiter holds a clone of it).
    pub fn is_idle(&self) -> bool {
        self.ready.is_empty()
            && self.lanes.is_empty()
            && self.delayed.is_empty()
            && self.prioritized == 0
            && self.waiting_children == 0
            && self.active == 0
            && self.completed == 0
            && self.failed == 0
            && !self.paused
            && Arc::strong_count(&self.notify) == 1
    }

    /// Per-state counts, in bunqueue's paused view while paused: its ready jobs (waiting
    /// and prioritized) are counted as `paused`, not in their own buckets.
    pub fn counts(&self) -> JobCounts {
        let ready = self.ready_len();
        let mut counts = JobCounts {
            waiting: ready - self.prioritized.min(ready),
            prioritized: self.prioritized,
            delayed: self.delayed_len(),
            active: self.active,
            completed: self.completed,
            failed: self.failed,
            waiting_children: self.waiting_children,
            paused: 0,
        };
        if self.paused {
            counts.paused = counts.waiting + counts.prioritized;
            counts.waiting = 0;
            counts.prioritized = 0;
        }
        counts
    }

    /// Emptied, keeping the signal long-polls hold clones of (Obliterate).
    pub fn clear(&mut self) {
        let notify = self.notify.clone();
        *self = QueueIndex::default();
        self.notify = notify;
    }
}

/// Where a ready job stands, in bunqueue's order (its `comparePriorityEntries`): higher
/// priority first; at one priority LIFO jobs before FIFO ones, the LIFO ones by id, highest
/// first; FIFO jobs by run time (a promoted or retried job queues behind the jobs already
/// due), then by id. Ids are UUIDv7 made in order by whoever made them (this broker's
/// `Uuid::now_v7`, `Bun.randomUUIDv7()` in bunqueue's client, autobatch's flow ids: each numbers
/// the ids of one millisecond), so equal run times keep the order of adding.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct ReadyKey(Reverse<i64>, Order);

/// See [`ReadyKey`]. The variants' order matters: LIFO before FIFO.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Order {
    Lifo(Reverse<String>),
    Fifo(i64, String),
}

fn ready_key(rec: &JobRecord) -> ReadyKey {
    let order = if rec.lifo {
        Order::Lifo(Reverse(rec.id.clone()))
    } else {
        Order::Fifo(rec.run_at.floor() as i64, rec.id.clone())
    };
    ReadyKey(Reverse(priority_rank(rec.priority)), order)
}

/// A delayed job's place: its run time rounded up, then its creation order.
fn delayed_key(rec: &JobRecord) -> (i64, u64) {
    (rec.run_at.ceil() as i64, rec.seq)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::jobs::new_record;
    use autobatch_core::wire::{JobSpec, Value};

    /// A job as an add makes it, ready at `run_at`.
    fn rec(id: &str, priority: i64, run_at: f64) -> JobRecord {
        let spec = JobSpec::new("j", Value::Nil);
        JobRecord {
            priority: priority as f64,
            run_at,
            ..new_record("q", id.into(), spec, 0, false, 0.0)
        }
    }

    /// Priorities rank as JS compares them: fractions between their integers, negatives below
    /// zero, -0 as 0.
    #[test]
    fn priorities_rank_as_numbers() {
        let ps = [-1e6, -1.5, -1.0, -0.25, 0.0, 0.5, 1.0, 1.5, 2.0, 1e6];
        for w in ps.windows(2) {
            assert!(
                priority_rank(w[0]) < priority_rank(w[1]),
                "{} < {}",
                w[0],
                w[1]
            );
        }
        assert_eq!(priority_rank(-0.0), priority_rank(0.0));
    }

    fn grouped(id: &str, group: &str, priority: i64, seq: u64) -> JobRecord {
        let options = crate::store::AddOptions {
            group_id: Some(group.into()),
            ..Default::default()
        };
        JobRecord {
            seq,
            options: Some(Box::new(options)),
            ..rec(id, priority, 0.0)
        }
    }

    /// Takes every ready job as pulls do, one at a time, every group eligible.
    fn take_all(q: &mut QueueIndex, recs: &[JobRecord]) -> Vec<String> {
        let mut got = Vec::new();
        while let Some(id) = q.next_ready(None, |_| true).cloned() {
            let Some(r) = recs.iter().find(|r| r.id == id) else {
                break;
            };
            q.take(r);
            got.push(id);
        }
        got
    }

    /// The jobs without a group go first, in the ready order (highest priority first); then
    /// the groups take turns, each group's jobs lowest priority first.
    #[test]
    fn ungrouped_jobs_go_before_the_groups_turns() {
        let mut q = QueueIndex::default();
        let mut u2 = rec("u2", 5, 0.0);
        u2.seq = 3;
        let recs = [
            grouped("a1", "a", 2, 0),
            rec("u1", 0, 0.0),
            grouped("b1", "b", 9, 2),
            u2,
            grouped("a2", "a", 1, 4),
        ];
        for r in &recs {
            q.file_ready(r);
        }
        let c = q.counts();
        assert_eq!((c.waiting, c.prioritized), (1, 4));
        let listed: Vec<&String> = q.queued_ids().collect();
        assert_eq!(listed, ["u2", "u1", "a2", "a1", "b1"]);
        assert_eq!(take_all(&mut q, &recs), ["u2", "u1", "a2", "b1", "a1"]);
        assert!(q.is_idle());
    }

    /// A pull's affinity narrows it to the jobs without a group (`null`) or to one group's,
    /// while the queue holds a grouped job (ready or delayed); without one it is not looked at.
    #[test]
    fn affinity_narrows_a_pull_while_the_queue_holds_a_grouped_job() {
        let mut q = QueueIndex::default();
        let u = rec("u", 0, 0.0);
        q.file_ready(&u);
        let first = |q: &QueueIndex, a| q.next_ready(a, |_| true).cloned();
        assert_eq!(first(&q, Some(Some("b"))).as_deref(), Some("u"));
        let mut d = grouped("d", "a", 0, 1);
        d.run_at = 100.0;
        q.file_delayed(&d);
        assert_eq!(first(&q, Some(Some("b"))), None, "a delayed grouped job");
        assert_eq!(first(&q, Some(None)).as_deref(), Some("u"));
        let (a1, b1) = (grouped("a1", "a", 0, 2), grouped("b1", "b", 0, 3));
        q.file_ready(&a1);
        q.file_ready(&b1);
        assert_eq!(first(&q, Some(Some("b"))).as_deref(), Some("b1"));
        assert_eq!(q.next_ready(Some(Some("b")), |g| g != "b"), None);
        q.unready(&u);
        assert_eq!(first(&q, Some(None)), None);
        assert_eq!(first(&q, None).as_deref(), Some("a1"));
        q.undelay(&d);
        q.unready(&a1);
        q.unready(&b1);
        assert!(q.is_idle());
        assert_eq!(q.delayed_grouped, 0);
    }

    /// Ready jobs count as waiting or prioritized, or as paused while the queue is paused;
    /// taking one out counts it out of its bucket.
    #[test]
    fn counts_follow_the_ready_jobs_and_the_pause() {
        let mut q = QueueIndex::default();
        let (a, b) = (rec("a", 0, 0.0), rec("b", 5, 0.0));
        q.file_ready(&a);
        q.file_ready(&b);
        q.file_delayed(&rec("c", 0, 100.0));
        let c = q.counts();
        assert_eq!((c.waiting, c.prioritized, c.delayed), (1, 1, 1));
        q.paused = true;
        assert_eq!((q.counts().waiting, q.counts().paused), (0, 2));
        q.unready(&b);
        assert_eq!(q.counts().paused, 1);
        assert_eq!(q.pop_due(99.0), None);
        assert_eq!(q.pop_due(100.0).as_deref(), Some("c"));
    }
}
