//! The commands that move jobs across concerns: cancel, drain, obliterate, the moves between
//! states (delay, discard, back to waiting), clean, the deduplication keys, the DLQ's
//! entries (in, evicted, retried, purged), and what a child's outcome does to its flow. [`Jobs`]
//! takes the jobs out and files them again; here the other owners follow (events, the DLQ,
//! unique keys, limits, totals).

use std::collections::HashSet;

use autobatch_core::ops::ChildFailure;
use autobatch_core::wire::Value;

use super::dlq::Filter;
use super::jobs::ParentEffect;
use super::{CleanState, FinishError, MoveError, Stage, State, StoreOp};
use crate::events::{job_event, js_number, Fields};

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

impl State {
    /// Pauses `queue`: pulls hand out nothing until [`resume`](Self::resume).
    pub fn pause(&mut self, queue: &str) {
        self.jobs.pause(queue);
        self.events.emit(queue, "paused", queue_event(queue));
    }

    /// Resumes `queue`, waking its long-polls.
    pub fn resume(&mut self, queue: &str) {
        self.jobs.resume(queue);
        self.events.emit(queue, "resumed", queue_event(queue));
    }

    /// Takes a waiting or delayed job out of its queue and drops it (recorded as removed).
    /// False for any other state.
    fn take_out(&mut self, id: &str) -> bool {
        if !self.jobs.unqueue(id) {
            return false;
        }
        self.forget(id);
        self.jobs.record(StoreOp::Remove(id.to_owned()));
        true
    }

    /// Drain: removes every waiting and delayed job of `queue`; how many.
    pub fn drain(&mut self, queue: &str) -> u64 {
        let ids = self.jobs.queued_ids(queue);
        ids.iter().filter(|id| self.take_out(id)).count() as u64
    }

    /// Cancel: removes a waiting or delayed job. False for an unknown, active or finished
    /// one (bunqueue's `Job not found or cannot be cancelled`).
    pub fn cancel(&mut self, id: &str) -> bool {
        let queue = self.jobs.queue_of(id).map(str::to_owned);
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
        if let Some(queue) = self.jobs.queue_of(id) {
            self.events.emit(queue, "delayed", |ts| {
                id_first(queue, id, ts, [("delay", js_number(delay as f64))])
            });
        }
    }

    /// Obliterate: every job of `queue` in every state, and the queue itself (its pause
    /// and limits too). Active jobs are dropped with their locks: their ACK then finds no job.
    pub fn obliterate(&mut self, queue: &str) {
        let gone = self.jobs.obliterate(queue, &mut self.waits);
        let ids: HashSet<&String> = gone.iter().map(|(id, _)| id).collect();
        self.running.drop_held(&ids);
        for (id, key) in &gone {
            if let Some(k) = key {
                self.unique.release(queue, k, id);
            }
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

    /// GetJobs (see [`super::Jobs::list_jobs`]).
    pub fn list_jobs(
        &mut self,
        queue: &str,
        states: &[autobatch_core::wire::JobState],
        offset: usize,
        limit: usize,
        asc: bool,
        now: f64,
    ) -> Vec<Value> {
        self.jobs.promote(queue, now);
        self.jobs
            .list_jobs(queue, states, offset, limit, asc, &self.extras)
    }

    /// The live job holding deduplication key `key` in `queue`.
    pub fn deduplication_holder(&self, queue: &str, key: &str) -> Option<String> {
        let id = self.unique.holder(queue, key)?;
        self.jobs.is_live(id).then(|| id.clone())
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
        let Some((queue, key)) = self.jobs.unique_key(id) else {
            return false;
        };
        self.unique.release(queue, key, id)
    }

    /// Takes a waiting or delayed job out of its index, or an active one out of the active
    /// set (its lock checked against `token` first). The job is left in no index: the caller
    /// files it again.
    pub(super) fn unfile(&mut self, id: &str, token: Option<&str>) -> Result<(), MoveError> {
        self.jobs.check_lock(id, token).map_err(MoveError::Lock)?;
        if self.jobs.unfile_queued(id)? {
            self.finish(id).map_err(MoveError::Lock)?;
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
        let was_active = self.jobs.state_of(id) == Some(Stage::Active);
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
        let started = self.jobs.shown_started(id);
        self.unfile(id, token)?;
        let op = self
            .jobs
            .discarded(id, started)
            .ok_or(MoveError::NotFound)?;
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
        let Some(state) = self.jobs.state_of(id) else {
            return Err(MoveError::State("unknown"));
        };
        match state {
            Stage::Waiting => Ok(()),
            Stage::Active | Stage::Delayed => {
                let queue = self.jobs.queue_of(id).unwrap_or_default().to_owned();
                self.unfile(id, token)?;
                self.jobs.refile(id, now, now);
                if state == Stage::Active {
                    // bunqueue's moveActiveToWait: `waiting` with `prev: "active"`.
                    self.events.emit(&queue, "waiting", |ts| {
                        id_first(&queue, id, ts, [("prev", Value::from("active"))])
                    });
                }
                Ok(())
            }
            Stage::Failed => {
                self.leave_dlq(id);
                // bunqueue keeps the job's timeline, so GetJob still shows the last failure
                // as `failedReason` (seen by the differential test).
                self.jobs.prepare_retry(id, now);
                self.jobs.refile(id, now, now);
                Ok(())
            }
            Stage::Completed => Err(MoveError::State("completed")),
            Stage::WaitingChildren => Err(MoveError::State("waiting-children")),
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
        let found = self.jobs.cleanable(queue, grace, state, limit, now);
        let mut removed = Vec::new();
        for id in found {
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

    /// Files a job that just failed for good in its queue's DLQ (it is `Failed` already or
    /// about to be: the caller records the state), evicting the oldest entry past the
    /// queue's `maxEntries`.
    pub(in crate::queue) fn enter_dlq(
        &mut self,
        id: &str,
        now: f64,
        reason: &'static str,
        error: Option<String>,
    ) {
        let Some((queue, seq)) = self.jobs.enter_dlq(id, now, reason, error) else {
            return;
        };
        if self.settings.is_on() {
            self.keep_job(id);
        }
        self.totals.finished(&queue, true, now);
        self.dlq.file(&queue, seq, id);
        let max = self.dlq.max_entries(&queue);
        self.evict_dlq(&queue, max);
    }

    /// Drops the oldest DLQ entries of `queue` for good until at most `max` are left.
    pub(in crate::queue) fn evict_dlq(&mut self, queue: &str, max: usize) {
        for oldest in self.dlq.evict(queue, max) {
            // `forget` counts it out of `failed` (its DLQ slot is gone already).
            self.forget(&oldest);
            self.jobs.record(StoreOp::Remove(oldest));
        }
    }

    /// Takes a failed job out of the DLQ (to run it again); its state is the caller's.
    pub(in crate::queue) fn leave_dlq(&mut self, id: &str) {
        if let Some((queue, Some(seq))) = self.jobs.leave_dlq(id) {
            self.dlq.remove(&queue, seq);
        }
    }

    /// The DLQ ids of `queue` selected by `filter`, oldest first.
    fn dlq_ids(&self, queue: &str, filter: Option<&Filter>, now: f64) -> Vec<String> {
        self.dlq
            .select(queue, filter, now, self.jobs.dlq_entry_of())
    }

    /// `RetryDlq`: runs DLQ jobs again from their first attempt, waiting now: one job, the
    /// first `count`, the filtered ones, or all. A job whose unique key another live job holds
    /// now stays (bunqueue's `canRetry`). How many were retried.
    pub fn retry_dlq(
        &mut self,
        queue: &str,
        id: Option<&str>,
        count: Option<u64>,
        filter: Option<&Filter>,
        now: f64,
    ) -> u64 {
        let ids: Vec<String> = match (id, filter) {
            (Some(id), None) => self
                .dlq_ids(queue, None, now)
                .into_iter()
                .filter(|x| x == id)
                .take(1)
                .collect(),
            (_, Some(f)) => self.dlq_ids(queue, Some(f), now),
            (None, None) => {
                let all = self.dlq_ids(queue, None, now);
                match count {
                    Some(c) => all.into_iter().take(c as usize).collect(),
                    None => all,
                }
            }
        };
        let mut done = 0;
        for id in ids {
            if !self.jobs.exists(&id) {
                continue;
            }
            if let Some((_, k)) = self.jobs.unique_key(&id) {
                let holder = self.unique.holder(queue, k);
                let held = holder.is_some_and(|h| *h != id && self.jobs.is_live(h));
                if held {
                    continue;
                }
            }
            self.leave_dlq(&id);
            self.jobs.prepare_retry(&id, now);
            self.jobs.refile(&id, now, now);
            done += 1;
        }
        done
    }

    /// `PurgeDlq`: drops every DLQ job of `queue` for good; how many.
    pub fn purge_dlq(&mut self, queue: &str, now: f64) -> u64 {
        let ids = self.dlq_ids(queue, None, now);
        for id in &ids {
            self.forget(id);
            self.jobs.record(StoreOp::Remove(id.clone()));
        }
        ids.len() as u64
    }

    /// `RemoveDlqJob`: drops one DLQ job of `queue` for good; false if it is not there.
    pub fn remove_dlq_job(&mut self, queue: &str, id: &str) -> bool {
        let there = self.jobs.in_dlq(queue, id);
        if there {
            self.forget(id);
            self.jobs.record(StoreOp::Remove(id.to_owned()));
        }
        there
    }

    /// A job completed: the jobs waiting only for it are released (see
    /// [`Jobs::on_completed`](super::Jobs::on_completed)), their links kept.
    pub(in crate::queue) fn on_completed(&mut self, id: &str, removed: bool, now: f64) {
        let changed = self.jobs.on_completed(id, removed, now, &mut self.waits);
        if self.settings.is_on() {
            for w in changed {
                self.keep_job(&w);
            }
        }
    }

    /// A job failed for good: the failure policy its parent applies, if any (see
    /// [`Jobs::on_failed`](super::Jobs::on_failed)).
    pub(in crate::queue) fn on_failed(
        &mut self,
        id: &str,
        error: Option<&str>,
    ) -> Option<(String, ChildFailure, String)> {
        self.jobs.on_failed(id, error)
    }

    /// bunqueue's flow failure policies, applied to `parent` when child `child` (of `queue`)
    /// failed for good (see [`Jobs::apply_policy`](super::Jobs::apply_policy)).
    pub(in crate::queue) fn apply_policy(
        &mut self,
        child: &str,
        queue: &str,
        policy: (String, ChildFailure, String),
        now: f64,
    ) {
        match self
            .jobs
            .apply_policy(child, queue, policy, now, &mut self.waits)
        {
            ParentEffect::None => {}
            ParentEffect::Released(parent) => self.emit_released(&parent),
            ParentEffect::Fail { parent, error } => self.fail_parent(&parent, error, now),
        }
    }

    /// bunqueue's `waiting` event for a parent a child's failure released.
    fn emit_released(&self, id: &str) {
        let Some(queue) = self.jobs.queue_of(id).map(str::to_owned) else {
            return;
        };
        self.events.emit(&queue, "waiting", |ts| {
            let mut f = job_event(&queue, id)(ts);
            f.push(("prev", Value::from("waiting-children")));
            f
        });
    }

    /// `failParentOnFailure`: the parent, out of every index, goes to the DLQ (reason
    /// `unknown`) with `error`, and a `failed` event.
    fn fail_parent(&mut self, parent: &str, error: String, now: f64) {
        // The text is the DLQ entry's error only: bunqueue's parent has no failed attempt in
        // its timeline, so GetJob shows no `failedReason` (seen by the differential test).
        self.file_failed(parent, now, "unknown", error.clone());
        let Some((queue, data)) = self.jobs.queue_and_data(parent) else {
            return;
        };
        self.events.emit(&queue, "failed", |ts| {
            let mut f = job_event(&queue, parent)(ts);
            f.extend([("error", Value::from(error.as_str())), ("data", data)]);
            f
        });
    }

    /// RemoveChildDependency (see [`Jobs::remove_child_dependency`]); a parent left waiting
    /// for nothing runs now, with a `waiting` event.
    ///
    /// [`Jobs::remove_child_dependency`]: super::Jobs::remove_child_dependency
    pub fn remove_child_dependency(&mut self, child: &str, now: f64) -> Result<bool, String> {
        let (detached, released) =
            self.jobs
                .remove_child_dependency(child, now, &mut self.waits)?;
        if let Some(parent) = released {
            self.emit_released(&parent);
        }
        Ok(detached)
    }

    /// Links new job `child` to `parent` (see [`Jobs::link_parent`]), both kept.
    ///
    /// [`Jobs::link_parent`]: super::Jobs::link_parent
    pub fn link_parent(&mut self, parent: &str, child: &str) {
        if self.jobs.link_parent(parent, child, &mut self.waits) && self.settings.is_on() {
            self.keep_job(parent);
            self.keep_job(child);
        }
    }

    /// RemoveUnprocessedChildren: cancels the children of `parent` still queued (waiting,
    /// delayed, or waiting for their own children); running and finished ones stay.
    pub fn remove_unprocessed_children(&mut self, parent: &str) {
        for c in self.jobs.children_of(parent) {
            self.cancel(&c);
        }
    }

    /// UpdateParent (see [`Jobs::update_parent`]), the jobs it changed kept.
    ///
    /// [`Jobs::update_parent`]: super::Jobs::update_parent
    pub fn update_parent(&mut self, child: &str, parent: &str) -> Result<(), String> {
        let changed = self.jobs.update_parent(child, parent, &mut self.waits)?;
        if self.settings.is_on() {
            for id in changed {
                self.keep_job(&id);
            }
        }
        Ok(())
    }

    /// MoveToWaitingChildren: an active job (its lock checked) waits for its children,
    /// its concurrency slot and lock released. `Ok(false)` when the job is not active.
    pub fn move_to_waiting_children(
        &mut self,
        id: &str,
        token: Option<&str>,
    ) -> Result<bool, FinishError> {
        self.jobs.check_lock(id, token)?;
        if self.jobs.state_of(id) != Some(Stage::Active) {
            return Ok(false);
        }
        self.finish(id)?;
        let Some(queue) = self.jobs.park_finished(id, &mut self.waits) else {
            return Ok(false);
        };
        self.events.emit(&queue, "waiting-children", |ts| {
            vec![
                ("jobId", Value::from(id)),
                ("queue", Value::from(queue.as_str())),
                ("timestamp", Value::F64(ts)),
                ("prev", Value::from("active")),
            ]
        });
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use crate::queue::{PullSpec, State};
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
        assert!(s.jobs.change_priority(&b, 5.0, None));
        assert!(!s.jobs.change_priority("nope", 5.0, None));
        assert_eq!(pull_ids(&mut s, 1), vec![b.clone()]);
        // An active job cannot be cancelled or re-prioritized.
        assert!(!s.cancel(&b));
        assert!(!s.jobs.change_priority(&b, 1.0, None));
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
    use crate::queue::CleanState;
    use crate::queue::Failure;
    use crate::queue::{PullSpec, State};
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
