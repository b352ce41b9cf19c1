//! What a session reports: operation ids, events, and the ways a command can end without a
//! reply. Shared by the machine and its producer and worker parts.

use std::collections::VecDeque;

use crate::error::Error;
use crate::wire::Response;

use super::stats::SessionStats;

/// Identifies one operation (an add, a bulk add, a lookup) to the caller. Its outcome comes
/// back as exactly one [`Event::Done`] with the same id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpId(pub(crate) u64);

impl OpId {
    /// The raw number, for logs.
    pub fn get(self) -> u64 {
        self.0
    }
}

/// What the session asks of its driver, or reports to it. Drain with
/// [`Session::poll_event`](super::Session::poll_event).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Event {
    /// Open a connection now, then call
    /// [`Session::handle_connected`](super::Session::handle_connected) or
    /// [`Session::handle_connect_failed`](super::Session::handle_connect_failed).
    Connect,
    /// Close the socket now (the session already counts it as gone: feed it no more bytes from
    /// it and do not call [`Session::handle_disconnected`](super::Session::handle_disconnected)
    /// for it).
    Disconnect,
    /// The outcome of an operation: an add gives [`Response::Pushed`], a bulk add
    /// [`Response::PushedBatch`], a lookup its typed response.
    Done {
        /// The operation.
        op: OpId,
        /// Its outcome.
        result: Result<Response, Error>,
    },
    /// A worker job to process. Report the end with
    /// [`Session::complete_job`](super::Session::complete_job) or
    /// [`Session::fail_job`](super::Session::fail_job).
    Job {
        /// The job (boxed, as in [`Response::Pulled`](crate::wire::Response::Pulled), so that
        /// the far more frequent [`Done`](Self::Done) events stay small).
        job: Box<crate::wire::Job>,
    },
    /// A worker's pull came back empty: the queue has no job for it right now. Reported once
    /// per empty spell (again only after a pull that brought jobs), not on every empty poll.
    Drained,
    /// The server's answer to a worker's completion or failure of a job: `Ok(true)` applied,
    /// `Ok(false)` the server had already finalised it (it timed out, for example).
    JobSettled {
        /// Job id.
        id: String,
        /// Outcome.
        result: Result<bool, Error>,
    },
    /// An event frame from the server (`{type: "event", event}`), pushed after a
    /// `SubscribeEvents` ([`SubscribeEvents`](super::SubscribeEvents)) on this connection;
    /// type it with [`QueueEvent::from_frame`](super::QueueEvent::from_frame). A session that
    /// never subscribes never reports one.
    QueueEvent {
        /// The whole frame.
        frame: crate::wire::Value,
        /// Its encoded length, for a consumer that bounds its buffer in bytes.
        bytes: usize,
    },
    /// [`Session::close`](super::Session::close) finished: everything was flushed and answered.
    Closed,
    /// With [`Session::hand_off_settlements`](super::Session::hand_off_settlements) on and
    /// the connection down: a worker's completions (ACKB) or failure (FAIL) of jobs, with
    /// their lock tokens, for the driver to send to another broker that shares this one's
    /// store. The session counts them as settled and reports nothing more of them.
    HandOff {
        /// The command, as it would have been written here.
        cmd: Box<crate::wire::Command>,
    },
}

/// Where the producer and worker parts report to the machine: events for the caller, and the
/// session's counters. Requests they want sent are returned to the machine, which queues them.
pub(super) struct Out<'a> {
    pub(super) events: &'a mut VecDeque<Event>,
    pub(super) stats: &'a mut SessionStats,
}

impl Out<'_> {
    pub(super) fn done(&mut self, op: OpId, result: Result<Response, Error>) {
        self.events.push_back(Event::Done { op, result });
    }

    pub(super) fn settled(&mut self, id: String, result: Result<bool, Error>) {
        self.events.push_back(Event::JobSettled { id, result });
    }
}

/// Why a command ended without a reply.
#[derive(Debug, Clone)]
pub(super) enum FailKind {
    ConnectionLost,
    Timeout {
        written: bool,
    },
    Protocol(String),
    Auth(String),
    Server(String),
    /// The encoded request would exceed the 64 MiB frame limit.
    TooLarge(String),
}

impl FailKind {
    /// The caller's error; `written` says whether the request may have reached the server.
    pub(super) fn error(&self, written: bool) -> Error {
        match self {
            FailKind::ConnectionLost => Error::ConnectionLost {
                maybe_applied: written,
            },
            FailKind::Timeout { written } => Error::Timeout {
                maybe_applied: *written,
            },
            FailKind::Protocol(m) => Error::Protocol(m.clone()),
            FailKind::Auth(m) => Error::AuthFailed(m.clone()),
            FailKind::Server(m) => Error::server(m.clone()),
            FailKind::TooLarge(m) => Error::Invalid(crate::wire::ValidationError::new(
                "data",
                format!("request too large to send: {m}"),
            )),
        }
    }

    /// Whether replay-safe requests may go again on the next connection.
    pub(super) fn allows_resend(&self) -> bool {
        matches!(
            self,
            FailKind::ConnectionLost | FailKind::Protocol(_) | FailKind::Timeout { .. }
        )
    }
}
