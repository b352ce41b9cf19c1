//! Time spans as the wire carries them: whole milliseconds. The public API takes and returns
//! [`Duration`]s (the typed ops of `autobatch_core::ops` turn them into the wire's integers,
//! saturating rather than wrapping); this reads the server's millisecond answers back.

use std::time::Duration;

/// A wait the server reports in milliseconds, negative for "none" (bunqueue's `-2`: no
/// limit, no window open).
pub(crate) fn wait_from_ms(ms: i64) -> Option<Duration> {
    u64::try_from(ms).ok().map(Duration::from_millis)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_negative_wait_is_none() {
        assert_eq!(wait_from_ms(-2), None);
        assert_eq!(wait_from_ms(0), Some(Duration::ZERO));
        assert_eq!(wait_from_ms(1_500), Some(Duration::from_millis(1_500)));
    }
}
