//! Queue control (pause, resume, drain, clean, …), served.

use autobatch_core::wire::{Response, Value};

use crate::dispatch::{Conn, Shared};

/// Serves the control commands this broker implements.
pub(super) fn serve(
    _shared: &Shared,
    _conn: &Conn,
    cmd: &str,
    _body: &Value,
    _now: f64,
) -> Option<Result<Response, String>> {
    match cmd {
        _ => None,
    }
}
