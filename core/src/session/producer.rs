//! The producer half of a session: adds go through one batcher per queue into PUSHB; durable
//! adds and adds with batching off go out alone as PUSH; `add_bulk` is one PUSHB.

use std::collections::{HashMap, VecDeque};
use std::time::Instant;

use crate::batch::{Admission, BatchConfig, BatchId, Batcher, ItemId, PushError};
use crate::error::Error;
use crate::wire::{pushb_jobs_budget, validate_queue_name, Command, JobSpec, ValidationError};

use super::machine::{OpId, Origin, Session};

/// One add waiting in a batcher.
#[derive(Debug)]
pub(super) struct AddItem {
    pub(super) op: OpId,
    pub(super) job: JobSpec,
    /// When the add must have been written: `command_timeout` after `add`.
    pub(super) deadline: Instant,
}

/// The batchers, one per queue (a PUSHB names one queue), in creation order so that draining
/// them is deterministic.
#[derive(Debug)]
pub(super) struct Producers {
    config: Option<BatchConfig>,
    queues: Vec<(String, Batcher<AddItem>)>,
    by_name: HashMap<String, usize>,
    /// Where each buffered add sits, so a caller can cancel it.
    items: HashMap<OpId, (usize, ItemId)>,
    /// `(deadline, op)` of buffered adds in add order. Entries of adds that already left the
    /// buffer are skipped lazily, and popped from the front as they go, so this stays about as
    /// long as the buffer.
    expiry: VecDeque<(Instant, OpId)>,
    closed: bool,
}

impl Producers {
    pub(super) fn new(config: Option<BatchConfig>) -> Self {
        Producers {
            config,
            queues: Vec::new(),
            by_name: HashMap::new(),
            items: HashMap::new(),
            expiry: VecDeque::new(),
            closed: false,
        }
    }

    fn queue_index(&mut self, now: Instant, name: &str) -> usize {
        if let Some(&i) = self.by_name.get(name) {
            return i;
        }
        let config = self.config.clone().unwrap_or_default();
        // The config was validated with the session and the budget is far above 0, so this
        // cannot fail. Every PUSHB of this queue stays within one frame: its items are capped
        // at what the frame holds besides the envelope.
        let mut batcher = Batcher::new(config)
            .and_then(|b| b.with_max_batch_bytes(pushb_jobs_budget(name)))
            .expect("batch config validated with the session");
        if self.closed {
            batcher.close(now);
        }
        self.queues.push((name.to_owned(), batcher));
        self.by_name.insert(name.to_owned(), self.queues.len() - 1);
        self.queues.len() - 1
    }

    pub(super) fn complete(&mut self, now: Instant, queue: usize, batch: Option<BatchId>) {
        if let (Some(batch), Some((_, b))) = (batch, self.queues.get_mut(queue)) {
            b.complete(now, batch);
        }
    }

    pub(super) fn poll_timeout(&self) -> Option<Instant> {
        self.queues
            .iter()
            .filter_map(|(_, b)| b.poll_timeout())
            .min()
    }

    /// The deadline of the oldest add still buffered.
    pub(super) fn next_expiry(&self) -> Option<Instant> {
        self.expiry.front().map(|(t, _)| *t)
    }

    fn forget_sent(&mut self) {
        while let Some((_, op)) = self.expiry.front() {
            if self.items.contains_key(op) {
                break;
            }
            self.expiry.pop_front();
        }
    }

    pub(super) fn handle_timeout(&mut self, now: Instant) {
        for (_, b) in &mut self.queues {
            b.handle_timeout(now);
        }
    }

    pub(super) fn close(&mut self, now: Instant) {
        self.closed = true;
        for (_, b) in &mut self.queues {
            b.close(now);
        }
    }

    pub(super) fn is_drained(&self) -> bool {
        self.queues.iter().all(|(_, b)| b.is_drained())
    }

    /// Per-queue batcher statistics.
    pub(super) fn stats(&self) -> impl Iterator<Item = (&str, &crate::batch::BatchStats)> {
        self.queues.iter().map(|(n, b)| (n.as_str(), b.stats()))
    }

    pub(super) fn pending(&self) -> (usize, usize, usize) {
        self.queues.iter().fold((0, 0, 0), |(i, b, p), (_, q)| {
            (i + q.pending_items(), b + q.pending_bytes(), p + q.parked())
        })
    }
}

impl Session {
    /// Adds one job to `queue`. Its outcome (the job id, or why not) arrives as
    /// [`Event::Done`](super::Event::Done) with the returned id.
    ///
    /// Validation happens here, so a bad job fails alone, at once, with an error naming the
    /// field; it never sinks the jobs batched with it. Nor do good jobs sink together: each
    /// PUSHB is capped by encoded bytes at what one frame holds, so a batch that would overflow
    /// the 64 MiB frame limit leaves as several. With batching on, the add is flushed at
    /// once when no batch is in flight (sequential code pays nothing) and otherwise joins the
    /// next PUSHB. `durable` jobs bypass the batcher and go out alone as PUSH.
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] for a bad queue name or job (field `data` for a job that alone would
    /// not fit in a frame), [`Error::Closed`] after
    /// [`close`](Session::close), [`Error::Overflow`] when the buffer is full under the
    /// `Reject` policy.
    pub fn add(&mut self, now: Instant, queue: &str, job: JobSpec) -> Result<OpId, Error> {
        validate_queue_name(queue)?;
        job.validate()?;
        if self.is_closing() {
            return Err(Error::Closed);
        }
        let op = self.next_op_id();
        self.stats.adds += 1;
        if job.opts.is_durable() || self.producers.config.is_none() {
            self.stats.adds_direct += 1;
            self.enqueue(
                now,
                Command::Push {
                    queue: queue.to_owned(),
                    job,
                },
                Origin::Push(op),
            );
            return Ok(op);
        }
        // Exact: what this job adds to a PUSHB. The batcher caps every batch at the frame's
        // budget, so valid jobs never sink together in a PUSHB too large to send.
        let bytes = job.pushb_len();
        let budget = pushb_jobs_budget(queue);
        if bytes > budget {
            // Even alone it would not fit in a frame: refused before anything is sent.
            return Err(Error::Invalid(ValidationError {
                field: "data",
                message: format!(
                    "job too large to send: {bytes} bytes encoded, at most {budget} fit in one frame"
                ),
            }));
        }
        let qi = self.producers.queue_index(now, queue);
        let batcher = &mut self.producers.queues[qi].1;
        let deadline = now + self.config.command_timeout;
        match batcher.push(now, AddItem { op, job, deadline }, bytes) {
            Ok((item, admission)) => {
                if admission == Admission::Parked {
                    self.stats.adds_parked += 1;
                }
                self.producers.items.insert(op, (qi, item));
                self.producers.expiry.push_back((deadline, op));
                self.collect_rejected(qi);
                Ok(op)
            }
            Err(PushError::Closed(_)) => Err(Error::Closed),
            Err(PushError::Rejected(_)) => {
                self.stats.adds_rejected += 1;
                Err(Error::Overflow)
            }
            Err(PushError::TooLarge(_)) => Err(Error::Overflow),
        }
    }

    /// Adds many jobs to `queue` as one PUSHB; the outcome is one
    /// [`Response::PushedBatch`](crate::wire::Response::PushedBatch) with the ids in order.
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] naming the first bad job (`jobs[i]: …`), or [`Error::Closed`].
    pub fn add_bulk(
        &mut self,
        now: Instant,
        queue: &str,
        jobs: Vec<JobSpec>,
    ) -> Result<OpId, Error> {
        validate_queue_name(queue)?;
        for (i, job) in jobs.iter().enumerate() {
            job.validate().map_err(|e| e.in_batch(i))?;
        }
        if self.is_closing() {
            return Err(Error::Closed);
        }
        let op = self.next_op_id();
        self.stats.adds += jobs.len() as u64;
        self.enqueue(
            now,
            Command::PushB {
                queue: queue.to_owned(),
                jobs,
            },
            Origin::Bulk(op),
        );
        Ok(op)
    }

    /// Withdraws an operation whose request has not been sent yet (its caller gave up). Returns
    /// whether it was withdrawn; if not, its outcome still arrives as usual.
    pub fn cancel(&mut self, op: OpId) -> bool {
        if let Some((qi, item)) = self.producers.items.remove(&op) {
            if self.producers.queues[qi].1.cancel(item).is_some() {
                self.stats.adds_cancelled += 1;
                return true;
            }
        }
        // A re-send waiting after a reconnect was written before and may have been applied:
        // it can no longer be withdrawn.
        let pos = self.outgoing.iter().position(|q| {
            !q.written
                && matches!(q.origin, Origin::Push(o) | Origin::Bulk(o) | Origin::Request(o) if o == op)
        });
        if let Some(pos) = pos {
            self.outgoing.remove(pos);
            self.stats.adds_cancelled += 1;
            return true;
        }
        false
    }

    /// Adds still buffered (or parked) at their deadline fail with a timeout: they were never
    /// written, so they were certainly not applied.
    pub(super) fn expire_buffered_adds(&mut self, now: Instant) {
        self.producers.forget_sent();
        while let Some(&(deadline, op)) = self.producers.expiry.front() {
            if deadline > now {
                break;
            }
            self.producers.expiry.pop_front();
            if let Some((qi, item)) = self.producers.items.remove(&op) {
                if self.producers.queues[qi].1.cancel(item).is_some() {
                    self.stats.timeouts += 1;
                    self.stats.adds_failed += 1;
                    self.done(
                        op,
                        Err(Error::Timeout {
                            maybe_applied: false,
                        }),
                    );
                }
            }
            self.producers.forget_sent();
        }
    }

    /// DropOldest victims resolve with an overflow error.
    fn collect_rejected(&mut self, qi: usize) {
        while let Some((_, item, _)) = self.producers.queues[qi].1.poll_rejected() {
            self.producers.items.remove(&item.op);
            self.stats.adds_rejected += 1;
            self.done(item.op, Err(Error::Overflow));
        }
    }

    /// Moves every due batch into the send queue.
    pub(super) fn drain_producers(&mut self, now: Instant) {
        for qi in 0..self.producers.queues.len() {
            while let Some(batch) = self.producers.queues[qi].1.poll_batch(now) {
                for (_, item) in &batch.items {
                    self.producers.items.remove(&item.op);
                }
                self.stats.record_flush(batch.reason);
                let name = self.producers.queues[qi].0.clone();
                self.add_item_batch(now, qi, batch.id, name, batch.items);
            }
        }
        self.producers.forget_sent();
    }

    /// Per-queue batcher statistics: items, batches, flushes by reason, batch sizes.
    pub fn batch_stats(&self) -> impl Iterator<Item = (&str, &crate::batch::BatchStats)> {
        self.producers.stats()
    }

    /// Adds buffered (items, bytes) and parked (waiting for room under backpressure).
    pub fn pending_adds(&self) -> (usize, usize, usize) {
        self.producers.pending()
    }
}
