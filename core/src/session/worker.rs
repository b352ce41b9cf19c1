//! The worker half of a session: long-poll PULLB for as many jobs as there are free slots,
//! hand jobs out, batch completions into ACKB (with lock tokens), send failures as FAIL.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::batch::{self, BatchId, Batcher};
use crate::error::Error;
use crate::wire::{millis, Command, PullArgs, Response, Value};

use super::config::WorkerConfig;
use super::machine::{Event, Origin, Session};

/// After an empty non-blocking poll or a refused pull, wait this long before polling again, so
/// an idle worker does not spin (bunqueue's `drainDelay`).
const IDLE_POLL_DELAY: Duration = Duration::from_millis(50);
const ERROR_POLL_DELAY: Duration = Duration::from_millis(500);

/// Most stack lines a FAIL carries: bunqueue keeps at most 100 (protocol reference §6.7).
pub const MAX_STACK_LINES: usize = 100;
/// Longest stack line a FAIL carries, in bytes (longer ones are cut at a character boundary),
/// so 100 lines stay a small frame whatever an error's text holds.
pub const MAX_STACK_LINE_BYTES: usize = 2048;

/// JobHeartbeatB for every held job, in a stable order, with its token (`""` for none).
fn heartbeat_command(active: &HashMap<String, Option<String>>) -> Command {
    let mut held: Vec<(&String, &Option<String>)> = active.iter().collect();
    held.sort();
    let ids = held
        .iter()
        .map(|(id, _)| Value::from(id.as_str()))
        .collect();
    let tokens = held
        .iter()
        .map(|(_, t)| Value::from(t.as_deref().unwrap_or_default()))
        .collect();
    Command::Other {
        cmd: "JobHeartbeatB".into(),
        body: Value::map([
            ("cmd", Value::from("JobHeartbeatB")),
            ("ids", Value::Array(ids)),
            ("tokens", Value::Array(tokens)),
        ]),
    }
}

/// One completion on its way to an ACKB.
#[derive(Debug, Clone)]
pub(super) struct AckItem {
    pub(super) id: String,
    pub(super) token: Option<String>,
    pub(super) result: Value,
    /// How many times it has been sent already.
    pub(super) attempt: u32,
}

#[derive(Debug)]
pub(super) struct WorkerState {
    config: WorkerConfig,
    acks: Batcher<AckItem>,
    /// Jobs handed out and not yet completed or failed, with their lock tokens.
    active: HashMap<String, Option<String>>,
    pull_in_flight: bool,
    next_pull_at: Option<Instant>,
    /// ACKs waiting to be retried, with when.
    retries: Vec<(Instant, AckItem)>,
    /// FAILs and ACKBs out and unanswered.
    settling: usize,
    /// `close` was called: no more pulls.
    pub(super) stopping: bool,
    /// When the held jobs' locks are renewed next (while any are held).
    next_heartbeat: Option<Instant>,
}

impl WorkerState {
    pub(super) fn new(config: WorkerConfig) -> Result<Self, batch::ConfigError> {
        Ok(WorkerState {
            acks: Batcher::new(config.acks.clone())?,
            config,
            active: HashMap::new(),
            pull_in_flight: false,
            next_pull_at: None,
            retries: Vec::new(),
            settling: 0,
            stopping: false,
            next_heartbeat: None,
        })
    }

    pub(super) fn poll_timeout(&self) -> Option<Instant> {
        [
            self.acks.poll_timeout(),
            self.retries.iter().map(|(t, _)| *t).min(),
            self.next_pull_at.filter(|_| !self.stopping),
            self.next_heartbeat.filter(|_| !self.active.is_empty()),
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

    fn free_slots(&self) -> usize {
        self.config.concurrency.saturating_sub(self.active.len())
    }
}

impl Session {
    /// A job handed out by [`Event::Job`] finished: its result goes to the server in the next
    /// ACKB. The server's answer arrives as [`Event::JobSettled`].
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`]-like misuse is reported as [`Error::Closed`] when there is no worker,
    /// and as [`Error::Server`]-free `false` return when the job is not one this worker holds.
    pub fn complete_job(&mut self, now: Instant, id: &str, result: Value) -> Result<(), Error> {
        let worker = self.worker.as_mut().ok_or(Error::Closed)?;
        let Some(token) = worker.active.remove(id) else {
            return Err(Error::Protocol(format!(
                "job {id} is not held by this worker"
            )));
        };
        let item = AckItem {
            id: id.to_owned(),
            token,
            result,
            attempt: 0,
        };
        let bytes = item.id.len() + 64;
        if let Err(e) = worker.acks.push(now, item, bytes) {
            // The ACK batcher is never closed while jobs are held and never rejects (its
            // policy is backpressure), so this is the oversized-result case: send it alone.
            let item = e.into_inner();
            self.send_acks(now, None, vec![item]);
        }
        self.stats.jobs_completed += 1;
        Ok(())
    }

    /// A job handed out by [`Event::Job`] failed: a FAIL goes out at once. With
    /// `unrecoverable`, the server does not retry it. Sends no stack; see
    /// [`fail_job_with_stack`](Self::fail_job_with_stack).
    ///
    /// # Errors
    ///
    /// As [`complete_job`](Self::complete_job).
    pub fn fail_job(
        &mut self,
        now: Instant,
        id: &str,
        error: &str,
        unrecoverable: bool,
    ) -> Result<(), Error> {
        self.fail_job_with_stack(now, id, error, unrecoverable, Vec::new())
    }

    /// As [`fail_job`](Self::fail_job), with `stack` lines the server stores as the job's
    /// `stacktrace` (bunqueue's own workers send the raise site there). Only the first
    /// [`MAX_STACK_LINES`] are sent, each cut to at most [`MAX_STACK_LINE_BYTES`] bytes, so a
    /// FAIL stays small whatever the error holds.
    ///
    /// # Errors
    ///
    /// As [`complete_job`](Self::complete_job).
    ///
    /// ```
    /// use std::time::Instant;
    /// use autobatch_core::session::{Session, SessionConfig, WorkerConfig};
    /// let config = SessionConfig::default().worker(Some(WorkerConfig::new("q")));
    /// let mut s = Session::new(config, Instant::now()).unwrap();
    /// let stack = vec!["parse failed".into(), "caused by: bad digit".into()];
    /// // Only jobs the worker holds can be failed.
    /// assert!(s.fail_job_with_stack(Instant::now(), "not-held", "parse failed", false, stack).is_err());
    /// ```
    pub fn fail_job_with_stack(
        &mut self,
        now: Instant,
        id: &str,
        error: &str,
        unrecoverable: bool,
        mut stack: Vec<String>,
    ) -> Result<(), Error> {
        let worker = self.worker.as_mut().ok_or(Error::Closed)?;
        let Some(token) = worker.active.remove(id) else {
            return Err(Error::Protocol(format!(
                "job {id} is not held by this worker"
            )));
        };
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
        worker.settling += 1;
        self.stats.jobs_failed += 1;
        self.enqueue(
            now,
            Command::Fail {
                id: id.to_owned(),
                error: Some(error.to_owned()),
                token,
                unrecoverable,
                stack,
            },
            Origin::Fail,
        );
        Ok(())
    }

    /// Jobs handed out and not yet completed or failed.
    pub fn jobs_held(&self) -> usize {
        self.worker.as_ref().map_or(0, |w| w.active.len())
    }

    pub(super) fn on_pulled(&mut self, now: Instant, response: Response) {
        let Some(worker) = self.worker.as_mut() else {
            return;
        };
        worker.pull_in_flight = false;
        let jobs = match response {
            Response::PulledBatch { jobs, tokens } => {
                let mut tokens = tokens.into_iter();
                jobs.into_iter()
                    .map(|j| (j, tokens.next().filter(|t| !t.is_empty())))
                    .collect()
            }
            Response::Pulled { job, token } => job.map(|j| (j, token)).into_iter().collect(),
            _ => Vec::new(),
        };
        if jobs.is_empty() && worker.config.poll_timeout.as_millis() == 0 {
            worker.next_pull_at = Some(now + IDLE_POLL_DELAY);
        }
        if worker.active.is_empty() && !jobs.is_empty() {
            worker.next_heartbeat = worker.config.heartbeat_interval.map(|h| now + h);
        }
        for (job, token) in jobs {
            worker.active.insert(job.id.clone(), token);
            self.stats.jobs_received += 1;
            self.events.push_back(Event::Job { job });
        }
    }

    pub(super) fn on_pull_failed(&mut self, now: Instant) {
        if let Some(w) = self.worker.as_mut() {
            w.pull_in_flight = false;
            w.next_pull_at = Some(now + ERROR_POLL_DELAY);
        }
    }

    pub(super) fn ack_batch_done(&mut self, now: Instant, batch: Option<BatchId>) {
        if let Some(w) = self.worker.as_mut() {
            w.settling = w.settling.saturating_sub(1);
            if let Some(b) = batch {
                w.acks.complete(now, b);
            }
        }
    }

    /// Asks the server whether an ACK took effect: the answer settles the job.
    pub(super) fn check_ack(&mut self, now: Instant, id: String) {
        if let Some(w) = self.worker.as_mut() {
            w.settling += 1;
        }
        self.stats.ack_checks += 1;
        self.enqueue(now, Command::GetState { id }, Origin::AckCheck);
    }

    /// Schedules another try of an ACK that failed for a reason that may pass, or gives up.
    pub(super) fn requeue_ack(&mut self, now: Instant, mut item: AckItem) {
        let Some(w) = self.worker.as_mut() else {
            return;
        };
        item.attempt += 1;
        if item.attempt > w.config.ack_retries {
            self.events.push_back(Event::JobSettled {
                id: item.id,
                result: Err(Error::server("ACK retries exhausted")),
            });
            return;
        }
        self.stats.ack_retries += 1;
        let delay = w.config.ack_retry_base * (1u32 << (item.attempt - 1).min(16));
        w.retries.push((now + delay, item));
    }

    fn send_acks(&mut self, now: Instant, batch: Option<BatchId>, items: Vec<AckItem>) {
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
        if let Some(w) = self.worker.as_mut() {
            w.settling += 1;
        }
        self.stats.ack_batches_sent += 1;
        self.enqueue(
            now,
            Command::AckB {
                ids,
                results: Some(results),
                tokens: any_token.then_some(tokens),
            },
            Origin::Acks { batch, attempt },
        );
    }

    pub(super) fn worker_timeout(&mut self, now: Instant) {
        let Some(w) = self.worker.as_mut() else {
            return;
        };
        w.acks.handle_timeout(now);
        if w.next_pull_at.is_some_and(|t| t <= now) {
            w.next_pull_at = None;
        }
        if w.retries.iter().any(|(t, _)| *t <= now) {
            let (due, keep): (Vec<_>, Vec<_>) = w.retries.drain(..).partition(|(t, _)| *t <= now);
            w.retries = keep;
            let items: Vec<AckItem> = due.into_iter().map(|(_, i)| i).collect();
            self.send_acks(now, None, items);
        }
    }

    /// Moves due ACK batches into the send queue and asks for more jobs when slots are free.
    pub(super) fn drive_worker(&mut self, now: Instant) {
        let connected = self.is_connected();
        let Some(w) = self.worker.as_mut() else {
            return;
        };
        if w.stopping && w.active.is_empty() && !w.acks.is_closed() {
            w.acks.close(now);
        }
        let mut batches = Vec::new();
        while let Some(b) = w.acks.poll_batch(now) {
            batches.push(b);
        }
        let pull = !w.stopping
            && !w.pull_in_flight
            && w.next_pull_at.is_none()
            && w.free_slots() > 0
            && connected;
        let pull_cmd = pull.then(|| {
            w.pull_in_flight = true;
            Command::PullB {
                args: PullArgs {
                    queue: w.config.queue.clone(),
                    timeout: Some(millis(w.config.poll_timeout)),
                    owner: Some(w.config.owner.clone()),
                    lock_ttl: Some(millis(w.config.lock_ttl)),
                },
                count: w.free_slots().min(1000) as i64,
            }
        });
        // Due heartbeats are rescheduled even when they cannot go out (disconnected): a due
        // time left in the past would make the driver's timer fire in a loop.
        let mut heartbeat = None;
        if !w.active.is_empty() && w.next_heartbeat.is_some_and(|t| t <= now) {
            w.next_heartbeat = w.config.heartbeat_interval.map(|h| now + h);
            if connected {
                heartbeat = Some(heartbeat_command(&w.active));
            }
        }
        for b in batches {
            let items = b.items.into_iter().map(|(_, i)| i).collect();
            self.send_acks(now, Some(b.id), items);
        }
        if let Some(cmd) = heartbeat {
            self.stats.heartbeats_sent += 1;
            self.enqueue(now, cmd, Origin::Heartbeat);
        }
        if let Some(cmd) = pull_cmd {
            self.enqueue(now, cmd, Origin::Pull);
        }
    }
}
