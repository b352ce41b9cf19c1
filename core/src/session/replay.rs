//! Whether a request may be written again after its connection was lost: decided once, here,
//! for every kind of command.

use crate::wire::Command;

/// Whether a request may be sent again on a new connection after the one it was written on
/// was lost before its reply came.
///
/// A request that was never written is always sent on the next connection, whatever its
/// `Replay`; one that was written and not answered is re-sent only if it is
/// [`Replay::Safe`], and otherwise fails with
/// [`Error::ConnectionLost`](crate::Error::ConnectionLost) `{ maybe_applied: true }`.
///
/// ```
/// use autobatch_core::session::Replay;
/// use autobatch_core::wire::Command;
/// assert_eq!(Command::GetState { id: "7".into() }.replay_safety(), Replay::Safe);
/// let fail = Command::Fail {
///     id: "7".into(),
///     error: None,
///     token: None,
///     unrecoverable: false,
///     stack: Vec::new(),
///     remove_on_fail: false,
/// };
/// assert_eq!(fail.replay_safety(), Replay::NotSafe);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Replay {
    /// Applying it twice is the same as applying it once (a read, an add with a custom job id,
    /// which the server deduplicates): it may be re-sent.
    Safe,
    /// It may have been applied and must not be applied twice: it is never re-sent once
    /// written.
    NotSafe,
}

impl Replay {
    /// `Safe` only if both are.
    pub fn and(self, other: Replay) -> Replay {
        match (self, other) {
            (Replay::Safe, Replay::Safe) => Replay::Safe,
            _ => Replay::NotSafe,
        }
    }
}

/// An add is idempotent when it carries a custom job id: the server keeps one job per id.
fn job_replay(has_custom_id: bool) -> Replay {
    if has_custom_id {
        Replay::Safe
    } else {
        Replay::NotSafe
    }
}

impl Command {
    /// Whether this command may be sent again after the connection it was written on was
    /// lost: reads (`Ping`, `Hello`, `Auth`, `GetJob`, `GetState`, `GetResult`, `Count`,
    /// `GetJobCounts`) and adds whose every job has a custom id are [`Replay::Safe`]; adds
    /// without one, pulls, ACK/ACKB/FAIL and any [`Command::Other`] are [`Replay::NotSafe`].
    ///
    /// ```
    /// use autobatch_core::session::Replay;
    /// use autobatch_core::wire::{Command, JobOptions, JobSpec, Value};
    /// let job = JobSpec::new("email", Value::from("a@b"));
    /// let plain = Command::Push { queue: "q".into(), job: job.clone() };
    /// assert_eq!(plain.replay_safety(), Replay::NotSafe);
    /// let keyed = job.with_options(JobOptions::new().job_id("welcome-a@b"));
    /// assert_eq!(Command::Push { queue: "q".into(), job: keyed }.replay_safety(), Replay::Safe);
    /// ```
    pub fn replay_safety(&self) -> Replay {
        match self {
            Command::Hello
            | Command::Auth { .. }
            | Command::Ping
            | Command::GetJob { .. }
            | Command::GetState { .. }
            | Command::GetResult { .. }
            | Command::Count { .. }
            | Command::GetJobCounts { .. } => Replay::Safe,
            Command::Push { job, .. } => job_replay(job.opts.job_id.is_some()),
            Command::PushB { jobs, .. } => jobs.iter().fold(Replay::Safe, |r, job| {
                r.and(job_replay(job.opts.job_id.is_some()))
            }),
            Command::Pull(_)
            | Command::PullB { .. }
            | Command::Ack { .. }
            | Command::AckB { .. }
            | Command::Fail { .. }
            | Command::Other { .. } => Replay::NotSafe,
        }
    }
}
