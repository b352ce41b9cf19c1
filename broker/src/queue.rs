//! The broker's queue state machine: every job, its state, the per-queue ready and delayed
//! indexes, locks, and which connection holds which job. Pure and synchronous: every call that
//! depends on time takes `now` (epoch ms); persistence goes through the [`Store`] it owns.
//!
//! [`State`] composes the owners of the concerns, each a struct with its own fields and
//! methods that names nothing of `State`: the jobs, their queues' indexes and their store
//! ([`Jobs`], in `jobs`: a job's runs, control, flow links, DLQ entry and kept extras on its
//! record), unique keys (`unique`), the running jobs (`running`), stall detection (`stalls`),
//! limits (`limits`), flows' waits (`flow::Waits`), the DLQ (`dlq`), the job schedulers
//! (`cron`), totals (`totals`), progress and logs (`progress`), workers (`workers`) and SQLite
//! mode's settings writer (`settings`). An owner that needs something of another concern takes
//! it as an argument or a lookup, or returns what the caller must do (`cron::Effect`, a
//! parent's `ParentEffect`, the jobs a pull took or expired, evicted DLQ ids, a slot freed).
//!
//! `State`'s own methods only compose: here a job's lifecycle (push, pull, ACK, FAIL, the
//! sweep of running jobs), in `moves` the commands that move jobs across concerns (control,
//! the DLQ, flows), and in `compose` the requests routed to one owner and the settings kept.

use autobatch_core::ops::ChildFailure;
#[cfg(test)]
use autobatch_core::wire::Job;
use autobatch_core::wire::{JobOptions, JobSpec, Value};

use crate::conn_id::ConnId;
use crate::events::{job_event, Events};
use crate::store::{JobRecord, Stage, Store, StoreOp};
pub(crate) use failure::Failure;
use jobs::{update_op, Entry, Jobs};
pub(crate) use jobs::{CleanState, FinishError, MoveError, PullSpec, DEFAULT_LOCK_TTL};
pub(crate) use workers::Worker;

/// The [`State`] methods that route a request to the owner of its concern.
mod compose;
/// Job schedulers.
pub(crate) mod cron;
/// The dead-letter queue: which jobs each queue's DLQ holds, and its settings.
pub(crate) mod dlq;
/// A queue's DLQ settings (SetDlqConfig).
pub(crate) mod dlq_config;
/// How a job fails (see [`State::fail`]).
pub(crate) mod failure;
/// Flows and dependencies: `waiting-children`, parents released or failed by their children.
pub(crate) mod flow;
/// A queue's jobs by state: ready, delayed, counted.
pub(crate) mod index;
/// The jobs, their indexes and their store.
pub(crate) mod jobs;
/// The job store as the state feeds it.
pub(crate) mod journal;
/// Settings kept across a restart in SQLite mode.
pub(crate) mod kept;
/// Rate and concurrency limits: the state behind `crate::ops::limits`, checked by pulls.
pub(crate) mod limits;
/// The commands that move jobs across concerns (cancel, drain, obliterate, clean, …).
mod moves;
/// A job's progress and log lines.
pub(crate) mod progress;
/// The jobs handed out and not yet finished.
pub(crate) mod running;
/// Where SQLite mode writes what `kept` keeps.
pub(crate) mod settings;
/// Stall settings and detection state.
pub(crate) mod stalls;
/// A job's history: timeline steps, failed attempts, stack trace.
pub(crate) mod timeline;
/// Server-wide totals and per-queue finish counts: what Stats and Metrics read.
pub(crate) mod totals;
/// Unique keys and their holders.
pub(crate) mod unique;
/// A job's whole record as bunqueue shows it (GetJob and the other replies carrying jobs).
pub(crate) mod view;
/// Registered workers (RegisterWorker, ListWorkers).
pub(crate) mod workers;

/// One pulled job and its lock token (when pulled with an owner).
pub(crate) struct Pulled {
    /// The job's id (the record holds it too; the tests read it here).
    #[cfg_attr(not(test), allow(dead_code))]
    pub id: String,
    /// Its whole record (see `view`).
    pub job: Value,
    pub token: Option<String>,
}

/// The whole queue state.
pub(crate) struct State {
    /// The jobs, the queues' indexes of them, and the store they are written to (see `jobs`).
    jobs: Jobs,
    /// Which job holds each unique key (see `unique`).
    unique: unique::UniqueKeys,
    /// Registered workers (see `workers`).
    workers: workers::Workers,
    /// Progress and log lines, kept in memory only (see `progress`).
    extras: progress::Progress,
    /// Event subscriptions: state changes are published under the state's lock, so every
    /// subscriber sees them in order.
    pub events: Events,
    /// The jobs handed out and not yet finished, by connection too (see `running`).
    running: running::Running,
    /// Stall settings and detection (see `stalls`).
    stalls: stalls::Stalls,
    /// Rate and concurrency limits per queue (see `limits`).
    limits: limits::Limits,
    /// Who waits for which job (see `flow`).
    waits: flow::Waits,
    /// Job schedulers (see `cron`).
    crons: cron::Crons,
    /// Jobs pushed, pulled and finished so far (see `totals`).
    totals: totals::Totals,
    /// The dead-letter queue: its entries and settings (see `dlq`).
    dlq: dlq::Dlq,
    /// Where settings and job extras are kept across a restart (SQLite mode; see `kept`).
    settings: settings::Settings,
}

impl State {
    /// A state fed by `store`, with the jobs it recovered: waiting and delayed jobs wait again,
    /// active ones go back to waiting.
    pub fn new(mut store: Box<dyn Store>, now: f64) -> std::io::Result<State> {
        let recovered = store.recover()?;
        let mut s = State {
            jobs: Jobs::new(store, now),
            unique: unique::UniqueKeys::default(),
            workers: workers::Workers::default(),
            extras: progress::Progress::default(),
            events: Events::default(),
            running: running::Running::default(),
            stalls: stalls::Stalls::new(now),
            limits: limits::Limits::default(),
            waits: flow::Waits::default(),
            crons: cron::Crons::default(),
            totals: totals::Totals::new(now),
            dlq: dlq::Dlq::default(),
            settings: settings::Settings::default(),
        };
        for mut rec in recovered {
            // A job that waited for its children waits no more until its links are put back
            // (`kept`, SQLite mode), which parks it again; without them nothing would ever
            // release it.
            if matches!(rec.state, Stage::Active | Stage::WaitingChildren) {
                rec.state = Stage::Waiting;
                s.jobs.record(update_op(&rec));
            }
            s.admit(rec);
        }
        s.jobs.order_lanes_as_recovered();
        Ok(s)
    }

    /// Files a record under its queue and state, and keeps it (see [`Jobs::admit`]).
    fn admit(&mut self, rec: JobRecord) {
        if let Some(k) = &rec.unique_key {
            self.unique.hold(&rec.queue, k, &rec.id);
        }
        let id = (rec.state == Stage::Failed).then(|| rec.id.clone());
        if let (Some((queue, seq)), Some(id)) = (self.jobs.admit(rec), id) {
            self.dlq.file(&queue, seq, &id);
        }
    }

    /// The counts of every queue now (see [`Jobs::gauges`]).
    pub fn gauges(&mut self, now: f64) -> totals::Gauges {
        let dlq = &self.dlq;
        self.jobs.gauges(now, |queue| dlq.len(queue) as u64)
    }

    /// Adds one validated job to `queue` (see [`Jobs::add`]): its unique key held, kept,
    /// announced (`pushed`, delayed ones included) and counted. Returns its id: the existing
    /// one when its custom id or unique key is live (nothing is added then).
    pub fn push(&mut self, queue: &str, spec: JobSpec, now: f64) -> String {
        if let Some(id) = self.live_duplicate(queue, &spec.opts) {
            return id;
        }
        let (id, ready) = self.jobs.add(queue, spec, now, &mut self.waits);
        if let Some((queue, key)) = self.jobs.unique_key(&id) {
            self.unique.hold(queue, key, &id);
        }
        if self.settings.is_on() {
            self.keep_job(&id);
        }
        if ready {
            self.jobs.wake(queue);
        }
        self.events.emit(queue, "pushed", job_event(queue, &id));
        self.totals.pushed();
        id
    }

    /// The live job a push with options `o` would duplicate, if any: a live custom id, or a
    /// live job holding its unique key (bunqueue's `duplicated` event then). A finished custom
    /// id is dropped, so the push starts a new generation of it.
    fn live_duplicate(&mut self, queue: &str, o: &JobOptions) -> Option<String> {
        if let Some(id) = &o.job_id {
            if let Some(state) = self.jobs.state_of(id) {
                if state.is_live() {
                    return Some(id.clone());
                }
                self.forget(id);
            }
        }
        let k = o.unique_key.as_ref()?;
        let id = self.unique.holder(queue, k)?;
        if !self.jobs.is_live(id) {
            return None;
        }
        // 2.9.5 (`pushDeduplication`): `duplicated`, with the live job's id. A live custom id
        // returns its job silently, as there.
        self.events.emit(queue, "duplicated", job_event(queue, id));
        Some(id.clone())
    }

    /// Drops a finished job entirely (a new generation of its custom id, or remove-on-finish).
    fn forget(&mut self, id: &str) {
        // A parked job has its dependencies indexed: with none indexed (the common case),
        // nothing is parked and `id` need not be looked up.
        if self.waits.has_dependents() {
            self.jobs.unpark(id, &mut self.waits);
        }
        if self.settings.has_jobs() {
            self.forget_kept_job(id);
        }
        let Some(gone) = self.jobs.remove(id) else {
            return;
        };
        self.extras.remove(id);
        if let Some(n) = gone.dlq {
            self.dlq.remove(&gone.queue, n);
        }
        if let Some(k) = &gone.unique_key {
            self.unique.release(&gone.queue, k, id);
        }
        self.jobs.forget_queue_if_idle(&gone.queue);
    }

    /// Takes up to `spec.count` ready jobs, highest priority first, FIFO within a priority.
    #[cfg(test)]
    pub fn pull(&mut self, spec: &PullSpec<'_>, now: f64) -> Vec<Pulled> {
        self.pull_in_groups(spec, None, now)
    }

    /// [`pull`](Self::pull) with the pull's group defaults (see [`Jobs::pull`]): the jobs
    /// handed out are tied to the pull's connection and announced (`pulled`), the expired
    /// ones dropped.
    pub fn pull_in_groups(
        &mut self,
        spec: &PullSpec<'_>,
        group: Option<&limits::groups::PullGroup>,
        now: f64,
    ) -> Vec<Pulled> {
        let taken = self.jobs.pull(spec, group, &mut self.limits, now);
        for id in taken.expired {
            self.forget(&id);
            self.jobs.record(StoreOp::Remove(id));
        }
        let mut out = Vec::with_capacity(taken.handed.len());
        for (id, token) in taken.handed {
            self.running.started(&id, spec.tie_to);
            let job = self.job_record(&id).unwrap_or(Value::Nil);
            self.events
                .emit(spec.queue, "pulled", job_event(spec.queue, &id));
            self.totals.pulled();
            out.push(Pulled { id, job, token });
        }
        out
    }

    /// Takes an active job out of its run (after its lock was checked) and out of the
    /// running jobs, its concurrency slot freed.
    fn finish(&mut self, id: &str) -> Result<(), FinishError> {
        let conn = self.jobs.finish(id)?;
        self.running.ended(id, conn);
        // A freed concurrency slot wakes the long-polls it held back, as bunqueue's
        // finishing paths notify the queue.
        self.release_slot_of(id);
        Ok(())
    }

    /// Completes an active job.
    pub fn ack(
        &mut self,
        id: &str,
        token: Option<&str>,
        result: Option<Value>,
        remove: bool,
        now: f64,
    ) -> Result<(), FinishError> {
        self.jobs.check_lock(id, token)?;
        let late = self.jobs.retried_in_queue(id);
        if late {
            // bunqueue completes a job that failed and waits for its retry when an ACK for it
            // arrives late (its "stall-retried" path), whatever the token.
            self.unfile(id, None)
                .map_err(|_| FinishError::NotActive(id.to_owned()))?;
            // bunqueue releases the job's resources on this path too, its concurrency slot
            // included (a second release for the job: another job's slot, down to 0).
            self.release_slot_of(id);
        } else {
            let started = self.jobs.started_at(id);
            self.finish(id)?;
            self.jobs.show_started(id, started);
        }
        self.jobs.mark_finished(id, now);
        let (queue, remove_on_complete, op) = self.jobs.complete(id, result, late, now);
        let remove = remove || remove_on_complete;
        if self.events.wants(&queue) {
            // `data`: the return value (msgpackr's undefined when the ACK carried none).
            let data = self.jobs.get_result(id);
            self.events.emit(&queue, "completed", |ts| {
                let mut f = job_event(&queue, id)(ts);
                f.push(("data", data.unwrap_or(Value::Undefined)));
                f
            });
        } else {
            self.events.note(&queue);
        }
        self.totals.finished(&queue, false, now);
        // Before `retire`: a removed job still releases the jobs waiting for it.
        self.on_completed(id, remove, now);
        self.retire(id, remove, op);
        Ok(())
    }

    /// Fails an active job: back to delayed with a backoff while attempts remain, else failed.
    /// `Ok(false)`: not applied, as bunqueue answers a FAIL with a token for a job that already
    /// failed and waits for its retry (`already-finalized`).
    pub fn fail(
        &mut self,
        id: &str,
        token: Option<&str>,
        how: Failure,
        now: f64,
    ) -> Result<bool, FinishError> {
        let had_lock = self.jobs.has_lock(id);
        self.jobs.check_lock(id, token)?;
        if token.is_some_and(|t| !t.is_empty()) && !had_lock && self.jobs.retried_in_queue(id) {
            return Ok(false);
        }
        let jitter = self.jobs.random();
        let (queue, retry) = self.note_failure(id, &how, now)?;
        // What the `failed` event carries, copied only when someone listens.
        let event = if self.events.wants(&queue) {
            self.jobs.failure_of(id)
        } else {
            None
        };
        let policy = if retry {
            self.jobs.file_retry(id, jitter, now);
            None
        } else {
            self.fail_for_good(id, &how, now)
        };
        self.emit_failed(&queue, id, event, retry);
        // bunqueue applies the parent policy after the child's own events.
        if let Some(p) = policy {
            self.apply_policy(id, &queue, p, now);
        }
        Ok(true)
    }

    /// Takes a failing job out of its run and writes the failure into its record and
    /// timeline (see [`Jobs::note_failure`]). Returns its queue and whether it will be
    /// retried.
    fn note_failure(
        &mut self,
        id: &str,
        how: &Failure,
        now: f64,
    ) -> Result<(String, bool), FinishError> {
        let started = self.jobs.started_at(id);
        self.finish(id)?;
        self.jobs
            .note_failure(id, how, started, now)
            .ok_or_else(|| FinishError::NotActive(id.to_owned()))
    }

    /// Fails a job for good: into the DLQ, then kept or dropped. Returns the failure policy
    /// its parent applies, if any (see [`State::on_failed`]).
    fn fail_for_good(
        &mut self,
        id: &str,
        how: &Failure,
        now: f64,
    ) -> Option<(String, ChildFailure, String)> {
        let (remove, op, error) = self.jobs.fail_for_good(id, how.remove)?;
        // Read before `retire`, which may drop the job and its links.
        let policy = self.on_failed(id, error.as_deref());
        self.enter_dlq(id, now, how.dlq_reason(), error);
        self.retire(id, remove, op);
        policy
    }

    /// bunqueue's `failed` event (terminal or not), then `retried` when the job runs again.
    /// `event`: the error and data it carries, when someone listens.
    fn emit_failed(
        &self,
        queue: &str,
        id: &str,
        event: Option<(Option<String>, Value)>,
        retry: bool,
    ) {
        let Some((error, data)) = event else {
            self.events.note(queue);
            if retry {
                self.events.note(queue);
            }
            return;
        };
        self.events.emit(queue, "failed", |ts| {
            let mut f = job_event(queue, id)(ts);
            f.extend([
                ("error", error.map_or(Value::Undefined, Value::from)),
                ("data", data),
                ("terminal", Value::from(!retry)),
            ]);
            f
        });
        if retry {
            self.events.emit(queue, "retried", |ts| {
                let mut f = job_event(queue, id)(ts);
                f.push(("prev", Value::from("failed")));
                f
            });
        }
    }

    /// A finished job either leaves for good (`removeOnComplete` / `removeOnFail`) or is
    /// persisted in its final state.
    fn retire(&mut self, id: &str, remove: bool, final_state: StoreOp) {
        if remove {
            self.forget(id);
            self.jobs.record(StoreOp::Remove(id.to_owned()));
        } else {
            self.jobs.record(final_state);
        }
    }

    /// The periodic housekeeping of running jobs: timeouts every call; stall detection, then
    /// expired locks, every [`stalls::STALL_CHECK_MS`] (bunqueue runs both on its `stallCheckMs`
    /// interval, in that order).
    pub fn sweep(&mut self, now: f64) {
        // Timeouts first: bunqueue fails a job on a timer at its deadline, while it looks for
        // expired locks only every 5 s, so a late sweep must not let the lock win.
        self.expire_timeouts(now);
        if self.stalls.check_due(now) {
            self.check_stalled(now);
            // Checking locks more often than bunqueue would take back, from a worker whose
            // heartbeat runs a little late, a job bunqueue lets it keep.
            self.expire_locks(now);
        }
    }

    /// Active jobs whose lock expired, as bunqueue's `processExpiredLockInner`: one more
    /// attempt and one more stall counted; back to waiting (its run time unchanged) with a
    /// `stalled` event, or, past the attempts or the queue's `maxStalls`, failed for good
    /// with `stalled` (action `move_to_dlq`) and `failed` events.
    pub fn expire_locks(&mut self, now: f64) {
        // Obliterate drops running jobs without finishing them: forget those here.
        let jobs = &self.jobs;
        self.running
            .retain(|id| jobs.state_of(id) == Some(Stage::Active));
        for id in self.jobs.locks_expired(self.running.ids(), now) {
            self.expire_lock(&id, now);
        }
    }

    /// One job whose lock expired (see [`expire_locks`](Self::expire_locks)).
    fn expire_lock(&mut self, id: &str, now: f64) {
        let Some(queue) = self.jobs.queue_of(id).map(str::to_owned) else {
            return;
        };
        let max_stalls = self.stall_config(&queue).max_stalls;
        let renewals = self.jobs.renewals(id);
        if self.finish(id).is_err() {
            return;
        }
        let Some(s) = self.jobs.count_stall(id, now) else {
            return;
        };
        let max = s.max_attempts;
        let attempts_exhausted = s.attempts >= max;
        let for_good = attempts_exhausted || (max_stalls > 0 && s.stalls >= max_stalls);
        if !for_good {
            self.jobs.requeue_expired(id, now);
            self.emit_stalled(&queue, id, None, true);
            return;
        }
        let (reason, error, event_error) = if attempts_exhausted {
            (
                "max_attempts_exceeded",
                format!("Lock expired at max attempts ({max})"),
                "Lock expired (max attempts reached)",
            )
        } else {
            (
                "stalled",
                format!("Lock expired after {renewals} renewals"),
                "Lock expired (max stalls reached)",
            )
        };
        self.file_failed(id, now, reason, error);
        self.emit_stalled(&queue, id, Some((s.stalls, "move_to_dlq")), true);
        self.events.emit(&queue, "failed", |ts| {
            vec![
                ("jobId", Value::from(id)),
                ("queue", Value::from(queue.as_str())),
                ("timestamp", Value::F64(ts)),
                ("error", Value::from(event_error)),
            ]
        });
    }

    /// Running jobs past their `timeout` fail as a FAIL with bunqueue's `Job timeout exceeded`
    /// would fail them (retried while attempts remain), earliest deadline first.
    pub fn expire_timeouts(&mut self, now: f64) {
        for (id, token) in self.jobs.timed_out(self.running.ids(), now) {
            tracing::info!(job = id.as_str(), "job timed out");
            // Its own lock's token: the broker fails it, not a worker.
            let _ = self.fail(&id, token.as_deref(), Failure::timeout(), now);
        }
    }

    /// bunqueue's `checkStalledJobs`: a running job that has not been heard from (pull,
    /// heartbeat) for longer than its `stallTimeout` or the queue's `stallInterval`, past the
    /// grace period after it started, is a candidate; still one at the next check, it has
    /// stalled: one more attempt and stall, then a retry after its backoff (`stalled`, action
    /// `retry`), or, at the queue's `maxStalls` or the last attempt, failed for good
    /// (`stalled`, action `move_to_dlq`). Queues with detection disabled are skipped.
    pub fn check_stalled(&mut self, now: f64) {
        let candidates = self.stalls.take_candidates();
        let (jobs, stalls) = (&self.jobs, &self.stalls);
        let stalled = |id: &str| jobs.stalled(id, now, |q| stalls.config(q));
        let mut confirmed: Vec<(String, bool)> = candidates
            .iter()
            .filter_map(|id| stalled(id).map(|dlq| (id.clone(), dlq)))
            .collect();
        // By id (roughly pull order), not the set's order.
        confirmed.sort();
        let next = self
            .running
            .ids()
            .filter(|id| stalled(id).is_some())
            .cloned()
            .collect();
        self.stalls.set_candidates(next);
        for (id, max_stalls) in confirmed {
            self.stall(&id, max_stalls, now);
        }
    }

    /// One job confirmed stalled (see [`check_stalled`](Self::check_stalled)); `max_stalls`:
    /// this stall reaches the queue's `maxStalls`.
    fn stall(&mut self, id: &str, max_stalls: bool, now: f64) {
        let Some(queue) = self.jobs.queue_of(id).map(str::to_owned) else {
            return;
        };
        let jitter = self.jobs.random();
        if self.finish(id).is_err() {
            return;
        }
        let Some(s) = self.jobs.count_stall(id, now) else {
            return;
        };
        let exhausted = s.attempts >= s.max_attempts;
        if !(max_stalls || exhausted) {
            if let Some(stalls) = self.jobs.retry_stalled(id, jitter, now) {
                self.emit_stalled(&queue, id, Some((stalls, "retry")), false);
            }
            return;
        }
        let (reason, error) = if exhausted {
            let max = s.max_attempts;
            (
                "max_attempts_exceeded",
                format!("Job stalled at max attempts ({max})"),
            )
        } else {
            ("stalled", format!("Job stalled {} times", s.stalls))
        };
        self.file_failed(id, now, reason, error);
        self.emit_stalled(&queue, id, Some((s.stalls, "move_to_dlq")), false);
    }

    /// bunqueue's `stalled` event; `id_first` for the lock-expiry path's key order.
    fn emit_stalled(&self, queue: &str, id: &str, data: Option<(u64, &str)>, id_first: bool) {
        let (stalls, action) = data.unwrap_or((0, "retry"));
        let why = if id_first {
            "lock expired"
        } else {
            "no heartbeat"
        };
        tracing::info!(queue, job = id, stalls, action, why, "job stalled");
        self.events.emit(queue, "stalled", |ts| {
            let (q, j) = (("queue", Value::from(queue)), ("jobId", Value::from(id)));
            let mut f = if id_first { vec![j, q] } else { vec![q, j] };
            f.push(("timestamp", Value::F64(ts)));
            if let Some((count, action)) = data {
                f.push((
                    "data",
                    Value::map([
                        ("stallCount", Value::from(count as i64)),
                        ("action", Value::from(action)),
                    ]),
                ));
            }
            f
        });
    }

    /// Files a job taken out of its run as failed for good (bunqueue's DLQ), recorded.
    fn file_failed(&mut self, id: &str, now: f64, reason: &'static str, error: String) {
        let Some(op) = self.jobs.mark_failed(id) else {
            return;
        };
        self.enter_dlq(id, now, reason, Some(error));
        self.jobs.record(op);
    }

    /// Puts an active job back to waiting.
    fn requeue(&mut self, id: &str) {
        if self.finish(id).is_ok() {
            self.jobs.refile_ready(id);
        }
    }

    /// A connection closed: its jobs go back to waiting, its workers are unregistered.
    pub fn release_conn(&mut self, conn: ConnId) {
        self.events.unsubscribe(conn);
        if let Some(ids) = self.running.take_held(conn) {
            for id in ids {
                if self.jobs.held_by(&id, conn) {
                    self.requeue(&id);
                }
            }
        }
        self.workers.drop_conn(conn);
    }

    /// A job in the client's record form ([`Job`]), for the tests.
    #[cfg(test)]
    pub fn get_job_wire(&mut self, id: &str, now: f64) -> Option<Job> {
        let mut job = self.jobs.wire(id, now)?;
        // bunqueue's record carries the last progress (0 until a worker reports one).
        let progress = self.extras.get(id).map_or(0.0, |x| x.progress);
        job.progress = Some(crate::events::js_number(progress));
        Some(job)
    }

    /// Keeps the stack a FAIL sent for a job (trimmed and capped at its `stackTraceLimit`),
    /// as bunqueue's record shows it; a FAIL without one leaves the last one. Called after
    /// every applied FAIL, so SQLite mode keeps the job's failure history from here.
    pub fn set_stacktrace(&mut self, id: &str, stack: Option<&Value>) {
        self.jobs.note_stacktrace(id, stack);
        if self.settings.is_on() {
            self.keep_job(id);
        }
    }

    /// Takes back jobs whose rows a failed commit lost, so that a refused durable push leaves
    /// nothing behind. Only jobs still waiting or delayed are taken back; one that a worker
    /// already pulled stays (its id is returned) and runs from memory.
    pub fn withdraw(&mut self, ids: &[String]) -> Vec<String> {
        let mut kept = Vec::new();
        for id in ids {
            match self.jobs.state_of(id) {
                None => continue,
                Some(Stage::Waiting | Stage::Delayed | Stage::WaitingChildren) => {
                    if self.jobs.unqueue(id) {
                        self.forget(id);
                    }
                }
                Some(_) => kept.push(id.clone()),
            }
        }
        kept
    }

    /// Queues with an index entry.
    #[cfg(feature = "test-util")]
    pub fn queue_count(&self) -> usize {
        self.jobs.queue_count()
    }

    /// Commits what is pending and closes the store.
    pub fn close_store(&mut self) {
        self.jobs.close();
        self.settings.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryStore;
    use autobatch_core::ops::StallConfigUpdate;
    use autobatch_core::wire::JobOptions;
    use autobatch_core::wire::{Backoff, JobCounts};
    use jobs::{retry_delay, MAX_RETRY_DELAY};
    use std::time::Duration;

    fn state() -> State {
        State::new(Box::new(MemoryStore::new()), 1000.0).unwrap()
    }

    fn pull(s: &mut State, n: usize, now: f64) -> Vec<Pulled> {
        s.pull(
            &PullSpec {
                queue: "q",
                count: n,
                locked: true,
                lock_ttl: 30_000,
                tie_to: Some(1),
            },
            now,
        )
    }

    #[test]
    fn priority_then_fifo_then_lifo() {
        let mut s = state();
        let a = s.push("q", JobSpec::new("a", Value::Nil), 0.0);
        let b = s.push(
            "q",
            JobSpec::new("b", Value::Nil).with_options(JobOptions::new().priority(5)),
            0.0,
        );
        let c = s.push("q", JobSpec::new("c", Value::Nil), 0.0);
        let d = s.push(
            "q",
            JobSpec::new("d", Value::Nil).with_options(JobOptions::new().lifo(true)),
            0.0,
        );
        let got: Vec<String> = pull(&mut s, 10, 0.0).into_iter().map(|p| p.id).collect();
        assert_eq!(got, [b, d, a, c]);
    }

    #[test]
    fn delayed_jobs_become_due() {
        let mut s = state();
        s.push(
            "q",
            JobSpec::new("a", Value::Nil)
                .with_options(JobOptions::new().delay(Duration::from_millis(100))),
            0.0,
        );
        assert!(pull(&mut s, 1, 50.0).is_empty());
        assert_eq!(s.jobs.counts("q", 50.0).delayed, 1);
        assert_eq!(s.jobs.next_due("q"), Some(100.0));
        assert_eq!(pull(&mut s, 1, 100.0).len(), 1);
    }

    /// bunqueue 2.9.5, seen by tests/tests/differential.rs: a job that failed and waits for
    /// its retry is completed by a late ACK, and a second FAIL with the old token is not
    /// applied (`already-finalized`) rather than refused.
    #[test]
    fn late_outcomes_of_a_retried_job() {
        let mut s = state();
        let spec = || JobSpec::new("a", Value::Nil).with_options(JobOptions::new().attempts(3));
        let id = s.push("q", spec(), 0.0);
        let t = pull(&mut s, 1, 0.0).remove(0).token;
        assert_eq!(s.fail(&id, t.as_deref(), Failure::new(None), 0.0), Ok(true));
        assert_eq!(
            s.fail(
                &id,
                t.as_deref(),
                Failure::new(None).unrecoverable(true),
                0.0
            ),
            Ok(false)
        );
        assert_eq!(s.jobs.get_state(&id, 0.0), "delayed");
        assert_eq!(s.ack(&id, None, Some(Value::Int(7)), false, 0.0), Ok(()));
        assert_eq!(s.jobs.get_state(&id, 0.0), "completed");
        assert_eq!(s.jobs.get_result(&id), Some(Value::Int(7)));
        assert_eq!(s.jobs.counts("q", 0.0).delayed, 0);
        // A job that never ran is not completed by an ACK.
        let fresh = s.push("q", spec(), 0.0);
        assert!(s.ack(&fresh, None, None, false, 0.0).is_err());
    }

    /// A promoted job queues behind the jobs already due (its run time becomes now).
    #[test]
    fn promoted_job_queues_behind_due_jobs() {
        let mut s = state();
        let later = JobOptions::new().delay(Duration::from_secs(3600));
        let d = s.push("q", JobSpec::new("d", Value::Nil).with_options(later), 0.0);
        let a = s.push("q", JobSpec::new("a", Value::Nil), 1.0);
        assert!(s.jobs.promote_job(&d, 5.0));
        let b = s.push("q", JobSpec::new("b", Value::Nil), 9.0);
        let got: Vec<String> = pull(&mut s, 3, 10.0).into_iter().map(|p| p.id).collect();
        assert_eq!(got, [a, d, b]);
    }

    #[test]
    fn fail_retries_then_fails() {
        let mut s = state();
        let id = s.push(
            "q",
            JobSpec::new("a", Value::Nil).with_options(
                JobOptions::new()
                    .attempts(2)
                    .backoff(Backoff::Fixed(Duration::from_millis(10))),
            ),
            0.0,
        );
        let t = pull(&mut s, 1, 0.0).remove(0).token;
        s.fail(&id, t.as_deref(), Failure::new(Some("x".into())), 0.0)
            .unwrap();
        assert_eq!(s.jobs.get_state(&id, 0.0), "delayed");
        let t = pull(&mut s, 1, 20.0).remove(0).token;
        s.fail(&id, t.as_deref(), Failure::new(Some("y".into())), 20.0)
            .unwrap();
        assert_eq!(s.jobs.get_state(&id, 20.0), "failed");
        assert_eq!(s.jobs.counts("q", 20.0).failed, 1);
    }

    #[test]
    fn release_returns_jobs_to_waiting() {
        let mut s = state();
        let id = s.push("q", JobSpec::new("a", Value::Nil), 0.0);
        let t = pull(&mut s, 1, 0.0).remove(0).token;
        s.release_conn(1);
        assert_eq!(s.jobs.get_state(&id, 0.0), "waiting");
        assert_eq!(
            s.ack(&id, t.as_deref(), None, false, 0.0),
            Err(FinishError::NotActive(id.clone()))
        );
    }

    fn pull_ttl(s: &mut State, locked: bool, ttl: i64, now: f64) -> Pulled {
        s.pull(
            &PullSpec {
                queue: "q",
                count: 1,
                locked,
                lock_ttl: ttl,
                tie_to: Some(1),
            },
            now,
        )
        .remove(0)
    }

    fn push_attempts(s: &mut State, attempts: i64) -> String {
        s.push(
            "q",
            JobSpec::new("a", Value::Nil).with_options(JobOptions::new().attempts(attempts)),
            0.0,
        )
    }

    /// The lock lasts the pull's lockTtl, a heartbeat with the token renews it by that ttl
    /// (bunqueue's `renewLock` without a duration), and an expired lock requeues the job with
    /// one attempt counted.
    #[test]
    fn lock_lasts_the_pull_ttl_and_heartbeats_renew_by_it() {
        let mut s = state();
        let id = push_attempts(&mut s, 3);
        let t = pull_ttl(&mut s, true, 100, 0.0).token;
        s.expire_locks(99.0);
        assert_eq!(s.jobs.get_state(&id, 99.0), "active");
        assert!(s.jobs.heartbeat(&id, t.as_deref(), None, 90.0));
        s.expire_locks(150.0);
        assert_eq!(s.jobs.get_state(&id, 150.0), "active", "renewed to 190");
        assert!(!s.jobs.heartbeat(&id, Some("other"), None, 150.0));
        // A heartbeat without a token keeps the job alive for stall detection only.
        assert!(s.jobs.heartbeat(&id, None, None, 160.0));
        s.expire_locks(190.0);
        assert_eq!(s.jobs.get_state(&id, 190.0), "waiting");
        let job = s.get_job_wire(&id, 190.0).unwrap();
        assert_eq!(job.attempts, 1);
        // The old token renews nothing from here on.
        assert!(!s.jobs.heartbeat(&id, t.as_deref(), None, 191.0));
    }

    /// The sweep looks for expired locks on bunqueue's 5 s period, not at every call: a
    /// heartbeat a little late does not cost a job its lock there either.
    #[test]
    fn the_sweep_checks_locks_every_five_seconds() {
        let mut s = state();
        let id = push_attempts(&mut s, 3);
        pull_ttl(&mut s, true, 100, 0.0);
        // `state()` starts its clock at 1,000 ms: the first check is due at 6,000.
        s.sweep(5_999.0);
        assert_eq!(
            s.jobs.get_state(&id, 5_999.0),
            "active",
            "expired, not yet checked"
        );
        s.sweep(6_000.0);
        assert_eq!(s.jobs.get_state(&id, 6_000.0), "waiting");
    }

    /// A job pulled without an owner has no lock: a heartbeat with some token fails there,
    /// as bunqueue's `renewJobLock` finds no lock.
    #[test]
    fn heartbeat_with_a_token_needs_a_lock() {
        let mut s = state();
        let id = push_attempts(&mut s, 3);
        pull_ttl(&mut s, false, 0, 0.0);
        assert!(!s.jobs.heartbeat(&id, Some("t"), None, 1.0));
        assert!(s.jobs.heartbeat(&id, None, None, 1.0));
    }

    /// Lock expiry at the last attempt, or at the queue's maxStalls, fails the job for good.
    #[test]
    fn expired_lock_fails_the_job_past_attempts_or_max_stalls() {
        let mut s = state();
        let one = push_attempts(&mut s, 1);
        pull_ttl(&mut s, true, 10, 0.0);
        s.expire_locks(10.0);
        assert_eq!(s.jobs.get_state(&one, 10.0), "failed");
        assert_eq!(s.jobs.counts("q", 10.0).failed, 1);

        s.set_stall_config("q", &StallConfigUpdate::new().max_stalls(2));
        let id = push_attempts(&mut s, 10);
        pull_ttl(&mut s, true, 10, 20.0);
        s.expire_locks(30.0);
        assert_eq!(s.jobs.get_state(&id, 30.0), "waiting");
        pull_ttl(&mut s, true, 10, 40.0);
        s.expire_locks(50.0);
        assert_eq!(s.jobs.get_state(&id, 50.0), "failed", "second stall of 2");
        assert_eq!(s.stall_config("q").max_stalls, 2);
        assert!(s.stall_config("q").enabled, "merged, not replaced");
    }

    /// Stall detection: a job not heard from for longer than the stall interval (past the
    /// grace period) is a candidate at one check and stalled at the next: retried after its
    /// backoff, or failed at maxStalls. Heartbeats keep it alive; disabled queues are skipped.
    #[test]
    fn silent_jobs_stall_at_the_second_check() {
        let mut s = state();
        s.set_stall_config(
            "q",
            &StallConfigUpdate::new()
                .stall_interval(Duration::from_millis(1000))
                .grace_period(Duration::from_millis(0))
                .max_stalls(2),
        );
        let id = push_attempts(&mut s, 5);
        // Unlocked, so only stall detection can take it back.
        pull_ttl(&mut s, false, 0, 0.0);
        s.check_stalled(500.0);
        s.check_stalled(1500.0);
        assert_eq!(
            s.jobs.get_state(&id, 1500.0),
            "active",
            "a candidate, not yet stalled"
        );
        s.check_stalled(2000.0);
        assert_eq!(
            s.jobs.get_state(&id, 2000.0),
            "delayed",
            "retried after its backoff"
        );
        let job = s.get_job_wire(&id, 2000.0).unwrap();
        assert_eq!(
            (job.attempts, job.failed_reason.as_deref()),
            (1, Some("stalled"))
        );

        // Still a candidate from the 2000 check (bunqueue marks candidates by id before it
        // handles the confirmed ones): a heartbeat before the next check clears it.
        assert_eq!(s.jobs.promote_jobs("q", None, 2000.0), 1);
        pull_ttl(&mut s, false, 0, 3000.0);
        assert!(s.jobs.heartbeat(&id, None, None, 4400.0));
        s.check_stalled(4500.0);
        s.check_stalled(5000.0);
        assert_eq!(s.jobs.get_state(&id, 5000.0), "active");
        s.check_stalled(6000.0);
        s.check_stalled(7000.0);
        assert_eq!(s.jobs.get_state(&id, 7000.0), "failed", "second stall of 2");

        s.set_stall_config("q", &StallConfigUpdate::new().enabled(false));
        let other = push_attempts(&mut s, 5);
        pull_ttl(&mut s, false, 0, 8000.0);
        s.check_stalled(20_000.0);
        s.check_stalled(30_000.0);
        assert_eq!(s.jobs.get_state(&other, 30_000.0), "active");
    }

    /// A job's `timeout` fails it once it has run that long, as a FAIL would (retried while
    /// attempts remain, with bunqueue's error text).
    #[test]
    fn timeout_fails_a_running_job() {
        let mut s = state();
        let opts = JobOptions::new()
            .attempts(2)
            .timeout(Duration::from_millis(100));
        let id = s.push("q", JobSpec::new("a", Value::Nil).with_options(opts), 0.0);
        pull_ttl(&mut s, true, 30_000, 10.0);
        s.sweep(109.0);
        assert_eq!(s.jobs.get_state(&id, 109.0), "active");
        s.sweep(110.0);
        assert_eq!(s.jobs.get_state(&id, 110.0), "delayed");
        let job = s.get_job_wire(&id, 110.0).unwrap();
        assert_eq!(job.attempts, 1);
        assert_eq!(job.failed_reason.as_deref(), Some("Job timeout exceeded"));
        assert_eq!(s.jobs.promote_jobs("q", None, 110.0), 1);
        pull_ttl(&mut s, false, 0, 200.0);
        s.sweep(300.0);
        assert_eq!(
            s.jobs.get_state(&id, 300.0),
            "failed",
            "the last attempt timed out"
        );
    }

    /// A sweep that comes late, past both a job's timeout and its lock's expiry, times it out
    /// (bunqueue's timeout timer fires at the deadline; its lock check only every 5 s).
    #[test]
    fn a_late_sweep_times_out_before_the_lock_expires() {
        let mut s = state();
        let opts = JobOptions::new()
            .attempts(3)
            .timeout(Duration::from_millis(100));
        let id = s.push("q", JobSpec::new("a", Value::Nil).with_options(opts), 0.0);
        pull_ttl(&mut s, true, 200, 0.0);
        s.sweep(1000.0);
        let job = s.get_job_wire(&id, 1000.0).unwrap();
        assert_eq!(job.failed_reason.as_deref(), Some("Job timeout exceeded"));
        assert_eq!(s.jobs.get_state(&id, 1000.0), "delayed");
    }

    /// ExtendLock as bunqueue's: without a token it renews the job's own lock; a wrong token
    /// or an expired lock is refused.
    #[test]
    fn extend_lock_with_or_without_the_token() {
        let mut s = state();
        let id = push_attempts(&mut s, 3);
        let t = pull_ttl(&mut s, true, 100, 0.0).token;
        assert!(s.jobs.extend_lock(&id, None, 1000.0, 50.0));
        assert!(!s.jobs.extend_lock(&id, Some("other"), 1000.0, 60.0));
        assert!(s.jobs.extend_lock(&id, t.as_deref(), 1000.0, 70.0));
        s.sweep(1069.0);
        assert_eq!(s.jobs.get_state(&id, 1069.0), "active", "extended to 1070");
        assert!(!s.jobs.extend_lock(&id, None, 1000.0, 1070.0), "expired");
    }

    /// A job older than its `ttl` is dropped by the pull that reaches it, unrun.
    #[test]
    fn ttl_drops_a_job_at_pull() {
        let mut s = state();
        let ttl = JobOptions::new().ttl(Duration::from_millis(50));
        let old = s.push("q", JobSpec::new("a", Value::Nil).with_options(ttl), 0.0);
        let fresh = s.push("q", JobSpec::new("b", Value::Nil), 0.0);
        assert_eq!(
            s.jobs.get_state(&old, 60.0),
            "waiting",
            "until a pull reaches it"
        );
        let got: Vec<String> = pull(&mut s, 2, 60.0).into_iter().map(|p| p.id).collect();
        assert_eq!(got, [fresh]);
        assert_eq!(s.jobs.get_state(&old, 60.0), "unknown");
        assert_eq!(
            s.jobs.counts("q", 60.0),
            JobCounts {
                active: 1,
                ..JobCounts::default()
            }
        );
    }

    #[test]
    fn retry_delay_is_capped() {
        assert_eq!(
            retry_delay(Some(Backoff::Delay(Duration::from_secs(86_400))), 5, 0.5),
            MAX_RETRY_DELAY
        );
        assert_eq!(
            retry_delay(Some(Backoff::Fixed(Duration::from_millis(100))), 9, 0.5),
            100.0
        );
    }
}
