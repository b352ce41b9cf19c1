//! The jobs: every job's record and run, each queue's index of its jobs by state, and the job
//! store they are written to (see `journal`). [`Jobs`] files, moves and looks up jobs; what a
//! move means to another concern (a DLQ entry, a flow's waits, an event) is the caller's.

use std::collections::HashMap;
use std::time::Duration;

#[cfg(test)]
use autobatch_core::wire::Job;
use autobatch_core::wire::{Backoff, JobOptions, JobSpec};

use super::flow;
use super::index::QueueIndex;
use super::journal::Journal;
use super::timeline;
use crate::conn_id::ConnId;
use crate::store::{JobRecord, JobState, Store, StoreOp};

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
    /// Its `groupId`, for a group's `maxSize` (see [`State::group_queued`]).
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
    pub(in crate::queue) map: HashMap<String, Box<Entry>>,
    pub(in crate::queue) queues: HashMap<String, QueueIndex>,
    /// Jobs created so far: the next job's `seq`.
    pub(in crate::queue) seq: u64,
    /// Jobs finished so far, numbering [`RunInfo::finished`].
    pub(in crate::queue) finish_seq: u64,
    /// The retry jitter's generator state (see [`Jobs::random`]).
    pub(in crate::queue) rng: u64,
    /// The job store, fed every change (see `journal`).
    pub(in crate::queue) journal: Journal,
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
        priority: o.priority.unwrap_or(0),
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
            JobState::WaitingChildren
        } else if delay > 0.0 {
            JobState::Delayed
        } else {
            JobState::Waiting
        },
        result: None,
        failed_reason: None,
        options,
    }
}

/// The index of `queue` in `queues`, made empty if it has none yet.
pub(in crate::queue) fn index_in<'a>(queues: &'a mut HashMap<String, QueueIndex>, queue: &str) -> &'a mut QueueIndex {
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
        JobState::Waiting if rec.priority > 0 => "prioritized",
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

