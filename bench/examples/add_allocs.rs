//! How many heap allocations an add costs the client, on each runtime.
//!
//! Every allocation of this process is counted (a counting global allocator), on every
//! thread: the caller's, the runtime's workers and the connection's pump. The server runs in
//! a process of its own, so none of its allocations is counted. Sequential adds and waves of
//! `join_all(100)` run after a warm-up, and the count over the timed adds is divided by the
//! number of adds. Counts, not times: the figure does not depend on the machine's load.
//!
//! ```sh
//! scripts/bunqueue.sh start 6789            # or the embedded broker: autobatch-broker
//! cargo run --release -p autobatch-bench --example add_allocs -- 127.0.0.1:6789 [ADDS] [RUNTIME]
//! ```
//!
//! `RUNTIME` (`tokio`, `tokio-multi-thread`, `smol` or `async-std`) runs that one alone, for a
//! heap profiler to look at.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

use autobatch_driver::{Client, ClientOptions, JobOptions, Runtime};
use futures::future::join_all;

/// The system allocator, counting each allocation (and each reallocation, which may move).
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The adds of a wave.
const WAVE: usize = 100;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:6789".to_owned());
    let adds: usize = args.next().map_or(Ok(10_000), |a| a.parse())?;
    let only = args.next();
    let runs = |name: &str| only.as_deref().is_none_or(|o| o == name);
    let options = ClientOptions::from_addr(&addr)?;
    println!("allocations per add, {adds} adds after {WAVE} warm-up waves, server {addr}");
    println!(
        "{:<24} {:>12} {:>16}",
        "runtime", "sequential", "join_all(100)"
    );
    if runs("tokio") {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let counts = rt.block_on(measure::<autobatch_tokio::TokioRuntime>(&options, adds))?;
        report("tokio current_thread", counts);
    }
    if runs("tokio-multi-thread") {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        let counts = rt.block_on(measure::<autobatch_tokio::TokioRuntime>(&options, adds))?;
        report("tokio multi_thread", counts);
    }
    if runs("smol") {
        let counts = smol::block_on(measure::<autobatch_smol::SmolRuntime>(&options, adds))?;
        report("smol", counts);
    }
    if runs("async-std") {
        let counts = async_std::task::block_on(measure::<autobatch_async_std::AsyncStdRuntime>(
            &options, adds,
        ))?;
        report("async-std", counts);
    }
    Ok(())
}

fn report(runtime: &str, (seq, wave): (f64, f64)) {
    println!("{runtime:<24} {seq:>12.2} {wave:>16.2}");
}

/// Allocations per add: sequential, then in waves of [`WAVE`].
async fn measure<R: Runtime + Default>(
    options: &ClientOptions,
    adds: usize,
) -> Result<(f64, f64), Box<dyn std::error::Error>> {
    let client = Client::<R>::connect(options.clone()).await?;
    let q = client.queue(format!("allocs-{}", std::process::id()));
    let data = 1u32;
    for _ in 0..WAVE {
        join_all((0..WAVE).map(|_| q.add("a", &data, JobOptions::new()))).await;
    }
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    for _ in 0..adds {
        q.add("a", &data, JobOptions::new()).await?;
    }
    let seq = ALLOCATIONS.load(Ordering::Relaxed) - before;
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    for _ in 0..adds / WAVE {
        for r in join_all((0..WAVE).map(|_| q.add("a", &data, JobOptions::new()))).await {
            r?;
        }
    }
    let wave = ALLOCATIONS.load(Ordering::Relaxed) - before;
    let per_add = |n: u64| n as f64 / adds as f64;
    q.obliterate().await.ok();
    client.close().await;
    Ok((per_add(seq), per_add(wave)))
}
