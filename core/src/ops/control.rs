//! Queue control: pause, resume, drain, clean, obliterate, and the per-job moves (promote,
//! retry, change priority or delay, discard, cancel, remove).

use crate::session::Replay;
use crate::wire::server::CommandError;
use crate::wire::{validate_queue_name, ProtocolError, ValidationError, Value};

use super::lookup::{reply_data, req_opt_u64, validate_state};
use super::read::{
    array, reply_bool, reply_field, reply_strings, reply_u64, req_opt_i64, req_opt_str, req_queue,
    req_str,
};
use super::{Fields, Operation};
use crate::wire::JobState;

/// `Pause`: workers get no more jobs from the queue until [`Resume`]; jobs keep arriving.
///
/// Pausing twice is pausing once, so it may be replayed.
///
/// ```
/// use autobatch_core::ops::{Operation, Pause};
/// use autobatch_core::wire::Value;
/// let pause = Pause::new("emails");
/// assert_eq!(pause.to_body(), Value::map([("cmd", Value::from("Pause")), ("queue", Value::from("emails"))]));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Pause {
    /// Queue name.
    pub queue: String,
}

impl Pause {
    /// Pauses `queue`.
    pub fn new(queue: impl Into<String>) -> Self {
        Pause {
            queue: queue.into(),
        }
    }
}

impl Operation for Pause {
    const NAME: &'static str = "Pause";
    type Output = ();

    fn replay(&self) -> Replay {
        Replay::Safe
    }

    fn write_fields(&self, fields: &mut Fields) {
        fields.put("queue", self.queue.as_str());
    }

    fn read_reply(_: &Value) -> Result<(), ProtocolError> {
        Ok(())
    }

    fn read_request(request: &Value) -> Result<Self, CommandError> {
        Ok(Pause::new(req_queue(request)?))
    }

    fn write_reply(_: &(), fields: &mut Fields) {
        fields.put("id", Value::Undefined);
    }

    fn validate(&self) -> Result<(), ValidationError> {
        validate_queue_name(&self.queue)
    }
}

/// `Resume`: undoes [`Pause`]. Idempotent, so it may be replayed.
///
/// ```
/// use autobatch_core::ops::{Operation, Resume};
/// assert_eq!(Resume::NAME, "Resume");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Resume {
    /// Queue name.
    pub queue: String,
}

impl Resume {
    /// Resumes `queue`.
    pub fn new(queue: impl Into<String>) -> Self {
        Resume {
            queue: queue.into(),
        }
    }
}

impl Operation for Resume {
    const NAME: &'static str = "Resume";
    type Output = ();

    fn replay(&self) -> Replay {
        Replay::Safe
    }

    fn write_fields(&self, fields: &mut Fields) {
        fields.put("queue", self.queue.as_str());
    }

    fn read_reply(_: &Value) -> Result<(), ProtocolError> {
        Ok(())
    }

    fn read_request(request: &Value) -> Result<Self, CommandError> {
        Ok(Resume::new(req_queue(request)?))
    }

    fn write_reply(_: &(), fields: &mut Fields) {
        fields.put("id", Value::Undefined);
    }

    fn validate(&self) -> Result<(), ValidationError> {
        validate_queue_name(&self.queue)
    }
}

/// `IsPaused`: whether the queue is paused.
///
/// ```
/// use autobatch_core::ops::{IsPaused, Operation};
/// use autobatch_core::wire::Value;
/// let reply = Value::map([("ok", Value::from(true)), ("paused", Value::from(true))]);
/// assert_eq!(IsPaused::read_reply(&reply), Ok(true));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct IsPaused {
    /// Queue name.
    pub queue: String,
}

impl IsPaused {
    /// Asks about `queue`.
    pub fn new(queue: impl Into<String>) -> Self {
        IsPaused {
            queue: queue.into(),
        }
    }
}

impl Operation for IsPaused {
    const NAME: &'static str = "IsPaused";
    type Output = bool;

    fn replay(&self) -> Replay {
        Replay::Safe
    }

    fn write_fields(&self, fields: &mut Fields) {
        fields.put("queue", self.queue.as_str());
    }

    fn read_reply(reply: &Value) -> Result<bool, ProtocolError> {
        reply_bool(reply, "paused")
    }

    fn read_request(request: &Value) -> Result<Self, CommandError> {
        Ok(IsPaused::new(req_queue(request)?))
    }

    fn write_reply(paused: &bool, fields: &mut Fields) {
        fields.put("paused", *paused);
    }

    fn validate(&self) -> Result<(), ValidationError> {
        validate_queue_name(&self.queue)
    }
}

/// A job id the server would look up: non-empty.
fn validate_id(id: &str) -> Result<(), ValidationError> {
    if id.is_empty() {
        Err(ValidationError::new("id", "id is required"))
    } else {
        Ok(())
    }
}

/// The reply to a command answered with `resp.ok(undefined)`: `{ok: true, id: undefined}`.
fn write_ok(fields: &mut Fields) {
    fields.put("id", Value::Undefined);
}

/// `data: {<field>: value}`, the shape of `resp.data` replies.
fn data_field(reply: &Value, field: &'static str) -> Result<Value, ProtocolError> {
    reply_field(&reply_data(reply)?, field).cloned()
}

// ------------------------------------------------------------------------------ Drain

/// `Drain`: removes every waiting, prioritized and delayed job of a queue (not active ones),
/// and says how many.
///
/// Not replayed: a second drain would also remove the jobs added between the two.
///
/// ```
/// use autobatch_core::ops::{Drain, Operation};
/// use autobatch_core::wire::Value;
/// let reply = Value::map([("ok", Value::from(true)), ("count", Value::Int(3))]);
/// assert_eq!(Drain::read_reply(&reply), Ok(3));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Drain {
    /// Queue name.
    pub queue: String,
}

impl Drain {
    /// Drains `queue`.
    pub fn new(queue: impl Into<String>) -> Self {
        Drain {
            queue: queue.into(),
        }
    }
}

impl Operation for Drain {
    const NAME: &'static str = "Drain";
    type Output = u64;

    fn replay(&self) -> Replay {
        Replay::NotSafe
    }

    fn write_fields(&self, fields: &mut Fields) {
        fields.put("queue", self.queue.as_str());
    }

    fn read_reply(reply: &Value) -> Result<u64, ProtocolError> {
        reply_u64(reply, "count")
    }

    fn read_request(request: &Value) -> Result<Self, CommandError> {
        Ok(Drain::new(req_queue(request)?))
    }

    fn write_reply(count: &u64, fields: &mut Fields) {
        fields.put("count", *count);
    }

    fn validate(&self) -> Result<(), ValidationError> {
        validate_queue_name(&self.queue)
    }
}

// ------------------------------------------------------------------------------ Clean

/// `Clean`: removes up to `limit` jobs of a queue in one state that are older than `grace`
/// ms, and returns their ids.
///
/// States: `waiting` (also `delayed`, `prioritized`, `paused`: every ready or delayed job —
/// bunqueue cleans those together), `completed`, `failed`; none means waiting. `active` jobs
/// are never cleaned (an empty answer). A state name bunqueue does not know is refused
/// locally (the server would answer with nothing cleaned).
///
/// Not replayed: a second clean removes jobs that aged past the grace in between.
///
/// ```
/// use autobatch_core::ops::{Clean, Operation};
/// use autobatch_core::wire::{JobState, Value};
/// let op = Clean::new("emails", 60_000, 100).state(JobState::Completed);
/// assert_eq!(op.to_body().get("state"), Some(&Value::from("completed")));
/// let reply = Value::map([("ok", Value::from(true)), ("count", Value::Int(1)), ("ids", Value::Array(vec![Value::from("j1")]))]);
/// assert_eq!(Clean::read_reply(&reply), Ok(vec!["j1".to_owned()]));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Clean {
    /// Queue name.
    pub queue: String,
    /// Only jobs older than this, ms.
    pub grace: u64,
    /// At most this many jobs (0: none).
    pub limit: u64,
    /// Which jobs; waiting ones when `None`.
    pub state: Option<JobState>,
}

impl Clean {
    /// Cleans up to `limit` waiting jobs of `queue` older than `grace` ms.
    pub fn new(queue: impl Into<String>, grace: u64, limit: u64) -> Self {
        Clean {
            queue: queue.into(),
            grace,
            limit,
            state: None,
        }
    }

    /// Cleans jobs in `state` instead.
    pub fn state(mut self, state: JobState) -> Self {
        self.state = Some(state);
        self
    }
}

impl Operation for Clean {
    const NAME: &'static str = "Clean";
    type Output = Vec<String>;

    fn replay(&self) -> Replay {
        Replay::NotSafe
    }

    fn write_fields(&self, fields: &mut Fields) {
        fields
            .put("queue", self.queue.as_str())
            .put("grace", self.grace)
            .put("limit", self.limit)
            .put_opt("state", self.state.as_ref().map(JobState::as_str));
    }

    fn read_reply(reply: &Value) -> Result<Vec<String>, ProtocolError> {
        reply_strings(reply, "ids")
    }

    fn read_request(request: &Value) -> Result<Self, CommandError> {
        Ok(Clean {
            queue: req_queue(request)?,
            grace: req_opt_u64(request, "grace")?.unwrap_or(0),
            // bunqueue's default when absent.
            limit: req_opt_u64(request, "limit")?.unwrap_or(1000),
            state: req_opt_str(request, "state").map(|s| match s.as_str() {
                // bunqueue's own alias.
                "wait" => JobState::Waiting,
                _ => JobState::from(s),
            }),
        })
    }

    fn write_reply(ids: &Vec<String>, fields: &mut Fields) {
        fields
            .put("count", ids.len() as u64)
            .put("ids", array(ids.iter().map(String::as_str)));
    }

    fn validate(&self) -> Result<(), ValidationError> {
        validate_queue_name(&self.queue)?;
        match &self.state {
            Some(s) => validate_state("state", s),
            None => Ok(()),
        }
    }
}

// ------------------------------------------------------------------------------ Obliterate

/// `Obliterate`: removes a queue and everything in it (jobs in every state, its dead-letter
/// queue, its settings).
///
/// Not replayed: a second one would also destroy what was added between the two.
///
/// ```
/// use autobatch_core::ops::{Obliterate, Operation};
/// assert_eq!(Obliterate::new("emails").to_body().get("queue").and_then(|v| v.as_str()), Some("emails"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Obliterate {
    /// Queue name.
    pub queue: String,
}

impl Obliterate {
    /// Obliterates `queue`.
    pub fn new(queue: impl Into<String>) -> Self {
        Obliterate {
            queue: queue.into(),
        }
    }
}

impl Operation for Obliterate {
    const NAME: &'static str = "Obliterate";
    type Output = ();

    fn replay(&self) -> Replay {
        Replay::NotSafe
    }

    fn write_fields(&self, fields: &mut Fields) {
        fields.put("queue", self.queue.as_str());
    }

    fn read_reply(_: &Value) -> Result<(), ProtocolError> {
        Ok(())
    }

    fn read_request(request: &Value) -> Result<Self, CommandError> {
        Ok(Obliterate::new(req_queue(request)?))
    }

    fn write_reply(_: &(), fields: &mut Fields) {
        write_ok(fields);
    }

    fn validate(&self) -> Result<(), ValidationError> {
        validate_queue_name(&self.queue)
    }
}

// ------------------------------------------------------------------------------ per-job moves

/// Defines an operation on one job whose request is `{id}` plus optional fields and whose
/// success reply is `resp.ok(undefined)`.
macro_rules! job_move {
    (
        $(#[$doc:meta])*
        $name:ident, $wire:literal, $replay:expr
    ) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq)]
        #[non_exhaustive]
        pub struct $name {
            /// Job id.
            pub id: String,
        }

        impl $name {
            /// For job `id`.
            pub fn new(id: impl Into<String>) -> Self {
                $name { id: id.into() }
            }
        }

        impl Operation for $name {
            const NAME: &'static str = $wire;
            type Output = ();

            fn replay(&self) -> Replay {
                $replay
            }

            fn write_fields(&self, fields: &mut Fields) {
                fields.put("id", self.id.as_str());
            }

            fn read_reply(_: &Value) -> Result<(), ProtocolError> {
                Ok(())
            }

            fn read_request(request: &Value) -> Result<Self, CommandError> {
                Ok($name::new(req_str(request, "id")?))
            }

            fn write_reply(_: &(), fields: &mut Fields) {
                write_ok(fields);
            }

            fn validate(&self) -> Result<(), ValidationError> {
                validate_id(&self.id)
            }
        }
    };
}

job_move! {
    /// `Cancel`: removes a job that is not active (the TS client's `remove(id)` and
    /// `job.remove()`). Refused with `Job not found or cannot be cancelled` for an unknown or
    /// active job.
    ///
    /// Not replayed: if the first one removed the job, a second is refused.
    ///
    /// ```
    /// use autobatch_core::ops::{Cancel, Operation};
    /// use autobatch_core::wire::Value;
    /// assert_eq!(Cancel::new("j1").to_body(), Value::map([("cmd", Value::from("Cancel")), ("id", Value::from("j1"))]));
    /// ```
    Cancel, "Cancel", Replay::NotSafe
}

job_move! {
    /// `Promote`: makes a delayed job ready now. Refused with `Job not found or not delayed`.
    ///
    /// Not replayed: a second one is refused once the first has promoted the job.
    ///
    /// ```
    /// use autobatch_core::ops::{Operation, Promote};
    /// assert_eq!(Promote::NAME, "Promote");
    /// ```
    Promote, "Promote", Replay::NotSafe
}

/// Defines an operation on one job, with an optional lock token, whose success reply is
/// `resp.ok(undefined)`.
macro_rules! job_move_token {
    (
        $(#[$doc:meta])*
        $name:ident, $wire:literal
    ) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq)]
        #[non_exhaustive]
        pub struct $name {
            /// Job id.
            pub id: String,
            /// The lock token of an active job (required when the job is active and locked).
            pub token: Option<String>,
        }

        impl $name {
            /// For job `id`, without a token.
            pub fn new(id: impl Into<String>) -> Self {
                $name {
                    id: id.into(),
                    token: None,
                }
            }

            /// With the lock token the job was pulled with.
            pub fn token(mut self, token: impl Into<String>) -> Self {
                self.token = Some(token.into());
                self
            }
        }

        impl Operation for $name {
            const NAME: &'static str = $wire;
            type Output = ();

            /// Not replayed: the job's state moves on, and a second move from the new state
            /// does something else or is refused.
            fn replay(&self) -> Replay {
                Replay::NotSafe
            }

            fn write_fields(&self, fields: &mut Fields) {
                fields
                    .put("id", self.id.as_str())
                    .put_opt("token", self.token.as_deref());
            }

            fn read_reply(_: &Value) -> Result<(), ProtocolError> {
                Ok(())
            }

            fn read_request(request: &Value) -> Result<Self, CommandError> {
                Ok($name {
                    id: req_str(request, "id")?,
                    token: req_opt_str(request, "token"),
                })
            }

            fn write_reply(_: &(), fields: &mut Fields) {
                write_ok(fields);
            }

            fn validate(&self) -> Result<(), ValidationError> {
                validate_id(&self.id)
            }
        }
    };
}

job_move_token! {
    /// `Discard`: fails a job for good, without retries (an active job needs its lock token:
    /// `Lock token required for job <id>` otherwise). Refused with `Job not found`.
    ///
    /// ```
    /// use autobatch_core::ops::{Discard, Operation};
    /// use autobatch_core::wire::Value;
    /// let op = Discard::new("j1").token("t1");
    /// assert_eq!(op.to_body().get("token"), Some(&Value::from("t1")));
    /// ```
    Discard, "Discard"
}

job_move_token! {
    /// `MoveToWait`: puts a job back to waiting — the TS client's `retryJob(id)` and
    /// `moveJobToWait(id, token)`: an active job is released (with its token if locked), a
    /// delayed one promoted, a failed one retried from the dead-letter queue, a waiting one
    /// left alone. Refused for other states (`Cannot move job from state '<state>' to
    /// waiting`; an unknown id is state `unknown`).
    ///
    /// ```
    /// use autobatch_core::ops::{MoveToWait, Operation};
    /// assert_eq!(MoveToWait::new("j1").to_body().get("token"), None);
    /// ```
    MoveToWait, "MoveToWait"
}

// ------------------------------------------------------------------------------ PromoteJobs

/// `PromoteJobs`: makes up to `count` delayed jobs of a queue ready now (all when no count),
/// and says how many. The batch form of [`Promote`].
///
/// Not replayed: a second one would promote more jobs.
///
/// ```
/// use autobatch_core::ops::{Operation, PromoteJobs};
/// use autobatch_core::wire::Value;
/// assert_eq!(PromoteJobs::new("emails").count(10).to_body().get("count"), Some(&Value::from(10_u64)));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PromoteJobs {
    /// Queue name.
    pub queue: String,
    /// At most this many; all when `None`.
    pub count: Option<u64>,
}

impl PromoteJobs {
    /// Promotes every delayed job of `queue`.
    pub fn new(queue: impl Into<String>) -> Self {
        PromoteJobs {
            queue: queue.into(),
            count: None,
        }
    }

    /// At most `count` of them.
    pub fn count(mut self, count: u64) -> Self {
        self.count = Some(count);
        self
    }
}

impl Operation for PromoteJobs {
    const NAME: &'static str = "PromoteJobs";
    type Output = u64;

    fn replay(&self) -> Replay {
        Replay::NotSafe
    }

    fn write_fields(&self, fields: &mut Fields) {
        fields
            .put("queue", self.queue.as_str())
            .put_opt("count", self.count);
    }

    fn read_reply(reply: &Value) -> Result<u64, ProtocolError> {
        reply_u64(reply, "count")
    }

    fn read_request(request: &Value) -> Result<Self, CommandError> {
        Ok(PromoteJobs {
            queue: req_queue(request)?,
            count: req_opt_u64(request, "count")?,
        })
    }

    fn write_reply(count: &u64, fields: &mut Fields) {
        fields.put("count", *count);
    }

    fn validate(&self) -> Result<(), ValidationError> {
        validate_queue_name(&self.queue)
    }
}

// ------------------------------------------------------------------------------ RetryCompleted

/// `RetryCompleted`: runs completed jobs of a queue again — one (`id`), or up to `count`
/// (completed before `timestamp`, when given) — and says how many.
///
/// Not replayed: a job the first one re-ran may have completed again by the second.
///
/// ```
/// use autobatch_core::ops::{Operation, RetryCompleted};
/// use autobatch_core::wire::Value;
/// let op = RetryCompleted::new("emails").id("j1");
/// assert_eq!(op.to_body().get("id"), Some(&Value::from("j1")));
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RetryCompleted {
    /// Queue name.
    pub queue: String,
    /// Only this job.
    pub id: Option<String>,
    /// At most this many.
    pub count: Option<u64>,
    /// Only jobs completed before this time, epoch ms.
    pub timestamp: Option<f64>,
}

impl RetryCompleted {
    /// Retries every completed job of `queue`.
    pub fn new(queue: impl Into<String>) -> Self {
        RetryCompleted {
            queue: queue.into(),
            id: None,
            count: None,
            timestamp: None,
        }
    }

    /// Only job `id`.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// At most `count` jobs.
    pub fn count(mut self, count: u64) -> Self {
        self.count = Some(count);
        self
    }

    /// Only jobs completed before `timestamp` (epoch ms).
    pub fn before(mut self, timestamp: f64) -> Self {
        self.timestamp = Some(timestamp);
        self
    }
}

impl Operation for RetryCompleted {
    const NAME: &'static str = "RetryCompleted";
    type Output = u64;

    fn replay(&self) -> Replay {
        Replay::NotSafe
    }

    fn write_fields(&self, fields: &mut Fields) {
        fields
            .put("queue", self.queue.as_str())
            .put_opt("id", self.id.as_deref())
            .put_opt("count", self.count)
            .put_opt("timestamp", self.timestamp);
    }

    fn read_reply(reply: &Value) -> Result<u64, ProtocolError> {
        reply_u64(reply, "count")
    }

    fn read_request(request: &Value) -> Result<Self, CommandError> {
        Ok(RetryCompleted {
            queue: req_queue(request)?,
            id: req_opt_str(request, "id"),
            count: req_opt_u64(request, "count")?,
            timestamp: request.get("timestamp").and_then(Value::as_f64),
        })
    }

    fn write_reply(count: &u64, fields: &mut Fields) {
        fields.put("count", *count);
    }

    fn validate(&self) -> Result<(), ValidationError> {
        validate_queue_name(&self.queue)
    }
}

// ------------------------------------------------------------------------------ ChangePriority

/// `ChangePriority`: gives a waiting, prioritized or delayed job a new priority (and, with
/// `lifo`, puts it first among its equals). Refused with `Job not found or not in queue`
/// (unknown, active or finished job).
///
/// Replayed: it sets an absolute value, so a second one leaves the job as the first did.
///
/// ```
/// use autobatch_core::ops::{ChangePriority, Operation};
/// use autobatch_core::session::Replay;
/// let op = ChangePriority::new("j1", 7).lifo(true);
/// assert_eq!(op.replay(), Replay::Safe);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ChangePriority {
    /// Job id.
    pub id: String,
    /// The new priority (higher runs first).
    pub priority: i64,
    /// Put it before the jobs of the same priority.
    pub lifo: Option<bool>,
}

impl ChangePriority {
    /// Sets job `id`'s priority to `priority`.
    pub fn new(id: impl Into<String>, priority: i64) -> Self {
        ChangePriority {
            id: id.into(),
            priority,
            lifo: None,
        }
    }

    /// Last in, first out among equals.
    pub fn lifo(mut self, lifo: bool) -> Self {
        self.lifo = Some(lifo);
        self
    }
}

impl Operation for ChangePriority {
    const NAME: &'static str = "ChangePriority";
    type Output = ();

    fn replay(&self) -> Replay {
        Replay::Safe
    }

    fn write_fields(&self, fields: &mut Fields) {
        fields
            .put("id", self.id.as_str())
            .put("priority", self.priority)
            .put_opt("lifo", self.lifo);
    }

    fn read_reply(_: &Value) -> Result<(), ProtocolError> {
        Ok(())
    }

    fn read_request(request: &Value) -> Result<Self, CommandError> {
        Ok(ChangePriority {
            id: req_str(request, "id")?,
            priority: req_opt_i64(request, "priority")?.unwrap_or(0),
            lifo: request.get("lifo").and_then(Value::as_bool),
        })
    }

    fn write_reply(_: &(), fields: &mut Fields) {
        write_ok(fields);
    }

    fn validate(&self) -> Result<(), ValidationError> {
        validate_id(&self.id)
    }
}

// ------------------------------------------------------------------------------ ChangeDelay / MoveToDelayed

/// `ChangeDelay`: makes a delayed (or waiting) job run `delay` ms from now. Refused with
/// `Job not found or cannot change delay`.
///
/// Not replayed: the delay counts from when the server reads it, so a later replay would
/// push the job further out.
///
/// ```
/// use autobatch_core::ops::{ChangeDelay, Operation};
/// use autobatch_core::wire::Value;
/// assert_eq!(ChangeDelay::new("j1", 5_000).to_body().get("delay"), Some(&Value::from(5_000_u64)));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ChangeDelay {
    /// Job id.
    pub id: String,
    /// Ms from now.
    pub delay: u64,
    /// The lock token of an active job (bunqueue then moves it to delayed; without the token
    /// it answers `Lock token required for job <id>`). The TS worker's `job.changeDelay`
    /// sends it.
    pub token: Option<String>,
}

impl ChangeDelay {
    /// Job `id` runs `delay` ms from now.
    pub fn new(id: impl Into<String>, delay: u64) -> Self {
        ChangeDelay {
            id: id.into(),
            delay,
            token: None,
        }
    }

    /// With the lock token an active job was pulled with.
    ///
    /// ```
    /// use autobatch_core::ops::{ChangeDelay, Operation};
    /// use autobatch_core::wire::Value;
    /// let op = ChangeDelay::new("j1", 5_000).token("t1");
    /// assert_eq!(op.to_body().get("token"), Some(&Value::from("t1")));
    /// ```
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }
}

impl Operation for ChangeDelay {
    const NAME: &'static str = "ChangeDelay";
    type Output = ();

    fn replay(&self) -> Replay {
        Replay::NotSafe
    }

    fn write_fields(&self, fields: &mut Fields) {
        fields
            .put("id", self.id.as_str())
            .put("delay", self.delay)
            .put_opt("token", self.token.as_deref());
    }

    fn read_reply(_: &Value) -> Result<(), ProtocolError> {
        Ok(())
    }

    fn read_request(request: &Value) -> Result<Self, CommandError> {
        Ok(ChangeDelay {
            id: req_str(request, "id")?,
            delay: req_opt_u64(request, "delay")?.unwrap_or(0),
            token: req_opt_str(request, "token"),
        })
    }

    fn write_reply(_: &(), fields: &mut Fields) {
        write_ok(fields);
    }

    fn validate(&self) -> Result<(), ValidationError> {
        validate_id(&self.id)
    }
}

/// `MoveToDelayed`: moves an active job back to delayed, to run `delay` ms from now (the TS
/// client's `moveJobToDelayed(id, timestamp, token)`, which sends the delay). Refused with
/// `Job not found`, or `Job is not active (current state: <state>)`.
///
/// Not replayed: the job's state moves on.
///
/// ```
/// use autobatch_core::ops::{MoveToDelayed, Operation};
/// use autobatch_core::wire::Value;
/// let op = MoveToDelayed::new("j1", 60_000).token("t1");
/// assert_eq!(op.to_body().get("delay"), Some(&Value::from(60_000_u64)));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MoveToDelayed {
    /// Job id.
    pub id: String,
    /// Ms from now.
    pub delay: u64,
    /// The lock token it was pulled with.
    pub token: Option<String>,
}

impl MoveToDelayed {
    /// Job `id` runs again `delay` ms from now.
    pub fn new(id: impl Into<String>, delay: u64) -> Self {
        MoveToDelayed {
            id: id.into(),
            delay,
            token: None,
        }
    }

    /// With the lock token the job was pulled with.
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }
}

impl Operation for MoveToDelayed {
    const NAME: &'static str = "MoveToDelayed";
    type Output = ();

    fn replay(&self) -> Replay {
        Replay::NotSafe
    }

    fn write_fields(&self, fields: &mut Fields) {
        fields
            .put("id", self.id.as_str())
            .put("delay", self.delay)
            .put_opt("token", self.token.as_deref());
    }

    fn read_reply(_: &Value) -> Result<(), ProtocolError> {
        Ok(())
    }

    fn read_request(request: &Value) -> Result<Self, CommandError> {
        Ok(MoveToDelayed {
            id: req_str(request, "id")?,
            delay: req_opt_u64(request, "delay")?.unwrap_or(0),
            token: req_opt_str(request, "token"),
        })
    }

    fn write_reply(_: &(), fields: &mut Fields) {
        write_ok(fields);
    }

    fn validate(&self) -> Result<(), ValidationError> {
        validate_id(&self.id)
    }
}

// ------------------------------------------------------------------------------ deduplication keys

/// `RemoveDeduplicationKey`: frees a deduplication key of a queue, so that the next job
/// added with it is accepted; says how many keys were removed (0 or 1).
///
/// Not replayed: a job added between the two could own the key by the second.
///
/// ```
/// use autobatch_core::ops::{Operation, RemoveDeduplicationKey};
/// use autobatch_core::wire::Value;
/// let reply = Value::map([("ok", Value::from(true)), ("data", Value::map([("count", Value::Int(1))]))]);
/// assert_eq!(RemoveDeduplicationKey::read_reply(&reply), Ok(1));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RemoveDeduplicationKey {
    /// Queue name.
    pub queue: String,
    /// The key (the `deduplication.id` job option).
    pub deduplication_id: String,
}

impl RemoveDeduplicationKey {
    /// Frees `deduplication_id` in `queue`.
    pub fn new(queue: impl Into<String>, deduplication_id: impl Into<String>) -> Self {
        RemoveDeduplicationKey {
            queue: queue.into(),
            deduplication_id: deduplication_id.into(),
        }
    }
}

impl Operation for RemoveDeduplicationKey {
    const NAME: &'static str = "RemoveDeduplicationKey";
    type Output = u64;

    fn replay(&self) -> Replay {
        Replay::NotSafe
    }

    fn write_fields(&self, fields: &mut Fields) {
        fields
            .put("queue", self.queue.as_str())
            .put("deduplicationId", self.deduplication_id.as_str());
    }

    fn read_reply(reply: &Value) -> Result<u64, ProtocolError> {
        data_field(reply, "count")?
            .as_f64()
            .map(|n| n.max(0.0) as u64)
            .ok_or(ProtocolError::BadField {
                field: "count",
                problem: "not a number",
            })
    }

    fn read_request(request: &Value) -> Result<Self, CommandError> {
        Ok(RemoveDeduplicationKey::new(
            req_queue(request)?,
            req_opt_str(request, "deduplicationId").unwrap_or_default(),
        ))
    }

    fn write_reply(count: &u64, fields: &mut Fields) {
        fields.put("data", Value::map([("count", Value::from(*count))]));
    }

    fn validate(&self) -> Result<(), ValidationError> {
        validate_queue_name(&self.queue)
    }
}

/// `RemoveJobDeduplicationKey`: frees the deduplication key a job holds; says whether it
/// held one.
///
/// Replayed: the server frees the key only while this job owns it, so a second one changes
/// nothing (and cannot free a key another job took since).
///
/// ```
/// use autobatch_core::ops::{Operation, RemoveJobDeduplicationKey};
/// use autobatch_core::wire::Value;
/// let reply = Value::map([("ok", Value::from(true)), ("data", Value::map([("removed", Value::from(true))]))]);
/// assert_eq!(RemoveJobDeduplicationKey::read_reply(&reply), Ok(true));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RemoveJobDeduplicationKey {
    /// Job id.
    pub id: String,
}

impl RemoveJobDeduplicationKey {
    /// Frees job `id`'s key.
    pub fn new(id: impl Into<String>) -> Self {
        RemoveJobDeduplicationKey { id: id.into() }
    }
}

impl Operation for RemoveJobDeduplicationKey {
    const NAME: &'static str = "RemoveJobDeduplicationKey";
    type Output = bool;

    fn replay(&self) -> Replay {
        Replay::Safe
    }

    fn write_fields(&self, fields: &mut Fields) {
        fields.put("id", self.id.as_str());
    }

    fn read_reply(reply: &Value) -> Result<bool, ProtocolError> {
        reply_bool(&reply_data(reply)?, "removed")
    }

    fn read_request(request: &Value) -> Result<Self, CommandError> {
        Ok(RemoveJobDeduplicationKey::new(req_str(request, "id")?))
    }

    fn write_reply(removed: &bool, fields: &mut Fields) {
        fields.put("data", Value::map([("removed", Value::from(*removed))]));
    }

    fn validate(&self) -> Result<(), ValidationError> {
        validate_id(&self.id)
    }
}
