//! The batcher state machine: buffer, park, flush decisions and in-flight accounting.

use std::collections::VecDeque;
use std::time::Instant;

use super::config::{BatchConfig, ConfigError, OverflowPolicy};
use super::stats::BatchStats;
use super::types::{Admission, Batch, BatchId, FlushReason, ItemId, PushError, RejectReason};

/// One accepted item waiting to be sent.
struct Entry<T> {
    id: ItemId,
    item: T,
    bytes: usize,
    /// When it was pushed; linger counts from here, also for parked items, so time spent parked
    /// is not waited a second time once the item is admitted.
    pushed_at: Instant,
}

/// Generic sans-IO batcher; see the [module documentation](super) for the rules and the drive
/// loop.
///
/// `T` is whatever the caller wants back with each item: a payload, an index into its own table,
/// a oneshot sender. The batcher never looks inside it.
pub struct Batcher<T> {
    config: BatchConfig,
    /// Most bytes in one batch, except an item that alone exceeds it; see
    /// [`with_max_batch_bytes`](Self::with_max_batch_bytes). `usize::MAX` when uncapped.
    max_batch_bytes: usize,
    /// Buffered items, oldest first. Sorted by id, because items enter it in push order (pushes
    /// made while anything is parked are parked too), which lets `cancel` binary-search it.
    buffer: VecDeque<Entry<T>>,
    /// Sum of `bytes` over `buffer`; never above `max_pending_bytes`.
    pending_bytes: usize,
    /// Backpressure overflow, oldest first, all newer than anything in `buffer`. Invariant: if it
    /// is non-empty then so is `buffer` (an empty buffer always has room for the front item).
    parked: VecDeque<Entry<T>>,
    /// Sum of `bytes` over `parked`, so whether the waiting items fill a batch by bytes is O(1).
    /// Wide, because the parked queue has no byte bound and the sum must never overflow.
    parked_bytes: u128,
    /// Batches handed out and not yet completed. At most `max_in_flight` long, so a linear
    /// search is cheaper than hashing.
    in_flight: Vec<BatchId>,
    /// Flushes owed to completions: each completion that finds items waiting entitles them to go
    /// out at once. Every flush spends one; an empty buffer forfeits them, so a completion never
    /// makes a later, unrelated push skip the buffer. Never more than the free slots.
    completion_credits: usize,
    /// `DropOldest` victims not yet collected by `poll_rejected`.
    rejected: VecDeque<(ItemId, T, RejectReason)>,
    /// Emptied batch vectors handed back by `recycle`, reused so steady state does not allocate.
    spare: Vec<Vec<(ItemId, T)>>,
    /// Latest `now` seen. Inputs earlier than this are treated as this, so push times stay
    /// ordered along the buffer and the front is always the oldest item.
    clock: Option<Instant>,
    next_item: u64,
    next_batch: u64,
    closed: bool,
    stats: BatchStats,
}

impl<T> std::fmt::Debug for Batcher<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Items are the caller's business (and may not be Debug): show the shape only.
        f.debug_struct("Batcher")
            .field("config", &self.config)
            .field("max_batch_bytes", &self.max_batch_bytes)
            .field("pending_items", &self.buffer.len())
            .field("pending_bytes", &self.pending_bytes)
            .field("parked", &self.parked.len())
            .field("in_flight", &self.in_flight)
            .field("rejected", &self.rejected.len())
            .field("closed", &self.closed)
            .finish_non_exhaustive()
    }
}

/// Upper bound on capacity reserved up front, so a huge configured limit cannot turn `new` into
/// a huge allocation; the containers still grow to their configured limits when used.
const PREALLOCATE_MAX: usize = 1024;

impl<T> Batcher<T> {
    /// Builds a batcher after [validating](BatchConfig::validate) `config`.
    pub fn new(config: BatchConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        Ok(Self {
            max_batch_bytes: usize::MAX,
            buffer: VecDeque::with_capacity(config.max_batch.min(PREALLOCATE_MAX)),
            pending_bytes: 0,
            parked: VecDeque::new(),
            parked_bytes: 0,
            in_flight: Vec::with_capacity(config.max_in_flight.min(PREALLOCATE_MAX)),
            completion_credits: 0,
            rejected: VecDeque::new(),
            spare: Vec::with_capacity(Self::spare_limit(&config).min(PREALLOCATE_MAX)),
            clock: None,
            next_item: 0,
            next_batch: 0,
            closed: false,
            stats: BatchStats::default(),
            config,
        })
    }

    /// Caps the bytes of one batch (as declared on each push) at `max_batch_bytes`: a flush
    /// takes items, oldest first, while they fit; an item that alone declares more goes out
    /// alone. Without this, batches are bounded by `max_batch` items only.
    ///
    /// Waiting items that together exceed one batch's bytes make it full, as `max_batch` items do:
    /// it leaves at once ([`FlushReason::Size`]) when a slot is free. The producer caps each
    /// queue's batcher at the frame's budget for PUSHB items, so that no batch of valid jobs
    /// can overflow a frame.
    ///
    /// It is a setting of the batcher rather than a [`BatchConfig`] field so that configurations
    /// written out field by field keep compiling.
    ///
    /// # Errors
    ///
    /// [`ConfigError::MaxBatchBytesZero`] for 0: no batch could hold anything.
    ///
    /// ```
    /// use std::time::Instant;
    /// use autobatch_core::batch::{BatchConfig, Batcher};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let mut b = Batcher::new(BatchConfig::default())?.with_max_batch_bytes(100)?;
    /// let now = Instant::now();
    /// for (item, bytes) in [("a", 60), ("b", 30), ("c", 20), ("huge", 500), ("d", 1)] {
    ///     b.push(now, item, bytes)?;
    /// }
    /// let mut sizes = Vec::new();
    /// while let Some(batch) = b.poll_batch(now) {
    ///     sizes.push((batch.items.len(), batch.bytes));
    ///     b.complete(now, batch.id);
    /// }
    /// // "a" and "b" fit in 100 bytes, "c" does not; "huge" goes alone.
    /// assert_eq!(sizes, [(2, 90), (1, 20), (1, 500), (1, 1)]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_max_batch_bytes(mut self, max_batch_bytes: usize) -> Result<Self, ConfigError> {
        if max_batch_bytes == 0 {
            return Err(ConfigError::MaxBatchBytesZero);
        }
        self.max_batch_bytes = max_batch_bytes;
        Ok(self)
    }

    /// The configuration in force.
    pub fn config(&self) -> &BatchConfig {
        &self.config
    }

    /// The per-batch byte cap in force (`usize::MAX` when uncapped); see
    /// [`with_max_batch_bytes`](Self::with_max_batch_bytes).
    pub fn max_batch_bytes(&self) -> usize {
        self.max_batch_bytes
    }

    /// Offers one item declaring `bytes` of payload (the unit is the caller's; it is only summed
    /// and compared with `max_pending_bytes`).
    ///
    /// On success the item is owned by the batcher until it comes back in a [`Batch`], from
    /// [`cancel`](Self::cancel) or from [`poll_rejected`](Self::poll_rejected). Follow with
    /// [`poll_batch`](Self::poll_batch) (an idle batcher flushes at once) and, under
    /// [`OverflowPolicy::DropOldest`], [`poll_rejected`](Self::poll_rejected).
    ///
    /// # Errors
    ///
    /// The item is handed back with [`PushError::Closed`] after [`close`](Self::close),
    /// [`PushError::TooLarge`] if `bytes > max_pending_bytes`, and [`PushError::Rejected`] if the
    /// buffer is full under [`OverflowPolicy::Reject`].
    pub fn push(
        &mut self,
        now: Instant,
        item: T,
        bytes: usize,
    ) -> Result<(ItemId, Admission), PushError<T>> {
        let now = self.advance(now);
        if self.closed {
            self.stats.items_after_close += 1;
            return Err(PushError::Closed(item));
        }
        if bytes > self.config.max_pending_bytes {
            self.stats.items_too_large += 1;
            return Err(PushError::TooLarge(item));
        }
        // Anything parked goes first, so a newcomer may only enter the buffer if nobody is parked.
        if !self.parked.is_empty() || !self.has_room(bytes) {
            match self.config.overflow {
                OverflowPolicy::Backpressure => {
                    let id = self.next_item_id();
                    self.parked.push_back(Entry {
                        id,
                        item,
                        bytes,
                        pushed_at: now,
                    });
                    self.parked_bytes += bytes as u128;
                    self.stats.items_pushed += 1;
                    self.stats.items_parked += 1;
                    return Ok((id, Admission::Parked));
                }
                OverflowPolicy::Reject => {
                    self.stats.items_rejected += 1;
                    return Err(PushError::Rejected(item));
                }
                OverflowPolicy::DropOldest => self.drop_oldest_for(bytes),
            }
        }
        let id = self.next_item_id();
        self.buffer.push_back(Entry {
            id,
            item,
            bytes,
            pushed_at: now,
        });
        self.pending_bytes += bytes;
        self.stats.items_pushed += 1;
        Ok((id, Admission::Buffered))
    }

    /// Whether the batcher is idle: open, nothing buffered or parked, nothing in flight. An item
    /// pushed now would leave at once, alone ([`FlushReason::Idle`]); see
    /// [`send_alone`](Self::send_alone).
    pub fn is_idle(&self) -> bool {
        !self.closed
            && self.buffer.is_empty()
            && self.parked.is_empty()
            && self.in_flight.is_empty()
    }

    /// Lets the caller send one item of `bytes` itself, around the buffer, when the batcher is
    /// [idle](Self::is_idle): it would have left at once and alone anyway, so this is the same
    /// batch of one without the buffering. Returns the batch id holding its in-flight slot, to be
    /// [`complete`](Self::complete)d like any batch, so items pushed meanwhile wait and batch.
    /// The item counts as pushed and sent in a [`FlushReason::Idle`] batch of one.
    ///
    /// Returns `None`, taking nothing, if the batcher is not idle or `bytes` exceeds
    /// `max_pending_bytes` (a push would refuse it): then [`push`](Self::push) it instead.
    ///
    /// ```
    /// use std::time::Instant;
    /// use autobatch_core::batch::{BatchConfig, Batcher};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let mut b = Batcher::new(BatchConfig::default().max_in_flight(1))?;
    /// let now = Instant::now();
    /// let alone = b.send_alone(now, 10).expect("idle");
    /// // Its slot is taken: what comes meanwhile waits for it, and then leaves together.
    /// assert!(b.send_alone(now, 10).is_none());
    /// b.push(now, "a", 10)?;
    /// b.push(now, "b", 10)?;
    /// assert!(b.poll_batch(now).is_none());
    /// b.complete(now, alone);
    /// assert_eq!(b.poll_batch(now).map(|batch| batch.items.len()), Some(2));
    /// # Ok(())
    /// # }
    /// ```
    pub fn send_alone(&mut self, now: Instant, bytes: usize) -> Option<BatchId> {
        self.advance(now);
        if !self.is_idle() || bytes > self.config.max_pending_bytes {
            return None;
        }
        // Counted as the push and Idle flush it stands for, so the stats read the same whichever
        // way a lone item went.
        self.next_item_id();
        let id = BatchId(self.next_batch);
        self.next_batch += 1;
        self.in_flight.push(id);
        self.stats.items_pushed += 1;
        self.stats.items_sent += 1;
        self.stats.batches += 1;
        self.stats.flushes[FlushReason::Idle.index()] += 1;
        self.stats.batch_sizes.record(1);
        self.stats.max_in_flight_seen = self.stats.max_in_flight_seen.max(self.in_flight.len());
        Some(id)
    }

    /// Takes back an item that has not been sent yet (buffered or parked), for example because
    /// its caller gave up. Returns `None` if it was already sent, cancelled, dropped, or never
    /// existed.
    ///
    /// Follow with [`poll_batch`](Self::poll_batch): freeing room may admit parked items.
    pub fn cancel(&mut self, id: ItemId) -> Option<T> {
        let entry = if let Ok(pos) = self.buffer.binary_search_by_key(&id, |e| e.id) {
            let entry = self.buffer.remove(pos)?;
            self.pending_bytes -= entry.bytes;
            entry
        } else if let Ok(pos) = self.parked.binary_search_by_key(&id, |e| e.id) {
            let entry = self.parked.remove(pos)?;
            self.parked_bytes -= entry.bytes as u128;
            entry
        } else {
            return None;
        };
        self.admit_parked();
        if self.buffer.is_empty() {
            self.completion_credits = 0;
        }
        self.stats.items_cancelled += 1;
        Some(entry.item)
    }

    /// The next batch to send, if one is due at `now`.
    ///
    /// Call it until it returns `None` after every input: [`push`](Self::push),
    /// [`complete`](Self::complete), [`handle_timeout`](Self::handle_timeout),
    /// [`close`](Self::close) and [`cancel`](Self::cancel). Each batch returned is in flight until
    /// [`complete`](Self::complete)d.
    #[must_use = "a batch taken but not sent is lost"]
    pub fn poll_batch(&mut self, now: Instant) -> Option<Batch<T>> {
        let now = self.advance(now);
        let reason = self.due(now)?;

        let take = self
            .config
            .max_batch
            .min(self.buffer.len() + self.parked.len());
        let mut items = self.spare.pop().unwrap_or_default();
        items.reserve(take);
        let mut bytes: usize = 0;
        while items.len() < take {
            let Some(front) = self.buffer.front() else {
                break;
            };
            // The first item always goes, even alone over the cap; later ones only if they fit.
            if !items.is_empty() && bytes.saturating_add(front.bytes) > self.max_batch_bytes {
                break;
            }
            let Some(entry) = self.buffer.pop_front() else {
                break;
            };
            self.pending_bytes -= entry.bytes;
            bytes += entry.bytes;
            items.push((entry.id, entry.item));
            // Parked items continue the buffer's FIFO: admitting them as room appears lets this
            // same batch fill up with them.
            if !self.parked.is_empty() {
                self.admit_parked();
            }
        }
        if self.buffer.is_empty() {
            self.completion_credits = 0;
        } else {
            self.completion_credits = self.completion_credits.saturating_sub(1);
        }

        let id = BatchId(self.next_batch);
        self.next_batch += 1;
        self.in_flight.push(id);

        let n = items.len();
        self.stats.batches += 1;
        self.stats.items_sent += n as u64;
        self.stats.flushes[reason.index()] += 1;
        self.stats.batch_sizes.record(n);
        self.stats.max_in_flight_seen = self.stats.max_in_flight_seen.max(self.in_flight.len());

        Some(Batch {
            id,
            reason,
            items,
            bytes,
        })
    }

    /// Reports that the send of `batch` is over, whatever its outcome (per-item outcomes are the
    /// caller's business). Frees its in-flight slot; if items are waiting, they are owed a
    /// [`FlushReason::Completion`] flush. Unknown or already completed ids are ignored.
    ///
    /// Follow with [`poll_batch`](Self::poll_batch).
    pub fn complete(&mut self, now: Instant, batch: BatchId) {
        self.advance(now);
        let Some(pos) = self.in_flight.iter().position(|&b| b == batch) else {
            return;
        };
        self.in_flight.swap_remove(pos);
        self.stats.completions += 1;
        if !self.buffer.is_empty() {
            self.completion_credits = (self.completion_credits + 1).min(self.free_slots());
        }
    }

    /// Tells the batcher that time has reached `now`, typically because the deadline from
    /// [`poll_timeout`](Self::poll_timeout) passed.
    ///
    /// Linger expiry is judged when [`poll_batch`](Self::poll_batch) runs, so this only advances
    /// the batcher's notion of time; follow it with [`poll_batch`](Self::poll_batch).
    pub fn handle_timeout(&mut self, now: Instant) {
        self.advance(now);
    }

    /// When to call [`handle_timeout`](Self::handle_timeout) next, or `None` when nothing waits
    /// on time.
    ///
    /// Meaningful once [`poll_batch`](Self::poll_batch) has returned `None`. It is `None` when
    /// the buffer is empty, when the batcher is idle (the next `poll_batch` flushes at once, no
    /// timer), when every in-flight slot is taken (waiting for a completion, not for time) and
    /// after [`close`](Self::close) (flushes wait only for slots). Otherwise it is the push time
    /// of the oldest buffered item plus `linger`; it may be in the past if time was not advanced.
    #[must_use = "a deadline that is not armed never fires"]
    pub fn poll_timeout(&self) -> Option<Instant> {
        let front = self.buffer.front()?;
        let waiting_on_time = !self.closed
            && !self.in_flight.is_empty()
            && self.free_slots() > 0
            && self.completion_credits == 0
            && !self.waiting_fill_a_batch();
        waiting_on_time.then(|| self.linger_deadline(front))
    }

    /// The next item dropped under [`OverflowPolicy::DropOldest`], oldest first. Its caller
    /// should be told it failed (bunqueue: "Add buffer overflow").
    ///
    /// Call it until it returns `None` after every [`push`](Self::push) under `DropOldest`.
    #[must_use = "a rejected item taken but not reported is lost"]
    pub fn poll_rejected(&mut self) -> Option<(ItemId, T, RejectReason)> {
        self.rejected.pop_front()
    }

    /// Stops taking items and flushes everything left, parked items included, with
    /// [`FlushReason::Close`] as fast as in-flight slots allow, ignoring linger.
    ///
    /// Follow with [`poll_batch`](Self::poll_batch) (and after each later
    /// [`complete`](Self::complete)) until [`is_drained`](Self::is_drained). Closing twice is
    /// harmless.
    pub fn close(&mut self, now: Instant) {
        self.advance(now);
        self.closed = true;
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// True once closed with nothing left: nothing buffered or parked, nothing in flight and no
    /// dropped item left uncollected by [`poll_rejected`](Self::poll_rejected). From then on every
    /// item ever accepted has been handed back.
    pub fn is_drained(&self) -> bool {
        self.closed
            && self.buffer.is_empty()
            && self.parked.is_empty()
            && self.in_flight.is_empty()
            && self.rejected.is_empty()
    }

    /// Batches handed out and not yet completed.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Items in the buffer (parked and in-flight items not included).
    pub fn pending_items(&self) -> usize {
        self.buffer.len()
    }

    /// Bytes declared by the items in the buffer.
    pub fn pending_bytes(&self) -> usize {
        self.pending_bytes
    }

    /// Items parked by backpressure, waiting for room in the buffer.
    pub fn parked(&self) -> usize {
        self.parked.len()
    }

    /// Counters since the batcher was built.
    pub fn stats(&self) -> &BatchStats {
        &self.stats
    }

    /// Hands back a batch's `items` vector once the caller is done with it, so a later batch
    /// reuses its capacity instead of allocating. Anything left in it is dropped. Optional.
    pub fn recycle(&mut self, mut items: Vec<(ItemId, T)>) {
        items.clear();
        // Only as many as can be in use at once are worth keeping; more would be idle memory.
        if items.capacity() > 0 && self.spare.len() < Self::spare_limit(&self.config) {
            self.spare.push(items);
        }
    }

    /// Why a flush is due now, if one is. Forfeits completion credits once the buffer is empty.
    fn due(&mut self, now: Instant) -> Option<FlushReason> {
        let Some(front) = self.buffer.front() else {
            self.completion_credits = 0;
            return None;
        };
        if self.free_slots() == 0 {
            None
        } else if self.closed {
            Some(FlushReason::Close)
        } else if self.completion_credits > 0 {
            Some(FlushReason::Completion)
        } else if self.in_flight.is_empty() {
            Some(FlushReason::Idle)
        } else if self.waiting_fill_a_batch() {
            Some(FlushReason::Size)
        } else if now >= self.linger_deadline(front) {
            Some(FlushReason::Linger)
        } else {
            None
        }
    }

    /// Whether the waiting items (buffered and parked) make at least one full batch: `max_batch`
    /// of them, or more bytes than one batch may hold (then the next batch stops at an item that
    /// does not fit, so waiting longer cannot make it bigger).
    fn waiting_fill_a_batch(&self) -> bool {
        self.buffer.len() + self.parked.len() >= self.config.max_batch
            || self.pending_bytes as u128 + self.parked_bytes > self.max_batch_bytes as u128
    }

    fn linger_deadline(&self, entry: &Entry<T>) -> Instant {
        // Only an Instant near the end of its range can overflow; flushing at once then is the
        // safe reading (never wait forever).
        entry
            .pushed_at
            .checked_add(self.config.linger)
            .unwrap_or(entry.pushed_at)
    }

    fn free_slots(&self) -> usize {
        self.config
            .max_in_flight
            .saturating_sub(self.in_flight.len())
    }

    /// Whether an item of `bytes` fits in the buffer now (ignoring anything parked).
    fn has_room(&self, bytes: usize) -> bool {
        // `pending_bytes <= max_pending_bytes` always holds, so the subtraction cannot wrap.
        self.buffer.len() < self.config.max_pending_items
            && bytes <= self.config.max_pending_bytes - self.pending_bytes
    }

    /// Moves parked items into the buffer, in order, while they fit.
    fn admit_parked(&mut self) {
        while let Some(front) = self.parked.front() {
            if !self.has_room(front.bytes) {
                break;
            }
            let Some(entry) = self.parked.pop_front() else {
                break;
            };
            self.parked_bytes -= entry.bytes as u128;
            self.pending_bytes += entry.bytes;
            self.buffer.push_back(entry);
        }
    }

    /// `DropOldest`: drops the oldest tenth of the buffer (at least one item), then more if still
    /// needed, until an item of `bytes` fits.
    fn drop_oldest_for(&mut self, bytes: usize) {
        let mut quota = self.buffer.len().div_ceil(10).max(1);
        while quota > 0 || !self.has_room(bytes) {
            let Some(victim) = self.buffer.pop_front() else {
                break;
            };
            self.pending_bytes -= victim.bytes;
            self.rejected
                .push_back((victim.id, victim.item, RejectReason::Overflow));
            self.stats.items_dropped += 1;
            quota = quota.saturating_sub(1);
        }
    }

    fn next_item_id(&mut self) -> ItemId {
        let id = ItemId(self.next_item);
        self.next_item += 1;
        id
    }

    fn advance(&mut self, now: Instant) -> Instant {
        let now = match self.clock {
            Some(seen) if seen > now => seen,
            _ => now,
        };
        self.clock = Some(now);
        now
    }

    fn spare_limit(config: &BatchConfig) -> usize {
        config.max_in_flight.saturating_add(1)
    }
}
