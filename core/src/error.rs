//! The outcome of an operation that did not succeed, split by who is at fault.
//!
//! * **Local** misuse: [`Error::Invalid`], [`Error::Closed`], [`Error::Overflow`]. Retrying the
//!   same call will fail the same way.
//! * **Remote**: [`Error::Server`] (an error reply), [`Error::Protocol`] (the server broke the
//!   protocol), [`Error::AuthFailed`].
//! * **Transport**: [`Error::ConnectionLost`], [`Error::Timeout`]. Their `maybe_applied` says
//!   whether the server may have acted on the request before the failure: an add with
//!   `maybe_applied: true` may or may not be in the queue. Adds that carry a custom job id are
//!   looked up by it after a reconnect instead, and written again only if no job has it, so
//!   they see this only where a lookup cannot tell (see `docs/reliability.md`).

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
    /// The server answered with an error; [`ServerError::kind`] says which, where bunqueue's
    /// message identifies one.
    #[error("server error: {0}")]
    Server(ServerError),
    /// The server sent something that breaks the protocol; the connection was reset.
    #[error("protocol violation: {0}")]
    Protocol(String),
    /// The server refused the token (`Invalid token`), or the connection has none and the
    /// server requires one (`Not authenticated`).
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

impl Error {
    /// The error for a server's error reply `message`: [`Error::AuthFailed`] when it says the
    /// connection is not authenticated or the token is refused, [`Error::Server`] otherwise.
    pub(crate) fn server(message: impl Into<String>) -> Error {
        let e = ServerError::from(message.into());
        match e.kind {
            ServerErrorKind::NotAuthenticated | ServerErrorKind::InvalidToken => {
                Error::AuthFailed(e.message)
            }
            _ => Error::Server(e),
        }
    }
}

/// What a server error reply is about, where bunqueue's message identifies it.
///
/// ```
/// use autobatch_core::{ServerError, ServerErrorKind};
/// let e = ServerError::from("Job not found");
/// assert_eq!(e.kind(), ServerErrorKind::JobNotFound);
/// assert_eq!(ServerError::from("priority must be an integer").kind(), ServerErrorKind::Validation);
/// assert_eq!(ServerError::from("Queue is paused").kind(), ServerErrorKind::Other);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ServerErrorKind {
    /// `Job not found`, or `Job not found or not in processing state: <id>`.
    JobNotFound,
    /// `Invalid token`: the token was refused.
    InvalidToken,
    /// `Not authenticated`: the server requires a token and the connection has none.
    NotAuthenticated,
    /// `Rate limit exceeded`.
    RateLimited,
    /// A lock token was missing, invalid or expired (`Lock token …`,
    /// `Invalid or expired lock token …`).
    LockToken,
    /// A request field the server refused (`… must be …`, `Invalid …`, `… too large …`).
    Validation,
    /// Anything else.
    Other,
}

impl ServerErrorKind {
    /// Classifies a bunqueue error message.
    pub fn of(message: &str) -> ServerErrorKind {
        // PUSHB prefixes the failing item: `jobs[3]: priority must be …`.
        let m = match message.strip_prefix("jobs[") {
            Some(rest) => rest.split_once("]: ").map_or(message, |(_, m)| m),
            None => message,
        };
        if m.starts_with("Job not found") {
            ServerErrorKind::JobNotFound
        } else if m == "Invalid token" {
            ServerErrorKind::InvalidToken
        } else if m == "Not authenticated" {
            ServerErrorKind::NotAuthenticated
        } else if m.starts_with("Rate limit exceeded") {
            ServerErrorKind::RateLimited
        } else if m.starts_with("Lock token") || m.starts_with("Invalid or expired lock token") {
            ServerErrorKind::LockToken
        } else if m.contains(" must be ")
            || m.starts_with("Invalid ")
            || m.contains("too large")
            || m.contains("too long")
            || m.ends_with(" is required")
        {
            ServerErrorKind::Validation
        } else {
            ServerErrorKind::Other
        }
    }
}

/// A server's error reply: its message as sent, and its [`kind`](Self::kind).
///
/// Compares equal to its message text, so `err == "Job not found"` reads naturally; prefer
/// matching on [`kind`](Self::kind), which does not depend on the exact wording.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerError {
    kind: ServerErrorKind,
    message: String,
}

impl ServerError {
    /// What the error is about.
    pub fn kind(&self) -> ServerErrorKind {
        self.kind
    }

    /// The server's message, as sent.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl From<String> for ServerError {
    fn from(message: String) -> Self {
        ServerError {
            kind: ServerErrorKind::of(&message),
            message,
        }
    }
}

impl From<&str> for ServerError {
    fn from(message: &str) -> Self {
        ServerError::from(message.to_owned())
    }
}

impl std::fmt::Display for ServerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl PartialEq<str> for ServerError {
    fn eq(&self, other: &str) -> bool {
        self.message == other
    }
}

impl PartialEq<&str> for ServerError {
    fn eq(&self, other: &&str) -> bool {
        self.message == *other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_messages_get_their_kind() {
        let kind = |m: &str| ServerError::from(m).kind();
        assert_eq!(kind("Job not found"), ServerErrorKind::JobNotFound);
        assert_eq!(
            kind("Job not found or not in processing state: j1"),
            ServerErrorKind::JobNotFound
        );
        assert_eq!(kind("Rate limit exceeded"), ServerErrorKind::RateLimited);
        assert_eq!(
            kind("jobs[2]: priority must be at most 1000000"),
            ServerErrorKind::Validation
        );
        assert_eq!(
            kind("Invalid or expired lock token"),
            ServerErrorKind::LockToken
        );
        assert_eq!(kind("Queue is paused"), ServerErrorKind::Other);
    }

    #[test]
    fn a_missing_or_refused_token_is_an_auth_failure() {
        assert_eq!(
            Error::server("Not authenticated"),
            Error::AuthFailed("Not authenticated".into())
        );
        assert_eq!(
            Error::server("Invalid token"),
            Error::AuthFailed("Invalid token".into())
        );
        let Error::Server(e) = Error::server("Job not found") else {
            panic!("a server error")
        };
        assert_eq!(e.kind(), ServerErrorKind::JobNotFound);
        assert!(e == "Job not found");
    }
}
