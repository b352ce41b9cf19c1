//! The lookup that comes before an add is written again: an add with a custom id that was
//! written on a connection that was then lost is looked up by its id (`GetJob`) on the next
//! connection, and written again only if no job has the id and the server is the one that
//! was running when the add was written.
//!
//! Writing it again blindly would be safe only while the first copy, if it landed, is still
//! live: bunqueue deduplicates a custom id only while its job waits, is delayed or runs. Once
//! that job has completed or failed, the id is free again and a blind replay would run the job
//! a second time. The lookup finds a finished job too, as long as it is kept, with two
//! exceptions where "no job has the id" does not mean "the add did not land":
//!
//! * an add whose job is removed when it finishes (`removeOnComplete`, `removeOnFail`): it is
//!   not looked up, nor replayed (see [`Check::of`]);
//! * a server that restarted since the add was written may have lost the job with the rest of
//!   its memory (or the last writes of its SQLite store). A lookup that finds nothing asks the
//!   server's uptime (`Stats`); if the server started after the add's connection came up, the
//!   add's fate stays unknown.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{Error, ServerErrorKind};
use crate::ops::{Operation, Stats};
use crate::wire::{Command, CommandKind, EncodedJob, Response, Value};

use super::event::OpId;

/// A written add waiting to be looked up by its custom id.
#[derive(Debug)]
pub(super) struct Check {
    pub(super) op: OpId,
    pub(super) queue: Arc<str>,
    pub(super) job: EncodedJob,
    /// When the connection the add was written on came up: a server that started after it
    /// is not the one that took the add.
    since: Instant,
    /// The lookup found no job: the server's uptime is asked next.
    asking_uptime: bool,
}

/// What a step of the check found.
#[derive(Debug)]
pub(super) enum Found {
    /// A job has the id: the add landed, with this id.
    Added(OpId, String),
    /// No job has the id on the server that took the add: it goes again.
    Absent(Check),
    /// No job has the id: the server's uptime is asked next.
    AskUptime(Check),
    /// Nothing can tell: the add's fate stays unknown.
    Unknown(OpId),
}

impl Check {
    /// The check for an add written on the connection that came up at `since` and was lost
    /// unanswered, or the add back (`Err`) when a lookup cannot decide its fate: it has no
    /// custom id, or its job may be removed once it finishes, which would leave nothing to
    /// find.
    pub(super) fn of(
        op: OpId,
        queue: Arc<str>,
        job: EncodedJob,
        since: Instant,
    ) -> Result<Check, EncodedJob> {
        if job.has_custom_id() && !job.removed_when_finished() {
            Ok(Check {
                op,
                queue,
                job,
                since,
                asking_uptime: false,
            })
        } else {
            Err(job)
        }
    }

    /// What its reply decodes as.
    pub(super) fn kind(&self) -> CommandKind {
        if self.asking_uptime {
            CommandKind::Other
        } else {
            CommandKind::GetJob
        }
    }

    /// Appends the `GetJob` map, or the `Stats` one, (no frame header) to `out`.
    pub(super) fn encode(&self, req_id: &str, out: &mut Vec<u8>) {
        let cmd = if self.asking_uptime {
            Stats::new().to_command()
        } else {
            Command::GetJob {
                id: self.job.custom_id().unwrap_or_default().to_owned(),
            }
        };
        cmd.encode(Some(&Value::Str(req_id.to_owned())), out);
    }

    /// The server answered the step with `response`, at `now`.
    pub(super) fn on_reply(self, now: Instant, response: Response) -> Found {
        match (self.asking_uptime, response) {
            (false, Response::Job(job)) => Found::Added(self.op, job.id),
            (true, Response::Other(body)) => match Stats::read_reply(&body) {
                Ok(stats) if !self.restarted(now, stats.uptime) => Found::Absent(Check {
                    asking_uptime: false,
                    ..self
                }),
                _ => Found::Unknown(self.op),
            },
            _ => Found::Unknown(self.op),
        }
    }

    /// The server refused the step with `msg`: "Job not found" means no job has the id.
    pub(super) fn on_error(self, msg: &str) -> Found {
        if !self.asking_uptime && ServerErrorKind::of(msg) == ServerErrorKind::JobNotFound {
            Found::AskUptime(Check {
                asking_uptime: true,
                ..self
            })
        } else {
            Found::Unknown(self.op)
        }
    }

    /// Whether a server up for `uptime_ms` at `now` started after the add's connection came
    /// up. An uptime that reads as no duration counts as a restart: the add's fate is then
    /// left unknown rather than risk running it twice.
    fn restarted(&self, now: Instant, uptime_ms: f64) -> bool {
        let Ok(uptime) = Duration::try_from_secs_f64(uptime_ms / 1000.0) else {
            return true;
        };
        // A server up for longer than this process's clock reaches back started before it.
        now.checked_sub(uptime)
            .is_some_and(|started| started > self.since)
    }
}

/// The outcome of an add whose check could not be made or answered: it was written, so it
/// may have been applied, whatever stopped the check.
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
