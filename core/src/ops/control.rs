//! Queue control: pause, resume, drain, clean, obliterate, and the per-job moves (promote,
//! retry, change priority or delay, discard, cancel, remove).

use crate::session::Replay;
use crate::wire::server::CommandError;
use crate::wire::{validate_queue_name, ProtocolError, ValidationError, Value};

use super::read::{reply_bool, req_queue};
use super::{Fields, Operation};

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
