//! Errors that say what the broker was doing, and on what, as well as why.

use std::fmt::Display;
use std::io;

/// `err` with `what` in front (`cannot open the SQLite database at /x/y.db: <cause>`), kind
/// kept, so a caller printing it with Display sees the path and the cause.
pub(crate) fn context(err: io::Error, what: impl Display) -> io::Error {
    io::Error::new(err.kind(), format!("{what}: {err}"))
}
