//! Limits, served: only what this broker can answer truthfully.
//!
//! The broker has no stall detection settings of its own: `GetStallConfig` answers bunqueue's
//! defaults. Rate limits, concurrency limits and group controls are refused (the broker's
//! pull path does not enforce them, and accepting them silently would lie).

use autobatch_core::ops::{GetStallConfig, Operation, StallConfig};
use autobatch_core::wire::{Response, Value};

use crate::dispatch::{Conn, Shared};

/// Serves the limit commands this broker implements.
pub(super) fn serve(
    _shared: &Shared,
    _conn: &Conn,
    cmd: &str,
    body: &Value,
    _now: f64,
) -> Option<Result<Response, String>> {
    (cmd == GetStallConfig::NAME)
        .then(|| super::answer::<GetStallConfig>(body, |_| Ok(StallConfig::default())))
}
