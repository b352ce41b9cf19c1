//! Time spans as the wire carries them: whole milliseconds. The public API takes
//! [`Duration`]s; a span too long for the wire's integer is sent as its largest value instead
//! of wrapping around to a short (or negative) one.

use std::time::Duration;

/// `d` in whole milliseconds (sub-millisecond parts dropped), at most `u64::MAX`.
pub(crate) fn ms_u64(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// `d` in whole milliseconds (sub-millisecond parts dropped), at most `i64::MAX`.
pub(crate) fn ms_i64(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// A wait the server reports in milliseconds, negative for "none" (bunqueue's `-2`: no
/// limit, no window open).
pub(crate) fn wait_from_ms(ms: i64) -> Option<Duration> {
    u64::try_from(ms).ok().map(Duration::from_millis)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_beyond_the_wire_integer_saturate_instead_of_wrapping() {
        assert_eq!(ms_u64(Duration::from_micros(2_999)), 2);
        assert_eq!(ms_i64(Duration::from_secs(5)), 5_000);
        assert_eq!(ms_u64(Duration::MAX), u64::MAX);
        assert_eq!(ms_i64(Duration::MAX), i64::MAX);
        assert_eq!(wait_from_ms(-2), None);
        assert_eq!(wait_from_ms(0), Some(Duration::ZERO));
        assert_eq!(wait_from_ms(1_500), Some(Duration::from_millis(1_500)));
    }
}
