//! What a job and a queue look like now: a job's state, queue, result and record, a queue's
//! counts, the dependencies and children a flow reads.

#[cfg(test)]
use autobatch_core::wire::Job;
use autobatch_core::wire::{JobCounts, Value};

use super::{state_name, Entry, Jobs};
#[cfg(test)]
use super::{wire_job, wire_links};
use crate::queue::index::QueueIndex;
use crate::queue::progress::Progress;
use crate::queue::totals::Gauges;
use crate::queue::view;
use crate::store::Stage;

impl Jobs {
    /// Job `id`'s state, if there is such a job.
    pub fn state_of(&self, id: &str) -> Option<Stage> {
        self.map.get(id).map(|e| e.rec.state)
    }

    /// Job `id`'s queue, if there is such a job.
    pub fn queue_of(&self, id: &str) -> Option<&str> {
        self.map.get(id).map(|e| e.rec.queue.as_str())
    }

    /// Job `id`'s queue and data, if there is such a job.
    pub fn queue_and_data(&self, id: &str) -> Option<(String, Value)> {
        let e = self.map.get(id)?;
        Some((e.rec.queue.clone(), e.rec.data.clone()))
    }

    /// When job `id`'s last run started, as its record shows it.
    pub fn shown_started(&self, id: &str) -> Option<f64> {
        self.map.get(id).and_then(|e| e.run.shown_started)
    }

    /// Whether a job id exists (any state), for `dependsOn`.
    pub fn exists(&self, id: &str) -> bool {
        self.map.contains_key(id)
    }

    /// How many jobs of group `group` wait in `queue` (waiting or delayed): what a group's
    /// `maxSize` bounds, as bunqueue's group scheduler counts them (pulled jobs leave it).
    /// A walk of the queue's waiting jobs, done only for a push that sets `maxSize`.
    pub fn group_queued(&self, queue: &str, group: &str) -> u64 {
        self.queued(queue)
            .filter(|e| e.run.group.as_deref() == Some(group))
            .count() as u64
    }

    /// GetGroupsJobsCount: the queued (waiting or delayed) jobs of `queue` that have a group,
    /// as bunqueue's group scheduler counts them. A walk of the queue's queued jobs.
    pub fn groups_queued(&self, queue: &str) -> u64 {
        self.queued(queue).filter(|e| e.run.group.is_some()).count() as u64
    }

    /// The queued (waiting or delayed) jobs of `queue`, a walk of both indexes: what the group
    /// counts read.
    pub(in crate::queue) fn queued<'a>(
        &'a self,
        queue: &str,
    ) -> impl Iterator<Item = &'a Entry> + 'a {
        self.queues
            .get(queue)
            .into_iter()
            .flat_map(QueueIndex::queued_ids)
            .filter_map(|id| self.map.get(id).map(|e| &**e))
    }

    /// The earliest time a delayed job of `queue` becomes due.
    pub fn next_due(&self, queue: &str) -> Option<f64> {
        self.queues.get(queue)?.next_due()
    }

    /// A job's state name, `unknown` if there is no such job.
    pub fn get_state(&mut self, id: &str, now: f64) -> &'static str {
        let Some(queue) = self.map.get(id).map(|e| e.rec.queue.clone()) else {
            return "unknown";
        };
        self.promote(&queue, now);
        self.map
            .get(id)
            .map(|e| state_name(&e.rec))
            .unwrap_or("unknown")
    }

    /// A completed job's result.
    pub fn get_result(&self, id: &str) -> Option<Value> {
        self.map.get(id).and_then(|e| e.rec.result.clone())
    }

    /// Per-state counts of a queue (all zeros for an unknown queue).
    pub fn counts(&mut self, queue: &str, now: f64) -> JobCounts {
        self.promote(queue, now);
        self.queues
            .get(queue)
            .map_or_else(JobCounts::default, QueueIndex::counts)
    }

    /// `Count`: the jobs waiting to run (waiting, prioritized, delayed), paused or not — as
    /// bunqueue's, which reports its priority queue's size whatever the pause.
    pub fn count(&mut self, queue: &str, now: f64) -> u64 {
        self.promote(queue, now);
        self.queues
            .get(queue)
            .map_or(0, |q| q.ready_len() + q.delayed_len())
    }

    /// Whether `id` counts as completed for a dependency (bunqueue's `completedJobs`).
    pub fn dependency_done(&self, id: &str) -> bool {
        self.map
            .get(id)
            .is_some_and(|e| e.rec.state == Stage::Completed)
    }

    /// Jobs created so far (each push that adds one counts it).
    pub fn jobs_created(&self) -> u64 {
        self.seq
    }

    /// Whether a new job with these dependencies must wait for them.
    pub fn must_wait(&self, depends_on: &[String]) -> bool {
        depends_on.iter().any(|d| !self.dependency_done(d))
    }

    /// The dependencies of a new job still to complete.
    pub fn unresolved(&self, depends_on: &[String]) -> Vec<String> {
        depends_on
            .iter()
            .filter(|d| !self.dependency_done(d))
            .cloned()
            .collect()
    }

    /// GetChildrenValues: `"<queue>:<child>"` → return value of every completed child that
    /// returned something, in the parent's `childrenIds` order; empty for an unknown parent.
    pub fn children_values(&self, parent: &str) -> Vec<(String, Value)> {
        let Some(l) = self.map.get(parent).and_then(|e| e.flow.as_ref()) else {
            return Vec::new();
        };
        l.children
            .iter()
            .filter_map(|c| match self.map.get(c) {
                Some(e) => {
                    let v = e.rec.result.clone().filter(|v| *v != Value::Undefined)?;
                    Some((format!("{}:{c}", e.rec.queue), v))
                }
                // Removed on completion: its kept value, under its bare id (bunqueue's key
                // for a child it cannot find).
                None => l
                    .kept
                    .iter()
                    .find(|(k, _)| k == c)
                    .map(|(_, v)| (c.clone(), v.clone())),
            })
            .collect()
    }

    /// GetFailedChildrenValues (`ignored` false) or GetIgnoredChildrenFailures (true).
    pub fn children_failures(&self, parent: &str, ignored: bool) -> Vec<(String, Value)> {
        let Some(l) = self.map.get(parent).and_then(|e| e.flow.as_ref()) else {
            return Vec::new();
        };
        let list = if ignored { &l.ignored } else { &l.failed };
        list.iter()
            .map(|(k, v)| (k.clone(), Value::from(v.as_str())))
            .collect()
    }

    /// WaitJob's view of a job: `None` unknown, `Some(Some(result))` completed (its return
    /// value, `Undefined` when none), `Some(None)` not completed yet.
    pub fn completion(&self, id: &str) -> Option<Option<Value>> {
        let e = self.map.get(id)?;
        Some(
            (e.rec.state == Stage::Completed)
                .then(|| e.rec.result.clone().unwrap_or(Value::Undefined)),
        )
    }

    /// Job `id`'s entry, for the tests.
    #[cfg(test)]
    pub(in crate::queue) fn entry(&self, id: &str) -> Option<&Entry> {
        self.map.get(id).map(|e| &**e)
    }

    /// The whole record of job `id` (PULL's and PUSHF's form: no state).
    pub fn record_view(&self, id: &str, extras: &Progress) -> Option<Value> {
        let e = self.map.get(id)?;
        Some(Value::map(view::record(
            e,
            extras.get(id),
            self.persistent(),
        )))
    }

    /// A job as GetJob returns it: with its state, result and failure reason.
    pub fn job_view(&mut self, id: &str, now: f64, extras: &Progress) -> Option<Value> {
        let queue = self.map.get(id)?.rec.queue.clone();
        self.promote(&queue, now);
        let e = self.map.get(id)?;
        // bunqueue's `jobView`: the record, its state, its value and its last error.
        let mut job = view::record(e, extras.get(id), self.persistent());
        job.push(("state", Value::from(state_name(&e.rec))));
        job.extend(view::outcome(e));
        Some(Value::map(job))
    }

    /// The counts of every queue now (due delayed jobs are promoted first, so a job whose run
    /// time has come counts as waiting, as in bunqueue); `dlq_len`: a queue's DLQ entries.
    pub fn gauges(&mut self, now: f64, dlq_len: impl Fn(&str) -> u64) -> Gauges {
        let names: Vec<String> = self.queues.keys().cloned().collect();
        let mut g = Gauges::default();
        for name in names {
            self.promote(&name, now);
            let Some(q) = self.queues.get(&name) else {
                continue;
            };
            let ready = q.ready_len();
            g.prioritized += q.prioritized().min(ready);
            g.waiting += ready - q.prioritized().min(ready);
            g.delayed += q.delayed_len();
            g.active += q.active;
            g.dlq += dlq_len(&name);
            g.completed += q.completed;
            g.waiting_children += q.waiting_children;
        }
        g
    }

    /// A job in the client's record form ([`Job`]), for the tests.
    #[cfg(test)]
    pub fn wire(&mut self, id: &str, now: f64) -> Option<Job> {
        let queue = self.map.get(id)?.rec.queue.clone();
        self.promote(&queue, now);
        let e = self.map.get(id)?;
        let mut job = wire_job(&e.rec);
        wire_links(&mut job, e);
        job.state = Some(autobatch_core::wire::JobState::from(state_name(&e.rec)));
        job.returnvalue = e.rec.result.clone();
        job.failed_reason = e.rec.failed_reason.clone();
        Some(job)
    }
}
