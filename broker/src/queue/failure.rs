//! How a job fails: what a FAIL or Discard asks for, or the broker's own timeout.

/// What failed a job: its DLQ reason and the reason its failed attempt records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Cause {
    /// A worker's FAIL (or Discard).
    #[default]
    Worker,
    /// The job ran past its `timeout`.
    Timeout,
}

/// One failure of an active job (see [`crate::queue::State::fail`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Failure {
    /// The error text, as the job's `failedReason`.
    pub error: Option<String>,
    /// Failed for good, whatever attempts remain.
    pub unrecoverable: bool,
    /// Whether a job failed for good is dropped: the FAIL's `removeOnFail`, else the job's.
    pub remove: Option<bool>,
    pub cause: Cause,
}

impl Failure {
    /// A worker's failure with `error`, retried while attempts remain.
    pub fn new(error: Option<String>) -> Failure {
        Failure {
            error,
            ..Failure::default()
        }
    }

    /// Failed for good (`unrecoverable`) or not.
    pub fn unrecoverable(self, unrecoverable: bool) -> Failure {
        Failure {
            unrecoverable,
            ..self
        }
    }

    /// With the FAIL's `removeOnFail`.
    pub fn remove(self, remove: Option<bool>) -> Failure {
        Failure { remove, ..self }
    }

    /// The job's `timeout` ran out (bunqueue's `Job timeout exceeded`).
    pub fn timeout() -> Failure {
        Failure {
            error: Some("Job timeout exceeded".to_owned()),
            cause: Cause::Timeout,
            ..Failure::default()
        }
    }

    /// The reason a failed attempt that will be retried records.
    pub fn attempt_reason(&self) -> &'static str {
        match self.cause {
            Cause::Worker => "explicit_fail",
            Cause::Timeout => "timeout",
        }
    }

    /// The DLQ reason of a job this failure fails for good.
    pub fn dlq_reason(&self) -> &'static str {
        match self.cause {
            Cause::Worker => "max_attempts_exceeded",
            Cause::Timeout => "timeout",
        }
    }
}
