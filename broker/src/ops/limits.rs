//! Limits, served: only what this broker can answer truthfully.
//!
//! Stall detection is enforced (see `State::check_stalled` and `State::expire_locks`), so its
//! settings are served: `SetStallConfig` merges into a queue's settings as bunqueue's
//! `setStallConfig` does, `GetStallConfig` answers them (bunqueue's defaults until set). Rate
//! limits, concurrency limits and group controls are refused (the broker's pull path does
//! not enforce them, and accepting them silently would lie).

use autobatch_core::ops::{GetStallConfig, Operation, SetStallConfig};
use autobatch_core::wire::{Response, Value};

use crate::dispatch::{Conn, Shared};

/// Serves the limit commands this broker implements.
pub(super) fn serve(
    shared: &Shared,
    _conn: &Conn,
    cmd: &str,
    body: &Value,
    _now: f64,
) -> Option<Result<Response, String>> {
    match cmd {
        GetStallConfig::NAME => Some(super::answer::<GetStallConfig>(body, |op| {
            Ok(shared.lock().stall_config(&op.queue))
        })),
        SetStallConfig::NAME => Some(super::answer::<SetStallConfig>(body, |op| {
            shared.lock().set_stall_config(&op.queue, &op.config);
            Ok(())
        })),
        _ => None,
    }
}
