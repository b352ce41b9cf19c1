//! The jobs: every job's record and run, each queue's index of its jobs by state, and the job
//! store they are written to (see `journal`). [`Jobs`] files, moves and looks up jobs; what a
//! move means to another concern (a DLQ entry, a flow's waits, an event) is the caller's.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

#[cfg(test)]
use autobatch_core::wire::Job;
use autobatch_core::wire::{Backoff, JobOptions, JobSpec, Value};
use tokio::sync::Notify;

use super::flow::{self, Waits};
use super::index::QueueIndex;
use super::journal::Journal;
use super::timeline;
use crate::conn_id::ConnId;
use crate::store::{JobRecord, Stage, Store, StoreOp, SyncWaiter};

/// Queue control: pause, listings, promote, priority, the jobs control takes out.
mod control;
/// A job's way into and out of the DLQ.
mod dlq;
/// A job's extras kept across a restart.
mod kept;
/// Flows: parents and children released, failed and detached.
mod links;
/// A running job's lock.
mod locks;
/// What a job and a queue look like now.
mod lookup;
/// UpdateParent and MoveToWaitingChildren.
mod relink;
/// A job's runs: pulled, finished, failed, stalled.
mod run;
pub(crate) use control::{CleanState, MoveError};
pub(crate) use links::ParentEffect;
pub(crate) use run::{FinishError, PullSpec, DEFAULT_LOCK_TTL};

/// Default `maxAttempts`.
const DEFAULT_ATTEMPTS: i64 = 3;
/// Default backoff base, ms.
const DEFAULT_BACKOFF: Duration = Duration::from_millis(1000);
/// Longest retry delay, ms.
pub(in crate::queue) const MAX_RETRY_DELAY: f64 = 3_600_000.0;

pub(in crate::queue) struct Lock {
    pub(in crate::queue) token: String,
    pub(in crate::queue) expires_at: f64,
    /// The lock's own time to live (the pull's `lockTtl`): a heartbeat without a duration
    /// renews it by this much, as bunqueue's `renewLock`.
    pub(in crate::queue) ttl: f64,
    /// Renewals so far (bunqueue's `renewalCount`, named in a DLQ entry's error).
    pub(in crate::queue) renewals: u64,
}

pub(in crate::queue) struct Entry {
    pub(in crate::queue) rec: JobRecord,
    pub(in crate::queue) lock: Option<Lock>,
    pub(in crate::queue) conn: Option<ConnId>,
    /// Stall detection's view of a running job (bunqueue's `startedAt`, `lastHeartbeat`,
    /// `stallCount`, and the job's `stallTimeout` option). In memory only: a restart
    /// requeues active jobs anyway.
    pub(in crate::queue) run: RunInfo,
    /// Its place in a flow or its `dependsOn`, if any (see `flow`).
    pub(in crate::queue) flow: Option<Box<flow::Links>>,
}

impl Entry {
    /// The ids this job waits for (none when it is in no flow).
    pub(in crate::queue) fn dependencies(&self) -> Vec<String> {
        self.flow
            .as_ref()
            .map(|l| l.depends_on.clone())
            .unwrap_or_default()
    }
}

/// See [`Entry::run`].
#[derive(Default)]
pub(in crate::queue) struct RunInfo {
    pub(in crate::queue) started_at: Option<f64>,
    pub(in crate::queue) last_heartbeat: f64,
    pub(in crate::queue) stall_count: u64,
    pub(in crate::queue) stall_timeout: Option<f64>,
    /// The job's `timeout`, ms: failed when it runs longer (bunqueue's timeout scheduler).
    pub(in crate::queue) timeout: Option<f64>,
    /// The job's `ttl`, ms: dropped unrun once older (from `createdAt`) than this.
    pub(in crate::queue) ttl: Option<f64>,
    /// When it completed or failed for good (epoch ms) and in which order, for Clean and the
    /// DLQ's `enteredAt`. A job that finished before a restart has its creation time here, as
    /// bunqueue goes by for a record without `completedAt`, unless SQLite mode kept its
    /// failure (see `kept`).
    pub(in crate::queue) finished: Option<(f64, u64)>,
    /// Why it failed for good and the DLQ entry's error (see `dlq`).
    pub(in crate::queue) dlq: Option<(&'static str, Option<String>)>,
    /// Its `groupId`, for a group's `maxSize` (see [`Jobs::group_queued`]).
    pub(in crate::queue) group: Option<String>,
    /// bunqueue's `timeline` of the job.
    pub(in crate::queue) timeline: Vec<timeline::Step>,
    /// The last FAIL's stack, as kept (see [`timeline::stacktrace`]).
    pub(in crate::queue) stacktrace: Option<Vec<String>>,
    /// Its record's `startedAt`: when its last run started, kept once it finished (cleared
    /// when it waits for a retry).
    pub(in crate::queue) shown_started: Option<f64>,
    /// Its failed attempts (a DLQ entry's history).
    pub(in crate::queue) attempt_log: Vec<timeline::Attempt>,
    /// Its record's `completedAt` (none for a job completed by a late ACK while it waited
    /// for a retry, as bunqueue's record shows it).
    pub(in crate::queue) shown_completed: Option<f64>,
    /// Its record's `dependsOn`: the ids it was added with and children linked since, less
    /// children whose failure dropped or ignored them (completed ones stay).
    pub(in crate::queue) shown_depends: Vec<String>,
}

impl RunInfo {
    /// A new job's run settings, from its add options.
    pub(in crate::queue) fn from_options(o: &JobOptions) -> RunInfo {
        RunInfo {
            shown_depends: o.depends_on.clone(),
            stall_timeout: o.stall_timeout.map(ms),
            // bunqueue ignores a zero timeout or ttl (`!job.timeout`, `ttl ?? null`: 0 kept).
            timeout: o.timeout.map(ms).filter(|t| *t > 0.0),
            ttl: o.ttl.map(ms),
            group: o.group_id.clone(),
            ..RunInfo::default()
        }
    }
}

/// Every job and the queues' indexes of them, with the store their changes are written to.
pub(crate) struct Jobs {
    /// Boxed: the map grows to millions of jobs, and a resize then moves pointers, not records.
    map: HashMap<String, Box<Entry>>,
    queues: HashMap<String, QueueIndex>,
    /// Jobs created so far: the next job's `seq`.
    seq: u64,
    /// Jobs finished so far, numbering [`RunInfo::finished`].
    finish_seq: u64,
    /// The retry jitter's generator state (see [`Jobs::random`]).
    rng: u64,
    /// The job store, fed every change (see `journal`).
    journal: Journal,
}

impl Jobs {
    /// No jobs yet, their changes written to `store`.
    pub fn new(store: Box<dyn Store>, now: f64) -> Jobs {
        Jobs {
            map: HashMap::new(),
            queues: HashMap::new(),
            seq: 0,
            finish_seq: 0,
            rng: (now as u64) ^ 0x9e37_79b9_7f4a_7c15,
            journal: Journal::new(store),
        }
    }
}

impl Jobs {
    /// The index of `queue`, made empty if it has none yet.
    pub fn index(&mut self, queue: &str) -> &mut QueueIndex {
        index_in(&mut self.queues, queue)
    }

    /// The long-poll signal of a queue (woken when jobs become ready).
    pub fn notifier(&mut self, queue: &str) -> Arc<Notify> {
        self.index(queue).notify.clone()
    }

    /// Frees the index of `queue` if it holds nothing: no job in any state and no long-poll
    /// waiting on its signal (each waiter holds a clone of it). Without this, every distinct
    /// queue name ever pulled from would keep an entry for good.
    pub fn forget_queue_if_idle(&mut self, queue: &str) {
        let idle = self.queues.get(queue).is_some_and(QueueIndex::is_idle);
        if idle {
            self.queues.remove(queue);
        }
    }

    /// Wakes the long-polls of `queue`: a group control was lifted.
    pub fn wake(&self, queue: &str) {
        if let Some(q) = self.queues.get(queue) {
            q.notify.notify_waiters();
        }
    }

    /// Moves the due delayed jobs of `queue` to ready.
    pub fn promote(&mut self, queue: &str, now: f64) {
        let Some(q) = self.queues.get_mut(queue) else {
            return;
        };
        let mut woke = false;
        while let Some(id) = q.pop_due(now) {
            let Some(e) = self.map.get_mut(&id) else {
                continue;
            };
            e.rec.state = Stage::Waiting;
            q.file_ready(&e.rec);
            woke = true;
        }
        if woke {
            q.notify.notify_waiters();
        }
    }

    /// Notes that a job finished now (see [`RunInfo::finished`]).
    pub fn mark_finished(&mut self, id: &str, now: f64) {
        if let Some(e) = self.map.get_mut(id) {
            e.run.finished = Some((now, self.finish_seq));
            self.finish_seq += 1;
        }
    }

    /// Takes a waiting job out of its queue's ready index (to file it elsewhere).
    pub fn unready(&mut self, id: &str) {
        let Some(e) = self.map.get(id) else { return };
        if let Some(q) = self.queues.get_mut(&e.rec.queue) {
            q.unready(&e.rec);
        }
    }

    /// Takes a delayed job out of its queue's delayed index (to file it elsewhere).
    pub fn undelay(&mut self, id: &str) {
        let Some(e) = self.map.get(id) else { return };
        index_in(&mut self.queues, &e.rec.queue).undelay(&e.rec);
    }

    /// A uniform random number in [0, 1) (xorshift64*; only for retry jitter).
    pub fn random(&mut self) -> f64 {
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }

    pub fn note_stacktrace(&mut self, id: &str, stack: Option<&Value>) {
        let Some(e) = self.map.get_mut(id) else {
            return;
        };
        // A FAIL with at least one string line replaces the trace (with none if every line is
        // blank), as bunqueue's `failJob` does.
        let sent = stack
            .and_then(Value::as_array)
            .is_some_and(|l| l.iter().any(|x| x.as_str().is_some()));
        if sent {
            let limit = e.rec.options.as_ref().and_then(|o| o.stack_trace_limit);
            e.run.stacktrace = timeline::stacktrace(stack, limit);
        }
    }

    /// Update: replaces the data of a waiting, delayed or active job; false for a finished or
    /// unknown one (bunqueue's `Job not found or cannot be updated`). Persisted as the whole
    /// record, so a SQLite-backed broker keeps the change across a restart.
    pub fn update_data(&mut self, id: &str, data: Value) -> bool {
        let Some(e) = self.map.get_mut(id) else {
            return false;
        };
        if matches!(e.rec.state, Stage::Completed | Stage::Failed) {
            return false;
        }
        e.rec.data = data;
        let op = StoreOp::Put(Box::new(e.rec.clone()));
        self.record(op);
        true
    }

    /// Files a job taken out of the active set as waiting, its run time unchanged, recorded.
    pub fn refile_ready(&mut self, id: &str) {
        let Some(e) = self.map.get_mut(id) else {
            return;
        };
        e.rec.state = Stage::Waiting;
        let op = update_op(&e.rec);
        let q = index_in(&mut self.queues, &e.rec.queue);
        q.file_ready(&e.rec);
        q.notify.notify_waiters();
        self.record(op);
    }

    /// Files a failed job as delayed until its retry, after its backoff, recorded.
    pub fn file_retry(&mut self, id: &str, jitter: f64, now: f64) {
        let Some(e) = self.map.get_mut(id) else {
            return;
        };
        e.run.shown_started = None;
        let delay = retry_delay(e.rec.backoff, e.rec.attempts, jitter);
        e.rec.run_at = now + delay;
        e.rec.state = Stage::Delayed;
        let op = update_op(&e.rec);
        index_in(&mut self.queues, &e.rec.queue).file_delayed(&e.rec);
        self.record(op);
    }

    /// Shows `custom` as the record's `customId` (a flow's jobs have their planned id without
    /// one unless the input named it).
    pub fn show_custom_id(&mut self, id: &str, custom: Option<String>) {
        let Some(e) = self.map.get_mut(id) else {
            return;
        };
        let mut o = e.rec.options.take().map_or_else(Default::default, |o| *o);
        if o.custom_id == custom {
            e.rec.options = Some(Box::new(o)).filter(|o| !o.is_default());
            return;
        }
        o.custom_id = custom;
        e.rec.options = Some(Box::new(o)).filter(|o| !o.is_default());
        if self.journal.persistent() {
            let rec = e.rec.clone();
            self.record(StoreOp::Put(Box::new(rec)));
        }
    }

    /// How many state changes were handed to the store so far: the difference across a call
    /// is what a commit barrier for that call covers.
    pub fn recorded(&self) -> u64 {
        self.journal.recorded()
    }

    /// A commit barrier for durable replies covering the last `covering` recorded changes
    /// (see [`Store::sync`]).
    pub fn sync(&mut self, covering: u64) -> Option<SyncWaiter> {
        self.journal.sync(covering)
    }

    /// Ops recorded but not yet committed.
    pub fn backlog(&self) -> usize {
        self.journal.backlog()
    }

    /// Hands one change to the store, counting it (see [`Jobs::recorded`]).
    pub fn record(&mut self, op: StoreOp) {
        self.journal.record(op);
    }
}

/// What dropping a job leaves for the other owners: its queue, the unique key it held and
/// its place in the DLQ.
pub(crate) struct Removed {
    pub queue: String,
    pub unique_key: Option<String>,
    pub dlq: Option<u64>,
}

impl Jobs {
    /// Drops job `id`, counted out of its queue's finished jobs.
    pub fn remove(&mut self, id: &str) -> Option<Removed> {
        let e = self.map.remove(id)?;
        let mut dlq = None;
        if let Some(q) = self.queues.get_mut(&e.rec.queue) {
            match e.rec.state {
                Stage::Completed => q.completed = q.completed.saturating_sub(1),
                Stage::Failed => {
                    q.failed = q.failed.saturating_sub(1);
                    dlq = e.run.finished.map(|(_, n)| n);
                }
                _ => {}
            }
        }
        let rec = e.rec;
        Some(Removed {
            queue: rec.queue,
            unique_key: rec.unique_key,
            dlq,
        })
    }

    /// The next job's `seq`, counted as created.
    pub fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq - 1
    }

    /// Whether the store keeps jobs across a restart (full records are written then).
    pub fn persistent(&self) -> bool {
        self.journal.persistent()
    }

    /// Adds a new job to `queue`: recorded, filed by its state (in `waiting-children`,
    /// parked in `waits`, while dependencies it names have not completed), with its run
    /// settings and links. Returns its id and whether it is ready to run.
    pub fn add(
        &mut self,
        queue: &str,
        spec: JobSpec,
        now: f64,
        waits: &mut Waits,
    ) -> (String, bool) {
        let id = spec
            .opts
            .job_id
            .clone()
            .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
        let mut run = RunInfo::from_options(&spec.opts);
        let links = flow::Links::from_options(&spec.opts);
        let links = flow::Links {
            depends_on: self.unresolved(&links.depends_on),
            ..links
        };
        let parked = !links.depends_on.is_empty();
        let seq = self.next_seq();
        let rec = new_record(queue, id.clone(), spec, seq, parked, now);
        if self.persistent() {
            self.record(StoreOp::Put(Box::new(rec.clone())));
        }
        let first = match rec.state {
            Stage::WaitingChildren => "waiting-children",
            Stage::Delayed => "delayed",
            _ if rec.priority > 0.0 => "prioritized",
            _ => "waiting",
        };
        timeline::note(
            &mut run.timeline,
            timeline::Step {
                state: first,
                at: now,
                error: None,
                attempt: None,
            },
        );
        let ready = rec.state == Stage::Waiting;
        self.admit(rec);
        if parked {
            self.park(&id, queue, &links.depends_on, waits);
        }
        self.attach(&id, run, links);
        (id, ready)
    }

    /// Sets a new job's run settings and links.
    fn attach(&mut self, id: &str, run: RunInfo, links: flow::Links) {
        if let Some(e) = self.map.get_mut(id) {
            e.run = run;
            if !links.is_empty() {
                e.flow = Some(Box::new(links));
            }
        }
    }

    /// Queues with an index entry.
    #[cfg(feature = "test-util")]
    pub fn queue_count(&self) -> usize {
        self.queues.len()
    }

    /// Commits what is pending and closes the store.
    pub fn close(&mut self) {
        self.journal.close();
    }
}

/// The record of a job added now with `spec`: waiting, delayed, or in `waiting-children`
/// when `parked`.
pub(in crate::queue) fn new_record(
    queue: &str,
    id: String,
    spec: JobSpec,
    seq: u64,
    parked: bool,
    now: f64,
) -> JobRecord {
    let o = spec.opts;
    let delay = o.delay.map_or(0.0, |d| d.as_millis() as f64);
    let options = crate::store::AddOptions::from_options(&o);
    let options = (!options.is_default()).then(|| Box::new(options));
    JobRecord {
        id,
        queue: queue.to_owned(),
        name: spec.name,
        data: spec.data,
        priority: o.priority.unwrap_or(0) as f64,
        attempts: 0,
        max_attempts: o.attempts.unwrap_or(DEFAULT_ATTEMPTS),
        backoff: o.backoff,
        created_at: o.timestamp.unwrap_or(now),
        run_at: now + delay,
        seq,
        lifo: o.lifo.unwrap_or(false),
        remove_on_complete: o.remove_on_complete.unwrap_or(false),
        remove_on_fail: o.remove_on_fail.unwrap_or(false),
        durable: o.durable.unwrap_or(false),
        unique_key: o.unique_key,
        state: if parked {
            Stage::WaitingChildren
        } else if delay > 0.0 {
            Stage::Delayed
        } else {
            Stage::Waiting
        },
        result: None,
        failed_reason: None,
        options,
    }
}

/// The index of `queue` in `queues`, made empty if it has none yet.
pub(in crate::queue) fn index_in<'a>(
    queues: &'a mut HashMap<String, QueueIndex>,
    queue: &str,
) -> &'a mut QueueIndex {
    if !queues.contains_key(queue) {
        queues.insert(queue.to_owned(), QueueIndex::default());
    }
    queues.get_mut(queue).expect("inserted above")
}

pub(in crate::queue) fn update_op(rec: &JobRecord) -> StoreOp {
    StoreOp::Update {
        id: rec.id.clone(),
        state: rec.state,
        attempts: rec.attempts,
        run_at: rec.run_at,
        result: rec.result.clone(),
        failed_reason: rec.failed_reason.clone(),
    }
}

pub(in crate::queue) fn state_name(rec: &JobRecord) -> &'static str {
    match rec.state {
        Stage::Waiting if rec.priority > 0.0 => "prioritized",
        s => s.as_str(),
    }
}

#[cfg(test)]
pub(in crate::queue) fn wire_job(rec: &JobRecord) -> Job {
    let mut job = Job::new(
        rec.id.clone(),
        rec.queue.clone(),
        rec.name.clone(),
        rec.data.clone(),
    );
    job.priority = rec.priority;
    job.attempts = rec.attempts;
    job.max_attempts = rec.max_attempts;
    job.created_at = rec.created_at;
    job.run_at = rec.run_at;
    job
}

/// bunqueue's retry delay: a plain or exponential base doubles per attempt with a 0.5..1.5
/// jitter, a fixed one gets 0.8..1.2; capped at one hour.
pub(in crate::queue) fn ms(d: Duration) -> f64 {
    d.as_millis() as f64
}

pub(in crate::queue) fn retry_delay(backoff: Option<Backoff>, attempts: i64, jitter: f64) -> f64 {
    let pow = 2f64.powi(attempts.clamp(0, 40) as i32);
    let d = match backoff.unwrap_or(Backoff::Delay(DEFAULT_BACKOFF)) {
        Backoff::Delay(b) | Backoff::Exponential(b) => ms(b) * pow * (0.5 + jitter),
        Backoff::Fixed(b) => ms(b) * (0.8 + 0.4 * jitter),
        // A strategy a newer core may add: as bunqueue's default.
        other => ms(other.delay()) * pow * (0.5 + jitter),
    };
    d.clamp(0.0, MAX_RETRY_DELAY)
}

/// Copies a job's links onto its wire form (`parentId`, `childrenIds`).
#[cfg(test)]
pub(in crate::queue) fn wire_links(job: &mut Job, e: &Entry) {
    if let Some(l) = &e.flow {
        job.parent_id = l.parent.clone();
        job.children_ids = l.children.clone();
    }
}
