//! The worker half of a session: long-poll PULLB for as many jobs as there are free slots
//! (at most `MAX_PULL_BATCH` per PULLB), hand jobs out, batch completions into ACKB (with
//! lock tokens), send failures as FAIL.
//!
//! [`WorkerState`] owns the worker's state and the requests it makes ([`WorkRequest`]); the
//! machine queues what it returns and hands each reply back to it.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::batch::{self, BatchId, Batcher};
use crate::error::Error;
use crate::wire::{millis, Command, CommandKind, PullArgs, Response, Value};

use super::config::WorkerConfig;
use super::event::{Event, FailKind, Out};
use super::stats::SessionStats;

/// After an empty non-blocking poll or a refused pull, wait this long before polling again, so
/// an idle worker does not spin (bunqueue's `drainDelay`).
const IDLE_POLL_DELAY: Duration = Duration::from_millis(50);
const ERROR_POLL_DELAY: Duration = Duration::from_millis(500);

/// Most stack lines a FAIL carries: bunqueue keeps at most 100 (protocol reference §6.7).
pub const MAX_STACK_LINES: usize = 100;
/// Longest stack line a FAIL carries, in bytes (longer ones are cut at a character boundary),
/// so 100 lines stay a small frame whatever an error's text holds.
pub const MAX_STACK_LINE_BYTES: usize = 2048;

/// Most jobs one PULLB asks for, whatever the concurrency: bunqueue's clients cap their
/// `batchSize` at 1,000. A worker with more free slots fills them over several pulls.
const MAX_PULL_BATCH: usize = 1000;

/// The wire name of the lock renewal.
const HEARTBEAT: &str = "JobHeartbeatB";

/// A worker request on its way to the server, with what its reply needs.
#[derive(Debug)]
pub(super) enum WorkRequest {
    /// A PULLB for free slots.
    Pull { args: PullArgs, count: i64 },
    /// A JobHeartbeatB renewing the locks of the jobs held (the whole request map).
    Heartbeat { body: Value },
    /// An ACKB of completions: `results[i]` and `tokens[i]` belong to `ids[i]`.
    Acks {
        batch: Option<BatchId>,
        attempt: u32,
        ids: Vec<String>,
        results: Vec<Value>,
        tokens: Option<Vec<String>>,
        /// Remove the jobs once completed ([`WorkerConfig::remove_on_complete`]).
        remove: bool,
    },
    /// A FAIL of one job.
    Fail {
        id: String,
        error: String,
        token: Option<String>,
        unrecoverable: bool,
        stack: Vec<String>,
        /// Remove the job if the failure is final ([`WorkerConfig::remove_on_fail`]).
        remove: bool,
    },
    /// A GetState that checks whether an ACK of an ACKB the server refused took effect.
    AckCheck { id: String },
}

impl WorkRequest {
    /// What its reply decodes as.
    pub(super) fn kind(&self) -> CommandKind {
        match self {
            WorkRequest::Pull { .. } => CommandKind::PullB,
            WorkRequest::Heartbeat { .. } => CommandKind::Other,
            WorkRequest::Acks { .. } => CommandKind::AckB,
            WorkRequest::Fail { .. } => CommandKind::Fail,
            WorkRequest::AckCheck { .. } => CommandKind::GetState,
        }
    }

    /// How long the server may hold the reply beyond the command timeout: a pull's poll time.
    pub(super) fn long_poll(&self) -> Duration {
        match self {
            WorkRequest::Pull { args, .. } => {
                Duration::from_millis(args.timeout.unwrap_or(0).max(0) as u64)
            }
            _ => Duration::ZERO,
        }
    }

    /// Whether `close` may abandon it unanswered: a pull (closing the connection hands its jobs
    /// back) or a heartbeat.
    pub(super) fn is_background(&self) -> bool {
        matches!(
            self,
            WorkRequest::Pull { .. } | WorkRequest::Heartbeat { .. }
        )
    }

    /// Lends the wire command to `f` (to encode it), without copying: the fields move into the
    /// command and back.
    pub(super) fn with_command<R>(&mut self, f: impl FnOnce(&Command) -> R) -> R {
        use std::mem::take;
        match self {
            WorkRequest::Pull { args, count } => {
                let cmd = Command::PullB {
                    args: take(args),
                    count: *count,
                };
                let r = f(&cmd);
                // `cmd` was built as a PULLB just above: this always matches.
                if let Command::PullB { args: a, .. } = cmd {
                    *args = a;
                }
                r
            }
            WorkRequest::Heartbeat { body } => {
                let cmd = Command::Other {
                    cmd: HEARTBEAT.into(),
                    body: std::mem::replace(body, Value::Nil),
                };
                let r = f(&cmd);
                // `cmd` was built as Other just above: this always matches.
                if let Command::Other { body: b, .. } = cmd {
                    *body = b;
                }
                r
            }
            WorkRequest::Acks {
                ids,
                results,
                tokens,
                remove,
                ..
            } => {
                let cmd = Command::AckB {
                    remove_on_completes: if *remove {
                        vec![true; ids.len()]
                    } else {
                        Vec::new()
                    },
                    ids: take(ids),
                    results: Some(take(results)),
                    tokens: tokens.take(),
                };
                let r = f(&cmd);
                // `cmd` was built as an ACKB just above: this always matches.
                if let Command::AckB {
                    ids: i,
                    results: rs,
                    tokens: t,
                    ..
                } = cmd
                {
                    *ids = i;
                    *results = rs.unwrap_or_default();
                    *tokens = t;
                }
                r
            }
            WorkRequest::Fail {
                id,
                error,
                token,
                unrecoverable,
                stack,
                remove,
            } => {
                let cmd = Command::Fail {
                    id: take(id),
                    error: Some(take(error)),
                    token: token.take(),
                    unrecoverable: *unrecoverable,
                    stack: take(stack),
                    remove_on_fail: *remove,
                };
                let r = f(&cmd);
                // `cmd` was built as a FAIL just above: this always matches.
                if let Command::Fail {
                    id: i,
                    error: e,
                    token: t,
                    stack: s,
                    ..
                } = cmd
                {
                    *id = i;
                    *error = e.unwrap_or_default();
                    *token = t;
                    *stack = s;
                }
                r
            }
            WorkRequest::AckCheck { id } => {
                let cmd = Command::GetState { id: take(id) };
                let r = f(&cmd);
                // `cmd` was built as a GetState just above: this always matches.
                if let Command::GetState { id: i } = cmd {
                    *id = i;
                }
                r
            }
        }
    }
}

/// JobHeartbeatB for every job in `locked`, in a stable order, with its token (`""` for none).
fn heartbeat_request<'a>(
    locked: impl Iterator<Item = (&'a String, &'a Option<String>)>,
) -> WorkRequest {
    let mut held: Vec<(&String, &Option<String>)> = locked.collect();
    held.sort();
    let ids = held
        .iter()
        .map(|(id, _)| Value::from(id.as_str()))
        .collect();
    let tokens = held
        .iter()
        .map(|(_, t)| Value::from(t.as_deref().unwrap_or_default()))
        .collect();
    WorkRequest::Heartbeat {
        body: Value::map([
            ("cmd", Value::from(HEARTBEAT)),
            ("ids", Value::Array(ids)),
            ("tokens", Value::Array(tokens)),
        ]),
    }
}

/// One completion on its way to an ACKB.
#[derive(Debug, Clone)]
struct AckItem {
    id: String,
    token: Option<String>,
    result: Value,
    /// How many times it has been sent already.
    attempt: u32,
}

#[derive(Debug)]
pub(super) struct WorkerState {
    config: WorkerConfig,
    acks: Batcher<AckItem>,
    /// Jobs handed out and not yet completed or failed, with their lock tokens.
    active: HashMap<String, Option<String>>,
    /// Jobs done here whose ACK or FAIL the server has not answered yet (batched, out, or
    /// waiting for a retry), with their lock tokens. Their locks are renewed with the held
    /// jobs' until the server has the outcome: an ACK slowed down (a busy machine, ACK
    /// backpressure, retries) must not let the lock expire, or the job runs again elsewhere.
    finishing: HashMap<String, Option<String>>,
    pull_in_flight: bool,
    /// The last pull came back empty and [`Event::Drained`] was reported for it; cleared by a
    /// pull that brings jobs.
    drained: bool,
    next_pull_at: Option<Instant>,
    /// ACKs waiting to be retried, with when.
    retries: Vec<(Instant, AckItem)>,
    /// FAILs and ACKBs out and unanswered.
    settling: usize,
    /// `close` was called: no more pulls.
    stopping: bool,
    /// The user paused the worker: no more pulls until resumed; held jobs go on.
    paused: bool,
    /// The limiter's current window: when it started and how many jobs it has taken.
    window: Option<(Instant, u32)>,
    /// When the held jobs' locks are renewed next (while any are held).
    next_heartbeat: Option<Instant>,
}

impl WorkerState {
    pub(super) fn new(config: WorkerConfig) -> Result<Self, batch::ConfigError> {
        Ok(WorkerState {
            acks: Batcher::new(config.acks.clone())?,
            config,
            active: HashMap::new(),
            finishing: HashMap::new(),
            pull_in_flight: false,
            drained: false,
            next_pull_at: None,
            retries: Vec::new(),
            settling: 0,
            stopping: false,
            paused: false,
            window: None,
            next_heartbeat: None,
        })
    }

    pub(super) fn poll_timeout(&self) -> Option<Instant> {
        [
            self.acks.poll_timeout(),
            self.retries.iter().map(|(t, _)| *t).min(),
            self.next_pull_at.filter(|_| !self.stopping && !self.paused),
            self.next_heartbeat.filter(|_| self.has_locks()),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    pub(super) fn is_drained(&self) -> bool {
        self.active.is_empty()
            && self.retries.is_empty()
            && self.settling == 0
            && self.acks.pending_items() == 0
            && self.acks.parked() == 0
            && self.acks.in_flight() == 0
    }

    /// Whether any lock is to be renewed: a job held, or one whose outcome is on its way.
    fn has_locks(&self) -> bool {
        !self.active.is_empty() || !self.finishing.is_empty()
    }

    /// `close` was called: no more pulls.
    pub(super) fn stop(&mut self) {
        self.stopping = true;
    }

    /// Pauses or resumes pulling (held jobs are not affected).
    pub(super) fn set_paused(&mut self, paused: bool) {
        self.paused = paused;
    }

    /// Whether a pull is out: its jobs are not held yet, but will be when it answers.
    pub(super) fn pull_in_flight(&self) -> bool {
        self.pull_in_flight
    }

    /// Whether pulling is paused.
    pub(super) fn is_paused(&self) -> bool {
        self.paused
    }

    /// Holds off pulling until `at` (a rate limit): jobs already held go on.
    pub(super) fn pull_not_before(&mut self, at: Instant) {
        self.next_pull_at = Some(self.next_pull_at.map_or(at, |t| t.max(at)));
    }

    /// The lock token of held job `id` (`None` when it has none or is not held).
    pub(super) fn token(&self, id: &str) -> Option<&str> {
        self.active.get(id).and_then(|t| t.as_deref())
    }

    /// The ids of the jobs held, sorted.
    pub(super) fn held(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.active.keys().cloned().collect();
        ids.sort();
        ids
    }

    /// Job `id` leaves the worker without an ACK or FAIL (the caller settles it with its own
    /// command, MoveToDelayed or MoveToWait): returns its lock token.
    pub(super) fn take(&mut self, id: &str) -> Result<Option<String>, Error> {
        self.release(id)
    }

    /// How many jobs the limiter lets the next pull take (unlimited: `usize::MAX`); when the
    /// window is used up, no pull until it ends.
    fn limit_allows(&mut self, now: Instant) -> usize {
        let Some((max, len)) = self.config.limiter else {
            return usize::MAX;
        };
        let (start, taken) = match self.window {
            Some((start, taken)) if now < start + len => (start, taken),
            _ => {
                self.window = Some((now, 0));
                (now, 0)
            }
        };
        let left = max.saturating_sub(taken) as usize;
        if left == 0 {
            self.pull_not_before(start + len);
        }
        left
    }

    fn free_slots(&self) -> usize {
        self.config.concurrency.saturating_sub(self.active.len())
    }

    /// Jobs handed out and not yet completed or failed.
    pub(super) fn jobs_held(&self) -> usize {
        self.active.len()
    }

    fn release(&mut self, id: &str) -> Result<Option<String>, Error> {
        self.active
            .remove(id)
            .ok_or_else(|| Error::Protocol(format!("job {id} is not held by this worker")))
    }

    /// Job `id` finished: its result joins the next ACKB, or, too large to batch, is returned
    /// as an ACKB of its own.
    pub(super) fn complete_job(
        &mut self,
        now: Instant,
        id: &str,
        result: Value,
        stats: &mut SessionStats,
    ) -> Result<Option<WorkRequest>, Error> {
        let token = self.release(id)?;
        self.finishing.insert(id.to_owned(), token.clone());
        let item = AckItem {
            id: id.to_owned(),
            token,
            result,
            attempt: 0,
        };
        let bytes = item.id.len() + 64;
        stats.jobs_completed += 1;
        match self.acks.push(now, item, bytes) {
            Ok(_) => Ok(None),
            // The ACK batcher is never closed while jobs are held and never rejects (its
            // policy is backpressure), so this is the oversized-result case: send it alone.
            Err(e) => Ok(Some(self.ack_request(None, vec![e.into_inner()], stats))),
        }
    }

    /// Job `id` failed: returns its FAIL, with at most [`MAX_STACK_LINES`] stack lines of at
    /// most [`MAX_STACK_LINE_BYTES`] bytes each.
    pub(super) fn fail_job(
        &mut self,
        id: &str,
        error: &str,
        unrecoverable: bool,
        mut stack: Vec<String>,
        stats: &mut SessionStats,
    ) -> Result<WorkRequest, Error> {
        let token = self.release(id)?;
        self.finishing.insert(id.to_owned(), token.clone());
        stack.truncate(MAX_STACK_LINES);
        for line in &mut stack {
            if line.len() > MAX_STACK_LINE_BYTES {
                let mut end = MAX_STACK_LINE_BYTES;
                while !line.is_char_boundary(end) {
                    end -= 1;
                }
                line.truncate(end);
            }
        }
        self.count_settling();
        stats.jobs_failed += 1;
        Ok(WorkRequest::Fail {
            id: id.to_owned(),
            error: error.to_owned(),
            token,
            unrecoverable,
            stack,
            remove: self.config.remove_on_fail,
        })
    }

    fn ack_request(
        &mut self,
        batch: Option<BatchId>,
        items: Vec<AckItem>,
        stats: &mut SessionStats,
    ) -> WorkRequest {
        let attempt = items.iter().map(|i| i.attempt).max().unwrap_or(0);
        let any_token = items.iter().any(|i| i.token.is_some());
        let mut ids = Vec::with_capacity(items.len());
        let mut results = Vec::with_capacity(items.len());
        let mut tokens = Vec::with_capacity(items.len());
        for item in items {
            ids.push(item.id);
            results.push(item.result);
            tokens.push(item.token.unwrap_or_default());
        }
        self.count_settling();
        stats.ack_batches_sent += 1;
        WorkRequest::Acks {
            batch,
            attempt,
            ids,
            results,
            tokens: any_token.then_some(tokens),
            remove: self.config.remove_on_complete,
        }
    }

    /// Time passed: returns the ACKB of the retries now due, if any.
    pub(super) fn handle_timeout(
        &mut self,
        now: Instant,
        stats: &mut SessionStats,
    ) -> Option<WorkRequest> {
        self.acks.handle_timeout(now);
        if self.next_pull_at.is_some_and(|t| t <= now) {
            self.next_pull_at = None;
        }
        if !self.retries.iter().any(|(t, _)| *t <= now) {
            return None;
        }
        let (due, keep): (Vec<_>, Vec<_>) = self.retries.drain(..).partition(|(t, _)| *t <= now);
        self.retries = keep;
        let items: Vec<AckItem> = due.into_iter().map(|(_, i)| i).collect();
        Some(self.ack_request(None, items, stats))
    }

    /// The requests due now, in order: ACK batches, a heartbeat, a pull for the free slots.
    pub(super) fn poll_requests(
        &mut self,
        now: Instant,
        connected: bool,
        stats: &mut SessionStats,
    ) -> Vec<WorkRequest> {
        if self.stopping && self.active.is_empty() && !self.acks.is_closed() {
            self.acks.close(now);
        }
        let mut batches = Vec::new();
        while let Some(b) = self.acks.poll_batch(now) {
            batches.push(b);
        }
        // A limiter that allows no job now has held pulls off until its window ends
        // (`next_pull_at`).
        let allowed = self.limit_allows(now);
        let pull = !self.stopping
            && !self.paused
            && !self.pull_in_flight
            && self.next_pull_at.is_none()
            && self.free_slots() > 0
            && connected;
        let pull = pull.then(|| {
            self.pull_in_flight = true;
            WorkRequest::Pull {
                args: PullArgs {
                    queue: self.config.queue.clone(),
                    timeout: Some(millis(self.config.poll_timeout)),
                    owner: Some(self.config.owner.clone()),
                    lock_ttl: Some(millis(self.config.lock_ttl)),
                },
                count: self.free_slots().min(MAX_PULL_BATCH).min(allowed) as i64,
            }
        });
        // Due heartbeats are rescheduled even when they cannot go out (disconnected): a due
        // time left in the past would make the driver's timer fire in a loop.
        let mut heartbeat = None;
        if self.has_locks() && self.next_heartbeat.is_some_and(|t| t <= now) {
            self.next_heartbeat = self.config.heartbeat_interval.map(|h| now + h);
            if connected {
                heartbeat = Some(heartbeat_request(self.active.iter().chain(&self.finishing)));
            }
        }
        let mut reqs = Vec::new();
        for b in batches {
            let items = b.items.into_iter().map(|(_, i)| i).collect();
            reqs.push(self.ack_request(Some(b.id), items, stats));
        }
        if let Some(h) = heartbeat {
            stats.heartbeats_sent += 1;
            reqs.push(h);
        }
        reqs.extend(pull);
        reqs
    }

    fn on_pulled(&mut self, now: Instant, response: Response, out: &mut Out<'_>) {
        self.pull_in_flight = false;
        let jobs = match response {
            Response::PulledBatch { jobs, tokens } => {
                let mut tokens = tokens.into_iter();
                jobs.into_iter()
                    .map(|j| (Box::new(j), tokens.next().filter(|t| !t.is_empty())))
                    .collect()
            }
            // A worker pulls with PULLB only: its reply is never a single PULL's.
            _ => Vec::new(),
        };
        if jobs.is_empty() && millis(self.config.poll_timeout) == 0 {
            self.next_pull_at = Some(now + IDLE_POLL_DELAY);
        }
        if jobs.is_empty() {
            if !self.drained {
                self.drained = true;
                out.events.push_back(Event::Drained);
            }
        } else {
            self.drained = false;
        }
        if !self.has_locks() && !jobs.is_empty() {
            self.next_heartbeat = self.config.heartbeat_interval.map(|h| now + h);
        }
        if let Some((_, taken)) = &mut self.window {
            *taken = taken.saturating_add(u32::try_from(jobs.len()).unwrap_or(u32::MAX));
        }
        for (job, token) in jobs {
            self.active.insert(job.id.clone(), token);
            out.stats.jobs_received += 1;
            out.events.push_back(Event::Job { job });
        }
    }

    fn on_pull_failed(&mut self, now: Instant) {
        self.pull_in_flight = false;
        self.next_pull_at = Some(now + ERROR_POLL_DELAY);
    }

    /// Job `id`'s outcome is known (`result`): its lock stops being renewed.
    fn report(&mut self, out: &mut Out<'_>, id: String, result: Result<bool, Error>) {
        self.finishing.remove(&id);
        out.settled(id, result);
    }

    /// An ACKB, FAIL or ACK check is on its way: it holds up `close` until [`settled`](
    /// Self::settled).
    fn count_settling(&mut self) {
        self.settling += 1;
    }

    /// An ACKB, FAIL or ACK check is answered: it stops holding up `close`.
    fn settled(&mut self, now: Instant, batch: Option<BatchId>) {
        self.settling = self.settling.saturating_sub(1);
        if let Some(b) = batch {
            self.acks.complete(now, b);
        }
    }

    /// Asks the server whether an ACK took effect: the answer settles the job.
    fn check_ack(&mut self, id: String, stats: &mut SessionStats) -> WorkRequest {
        self.count_settling();
        stats.ack_checks += 1;
        WorkRequest::AckCheck { id }
    }

    /// Schedules another try of an ACK that failed for a reason that may pass, or gives up.
    fn requeue_ack(&mut self, now: Instant, mut item: AckItem, out: &mut Out<'_>) {
        item.attempt += 1;
        if item.attempt > self.config.ack_retries {
            self.report(out, item.id, Err(Error::server("ACK retries exhausted")));
            return;
        }
        out.stats.ack_retries += 1;
        let factor = 1u32 << (item.attempt - 1).min(16);
        let delay = self
            .config
            .ack_retry_base
            .checked_mul(factor)
            .unwrap_or(Duration::MAX);
        match now.checked_add(delay) {
            Some(at) => self.retries.push((at, item)),
            None => self.report(out, item.id, Err(Error::server("ACK retries exhausted"))),
        }
    }

    /// The server accepted `req`.
    pub(super) fn on_reply(
        &mut self,
        now: Instant,
        req: WorkRequest,
        response: Response,
        out: &mut Out<'_>,
    ) {
        match req {
            WorkRequest::Pull { .. } => self.on_pulled(now, response, out),
            // A lost heartbeat is covered by the next one; a refused one means the lock is
            // gone, which the job's ACK will report.
            WorkRequest::Heartbeat { .. } => {}
            WorkRequest::Acks { batch, ids, .. } => {
                let ignored = match response {
                    Response::AckedBatch {
                        ignored_indices, ..
                    } => ignored_indices,
                    _ => Vec::new(),
                };
                for (i, id) in ids.into_iter().enumerate() {
                    self.report(out, id, Ok(!ignored.contains(&i)));
                }
                self.settled(now, batch);
            }
            WorkRequest::AckCheck { id } => {
                let result = match response {
                    Response::State(s) if s == "completed" => Ok(true),
                    Response::State(s) => Err(Error::server(format!(
                        "the ACK of job {id} did not take effect (state {s})"
                    ))),
                    _ => Err(Error::Protocol("GetState reply without a state".into())),
                };
                self.report(out, id, result);
                self.settled(now, None);
            }
            WorkRequest::Fail { id, .. } => {
                let applied = response == Response::Finalized { applied: true };
                self.report(out, id, Ok(applied));
                self.settled(now, None);
            }
        }
    }

    /// The server refused `req` with `msg`. Returns the ACK checks to send.
    pub(super) fn on_error(
        &mut self,
        now: Instant,
        req: WorkRequest,
        msg: String,
        out: &mut Out<'_>,
    ) -> Vec<WorkRequest> {
        let WorkRequest::Acks {
            batch,
            attempt,
            ids,
            results,
            tokens,
            ..
        } = req
        else {
            self.resolve(now, req, Error::server(msg), out);
            return Vec::new();
        };
        // The server names one job. A lock problem means nothing was applied, so the others go
        // again. A missing job means the others were applied (§6.6) — unless they are missing
        // too (after a lost connection, usually several are), and the server names only the
        // first: so each of the others is checked, not assumed.
        let named = ids.iter().position(|id| names_job(&msg, id));
        let lock_problem =
            msg.starts_with("Lock token") || msg.starts_with("Invalid or expired lock token");
        let tokens = tokens.unwrap_or_default();
        let mut results = results.into_iter();
        let mut checks = Vec::new();
        for (i, id) in ids.into_iter().enumerate() {
            let result = results.next().unwrap_or(Value::Nil);
            if Some(i) == named || named.is_none() {
                self.report(out, id, Err(Error::server(msg.clone())));
            } else if lock_problem {
                let item = AckItem {
                    id,
                    token: tokens.get(i).filter(|t| !t.is_empty()).cloned(),
                    result,
                    attempt,
                };
                self.requeue_ack(now, item, out);
            } else {
                checks.push(self.check_ack(id, out.stats));
            }
        }
        self.settled(now, batch);
        checks
    }

    /// `req` as the command another broker sharing this one's store can take, if it settles
    /// jobs (an ACKB or a FAIL, with their lock tokens); it is then done here. Anything else
    /// is given back.
    pub(super) fn hand_off(
        &mut self,
        now: Instant,
        mut req: WorkRequest,
    ) -> Result<Command, WorkRequest> {
        let batch = match &req {
            WorkRequest::Acks { batch, .. } => *batch,
            WorkRequest::Fail { .. } => None,
            _ => return Err(req),
        };
        let cmd = req.with_command(Command::clone);
        // Settled on another broker now, which has its lock.
        match &req {
            WorkRequest::Acks { ids, .. } => ids.iter().for_each(|id| {
                self.finishing.remove(id);
            }),
            WorkRequest::Fail { id, .. } => {
                self.finishing.remove(id);
            }
            _ => {}
        }
        self.settled(now, batch);
        Ok(cmd)
    }

    /// The connection `req` was written on is gone (`why`). Returns it if it is safe to send
    /// again (an ACK check is a read); everything else resolves.
    pub(super) fn on_lost(
        &mut self,
        now: Instant,
        req: WorkRequest,
        why: &FailKind,
        out: &mut Out<'_>,
    ) -> Option<WorkRequest> {
        match req {
            WorkRequest::AckCheck { .. } if why.allows_resend() => Some(req),
            other => {
                self.resolve(now, other, why.error(true), out);
                None
            }
        }
    }

    /// `req` will get no reply: the jobs it settles fail with `err`.
    pub(super) fn resolve(
        &mut self,
        now: Instant,
        req: WorkRequest,
        err: Error,
        out: &mut Out<'_>,
    ) {
        match req {
            WorkRequest::Pull { .. } => self.on_pull_failed(now),
            WorkRequest::Heartbeat { .. } => {}
            WorkRequest::Acks { batch, ids, .. } => {
                for id in ids {
                    self.report(out, id, Err(err.clone()));
                }
                self.settled(now, batch);
            }
            WorkRequest::Fail { id, .. } | WorkRequest::AckCheck { id } => {
                self.report(out, id, Err(err));
                self.settled(now, None);
            }
        }
    }
}

/// Whether a server message ends by naming job `id` ("… for job <id>", "…: <id>"), as a whole
/// word: id "7" is not named by a message about job "17".
fn names_job(msg: &str, id: &str) -> bool {
    !id.is_empty() && msg.strip_suffix(id).is_some_and(|head| head.ends_with(' '))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pulled(w: &mut WorkerState, now: Instant, ids: &[&str]) -> Vec<Event> {
        let mut stats = SessionStats::default();
        let mut events = std::collections::VecDeque::new();
        let mut out = Out {
            events: &mut events,
            stats: &mut stats,
        };
        let jobs = ids
            .iter()
            .map(|id| crate::wire::Job::new(*id, "q", "n", Value::Nil))
            .collect();
        let tokens = ids.iter().map(|id| format!("tok-{id}")).collect();
        w.on_reply(
            now,
            WorkRequest::Pull {
                args: PullArgs::default(),
                count: 2,
            },
            Response::PulledBatch { jobs, tokens },
            &mut out,
        );
        events.into()
    }

    #[test]
    fn drained_is_reported_once_per_empty_spell() {
        let now = crate::test_origin();
        let mut w = WorkerState::new(WorkerConfig::new("q").concurrency(2)).unwrap();
        let drained = |events: &[Event]| events.iter().filter(|e| **e == Event::Drained).count();
        assert_eq!(drained(&pulled(&mut w, now, &[])), 1, "first empty pull");
        assert_eq!(drained(&pulled(&mut w, now, &[])), 0, "still empty");
        let events = pulled(&mut w, now, &["a"]);
        assert_eq!(drained(&events), 0);
        assert!(matches!(events.as_slice(), [Event::Job { .. }]));
        assert_eq!(drained(&pulled(&mut w, now, &[])), 1, "empty again");
    }

    #[test]
    fn a_paused_worker_does_not_pull_and_a_taken_job_frees_its_slot() {
        let now = crate::test_origin();
        let mut stats = SessionStats::default();
        let mut w = WorkerState::new(WorkerConfig::new("q").concurrency(2)).unwrap();
        w.set_paused(true);
        assert!(
            w.poll_requests(now, true, &mut stats).is_empty(),
            "paused: no pull"
        );
        w.set_paused(false);
        let reqs = w.poll_requests(now, true, &mut stats);
        assert!(matches!(
            reqs.as_slice(),
            [WorkRequest::Pull { count: 2, .. }]
        ));
        pulled(&mut w, now, &["a", "b"]);
        assert_eq!(w.token("a"), Some("tok-a"));
        assert_eq!(w.held(), ["a", "b"]);
        // Taken (delayed, released): its token goes to the caller, its slot is free again.
        assert_eq!(w.take("a").unwrap().as_deref(), Some("tok-a"));
        assert!(w.take("a").is_err(), "no longer held");
        assert_eq!(w.held(), ["b"]);
        let reqs = w.poll_requests(now, true, &mut stats);
        assert!(matches!(
            reqs.as_slice(),
            [WorkRequest::Pull { count: 1, .. }]
        ));
    }

    #[test]
    fn concurrency_beyond_one_pull_fills_its_slots_over_several_pulls() {
        let now = crate::test_origin();
        let mut stats = SessionStats::default();
        let mut w = WorkerState::new(WorkerConfig::new("q").concurrency(1500)).unwrap();
        let pull_count = |reqs: Vec<WorkRequest>| match reqs.as_slice() {
            [WorkRequest::Pull { count, .. }] => *count,
            other => panic!("expected one pull, got {other:?}"),
        };
        assert_eq!(pull_count(w.poll_requests(now, true, &mut stats)), 1000);
        let ids: Vec<String> = (0..1000).map(|i| format!("j{i}")).collect();
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        pulled(&mut w, now, &ids);
        assert_eq!(w.jobs_held(), 1000);
        assert_eq!(pull_count(w.poll_requests(now, true, &mut stats)), 500);
        let more: Vec<String> = (1000..1500).map(|i| format!("j{i}")).collect();
        let more: Vec<&str> = more.iter().map(String::as_str).collect();
        pulled(&mut w, now, &more);
        assert_eq!(w.jobs_held(), 1500);
        assert!(
            w.poll_requests(now, true, &mut stats).is_empty(),
            "every slot is taken: no pull"
        );
    }

    #[test]
    fn a_rate_limit_holds_pulls_off_until_it_ends() {
        let now = crate::test_origin();
        let mut stats = SessionStats::default();
        let mut w = WorkerState::new(WorkerConfig::new("q")).unwrap();
        let later = now + Duration::from_secs(5);
        w.pull_not_before(later);
        assert!(w.poll_requests(now, true, &mut stats).is_empty());
        assert_eq!(w.poll_timeout(), Some(later));
        assert!(w.handle_timeout(later, &mut stats).is_none());
        assert_eq!(w.poll_requests(later, true, &mut stats).len(), 1);
    }

    #[test]
    fn the_limiter_caps_pulls_per_window() {
        let now = crate::test_origin();
        let mut stats = SessionStats::default();
        let window = Duration::from_secs(10);
        let config = WorkerConfig::new("q")
            .concurrency(5)
            .limiter(Some((2, window)));
        let mut w = WorkerState::new(config).unwrap();
        let reqs = w.poll_requests(now, true, &mut stats);
        assert!(matches!(
            reqs.as_slice(),
            [WorkRequest::Pull { count: 2, .. }]
        ));
        pulled(&mut w, now, &["a", "b"]);
        assert!(
            w.poll_requests(now, true, &mut stats).is_empty(),
            "window used up"
        );
        assert_eq!(w.poll_timeout(), Some(now + window));
        let later = now + window;
        w.handle_timeout(later, &mut stats);
        // The held jobs' lock heartbeat is due too; the pull takes a new window's two.
        let reqs = w.poll_requests(later, true, &mut stats);
        assert!(
            reqs.iter()
                .any(|r| matches!(r, WorkRequest::Pull { count: 2, .. })),
            "{reqs:?}"
        );
    }

    /// The ids a heartbeat among `reqs` renews (`None`: no heartbeat).
    fn renewed(reqs: &[WorkRequest]) -> Option<Vec<String>> {
        reqs.iter().find_map(|r| match r {
            WorkRequest::Heartbeat { body } => Some(
                body.get("ids")?
                    .as_array()?
                    .iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect(),
            ),
            _ => None,
        })
    }

    #[test]
    fn a_done_jobs_lock_is_renewed_until_the_server_has_its_outcome() {
        let now = crate::test_origin();
        let second = Duration::from_secs(1);
        let mut stats = SessionStats::default();
        let mut events = std::collections::VecDeque::new();
        let config = WorkerConfig::new("q")
            .concurrency(3)
            .heartbeat_interval(Some(second));
        let mut w = WorkerState::new(config).unwrap();
        w.poll_requests(now, true, &mut stats);
        pulled(&mut w, now, &["a", "b", "c"]);
        // "a" completes and "b" fails; neither answer has come back.
        assert!(w
            .complete_job(now, "a", Value::Nil, &mut stats)
            .unwrap()
            .is_none());
        let fail = w
            .fail_job("b", "boom", false, Vec::new(), &mut stats)
            .unwrap();
        let mut ack = None;
        let mut t = now;
        while ack.is_none() {
            ack = w
                .poll_requests(t, true, &mut stats)
                .into_iter()
                .find(|r| matches!(r, WorkRequest::Acks { .. }));
            t = w.poll_timeout().expect("the ACK is due");
            w.handle_timeout(t, &mut stats);
        }
        let t1 = now + second;
        w.handle_timeout(t1, &mut stats);
        let reqs = w.poll_requests(t1, true, &mut stats);
        assert_eq!(
            renewed(&reqs),
            Some(vec!["a".into(), "b".into(), "c".into()]),
            "outcomes on their way keep their locks"
        );
        let mut out = Out {
            events: &mut events,
            stats: &mut stats,
        };
        let acked = Response::AckedBatch {
            ignored_indices: Vec::new(),
            ignored_ids: Vec::new(),
        };
        w.on_reply(t1, ack.unwrap(), acked, &mut out);
        w.on_reply(t1, fail, Response::Finalized { applied: true }, &mut out);
        let t2 = t1 + second;
        w.handle_timeout(t2, &mut stats);
        let reqs = w.poll_requests(t2, true, &mut stats);
        assert_eq!(
            renewed(&reqs),
            Some(vec!["c".into()]),
            "answered: not renewed"
        );
        // The last job is taken (delayed elsewhere): nothing is left to renew.
        w.take("c").unwrap();
        let t3 = t2 + second;
        w.handle_timeout(t3, &mut stats);
        assert_eq!(renewed(&w.poll_requests(t3, true, &mut stats)), None);
    }

    #[test]
    fn a_job_is_named_as_a_whole_word() {
        assert!(names_job(
            "Job not found or not in processing state: 17",
            "17"
        ));
        assert!(!names_job(
            "Job not found or not in processing state: 17",
            "7"
        ));
        assert!(names_job("Lock token required for job abc", "abc"));
        assert!(!names_job("anything", ""));
    }
}
