//! The generic batcher: turns items pushed one by one into batches, without adding latency to
//! sequential callers.
//!
//! [`Batcher<T>`] is a pure state machine, generic over the caller's token `T` (a payload, an
//! index, a oneshot sender). It knows nothing about jobs or the protocol: the producer uses it to
//! turn concurrent `add()` calls into `PUSHB`, the worker to turn completions into `ACKB`, and the
//! broker for its group-commit buffer, each with its own [`BatchConfig`].
//!
//! It performs no I/O and never reads a clock: every call that depends on time takes
//! `now: Instant`, and outputs are drained with `poll_*` calls until they return `None`
//! (the quinn-proto / str0m style). Same inputs, same outputs.
//!
//! # Rules
//!
//! These are the contract; the unit tests and the `batch_model` property test check them.
//!
//! 1. **Idle flushes at once.** Idle means no batch in flight. Items pushed while idle go out on
//!    the next [`poll_batch`](Batcher::poll_batch) ([`FlushReason::Idle`]) with no timer armed:
//!    sequential code gets one item per batch and pays nothing. Items pushed in one burst before
//!    that `poll_batch` share the batch (up to `max_batch`). Once a batch is in flight the
//!    batcher stops being idle. A caller that knows an item is alone may skip the buffer with
//!    [`send_alone`](Batcher::send_alone): the same batch of one, holding its slot, counted
//!    alike, with the item kept by the caller.
//! 2. **Busy buffers.** While a batch is in flight, items are buffered and flushed when a flush
//!    completes ([`FlushReason::Completion`]), when the waiting items fill a batch — `max_batch`
//!    items, or more bytes than the batch byte cap ([`Batcher::with_max_batch_bytes`]) —
//!    ([`FlushReason::Size`]) or when `linger` has passed since the oldest buffered item was
//!    pushed ([`FlushReason::Linger`]), whichever comes first, but never with more than
//!    `max_in_flight` batches in flight: a due flush without a free slot waits for a completion.
//!    After a completion, flushing goes on while slots are free and full batches or
//!    linger-expired items remain. No item waits longer than `linger` once a slot is free.
//! 3. **Bounded and ordered.** No batch is empty or exceeds `max_batch` items. With a byte cap,
//!    a flush takes items while their bytes fit under it, so no batch exceeds the cap unless it
//!    is a single item that alone declares more (it goes out alone). Items are sent in push
//!    order across batches.
//! 4. **Bounded buffer.** `max_pending_items` and `max_pending_bytes` bound the *buffered* items
//!    (in-flight ones are the caller's). A push that does not fit follows the
//!    [`OverflowPolicy`]: `Backpressure` parks it in a FIFO outside the buffer (nothing is lost;
//!    parked items are admitted in order as room appears, before any newer push, and every push
//!    made while items are parked is parked too); `Reject` returns [`PushError::Rejected`];
//!    `DropOldest` drops the oldest 10% of the buffer (at least one item, more if needed to make
//!    room), reports them through [`poll_rejected`](Batcher::poll_rejected) with
//!    [`RejectReason::Overflow`], and buffers the new item. An item whose bytes alone exceed
//!    `max_pending_bytes` is refused with [`PushError::TooLarge`] under every policy.
//! 5. **Cancel until sent.** [`cancel`](Batcher::cancel) removes an item (and its bytes) while it
//!    is buffered or parked; once it has been handed out in a batch, `cancel` returns `None`.
//! 6. **Close drains.** After [`close`](Batcher::close), pushes fail with [`PushError::Closed`];
//!    everything buffered or parked is flushed with [`FlushReason::Close`] as fast as slots
//!    allow; [`is_drained`](Batcher::is_drained) turns true once nothing is left and nothing is
//!    in flight.
//! 7. **Total.** [`complete`](Batcher::complete) with an unknown or already completed
//!    [`BatchId`] is ignored. No sequence of calls panics; time going backwards is read as time
//!    standing still.
//! 8. **Cheap.** Push and flush are O(1) amortized per item ([`cancel`](Batcher::cancel) is a
//!    binary search plus a shift); once warm, and with batch vectors handed back through
//!    [`recycle`](Batcher::recycle), nothing is allocated per item or per batch.
//!
//! Every accepted item comes back to the caller exactly once: in a [`Batch`], from `cancel`, or
//! from `poll_rejected`.
//!
//! # Driving it
//!
//! After every input (`push`, `complete`, `cancel`, `close`, `handle_timeout`) drain
//! `poll_batch` until `None` (and `poll_rejected` under `DropOldest`), then arm a timer for
//! `poll_timeout`. The example below plays the transport with a list of sends in flight:
//!
//! ```
//! use std::time::{Duration, Instant};
//! use autobatch_core::batch::{Admission, BatchConfig, Batcher, FlushReason};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut batcher = Batcher::new(BatchConfig::default())?; // 50 items, 5 ms linger
//! let t0 = Instant::now(); // the only clock read; the batcher itself never reads one
//! let ms = |n| t0 + Duration::from_millis(n);
//! let mut sending = Vec::new(); // what a real adapter would be writing to its socket
//!
//! // Sequential code: idle, so the item goes out at once, alone, with no timer.
//! let (_, admission) = batcher.push(t0, "a", 10)?;
//! assert_eq!(admission, Admission::Buffered);
//! while let Some(batch) = batcher.poll_batch(t0) {
//!     assert_eq!(batch.reason, FlushReason::Idle);
//!     sending.push(batch);
//! }
//! assert_eq!(batcher.poll_timeout(), None);
//!
//! // Concurrent code: while "a" is in flight, "b" and "c" are buffered and a timer is armed.
//! batcher.push(ms(1), "b", 10)?;
//! batcher.push(ms(1), "c", 10)?;
//! assert!(batcher.poll_batch(ms(1)).is_none());
//! assert_eq!(batcher.poll_timeout(), Some(ms(6)));
//!
//! // The send of "a" finishes first: "b" and "c" leave together, without waiting for linger.
//! let done = sending.remove(0);
//! batcher.complete(ms(2), done.id);
//! batcher.recycle(done.items); // reuse its Vec for a later batch
//! let batch = batcher.poll_batch(ms(2)).expect("completion flush");
//! assert_eq!(batch.reason, FlushReason::Completion);
//! let payloads: Vec<_> = batch.items.iter().map(|(_, item)| *item).collect();
//! assert_eq!(payloads, ["b", "c"]);
//! sending.push(batch);
//!
//! // Shut down: no more pushes, wait for every send to finish.
//! batcher.close(ms(3));
//! while !batcher.is_drained() {
//!     while let Some(batch) = batcher.poll_batch(ms(3)) {
//!         sending.push(batch);
//!     }
//!     if let Some(done) = sending.pop() {
//!         batcher.complete(ms(4), done.id);
//!     }
//! }
//! assert_eq!(batcher.stats().items_sent, 3);
//! # Ok(())
//! # }
//! ```

mod batcher;
mod config;
mod stats;
mod types;

pub use batcher::Batcher;
pub use config::{BatchConfig, ConfigError, OverflowPolicy, MAX_LINGER};
pub use stats::{BatchStats, SizeHistogram};
pub use types::{Admission, Batch, BatchId, FlushReason, ItemId, PushError, RejectReason};
