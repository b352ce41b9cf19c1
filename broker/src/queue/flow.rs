//! Flows and dependencies as bunqueue 2.9.5 runs them: a job with `dependsOn` ids that have
//! not all completed waits in `waiting-children` and becomes waiting (or delayed, if its run
//! time is still ahead) when the last of them completes; a child failing for good applies its
//! failure policy to its parent (`failParentOnFailure`, `continueParentOnFailure`,
//! `ignoreDependencyOnFailure`, `removeDependencyOnFailure`; none leaves the parent waiting).
//!
//! A job's links live on its entry ([`Links`]), so they go when the job goes; the reverse
//! index ([`Waits`]) holds only jobs in `waiting-children`. In SQLite mode the links
//! are also kept in the settings store (`crate::queue::kept`): a restart recovers a
//! `waiting-children` job as waiting, then puts its links back and parks it again for the
//! dependencies not completed yet.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use autobatch_core::ops::ChildFailure;
use autobatch_core::wire::{JobOptions, Value};
use tokio::sync::Notify;

#[cfg(test)]
mod tests;

/// Who waits for which job: the `waiting-children` jobs indexed by the dependencies they
/// wait for, and WaitJob's signals. Owned by the flows; the jobs' own links are on their
/// entries.
#[derive(Debug, Default)]
pub(crate) struct Waits {
    /// Dependency id → the jobs in `waiting-children` that wait for it.
    dependents: HashMap<String, HashSet<String>>,
    /// WaitJob signals by job id, while someone waits.
    waiters: HashMap<String, Arc<Notify>>,
}

impl Waits {
    /// Nothing waits for anything: a completion has nobody to tell.
    pub fn is_idle(&self) -> bool {
        self.dependents.is_empty() && self.waiters.is_empty()
    }

    /// Whether some job waits in `waiting-children`.
    pub fn has_dependents(&self) -> bool {
        !self.dependents.is_empty()
    }

    /// Whether jobs wait for `id`.
    pub fn awaited(&self, id: &str) -> bool {
        self.dependents.contains_key(id)
    }

    /// Job `id` waits for `dep`.
    pub fn add(&mut self, dep: &str, id: &str) {
        self.dependents
            .entry(dep.to_owned())
            .or_default()
            .insert(id.to_owned());
    }

    /// Job `id` stops waiting for `dep`.
    pub fn remove(&mut self, id: &str, dep: &str) {
        if let Some(set) = self.dependents.get_mut(dep) {
            set.remove(id);
            if set.is_empty() {
                self.dependents.remove(dep);
            }
        }
    }

    /// Job `id` completed: its WaitJob callers are woken, and the jobs that waited for it are
    /// taken out of the index, by id (the caller releases those with nothing left to wait for).
    pub fn completed(&mut self, id: &str) -> Vec<String> {
        if let Some(n) = self.waiters.get(id) {
            n.notify_waiters();
        }
        let mut waiting: Vec<String> = self
            .dependents
            .remove(id)
            .map(|w| w.into_iter().collect())
            .unwrap_or_default();
        waiting.sort();
        waiting
    }

    /// The signal WaitJob waits on for job `id`.
    pub fn waiter(&mut self, id: &str) -> Arc<Notify> {
        self.waiters.entry(id.to_owned()).or_default().clone()
    }

    /// Frees the signal of `id` once no WaitJob holds it.
    pub fn forget_waiter(&mut self, id: &str) {
        if self
            .waiters
            .get(id)
            .is_some_and(|n| Arc::strong_count(n) == 1)
        {
            self.waiters.remove(id);
        }
    }
}

/// A job's place in a flow: what bunqueue keeps as `parentId`, `childrenIds`, `dependsOn`
/// and the failure flags, plus the children failures its parent collects.
#[derive(Debug, Default)]
pub(crate) struct Links {
    /// The parent this job reports to.
    pub parent: Option<String>,
    /// This job's children, in the order added (GetChildrenValues' order).
    pub children: Vec<String>,
    /// The jobs that must still complete before this one runs: bunqueue's `dependsOn` less
    /// those completed (so a dependency removed on completion still counts as done), less a
    /// child whose failure removes or ignores it; emptied by `continueParentOnFailure`.
    pub depends_on: Vec<String>,
    /// What this job's failure for good does to its parent.
    pub policy: Option<ChildFailure>,
    /// `"<queue>:<child>"` → error of children that failed with `continueParentOnFailure`
    /// (GetFailedChildrenValues), in failure order.
    pub failed: Vec<(String, String)>,
    /// The same for `ignoreDependencyOnFailure` (GetIgnoredChildrenFailures).
    pub ignored: Vec<(String, String)>,
    /// Return values of children removed on completion, kept for GetChildrenValues while
    /// this job waits or runs (bunqueue's `dependencyResults`).
    pub kept: Vec<(String, Value)>,
}

impl Links {
    /// The links a job is added with: its parent, children, `dependsOn` (all of them: the
    /// caller keeps those not completed yet) and the first failure policy set.
    pub fn from_options(o: &JobOptions) -> Links {
        Links {
            parent: o.parent_id.clone(),
            children: o.children_ids.clone(),
            depends_on: o.depends_on.clone(),
            policy: o.on_failure.applied(),
            ..Links::default()
        }
    }

    /// This job finished for good: the children outcomes it collected are dropped.
    pub fn finished(&mut self) {
        self.failed = Vec::new();
        self.ignored = Vec::new();
        self.kept = Vec::new();
    }

    /// This job failed for good with `error` (the children outcomes it collected are
    /// dropped): `(parent, policy, error)` when a policy of it applies to its parent.
    pub fn failed_for_good(
        &mut self,
        error: Option<&str>,
    ) -> Option<(String, ChildFailure, String)> {
        self.finished();
        let parent = self.parent.clone()?;
        let policy = self.policy?;
        Some((parent, policy, error.unwrap_or("unknown error").to_owned()))
    }

    /// Whether there is anything to keep.
    pub fn is_empty(&self) -> bool {
        self.parent.is_none() && self.children.is_empty() && self.depends_on.is_empty()
    }
}

/// Sets `key` in a JS-object-like list, keeping the first insertion's place.
pub(crate) fn put(list: &mut Vec<(String, String)>, key: String, value: String) {
    match list.iter_mut().find(|(k, _)| *k == key) {
        Some(slot) => slot.1 = value,
        None => list.push((key, value)),
    }
}

/// `data` (a map, decoded if it was kept encoded) with `keys` set (`Some`) or removed
/// (`None`); anything else is returned as it is.
pub(crate) fn with_keys(data: &Value, keys: &[(&str, Option<Value>)]) -> Value {
    let decoded = match data {
        Value::Raw(r) => r.decode().ok(),
        other => Some(other.clone()),
    };
    let Some(Value::Map(mut m)) = decoded else {
        return data.clone();
    };
    for (k, v) in keys {
        let at = m.iter().position(|(key, _)| key.as_str() == Some(k));
        match (at, v) {
            (Some(i), Some(v)) => m[i].1 = v.clone(),
            (Some(i), None) => {
                m.remove(i);
            }
            (None, Some(v)) => m.push((Value::from(*k), v.clone())),
            (None, None) => {}
        }
    }
    Value::Map(m)
}
