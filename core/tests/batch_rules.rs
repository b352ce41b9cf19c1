//! The batcher's rules, one group of tests per rule of `autobatch_core::batch`'s documentation.
//! (Here rather than in `core/src`, so the only clock read in the crate's sources is none.) Time is virtual: one base
//! `Instant` plus offsets.

use std::time::{Duration, Instant};

use autobatch_core::batch::*;

fn base() -> Instant {
    Instant::now()
}

/// The id the `n`-th push (from 0) of any batcher gets: ids are assigned in push order.
fn nth_item_id(n: u64) -> ItemId {
    let mut b = Batcher::new(BatchConfig::new().max_pending_items(100_000)).unwrap();
    let t0 = base();
    (0..=n).map(|i| b.push(t0, i, 0).unwrap().0).last().unwrap()
}

/// The id of the `n`-th batch (from 0) any batcher hands out.
fn nth_batch_id(n: u64) -> BatchId {
    let mut b = Batcher::new(cfg(1, 1)).unwrap();
    let t0 = base();
    let mut last = None;
    for i in 0..=n {
        b.push(t0, i, 0).unwrap();
        let batch = b.poll_batch(t0).unwrap();
        b.complete(t0, batch.id);
        last = Some(batch.id);
    }
    last.unwrap()
}

fn at(t0: Instant, ms: u64) -> Instant {
    t0 + Duration::from_millis(ms)
}

fn cfg(max_batch: usize, max_in_flight: usize) -> BatchConfig {
    BatchConfig::new()
        .max_batch(max_batch)
        .max_in_flight(max_in_flight)
        .linger(Duration::from_millis(5))
}

fn ids<T>(batch: &Batch<T>) -> Vec<ItemId> {
    batch.items.iter().map(|(id, _)| *id).collect()
}

fn payloads<T: Copy>(batch: &Batch<T>) -> Vec<T> {
    batch.items.iter().map(|(_, item)| *item).collect()
}

// ---- configuration -------------------------------------------------------------------------

#[test]
fn default_config_is_valid_and_matches_bunqueue() {
    let c = BatchConfig::default();
    assert_eq!(c.validate(), Ok(()));
    assert_eq!(c.max_batch, 50);
    assert_eq!(c.linger, Duration::from_millis(5));
    assert_eq!(c.max_in_flight, 4);
    assert_eq!(c.max_pending_items, 10_000);
    assert_eq!(c.max_pending_bytes, 64 * 1024 * 1024);
    assert_eq!(c.overflow, OverflowPolicy::Backpressure);
}

#[test]
fn invalid_configs_name_the_field_and_are_not_coerced() {
    let cases = [
        (BatchConfig::new().max_batch(0), "max_batch"),
        (BatchConfig::new().max_in_flight(0), "max_in_flight"),
        (
            BatchConfig::new().max_batch(10).max_pending_items(9),
            "max_pending_items",
        ),
        (BatchConfig::new().max_pending_bytes(0), "max_pending_bytes"),
        (
            BatchConfig::new().linger(MAX_LINGER + Duration::from_nanos(1)),
            "linger",
        ),
    ];
    for (config, field) in cases {
        let err = config.validate().unwrap_err();
        assert_eq!(err.field(), field);
        assert!(err.to_string().contains(field), "{err}");
        assert_eq!(Batcher::<()>::new(config).unwrap_err().field(), field);
    }
    let edge = BatchConfig::new()
        .max_batch(7)
        .max_pending_items(7)
        .max_pending_bytes(1)
        .max_in_flight(1)
        .linger(MAX_LINGER);
    assert_eq!(edge.validate(), Ok(()));
}

// ---- rule 1: idle flushes at once ------------------------------------------------------------

#[test]
fn sequential_pushes_go_out_alone_without_a_timer() {
    let t0 = base();
    let mut b = Batcher::new(cfg(50, 4)).unwrap();
    for i in 0..3u64 {
        let now = at(t0, i * 10);
        let (id, adm) = b.push(now, i, 1).unwrap();
        assert_eq!(adm, Admission::Buffered);
        assert_eq!(b.poll_timeout(), None, "idle must not arm a timer");
        let batch = b.poll_batch(now).unwrap();
        assert_eq!(batch.reason, FlushReason::Idle);
        assert_eq!(ids(&batch), vec![id]);
        assert!(b.poll_batch(now).is_none());
        assert_eq!(b.poll_timeout(), None);
        b.complete(now, batch.id);
    }
    assert_eq!(b.stats().flushes_for(FlushReason::Idle), 3);
    assert_eq!(b.stats().batch_sizes.bucket(0), 3);
}

#[test]
fn burst_while_idle_shares_the_idle_batch_up_to_max_batch() {
    let t0 = base();
    let mut b = Batcher::new(cfg(3, 4)).unwrap();
    for i in 0..5 {
        b.push(t0, i, 1).unwrap();
    }
    let first = b.poll_batch(t0).unwrap();
    assert_eq!(first.reason, FlushReason::Idle);
    assert_eq!(payloads(&first), vec![0, 1, 2]);
    // Now busy: the remaining two are fewer than max_batch, so they wait.
    assert!(b.poll_batch(t0).is_none());
    assert_eq!(b.pending_items(), 2);
    assert_eq!(b.poll_timeout(), Some(at(t0, 5)));
}

// ---- rule 2: busy buffers --------------------------------------------------------------------

#[test]
fn completion_flushes_what_waited() {
    let t0 = base();
    let mut b = Batcher::new(cfg(50, 4)).unwrap();
    b.push(t0, 0, 1).unwrap();
    let first = b.poll_batch(t0).unwrap();
    b.push(at(t0, 1), 1, 1).unwrap();
    b.push(at(t0, 2), 2, 1).unwrap();
    assert!(b.poll_batch(at(t0, 2)).is_none());
    b.complete(at(t0, 3), first.id);
    assert_eq!(
        b.poll_timeout(),
        None,
        "a completion flush is due now, not later"
    );
    let second = b.poll_batch(at(t0, 3)).unwrap();
    assert_eq!(second.reason, FlushReason::Completion);
    assert_eq!(payloads(&second), vec![1, 2]);
    assert!(b.poll_batch(at(t0, 3)).is_none());
}

#[test]
fn completion_with_nothing_waiting_does_not_make_later_pushes_skip_the_buffer() {
    let t0 = base();
    let mut b = Batcher::new(cfg(50, 4)).unwrap();
    b.push(t0, 0, 1).unwrap();
    let a = b.poll_batch(t0).unwrap();
    b.push(t0, 1, 1).unwrap();
    let c = b.poll_batch(at(t0, 5)).unwrap();
    assert_eq!(c.reason, FlushReason::Linger);
    // `a` completes with an empty buffer: nothing is owed, and `c` keeps the batcher busy, so a
    // later push waits for linger instead of leaving at once.
    b.complete(at(t0, 6), a.id);
    b.push(at(t0, 7), 2, 1).unwrap();
    assert!(b.poll_batch(at(t0, 7)).is_none());
    assert_eq!(b.poll_timeout(), Some(at(t0, 12)));
}

#[test]
fn size_flush_when_buffer_reaches_max_batch() {
    let t0 = base();
    let mut b = Batcher::new(cfg(3, 4)).unwrap();
    b.push(t0, 0, 1).unwrap();
    b.poll_batch(t0).unwrap();
    b.push(t0, 1, 1).unwrap();
    b.push(t0, 2, 1).unwrap();
    assert!(b.poll_batch(t0).is_none());
    b.push(t0, 3, 1).unwrap();
    let batch = b.poll_batch(t0).unwrap();
    assert_eq!(batch.reason, FlushReason::Size);
    assert_eq!(payloads(&batch), vec![1, 2, 3]);
}

#[test]
fn linger_flush_counts_from_the_oldest_buffered_item() {
    let t0 = base();
    let mut b = Batcher::new(cfg(50, 4)).unwrap();
    b.push(t0, 0, 1).unwrap();
    b.poll_batch(t0).unwrap();
    b.push(at(t0, 1), 1, 1).unwrap();
    b.push(at(t0, 4), 2, 1).unwrap();
    assert_eq!(b.poll_timeout(), Some(at(t0, 6)));
    b.handle_timeout(at(t0, 5));
    assert!(b.poll_batch(at(t0, 5)).is_none());
    b.handle_timeout(at(t0, 6));
    let batch = b.poll_batch(at(t0, 6)).unwrap();
    assert_eq!(batch.reason, FlushReason::Linger);
    assert_eq!(payloads(&batch), vec![1, 2]);
    assert_eq!(b.poll_timeout(), None);
}

#[test]
fn handle_timeout_alone_advances_time_for_poll_batch() {
    let t0 = base();
    let mut b = Batcher::new(cfg(50, 4)).unwrap();
    b.push(t0, 0, 1).unwrap();
    b.poll_batch(t0).unwrap();
    b.push(t0, 1, 1).unwrap();
    b.handle_timeout(at(t0, 5));
    // An older `now` given afterwards is read as "no time passed since", not as going back.
    let batch = b.poll_batch(t0).unwrap();
    assert_eq!(batch.reason, FlushReason::Linger);
}

#[test]
fn in_flight_never_exceeds_max_and_due_flushes_wait_for_a_slot() {
    let t0 = base();
    let mut b = Batcher::new(cfg(2, 2)).unwrap();
    for i in 0..9 {
        b.push(t0, i, 1).unwrap();
    }
    let a = b.poll_batch(t0).unwrap();
    let c = b.poll_batch(t0).unwrap();
    assert_eq!((a.reason, c.reason), (FlushReason::Idle, FlushReason::Size));
    assert!(
        b.poll_batch(at(t0, 100)).is_none(),
        "no slot, even past linger"
    );
    assert_eq!(
        b.poll_timeout(),
        None,
        "waiting on a completion, not on time"
    );
    assert_eq!(b.in_flight(), 2);
    assert_eq!(b.stats().max_in_flight_seen, 2);

    b.complete(at(t0, 100), a.id);
    let d = b.poll_batch(at(t0, 100)).unwrap();
    assert_eq!(d.reason, FlushReason::Completion);
    assert_eq!(payloads(&d), vec![4, 5]);
    assert!(b.poll_batch(at(t0, 100)).is_none());

    // Two completions at once: each owes a flush, and full batches keep going while slots last.
    b.complete(at(t0, 101), c.id);
    b.complete(at(t0, 101), d.id);
    let e = b.poll_batch(at(t0, 101)).unwrap();
    let f = b.poll_batch(at(t0, 101)).unwrap();
    assert_eq!(payloads(&e), vec![6, 7]);
    assert_eq!(payloads(&f), vec![8]);
    assert_eq!(e.reason, FlushReason::Completion);
    assert!(b.poll_batch(at(t0, 101)).is_none());
    assert_eq!(b.in_flight(), 2);
}

#[test]
fn after_completion_linger_expired_items_keep_flushing_while_slots_are_free() {
    let t0 = base();
    let mut b = Batcher::new(cfg(2, 3)).unwrap();
    b.push(t0, 0, 1).unwrap();
    let a = b.poll_batch(t0).unwrap();
    for i in 1..=5 {
        b.push(t0, i, 1).unwrap();
    }
    // [1,2] and [3,4] by size; 5 waits for linger.
    assert_eq!(b.poll_batch(t0).unwrap().reason, FlushReason::Size);
    assert_eq!(b.poll_batch(t0).unwrap().reason, FlushReason::Size);
    assert!(b.poll_batch(t0).is_none());
    assert_eq!(b.poll_timeout(), None, "all slots taken");
    b.complete(at(t0, 20), a.id);
    let late = b.poll_batch(at(t0, 20)).unwrap();
    assert_eq!(payloads(&late), vec![5]);
}

// ---- rule 3: bounded and ordered -------------------------------------------------------------

#[test]
fn batches_are_bounded_and_fifo() {
    let t0 = base();
    let mut b = Batcher::new(cfg(4, 2)).unwrap();
    let mut sent = Vec::new();
    let mut pushed = Vec::new();
    let mut flying = Vec::new();
    for i in 0..103u64 {
        let now = at(t0, i);
        pushed.push(b.push(now, i, 1).unwrap().0);
        while let Some(batch) = b.poll_batch(now) {
            assert!(!batch.items.is_empty() && batch.items.len() <= 4);
            sent.extend(ids(&batch));
            flying.push(batch.id);
        }
        if i % 3 == 0 && !flying.is_empty() {
            b.complete(now, flying.remove(0));
        }
    }
    b.close(at(t0, 200));
    while !b.is_drained() {
        while let Some(batch) = b.poll_batch(at(t0, 200)) {
            sent.extend(ids(&batch));
            flying.push(batch.id);
        }
        b.complete(at(t0, 200), flying.remove(0));
    }
    assert_eq!(sent, pushed);
}

// ---- rule 4: overflow ------------------------------------------------------------------------

fn overflow_cfg(overflow: OverflowPolicy) -> BatchConfig {
    BatchConfig::new()
        .max_batch(2)
        .max_in_flight(1)
        .max_pending_items(4)
        .max_pending_bytes(100)
        .overflow(overflow)
}

/// A batcher with one batch in flight and `n` items buffered, so pushes are not idle.
fn busy(overflow: OverflowPolicy, n: u32) -> (Batcher<u32>, BatchId, Instant) {
    let t0 = base();
    let mut b = Batcher::new(overflow_cfg(overflow)).unwrap();
    b.push(t0, 1000, 1).unwrap();
    let first = b.poll_batch(t0).unwrap();
    for i in 0..n {
        assert_eq!(b.push(t0, i, 10).unwrap().1, Admission::Buffered);
    }
    (b, first.id, t0)
}

#[test]
fn backpressure_parks_in_order_and_admits_before_newer_pushes() {
    let (mut b, first, t0) = busy(OverflowPolicy::Backpressure, 4);
    assert_eq!(b.push(t0, 4, 10).unwrap().1, Admission::Parked);
    // Fits by bytes and count would not matter: someone is parked, so this one parks too.
    assert_eq!(b.push(t0, 5, 0).unwrap().1, Admission::Parked);
    assert_eq!((b.pending_items(), b.parked()), (4, 2));
    assert_eq!(b.stats().items_parked, 2);

    b.complete(t0, first);
    let batch = b.poll_batch(t0).unwrap();
    assert_eq!(payloads(&batch), vec![0, 1]);
    // Room for two appeared: both parked items were admitted, in order.
    assert_eq!((b.pending_items(), b.parked()), (4, 0));
    assert!(b.poll_rejected().is_none());
    b.complete(t0, batch.id);

    b.close(t0);
    let mut rest = Vec::new();
    while !b.is_drained() {
        let batch = b.poll_batch(t0).unwrap();
        rest.extend(payloads(&batch));
        b.complete(t0, batch.id);
    }
    assert_eq!(rest, vec![2, 3, 4, 5]);
}

#[test]
fn backpressure_by_bytes_and_parked_items_fill_the_same_batch() {
    let t0 = base();
    let mut b = Batcher::new(
        BatchConfig::new()
            .max_batch(3)
            .max_in_flight(1)
            .max_pending_bytes(10),
    )
    .unwrap();
    b.push(t0, 0, 1).unwrap();
    let first = b.poll_batch(t0).unwrap();
    assert_eq!(b.push(t0, 1, 8).unwrap().1, Admission::Buffered);
    assert_eq!(b.push(t0, 2, 8).unwrap().1, Admission::Parked);
    assert_eq!(b.push(t0, 3, 1).unwrap().1, Admission::Parked);
    assert_eq!(b.pending_bytes(), 8);
    // Waiting items reach max_batch: size flush is due as soon as a slot frees.
    b.complete(t0, first.id);
    let batch = b.poll_batch(t0).unwrap();
    assert_eq!(payloads(&batch), vec![1, 2, 3]);
    assert_eq!(batch.bytes, 17);
    assert_eq!(
        (b.pending_items(), b.parked(), b.pending_bytes()),
        (0, 0, 0)
    );
}

#[test]
fn reject_hands_the_item_back() {
    let (mut b, _, t0) = busy(OverflowPolicy::Reject, 4);
    let err = b.push(t0, 77, 1).unwrap_err();
    assert!(matches!(err, PushError::Rejected(77)));
    assert_eq!(err.into_inner(), 77);
    // By bytes too.
    let (mut b, _, t0) = busy(OverflowPolicy::Reject, 1);
    assert!(matches!(b.push(t0, 78, 91), Err(PushError::Rejected(78))));
    assert_eq!(b.push(t0, 79, 90).unwrap().1, Admission::Buffered);
    assert_eq!(b.stats().items_rejected, 1);
    assert_eq!(b.pending_items(), 2);
}

#[test]
fn drop_oldest_drops_a_tenth_at_least_one_and_reports_it() {
    let (mut b, _, t0) = busy(OverflowPolicy::DropOldest, 4);
    let (id, adm) = b.push(t0, 4, 10).unwrap();
    assert_eq!(adm, Admission::Buffered);
    let (victim_id, victim, reason) = b.poll_rejected().unwrap();
    assert_eq!((victim, reason), (0, RejectReason::Overflow));
    assert_eq!(
        reason.to_string(),
        "add buffer overflow",
        "bunqueue's words"
    );
    assert!(victim_id < id);
    assert!(b.poll_rejected().is_none());
    assert_eq!(b.pending_items(), 4);
    assert_eq!(b.stats().items_dropped, 1);
    assert!(b.cancel(victim_id).is_none(), "a dropped item is gone");
}

#[test]
fn drop_oldest_drops_enough_to_make_room_for_bytes() {
    let (mut b, _, t0) = busy(OverflowPolicy::DropOldest, 3);
    // 30 bytes buffered of 100; 95 needs all three gone.
    b.push(t0, 9, 95).unwrap();
    let dropped: Vec<_> = std::iter::from_fn(|| b.poll_rejected())
        .map(|(_, i, _)| i)
        .collect();
    assert_eq!(dropped, vec![0, 1, 2]);
    assert_eq!((b.pending_items(), b.pending_bytes()), (1, 95));
}

#[test]
fn drop_oldest_takes_ten_percent_of_a_large_buffer() {
    let t0 = base();
    // One slot, taken: the buffer fills (size flushes are due but have no slot) to the bound.
    let mut b = Batcher::new(
        BatchConfig::new()
            .max_batch(50)
            .max_in_flight(1)
            .max_pending_items(100)
            .overflow(OverflowPolicy::DropOldest),
    )
    .unwrap();
    b.push(t0, 0, 1).unwrap();
    b.poll_batch(t0).unwrap();
    for i in 1..=100 {
        b.push(t0, i, 1).unwrap();
    }
    assert!(b.poll_rejected().is_none());
    b.push(t0, 101, 1).unwrap();
    let dropped: Vec<_> = std::iter::from_fn(|| b.poll_rejected())
        .map(|(_, i, _)| i)
        .collect();
    assert_eq!(dropped, (1..=10).collect::<Vec<_>>());
    assert_eq!(b.pending_items(), 91);
}

#[test]
fn too_large_is_refused_under_every_policy() {
    for policy in [
        OverflowPolicy::Backpressure,
        OverflowPolicy::Reject,
        OverflowPolicy::DropOldest,
    ] {
        let (mut b, _, t0) = busy(policy, 0);
        let err = b.push(t0, 5, 101).unwrap_err();
        assert!(matches!(err, PushError::TooLarge(5)), "{policy:?}");
        assert_eq!(b.push(t0, 6, 100).unwrap().1, Admission::Buffered);
        assert_eq!(b.stats().items_too_large, 1);
    }
}

// ---- rule 5: cancel --------------------------------------------------------------------------

#[test]
fn cancel_removes_buffered_and_parked_items_until_sent() {
    let (mut b, first, t0) = busy(OverflowPolicy::Backpressure, 4);
    let (parked_id, _) = b.push(t0, 4, 10).unwrap();
    let (parked_id2, _) = b.push(t0, 5, 10).unwrap();
    assert_eq!(b.cancel(parked_id), Some(4));
    assert_eq!(b.parked(), 1);

    // Cancelling a buffered item makes room: the parked one is admitted right away.
    let buffered = nth_item_id(2); // item 1 (the idle one) was id 0; item `0` is id 1, `1` is id 2
    assert_eq!(b.cancel(buffered), Some(1));
    assert_eq!(
        (b.pending_items(), b.parked(), b.pending_bytes()),
        (4, 0, 40)
    );
    assert_eq!(b.cancel(buffered), None, "only once");

    b.complete(t0, first);
    let batch = b.poll_batch(t0).unwrap();
    assert_eq!(payloads(&batch), vec![0, 2]);
    assert_eq!(b.cancel(batch.items[0].0), None, "already sent");
    assert_eq!(b.cancel(nth_item_id(999)), None, "unknown");
    assert_eq!(b.cancel(parked_id2), Some(5));
    assert_eq!(b.stats().items_cancelled, 3);
}

#[test]
fn cancelling_everything_waiting_forfeits_the_completion_flush() {
    let t0 = base();
    let mut b = Batcher::new(cfg(50, 4)).unwrap();
    b.push(t0, 0, 1).unwrap();
    let first = b.poll_batch(t0).unwrap();
    let (id, _) = b.push(t0, 1, 1).unwrap();
    b.complete(t0, first.id);
    assert_eq!(b.cancel(id), Some(1));
    // Idle again: a new push is an idle flush, not a leftover completion flush.
    b.push(t0, 2, 1).unwrap();
    assert_eq!(b.poll_batch(t0).unwrap().reason, FlushReason::Idle);
}

// ---- rule 6: close ---------------------------------------------------------------------------

#[test]
fn close_flushes_everything_ignoring_linger_and_refuses_pushes() {
    let (mut b, first, t0) = busy(OverflowPolicy::Backpressure, 4);
    b.push(t0, 4, 10).unwrap(); // parked
    b.close(t0);
    assert!(b.is_closed());
    assert!(matches!(b.push(t0, 9, 1), Err(PushError::Closed(9))));
    assert_eq!(b.stats().items_after_close, 1);
    assert!(b.poll_batch(t0).is_none(), "max_in_flight is 1 and taken");
    assert_eq!(b.poll_timeout(), None);
    assert!(!b.is_drained());
    b.complete(t0, first);
    let mut out = Vec::new();
    while !b.is_drained() {
        let batch = b
            .poll_batch(t0)
            .expect("close flushes as soon as a slot is free");
        assert_eq!(batch.reason, FlushReason::Close);
        out.extend(payloads(&batch));
        assert!(b.poll_batch(t0).is_none());
        b.complete(t0, batch.id);
    }
    assert_eq!(out, vec![0, 1, 2, 3, 4]);
    assert_eq!(b.stats().flushes_for(FlushReason::Close), 3);
    b.close(t0);
    assert!(b.is_drained());
}

#[test]
fn drained_waits_for_dropped_items_to_be_collected() {
    let (mut b, first, t0) = busy(OverflowPolicy::DropOldest, 4);
    b.push(t0, 4, 1).unwrap();
    b.close(t0);
    b.complete(t0, first);
    while let Some(batch) = b.poll_batch(t0) {
        b.complete(t0, batch.id);
    }
    assert!(!b.is_drained());
    assert!(b.poll_rejected().is_some());
    assert!(b.is_drained());
}

#[test]
fn empty_close_is_drained_at_once() {
    let mut b = Batcher::<()>::new(BatchConfig::default()).unwrap();
    assert!(!b.is_drained());
    b.close(base());
    assert!(b.is_drained());
}

// ---- rule 7: total ---------------------------------------------------------------------------

#[test]
fn unknown_and_repeated_completions_are_ignored() {
    let t0 = base();
    let mut b = Batcher::new(cfg(50, 1)).unwrap();
    b.complete(t0, nth_batch_id(0));
    b.push(t0, 0, 1).unwrap();
    let first = b.poll_batch(t0).unwrap();
    b.push(t0, 1, 1).unwrap();
    b.complete(t0, nth_batch_id(42));
    assert_eq!(b.in_flight(), 1);
    b.complete(t0, first.id);
    b.complete(t0, first.id);
    assert_eq!(b.stats().completions, 1);
    let second = b.poll_batch(t0).unwrap();
    assert_eq!(b.in_flight(), 1);
    assert_ne!(second.id, first.id);
}

#[test]
fn instants_far_in_the_future_do_not_panic() {
    let t0 = base();
    let far = t0
        .checked_add(Duration::from_secs(u64::MAX / 4))
        .unwrap_or(t0);
    let mut b = Batcher::new(cfg(50, 4)).unwrap();
    b.push(far, 0, 1).unwrap();
    b.poll_batch(far).unwrap();
    b.push(far, 1, 1).unwrap();
    let _ = b.poll_timeout();
    let _ = b.poll_batch(far);
}

#[test]
fn push_error_formats_without_the_item() {
    struct Opaque;
    let err = PushError::Closed(Opaque);
    assert_eq!(format!("{err:?}"), "Closed(..)");
    assert_eq!(err.to_string(), "batcher is closed");
    let boxed: Box<dyn std::error::Error> = Box::new(PushError::Rejected(1u8));
    assert_eq!(boxed.to_string(), "batch buffer is full");
    assert_eq!(*PushError::TooLarge(3).item(), 3);
}

// ---- rule 8: cheap ---------------------------------------------------------------------------

#[test]
fn recycled_vectors_are_reused() {
    let t0 = base();
    let mut b = Batcher::new(cfg(8, 1)).unwrap();
    b.push(t0, 0u32, 1).unwrap();
    let batch = b.poll_batch(t0).unwrap();
    let mut items = batch.items;
    items.reserve(64);
    let ptr = items.as_ptr();
    b.complete(t0, batch.id);
    b.recycle(items);
    b.push(t0, 1, 1).unwrap();
    let again = b.poll_batch(t0).unwrap();
    assert_eq!(again.items.as_ptr(), ptr);
}

#[test]
fn stats_add_up() {
    let t0 = base();
    let mut b = Batcher::new(cfg(2, 2)).unwrap();
    for i in 0..5 {
        b.push(t0, i, 3).unwrap();
    }
    let mut n = 0;
    while let Some(batch) = b.poll_batch(t0) {
        n += batch.items.len();
        assert_eq!(batch.bytes, 3 * batch.items.len());
    }
    let s = b.stats();
    assert_eq!(s.items_pushed, 5);
    assert_eq!(s.items_sent, n as u64);
    assert_eq!(s.batches, 2);
    assert_eq!(s.mean_batch_size(), 2.0);
    assert_eq!(s.flushes.iter().sum::<u64>(), s.batches);
    assert_eq!(s.batch_sizes.total(), s.batches);
    assert_eq!(b.pending_items() as u64, s.items_pushed - s.items_sent);
}

// ---- the byte cap --------------------------------------------------------------------------

#[test]
fn a_zero_byte_cap_is_refused_by_name() {
    let err = Batcher::<u8>::new(BatchConfig::default())
        .unwrap()
        .with_max_batch_bytes(0)
        .unwrap_err();
    assert_eq!(err, ConfigError::MaxBatchBytesZero);
    assert_eq!(err.field(), "max_batch_bytes");
    assert_eq!(err.to_string(), "max_batch_bytes must be at least 1");
}

/// Eight items that fit the buffer together but not one batch: the idle flush takes what fits,
/// and the rest, more than a batch by bytes, leaves at once as a size flush when a slot is free.
#[test]
fn batches_stop_at_the_byte_cap_and_a_full_one_leaves_at_once() {
    let t0 = base();
    let mut b = Batcher::new(cfg(50, 2))
        .unwrap()
        .with_max_batch_bytes(100)
        .unwrap();
    for i in 0..8 {
        b.push(t0, i, 30).unwrap();
    }
    let first = b.poll_batch(t0).unwrap();
    assert_eq!(
        (first.reason, payloads(&first)),
        (FlushReason::Idle, vec![0, 1, 2])
    );
    assert_eq!(first.bytes, 90);
    // 5 × 30 waiting > 100: a full batch by bytes, no linger wait.
    let second = b.poll_batch(t0).unwrap();
    assert_eq!(
        (second.reason, payloads(&second)),
        (FlushReason::Size, vec![3, 4, 5])
    );
    // 2 × 30 left: not full, and both slots are taken anyway.
    assert!(b.poll_batch(t0).is_none());
    b.complete(t0, first.id);
    let third = b.poll_batch(t0).unwrap();
    assert_eq!(
        (third.reason, payloads(&third)),
        (FlushReason::Completion, vec![6, 7])
    );
}

/// An item over the cap by itself goes out alone, and does not hold up its neighbours.
#[test]
fn an_item_over_the_cap_goes_alone() {
    let t0 = base();
    let mut b = Batcher::new(cfg(50, 4))
        .unwrap()
        .with_max_batch_bytes(100)
        .unwrap();
    for (i, bytes) in [(0, 10), (1, 500), (2, 0), (3, 10)] {
        b.push(t0, i, bytes).unwrap();
    }
    let mut got = Vec::new();
    while let Some(batch) = b.poll_batch(t0) {
        got.push(payloads(&batch));
    }
    // The big one leaves as a size flush (the waiting bytes fill a batch); its small
    // neighbours, short of a full batch now, wait for linger as usual.
    assert_eq!(got, [vec![0], vec![1]]);
    let rest = b.poll_batch(at(t0, 5)).unwrap();
    assert_eq!(
        (rest.reason, payloads(&rest)),
        (FlushReason::Linger, vec![2, 3])
    );
    // Linger is only armed for batches that are not full by bytes.
    let mut b = Batcher::new(cfg(50, 4))
        .unwrap()
        .with_max_batch_bytes(100)
        .unwrap();
    b.push(t0, 0, 1).unwrap();
    let _flying = b.poll_batch(t0).unwrap();
    b.push(at(t0, 1), 1, 60).unwrap();
    assert!(b.poll_batch(at(t0, 1)).is_none());
    assert_eq!(b.poll_timeout(), Some(at(t0, 6)));
    b.push(at(t0, 2), 2, 60).unwrap();
    assert_eq!(
        b.poll_timeout(),
        None,
        "120 bytes waiting fill a batch of 100"
    );
    assert_eq!(b.poll_batch(at(t0, 2)).unwrap().reason, FlushReason::Size);
}

/// Rule 1, skipping the buffer: `send_alone` takes a slot only when a push would have left at
/// once and alone, and counts it as that Idle batch of one.
#[test]
fn send_alone_only_when_idle_and_counted_as_an_idle_flush() {
    let t0 = base();
    let mut b = Batcher::new(cfg(10, 2).max_pending_bytes(100)).unwrap();
    assert!(b.is_idle());
    assert!(b.send_alone(t0, 101).is_none(), "a push would refuse it");
    let alone = b.send_alone(t0, 10).expect("idle");
    assert!(!b.is_idle());
    assert_eq!(b.in_flight(), 1);
    assert!(b.send_alone(t0, 10).is_none(), "a batch is in flight");
    // Pushed meanwhile: buffered, not flushed at once, as behind any batch.
    b.push(t0, "x", 10).unwrap();
    assert!(b.poll_batch(t0).is_none());
    b.complete(t0, alone);
    let batch = b.poll_batch(t0).expect("completion flush");
    assert_eq!(batch.reason, FlushReason::Completion);
    assert!(
        b.send_alone(t0, 10).is_none(),
        "not idle while a batch is out"
    );
    b.complete(t0, batch.id);
    assert!(b.is_idle());
    b.push(t0, "y", 10).unwrap();
    assert!(b.send_alone(t0, 10).is_none(), "an item is buffered");
    let batch = b.poll_batch(t0).unwrap();
    b.complete(t0, batch.id);
    b.close(t0);
    assert!(b.send_alone(t0, 10).is_none(), "closed");
    assert!(b.is_drained());
    let s = b.stats();
    assert_eq!(s.batches, 3);
    assert_eq!(s.items_pushed, 3);
    assert_eq!(s.items_sent, 3);
    assert_eq!(s.flushes_for(FlushReason::Idle), 2);
    assert_eq!(s.completions, 3);
    assert_eq!(s.batch_sizes.bucket(0), 3);
}

#[test]
fn send_alone_takes_an_item_of_exactly_the_byte_bound_as_push_does() {
    let t0 = base();
    let config = cfg(10, 2).max_pending_bytes(100);
    let mut pushed = Batcher::new(config.clone()).unwrap();
    assert!(pushed.push(t0, "x", 100).is_ok(), "a push takes 100 bytes");
    let mut alone = Batcher::<&str>::new(config).unwrap();
    assert!(alone.send_alone(t0, 100).is_some(), "so a lone send does");
    assert!(alone.send_alone(t0, 101).is_none());
}

#[test]
fn every_batch_gets_its_own_id_lone_sends_included() {
    let t0 = base();
    let mut b = Batcher::new(cfg(10, 2)).unwrap();
    let alone = b.send_alone(t0, 1).expect("idle");
    b.push(t0, "x", 1).unwrap();
    let batch = b
        .poll_batch(at(t0, 5))
        .expect("linger flush beside the lone send");
    assert_ne!(batch.id, alone);
    // Completing one frees its slot only.
    b.complete(at(t0, 5), alone);
    assert_eq!(b.in_flight(), 1);
    b.complete(at(t0, 5), batch.id);
    assert_eq!(b.in_flight(), 0);
    let again = b.send_alone(at(t0, 5), 1).expect("idle again");
    assert_ne!(again, alone);
    assert_ne!(again, batch.id);
}

#[test]
fn cancelling_a_parked_item_takes_its_bytes_out_of_the_size_rule() {
    let t0 = base();
    let config = cfg(10, 2).max_pending_bytes(60);
    let mut b = Batcher::new(config)
        .unwrap()
        .with_max_batch_bytes(100)
        .unwrap();
    let _busy = b.send_alone(t0, 1).expect("idle");
    assert_eq!(b.push(t0, "a", 10).unwrap().1, Admission::Buffered);
    let (big, admission) = b.push(t0, "b", 60).unwrap();
    assert_eq!(admission, Admission::Parked, "the buffer holds 60 bytes");
    assert!(b.poll_batch(t0).is_none(), "70 bytes wait: no full batch");
    assert_eq!(b.cancel(big), Some("b"));
    assert!(b.poll_batch(t0).is_none(), "10 bytes wait: still none");
    assert_eq!(b.poll_timeout(), Some(at(t0, 5)), "waiting on linger");
    let batch = b.poll_batch(at(t0, 5)).unwrap();
    assert_eq!(batch.reason, FlushReason::Linger);
    assert_eq!(payloads(&batch), vec!["a"]);
}

#[test]
fn the_batcher_reports_its_configuration() {
    let config = cfg(7, 3).max_pending_bytes(1_000);
    let b = Batcher::<u32>::new(config.clone())
        .unwrap()
        .with_max_batch_bytes(500)
        .unwrap();
    assert_eq!(b.config(), &config);
    assert_eq!(b.max_batch_bytes(), 500);
}

#[test]
fn debug_shows_the_shape_and_never_the_items() {
    /// An item that is not `Debug`.
    struct Opaque;
    let t0 = base();
    let mut b = Batcher::new(cfg(10, 1)).unwrap();
    b.push(t0, Opaque, 3).unwrap();
    let _out = b.poll_batch(t0).unwrap();
    b.push(t0, Opaque, 4).unwrap();
    let shown = format!("{b:?}");
    assert!(shown.starts_with("Batcher {"), "{shown}");
    for field in [
        "pending_items: 1",
        "pending_bytes: 4",
        "parked: 0",
        "closed: false",
    ] {
        assert!(shown.contains(field), "{field} in {shown}");
    }
}
