//! Maps keyed by numbers the client hands out itself (operation ids, tickets).
//!
//! The pump keeps two such maps and touches each twice per operation (an insert when the
//! caller's command arrives, a removal when its outcome does), so with SipHash, the standard
//! map's default, hashing was several percent of an add's cost. SipHash protects against
//! keys chosen by an attacker to collide; these keys are counters the client assigns, so a
//! multiplicative hash (as rustc's own `FxHasher`) spreads them as well at a fraction of the
//! cost.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A `HashMap` for keys the client assigns (never for keys that come from the network).
pub(crate) type SeqMap<K, V> = HashMap<K, V, BuildHasherDefault<SeqHasher>>;

/// A new, empty [`SeqMap`].
pub(crate) fn seq_map<K, V>() -> SeqMap<K, V> {
    HashMap::default()
}

/// The multiplicative hash of [`SeqMap`]: each word is mixed in by a rotate, an xor and a
/// multiply by an odd constant (2^64 / φ), so consecutive numbers land in different buckets
/// and in different control bytes.
#[derive(Default, Clone, Copy)]
pub(crate) struct SeqHasher(u64);

const SEED: u64 = 0x9e37_79b9_7f4a_7c15;

impl SeqHasher {
    fn mix(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for SeqHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.mix(u64::from_le_bytes(word));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.mix(n);
    }

    fn write_usize(&mut self, n: usize) {
        self.mix(n as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::{BuildHasher, Hash};

    fn hash<T: Hash>(t: T) -> u64 {
        BuildHasherDefault::<SeqHasher>::default().hash_one(t)
    }

    #[test]
    fn consecutive_keys_spread_over_buckets_and_control_bytes() {
        // hashbrown takes the bucket from the low bits and the control byte from the top 7.
        let buckets: std::collections::HashSet<u64> =
            (0..1024u64).map(|k| hash(k) & 1023).collect();
        let tags: std::collections::HashSet<u64> = (0..1024u64).map(|k| hash(k) >> 57).collect();
        assert_eq!(buckets.len(), 1024, "consecutive keys share a bucket");
        assert!(tags.len() > 100, "only {} control bytes used", tags.len());
    }

    #[test]
    fn a_map_keeps_what_it_is_given() {
        let mut m = seq_map();
        for k in 0..10_000u64 {
            m.insert(k * 3, k);
        }
        for k in (0..10_000u64).step_by(2) {
            assert_eq!(m.remove(&(k * 3)), Some(k));
        }
        assert_eq!(m.len(), 5_000);
        assert!((0..10_000u64).all(|k| m.get(&(k * 3)) == (k % 2 == 1).then_some(&k)));
    }
}
