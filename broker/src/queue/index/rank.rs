//! Priorities as keys of the queue's indexes.

/// A priority as an integer in the same order, so that keys stay `Ord`: the float's bits, the
/// negative ones flipped (IEEE 754's total order), with -0 read as 0, as JS compares them.
pub(crate) fn priority_rank(p: f64) -> i64 {
    let bits = (p + 0.0).to_bits() as i64;
    bits ^ ((((bits >> 63) as u64) >> 1) as i64)
}
