//! The producer half of a session: adds go through one batcher per queue into PUSHB; a lone add
//! to an idle queue, durable adds and adds with batching off go out alone as PUSH; `add_bulk` is
//! one PUSHB.
//!
//! [`Producers`] owns the batchers and the requests they make ([`AddRequest`]); the machine
//! queues what it returns and hands each reply back to it.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use crate::batch::{Admission, BatchConfig, BatchId, Batcher, FlushReason, ItemId, PushError};
use crate::error::Error;
use crate::hash::IntMap;
use crate::wire::{
    encode_push_encoded, encode_pushb_encoded, pushb_jobs_budget, CommandKind, EncodedJob,
    Response, ValidationError,
};

use super::check::{self, Check, Found};
use super::event::{FailKind, OpId, Out};

/// One add waiting in a batcher.
#[derive(Debug)]
pub(super) struct AddItem {
    op: OpId,
    /// Encoded when added: a few dozen bytes for a small job where its `JobSpec` was about
    /// 700, and six words to move on its way to the wire (into the batcher, out as a batch,
    /// into the request).
    job: EncodedJob,
    /// When the add must have been written: `command_timeout` after `add`.
    deadline: Instant,
}

/// An add on its way to the server, with what its reply needs.
#[derive(Debug)]
pub(super) enum AddRequest {
    /// A PUSHB of batched adds: `ops[i]` is `jobs[i]`. A re-sent or split batch keeps its
    /// `batch`, so its in-flight slot stays taken until it is answered.
    Batch {
        queue: usize,
        batch: Option<BatchId>,
        name: Arc<str>,
        ops: Vec<OpId>,
        jobs: Vec<EncodedJob>,
    },
    /// A single PUSH: durable, batching off, a lone add to an idle queue (held aside, see
    /// `Queue`), or a batch of one. A lone add or a batch of one leaves as PUSH
    /// because that is what it is: a PUSHB of one costs some servers much more (a bunqueue
    /// broker on PostgreSQL: 0.59x the rate), and sequential adds must pay nothing for
    /// batching. It keeps its batch's in-flight slot (`batch`), so adds made meanwhile are
    /// still buffered and batched.
    Push {
        op: OpId,
        queue: Arc<str>,
        job: EncodedJob,
        batch: Option<(usize, BatchId)>,
    },
    /// `add_bulk`: one PUSHB, one outcome.
    Bulk {
        op: OpId,
        queue: Arc<str>,
        jobs: Vec<EncodedJob>,
    },
    /// A GetJob for an add with a custom id that was written on a lost connection: it is
    /// written again only if no job has the id (see [`Check`]).
    Check(Check),
}

impl AddRequest {
    /// What its reply decodes as.
    pub(super) fn kind(&self) -> CommandKind {
        match self {
            AddRequest::Push { .. } => CommandKind::Push,
            AddRequest::Batch { .. } | AddRequest::Bulk { .. } => CommandKind::PushB,
            AddRequest::Check(c) => c.kind(),
        }
    }

    /// The operation a request not yet written stands for alone, so a caller can withdraw it.
    pub(super) fn single_op(&self) -> Option<OpId> {
        match self {
            AddRequest::Push {
                op, batch: None, ..
            }
            | AddRequest::Bulk { op, .. } => Some(*op),
            // A batch's own request holds its in-flight slot: it is withdrawn only through
            // the batcher, never alone.
            AddRequest::Push { batch: Some(_), .. } | AddRequest::Batch { .. } => None,
            // Its add was written already: withdrawing the lookup would not unwrite it.
            AddRequest::Check(_) => None,
        }
    }

    /// How many adds it carries (a bulk add counts each job, as [`SessionStats::adds`] does).
    ///
    /// [`SessionStats::adds`]: super::SessionStats::adds
    pub(super) fn len(&self) -> usize {
        match self {
            AddRequest::Batch { ops, .. } => ops.len(),
            AddRequest::Bulk { jobs, .. } => jobs.len(),
            AddRequest::Push { .. } => 1,
            AddRequest::Check(c) => c.len(),
        }
    }

    /// Appends the PUSH or PUSHB map (no frame header) to `out`, encoded from where the jobs
    /// sit: nothing is moved or copied to build a command first.
    pub(super) fn encode(&self, req_id: &str, out: &mut Vec<u8>) {
        match self {
            AddRequest::Batch { name, jobs, .. } => encode_pushb_encoded(name, jobs, req_id, out),
            AddRequest::Bulk { queue, jobs, .. } => encode_pushb_encoded(queue, jobs, req_id, out),
            AddRequest::Push { queue, job, .. } => encode_push_encoded(queue, job, req_id, out),
            AddRequest::Check(c) => c.encode(req_id, out),
        }
    }
}

/// An add held aside, out of the buffer, while its queue is idle.
#[derive(Debug)]
struct Held {
    item: AddItem,
    /// What it adds to a PUSHB, should it join one after all.
    bytes: usize,
}

/// One queue: its batcher, and at most one add held aside.
///
/// A lone add to an idle queue would leave at once as a batch of one (a PUSH). Buffering it
/// first costs the batcher's bookkeeping for nothing, so it is held here instead. Whether it
/// is alone is only known when the session is next polled for transmit (adds made together
/// all come before that poll): if another add for this queue comes first, both go into the
/// buffer and batch as usual; otherwise it leaves as PUSH holding an in-flight slot
/// ([`Batcher::send_alone`]). Invariant: `held` is `Some` only while the batcher is idle.
#[derive(Debug)]
struct Queue {
    /// Shared with every request made for this queue: a PUSH or PUSHB names its queue without
    /// a copy of the name.
    name: Arc<str>,
    batcher: Batcher<AddItem>,
    held: Option<Held>,
}

/// The batchers, one per queue (a PUSHB names one queue), in creation order so that draining
/// them is deterministic.
#[derive(Debug)]
pub(super) struct Producers {
    config: Option<BatchConfig>,
    queues: Vec<Queue>,
    by_name: HashMap<String, usize>,
    /// The queue of the last add: sequential adds name the same queue, and comparing one name
    /// is cheaper than hashing it.
    last_queue: usize,
    /// The queue of the last direct PUSH (see `direct_queue`).
    last_direct: Option<Arc<str>>,
    /// How many queues hold an add aside, so cancel and expiry look for one only if any.
    held: usize,
    /// Where each buffered add sits, so a caller can cancel it.
    items: IntMap<OpId, (usize, ItemId)>,
    /// `(deadline, op)` of buffered adds in add order. Entries of adds that already left the
    /// buffer are skipped lazily, and popped from the front as they go, so this stays about as
    /// long as the buffer.
    expiry: VecDeque<(Instant, OpId)>,
    /// The vectors of answered batches, emptied, for the next batches to fill.
    spare: Spares,
    closed: bool,
}

/// Emptied vectors of answered PUSHB batches. A batch of 50 holds 2.4 KiB of jobs: allocating
/// and freeing that per flush made glibc's malloc consolidate its small-chunk bins each time,
/// which then slowed every small allocation of the adds around it.
#[derive(Debug, Default)]
struct Spares {
    ops: Vec<Vec<OpId>>,
    jobs: Vec<Vec<EncodedJob>>,
}

/// Emptied vectors kept: a few batches in flight reuse them, more allocate.
const SPARES_KEPT: usize = 4;

impl Spares {
    fn ops(&mut self, n: usize) -> Vec<OpId> {
        let mut v = self.ops.pop().unwrap_or_default();
        v.reserve(n);
        v
    }

    fn jobs(&mut self, n: usize) -> Vec<EncodedJob> {
        let mut v = self.jobs.pop().unwrap_or_default();
        v.reserve(n);
        v
    }

    /// Keeps an answered batch's vectors, emptied (the jobs' bytes are freed here).
    fn give_back(&mut self, mut ops: Vec<OpId>, mut jobs: Vec<EncodedJob>) {
        if self.ops.len() < SPARES_KEPT {
            ops.clear();
            self.ops.push(ops);
        }
        if self.jobs.len() < SPARES_KEPT {
            jobs.clear();
            self.jobs.push(jobs);
        }
    }
}

impl Producers {
    pub(super) fn new(config: Option<BatchConfig>) -> Self {
        Producers {
            config,
            queues: Vec::new(),
            by_name: HashMap::new(),
            last_queue: 0,
            last_direct: None,
            held: 0,
            items: IntMap::default(),
            expiry: VecDeque::new(),
            spare: Spares::default(),
            closed: false,
        }
    }

    fn queue_index(&mut self, now: Instant, name: &str) -> Result<usize, Error> {
        if self
            .queues
            .get(self.last_queue)
            .is_some_and(|q| *q.name == *name)
        {
            return Ok(self.last_queue);
        }
        if let Some(&i) = self.by_name.get(name) {
            self.last_queue = i;
            return Ok(i);
        }
        let config = self.config.clone().unwrap_or_default();
        // Every PUSHB of this queue stays within one frame: its items are capped at what the
        // frame holds besides the envelope. (The config was validated with the session and a
        // valid queue name leaves a budget far above 0, so neither step fails in practice.)
        let mut batcher = Batcher::new(config)
            .and_then(|b| b.with_max_batch_bytes(pushb_jobs_budget(name)))
            .map_err(|e| {
                Error::Invalid(ValidationError::new(
                    "queue",
                    format!("no batcher for this queue: {e}"),
                ))
            })?;
        if self.closed {
            batcher.close(now);
        }
        self.queues.push(Queue {
            name: Arc::from(name),
            batcher,
            held: None,
        });
        self.last_queue = self.queues.len() - 1;
        self.by_name.insert(name.to_owned(), self.last_queue);
        Ok(self.last_queue)
    }

    /// Whether `name` is the queue of the last add (sequential adds name one queue): its name
    /// was validated when that add was made, so it need not be again.
    pub(super) fn is_last_queue(&self, name: &str) -> bool {
        self.queues
            .get(self.last_queue)
            .is_some_and(|q| *q.name == *name)
            || self.last_direct.as_deref() == Some(name)
    }

    /// The name of a queue that direct PUSHes (durable, batching off) go to: the last one's,
    /// shared, when it is the same (sequential adds name one queue), else a new one.
    fn direct_queue(&mut self, name: &str) -> Arc<str> {
        match &self.last_direct {
            Some(q) if **q == *name => Arc::clone(q),
            _ => {
                let q: Arc<str> = Arc::from(name);
                self.last_direct = Some(Arc::clone(&q));
                q
            }
        }
    }

    /// Adds one validated, encoded job: held aside or buffered in its queue's batcher
    /// (`Ok(None)`), or, durable or with batching off, returned as a PUSH to queue at once.
    pub(super) fn add(
        &mut self,
        now: Instant,
        op: OpId,
        queue: &str,
        job: EncodedJob,
        deadline: Instant,
        out: &mut Out<'_>,
    ) -> Result<Option<AddRequest>, Error> {
        out.stats.adds += 1;
        if job.is_durable() || self.config.is_none() {
            out.stats.adds_direct += 1;
            return Ok(Some(AddRequest::Push {
                op,
                queue: self.direct_queue(queue),
                job,
                batch: None,
            }));
        }
        // Exact: what this job adds to a PUSHB. The batcher caps every batch at the frame's
        // budget, so valid jobs never sink together in a PUSHB too large to send.
        let bytes = job.pushb_len();
        let budget = pushb_jobs_budget(queue);
        if bytes > budget {
            // Even alone it would not fit in a frame: refused before anything is sent.
            return Err(Error::Invalid(ValidationError::new(
                "data",
                format!("job too large to send: {bytes} bytes encoded, at most {budget} fit in one frame"),
            )));
        }
        let qi = self.queue_index(now, queue)?;
        let Some(q) = self.queues.get_mut(qi) else {
            return Err(Error::Closed);
        };
        let item = AddItem { op, job, deadline };
        if q.held.is_none() && q.batcher.is_idle() && bytes <= q.batcher.config().max_pending_bytes
        {
            // Perhaps alone: decided at the next poll (see `Queue`).
            q.held = Some(Held { item, bytes });
            self.held += 1;
            return Ok(None);
        }
        // Not alone after all: the held add goes first, into the buffer, so the two batch.
        self.unhold(now, qi, out);
        self.buffer(now, qi, item, bytes, out).map(|()| None)
    }

    /// Moves queue `qi`'s held add, if any, into its batcher, as if it had been buffered at once.
    fn unhold(&mut self, now: Instant, qi: usize, out: &mut Out<'_>) {
        let Some(Held { item, bytes }) = self.queues.get_mut(qi).and_then(|q| q.held.take()) else {
            return;
        };
        self.held -= 1;
        let op = item.op;
        // It was held only while its batcher was idle and within `max_pending_bytes`, so the
        // push cannot fail; if it did, the add fails as that push would have.
        if let Err(e) = self.buffer(now, qi, item, bytes, out) {
            out.stats.adds_failed += 1;
            out.done(op, Err(e));
        }
    }

    /// Pushes one add into queue `qi`'s batcher, tracked for cancel and expiry.
    fn buffer(
        &mut self,
        now: Instant,
        qi: usize,
        item: AddItem,
        bytes: usize,
        out: &mut Out<'_>,
    ) -> Result<(), Error> {
        let Some(q) = self.queues.get_mut(qi) else {
            return Err(Error::Closed);
        };
        let (op, deadline) = (item.op, item.deadline);
        match q.batcher.push(now, item, bytes) {
            Ok((item, admission)) => {
                if admission == Admission::Parked {
                    out.stats.adds_parked += 1;
                }
                self.items.insert(op, (qi, item));
                // Deadlines are kept ordered; a held add that joins the buffer late may be older
                // than adds buffered meanwhile in other queues.
                if self.expiry.back().is_none_or(|&(d, _)| d <= deadline) {
                    self.expiry.push_back((deadline, op));
                } else {
                    let at = self.expiry.partition_point(|&(d, _)| d <= deadline);
                    self.expiry.insert(at, (deadline, op));
                }
                self.collect_rejected(qi, out);
                Ok(())
            }
            Err(PushError::Closed(_)) => Err(Error::Closed),
            Err(PushError::Rejected(_)) => {
                out.stats.adds_rejected += 1;
                Err(Error::Overflow)
            }
            Err(PushError::TooLarge(_)) => Err(Error::Overflow),
        }
    }

    /// Withdraws a held or buffered add; whether it was one.
    pub(super) fn cancel(&mut self, op: OpId) -> bool {
        let Some((qi, item)) = self.items.remove(&op) else {
            return self.take_held(|i| i.op == op).is_some();
        };
        self.queues
            .get_mut(qi)
            .is_some_and(|q| q.batcher.cancel(item).is_some())
    }

    /// Every held or buffered add resolves with `ConnectionLost { maybe_applied: false }`
    /// (see `Session::release_unwritten`); returns how many.
    pub(super) fn release(&mut self, _now: Instant, out: &mut Out<'_>) -> usize {
        let lost = || {
            Err(Error::ConnectionLost {
                maybe_applied: false,
            })
        };
        let mut n = 0;
        while let Some(item) = self.take_held(|_| true) {
            out.stats.adds_failed += 1;
            out.done(item.op, lost());
            n += 1;
        }
        let ops: Vec<OpId> = self.expiry.iter().map(|&(_, op)| op).collect();
        for op in ops {
            if self.cancel(op) {
                out.stats.adds_failed += 1;
                out.done(op, lost());
                n += 1;
            }
        }
        self.forget_sent();
        n
    }

    /// Takes the first held add that `pick` chooses, if any.
    fn take_held(&mut self, mut pick: impl FnMut(&AddItem) -> bool) -> Option<AddItem> {
        if self.held == 0 {
            return None;
        }
        let held = self
            .queues
            .iter_mut()
            .find(|q| q.held.as_ref().is_some_and(|h| pick(&h.item)))?
            .held
            .take()?;
        self.held -= 1;
        Some(held.item)
    }

    /// DropOldest victims resolve with an overflow error.
    fn collect_rejected(&mut self, qi: usize, out: &mut Out<'_>) {
        let Some(q) = self.queues.get_mut(qi) else {
            return;
        };
        while let Some((_, item, _)) = q.batcher.poll_rejected() {
            self.items.remove(&item.op);
            out.stats.adds_rejected += 1;
            out.done(item.op, Err(Error::Overflow));
        }
    }

    /// Adds still held, buffered (or parked) at their deadline fail with a timeout: they were
    /// never written, so they were certainly not applied.
    pub(super) fn expire(&mut self, now: Instant, out: &mut Out<'_>) {
        while let Some(item) = self.take_held(|i| i.deadline <= now) {
            out.stats.timeouts += 1;
            out.stats.adds_failed += 1;
            out.done(
                item.op,
                Err(Error::Timeout {
                    maybe_applied: false,
                }),
            );
        }
        self.forget_sent();
        while let Some(&(deadline, op)) = self.expiry.front() {
            if deadline > now {
                break;
            }
            self.expiry.pop_front();
            if self.cancel(op) {
                out.stats.timeouts += 1;
                out.stats.adds_failed += 1;
                out.done(
                    op,
                    Err(Error::Timeout {
                        maybe_applied: false,
                    }),
                );
            }
            self.forget_sent();
        }
    }

    /// The next due request, with the time it must be written by: a held add still alone as a
    /// PUSH, or a due batch as a PUSHB (a PUSH for a batch of one).
    /// `default_deadline` is when a command queued now times out.
    pub(super) fn poll_request(
        &mut self,
        now: Instant,
        default_deadline: Instant,
        out: &mut Out<'_>,
    ) -> Option<(AddRequest, Instant)> {
        for qi in 0..self.queues.len() {
            if let Some(req) = self.send_held(now, qi, default_deadline, out) {
                return Some(req);
            }
            let Some(Queue { name, batcher, .. }) = self.queues.get_mut(qi) else {
                break;
            };
            let Some(batch) = batcher.poll_batch(now) else {
                continue;
            };
            out.stats.record_flush(batch.reason);
            out.stats.batches_sent += 1;
            let mut items = batch.items;
            if items.len() == 1 {
                // A batch of one goes out as the PUSH it is (see `AddRequest::Push`).
                let Some((_, item)) = items.pop() else {
                    continue;
                };
                batcher.recycle(items);
                self.items.remove(&item.op);
                let req = AddRequest::Push {
                    op: item.op,
                    queue: name.clone(),
                    job: item.job,
                    batch: Some((qi, batch.id)),
                };
                return Some((req, default_deadline.min(item.deadline)));
            }
            let mut ops = self.spare.ops(items.len());
            let mut jobs = self.spare.jobs(items.len());
            // The batch must be written before its oldest add's deadline: time spent buffered
            // counts against the command timeout, so an add never waits more than one timeout
            // for its write however many batches queue up ahead of it.
            let mut deadline = default_deadline;
            for (_, item) in items.drain(..) {
                self.items.remove(&item.op);
                deadline = deadline.min(item.deadline);
                ops.push(item.op);
                jobs.push(item.job);
            }
            // Its capacity serves the next batch (one allocation less per flush).
            batcher.recycle(items);
            let req = AddRequest::Batch {
                queue: qi,
                batch: Some(batch.id),
                name: name.clone(),
                ops,
                jobs,
            };
            return Some((req, deadline));
        }
        self.forget_sent();
        None
    }

    /// Queue `qi`'s held add, still alone at this poll, as a PUSH holding an in-flight slot.
    fn send_held(
        &mut self,
        now: Instant,
        qi: usize,
        default_deadline: Instant,
        out: &mut Out<'_>,
    ) -> Option<(AddRequest, Instant)> {
        let q = self.queues.get_mut(qi)?;
        let bytes = q.held.as_ref()?.bytes;
        let Some(batch) = q.batcher.send_alone(now, bytes) else {
            // Cannot happen while the invariant holds (held only while idle); should it, the add
            // takes the ordinary way through the buffer.
            self.unhold(now, qi, out);
            return None;
        };
        let item = q.held.take()?.item;
        let req = AddRequest::Push {
            op: item.op,
            queue: q.name.clone(),
            job: item.job,
            batch: Some((qi, batch)),
        };
        self.held -= 1;
        out.stats.record_flush(FlushReason::Idle);
        out.stats.batches_sent += 1;
        Some((req, default_deadline.min(item.deadline)))
    }

    /// A batch's in-flight slot is free again.
    fn complete(&mut self, now: Instant, queue: usize, batch: Option<BatchId>) {
        if let (Some(batch), Some(q)) = (batch, self.queues.get_mut(queue)) {
            q.batcher.complete(now, batch);
        }
    }

    /// The server accepted `req`. Returns what goes next: the next step of a check.
    pub(super) fn on_reply(
        &mut self,
        now: Instant,
        req: AddRequest,
        response: Response,
        out: &mut Out<'_>,
    ) -> Option<AddRequest> {
        match req {
            AddRequest::Batch {
                queue,
                batch,
                mut ops,
                jobs,
                ..
            } => {
                match response {
                    Response::PushedBatch(ids) if ids.len() == ops.len() => {
                        for (op, id) in ops.drain(..).zip(ids) {
                            out.stats.adds_ok += 1;
                            out.done(op, Ok(Response::Pushed(id)));
                        }
                    }
                    other => {
                        let n = match other {
                            Response::PushedBatch(ids) => ids.len(),
                            _ => 0,
                        };
                        let why = format!("PUSHB of {} jobs answered with {n} ids", ops.len());
                        for op in ops.drain(..) {
                            out.done(op, Err(Error::Protocol(why.clone())));
                        }
                    }
                }
                self.spare.give_back(ops, jobs);
                self.complete(now, queue, batch);
            }
            AddRequest::Push { op, batch, .. } => {
                out.stats.adds_ok += 1;
                out.done(op, Ok(response));
                if let Some((queue, batch)) = batch {
                    self.complete(now, queue, Some(batch));
                }
            }
            AddRequest::Bulk { op, .. } => {
                if let Response::PushedBatch(ids) = &response {
                    out.stats.adds_ok += ids.len() as u64;
                }
                out.done(op, Ok(response));
            }
            AddRequest::Check(c) => return self.on_found(c.on_reply(now, response), out),
        }
        None
    }

    /// What a check found decides its add: answered with the id found, written again, asked
    /// about further, or left unknown. Returns what goes next.
    fn on_found(&mut self, found: Found, out: &mut Out<'_>) -> Option<AddRequest> {
        match found {
            Found::Next(c) => Some(AddRequest::Check(c)),
            Found::Added(op, answer) => {
                out.stats.adds_ok += match &answer {
                    Response::PushedBatch(ids) => ids.len() as u64,
                    _ => 1,
                };
                out.done(op, Ok(answer));
                None
            }
            Found::Absent(c) => {
                out.stats.items_resent += c.len() as u64;
                let (op, queue, bulk) = (c.op, c.queue, c.bulk);
                let mut jobs = c.jobs;
                // A single add's check holds its one job.
                Some(match (bulk, jobs.pop()) {
                    (false, Some(job)) => AddRequest::Push {
                        op,
                        queue,
                        job,
                        batch: None,
                    },
                    (_, last) => {
                        jobs.extend(last);
                        AddRequest::Bulk { op, queue, jobs }
                    }
                })
            }
            Found::Unknown(op, n) => {
                out.stats.adds_failed += n as u64;
                out.done(op, Err(check::unknown(&Error::Closed)));
                None
            }
        }
    }

    /// The server refused `req` with `msg`. Returns what goes again at once: the rest of a
    /// batch the server refused for one job ("jobs[i]: …", where it inserts nothing).
    pub(super) fn on_error(
        &mut self,
        now: Instant,
        req: AddRequest,
        msg: &str,
        out: &mut Out<'_>,
    ) -> Option<AddRequest> {
        let (queue, batch, name, ops, jobs) = match req {
            AddRequest::Batch {
                queue,
                batch,
                name,
                ops,
                jobs,
            } => (queue, batch, name, ops, jobs),
            AddRequest::Check(c) => return self.on_found(c.on_error(msg), out),
            other => {
                self.resolve(now, other, Error::server(msg.to_owned()), out);
                return None;
            }
        };
        // "jobs[i]: …" is a validation failure: the server inserted nothing, so the other jobs
        // can safely go again without the bad one. One bad job fails alone.
        let Some(bad) = batch_index(msg).filter(|&i| i < ops.len() && ops.len() > 1) else {
            for op in ops {
                out.stats.adds_failed += 1;
                out.done(op, Err(Error::server(strip_index(msg).to_owned())));
            }
            self.complete(now, queue, batch);
            return None;
        };
        let mut keep_ops = Vec::with_capacity(ops.len() - 1);
        let mut keep_jobs = Vec::with_capacity(ops.len() - 1);
        for (i, (op, job)) in ops.into_iter().zip(jobs).enumerate() {
            if i == bad {
                out.stats.adds_failed += 1;
                out.done(op, Err(Error::server(strip_index(msg).to_owned())));
            } else {
                keep_ops.push(op);
                keep_jobs.push(job);
            }
        }
        out.stats.items_resent += keep_ops.len() as u64;
        // The rest keeps the batch's in-flight slot until it is answered, so the queue never
        // has more than `max_in_flight` batches out.
        Some(AddRequest::Batch {
            queue,
            batch,
            name,
            ops: keep_ops,
            jobs: keep_jobs,
        })
    }

    /// The connection `req` was written on is gone (`why`). Returns what goes on the next
    /// connection: a check of each add, and of each `add_bulk`, whose jobs all have a custom
    /// id (written again only if no job has it, see [`Check`]); every other add fails as maybe
    /// applied.
    ///
    /// `since` is when that connection came up (see [`Check`]).
    pub(super) fn on_lost(
        &mut self,
        now: Instant,
        req: AddRequest,
        why: &FailKind,
        since: Instant,
        out: &mut Out<'_>,
    ) -> Vec<AddRequest> {
        if !why.allows_resend() {
            self.resolve(now, req, why.error(true), out);
            return Vec::new();
        }
        let lost = why.error(true);
        let mut again = Vec::new();
        let mut check = |op, queue: &Arc<str>, jobs, bulk, out: &mut Out<'_>| match Check::of(
            op,
            Arc::clone(queue),
            jobs,
            bulk,
            since,
        ) {
            Ok(c) => again.push(AddRequest::Check(c)),
            Err(jobs) => {
                out.stats.adds_failed += jobs.len() as u64;
                out.done(op, Err(lost.clone()));
            }
        };
        match req {
            AddRequest::Batch {
                queue,
                batch,
                name,
                ops,
                jobs,
            } => {
                for (op, job) in ops.into_iter().zip(jobs) {
                    check(op, &name, vec![job], false, out);
                }
                // The lookups hold no in-flight slot: the batch is over.
                self.complete(now, queue, batch);
            }
            AddRequest::Push {
                op,
                queue,
                job,
                batch,
            } => {
                check(op, &queue, vec![job], false, out);
                if let Some((queue, batch)) = batch {
                    self.complete(now, queue, Some(batch));
                }
            }
            AddRequest::Bulk { op, queue, jobs } => check(op, &queue, jobs, true, out),
            AddRequest::Check(c) => again.push(AddRequest::Check(c)),
        }
        again
    }

    /// `req` will get no reply: every add in it fails with `err`.
    pub(super) fn resolve(&mut self, now: Instant, req: AddRequest, err: Error, out: &mut Out<'_>) {
        match req {
            AddRequest::Batch {
                queue, batch, ops, ..
            } => {
                out.stats.adds_failed += ops.len() as u64;
                for op in ops {
                    out.done(op, Err(err.clone()));
                }
                self.complete(now, queue, batch);
            }
            AddRequest::Push { op, batch, .. } => {
                out.stats.adds_failed += 1;
                out.done(op, Err(err));
                if let Some((queue, batch)) = batch {
                    self.complete(now, queue, Some(batch));
                }
            }
            AddRequest::Bulk { op, jobs, .. } => {
                out.stats.adds_failed += jobs.len() as u64;
                out.done(op, Err(err));
            }
            AddRequest::Check(c) => {
                out.stats.adds_failed += c.len() as u64;
                out.done(c.op, Err(check::unknown(&err)));
            }
        }
    }

    pub(super) fn poll_timeout(&self) -> Option<Instant> {
        self.queues
            .iter()
            .filter_map(|q| q.batcher.poll_timeout())
            .min()
    }

    /// The deadline of the oldest add still held or buffered.
    pub(super) fn next_expiry(&self) -> Option<Instant> {
        let buffered = self.expiry.front().map(|(t, _)| *t);
        if self.held == 0 {
            return buffered;
        }
        let held = self
            .queues
            .iter()
            .filter_map(|q| q.held.as_ref().map(|h| h.item.deadline))
            .min();
        buffered.into_iter().chain(held).min()
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
        for q in &mut self.queues {
            q.batcher.handle_timeout(now);
        }
    }

    /// Closes every batcher; held adds go into them first, so they are flushed on close exactly
    /// as buffered ones are.
    pub(super) fn close(&mut self, now: Instant, out: &mut Out<'_>) {
        self.closed = true;
        for qi in 0..self.queues.len() {
            self.unhold(now, qi, out);
            if let Some(q) = self.queues.get_mut(qi) {
                q.batcher.close(now);
            }
        }
    }

    pub(super) fn is_drained(&self) -> bool {
        self.held == 0 && self.queues.iter().all(|q| q.batcher.is_drained())
    }

    /// Per-queue batcher statistics.
    pub(super) fn stats(&self) -> impl Iterator<Item = (&str, &crate::batch::BatchStats)> {
        self.queues.iter().map(|q| (&*q.name, q.batcher.stats()))
    }

    /// Adds waiting (items, bytes) and parked; a held add counts as buffered, which it stands
    /// for.
    pub(super) fn pending(&self) -> (usize, usize, usize) {
        self.queues.iter().fold((0, 0, 0), |(i, b, p), q| {
            let (hi, hb) = q.held.as_ref().map_or((0, 0), |h| (1, h.bytes));
            (
                i + q.batcher.pending_items() + hi,
                b + q.batcher.pending_bytes() + hb,
                p + q.batcher.parked(),
            )
        })
    }
}

/// The index in a `"jobs[<i>]: …"` error message.
fn batch_index(msg: &str) -> Option<usize> {
    let rest = msg.strip_prefix("jobs[")?;
    let end = rest.find("]: ")?;
    rest[..end].parse().ok()
}

fn strip_index(msg: &str) -> &str {
    match (msg.strip_prefix("jobs["), msg.find("]: ")) {
        (Some(_), Some(end)) => &msg[end + 3..],
        _ => msg,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_error_index() {
        assert_eq!(batch_index("jobs[3]: priority must be an integer"), Some(3));
        assert_eq!(
            batch_index("Group g has reached its maximum size of 2"),
            None
        );
        assert_eq!(
            strip_index("jobs[3]: priority must be an integer"),
            "priority must be an integer"
        );
        assert_eq!(strip_index("plain"), "plain");
    }
}
