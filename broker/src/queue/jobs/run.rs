//! A job's runs on its record: filed when added or recovered, handed out by a pull, taken out
//! of its run, completed, failed, retried or stalled. What follows for the other concerns
//! (the running jobs, the limits' slots, the DLQ, events) is the caller's.

use std::cmp::Reverse;

use autobatch_core::ops::StallConfig;
use autobatch_core::wire::Value;

use super::{index_in, ms, retry_delay, update_op, Entry, Jobs, Lock, RunInfo};
use crate::conn_id::ConnId;
use crate::queue::failure::Failure;
use crate::queue::index::priority_rank;
use crate::queue::limits::groups::PullGroup;
use crate::queue::limits::Limits;
use crate::queue::timeline::{self, Attempt, Step};
use crate::store::{JobRecord, Stage, StoreOp};

/// Default lock time to live, ms.
pub(crate) const DEFAULT_LOCK_TTL: i64 = 30_000;

/// What ACK, FAIL and the lock checks can refuse, with bunqueue's messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FinishError {
    /// `Lock token required for job <id>`.
    TokenRequired(String),
    /// `Invalid or expired lock token for job <id>`.
    BadToken(String),
    /// `Job not found or not in processing state: <id>`.
    NotActive(String),
}

impl std::fmt::Display for FinishError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FinishError::TokenRequired(id) => write!(f, "Lock token required for job {id}"),
            FinishError::BadToken(id) => write!(f, "Invalid or expired lock token for job {id}"),
            FinishError::NotActive(id) => {
                write!(f, "Job not found or not in processing state: {id}")
            }
        }
    }
}

/// How a pull takes its jobs.
pub(crate) struct PullSpec<'a> {
    pub queue: &'a str,
    pub count: usize,
    /// With an owner: a lock token per job.
    pub locked: bool,
    pub lock_ttl: i64,
    /// The connection the jobs are tied to (returned to waiting when it closes).
    pub tie_to: Option<ConnId>,
}

/// What a pull took off its queue.
#[derive(Default)]
pub(crate) struct Taken {
    /// The jobs handed out, in order, with their lock tokens.
    pub handed: Vec<(String, Option<String>)>,
    /// Jobs older than their `ttl`, dropped unrun (the caller forgets them).
    pub expired: Vec<String>,
}

/// A job taken out of its run by a stall or an expired lock.
pub(crate) struct Stalled {
    pub stalls: u64,
    pub attempts: i64,
    pub max_attempts: i64,
}

impl Jobs {
    /// Files a record under its queue and state, and keeps it. Returns the queue and place
    /// in its DLQ of a job recovered as failed, for [`crate::queue::dlq::Dlq::file`].
    pub fn admit(&mut self, rec: JobRecord) -> Option<(String, u64)> {
        self.seq = self.seq.max(rec.seq + 1);
        let dlq_seq = self.finish_seq;
        let q = index_in(&mut self.queues, &rec.queue);
        match rec.state {
            Stage::Waiting => q.file_ready(&rec),
            Stage::Delayed => q.file_delayed(&rec),
            Stage::Active => q.active += 1,
            // Counted by `flow::park`, which also indexes its dependencies.
            Stage::WaitingChildren => {}
            Stage::Completed => q.completed += 1,
            Stage::Failed => q.failed += 1,
        }
        let mut run = RunInfo::default();
        // A recovered job's own settings, from its stored options.
        if let Some(o) = &rec.options {
            run.timeout = o.timeout.filter(|t| *t > 0.0);
            run.ttl = o.ttl;
            run.stall_timeout = o.stall_timeout;
            run.group = o.group_id.clone();
        }
        let mut dlq = None;
        if rec.state == Stage::Failed {
            // Failed before a restart: in the DLQ in recovery order, reason unknown.
            run.finished = Some((rec.created_at, dlq_seq));
            run.dlq = Some(("unknown", rec.failed_reason.clone()));
            self.finish_seq += 1;
            dlq = Some((rec.queue.clone(), dlq_seq));
        }
        self.map.insert(
            rec.id.clone(),
            Box::new(Entry {
                rec,
                lock: None,
                conn: None,
                run,
                flow: None,
            }),
        );
        dlq
    }

    /// After a restart filed its jobs: each queue's groups take turns in the order bunqueue's
    /// recovery files them (it loads the waiting jobs by priority, highest first, then run
    /// time, then id, and a group's lane joins the ring with its first job loaded).
    pub fn order_lanes_as_recovered(&mut self) {
        for q in self.queues.values_mut() {
            let mut firsts: Vec<(RecoveryKey<'_>, &String)> = q
                .lane_groups()
                .filter_map(|(group, ids)| {
                    let first = ids
                        .filter_map(|id| self.map.get(id))
                        .map(|e| recovery_key(&e.rec))
                        .min()?;
                    Some((first, group))
                })
                .collect();
            firsts.sort();
            let order: Vec<String> = firsts.into_iter().map(|(_, g)| g.clone()).collect();
            q.relink_lanes(&order);
        }
    }

    /// Takes up to `spec.count` ready jobs of a queue not paused and hands them out, in
    /// bunqueue's order: those without a group first, highest priority first, FIFO within a
    /// priority; then the groups' in turn (see `index`), or only those the pull's `affinity`
    /// names. A group that is not eligible (see `limits::groups`) is passed over, its jobs
    /// keeping their place; a limit that refuses ends the pull with what it has.
    pub fn pull(
        &mut self,
        spec: &PullSpec<'_>,
        group: Option<&PullGroup>,
        limits: &mut Limits,
        now: f64,
    ) -> Taken {
        let mut taken = Taken::default();
        if self.is_paused(spec.queue) {
            return taken;
        }
        self.promote(spec.queue, now);
        let affinity = group.and_then(|g| g.affinity.as_ref().map(Option::as_deref));
        while taken.handed.len() < spec.count {
            let Some(q) = self.queues.get_mut(spec.queue) else {
                break;
            };
            let eligible = |g: &str| limits.group_eligible(spec.queue, g, group, now);
            let Some(id) = q.next_ready(affinity, eligible).cloned() else {
                break;
            };
            let Some(e) = self.map.get(&id) else {
                q.purge(&id);
                continue;
            };
            // bunqueue's pull drops a job older than its ttl, silently (no event).
            let expired = e.run.ttl.is_some_and(|ttl| now > e.rec.created_at + ttl);
            if expired {
                q.unready(&e.rec);
                taken.expired.push(id);
                continue;
            }
            // A limit is asked only for a job that would be handed out; when it refuses, the
            // job keeps its place and the pull ends with what it has (see `limits`).
            if !limits.acquire(spec.queue, now) {
                break;
            }
            q.take(&e.rec);
            if let Some(g) = &e.run.group {
                limits.group_started(spec.queue, g);
                limits.group_acquired(spec.queue, g, group, now);
            }
            q.active += 1;
            let token = self.hand_out(&id, spec, now);
            taken.handed.push((id, token));
        }
        taken
    }

    /// Makes a job taken off its queue's ready jobs active: locked (with a token when the pull
    /// has an owner, returned), tied to the pull's connection, recorded.
    fn hand_out(&mut self, id: &str, spec: &PullSpec<'_>, now: f64) -> Option<String> {
        let e = self
            .map
            .get_mut(id)
            .expect("taken off the ready jobs by the caller");
        e.rec.state = Stage::Active;
        let token = spec.locked.then(|| uuid::Uuid::now_v7().to_string());
        let ttl = if spec.lock_ttl > 0 {
            spec.lock_ttl
        } else {
            DEFAULT_LOCK_TTL
        };
        e.lock = token.clone().map(|token| Lock {
            token,
            expires_at: now + ttl as f64,
            ttl: ttl as f64,
            renewals: 0,
        });
        e.run.started_at = Some(now);
        e.run.shown_started = Some(now);
        e.run.last_heartbeat = now;
        note(&mut e.run.timeline, "active", now, None, None);
        e.conn = spec.tie_to;
        let op = update_op(&e.rec);
        self.record(op);
        token
    }

    /// Takes an active job out of its run (after its lock was checked): unlocked, counted
    /// out of the queue's active jobs. Returns the connection it was tied to.
    pub fn finish(&mut self, id: &str) -> Result<Option<ConnId>, FinishError> {
        let e = match self.map.get_mut(id) {
            Some(e) if e.rec.state == Stage::Active => e,
            _ => return Err(FinishError::NotActive(id.to_owned())),
        };
        e.lock = None;
        e.run.started_at = None;
        // bunqueue clears a record's `startedAt` whenever a run ends but by ACK or FAIL (which
        // put it back).
        e.run.shown_started = None;
        let conn = e.conn.take();
        if let Some(q) = self.queues.get_mut(&e.rec.queue) {
            q.active = q.active.saturating_sub(1);
        }
        Ok(conn)
    }

    /// The queue and group of job `id`: whose concurrency slot it holds.
    pub fn slot_of(&self, id: &str) -> Option<(&str, Option<&str>)> {
        let e = self.map.get(id)?;
        Some((e.rec.queue.as_str(), e.run.group.as_deref()))
    }

    /// When job `id`'s current run started.
    pub fn started_at(&self, id: &str) -> Option<f64> {
        self.map.get(id).and_then(|e| e.run.started_at)
    }

    /// Shows `started` as job `id`'s record's `startedAt`.
    pub fn show_started(&mut self, id: &str, started: Option<f64>) {
        if let Some(e) = self.map.get_mut(id) {
            e.run.shown_started = started;
        }
    }

    /// Whether job `id` holds a lock.
    pub fn has_lock(&self, id: &str) -> bool {
        self.map.get(id).is_some_and(|e| e.lock.is_some())
    }

    /// Whether job `id` is tied to connection `conn`.
    pub fn held_by(&self, id: &str, conn: ConnId) -> bool {
        self.map.get(id).is_some_and(|e| e.conn == Some(conn))
    }

    /// Completes a job taken out of its run (or, `late`, out of its queue while it waited
    /// for a retry): its result kept, counted. Returns its queue, its `removeOnComplete` and
    /// the change to record.
    pub fn complete(
        &mut self,
        id: &str,
        result: Option<Value>,
        late: bool,
        now: f64,
    ) -> (String, bool, StoreOp) {
        let e = self
            .map
            .get_mut(id)
            .expect("unfiled or finished by the caller");
        if !late {
            e.run.shown_completed = Some(now);
            note(&mut e.run.timeline, "completed", now, None, None);
        }
        e.rec.state = Stage::Completed;
        e.rec.result = result;
        let out = (
            e.rec.queue.clone(),
            e.rec.remove_on_complete,
            update_op(&e.rec),
        );
        self.index(&out.0).completed += 1;
        out
    }

    /// Writes a failure into the record and timeline of a job taken out of its run that
    /// started at `started`. Returns its queue and whether it will be retried.
    pub fn note_failure(
        &mut self,
        id: &str,
        how: &Failure,
        started: Option<f64>,
        now: f64,
    ) -> Option<(String, bool)> {
        let e = self.map.get_mut(id)?;
        e.run.shown_started = started;
        e.rec.attempts += 1;
        let attempt = Some(e.rec.attempts);
        note(
            &mut e.run.timeline,
            "failed",
            now,
            Some(how.error.clone()),
            attempt,
        );
        e.rec.failed_reason = how.error.clone();
        let retry = !how.unrecoverable && e.rec.attempts < e.rec.max_attempts;
        if retry {
            // The attempt kept for a later DLQ entry's history (`recordJobFailureAttempt`).
            e.run.attempt_log.push(Attempt {
                attempt: e.rec.attempts,
                started_at: started.unwrap_or(e.rec.created_at),
                failed_at: now,
                reason: how.attempt_reason(),
                error: e.rec.failed_reason.clone(),
                duration: started.map_or(0.0, |s| now - s),
            });
            let next = Some(e.rec.attempts + 1);
            note(&mut e.run.timeline, "waiting", now, None, next);
        }
        Some((e.rec.queue.clone(), retry))
    }

    /// What a `failed` event of job `id` carries: its error and data.
    pub fn failure_of(&self, id: &str) -> Option<(Option<String>, Value)> {
        let e = self.map.get(id)?;
        Some((e.rec.failed_reason.clone(), e.rec.data.clone()))
    }

    /// A job taken out of its run fails for good: its state set. Returns whether it leaves
    /// (`remove`, else its `removeOnFail`), the change to record and its error.
    pub fn fail_for_good(
        &mut self,
        id: &str,
        remove: Option<bool>,
    ) -> Option<(bool, StoreOp, Option<String>)> {
        let e = self.map.get_mut(id)?;
        e.rec.state = Stage::Failed;
        let remove = remove.unwrap_or(e.rec.remove_on_fail);
        Some((remove, update_op(&e.rec), e.rec.failed_reason.clone()))
    }

    /// A job taken out of its run fails: the change to record once it is in the DLQ.
    pub fn mark_failed(&mut self, id: &str) -> Option<StoreOp> {
        let e = self.map.get_mut(id)?;
        e.rec.state = Stage::Failed;
        Some(update_op(&e.rec))
    }

    /// The running jobs among `ids` whose lock expired by `now`, in expiry order, then by id
    /// (a pull's jobs in their pull order, roughly bunqueue's walk of its lock map in
    /// insertion order).
    pub fn locks_expired<'a>(
        &self,
        ids: impl Iterator<Item = &'a String>,
        now: f64,
    ) -> Vec<String> {
        let mut expired: Vec<(f64, String)> = ids
            .filter_map(|id| {
                let e = self.map.get(id)?;
                let at = e.lock.as_ref()?.expires_at;
                (e.rec.state == Stage::Active && at <= now).then(|| (at, id.clone()))
            })
            .collect();
        expired.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
        expired.into_iter().map(|(_, id)| id).collect()
    }

    /// How many times job `id`'s lock was renewed.
    pub fn renewals(&self, id: &str) -> u64 {
        self.map
            .get(id)
            .and_then(|e| e.lock.as_ref())
            .map_or(0, |l| l.renewals)
    }

    /// A job taken out of its run by a stall or an expired lock: one more attempt and one
    /// more stall counted, heard from now.
    pub fn count_stall(&mut self, id: &str, now: f64) -> Option<Stalled> {
        let e = self.map.get_mut(id)?;
        e.rec.attempts += 1;
        e.run.stall_count += 1;
        e.run.last_heartbeat = now;
        Some(Stalled {
            stalls: e.run.stall_count,
            attempts: e.rec.attempts,
            max_attempts: e.rec.max_attempts,
        })
    }

    /// A job whose lock expired with attempts and stalls left: the attempt noted, back to
    /// waiting.
    pub fn requeue_expired(&mut self, id: &str, now: f64) {
        if let Some(e) = self.map.get_mut(id) {
            let stalled = Attempt::stalled(e.rec.attempts, e.rec.created_at, now, "Lock expired");
            e.run.attempt_log.push(stalled);
        }
        self.refile_ready(id);
    }

    /// The running jobs among `ids` past their `timeout` at `now`, earliest deadline first,
    /// each with its own lock's token.
    pub fn timed_out<'a>(
        &self,
        ids: impl Iterator<Item = &'a String>,
        now: f64,
    ) -> Vec<(String, Option<String>)> {
        let mut due: Vec<(f64, String, Option<String>)> = ids
            .filter_map(|id| {
                let e = self.map.get(id).filter(|e| e.rec.state == Stage::Active)?;
                let deadline = e.run.started_at? + e.run.timeout?;
                let token = e.lock.as_ref().map(|l| l.token.clone());
                (now >= deadline).then(|| (deadline, id.clone(), token))
            })
            .collect();
        due.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
        due.into_iter().map(|(_, id, token)| (id, token)).collect()
    }

    /// Whether running job `id` has stalled by `now` under its queue's settings (`config`):
    /// not heard from for longer than its `stallTimeout` or the queue's `stallInterval`, past
    /// the grace period after it started. `Some(true)`: this stall reaches `maxStalls`.
    pub fn stalled(
        &self,
        id: &str,
        now: f64,
        config: impl Fn(&str) -> StallConfig,
    ) -> Option<bool> {
        let e = self.map.get(id).filter(|e| e.rec.state == Stage::Active)?;
        let cfg = config(&e.rec.queue);
        let started = e.run.started_at?;
        if !cfg.enabled || now - started < ms(cfg.grace_period) {
            return None;
        }
        let interval = e.run.stall_timeout.unwrap_or(ms(cfg.stall_interval));
        if now - e.run.last_heartbeat <= interval {
            return None;
        }
        Some(e.run.stall_count + 1 >= cfg.max_stalls)
    }

    /// A stalled job with attempts and stalls left: the failure noted, retried after its
    /// backoff. Returns its stalls.
    pub fn retry_stalled(&mut self, id: &str, jitter: f64, now: f64) -> Option<u64> {
        let e = self.map.get_mut(id)?;
        let stalls = e.run.stall_count;
        // Its timeline's last failure, which GetJob shows as `failedReason`.
        e.rec.failed_reason = Some("stalled".into());
        let stalled = Attempt::stalled(e.rec.attempts, e.rec.created_at, now, "stalled");
        e.run.attempt_log.push(stalled);
        let attempt = Some(e.rec.attempts);
        let next = Some(e.rec.attempts + 1);
        note(
            &mut e.run.timeline,
            "failed",
            now,
            Some(Some("stalled".to_owned())),
            attempt,
        );
        note(&mut e.run.timeline, "waiting", now, None, next);
        e.rec.run_at = now + retry_delay(e.rec.backoff, e.rec.attempts, jitter);
        let run_at = e.rec.run_at;
        self.refile(id, run_at, now);
        Some(stalls)
    }
}

/// See [`recovery_key`].
type RecoveryKey<'a> = (Reverse<i64>, i64, &'a str);

/// Where bunqueue's recovery loads a waiting job: by priority, highest first, then run time
/// (each number as an integer in its order), then id.
fn recovery_key(rec: &JobRecord) -> RecoveryKey<'_> {
    let rank = priority_rank;
    (
        Reverse(rank(rec.priority)),
        rank(rec.run_at),
        rec.id.as_str(),
    )
}

/// Notes a step in a job's timeline.
fn note(
    timeline: &mut Vec<Step>,
    state: &'static str,
    at: f64,
    error: Option<Option<String>>,
    attempt: Option<i64>,
) {
    timeline::note(
        timeline,
        Step {
            state,
            at,
            error,
            attempt,
        },
    );
}
