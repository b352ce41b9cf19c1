//! Cost of the batcher per item in steady state, once warm.
//!
//! Run with `cargo bench -p autobatch-core --bench batch`; criterion reports throughput in items
//! per second, so the time per item is its reciprocal. Only the batcher is measured: the time
//! passed in is a fixed `Instant`, as a driver that reads the clock once per wake-up would.

use std::hint::black_box;
use std::time::Instant;

use autobatch_core::batch::{BatchConfig, Batcher};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

const BATCH: u64 = 50;

fn steady_state(c: &mut Criterion) {
    let now = Instant::now();
    let mut group = c.benchmark_group("batcher");

    // The brief's loop: a burst of 50 pushes while idle, one batch out, completed, Vec recycled.
    group.throughput(Throughput::Elements(BATCH));
    group.bench_function("idle_burst_50", |bench| {
        let mut batcher = Batcher::new(BatchConfig::default()).unwrap();
        bench.iter(|| {
            for i in 0..BATCH {
                batcher.push(now, black_box(i), 64).unwrap();
            }
            let batch = batcher.poll_batch(now).unwrap();
            batcher.complete(now, batch.id);
            batcher.recycle(black_box(batch).items);
        });
    });

    // The busy path: one batch always in flight, so every item is buffered and leaves in a
    // size-triggered batch, and the previous batch completes.
    group.bench_function("busy_size_50", |bench| {
        let mut batcher = Batcher::new(BatchConfig::default()).unwrap();
        batcher.push(now, u64::MAX, 64).unwrap();
        let mut previous = batcher.poll_batch(now).unwrap();
        bench.iter(|| {
            for i in 0..BATCH {
                batcher.push(now, black_box(i), 64).unwrap();
            }
            let batch = batcher.poll_batch(now).unwrap();
            batcher.complete(now, previous.id);
            batcher.recycle(std::mem::replace(&mut previous, batch).items);
        });
    });

    // Sequential callers: one item per batch, the whole cycle per item.
    group.throughput(Throughput::Elements(1));
    group.bench_function("idle_single", |bench| {
        let mut batcher = Batcher::new(BatchConfig::default()).unwrap();
        bench.iter(|| {
            batcher.push(now, black_box(1u64), 64).unwrap();
            let batch = batcher.poll_batch(now).unwrap();
            batcher.complete(now, batch.id);
            batcher.recycle(black_box(batch).items);
        });
    });
    group.finish();
}

criterion_group!(benches, steady_state);
criterion_main!(benches);
