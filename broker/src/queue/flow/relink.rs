//! Moving jobs into a flow after they were added: UpdateParent and MoveToWaitingChildren, as
//! bunqueue 2.9.5's `updateJobParent` and `moveToWaitingChildren` do them.
//!
//! * UpdateParent links a job to a parent that is waiting, delayed or waiting for children:
//!   the child's data gets `__parentId` and `__parentQueue`, the parent lists it
//!   (`__childrenIds`) and, unless the child has completed already, waits for it in
//!   `waiting-children`. A child the parent already lists (a flow's own) only gets its parent
//!   back. What the child's own failure does to its parent is what it was added with, if it
//!   was added in a flow.
//! * MoveToWaitingChildren takes an active job (its lock checked) to `waiting-children`,
//!   releasing its concurrency slot and lock: it runs again once the children it still waits
//!   for complete, and, as in bunqueue, stays there for good if it waits for none.

use autobatch_core::wire::Value;

use super::with_keys;
use crate::queue::{update_op, FinishError, State};
use crate::store::{JobState, StoreOp};

impl State {
    /// UpdateParent: links `child` to `parent`; bunqueue's error text otherwise.
    pub fn update_parent(&mut self, child: &str, parent: &str) -> Result<(), String> {
        if child == parent {
            return Err("A flow job cannot be its own parent".into());
        }
        let declared = self
            .jobs
            .map
            .get(parent)
            .and_then(|e| e.flow.as_ref())
            .is_some_and(|l| l.children.iter().any(|c| c == child));
        let Some(c) = self.jobs.map.get(child) else {
            return Err(format!("Child job not found: {child}"));
        };
        let Some(p) = self.jobs.map.get(parent) else {
            return Err(format!("Parent job not found: {parent}"));
        };
        let parent_queue = p.rec.queue.clone();
        let parent_state = p.rec.state;
        let data_parent = match &c.rec.data {
            Value::Raw(r) => r.decode().ok(),
            other => Some(other.clone()),
        }
        .and_then(|d| {
            d.get("__parentId")
                .and_then(Value::as_str)
                .map(str::to_owned)
        });
        let link_parent = c.flow.as_ref().and_then(|l| l.parent.clone());
        for owner in [link_parent, data_parent].into_iter().flatten() {
            if owner != "pending" && owner != parent {
                return Err(format!(
                    "Child job {child} already belongs to parent {owner}"
                ));
            }
        }
        if !declared
            && !matches!(
                parent_state,
                JobState::Waiting | JobState::Delayed | JobState::WaitingChildren
            )
        {
            return Err(format!("Parent job {parent} is not linkable"));
        }
        let child_done = c.rec.state == JobState::Completed;
        // The child names its parent.
        if let Some(e) = self.jobs.map.get_mut(child) {
            e.flow.get_or_insert_with(Default::default).parent = Some(parent.to_owned());
            e.rec.data = with_keys(
                &e.rec.data,
                &[
                    ("__parentId", Some(Value::from(parent))),
                    ("__parentQueue", Some(Value::from(parent_queue.as_str()))),
                ],
            );
            let rec = e.rec.clone();
            self.jobs.record(StoreOp::Put(Box::new(rec)));
        }
        if self.settings.is_on() {
            self.keep_job(child);
        }
        if declared {
            return Ok(());
        }
        if child_done {
            // Listed, not waited for.
            if let Some(e) = self.jobs.map.get_mut(parent) {
                let l = e.flow.get_or_insert_with(Default::default);
                if !l.children.iter().any(|c| c == child) {
                    l.children.push(child.to_owned());
                }
                let ids = l.children.iter().map(|c| Value::from(c.as_str())).collect();
                e.rec.data = with_keys(&e.rec.data, &[("__childrenIds", Some(Value::Array(ids)))]);
                let rec = e.rec.clone();
                self.jobs.record(StoreOp::Put(Box::new(rec)));
            }
            return Ok(());
        }
        self.link_parent(parent, child);
        Ok(())
    }

    /// MoveToWaitingChildren: `Ok(false)` when the job is not active.
    pub fn move_to_waiting_children(
        &mut self,
        id: &str,
        token: Option<&str>,
    ) -> Result<bool, FinishError> {
        self.jobs.check_lock(id, token)?;
        if !self
            .jobs
            .map
            .get(id)
            .is_some_and(|e| e.rec.state == JobState::Active)
        {
            return Ok(false);
        }
        self.finish(id)?;
        let Some(e) = self.jobs.map.get_mut(id) else {
            return Ok(false);
        };
        e.rec.state = JobState::WaitingChildren;
        let deps = e
            .flow
            .as_ref()
            .map(|l| l.depends_on.clone())
            .unwrap_or_default();
        let queue = e.rec.queue.clone();
        let op = update_op(&e.rec);
        self.jobs.park(id, &queue, &deps, &mut self.waits);
        self.jobs.record(op);
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
