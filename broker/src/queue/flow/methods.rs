//! Flows on the jobs: parents, children and dependencies, released, failed and detached, with
//! the waits they index. A child of `flow`, so that `flow` itself names nothing of [`Jobs`]
//! and the jobs can hold each job's `Links` without an import cycle.

use super::*;
use crate::queue::jobs::Jobs;

/// What a child's failure policy leaves its caller to do for the parent.
#[derive(Debug, PartialEq)]
pub(crate) enum ParentEffect {
    /// Nothing more.
    None,
    /// The parent was released from `waiting-children`: bunqueue's `waiting` event.
    Released(String),
    /// The parent, out of every index, fails for good with `error` (`failParentOnFailure`).
    Fail { parent: String, error: String },
}

impl Jobs {
    /// A `waiting-children` job leaves for waiting or delayed (by its run time, or now).
    fn release(&mut self, id: &str, run_now: bool, now: f64, waits: &mut Waits) {
        self.unpark(id, waits);
        let Some(run_at) = self.map.get(id).map(|e| e.rec.run_at) else {
            return;
        };
        let run_at = if run_now { now } else { run_at };
        self.refile(id, run_at, now);
        // bunqueue's `checkpointDependencyPromotion`: the state it is released into.
        if let Some(e) = self.map.get_mut(id) {
            let state = if run_at > now {
                "delayed"
            } else if e.rec.priority > 0 {
                "prioritized"
            } else {
                "waiting"
            };
            if e.run.timeline.last().map(|s| s.state) != Some(state) {
                crate::queue::timeline::note(
                    &mut e.run.timeline,
                    crate::queue::timeline::Step {
                        state,
                        at: now,
                        error: None,
                        attempt: None,
                    },
                );
            }
        }
    }

    /// A job completed: the jobs waiting only for it (and for completed ones) are released, as
    /// bunqueue's `processPendingDependencies` releases them (no event); its own children
    /// failures are dropped; WaitJob callers are woken.
    /// `removed`: the job is about to be dropped (removeOnComplete): its parent keeps its
    /// return value. Returns the jobs whose links changed, for the settings to keep.
    pub fn on_completed(
        &mut self,
        id: &str,
        removed: bool,
        now: f64,
        waits: &mut Waits,
    ) -> Vec<String> {
        let linked = self.map.get(id).is_some_and(|e| e.flow.is_some());
        // The hot path (a job outside any flow, nobody waiting): nothing more to look up.
        if !linked && waits.is_idle() {
            return Vec::new();
        }
        let mut changed = Vec::new();
        let mut parent = None;
        if let Some(e) = self.map.get_mut(id) {
            if let Some(l) = e.flow.as_mut() {
                l.finished();
                parent = l.parent.clone().filter(|_| removed);
            }
            let result = e.rec.result.clone().filter(|v| *v != Value::Undefined);
            if let (Some(p), Some(result)) = (parent, result) {
                if let Some(l) = self.map.get_mut(&p).and_then(|e| e.flow.as_mut()) {
                    l.kept.push((id.to_owned(), result));
                }
            }
        }
        for w in waits.completed(id) {
            let Some(e) = self.map.get_mut(&w) else {
                continue;
            };
            if e.rec.state != JobState::WaitingChildren {
                continue;
            }
            let ready = e.flow.as_mut().is_none_or(|l| {
                l.depends_on.retain(|d| d != id);
                l.depends_on.is_empty()
            });
            if ready {
                self.release(&w, false, now, waits);
            }
            changed.push(w);
        }
        changed
    }

    /// A job failed for good. Its own children failures are dropped; `Some((parent, policy,
    /// error))` when a policy of it now applies to its parent (see [`apply_policy`]).
    ///
    /// [`apply_policy`]: Self::apply_policy
    pub fn on_failed(
        &mut self,
        id: &str,
        error: Option<&str>,
    ) -> Option<(String, ChildFailure, String)> {
        self.map.get_mut(id)?.flow.as_mut()?.failed_for_good(error)
    }

    /// bunqueue's flow failure policies, applied to `parent` when child `child` (of `queue`)
    /// failed for good with `error`. Only a parent still queued (waiting, delayed or
    /// `waiting-children`) is touched. Returns what the caller must do for the parent.
    pub fn apply_policy(
        &mut self,
        child: &str,
        queue: &str,
        (parent, policy, error): (String, ChildFailure, String),
        now: f64,
        waits: &mut Waits,
    ) -> ParentEffect {
        let Some(state) = self.map.get(&parent).map(|e| e.rec.state) else {
            return ParentEffect::None;
        };
        if !matches!(
            state,
            JobState::Waiting | JobState::Delayed | JobState::WaitingChildren
        ) {
            return ParentEffect::None;
        }
        let key = format!("{queue}:{child}");
        match policy {
            ChildFailure::FailParent => self.fail_parent(parent, state, child, &error, waits),
            ChildFailure::ContinueParent => {
                let waiting = state == JobState::WaitingChildren;
                self.unpark(&parent, waits);
                if let Some(l) = self.map.get_mut(&parent).and_then(|e| e.flow.as_mut()) {
                    put(&mut l.failed, key, error);
                    l.depends_on = Vec::new();
                }
                if !waiting {
                    return ParentEffect::None;
                }
                // Unparked above: filed now, to run at once.
                self.refile(&parent, now, now);
                ParentEffect::Released(parent)
            }
            ChildFailure::Ignore | ChildFailure::RemoveDependency => {
                if policy == ChildFailure::Ignore {
                    if let Some(l) = self.map.get_mut(&parent).and_then(|e| e.flow.as_mut()) {
                        put(&mut l.ignored, key, error);
                    }
                }
                if state != JobState::WaitingChildren {
                    return ParentEffect::None;
                }
                let Some(l) = self.map.get_mut(&parent).and_then(|e| e.flow.as_mut()) else {
                    return ParentEffect::None;
                };
                if let Some(i) = l.depends_on.iter().position(|d| d == child) {
                    l.depends_on.remove(i);
                    waits.remove(&parent, child);
                }
                // bunqueue's record lists it no more either (a completed one stays listed).
                if let Some(e) = self.map.get_mut(&parent) {
                    e.run.shown_depends.retain(|d| d != child);
                }
                let ready = self
                    .map
                    .get(&parent)
                    .is_some_and(|e| e.flow.as_ref().is_none_or(|l| l.depends_on.is_empty()));
                if !ready {
                    return ParentEffect::None;
                }
                self.release(&parent, true, now, waits);
                ParentEffect::Released(parent)
            }
            // A policy a newer core may add: none applied, as bunqueue without a flag.
            _ => ParentEffect::None,
        }
    }

    /// `failParentOnFailure`: the parent (in `state`) leaves its index and the children
    /// outcomes it collected, to fail for good with bunqueue's `Child job <id> failed: <error>`.
    fn fail_parent(
        &mut self,
        parent: String,
        state: JobState,
        child: &str,
        error: &str,
        waits: &mut Waits,
    ) -> ParentEffect {
        match state {
            JobState::WaitingChildren => self.unpark(&parent, waits),
            JobState::Waiting => self.unready(&parent),
            JobState::Delayed => self.undelay(&parent),
            _ => return ParentEffect::None,
        }
        if let Some(l) = self.map.get_mut(&parent).and_then(|e| e.flow.as_mut()) {
            l.failed = Vec::new();
            l.ignored = Vec::new();
        }
        let error = format!("Child job {child} failed: {error}");
        ParentEffect::Fail { parent, error }
    }

    /// RemoveChildDependency, as bunqueue's `removeChildDependency`: detaches a child that
    /// has not finished from its parent still waiting for it (the parent's `childrenIds` and
    /// `__childrenIds`, the child's `parentId`, `__parentId` and `__parentQueue`); a parent
    /// left waiting for nothing runs now, with a `waiting` event. `Ok(false)` when there is
    /// nothing to detach; bunqueue's errors for an unknown child or one without a parent.
    /// `Ok(true)` with the parent when it was released.
    pub fn remove_child_dependency(
        &mut self,
        child: &str,
        now: f64,
        waits: &mut Waits,
    ) -> Result<(bool, Option<String>), String> {
        let e = self
            .map
            .get(child)
            .ok_or_else(|| format!("Job not found: {child}"))?;
        let Some(parent) = e.flow.as_ref().and_then(|l| l.parent.clone()) else {
            return Err(format!("Job {child} has no parent"));
        };
        if matches!(e.rec.state, JobState::Completed | JobState::Failed) {
            return Ok((false, None));
        }
        let waits_for_it = self.map.get(&parent).is_some_and(|p| {
            p.rec.state == JobState::WaitingChildren
                && p.flow
                    .as_ref()
                    .is_some_and(|l| l.depends_on.iter().any(|d| d == child))
        });
        if !waits_for_it {
            return Ok((false, None));
        }
        waits.remove(&parent, child);
        let mut released = false;
        if let Some(p) = self.map.get_mut(&parent) {
            p.run.shown_depends.retain(|d| d != child);
            if let Some(l) = p.flow.as_mut() {
                l.depends_on.retain(|d| d != child);
                l.children.retain(|c| c != child);
                released = l.depends_on.is_empty();
                let ids: Vec<Value> = l.children.iter().map(|c| Value::from(c.as_str())).collect();
                let list = (!ids.is_empty()).then_some(Value::Array(ids));
                p.rec.data = with_keys(&p.rec.data, &[("__childrenIds", list)]);
            }
        }
        if let Some(c) = self.map.get_mut(child) {
            if let Some(l) = c.flow.as_mut() {
                l.parent = None;
                l.policy = None;
            }
            c.rec.data = with_keys(
                &c.rec.data,
                &[("__parentId", None), ("__parentQueue", None)],
            );
        }
        for id in [child, parent.as_str()] {
            if let Some(rec) = self.map.get(id).map(|e| e.rec.clone()) {
                self.record(crate::store::StoreOp::Put(Box::new(rec)));
            }
        }
        if !released {
            return Ok((true, None));
        }
        // Counted out of waiting-children by hand: its links no longer list the child.
        self.unpark(&parent, waits);
        self.refile(&parent, now, now);
        Ok((true, Some(parent)))
    }

    /// Links new job `child` to `parent` (checked by [`parent_to_link`]): the parent lists
    /// it (`childrenIds`, `__childrenIds`) and waits for it in `waiting-children`.
    ///
    /// [`parent_to_link`]: Self::parent_to_link
    /// False when the parent is not linkable (nothing changed then).
    pub fn link_parent(&mut self, parent: &str, child: &str, waits: &mut Waits) -> bool {
        // A new child has not completed: the parent always waits for it.
        let Some(e) = self.map.get(parent) else {
            return false;
        };
        let state = e.rec.state;
        let queue = e.rec.queue.clone();
        match state {
            JobState::Waiting => self.unready(parent),
            JobState::Delayed => self.undelay(parent),
            JobState::WaitingChildren => {}
            _ => return false,
        }
        let Some(e) = self.map.get_mut(parent) else {
            return false;
        };
        let l = e.flow.get_or_insert_with(Default::default);
        if !l.children.iter().any(|c| c == child) {
            l.children.push(child.to_owned());
        }
        let new_dep = !l.depends_on.iter().any(|d| d == child);
        if new_dep {
            l.depends_on.push(child.to_owned());
        }
        if !e.run.shown_depends.iter().any(|d| d == child) {
            e.run.shown_depends.push(child.to_owned());
        }
        let ids = l.children.iter().map(|c| Value::from(c.as_str())).collect();
        e.rec.data = with_keys(&e.rec.data, &[("__childrenIds", Some(Value::Array(ids)))]);
        if state != JobState::WaitingChildren {
            e.rec.state = JobState::WaitingChildren;
            let deps = l.depends_on.clone();
            crate::queue::timeline::note(
                &mut e.run.timeline,
                crate::queue::timeline::Step {
                    state: "waiting-children",
                    at: crate::clock::now_ms(),
                    error: None,
                    attempt: None,
                },
            );
            self.park(parent, &queue, &deps, waits);
        } else if state == JobState::WaitingChildren && new_dep {
            waits.add(child, parent);
        }
        if let Some(rec) = self.map.get(parent).map(|e| e.rec.clone()) {
            self.record(crate::store::StoreOp::Put(Box::new(rec)));
        }
        true
    }

    /// The children of `parent`, in the order added.
    pub fn children_of(&self, parent: &str) -> Vec<String> {
        self.map
            .get(parent)
            .and_then(|e| e.flow.as_ref())
            .map(|l| l.children.clone())
            .unwrap_or_default()
    }

    /// Files a new job in `waiting-children`: counted, and its dependencies indexed.
    pub fn park(&mut self, id: &str, queue: &str, depends_on: &[String], waits: &mut Waits) {
        self.index(queue).waiting_children += 1;
        for dep in depends_on {
            waits.add(dep, id);
        }
    }

    /// Takes a `waiting-children` job out of its count and the reverse index (to be filed
    /// elsewhere or forgotten).
    pub fn unpark(&mut self, id: &str, waits: &mut Waits) {
        let Some(e) = self.map.get(id) else {
            return;
        };
        if e.rec.state != JobState::WaitingChildren {
            return;
        }
        let deps = e
            .flow
            .as_ref()
            .map(|l| l.depends_on.clone())
            .unwrap_or_default();
        let queue = e.rec.queue.clone();
        if let Some(q) = self.queues.get_mut(&queue) {
            q.waiting_children = q.waiting_children.saturating_sub(1);
        }
        for dep in deps {
            waits.remove(id, &dep);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::queue::Failure;
    use crate::queue::{PullSpec, State};
    use crate::store::MemoryStore;
    use autobatch_core::wire::{JobOptions, JobSpec, Value};

    fn state() -> State {
        State::new(Box::new(MemoryStore::new()), 0.0).unwrap()
    }

    /// Options with a field set that has no builder.
    fn set(mut o: JobOptions, f: impl FnOnce(&mut JobOptions)) -> JobOptions {
        f(&mut o);
        o
    }

    /// Pulls one job of `queue` (locked): `(id, token)`.
    fn pull(s: &mut State, queue: &str, now: f64) -> Option<(String, String)> {
        let spec = PullSpec {
            queue,
            count: 1,
            locked: true,
            lock_ttl: 30_000,
            tie_to: Some(1),
        };
        let p = s.pull(&spec, now).into_iter().next()?;
        Some((p.id, p.token.unwrap_or_default()))
    }

    /// A parent `p` (in `top`) with children `c1`, `c2` (in `kids`), each child with `opts`.
    fn flow(s: &mut State, opts: impl Fn(JobOptions) -> JobOptions) {
        let kids = ["c1", "c2"].map(String::from).to_vec();
        let parent = JobOptions::new()
            .job_id("p")
            .depends_on(kids.clone())
            .children_ids(kids.clone());
        for c in &kids {
            let o = set(JobOptions::new().job_id(c.as_str()).attempts(1), |o| {
                o.parent_id = Some("p".into())
            });
            let o = opts(o);
            s.push(
                "kids",
                JobSpec::new(c.as_str(), Value::Nil).with_options(o),
                0.0,
            );
        }
        s.push(
            "top",
            JobSpec::new("p", Value::Nil).with_options(parent),
            0.0,
        );
    }

    fn run(s: &mut State, ok: bool, result: Value) -> String {
        let (id, token) = pull(s, "kids", 1.0).expect("a child is ready");
        if ok {
            s.ack(&id, Some(&token), Some(result), false, 1.0).unwrap();
        } else {
            s.fail(
                &id,
                Some(&token),
                Failure::new(Some(format!("{id} broke"))),
                1.0,
            )
            .unwrap();
        }
        id
    }

    /// The parent waits in `waiting-children` (counted, not pullable) until its last child
    /// completes, then waits to run and reads its children's values in `childrenIds` order.
    #[test]
    fn parent_waits_for_its_last_child() {
        let mut s = state();
        flow(&mut s, |o| o);
        assert_eq!(s.jobs.get_state("p", 0.0), "waiting-children");
        assert_eq!(s.jobs.counts("top", 0.0).waiting_children, 1);
        assert_eq!(s.jobs.count("top", 0.0), 0);
        assert!(pull(&mut s, "top", 0.0).is_none());
        let first = run(&mut s, true, Value::from(1_i64));
        assert_eq!(s.jobs.get_state("p", 1.0), "waiting-children");
        run(&mut s, true, Value::from(2_i64));
        assert_eq!(s.jobs.get_state("p", 1.0), "waiting");
        assert_eq!(s.jobs.counts("top", 1.0).waiting_children, 0);
        let values = s.jobs.children_values("p");
        let expect = |id: &str| Value::from(if id == first { 1_i64 } else { 2 });
        assert_eq!(
            values,
            vec![
                ("kids:c1".to_owned(), expect("c1")),
                ("kids:c2".to_owned(), expect("c2"))
            ]
        );
        let job = s.get_job_wire("p", 1.0).unwrap();
        assert_eq!(job.children_ids, ["c1", "c2"]);
        assert_eq!(
            s.get_job_wire("c1", 1.0).unwrap().parent_id.as_deref(),
            Some("p")
        );
        assert!(!s.waits.has_dependents(), "nothing left in the index");
    }

    /// No policy: a child failing for good leaves its parent waiting for good.
    #[test]
    fn a_failed_child_without_a_policy_keeps_the_parent_waiting() {
        let mut s = state();
        flow(&mut s, |o| o);
        run(&mut s, false, Value::Nil);
        run(&mut s, true, Value::Nil);
        assert_eq!(s.jobs.get_state("p", 1.0), "waiting-children");
        assert!(s.jobs.children_failures("p", false).is_empty());
    }

    /// failParentOnFailure: the parent fails at once (DLQ, bunqueue's text) and leaves the
    /// index; the other child still runs.
    #[test]
    fn fail_parent_on_failure() {
        let mut s = state();
        flow(&mut s, |o| {
            set(o, |o| o.fail_parent_on_failure = Some(true))
        });
        let bad = run(&mut s, false, Value::Nil);
        assert_eq!(s.jobs.get_state("p", 1.0), "failed");
        let entry = s.jobs.entry("p").and_then(|e| e.run.dlq.clone()).unwrap();
        assert_eq!(
            entry,
            (
                "unknown",
                Some(format!("Child job {bad} failed: {bad} broke"))
            )
        );
        assert_eq!(s.get_job_wire("p", 1.0).unwrap().failed_reason, None);
        assert_eq!(s.jobs.counts("top", 1.0).failed, 1);
        assert_eq!(s.jobs.counts("top", 1.0).waiting_children, 0);
        run(&mut s, true, Value::Nil);
        assert_eq!(s.jobs.get_state("p", 1.0), "failed");
        assert!(!s.waits.has_dependents());
    }

    /// continueParentOnFailure: the parent runs at once, the failure readable from it;
    /// ignoreDependencyOnFailure: the dependency is dropped and its failure kept apart;
    /// removeDependencyOnFailure: dropped, nothing kept.
    #[test]
    fn continue_ignore_and_remove() {
        let mut s = state();
        flow(&mut s, |o| {
            set(o, |o| o.continue_parent_on_failure = Some(true))
        });
        let bad = run(&mut s, false, Value::Nil);
        assert_eq!(
            s.jobs.get_state("p", 1.0),
            "waiting",
            "released before c2 ran"
        );
        assert_eq!(
            s.jobs.children_failures("p", false),
            vec![(format!("kids:{bad}"), Value::from(format!("{bad} broke")))]
        );
        assert!(!s.waits.has_dependents());

        for (ignore, ignored) in [(true, 1), (false, 0)] {
            let mut s = state();
            flow(&mut s, |o| {
                if ignore {
                    set(o, |o| o.ignore_dependency_on_failure = Some(true))
                } else {
                    set(o, |o| o.remove_dependency_on_failure = Some(true))
                }
            });
            run(&mut s, false, Value::Nil);
            assert_eq!(
                s.jobs.get_state("p", 1.0),
                "waiting-children",
                "c2 still runs"
            );
            run(&mut s, true, Value::from(5_i64));
            assert_eq!(s.jobs.get_state("p", 1.0), "waiting");
            assert_eq!(s.jobs.children_failures("p", true).len(), ignored);
            assert_eq!(s.jobs.children_values("p").len(), 1);
            // Completing the parent drops what it collected, as bunqueue does.
            let (id, token) = pull(&mut s, "top", 2.0).unwrap();
            s.ack(&id, Some(&token), None, false, 2.0).unwrap();
            assert!(s.jobs.children_failures("p", true).is_empty());
        }
    }

    /// A job pushed with `dependsOn` an unfinished job waits for it; cancelling a waiting job
    /// takes it out of the index; a delayed parent released becomes delayed.
    #[test]
    fn depends_on_and_removal() {
        let mut s = state();
        let a = s.push("q", JobSpec::new("a", Value::Nil), 0.0);
        let o = JobOptions::new()
            .depends_on(vec![a.clone()])
            .delay(std::time::Duration::from_millis(100));
        let b = s.push(
            "q",
            JobSpec::new("b", Value::Nil).with_options(o.clone()),
            0.0,
        );
        let c = s.push("q", JobSpec::new("c", Value::Nil).with_options(o), 0.0);
        assert_eq!(s.jobs.get_state(&b, 0.0), "waiting-children");
        assert!(s.cancel(&c));
        assert_eq!(s.jobs.counts("q", 0.0).waiting_children, 1);
        let (id, token) = pull(&mut s, "q", 1.0).unwrap();
        assert_eq!(id, a);
        s.ack(&id, Some(&token), None, false, 1.0).unwrap();
        assert_eq!(s.jobs.get_state(&b, 1.0), "delayed", "its delay still runs");
        assert!(!s.waits.has_dependents());
        // A dependency already completed: no wait.
        let o = JobOptions::new().depends_on(vec![a]);
        let d = s.push("q", JobSpec::new("d", Value::Nil).with_options(o), 1.0);
        assert_eq!(s.jobs.get_state(&d, 1.0), "waiting");
    }

    /// Children removed on completion still count as done, and their values stay readable
    /// from the parent (under their bare ids) until it finishes.
    #[test]
    fn removed_children_count_and_keep_their_values() {
        let mut s = state();
        flow(&mut s, |o| o.remove_on_complete(true));
        let first = run(&mut s, true, Value::from(1_i64));
        assert_eq!(s.jobs.get_state(&first, 1.0), "unknown", "removed");
        run(&mut s, true, Value::from(2_i64));
        assert_eq!(s.jobs.get_state("p", 1.0), "waiting");
        let mut values = s.jobs.children_values("p");
        values.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(values.len(), 2);
        assert_eq!(values[0].0, "c1");
        let (id, token) = pull(&mut s, "top", 2.0).unwrap();
        s.ack(&id, Some(&token), None, false, 2.0).unwrap();
        assert!(
            s.jobs.children_values("p").is_empty(),
            "released with the parent"
        );
    }

    /// RemoveChildDependency detaches a child (the data keys: see the differential flow
    /// program); the parent, left waiting for nothing, runs. RemoveUnprocessedChildren cancels
    /// queued children.
    #[test]
    fn detaching_children() {
        let mut s = state();
        flow(&mut s, |o| o);
        assert_eq!(s.remove_child_dependency("c1", 0.0), Ok(true));
        assert_eq!(s.jobs.get_state("p", 0.0), "waiting-children");
        assert_eq!(s.get_job_wire("p", 0.0).unwrap().children_ids, ["c2"]);
        assert_eq!(
            s.remove_child_dependency("c1", 0.0),
            Err("Job c1 has no parent".into())
        );
        assert_eq!(
            s.remove_child_dependency("zz", 0.0),
            Err("Job not found: zz".into())
        );
        assert_eq!(s.remove_child_dependency("c2", 0.0), Ok(true));
        assert_eq!(s.jobs.get_state("p", 0.0), "waiting");
        assert!(!s.waits.has_dependents());

        let mut s = state();
        flow(&mut s, |o| o);
        s.remove_unprocessed_children("p");
        assert_eq!(s.jobs.get_state("c1", 0.0), "unknown");
        assert_eq!(s.jobs.get_state("c2", 0.0), "unknown");
        assert_eq!(
            s.jobs.get_state("p", 0.0),
            "waiting-children",
            "as bunqueue: stuck"
        );
    }

    /// A job added with `parent: {id, queue}` (its data naming the parent) links itself: the
    /// parent waits for it; a bare `parentId` links nothing; a parent elsewhere is refused.
    #[test]
    fn queue_add_with_a_parent_links_it() {
        let mut s = state();
        let host = s.push("q", JobSpec::new("host", Value::Nil), 0.0);
        let data = Value::map([
            ("__parentId", Value::from(host.as_str())),
            ("__parentQueue", Value::from("q")),
        ]);
        assert_eq!(
            s.jobs.parent_to_link(None, Some(&host), &data),
            Ok(Some(host.clone()))
        );
        assert_eq!(
            s.jobs.parent_to_link(None, Some(&host), &Value::Nil),
            Ok(None)
        );
        let elsewhere = Value::map([
            ("__parentId", Value::from(host.as_str())),
            ("__parentQueue", Value::from("r")),
        ]);
        assert!(s
            .jobs
            .parent_to_link(None, Some(&host), &elsewhere)
            .is_err());
        let o = set(JobOptions::new(), |o| o.parent_id = Some(host.clone()));
        let kid = s.push("q", JobSpec::new("kid", data).with_options(o), 0.0);
        s.link_parent(&host, &kid);
        assert_eq!(s.jobs.get_state(&host, 0.0), "waiting-children");
        assert_eq!(
            s.get_job_wire(&host, 0.0).unwrap().children_ids,
            vec![kid.clone()]
        );
        let (id, token) = pull(&mut s, "q", 1.0).unwrap();
        assert_eq!(id, kid, "the parent waits");
        s.ack(&id, Some(&token), None, false, 1.0).unwrap();
        assert_eq!(s.jobs.get_state(&host, 1.0), "waiting");
        assert!(!s.waits.has_dependents());
    }

    /// WaitJob's view: unknown, not yet completed, completed with its value.
    #[test]
    fn completion_view() {
        let mut s = state();
        assert_eq!(s.jobs.completion("x"), None);
        let id = s.push("kids", JobSpec::new("a", Value::Nil), 0.0);
        assert_eq!(s.jobs.completion(&id), Some(None));
        let waiter = s.job_waiter(&id);
        let (id, token) = pull(&mut s, "kids", 0.0).unwrap();
        s.ack(&id, Some(&token), Some(Value::from(3_i64)), false, 0.0)
            .unwrap();
        assert_eq!(s.jobs.completion(&id), Some(Some(Value::from(3_i64))));
        drop(waiter);
        s.forget_waiter(&id);
        assert!(s.waits.waiters.is_empty());
    }
}
