//! Job ids made by the client for [`ClientOptions::idempotent_adds`]: every add without a custom
//! id gets one, so that an add written on a connection that is then lost can be looked up and
//! replayed instead of ending "maybe applied".
//!
//! The ids are UUIDs of version 7 (RFC 9562), the shape of bunqueue's own job ids: 48 bits of
//! Unix milliseconds, then 74 bits that are unique per client and per add. A client draws a
//! random 64-bit key once; each add takes the next value of a counter, and the two are mixed
//! by a bijection of 64 bits, so two adds of one client never share an id, and two clients
//! share one only if their random keys meet.
//!
//! [`ClientOptions::idempotent_adds`]: crate::ClientOptions::idempotent_adds

use std::collections::hash_map::RandomState;
use std::fmt::Write as _;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use autobatch_core::wire::JobOptions;

/// Makes the job ids of one client's adds.
#[derive(Debug)]
pub(crate) struct AddIds {
    key: u64,
    next: AtomicU64,
}

impl AddIds {
    /// A generator with a fresh random key (from the standard library's per-process random
    /// hasher keys, which the OS seeds).
    pub(crate) fn new() -> Self {
        let mut h = RandomState::new().build_hasher();
        h.write_u128(now_nanos());
        AddIds {
            key: h.finish(),
            next: AtomicU64::new(0),
        }
    }

    /// `opts` with a job id of its own, unless it has one already or repeats (bunqueue
    /// refuses a custom id on a repeating job: its repetitions are named by the server).
    pub(crate) fn stamp(&self, opts: JobOptions) -> JobOptions {
        if opts.job_id.is_some() || opts.repeat.is_some() {
            return opts;
        }
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        opts.job_id(uuid_v7(unix_millis(), mix(self.key ^ n)))
    }
}

/// A bijection of `u64` (splitmix64's finalizer): distinct counters give distinct values,
/// spread over all 64 bits.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The UUID v7 text of `millis` with `bits` in its free bits: `rand_a` holds bits 52–63 of
/// `bits` and `rand_b` bits 0–61, so every bit is kept and distinct `bits` give distinct ids.
fn uuid_v7(millis: u64, bits: u64) -> String {
    let rand_a = (bits >> 52) & 0x0fff;
    let rand_b = bits & 0x3fff_ffff_ffff_ffff;
    let hi = (millis & 0xffff_ffff_ffff) << 16 | 0x7000 | rand_a;
    let lo = 0x8000_0000_0000_0000 | rand_b;
    let mut s = String::with_capacity(36);
    let _ = write!(
        s,
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        hi >> 32,
        (hi >> 16) & 0xffff,
        hi & 0xffff,
        lo >> 48,
        lo & 0xffff_ffff_ffff
    );
    s
}

fn now_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

fn unix_millis() -> u64 {
    (now_nanos() / 1_000_000) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn ids_are_uuid_v7_text() {
        let id = uuid_v7(0x0189_abcd_ef01, u64::MAX);
        assert_eq!(id, "0189abcd-ef01-7fff-bfff-ffffffffffff");
        let id = uuid_v7(1, 0);
        assert_eq!(id, "00000000-0001-7000-8000-000000000000");
    }

    #[test]
    fn one_client_never_repeats_an_id() {
        let ids = AddIds::new();
        let made: HashSet<String> = (0..100_000)
            .map(|_| ids.stamp(JobOptions::new()).job_id.unwrap())
            .collect();
        assert_eq!(made.len(), 100_000);
        assert!(made
            .iter()
            .all(|id| id.len() == 36 && id.as_bytes()[14] == b'7'));
    }

    #[test]
    fn a_custom_id_or_a_repeat_is_left_alone() {
        use autobatch_core::wire::Repeat;
        use std::time::Duration;
        let ids = AddIds::new();
        let own = ids.stamp(JobOptions::new().job_id("order-42"));
        assert_eq!(own.job_id.as_deref(), Some("order-42"));
        let every = Repeat::every(Duration::from_secs(60));
        assert_eq!(ids.stamp(JobOptions::new().repeat(every)).job_id, None);
    }

    #[test]
    fn mix_is_a_bijection_on_a_sample() {
        let seen: HashSet<u64> = (0..200_000u64).map(mix).collect();
        assert_eq!(seen.len(), 200_000);
    }
}
