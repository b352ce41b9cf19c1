//! Queue lookups and control on the jobs: pause/resume, job listings, promote, change
//! priority, and the jobs that drain, obliterate, clean and the moves take out; what else
//! those commands do (events, the DLQ, unique keys) is the caller's.

use std::collections::BTreeMap;

use autobatch_core::wire::{JobState, Value};

use super::{index_in, state_name, update_op, FinishError, Jobs};
use crate::queue::flow::Waits;
use crate::queue::index::priority_rank;
use crate::queue::progress::Progress;
use crate::queue::view;
use crate::store::{Stage, StoreOp};

/// Why a job could not be moved (see `State::delay_job`, `State::discard`,
/// `State::move_to_wait`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MoveError {
    /// No such job.
    NotFound,
    /// The job is in a state the move does not take (its state name).
    State(&'static str),
    /// An active job's lock refused the token (bunqueue's lock messages).
    Lock(FinishError),
}

/// Which jobs `State::clean` looks at (bunqueue's `cleanQueue` cases).
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
            Stage::Waiting => q.unready(rec),
            Stage::Delayed => q.undelay(rec),
            Stage::WaitingChildren => {}
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
            Stage::Waiting => index_in(&mut self.queues, &rec.queue).unready(rec),
            Stage::Delayed => index_in(&mut self.queues, &rec.queue).undelay(rec),
            Stage::Active => return Ok(true),
            _ => return Err(MoveError::State(state_name(rec))),
        }
        Ok(false)
    }

    /// A job unfiled for Discard fails for good, its record's `startedAt` kept as `started`.
    /// Returns the change to record once it is in the DLQ.
    pub fn discarded(&mut self, id: &str, started: Option<f64>) -> Option<StoreOp> {
        let e = self.map.get_mut(id)?;
        e.run.shown_started = started;
        e.rec.state = Stage::Failed;
        Some(update_op(&e.rec))
    }

    /// The jobs `State::clean` removes, in the order it removes them: up to `limit` of
    /// `queue` in `state` at least `grace` ms old.
    pub fn cleanable(
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
            CleanState::Completed => self.finished_before(queue, Stage::Completed, threshold),
            CleanState::Failed => self.finished_before(queue, Stage::Failed, threshold),
        };
        found.sort_by(|a, b| {
            a.0.total_cmp(&b.0)
                .then_with(|| a.1.cmp(&b.1))
                .then(a.2.cmp(&b.2))
        });
        found.into_iter().take(limit).map(|f| f.3).collect()
    }

    /// The jobs of `queue` that finished in state `want` at or before `threshold`, with
    /// their sort keys (see [`cleanable`](Self::cleanable)).
    fn finished_before(
        &self,
        queue: &str,
        want: Stage,
        threshold: f64,
    ) -> Vec<(f64, String, u64, String)> {
        self.map
            .values()
            .filter(|e| e.rec.queue == queue && e.rec.state == want)
            .filter_map(|e| {
                let (at, seq) = e.run.finished.unwrap_or((e.rec.created_at, 0));
                (at <= threshold).then(|| {
                    // Completed: by id within a millisecond; failed: by arrival.
                    let tie = if want == Stage::Completed {
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
    /// text falls), `offset..offset + limit`, each with its state. The caller promotes the
    /// queue's due jobs first.
    pub fn list_jobs(
        &self,
        queue: &str,
        states: &[JobState],
        offset: usize,
        limit: usize,
        asc: bool,
        extras: &Progress,
    ) -> Vec<Value> {
        // bunqueue's paused view: asked for by state, the ready jobs of a paused queue are
        // `paused` (listed only when `paused` is asked for); asked for every state, they keep
        // their own.
        let paused_view = self.is_paused(queue) && !states.is_empty();
        let stored = self.persistent();
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
                let mut job = view::record(e, extras.get(&e.rec.id), stored);
                job.extend([("_state", Value::from(name)), ("state", Value::from(name))]);
                job.extend(view::outcome(e));
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
        if e.rec.state != Stage::Delayed {
            return false;
        }
        let Some(q) = self.queues.get_mut(&e.rec.queue) else {
            return false;
        };
        q.undelay(&e.rec);
        e.rec.state = Stage::Waiting;
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
    pub fn change_priority(&mut self, id: &str, priority: f64, lifo: Option<bool>) -> bool {
        let Some(e) = self.map.get_mut(id) else {
            return false;
        };
        let Some(q) = self.queues.get_mut(&e.rec.queue) else {
            return false;
        };
        match e.rec.state {
            Stage::Waiting => {
                q.unready(&e.rec);
                e.rec.priority = priority;
                if let Some(lifo) = lifo {
                    e.rec.lifo = lifo;
                }
                q.file_ready(&e.rec);
            }
            Stage::Delayed => {
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

    /// GetCountsPerPriority: waiting and delayed jobs of `queue` by priority, lowest first
    /// (bunqueue counts its priority queue, which holds both).
    pub fn counts_per_priority(&mut self, queue: &str) -> Vec<(f64, u64)> {
        let mut counts = BTreeMap::new();
        let Some(q) = self.queues.get(queue) else {
            return Vec::new();
        };
        for id in q.queued_ids() {
            if let Some(e) = self.map.get(id) {
                let p = e.rec.priority;
                counts.entry(priority_rank(p)).or_insert((p, 0)).1 += 1;
            }
        }
        counts.into_values().collect()
    }

    /// Files a job that `State::unfile` took out as waiting (`run_at <= now`) or
    /// delayed, and records it.
    pub fn refile(&mut self, id: &str, run_at: f64, now: f64) {
        let Some(e) = self.map.get_mut(id) else {
            return;
        };
        e.rec.run_at = run_at;
        let ready = run_at <= now;
        e.rec.state = if ready {
            Stage::Waiting
        } else {
            Stage::Delayed
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
        let completed = |e: &super::Entry| e.rec.queue == queue && e.rec.state == Stage::Completed;
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
