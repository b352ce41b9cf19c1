//! The broker's wall clock: the one place it reads the time of day.

use std::time::{SystemTime, UNIX_EPOCH};

/// Wall clock, epoch ms (0 on a clock set before 1970).
pub(crate) fn now_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as f64)
        .unwrap_or(0.0)
}
