//! Typed requests: what a command is, its name and its kind. A client encodes them
//! (`encode.rs`, and `push.rs` for the jobs of PUSH and PUSHB); the broker decodes them
//! ([`server`](super::server)).
//!
//! The traps of the protocol reference are handled once: PUSH carries the custom id as
//! `jobId` but PUSHB items as `customId`; `name` is always sent; ids travel as strings; integers
//! outside the int32/uint32 range go out as float64; `undefined` reads as absent.

use super::job::{JobSpec, ValidationError};
use super::value::Value;

/// One request to the server.
// A command lives for one encode or one dispatch, never in bulk, so boxing the large PUSH variant
// would cost an allocation for nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Command {
    /// Informative handshake (optional; the server ignores what it is sent).
    Hello,
    /// Authenticate this connection.
    Auth {
        /// The token.
        token: String,
    },
    /// Liveness check.
    Ping,
    /// Add one job (used for durable adds).
    Push {
        /// Queue name.
        queue: String,
        /// The job.
        job: JobSpec,
    },
    /// Add many jobs to one queue.
    PushB {
        /// Queue name.
        queue: String,
        /// The jobs, in order; the reply's ids follow this order.
        jobs: Vec<JobSpec>,
    },
    /// Take one job.
    Pull(PullArgs),
    /// Take up to `count` jobs.
    PullB {
        /// Common pull arguments.
        args: PullArgs,
        /// 1..1000. `0` stands for an absent `count` (the server then hands out nothing) and
        /// is encoded by leaving the field out, since the server refuses an explicit 0.
        count: i64,
    },
    /// Complete one job.
    Ack {
        /// Job id.
        id: String,
        /// Return value.
        result: Option<Value>,
        /// Lock token from the pull.
        token: Option<String>,
    },
    /// Complete many jobs.
    AckB {
        /// Job ids.
        ids: Vec<String>,
        /// Results, parallel to `ids`.
        results: Option<Vec<Value>>,
        /// Lock tokens, parallel to `ids` (`""` = none).
        tokens: Option<Vec<String>>,
        /// `removeOnCompletes`, parallel to `ids`: remove the job once completed instead of
        /// keeping it (the TS worker's `removeOnComplete` option). Empty: not sent.
        remove_on_completes: Vec<bool>,
    },
    /// Fail one job.
    Fail {
        /// Job id.
        id: String,
        /// Error message.
        error: Option<String>,
        /// Lock token from the pull.
        token: Option<String>,
        /// Do not retry.
        unrecoverable: bool,
        /// Stack trace lines, as the official Worker sends them (empty = not sent).
        stack: Vec<String>,
        /// `removeOnFail`: remove the job if this failure is final (the TS worker's option).
        remove_on_fail: bool,
    },
    /// Look up a job.
    GetJob {
        /// Job id.
        id: String,
    },
    /// Look up a job's state.
    GetState {
        /// Job id.
        id: String,
    },
    /// A completed job's result.
    GetResult {
        /// Job id.
        id: String,
    },
    /// Jobs still to run in a queue (waiting + prioritized + delayed).
    Count {
        /// Queue name.
        queue: String,
    },
    /// Per-state counts of a queue.
    GetJobCounts {
        /// Queue name.
        queue: String,
    },
    /// Any other command, kept whole (the official Worker's housekeeping, for example).
    Other {
        /// The `cmd` string.
        cmd: String,
        /// The whole request map.
        body: Value,
    },
}

/// Arguments shared by PULL and PULLB.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PullArgs {
    /// Queue name.
    pub queue: String,
    /// Long-poll timeout, ms (0..60000).
    pub timeout: Option<i64>,
    /// Owner: with one, the server hands out lock tokens and ties the jobs to the connection.
    pub owner: Option<String>,
    /// Lock time to live, ms.
    pub lock_ttl: Option<i64>,
}

/// The kind of a command: what the reply to it should contain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
#[non_exhaustive]
pub enum CommandKind {
    Hello,
    Auth,
    Ping,
    Push,
    PushB,
    Pull,
    PullB,
    Ack,
    AckB,
    Fail,
    GetJob,
    GetState,
    GetResult,
    Count,
    GetJobCounts,
    Other,
}

impl CommandKind {
    /// The wire name (`cmd`) of the commands of this kind; `None` for [`Other`](Self::Other),
    /// whose commands carry their own.
    ///
    /// ```
    /// use autobatch_core::wire::CommandKind;
    /// assert_eq!(CommandKind::PushB.name(), Some("PUSHB"));
    /// assert_eq!(CommandKind::Other.name(), None);
    /// ```
    pub fn name(self) -> Option<&'static str> {
        Some(match self {
            CommandKind::Hello => "Hello",
            CommandKind::Auth => "Auth",
            CommandKind::Ping => "Ping",
            CommandKind::Push => "PUSH",
            CommandKind::PushB => "PUSHB",
            CommandKind::Pull => "PULL",
            CommandKind::PullB => "PULLB",
            CommandKind::Ack => "ACK",
            CommandKind::AckB => "ACKB",
            CommandKind::Fail => "FAIL",
            CommandKind::GetJob => "GetJob",
            CommandKind::GetState => "GetState",
            CommandKind::GetResult => "GetResult",
            CommandKind::Count => "Count",
            CommandKind::GetJobCounts => "GetJobCounts",
            CommandKind::Other => return None,
        })
    }
}

impl Command {
    /// A command the typed API lacks, from its whole request map: its name is the map's `cmd`,
    /// so the name is written once. A `reqId` in `body` is replaced by the session's own.
    ///
    /// # Errors
    ///
    /// [`ValidationError`] on `cmd` when `body` is not a map or has no string `cmd`: such a
    /// request names no command, and nothing is sent.
    ///
    /// ```
    /// use autobatch_core::wire::{Command, Value};
    /// let pause = Command::raw(Value::map([("cmd", Value::from("Pause")), ("queue", Value::from("q"))]));
    /// assert_eq!(pause.unwrap().name(), "Pause");
    /// assert_eq!(Command::raw(Value::map([("queue", Value::from("q"))])).unwrap_err().field, "cmd");
    /// ```
    pub fn raw(body: Value) -> Result<Command, ValidationError> {
        let cmd = body
            .get("cmd")
            .and_then(Value::as_str)
            .ok_or_else(|| ValidationError::new("cmd", "cmd must be a string in a request map"))?
            .to_owned();
        Ok(Command::Other { cmd, body })
    }

    /// The wire name (`cmd`): its kind's, or an [`Other`](Self::Other) command's own.
    pub fn name(&self) -> &str {
        match self {
            Command::Other { cmd, .. } => cmd,
            known => known.kind().name().unwrap_or_default(),
        }
    }

    /// The kind, to decode the reply with.
    pub fn kind(&self) -> CommandKind {
        match self {
            Command::Hello => CommandKind::Hello,
            Command::Auth { .. } => CommandKind::Auth,
            Command::Ping => CommandKind::Ping,
            Command::Push { .. } => CommandKind::Push,
            Command::PushB { .. } => CommandKind::PushB,
            Command::Pull(_) => CommandKind::Pull,
            Command::PullB { .. } => CommandKind::PullB,
            Command::Ack { .. } => CommandKind::Ack,
            Command::AckB { .. } => CommandKind::AckB,
            Command::Fail { .. } => CommandKind::Fail,
            Command::GetJob { .. } => CommandKind::GetJob,
            Command::GetState { .. } => CommandKind::GetState,
            Command::GetResult { .. } => CommandKind::GetResult,
            Command::Count { .. } => CommandKind::Count,
            Command::GetJobCounts { .. } => CommandKind::GetJobCounts,
            Command::Other { .. } => CommandKind::Other,
        }
    }
}
