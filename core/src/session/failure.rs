//! What a worker says when a job it holds fails ([`JobFailure`]), and which adds a session
//! gives back to a driver with several brokers ([`Release`]).

/// Why a held job failed, for [`Session::fail_job`](super::Session::fail_job): the error the
/// server keeps, whether it may retry the job, and the stack lines it stores as the job's
/// `stacktrace`.
///
/// ```
/// use autobatch_core::session::JobFailure;
/// let f = JobFailure::new("parse failed")
///     .unrecoverable(true)
///     .stack(vec!["caused by: bad digit".into()]);
/// assert_eq!(f.error, "parse failed");
/// assert!(f.unrecoverable);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobFailure {
    /// The error message.
    pub error: String,
    /// The server does not retry the job (it fails for good).
    pub unrecoverable: bool,
    /// Stack lines, the raise site first (bunqueue's own workers send them). Only the first
    /// [`MAX_STACK_LINES`](super::MAX_STACK_LINES) are sent, each cut to at most
    /// [`MAX_STACK_LINE_BYTES`](super::MAX_STACK_LINE_BYTES) bytes, so a FAIL stays small
    /// whatever the error holds.
    pub stack: Vec<String>,
}

impl JobFailure {
    /// A failure the server may retry, with no stack.
    pub fn new(error: impl Into<String>) -> Self {
        JobFailure {
            error: error.into(),
            unrecoverable: false,
            stack: Vec::new(),
        }
    }

    /// Sets [`unrecoverable`](Self::unrecoverable).
    pub fn unrecoverable(mut self, unrecoverable: bool) -> Self {
        self.unrecoverable = unrecoverable;
        self
    }

    /// Sets [`stack`](Self::stack).
    pub fn stack(mut self, stack: Vec<String>) -> Self {
        self.stack = stack;
        self
    }
}

/// Which adds [`Session::release_unwritten`](super::Session::release_unwritten) gives back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Release {
    /// Only the adds not yet written: nothing of them reached the server.
    Unwritten,
    /// Those, and the adds with a custom id that were written and wait to be sent again after
    /// a reconnect: where brokers share one store, another broker replays them.
    WrittenCustomIdsToo,
}
