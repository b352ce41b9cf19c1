//! Property test of `autobatch_core::batch::Batcher` against a small reference model.
//!
//! Random sequences of pushes (single and in bursts, random sizes), completions (of live and of
//! stale batches), time advancing like a faithful timer, cancels and close are applied to the
//! real batcher and to `Model`, a deliberately naive restatement of the rules with `Vec`s and
//! linear scans. After every step the two must agree exactly (admissions, batches, reasons,
//! drops, cancels, timers), and the rules are also checked directly on the observable behaviour,
//! without the model, so a mistake copied into both still shows. Each case ends with `close` and
//! completing everything, after which every accepted item must have resolved exactly once.
//!
//! Time is virtual: one `Instant` read at the start of each case plus offsets.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use autobatch_core::batch::{
    Admission, BatchConfig, BatchId, Batcher, FlushReason, ItemId, OverflowPolicy, PushError,
    RejectReason,
};
use proptest::prelude::*;

// ---- the reference model ---------------------------------------------------------------------

/// An item waiting in the model: its push sequence number, bytes and push time.
#[derive(Debug, Clone, Copy)]
struct Waiting {
    seq: u64,
    bytes: usize,
    pushed: Instant,
}

#[derive(Debug, PartialEq)]
enum PushOutcome {
    Buffered { dropped: Vec<u64> },
    Parked,
    Rejected,
    Closed,
    TooLarge,
}

/// The rules of `batch`'s module docs, written as plainly as possible.
struct Model {
    cfg: BatchConfig,
    /// The batch byte cap (`usize::MAX` when the batcher has none).
    cap: usize,
    buffer: Vec<Waiting>,
    parked: Vec<Waiting>,
    in_flight: Vec<BatchId>,
    owed: usize,
    closed: bool,
    now: Instant,
    next_seq: u64,
}

impl Model {
    fn new(cfg: BatchConfig, cap: usize, now: Instant) -> Self {
        Self {
            cfg,
            cap,
            buffer: Vec::new(),
            parked: Vec::new(),
            in_flight: Vec::new(),
            owed: 0,
            closed: false,
            now,
            next_seq: 0,
        }
    }

    fn buffered_bytes(&self) -> usize {
        self.buffer.iter().map(|w| w.bytes).sum()
    }

    /// Whether everything waiting (buffered and parked) makes a full batch, by count or bytes.
    fn full_batch_waiting(&self) -> bool {
        let parked: usize = self.parked.iter().map(|w| w.bytes).sum();
        self.buffer.len() + self.parked.len() >= self.cfg.max_batch
            || (self.buffered_bytes() + parked) > self.cap
    }

    fn fits(&self, bytes: usize) -> bool {
        self.buffer.len() < self.cfg.max_pending_items
            && self.buffered_bytes() + bytes <= self.cfg.max_pending_bytes
    }

    fn free(&self) -> usize {
        self.cfg.max_in_flight - self.in_flight.len()
    }

    fn admit(&mut self) {
        while !self.parked.is_empty() && self.fits(self.parked[0].bytes) {
            let w = self.parked.remove(0);
            self.buffer.push(w);
        }
    }

    fn push(&mut self, bytes: usize) -> PushOutcome {
        if self.closed {
            return PushOutcome::Closed;
        }
        if bytes > self.cfg.max_pending_bytes {
            return PushOutcome::TooLarge;
        }
        let w = Waiting {
            seq: self.next_seq,
            bytes,
            pushed: self.now,
        };
        let mut dropped = Vec::new();
        if !self.parked.is_empty() || !self.fits(bytes) {
            match self.cfg.overflow {
                OverflowPolicy::Backpressure => {
                    self.next_seq += 1;
                    self.parked.push(w);
                    return PushOutcome::Parked;
                }
                OverflowPolicy::Reject => return PushOutcome::Rejected,
                OverflowPolicy::DropOldest => {
                    let tenth = self.buffer.len().div_ceil(10).max(1);
                    for _ in 0..tenth {
                        dropped.push(self.buffer.remove(0).seq);
                    }
                    while !self.fits(bytes) {
                        dropped.push(self.buffer.remove(0).seq);
                    }
                }
                other => unreachable!("the model does not know {other:?}"),
            }
        }
        self.next_seq += 1;
        self.buffer.push(w);
        PushOutcome::Buffered { dropped }
    }

    fn cancel(&mut self, seq: u64) -> bool {
        let found = if let Some(i) = self.buffer.iter().position(|w| w.seq == seq) {
            self.buffer.remove(i);
            true
        } else if let Some(i) = self.parked.iter().position(|w| w.seq == seq) {
            self.parked.remove(i);
            true
        } else {
            false
        };
        self.admit();
        if self.buffer.is_empty() {
            self.owed = 0;
        }
        found
    }

    fn complete(&mut self, id: BatchId) {
        if let Some(i) = self.in_flight.iter().position(|&b| b == id) {
            self.in_flight.remove(i);
            if !self.buffer.is_empty() {
                self.owed = (self.owed + 1).min(self.free());
            }
        }
    }

    fn deadline(&self) -> Instant {
        self.buffer[0].pushed + self.cfg.linger
    }

    fn due(&mut self) -> Option<FlushReason> {
        if self.buffer.is_empty() {
            self.owed = 0;
            return None;
        }
        if self.free() == 0 {
            return None;
        }
        Some(if self.closed {
            FlushReason::Close
        } else if self.owed > 0 {
            FlushReason::Completion
        } else if self.in_flight.is_empty() {
            FlushReason::Idle
        } else if self.full_batch_waiting() {
            FlushReason::Size
        } else if self.now >= self.deadline() {
            FlushReason::Linger
        } else {
            return None;
        })
    }

    /// The reason and sequence numbers of the next batch, which the caller then names `id`.
    fn poll(&mut self) -> Option<(FlushReason, Vec<u64>)> {
        let reason = self.due()?;
        let mut seqs = Vec::new();
        let mut bytes = 0;
        while seqs.len() < self.cfg.max_batch && !self.buffer.is_empty() {
            // The first item always goes; later ones only while the batch stays within the cap.
            if !seqs.is_empty() && bytes + self.buffer[0].bytes > self.cap {
                break;
            }
            let w = self.buffer.remove(0);
            bytes += w.bytes;
            seqs.push(w.seq);
            self.admit();
        }
        if self.buffer.is_empty() {
            self.owed = 0;
        } else {
            self.owed = self.owed.saturating_sub(1);
        }
        Some((reason, seqs))
    }

    fn timeout(&self) -> Option<Instant> {
        let waiting = !self.buffer.is_empty()
            && !self.closed
            && !self.in_flight.is_empty()
            && self.free() > 0
            && self.owed == 0
            && !self.full_batch_waiting();
        waiting.then(|| self.deadline())
    }
}

// ---- operations ------------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum Op {
    /// Pushes before anything is polled, so an idle burst can share a batch.
    Push(Vec<usize>),
    /// Completes the in-flight batch at this index (modulo), if any.
    Complete(usize),
    /// Completes a batch from history, most likely already completed.
    CompleteStale(usize),
    /// Lets this many milliseconds pass, firing the timer whenever it is due.
    Advance(u64),
    /// Cancels the item pushed at this index (modulo) of the accepted pushes.
    Cancel(usize),
    Close,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => prop::collection::vec(0usize..=70, 1..=4).prop_map(Op::Push),
        4 => any::<usize>().prop_map(Op::Complete),
        1 => any::<usize>().prop_map(Op::CompleteStale),
        3 => (0u64..=12).prop_map(Op::Advance),
        2 => any::<usize>().prop_map(Op::Cancel),
        1 => Just(Op::Close),
    ]
}

/// A batch byte cap, or none: often below one item's size (it then goes alone), often between.
fn cap() -> impl Strategy<Value = Option<usize>> {
    prop_oneof![2 => Just(None), 1 => (1usize..=20).prop_map(Some), 2 => (20usize..=150).prop_map(Some)]
}

fn config(overflow: OverflowPolicy) -> impl Strategy<Value = BatchConfig> {
    // Small buffers overflow often; some larger ones (past 10 items) make DropOldest's "10%"
    // differ from "one item".
    let extra = prop_oneof![3 => 0usize..=6, 1 => 10usize..=22];
    (1usize..=5, 1usize..=3, extra, 10usize..=80, 0u64..=8).prop_map(
        move |(max_batch, max_in_flight, extra, max_pending_bytes, linger)| {
            BatchConfig::new()
                .max_batch(max_batch)
                .max_in_flight(max_in_flight)
                .max_pending_items(max_batch + extra)
                .max_pending_bytes(max_pending_bytes)
                .linger(Duration::from_millis(linger))
                .overflow(overflow)
        },
    )
}

// ---- the harness -----------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq)]
enum Fate {
    Waiting,
    Sent,
    Cancelled,
    Dropped,
}

struct Harness {
    cfg: BatchConfig,
    cap: usize,
    real: Batcher<u64>,
    model: Model,
    now: Instant,
    /// Accepted items in push order: real id, bytes, push time, what became of it.
    items: Vec<(ItemId, usize, Instant, Fate)>,
    by_id: HashMap<ItemId, u64>,
    in_flight: Vec<BatchId>,
    history: Vec<BatchId>,
    last_sent: Option<ItemId>,
    parked_seen: u64,
}

impl Harness {
    fn new(cfg: BatchConfig, cap: Option<usize>) -> Self {
        let now = Instant::now();
        let mut real = Batcher::new(cfg.clone()).expect("valid config");
        if let Some(cap) = cap {
            real = real.with_max_batch_bytes(cap).expect("valid cap");
        }
        let cap = cap.unwrap_or(usize::MAX);
        assert_eq!(real.max_batch_bytes(), cap);
        Self {
            real,
            model: Model::new(cfg.clone(), cap, now),
            cfg,
            cap,
            now,
            items: Vec::new(),
            by_id: HashMap::new(),
            in_flight: Vec::new(),
            history: Vec::new(),
            last_sent: None,
            parked_seen: 0,
        }
    }

    fn fate(&mut self, seq: u64) -> &mut Fate {
        &mut self.items[seq as usize].3
    }

    /// Drains `poll_batch` and `poll_rejected`, comparing with the model and checking the
    /// batch rules; returns the batches drained.
    fn drain(&mut self) -> Result<Vec<(FlushReason, Vec<u64>)>, TestCaseError> {
        let mut out = Vec::new();
        loop {
            let real = self.real.poll_batch(self.now);
            let expected = self.model.poll();
            let Some(batch) = real else {
                prop_assert!(expected.is_none(), "model expected {:?}", expected);
                break;
            };
            let seqs: Vec<u64> = batch.items.iter().map(|(id, _)| self.by_id[id]).collect();
            // Payloads are the sequence numbers: the item must travel with its id.
            for (id, payload) in &batch.items {
                prop_assert_eq!(self.by_id[id], *payload);
            }
            prop_assert_eq!(Some((batch.reason, seqs.clone())), expected);

            prop_assert!(!batch.items.is_empty());
            prop_assert!(batch.items.len() <= self.cfg.max_batch);
            let bytes: usize = seqs.iter().map(|&s| self.items[s as usize].1).sum();
            prop_assert_eq!(batch.bytes, bytes);
            // The byte cap holds, except for one item that alone exceeds it.
            prop_assert!(
                bytes <= self.cap || seqs.len() == 1,
                "batch of {} items and {} bytes over the cap {}",
                seqs.len(),
                bytes,
                self.cap
            );
            for (id, _) in &batch.items {
                // FIFO across batches.
                prop_assert!(self.last_sent < Some(*id), "out of order");
                self.last_sent = Some(*id);
            }
            for &s in &seqs {
                prop_assert_eq!(*self.fate(s), Fate::Waiting, "sent twice");
                *self.fate(s) = Fate::Sent;
            }
            self.model.in_flight.push(batch.id);
            self.in_flight.push(batch.id);
            self.history.push(batch.id);
            prop_assert!(self.real.in_flight() <= self.cfg.max_in_flight);
            out.push((batch.reason, seqs));
            self.real.recycle(batch.items);
        }
        while let Some((id, payload, reason)) = self.real.poll_rejected() {
            prop_assert_eq!(self.cfg.overflow, OverflowPolicy::DropOldest);
            prop_assert_eq!(reason, RejectReason::Overflow);
            let seq = self.by_id[&id];
            prop_assert_eq!(seq, payload);
            prop_assert_eq!(*self.fate(seq), Fate::Dropped, "drop not predicted");
        }
        self.check_state()?;
        Ok(out)
    }

    /// Rules on the state after a full drain, stated without the model where possible.
    fn check_state(&self) -> Result<(), TestCaseError> {
        let r = &self.real;
        prop_assert_eq!(r.in_flight(), self.in_flight.len());
        prop_assert!(r.in_flight() <= self.cfg.max_in_flight);
        prop_assert!(r.pending_items() <= self.cfg.max_pending_items);
        prop_assert!(r.pending_bytes() <= self.cfg.max_pending_bytes);
        if self.cfg.overflow != OverflowPolicy::Backpressure {
            prop_assert_eq!(r.parked(), 0);
        }

        let waiting: Vec<_> = self.items.iter().filter(|i| i.3 == Fate::Waiting).collect();
        prop_assert_eq!(r.pending_items() + r.parked(), waiting.len());
        prop_assert_eq!(r.pending_items(), self.model.buffer.len());
        prop_assert_eq!(r.pending_bytes(), self.model.buffered_bytes());
        prop_assert_eq!(r.parked(), self.model.parked.len());
        prop_assert_eq!(r.poll_timeout(), self.model.timeout());

        if r.in_flight() == 0 {
            // Idle with items waiting would mean an idle flush was missed.
            prop_assert!(waiting.is_empty(), "idle yet {} waiting", waiting.len());
        }
        if let Some(oldest) = waiting.first() {
            if r.in_flight() < self.cfg.max_in_flight {
                // A slot is free: the only thing left to wait for is linger, so the oldest item
                // must still be inside it, and the timer must be armed for exactly its end.
                prop_assert!(!r.is_closed(), "closed with a free slot and items waiting");
                prop_assert!(waiting.len() < self.cfg.max_batch, "full batch not sent");
                let waiting_bytes: usize = waiting.iter().map(|i| i.1).sum();
                prop_assert!(waiting_bytes <= self.cap, "batch full by bytes not sent");
                let deadline = oldest.2 + self.cfg.linger;
                prop_assert!(
                    self.now < deadline,
                    "item waited past linger with a free slot"
                );
                prop_assert_eq!(r.poll_timeout(), Some(deadline));
            } else {
                prop_assert_eq!(r.poll_timeout(), None);
            }
        } else {
            prop_assert_eq!(r.poll_timeout(), None);
        }

        // Every accepted item is accounted for by the counters.
        let s = r.stats();
        let count = |f: Fate| self.items.iter().filter(|i| i.3 == f).count() as u64;
        prop_assert_eq!(s.items_pushed, self.items.len() as u64);
        prop_assert_eq!(s.items_sent, count(Fate::Sent));
        prop_assert_eq!(s.items_cancelled, count(Fate::Cancelled));
        prop_assert_eq!(s.items_dropped, count(Fate::Dropped));
        Ok(())
    }

    fn push(&mut self, sizes: &[usize]) -> Result<(), TestCaseError> {
        let was_idle = self.real.in_flight() == 0;
        let mut accepted = Vec::new();
        for &bytes in sizes {
            let full = self.real.pending_items() >= self.cfg.max_pending_items
                || self.real.pending_bytes() + bytes > self.cfg.max_pending_bytes
                || self.real.parked() > 0;
            let seq = self.items.len() as u64;
            let expected = self.model.push(bytes);
            match self.real.push(self.now, seq, bytes) {
                Ok((id, admission)) => {
                    match (&expected, admission) {
                        (PushOutcome::Buffered { dropped }, Admission::Buffered) => {
                            prop_assert!(dropped.is_empty() || full, "dropped without need");
                            for &d in dropped {
                                prop_assert_eq!(self.items[d as usize].3, Fate::Waiting);
                                self.items[d as usize].3 = Fate::Dropped;
                            }
                        }
                        (PushOutcome::Parked, Admission::Parked) => {
                            prop_assert!(full);
                            self.parked_seen += 1;
                        }
                        _ => prop_assert!(false, "{:?} but model {:?}", admission, expected),
                    }
                    self.by_id.insert(id, seq);
                    self.items.push((id, bytes, self.now, Fate::Waiting));
                    accepted.push(seq);
                }
                Err(err) => {
                    prop_assert_eq!(*err.item(), seq, "the item must be handed back");
                    match (&expected, &err) {
                        (PushOutcome::Closed, PushError::Closed(_)) => {}
                        (PushOutcome::TooLarge, PushError::TooLarge(_)) => {
                            prop_assert!(bytes > self.cfg.max_pending_bytes)
                        }
                        (PushOutcome::Rejected, PushError::Rejected(_)) => {
                            prop_assert_eq!(self.cfg.overflow, OverflowPolicy::Reject);
                            prop_assert!(full);
                        }
                        _ => prop_assert!(false, "{:?} but model {:?}", err, expected),
                    }
                }
            }
        }
        let batches = self.drain()?;
        // Items of the burst dropped by a later item of the same burst never leave.
        accepted.retain(|&seq| self.items[seq as usize].3 != Fate::Dropped);
        if was_idle && !accepted.is_empty() {
            // Rule 1: the burst leaves at once, in one idle batch (as far as max_batch allows).
            let (reason, seqs) = &batches[0];
            prop_assert_eq!(*reason, FlushReason::Idle);
            // As far as max_batch and the byte cap allow: a prefix of the burst, cut before the
            // first item that would take the batch over the cap (never before the first item).
            let mut n = 0;
            let mut bytes = 0;
            for &seq in accepted.iter().take(self.cfg.max_batch) {
                let b = self.items[seq as usize].1;
                if n > 0 && bytes + b > self.cap {
                    break;
                }
                bytes += b;
                n += 1;
            }
            prop_assert_eq!(&seqs[..], &accepted[..n]);
            if accepted.len() == 1 {
                prop_assert_eq!(self.real.poll_timeout(), None);
            }
        }
        Ok(())
    }

    fn complete(&mut self, id: BatchId) -> Result<(), TestCaseError> {
        self.in_flight.retain(|&b| b != id);
        self.model.complete(id);
        self.real.complete(self.now, id);
        self.drain().map(drop)
    }

    fn advance(&mut self, ms: u64) -> Result<(), TestCaseError> {
        let target = self.now + Duration::from_millis(ms);
        // A faithful driver: wake at every deadline on the way, not just at the end.
        loop {
            let wake = match self.real.poll_timeout() {
                Some(deadline) if deadline <= target => deadline.max(self.now),
                _ => target,
            };
            self.now = wake;
            self.model.now = wake;
            self.real.handle_timeout(wake);
            self.drain()?;
            if wake == target {
                return Ok(());
            }
        }
    }

    fn cancel(&mut self, index: usize) -> Result<(), TestCaseError> {
        if self.items.is_empty() {
            return Ok(());
        }
        let seq = (index % self.items.len()) as u64;
        let (id, _, _, fate) = self.items[seq as usize];
        let got = self.real.cancel(id);
        prop_assert_eq!(self.model.cancel(seq), got.is_some());
        if fate == Fate::Waiting {
            prop_assert_eq!(got, Some(seq));
            *self.fate(seq) = Fate::Cancelled;
        } else {
            prop_assert_eq!(got, None);
        }
        self.drain().map(drop)
    }

    fn close(&mut self) -> Result<(), TestCaseError> {
        self.model.closed = true;
        self.real.close(self.now);
        self.drain().map(drop)
    }

    fn apply(&mut self, op: &Op) -> Result<(), TestCaseError> {
        match op {
            Op::Push(sizes) => self.push(sizes),
            Op::Complete(i) => match self.in_flight.len() {
                0 => Ok(()),
                n => self.complete(self.in_flight[i % n]),
            },
            Op::CompleteStale(i) => match self.history.len() {
                0 => Ok(()),
                n => self.complete(self.history[i % n]),
            },
            Op::Advance(ms) => self.advance(*ms),
            Op::Cancel(i) => self.cancel(*i),
            Op::Close => self.close(),
        }
    }

    /// Close, then keep completing the oldest batch until drained: nothing may be left over.
    fn finish(&mut self) -> Result<(), TestCaseError> {
        self.close()?;
        prop_assert!(matches!(
            self.real.push(self.now, u64::MAX, 0),
            Err(PushError::Closed(u64::MAX))
        ));
        let mut rounds = 0;
        while !self.real.is_drained() {
            rounds += 1;
            prop_assert!(rounds < 10_000, "close does not drain");
            prop_assert!(!self.in_flight.is_empty(), "stuck with nothing in flight");
            let oldest = self.in_flight[0];
            self.complete(oldest)?;
        }
        for item in &self.items {
            prop_assert!(item.3 != Fate::Waiting, "item left unresolved");
        }
        let s = self.real.stats();
        prop_assert_eq!(
            s.items_sent + s.items_cancelled + s.items_dropped,
            self.items.len() as u64
        );
        prop_assert_eq!(s.items_parked, self.parked_seen);
        if self.cfg.overflow == OverflowPolicy::Backpressure {
            prop_assert_eq!(s.items_dropped + s.items_rejected, 0);
        }
        Ok(())
    }
}

fn run(cfg: BatchConfig, cap: Option<usize>, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut h = Harness::new(cfg, cap);
    for op in &ops {
        h.apply(op)?;
    }
    h.finish()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn backpressure_matches_model(
        cfg in config(OverflowPolicy::Backpressure),
        cap in cap(),
        ops in prop::collection::vec(op(), 0..80),
    ) {
        run(cfg, cap, ops)?;
    }

    #[test]
    fn reject_matches_model(
        cfg in config(OverflowPolicy::Reject),
        cap in cap(),
        ops in prop::collection::vec(op(), 0..80),
    ) {
        run(cfg, cap, ops)?;
    }

    #[test]
    fn drop_oldest_matches_model(
        cfg in config(OverflowPolicy::DropOldest),
        cap in cap(),
        ops in prop::collection::vec(op(), 0..80),
    ) {
        run(cfg, cap, ops)?;
    }
}
