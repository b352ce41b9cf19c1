//! The outcome of an operation that did not succeed, split by who is at fault.
//!
//! * **Local** misuse: [`Error::Invalid`], [`Error::Closed`], [`Error::Overflow`]. Retrying the
//!   same call will fail the same way.
//! * **Remote**: [`Error::Server`] (an error reply), [`Error::Protocol`] (the server broke the
//!   protocol), [`Error::AuthFailed`].
//! * **Transport**: [`Error::ConnectionLost`], [`Error::Timeout`]. Their `maybe_applied` says
//!   whether the server may have acted on the request before the failure: an add with
//!   `maybe_applied: true` may or may not be in the queue. Adds that carry a custom job id are
//!   re-sent after a reconnect instead (the server deduplicates them), so they do not see this.

use crate::wire::ValidationError;

/// Why an operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The request was refused before anything was sent; the error names the field.
    #[error("invalid request: {0}")]
    Invalid(#[from] ValidationError),
    /// The session is closing or closed.
    #[error("the client is closed")]
    Closed,
    /// The add buffer overflowed and this add was rejected (policies `Reject` and `DropOldest`).
    #[error("add buffer overflow")]
    Overflow,
    /// The server answered with an error.
    #[error("server error: {0}")]
    Server(String),
    /// The server sent something that breaks the protocol; the connection was reset.
    #[error("protocol violation: {0}")]
    Protocol(String),
    /// The server refused the token.
    #[error("authentication failed: {0}")]
    AuthFailed(String),
    /// The connection closed before the reply arrived.
    #[error("connection lost{}", if *.maybe_applied { " (the request may have been applied)" } else { "" })]
    ConnectionLost {
        /// Whether the request had been written, so the server may have acted on it.
        maybe_applied: bool,
    },
    /// No reply came within the command timeout.
    #[error("timed out{}", if *.maybe_applied { " (the request may have been applied)" } else { "" })]
    Timeout {
        /// Whether the request had been written, so the server may have acted on it.
        maybe_applied: bool,
    },
}

/// Who is at fault for an [`Error`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The caller: fix the call or the configuration.
    Local,
    /// The server.
    Remote,
    /// The network or the connection.
    Transport,
}

impl Error {
    /// Who is at fault.
    pub fn fault(&self) -> Fault {
        match self {
            Error::Invalid(_) | Error::Closed | Error::Overflow => Fault::Local,
            Error::Server(_) | Error::Protocol(_) | Error::AuthFailed(_) => Fault::Remote,
            Error::ConnectionLost { .. } | Error::Timeout { .. } => Fault::Transport,
        }
    }
}
