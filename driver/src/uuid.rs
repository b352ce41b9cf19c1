//! Job ids made by the client, in the shape of bunqueue's own: UUIDs of version 7, which sort
//! in the order they were made (flows plan their jobs' ids, and idempotent adds name their
//! jobs, with them).

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A UUIDv7 (RFC 9562), made as bunqueue's client makes them with `Bun.randomUUIDv7()`: 48 bits
/// of Unix milliseconds, a 12-bit sequence within the millisecond (RFC 9562 §6.2, method 1),
/// then random bits. The sequence matters: bunqueue and autobatch-broker hand out jobs of equal
/// priority and run time in the order of their ids, so ids made in one millisecond must sort in
/// the order they were made, or flows added together run in a random order. The randomness is
/// std's per-process hash keys mixed with a counter: unique, not secret (ids are not secrets).
pub(crate) fn uuid_v7() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    static LAST: AtomicU64 = AtomicU64::new(0);
    let stamp = next_stamp(&LAST, ms);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut h = RandomState::new().build_hasher();
    h.write_u64(n);
    h.write_u64(stamp);
    let b = h.finish();
    let hi = ((stamp >> SEQ_BITS) << 16) | 0x7000 | (stamp & SEQ_MASK);
    let lo = (b & 0x3fff_ffff_ffff_ffff) | 0x8000_0000_0000_0000;
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        hi >> 32,
        (hi >> 16) & 0xffff,
        hi & 0xffff,
        lo >> 48,
        lo & 0xffff_ffff_ffff
    )
}

/// Bits of the sequence within a millisecond (UUIDv7's `rand_a`).
const SEQ_BITS: u32 = 12;
const SEQ_MASK: u64 = (1 << SEQ_BITS) - 1;

/// The next `milliseconds << 12 | sequence` for an id made at `ms`, after `last` (the stamp
/// handed out before, on any thread): above it always. A millisecond's first id starts its
/// sequence at 0; more than 4,096 in one millisecond, or a clock that stepped back, borrow the
/// next milliseconds until the clock catches up (as RFC 9562 allows), so the order holds.
fn next_stamp(last_stamp: &AtomicU64, ms: u64) -> u64 {
    let at_least = ms << SEQ_BITS;
    let mut last = last_stamp.load(Ordering::Relaxed);
    loop {
        let next = at_least.max(last + 1);
        match last_stamp.compare_exchange_weak(last, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return next,
            Err(seen) => last = seen,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_sort_in_the_order_they_were_made_even_within_a_millisecond() {
        let ids: Vec<String> = (0..10_000).map(|_| uuid_v7()).collect();
        assert!(
            ids.windows(2).all(|w| w[0] < w[1]),
            "ids out of order or repeated"
        );
        // Thousands in a few milliseconds: most share theirs with the one before.
        let same_ms = ids.windows(2).filter(|w| w[0][..13] == w[1][..13]).count();
        assert!(
            same_ms > 0,
            "no two ids in one millisecond: the test proved nothing"
        );
    }

    #[test]
    fn threads_get_distinct_ordered_stamps() {
        let last = AtomicU64::new(0);
        let per_thread: Vec<Vec<u64>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        (0..5_000)
                            .map(|_| next_stamp(&last, 1))
                            .collect::<Vec<u64>>()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for stamps in &per_thread {
            assert!(stamps.windows(2).all(|w| w[0] < w[1]));
        }
        let mut all: Vec<u64> = per_thread.into_iter().flatten().collect();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 20_000, "a stamp handed out twice");
    }

    #[test]
    fn a_millisecond_numbers_its_ids_and_a_clock_that_steps_back_keeps_the_order() {
        let last = AtomicU64::new(0);
        let first = next_stamp(&last, 5_000);
        assert_eq!((first >> SEQ_BITS, first & SEQ_MASK), (5_000, 0));
        let second = next_stamp(&last, 5_000);
        assert_eq!((second >> SEQ_BITS, second & SEQ_MASK), (5_000, 1));
        // The clock steps back: the ids go on after the last one.
        let stepped_back = next_stamp(&last, 4_000);
        assert_eq!(stepped_back, second + 1);
        // A sequence that runs out borrows the next millisecond.
        last.store((6_000 << SEQ_BITS) | SEQ_MASK, Ordering::Relaxed);
        let spilled = next_stamp(&last, 6_000);
        assert_eq!((spilled >> SEQ_BITS, spilled & SEQ_MASK), (6_001, 0));
        // A new millisecond restarts the sequence.
        let fresh = next_stamp(&last, 7_000);
        assert_eq!((fresh >> SEQ_BITS, fresh & SEQ_MASK), (7_000, 0));
    }

    #[test]
    fn uuids_are_v7_and_distinct() {
        let a = uuid_v7();
        let b = uuid_v7();
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "7");
        assert!(matches!(&a[19..20], "8" | "9" | "a" | "b"));
    }
}
