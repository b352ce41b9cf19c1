//! A deterministic simulation of autobatch sessions against a model broker.
//!
//! Everything runs on one thread with a virtual clock: an `Instant` read once as the base, plus
//! `Duration` offsets; nothing sleeps. One seed decides everything: the batching and session
//! configuration, the workload, the network (chunking, latency, jitter) and the faults. The same
//! seed always replays the same run, step for step.
//!
//! * [`network`]: byte chunks in flight per connection and direction, in order (TCP), with
//!   per-chunk latency and jitter; connections cut at any byte.
//! * [`broker`]: a small bunqueue-compatible broker over the core's wire types: custom-id
//!   dedup, all-or-nothing PUSHB validation, PULLB with owner and tokens, locks released on
//!   disconnect, ACKB outcomes, optional persistence across restarts, and a ledger of every job
//!   ever inserted. It also watches the wire (batch sizes, commands in flight).
//! * [`workload`]: the scenario drawn from a seed: configurations, the plan of adds, bulk adds,
//!   cancels, lookups, sequential chains, a worker, and the fault mix.
//! * [`invariants`]: the operation ledger and the checks.
//! * [`runner`]: the event loop that plays it all, and the failure report.
//!
//! Entry point: [`run`] (one seed).

pub mod broker;
pub mod invariants;
pub mod network;
pub mod runner;
pub mod workload;

pub use runner::{run, run_traced, run_with, FaultCounts, SimFailure, SimOptions, SimReport};

use std::time::Duration;

/// SplitMix64: a tiny, fast, seedable generator. Good enough for choosing faults.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x6a09_e667_f3bc_c908)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            lo
        } else {
            lo + self.below(hi - lo + 1)
        }
    }

    /// Uniform in `[0, 1)`.
    pub fn f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.f64() < p
    }

    /// Uniform duration in `lo..=hi` milliseconds.
    pub fn ms(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(self.range(lo, hi))
    }

    /// Uniform duration in `lo..=hi` microseconds.
    pub fn us(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_micros(self.range(lo, hi))
    }

    /// An independent generator drawn from this one.
    pub fn fork(&mut self) -> Rng {
        Rng::new(self.next_u64())
    }

    /// One element of a non-empty slice.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}
