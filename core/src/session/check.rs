//! The lookup that comes before an add is written again: an add with a custom id that was
//! written on a connection that was then lost is looked up by its id (`GetJob`) on the next
//! connection, and written again only if no job has the id and the server is the one that
//! was running when the add was written.
//!
//! An `add_bulk` is looked up job by job, in order: a PUSHB lands whole or not at all, so its
//! first job missing means it did not land, and every job found means it did. A first job
//! found and a later one missing can only mean the first job's id was taken before: its fate
//! stays unknown.
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

/// A written add (or `add_bulk`) waiting to be looked up by its jobs' custom ids.
#[derive(Debug)]
pub(super) struct Check {
    pub(super) op: OpId,
    pub(super) queue: Arc<str>,
    pub(super) jobs: Vec<EncodedJob>,
    /// An `add_bulk`, answered with every id; else one add, answered with its id.
    pub(super) bulk: bool,
    /// The ids of the jobs found so far, in order: the next lookup is of `jobs[ids.len()]`.
    ids: Vec<String>,
    /// When the connection the add was written on came up: a server that started after it
    /// is not the one that took the add.
    since: Instant,
    /// The lookup found no job: the server's uptime is asked next.
    asking_uptime: bool,
}

/// What a step of the check found.
#[derive(Debug)]
pub(super) enum Found {
    /// Every job has its id: the add landed; its answer.
    Added(OpId, Response),
    /// No job has the first id on the server that took the add: it goes again.
    Absent(Check),
    /// The next step: the next lookup, or the server's uptime.
    Next(Check),
    /// Nothing can tell: the fate of the add (of this many jobs) stays unknown.
    Unknown(OpId, usize),
}

impl Check {
    /// The check for an add (or `add_bulk`) written on the connection that came up at `since`
    /// and lost unanswered, or its jobs back (`Err`) when lookups cannot decide its fate: a
    /// job has no custom id, or may be removed once it finishes, which would leave nothing to
    /// find.
    pub(super) fn of(
        op: OpId,
        queue: Arc<str>,
        jobs: Vec<EncodedJob>,
        bulk: bool,
        since: Instant,
    ) -> Result<Check, Vec<EncodedJob>> {
        let checkable = |j: &EncodedJob| j.has_custom_id() && !j.removed_when_finished();
        if jobs.is_empty() || !jobs.iter().all(checkable) {
            return Err(jobs);
        }
        Ok(Check {
            op,
            queue,
            ids: Vec::with_capacity(jobs.len()),
            jobs,
            bulk,
            since,
            asking_uptime: false,
        })
    }

    /// How many adds it stands for.
    pub(super) fn len(&self) -> usize {
        self.jobs.len()
    }

    /// What its reply decodes as.
    pub(super) fn kind(&self) -> CommandKind {
        if self.asking_uptime {
            CommandKind::Other
        } else {
            CommandKind::GetJob
        }
    }

    /// Appends the `GetJob` map of the next job, or the `Stats` one, (no frame header) to
    /// `out`.
    pub(super) fn encode(&self, req_id: &str, out: &mut Vec<u8>) {
        let cmd = if self.asking_uptime {
            Stats::new().to_command()
        } else {
            let next = self
                .jobs
                .get(self.ids.len())
                .and_then(EncodedJob::custom_id);
            Command::GetJob {
                id: next.unwrap_or_default().to_owned(),
            }
        };
        cmd.encode(Some(&Value::Str(req_id.to_owned())), out);
    }

    /// The server answered the step with `response`, at `now`.
    pub(super) fn on_reply(mut self, now: Instant, response: Response) -> Found {
        match (self.asking_uptime, response) {
            (false, Response::Job(job)) => {
                self.ids.push(job.id);
                if self.ids.len() < self.jobs.len() {
                    return Found::Next(self);
                }
                let answer = match self.bulk {
                    true => Response::PushedBatch(self.ids),
                    false => Response::Pushed(self.ids.pop().unwrap_or_default()),
                };
                Found::Added(self.op, answer)
            }
            (true, Response::Other(body)) => match Stats::read_reply(&body) {
                Ok(stats) if !self.restarted(now, stats.uptime) => Found::Absent(self),
                _ => Found::Unknown(self.op, self.jobs.len()),
            },
            _ => Found::Unknown(self.op, self.jobs.len()),
        }
    }

    /// The server refused the step with `msg`: "Job not found" for the first job means the
    /// add did not land (its server's uptime permitting); for a later one, that the first
    /// job's id was taken before, so nothing can tell.
    pub(super) fn on_error(self, msg: &str) -> Found {
        let missing = ServerErrorKind::of(msg) == ServerErrorKind::JobNotFound;
        if !self.asking_uptime && missing && self.ids.is_empty() {
            Found::Next(Check {
                asking_uptime: true,
                ..self
            })
        } else {
            Found::Unknown(self.op, self.jobs.len())
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
