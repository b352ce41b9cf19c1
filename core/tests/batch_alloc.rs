//! Checks rule 8 of `batch`: once warm, and with batch vectors recycled, the batcher allocates
//! nothing per item or per batch.
//!
//! A counting global allocator counts allocations made by the current thread only (the test
//! harness's own threads would otherwise add noise), over many cycles after a warm-up.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::{Duration, Instant};

use autobatch_core::batch::{BatchConfig, Batcher, ItemId, OverflowPolicy};

struct Counting;

thread_local! {
    // `const` and without a destructor, so touching it from the allocator cannot allocate.
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    static FREES: Cell<u64> = const { Cell::new(0) };
}

fn count() {
    let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        System.alloc(layout)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        System.alloc_zeroed(layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        System.realloc(ptr, layout, new_size)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let _ = FREES.try_with(|n| n.set(n.get() + 1));
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations_during(mut f: impl FnMut()) -> u64 {
    let before = ALLOCATIONS.with(Cell::get);
    f();
    ALLOCATIONS.with(Cell::get) - before
}

/// Runs `cycle` enough times to warm up, then returns the allocations made by many more.
fn steady(mut cycle: impl FnMut(u64)) -> u64 {
    for i in 0..100 {
        cycle(i);
    }
    allocations_during(|| {
        for i in 100..10_100 {
            cycle(i);
        }
    })
}

#[test]
fn idle_burst_cycle_does_not_allocate() {
    let now = Instant::now();
    let mut b = Batcher::new(BatchConfig::default()).unwrap();
    let n = steady(|_| {
        for i in 0..50u64 {
            b.push(now, i, 64).unwrap();
        }
        let batch = b.poll_batch(now).unwrap();
        assert_eq!(batch.items.len(), 50);
        b.complete(now, batch.id);
        b.recycle(batch.items);
    });
    assert_eq!(n, 0);
}

#[test]
fn sequential_cycle_does_not_allocate() {
    let now = Instant::now();
    let mut b = Batcher::new(BatchConfig::default()).unwrap();
    let n = steady(|i| {
        b.push(now, i, 64).unwrap();
        let batch = b.poll_batch(now).unwrap();
        b.complete(now, batch.id);
        b.recycle(batch.items);
    });
    assert_eq!(n, 0);
}

/// Busy traffic through every path that holds items: buffering, size, linger and completion
/// flushes with several batches in flight, parking under backpressure, and cancels.
#[test]
fn busy_mixed_traffic_does_not_allocate() {
    let t0 = Instant::now();
    let mut b = Batcher::new(
        BatchConfig::new()
            .max_batch(8)
            .max_in_flight(3)
            .max_pending_items(16)
            .overflow(OverflowPolicy::Backpressure),
    )
    .unwrap();
    let mut flying = Vec::with_capacity(8);
    let n = steady(|round| {
        let now = t0 + Duration::from_millis(round * 3);
        // 13 items a round against up to 24 sent: the buffer fills and parks some rounds.
        let mut last = None;
        for i in 0..13u64 {
            last = Some(b.push(now, round * 100 + i, 10).unwrap().0);
        }
        if round % 7 == 0 {
            b.cancel(last.unwrap());
        }
        while let Some(batch) = b.poll_batch(now) {
            flying.push(batch);
        }
        if round % 2 == 0 && !flying.is_empty() {
            let done = flying.remove(0);
            b.complete(now, done.id);
            b.recycle(done.items);
            while let Some(batch) = b.poll_batch(now) {
                flying.push(batch);
            }
        }
        b.handle_timeout(now + Duration::from_millis(5));
        while let Some(batch) = b.poll_batch(now + Duration::from_millis(5)) {
            flying.push(batch);
        }
        if b.parked() > 20 {
            // Keep the parked queue bounded, as a caller under backpressure would.
            for done in flying.drain(..) {
                b.complete(now, done.id);
                b.recycle(done.items);
            }
        }
    });
    assert!(
        b.stats().items_parked > 0,
        "the parking path was not exercised"
    );
    assert!(b.stats().flushes.iter().filter(|&&f| f > 0).count() >= 3);
    assert_eq!(n, 0);
}

/// Batches cut by the byte cap (and an item over it, alone) allocate nothing more.
#[test]
fn byte_capped_traffic_does_not_allocate() {
    let now = Instant::now();
    let mut b = Batcher::new(BatchConfig::new().max_batch(8).max_in_flight(2))
        .unwrap()
        .with_max_batch_bytes(100)
        .unwrap();
    let mut flying = Vec::with_capacity(8);
    let n = steady(|round| {
        for i in 0..9u64 {
            let bytes = if i == 4 { 250 } else { 30 };
            b.push(now, round * 100 + i, bytes).unwrap();
        }
        loop {
            while let Some(batch) = b.poll_batch(now) {
                flying.push(batch);
            }
            let Some(done) = flying.pop() else { break };
            b.complete(now, done.id);
            b.recycle(done.items);
        }
    });
    assert!(
        b.stats().batches > b.stats().items_sent / 8,
        "the cap cut batches"
    );
    assert_eq!(n, 0);
}

#[test]
fn drop_oldest_does_not_allocate_once_warm() {
    let now = Instant::now();
    let mut b = Batcher::new(
        BatchConfig::new()
            .max_batch(4)
            .max_in_flight(1)
            .max_pending_items(20)
            .overflow(OverflowPolicy::DropOldest),
    )
    .unwrap();
    b.push(now, 0, 1).unwrap();
    let stuck = b.poll_batch(now).unwrap();
    let n = steady(|i| {
        b.push(now, i, 1).unwrap();
        while b.poll_rejected().is_some() {}
    });
    assert!(b.stats().items_dropped > 0);
    assert_eq!(n, 0);
    drop(stuck);
}

#[test]
fn recycling_keeps_only_as_many_vectors_as_can_be_in_use() {
    // One batch in flight and one being filled: two vectors are worth keeping.
    let mut b = Batcher::<u64>::new(BatchConfig::default().max_in_flight(1)).unwrap();
    // Empty vectors hold nothing worth keeping: they take no place from the others.
    let vectors: Vec<Vec<(ItemId, u64)>> = (0..8)
        .map(|i| Vec::with_capacity(if i < 2 { 0 } else { 8 }))
        .collect();
    let freed: Vec<u64> = vectors
        .into_iter()
        .map(|v| {
            let before = FREES.with(Cell::get);
            b.recycle(v);
            FREES.with(Cell::get) - before
        })
        .collect();
    assert_eq!(
        freed,
        [0, 0, 0, 0, 1, 1, 1, 1],
        "the rest are freed at once"
    );
}
