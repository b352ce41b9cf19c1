//! Token authentication: constant-time comparison against the configured tokens.

use subtle::ConstantTimeEq;

/// Whether `offered` equals one of `tokens`. Every token is compared, each in constant time for
/// its length, so the time taken does not tell which bytes matched.
///
/// ```
/// use autobatch_broker::auth::token_matches;
/// let tokens = vec!["alpha".to_string(), "beta".to_string()];
/// assert!(token_matches(&tokens, "beta"));
/// assert!(!token_matches(&tokens, "bet"));
/// assert!(!token_matches(&[], "anything"), "no tokens configured: nothing matches");
/// ```
pub fn token_matches(tokens: &[String], offered: &str) -> bool {
    let mut matched = subtle::Choice::from(0);
    for t in tokens {
        matched |= t.as_bytes().ct_eq(offered.as_bytes());
    }
    matched.into()
}
