//! The lookup that comes before an add is written again: an add with a custom id that was
//! written on a connection that was then lost is looked up by its id (`GetJob`) on the next
//! connection, and written again only if no job has the id.
//!
//! Writing it again blindly would be safe only while the first copy, if it landed, is still
//! live: bunqueue deduplicates a custom id only while its job waits, is delayed or runs. Once
//! that job has completed or failed, the id is free again and a blind replay would run the job
//! a second time. The lookup finds a finished job too, as long as it is kept: an add whose job
//! is removed when it finishes (`removeOnComplete`, `removeOnFail`) cannot be told from one
//! that never landed, so it is not replayed at all (see [`Check::of`]).

use std::sync::Arc;

use crate::error::{Error, ServerErrorKind};
use crate::wire::{Command, EncodedJob, Response, Value};

use super::event::OpId;

/// A written add waiting to be looked up by its custom id.
#[derive(Debug)]
pub(super) struct Check {
    pub(super) op: OpId,
    pub(super) queue: Arc<str>,
    pub(super) job: EncodedJob,
}

/// What the lookup found.
#[derive(Debug)]
pub(super) enum Found {
    /// A job has the id: the add landed, with this id.
    Added(OpId, String),
    /// No job has the id: the add did not land, and goes again.
    Absent(Check),
    /// The lookup could not tell: the add's fate stays unknown.
    Unknown(OpId),
}

impl Check {
    /// The check for a written, unanswered add, or the add back (`Err`) when a lookup
    /// cannot decide its fate: it has no custom id, or its job may be removed once it
    /// finishes, which would leave nothing to find.
    pub(super) fn of(op: OpId, queue: Arc<str>, job: EncodedJob) -> Result<Check, EncodedJob> {
        if job.has_custom_id() && !job.removed_when_finished() {
            Ok(Check { op, queue, job })
        } else {
            Err(job)
        }
    }

    /// The job id it looks up.
    fn id(&self) -> &str {
        self.job.custom_id().unwrap_or_default()
    }

    /// Appends the `GetJob` map (no frame header) to `out`.
    pub(super) fn encode(&self, req_id: &str, out: &mut Vec<u8>) {
        let cmd = Command::GetJob {
            id: self.id().to_owned(),
        };
        cmd.encode(Some(&Value::Str(req_id.to_owned())), out);
    }

    /// The server answered the lookup with `response`.
    pub(super) fn on_reply(self, response: Response) -> Found {
        match response {
            Response::Job(job) => Found::Added(self.op, job.id),
            _ => Found::Unknown(self.op),
        }
    }

    /// The server refused the lookup with `msg`: "Job not found" means the add did not land.
    pub(super) fn on_error(self, msg: &str) -> Found {
        if ServerErrorKind::of(msg) == ServerErrorKind::JobNotFound {
            Found::Absent(self)
        } else {
            Found::Unknown(self.op)
        }
    }
}

/// The outcome of an add whose lookup could not be made or answered: it was written, so it
/// may have been applied, whatever stopped the lookup.
pub(super) fn unknown(err: &Error) -> Error {
    match err {
        Error::Timeout { .. } => Error::Timeout {
            maybe_applied: true,
        },
        _ => Error::ConnectionLost {
            maybe_applied: true,
        },
    }
}
