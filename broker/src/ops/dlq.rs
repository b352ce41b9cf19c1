//! The dead-letter queue, served: only what this broker can answer truthfully.
//!
//! The broker keeps no DLQ settings of its own and never retries DLQ entries automatically,
//! which is exactly bunqueue's default configuration: `GetDlqConfig` answers those defaults.
//! Listing, retrying and purging entries, and changing the settings, are refused.

use autobatch_core::ops::{DlqConfig, GetDlqConfig, Operation};
use autobatch_core::wire::{Response, Value};

use crate::dispatch::{Conn, Shared};

/// Serves the DLQ commands this broker implements.
pub(super) fn serve(
    _shared: &Shared,
    _conn: &Conn,
    cmd: &str,
    body: &Value,
    _now: f64,
) -> Option<Result<Response, String>> {
    (cmd == GetDlqConfig::NAME)
        .then(|| super::answer::<GetDlqConfig>(body, |_| Ok(DlqConfig::default())))
}
