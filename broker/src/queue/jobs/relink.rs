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

use super::{update_op, Jobs};
use crate::queue::flow::{with_keys, Waits};
use crate::store::{Stage, StoreOp};

impl Jobs {
    /// UpdateParent: links `child` to `parent`; bunqueue's error text otherwise. Returns the
    /// jobs whose links changed, for the settings to keep.
    pub fn update_parent(
        &mut self,
        child: &str,
        parent: &str,
        waits: &mut Waits,
    ) -> Result<Vec<String>, String> {
        if child == parent {
            return Err("A flow job cannot be its own parent".into());
        }
        let declared = self
            .map
            .get(parent)
            .and_then(|e| e.flow.as_ref())
            .is_some_and(|l| l.children.iter().any(|c| c == child));
        let Some(c) = self.map.get(child) else {
            return Err(format!("Child job not found: {child}"));
        };
        let Some(p) = self.map.get(parent) else {
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
                Stage::Waiting | Stage::Delayed | Stage::WaitingChildren
            )
        {
            return Err(format!("Parent job {parent} is not linkable"));
        }
        let child_done = c.rec.state == Stage::Completed;
        self.name_parent(child, parent, &parent_queue);
        let mut changed = vec![child.to_owned()];
        if declared {
            return Ok(changed);
        }
        if child_done {
            // Listed, not waited for.
            self.list_child(parent, child);
            return Ok(changed);
        }
        if self.link_parent(parent, child, waits) {
            changed.extend([parent.to_owned(), child.to_owned()]);
        }
        Ok(changed)
    }

    /// The child names its parent (its links, `__parentId` and `__parentQueue`), recorded.
    fn name_parent(&mut self, child: &str, parent: &str, parent_queue: &str) {
        let Some(e) = self.map.get_mut(child) else {
            return;
        };
        e.flow.get_or_insert_with(Default::default).parent = Some(parent.to_owned());
        e.rec.data = with_keys(
            &e.rec.data,
            &[
                ("__parentId", Some(Value::from(parent))),
                ("__parentQueue", Some(Value::from(parent_queue))),
            ],
        );
        let rec = e.rec.clone();
        self.record(StoreOp::Put(Box::new(rec)));
    }

    /// The parent lists a completed child (`childrenIds`, `__childrenIds`), recorded.
    fn list_child(&mut self, parent: &str, child: &str) {
        let Some(e) = self.map.get_mut(parent) else {
            return;
        };
        let l = e.flow.get_or_insert_with(Default::default);
        if !l.children.iter().any(|c| c == child) {
            l.children.push(child.to_owned());
        }
        let ids = l.children.iter().map(|c| Value::from(c.as_str())).collect();
        e.rec.data = with_keys(&e.rec.data, &[("__childrenIds", Some(Value::Array(ids)))]);
        let rec = e.rec.clone();
        self.record(StoreOp::Put(Box::new(rec)));
    }

    /// An active job taken out of the running jobs waits for its children in
    /// `waiting-children` (for good if it waits for none). Returns its queue.
    pub fn park_finished(&mut self, id: &str, waits: &mut Waits) -> Option<String> {
        let e = self.map.get_mut(id)?;
        e.rec.state = Stage::WaitingChildren;
        let deps = e.dependencies();
        let queue = e.rec.queue.clone();
        let op = update_op(&e.rec);
        self.park(id, &queue, &deps, waits);
        self.record(op);
        Some(queue)
    }
}
