//! Queue lookups and control on the broker's state: pause/resume, drain, obliterate, job
//! listings, promote, change priority, remove. A child of `queue` so that it reaches the
//! indexes directly, kept apart so that the hot path's file stays as it was.

use std::collections::HashSet;

use autobatch_core::wire::{JobState as WireState, Value};

use crate::events::{js_number, Fields};

use super::{index_in, state_name, update_op, FinishError, JobState, State, StoreOp};

/// `{queue, jobId: "", timestamp}`: bunqueue's `paused` and `resumed`.
fn queue_event(queue: &str) -> impl FnOnce(f64) -> Fields + '_ {
    move |ts| {
        vec![
            ("queue", Value::from(queue)),
            ("jobId", Value::from("")),
            ("timestamp", Value::F64(ts)),
        ]
    }
}

/// `{jobId, queue, timestamp, …extra}`: the key order of bunqueue's job-management events
/// (`removed`, `delayed`, `waiting`).
fn id_first<const N: usize>(
    queue: &str,
    id: &str,
    ts: f64,
    extra: [(&'static str, Value); N],
) -> Fields {
    let mut f = vec![
        ("jobId", Value::from(id)),
        ("queue", Value::from(queue)),
        ("timestamp", Value::F64(ts)),
    ];
    f.extend(extra);
    f
}

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

impl State {
    /// Pauses `queue`: pulls hand out nothing until [`resume`](Self::resume).
    pub fn pause(&mut self, queue: &str) {
        self.jobs.index(queue).paused = true;
        self.events.emit(queue, "paused", queue_event(queue));
    }

    /// Resumes `queue`, waking its long-polls.
    pub fn resume(&mut self, queue: &str) {
        if let Some(q) = self.jobs.queues.get_mut(queue) {
            q.paused = false;
            q.notify.notify_waiters();
        }
        self.jobs.forget_queue_if_idle(queue);
        self.events.emit(queue, "resumed", queue_event(queue));
    }

    /// Takes a waiting or delayed job out of its queue and drops it (recorded as removed).
    /// False for any other state.
    fn take_out(&mut self, id: &str) -> bool {
        let Some(e) = self.jobs.map.get(id) else {
            return false;
        };
        let rec = &e.rec;
        let Some(q) = self.jobs.queues.get_mut(&rec.queue) else {
            return false;
        };
        match rec.state {
            JobState::Waiting => q.unready(rec),
            JobState::Delayed => q.undelay(rec),
            // `forget` takes it out of its count and the dependency index.
            JobState::WaitingChildren => {}
            _ => return false,
        }
        self.forget(id);
        self.jobs.record(StoreOp::Remove(id.to_owned()));
        true
    }

    /// Drain: removes every waiting and delayed job of `queue`; how many.
    pub fn drain(&mut self, queue: &str) -> u64 {
        let Some(q) = self.jobs.queues.get(queue) else {
            return 0;
        };
        let ids: Vec<String> = q.queued_ids().cloned().collect();
        ids.iter().filter(|id| self.take_out(id)).count() as u64
    }

    /// Cancel: removes a waiting or delayed job. False for an unknown, active or finished
    /// one (bunqueue's `Job not found or cannot be cancelled`).
    pub fn cancel(&mut self, id: &str) -> bool {
        let queue = self.jobs.map.get(id).map(|e| e.rec.queue.clone());
        let removed = self.take_out(id);
        if let (true, Some(queue)) = (removed, queue) {
            // bunqueue's `removed` says `prev: "waiting"` for a delayed job too.
            self.events.emit(&queue, "removed", |ts| {
                id_first(&queue, id, ts, [("prev", Value::from("waiting"))])
            });
        }
        removed
    }

    /// bunqueue's `delayed` event, `delay` in ms.
    fn emit_delayed(&self, id: &str, delay: i64) {
        if let Some(e) = self.jobs.map.get(id) {
            let queue = e.rec.queue.as_str();
            self.events.emit(queue, "delayed", |ts| {
                id_first(queue, id, ts, [("delay", js_number(delay as f64))])
            });
        }
    }

    /// Obliterate: every job of `queue` in every state, and the queue itself (its pause
    /// and limits too). Active jobs are dropped with their locks: their ACK then finds no job.
    pub fn obliterate(&mut self, queue: &str) {
        let ids: Vec<String> = self
            .jobs
            .map
            .iter()
            .filter(|(_, e)| e.rec.queue == queue)
            .map(|(id, _)| id.clone())
            .collect();
        let gone: HashSet<&String> = ids.iter().collect();
        self.running.drop_held(&gone);
        for id in &ids {
            // Out of the dependency index (its count goes with the index below).
            self.unpark(id);
            if let Some(e) = self.jobs.map.remove(id) {
                if let Some(k) = &e.rec.unique_key {
                    self.unique.release(&e.rec.queue, k, id);
                }
            }
            self.jobs.record(StoreOp::Remove(id.clone()));
        }
        if let Some(q) = self.jobs.queues.get_mut(queue) {
            // Long-polls keep their clone of the signal; a fresh index starts empty.
            q.clear();
        }
        let groups = self.limits.group_names(queue);
        self.limits.forget(queue);
        self.keep_limits(queue);
        for g in groups {
            self.keep_group(queue, &g);
        }
        self.totals.forget(queue);
        self.events.forget_journal(queue);
        self.jobs.forget_queue_if_idle(queue);
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
    ) -> Vec<Value> {
        self.jobs.promote(queue, now);
        // bunqueue's paused view: asked for by state, the ready jobs of a paused queue are
        // `paused` (listed only when `paused` is asked for); asked for every state, they keep
        // their own.
        let paused_view = self.jobs.is_paused(queue) && !states.is_empty();
        let mut jobs: Vec<(f64, String, Value)> = self
            .jobs
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
                let mut job = super::view::record(e, self.extras.get(&e.rec.id));
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

    /// The live job holding deduplication key `key` in `queue`.
    pub fn deduplication_holder(&self, queue: &str, key: &str) -> Option<String> {
        let id = self.unique.holder(queue, key)?;
        self.jobs
            .map
            .get(id)
            .is_some_and(|e| e.rec.state.is_live())
            .then(|| id.clone())
    }

    /// RemoveDeduplicationKey: frees `key` in `queue`; how many keys (0 or 1).
    pub fn remove_deduplication_key(&mut self, queue: &str, key: &str) -> u64 {
        if self.deduplication_holder(queue, key).is_none() {
            return 0;
        }
        self.unique.free(queue, key);
        1
    }

    /// RemoveJobDeduplicationKey: frees the key job `id` holds, only while it holds it.
    pub fn remove_job_deduplication_key(&mut self, id: &str) -> bool {
        let Some(e) = self.jobs.map.get(id) else {
            return false;
        };
        let Some(k) = &e.rec.unique_key else {
            return false;
        };
        self.unique.release(&e.rec.queue, k, id)
    }

    /// Takes a waiting or delayed job out of its index, or an active one out of the active
    /// set (its lock checked against `token` first). The job is left in no index: the caller
    /// files it again.
    pub(super) fn unfile(&mut self, id: &str, token: Option<&str>) -> Result<(), MoveError> {
        self.jobs.check_lock(id, token).map_err(MoveError::Lock)?;
        let e = self.jobs.map.get(id).ok_or(MoveError::NotFound)?;
        let rec = &e.rec;
        match rec.state {
            JobState::Waiting => index_in(&mut self.jobs.queues, &rec.queue).unready(rec),
            JobState::Delayed => index_in(&mut self.jobs.queues, &rec.queue).undelay(rec),
            JobState::Active => {
                self.finish(id).map_err(MoveError::Lock)?;
            }
            _ => return Err(MoveError::State(state_name(rec))),
        }
        Ok(())
    }

    /// ChangeDelay / MoveToDelayed (the same move in bunqueue): a waiting, delayed or active
    /// job runs `delay` ms from `now` (a negative delay, which bunqueue takes, makes it due).
    pub fn delay_job(
        &mut self,
        id: &str,
        delay: i64,
        token: Option<&str>,
        now: f64,
    ) -> Result<(), MoveError> {
        let was_active = self
            .jobs
            .map
            .get(id)
            .is_some_and(|e| e.rec.state == JobState::Active);
        self.unfile(id, token)?;
        self.jobs.refile(id, now + delay as f64, now);
        if was_active {
            // 2.9.5 (`changeDelay`, behind both MoveToDelayed and ChangeDelay): `delayed` when
            // an active job moves; a queued job's new delay emits nothing.
            self.emit_delayed(id, delay);
        }
        Ok(())
    }

    /// Discard: a waiting, delayed or active job fails for good.
    pub fn discard(&mut self, id: &str, token: Option<&str>, now: f64) -> Result<(), MoveError> {
        // bunqueue's record keeps a discarded job's `startedAt`.
        let started = self.jobs.map.get(id).and_then(|e| e.run.shown_started);
        self.unfile(id, token)?;
        let Some(e) = self.jobs.map.get_mut(id) else {
            return Err(MoveError::NotFound);
        };
        e.run.shown_started = started;
        e.rec.state = JobState::Failed;
        let op = update_op(&e.rec);
        // bunqueue's `addToDlq` with its default reason and no error.
        self.enter_dlq(id, now, "unknown", None);
        self.jobs.record(op);
        Ok(())
    }

    /// MoveToWait: an active job back to waiting (its token checked), a delayed one
    /// promoted, a failed one run again from its first attempt; a waiting one is left alone.
    /// Anything else: its state name, for bunqueue's `Cannot move job from state …`.
    pub fn move_to_wait(
        &mut self,
        id: &str,
        token: Option<&str>,
        now: f64,
    ) -> Result<(), MoveError> {
        let Some(e) = self.jobs.map.get(id) else {
            return Err(MoveError::State("unknown"));
        };
        match e.rec.state {
            JobState::Waiting => Ok(()),
            JobState::Active | JobState::Delayed => {
                let was_active = e.rec.state == JobState::Active;
                let queue = e.rec.queue.clone();
                self.unfile(id, token)?;
                self.jobs.refile(id, now, now);
                if was_active {
                    // bunqueue's moveActiveToWait: `waiting` with `prev: "active"`.
                    self.events.emit(&queue, "waiting", |ts| {
                        id_first(&queue, id, ts, [("prev", Value::from("active"))])
                    });
                }
                Ok(())
            }
            JobState::Failed => {
                self.leave_dlq(id);
                // bunqueue keeps the job's timeline, so GetJob still shows the last failure
                // as `failedReason` (seen by the differential test).
                self.jobs.prepare_retry(id, now);
                self.jobs.refile(id, now, now);
                Ok(())
            }
            JobState::Completed => Err(MoveError::State("completed")),
            JobState::WaitingChildren => Err(MoveError::State("waiting-children")),
        }
    }

    /// Clean: removes up to `limit` jobs of `queue` in `state` that are at least `grace` ms
    /// old, and returns their ids, in bunqueue's order: queued jobs by creation time then
    /// id, completed jobs by completion time then id, failed jobs in the order they failed.
    /// Removed silently (no event), logs and results with them.
    ///
    /// One difference, for queued jobs with a `limit` below their number: bunqueue takes the
    /// `limit` oldest entries of an index that still holds jobs pulled since its last 10-s
    /// sweep and removes those still queued, so it may remove fewer; the broker removes the
    /// `limit` oldest queued jobs.
    pub fn clean(
        &mut self,
        queue: &str,
        grace: u64,
        state: CleanState,
        limit: u64,
        now: f64,
    ) -> Vec<String> {
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        if limit == 0 {
            return Vec::new();
        }
        let threshold = now - grace as f64;
        // (time, tie-break, id): sorted, the order bunqueue removes them in.
        let mut found: Vec<(f64, String, u64, String)> = match state {
            CleanState::Nothing => return Vec::new(),
            CleanState::Queued => {
                self.jobs.promote(queue, now);
                let Some(q) = self.jobs.queues.get(queue) else {
                    return Vec::new();
                };
                q.queued_ids()
                    .filter_map(|id| self.jobs.map.get(id))
                    .filter(|e| e.rec.created_at <= threshold)
                    .map(|e| (e.rec.created_at, e.rec.id.clone(), 0, e.rec.id.clone()))
                    .collect()
            }
            CleanState::Completed | CleanState::Failed => {
                let want = if state == CleanState::Completed {
                    JobState::Completed
                } else {
                    JobState::Failed
                };
                self.jobs
                    .map
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
        };
        found.sort_by(|a, b| {
            a.0.total_cmp(&b.0)
                .then_with(|| a.1.cmp(&b.1))
                .then(a.2.cmp(&b.2))
        });
        let mut removed = Vec::new();
        for (_, _, _, id) in found.into_iter().take(limit) {
            let gone = match state {
                CleanState::Queued => self.take_out(&id),
                _ => {
                    self.forget(&id);
                    self.jobs.record(StoreOp::Remove(id.clone()));
                    true
                }
            };
            if gone {
                removed.push(id);
            }
        }
        removed
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
