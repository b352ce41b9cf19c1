//! A fast hasher for the small integer keys of per-operation maps (operation ids, request
//! ids, tickets).
//!
//! The standard SipHash resists collision attacks on keys an attacker picks; these keys are
//! counters this process picks, so that resistance buys nothing here, and every request pays
//! for hashing its key at least twice: when it is sent and when its reply comes back.
//! This is FxHash's mixing step (rustc's own hasher): one rotate, xor and multiply per word.
//!
//! ```
//! use autobatch_core::hash::IntMap;
//! let mut m: IntMap<u64, &str> = IntMap::default();
//! m.insert(7, "seven");
//! assert_eq!(m.get(&7), Some(&"seven"));
//! ```

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A `HashMap` keyed by integers this process assigns, hashed with [`IntHasher`].
pub type IntMap<K, V> = HashMap<K, V, BuildHasherDefault<IntHasher>>;

/// FxHash-style hasher: fast on integers, not collision-resistant (never key it by input from
/// the network).
#[derive(Debug, Default, Clone, Copy)]
pub struct IntHasher(u64);

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl IntHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for IntHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}
