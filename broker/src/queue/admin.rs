//! Queue lookups and control on the jobs: pause/resume, job listings, promote, change
//! priority, and the jobs that drain, obliterate, clean and the moves take out; what else
//! those commands do (events, the DLQ, unique keys) is `moves`'s.

use std::collections::BTreeMap;

use autobatch_core::wire::{JobState as WireState, Value};

use super::flow::Waits;
use super::progress::Progress;
use super::{index_in, state_name, update_op, FinishError, JobState, Jobs, StoreOp};

/// Why a job could not be moved (see [`State::delay_job`], [`State::discard`],
/// [`State::move_to_wait`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MoveError {
    /// No such job.
    NotFound,
    /// The job is in a state the move does not take (its state name).
    State(&'static str),
    /// An active job's lock refused the token (bunqueue's lock messages).
    Lock(FinishError),
}

/// Which jobs [`State::clean`] looks at (bunqueue's `cleanQueue` cases).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CleanState {
    /// Waiting, prioritized, delayed or paused: every job not yet pulled.
    Queued,
    /// Completed jobs.
    Completed,
    /// Failed jobs (bunqueue's dead-letter queue).
    Failed,
    /// Active or a state bunqueue does not clean: nothing is removed.
    Nothing,
}

impl CleanState {
    /// bunqueue's state names and its `wait` alias; none means waiting.
    pub fn parse(state: Option<&str>) -> CleanState {
        match state {
            None | Some("waiting" | "wait" | "delayed" | "prioritized" | "paused") => {
                CleanState::Queued
            }
            Some("completed") => CleanState::Completed,
            Some("failed") => CleanState::Failed,
            Some(_) => CleanState::Nothing,
        }
    }
}

impl Jobs {
    /// Pauses `queue`: pulls hand out nothing until it is resumed.
    pub fn pause(&mut self, queue: &str) {
        self.index(queue).paused = true;
    }

    /// Resumes `queue`, waking its long-polls.
    pub fn resume(&mut self, queue: &str) {
        if let Some(q) = self.queues.get_mut(queue) {
            q.paused = false;
            q.notify.notify_waiters();
        }
        self.forget_queue_if_idle(queue);
    }

    /// Takes a waiting or delayed job out of its queue's index, to be dropped (a job in
    /// `waiting-children` too: dropping it takes it out of its count and the dependency
    /// index). False for any other state.
    pub fn unqueue(&mut self, id: &str) -> bool {
        let Some(e) = self.map.get(id) else {
            return false;
        };
        let rec = &e.rec;
        let Some(q) = self.queues.get_mut(&rec.queue) else {
            return false;
        };
        match rec.state {
            JobState::Waiting => q.unready(rec),
            JobState::Delayed => q.undelay(rec),
            JobState::WaitingChildren => {}
            _ => return false,
        }
        true
    }

    /// The waiting and delayed jobs of `queue`.
    pub fn queued_ids(&self, queue: &str) -> Vec<String> {
        self.queues
            .get(queue)
            .map(|q| q.queued_ids().cloned().collect())
            .unwrap_or_default()
    }

    /// Takes every job of `queue` out, in every state, and empties its index: the jobs
    /// dropped and the unique keys they held. Parked jobs leave `waits` too.
    pub fn obliterate(&mut self, queue: &str, waits: &mut Waits) -> Vec<(String, Option<String>)> {
        let ids: Vec<String> = self
            .map
            .iter()
            .filter(|(_, e)| e.rec.queue == queue)
            .map(|(id, _)| id.clone())
            .collect();
        let mut gone = Vec::with_capacity(ids.len());
        for id in ids {
            // Out of the dependency index (its count goes with the index below).
            self.unpark(&id, waits);
            let key = self.map.remove(&id).and_then(|e| e.rec.unique_key);
            self.record(StoreOp::Remove(id.clone()));
            gone.push((id, key));
        }
        if let Some(q) = self.queues.get_mut(queue) {
            // Long-polls keep their clone of the signal; a fresh index starts empty.
            q.clear();
        }
        gone
    }

    /// Whether job `id` is live (waiting, delayed, active or waiting for children).
    pub fn is_live(&self, id: &str) -> bool {
        self.map.get(id).is_some_and(|e| e.rec.state.is_live())
    }

    /// The queue and unique key of job `id`, when it has one.
    pub fn unique_key(&self, id: &str) -> Option<(&str, &str)> {
        let e = self.map.get(id)?;
        Some((e.rec.queue.as_str(), e.rec.unique_key.as_deref()?))
    }

    /// Takes a waiting or delayed job out of its index. `Ok(true)`: the job is active, for
    /// the caller to take out of the running jobs. The job is left in no index: the caller
    /// files it again.
    pub fn unfile_queued(&mut self, id: &str) -> Result<bool, MoveError> {
        let e = self.map.get(id).ok_or(MoveError::NotFound)?;
        let rec = &e.rec;
        match rec.state {
            JobState::Waiting => index_in(&mut self.queues, &rec.queue).unready(rec),
            JobState::Delayed => index_in(&mut self.queues, &rec.queue).undelay(rec),
            JobState::Active => return Ok(true),
            _ => return Err(MoveError::State(state_name(rec))),
        }
        Ok(false)
    }

    /// A job unfiled for Discard fails for good, its record's `startedAt` kept as `started`.
    /// Returns the change to record once it is in the DLQ.
    pub fn discarded(&mut self, id: &str, started: Option<f64>) -> Option<StoreOp> {
        let e = self.map.get_mut(id)?;
        e.run.shown_started = started;
        e.rec.state = JobState::Failed;
        Some(update_op(&e.rec))
    }

    /// The jobs [`State::clean`] removes, in the order it removes them: up to `limit` of
    /// `queue` in `state` at least `grace` ms old.
    ///
    /// [`State::clean`]: super::State::clean
    pub fn to_clean(
        &mut self,
        queue: &str,
        grace: u64,
        state: CleanState,
        limit: usize,
        now: f64,
    ) -> Vec<String> {
        let threshold = now - grace as f64;
        // (time, tie-break, id): sorted, the order bunqueue removes them in.
        let mut found: Vec<(f64, String, u64, String)> = match state {
            CleanState::Nothing => return Vec::new(),
            CleanState::Queued => {
                self.promote(queue, now);
                let Some(q) = self.queues.get(queue) else {
                    return Vec::new();
                };
                q.queued_ids()
                    .filter_map(|id| self.map.get(id))
                    .filter(|e| e.rec.created_at <= threshold)
                    .map(|e| (e.rec.created_at, e.rec.id.clone(), 0, e.rec.id.clone()))
                    .collect()
            }
            CleanState::Completed => self.finished_before(queue, JobState::Completed, threshold),
            CleanState::Failed => self.finished_before(queue, JobState::Failed, threshold),
        };
        found.sort_by(|a, b| {
            a.0.total_cmp(&b.0)
                .then_with(|| a.1.cmp(&b.1))
                .then(a.2.cmp(&b.2))
        });
        found.into_iter().take(limit).map(|f| f.3).collect()
    }

    /// The jobs of `queue` that finished in state `want` at or before `threshold`, with
    /// their sort keys (see [`to_clean`](Self::to_clean)).
    fn finished_before(
        &self,
        queue: &str,
        want: JobState,
        threshold: f64,
    ) -> Vec<(f64, String, u64, String)> {
        self.map
            .values()
            .filter(|e| e.rec.queue == queue && e.rec.state == want)
            .filter_map(|e| {
                let (at, seq) = e.run.finished.unwrap_or((e.rec.created_at, 0));
                (at <= threshold).then(|| {
                    // Completed: by id within a millisecond; failed: by arrival.
                    let tie = if want == JobState::Completed {
                        e.rec.id.clone()
                    } else {
                        String::new()
                    };
                    (at, tie, seq, e.rec.id.clone())
                })
            })
            .collect()
    }

    /// GetJobs: the jobs of `queue` in any of `states` (every state when empty), ordered as
    /// bunqueue orders them, by creation time and then by id, bytewise (`asc`: oldest first;
    /// ids made in one millisecond sort in the order they were made, a custom id where its
    /// text falls), `offset..offset + limit`, each with its state.
    pub fn list_jobs(
        &mut self,
        queue: &str,
        states: &[WireState],
        offset: usize,
        limit: usize,
        asc: bool,
        now: f64,
        extras: &Progress,
    ) -> Vec<Value> {
        self.promote(queue, now);
        // bunqueue's paused view: asked for by state, the ready jobs of a paused queue are
        // `paused` (listed only when `paused` is asked for); asked for every state, they keep
        // their own.
        let paused_view = self.is_paused(queue) && !states.is_empty();
        let mut jobs: Vec<(f64, String, Value)> = self
            .map
            .values()
            .filter(|e| e.rec.queue == queue)
            .filter_map(|e| {
                let name = match state_name(&e.rec) {
                    "waiting" | "prioritized" if paused_view => "paused",
                    name => name,
                };
                if !states.is_empty() && !states.iter().any(|s| s.as_str() == name) {
                    return None;
                }
                // bunqueue's listing: the whole record, with its state twice.
                let mut job = super::view::record(e, extras.get(&e.rec.id));
                job.extend([
                    ("_state", Value::from(name)),
                    ("state", Value::from(name)),
                    (
                        "returnvalue",
                        e.rec.result.clone().unwrap_or(Value::Undefined),
                    ),
                    (
                        "failedReason",
                        e.rec
                            .failed_reason
                            .as_deref()
                            .map_or(Value::Undefined, Value::from),
                    ),
                ]);
                Some((e.rec.created_at, e.rec.id.clone(), Value::map(job)))
            })
            .collect();
        jobs.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
        if !asc {
            jobs.reverse();
        }
        jobs.into_iter()
            .skip(offset)
            .take(limit)
            .map(|(_, _, j)| j)
            .collect()
    }

    /// Whether `queue` is paused.
    pub fn is_paused(&self, queue: &str) -> bool {
        self.queues.get(queue).is_some_and(|q| q.paused)
    }

    /// Promote: makes a delayed job waiting now (its run time becomes `now`, so it queues
    /// behind the jobs already due, as in bunqueue). False if it is not delayed.
    pub fn promote_job(&mut self, id: &str, now: f64) -> bool {
        let Some(e) = self.map.get_mut(id) else {
            return false;
        };
        if e.rec.state != JobState::Delayed {
            return false;
        }
        let Some(q) = self.queues.get_mut(&e.rec.queue) else {
            return false;
        };
        q.undelay(&e.rec);
        e.rec.state = JobState::Waiting;
        e.rec.run_at = e.rec.run_at.min(now);
        q.file_ready(&e.rec);
        q.notify.notify_waiters();
        let op = update_op(&e.rec);
        self.record(op);
        true
    }

    /// ChangePriority: re-files a waiting or delayed job under a new priority (and, with
    /// `lifo`, first among its equals). False for an unknown, active or finished job
    /// (bunqueue's `Job not found or not in queue`).
    pub fn change_priority(&mut self, id: &str, priority: i64, lifo: Option<bool>) -> bool {
        let Some(e) = self.map.get_mut(id) else {
            return false;
        };
        let Some(q) = self.queues.get_mut(&e.rec.queue) else {
            return false;
        };
        match e.rec.state {
            JobState::Waiting => {
                q.unready(&e.rec);
                e.rec.priority = priority;
                if let Some(lifo) = lifo {
                    e.rec.lifo = lifo;
                }
                q.file_ready(&e.rec);
            }
            JobState::Delayed => {
                e.rec.priority = priority;
                if let Some(lifo) = lifo {
                    e.rec.lifo = lifo;
                }
            }
            _ => return false,
        }
        // The update op does not carry the priority: the whole record is written again.
        let rec = e.rec.clone();
        if self.journal.persistent() {
            self.record(StoreOp::Put(Box::new(rec)));
        }
        true
    }

    /// Every queue with an index entry (a queue holding jobs, paused, or being polled).
    pub fn queue_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.queues.keys().cloned().collect();
        names.sort();
        names
    }

    /// PromoteJobs: makes up to `count` delayed jobs of `queue` (all when `None`) waiting
    /// now, soonest due first; how many.
    pub fn promote_jobs(&mut self, queue: &str, count: Option<u64>, now: f64) -> u64 {
        let Some(q) = self.queues.get(queue) else {
            return 0;
        };
        let n = count.map_or(usize::MAX, |c| usize::try_from(c).unwrap_or(usize::MAX));
        let ids: Vec<String> = q.delayed_ids().take(n).cloned().collect();
        ids.iter().filter(|id| self.promote_job(id, now)).count() as u64
    }

    /// GetCountsPerPriority: waiting and delayed jobs of `queue` by priority (bunqueue
    /// counts its priority queue, which holds both).
    pub fn counts_per_priority(&mut self, queue: &str) -> BTreeMap<i64, u64> {
        let mut counts = BTreeMap::new();
        let Some(q) = self.queues.get(queue) else {
            return counts;
        };
        for id in q.queued_ids() {
            if let Some(e) = self.map.get(id) {
                *counts.entry(e.rec.priority).or_insert(0) += 1;
            }
        }
        counts
    }

    /// Files a job that [`unfile`](Self::unfile) took out as waiting (`run_at <= now`) or
    /// delayed, and records it.
    pub fn refile(&mut self, id: &str, run_at: f64, now: f64) {
        let Some(e) = self.map.get_mut(id) else {
            return;
        };
        e.rec.run_at = run_at;
        let ready = run_at <= now;
        e.rec.state = if ready {
            JobState::Waiting
        } else {
            JobState::Delayed
        };
        let rec = e.rec.clone();
        let q = self.index(&rec.queue);
        if ready {
            q.file_ready(&rec);
            q.notify.notify_waiters();
        } else {
            q.file_delayed(&rec);
            // A long-poll sleeping until an earlier due time must see the new one.
            q.notify.notify_waiters();
        }
        self.record(update_op(&rec));
    }

    /// RetryCompleted: completed job `id` of `queue`, or up to `count` completed jobs of it
    /// (in completion order, all when `None`; only those completed at or before `before` when
    /// given), run again from their first attempt; how many.
    pub fn retry_completed(
        &mut self,
        queue: &str,
        id: Option<&str>,
        count: Option<u64>,
        before: Option<f64>,
        now: f64,
    ) -> u64 {
        let completed =
            |e: &super::Entry| e.rec.queue == queue && e.rec.state == JobState::Completed;
        // Completion order (bunqueue's, in memory), a job completed before a restart by its
        // creation time.
        let when = |e: &super::Entry| e.run.finished.unwrap_or((e.rec.created_at, 0));
        let mut ids: Vec<(f64, u64, String)> = match id {
            Some(id) => self
                .map
                .get(id)
                .filter(|e| completed(e))
                .map(|e| vec![(when(e).0, when(e).1, id.to_owned())])
                .unwrap_or_default(),
            None => self
                .map
                .values()
                .filter(|e| completed(e))
                .filter(|e| before.is_none_or(|t| when(e).0 <= t))
                .map(|e| (when(e).0, when(e).1, e.rec.id.clone()))
                .collect(),
        };
        ids.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let n = count.map_or(usize::MAX, |c| usize::try_from(c).unwrap_or(usize::MAX));
        let mut done = 0;
        for (_, _, id) in ids.into_iter().take(n) {
            if let Some(e) = self.map.get_mut(&id) {
                e.rec.attempts = 0;
                e.rec.result = None;
            }
            let q = self.index(queue);
            q.completed = q.completed.saturating_sub(1);
            self.refile(&id, now, now);
            done += 1;
        }
        done
    }
}

#[cfg(test)]
mod tests {
    use super::super::{PullSpec, State};
    use crate::store::MemoryStore;
    use autobatch_core::wire::{JobOptions, JobSpec, JobState, Value};

    fn state() -> State {
        State::new(Box::new(MemoryStore::new()), 1000.0).expect("memory store")
    }

    fn pull_ids(s: &mut State, n: usize) -> Vec<String> {
        let spec = PullSpec {
            queue: "q",
            count: n,
            locked: true,
            lock_ttl: 30_000,
            tie_to: Some(1),
        };
        s.pull(&spec, 2000.0).into_iter().map(|p| p.id).collect()
    }

    fn push(s: &mut State, opts: JobOptions) -> String {
        s.push(
            "q",
            JobSpec::new("j", Value::Nil).with_options(opts),
            1000.0,
        )
    }

    #[test]
    fn paused_queue_hands_out_nothing_until_resumed() {
        let mut s = state();
        let a = push(&mut s, JobOptions::new());
        s.pause("q");
        assert!(s.jobs.is_paused("q"));
        assert!(pull_ids(&mut s, 1).is_empty());
        let c = s.jobs.counts("q", 2000.0);
        assert_eq!((c.waiting, c.paused), (0, 1));
        // The pause outlives an idle moment of the queue.
        s.jobs.forget_queue_if_idle("q");
        assert!(s.jobs.is_paused("q"));
        s.resume("q");
        assert_eq!(pull_ids(&mut s, 1), vec![a]);
    }

    #[test]
    fn drain_cancel_promote_and_priority() {
        let mut s = state();
        let later = || JobOptions::new().delay(std::time::Duration::from_secs(60));
        let a = push(&mut s, JobOptions::new());
        let b = push(&mut s, JobOptions::new());
        let d = push(&mut s, later());
        // Promote only a delayed job, once.
        assert!(s.jobs.promote_job(&d, 0.0));
        assert!(!s.jobs.promote_job(&d, 0.0));
        // Priority moves b ahead of a.
        assert!(s.jobs.change_priority(&b, 5, None));
        assert!(!s.jobs.change_priority("nope", 5, None));
        assert_eq!(pull_ids(&mut s, 1), vec![b.clone()]);
        // An active job cannot be cancelled or re-prioritized.
        assert!(!s.cancel(&b));
        assert!(!s.jobs.change_priority(&b, 1, None));
        assert!(s.cancel(&a));
        push(&mut s, later());
        assert_eq!(s.drain("q"), 2);
        let c = s.jobs.counts("q", 2000.0);
        assert_eq!((c.waiting, c.delayed, c.active), (0, 0, 1));
    }

    #[test]
    fn obliterate_and_listing() {
        let mut s = state();
        let a = push(&mut s, JobOptions::new());
        let p = push(&mut s, JobOptions::new().priority(3));
        let listed = s.list_jobs("q", &[JobState::Waiting], 0, 10, true, 2000.0);
        assert_eq!(
            listed
                .iter()
                .map(|j| j.get("id").and_then(Value::as_str).unwrap().to_owned())
                .collect::<Vec<_>>(),
            vec![a.clone()]
        );
        let all = s.list_jobs("q", &[], 0, 10, false, 2000.0);
        assert_eq!(
            all.iter()
                .map(|j| j.get("id").and_then(Value::as_str).unwrap().to_owned())
                .collect::<Vec<_>>(),
            vec![p, a]
        );
        assert_eq!(s.jobs.queue_names(), vec!["q".to_owned()]);
        pull_ids(&mut s, 1);
        s.obliterate("q");
        assert!(s.list_jobs("q", &[], 0, 10, true, 2000.0).is_empty());
        assert_eq!(s.jobs.promote_jobs("q", None, 0.0), 0);
        assert!(s.jobs.queue_names().is_empty());
    }
}

#[cfg(test)]
mod clean_tests {
    use super::super::{PullSpec, State};
    use super::CleanState;
    use crate::queue::Failure;
    use crate::store::MemoryStore;
    use autobatch_core::wire::{JobOptions, JobSpec, Value};

    /// Clean takes the state's jobs at least `grace` old, up to `limit`, oldest first
    /// (completed ones by completion time), and never active ones.
    #[test]
    fn clean_by_state_grace_and_limit() {
        let mut s = State::new(Box::new(MemoryStore::new()), 0.0).expect("memory store");
        let add = |s: &mut State, at: f64| {
            let o = JobOptions::new().attempts(1);
            s.push("q", JobSpec::new("j", Value::Nil).with_options(o), at)
        };
        let pull = |s: &mut State, at: f64| {
            let spec = PullSpec {
                queue: "q",
                count: 1,
                locked: false,
                lock_ttl: 0,
                tie_to: None,
            };
            s.pull(&spec, at).remove(0).id
        };
        let (a, b) = (add(&mut s, 10.0), add(&mut s, 20.0));
        assert_eq!(pull(&mut s, 30.0), a);
        assert_eq!(pull(&mut s, 30.0), b);
        // b completes before a.
        s.ack(&b, None, None, false, 40.0).unwrap();
        s.ack(&a, None, None, false, 50.0).unwrap();
        let (c, d) = (add(&mut s, 60.0), add(&mut s, 70.0));
        assert_eq!(pull(&mut s, 80.0), c);
        s.fail(&c, None, Failure::new(None), 90.0).unwrap();
        assert_eq!(pull(&mut s, 100.0), d);
        let w = add(&mut s, 100.0);

        assert!(s.clean("q", 0, CleanState::Nothing, 10, 200.0).is_empty());
        assert!(s.clean("q", 0, CleanState::Queued, 0, 200.0).is_empty());
        // Grace: only b completed at least 155 ms before 200.
        assert_eq!(
            s.clean("q", 155, CleanState::Completed, 10, 200.0),
            std::slice::from_ref(&b)
        );
        assert_eq!(s.clean("q", 0, CleanState::Completed, 10, 200.0), [a]);
        assert_eq!(s.clean("q", 0, CleanState::Failed, 10, 200.0), [c]);
        assert_eq!(s.jobs.get_state(&b, 200.0), "unknown");
        let f = add(&mut s, 150.0);
        assert_eq!(s.clean("q", 0, CleanState::Queued, 1, 200.0), [w]);
        assert_eq!(s.clean("q", 0, CleanState::Queued, 5, 200.0), [f]);
        let counts = s.jobs.counts("q", 200.0);
        assert_eq!((counts.waiting, counts.active), (0, 1), "d, active, stays");
    }
}
