//! Flows on the jobs: parents, children and dependencies, released, failed and detached, with
//! the waits they index (see `crate::queue::flow`).

use autobatch_core::ops::ChildFailure;
use autobatch_core::wire::Value;

use super::Jobs;
use crate::queue::flow::{put, with_keys, Waits};
use crate::store::Stage;

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
    /// The parent a new job links itself to, as bunqueue's `Queue.add` with `parent: {id,
    /// queue}` (a `parentId` matched by `__parentId` and `__parentQueue` in its data; a bare
    /// `parentId` is only recorded). Checked before anything is added, with bunqueue's errors.
    pub fn parent_to_link(
        &self,
        custom_id: Option<&str>,
        parent: Option<&str>,
        data: &Value,
    ) -> Result<Option<String>, String> {
        let Some(parent) = parent.filter(|p| !p.is_empty()) else {
            return Ok(None);
        };
        let decoded;
        let data = match data {
            Value::Raw(r) => {
                decoded = r.decode().unwrap_or(Value::Nil);
                &decoded
            }
            other => other,
        };
        let text = |k: &str| data.get(k).and_then(Value::as_str);
        if text("__parentId") != Some(parent) {
            return Ok(None);
        }
        let Some(expected) = text("__parentQueue").filter(|q| !q.is_empty()) else {
            return Ok(None);
        };
        if custom_id == Some(parent) {
            return Err("A job cannot be its own parent".into());
        }
        let e = self
            .map
            .get(parent)
            .ok_or_else(|| format!("Parent job not found: {parent}"))?;
        if !matches!(
            e.rec.state,
            Stage::Waiting | Stage::Delayed | Stage::WaitingChildren
        ) {
            return Err(format!("Parent job {parent} is not linkable"));
        }
        if e.rec.queue != expected {
            return Err(format!(
                "Parent job {parent} belongs to queue {}, not {expected}",
                e.rec.queue
            ));
        }
        Ok(Some(parent.to_owned()))
    }

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
            } else if e.rec.priority > 0.0 {
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
            if e.rec.state != Stage::WaitingChildren {
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
            Stage::Waiting | Stage::Delayed | Stage::WaitingChildren
        ) {
            return ParentEffect::None;
        }
        let key = format!("{queue}:{child}");
        match policy {
            ChildFailure::FailParent => self.fail_parent(parent, state, child, &error, waits),
            ChildFailure::ContinueParent => {
                let waiting = state == Stage::WaitingChildren;
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
                if state != Stage::WaitingChildren {
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
        state: Stage,
        child: &str,
        error: &str,
        waits: &mut Waits,
    ) -> ParentEffect {
        match state {
            Stage::WaitingChildren => self.unpark(&parent, waits),
            Stage::Waiting => self.unready(&parent),
            Stage::Delayed => self.undelay(&parent),
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
        if matches!(e.rec.state, Stage::Completed | Stage::Failed) {
            return Ok((false, None));
        }
        let waits_for_it = self.map.get(&parent).is_some_and(|p| {
            p.rec.state == Stage::WaitingChildren
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
        // Counted out of waiting-children by hand: its links have dropped the child.
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
            Stage::Waiting => self.unready(parent),
            Stage::Delayed => self.undelay(parent),
            Stage::WaitingChildren => {}
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
        if state != Stage::WaitingChildren {
            e.rec.state = Stage::WaitingChildren;
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
        } else if state == Stage::WaitingChildren && new_dep {
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
        if e.rec.state != Stage::WaitingChildren {
            return;
        }
        let deps = e.dependencies();
        let queue = e.rec.queue.clone();
        if let Some(q) = self.queues.get_mut(&queue) {
            q.waiting_children = q.waiting_children.saturating_sub(1);
        }
        for dep in deps {
            waits.remove(id, &dep);
        }
    }
}
