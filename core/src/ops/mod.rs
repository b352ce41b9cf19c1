//! Typed operations: every bunqueue command beyond the hot path (adds, pulls, acks), each a
//! request struct with its typed reply, in both roles.
//!
//! The hot path lives in [`wire::Command`](crate::wire::Command), where every byte counts and
//! the session batches it. The rest of bunqueue's ~100 commands (lookups, queue control, the
//! dead-letter queue, schedulers, limits, logs, flows) are rare, small and many: each is a plain
//! struct implementing [`Operation`], which says
//!
//! * what its request carries ([`Operation::write_fields`]) and, in the server role, how to
//!   read it back ([`ServeOperation::read_request`](crate::wire::server::ServeOperation::read_request));
//! * what a successful reply yields ([`Operation::read_reply`]) and, in the server role, how
//!   to write it ([`ServeOperation::write_reply`](crate::wire::server::ServeOperation::write_reply));
//! * whether it may be written again after a lost connection ([`Operation::REPLAY`]);
//! * what is wrong with it before anything is sent ([`Operation::validate`]).
//!
//! An operation travels as a [`Command::Other`] through
//! [`Session::request_raw`](crate::session::Session::request_raw), so it works in every
//! runtime and in a custom event loop alike:
//!
//! ```
//! use std::time::Instant;
//! use autobatch_core::ops::{self, Operation};
//! use autobatch_core::session::{Event, Session, SessionConfig};
//! use autobatch_core::wire::{Response, Value};
//!
//! let now = Instant::now();
//! let mut s = Session::new(SessionConfig::default(), now).unwrap();
//! while s.poll_event().is_some() {} // Connect
//! s.handle_connected(now);
//! let pause = ops::Pause::new("emails");
//! pause.validate().unwrap();
//! let op = s.request_raw(now, pause.to_command(), pause.replay()).unwrap();
//! # let _ = op;
//! // ... later, the reply to it arrives as Event::Done with Response::Other(body):
//! let body = Value::map([("ok", Value::from(true))]);
//! assert_eq!(ops::Pause::read_reply(&body), Ok(()));
//! ```
//!
//! Each domain owns one module, where each command is one declaration (`op!`): its
//! struct, fields and wire keys, constructor and setters, reply shape, replay safety and
//! checks. The server role ([`ServeOperation`](crate::wire::server::ServeOperation)) comes
//! from the same declaration and is kept apart in [`wire::server`](crate::wire::server).

use crate::session::Replay;
use crate::wire::{Command, ProtocolError, ValidationError, Value};

pub(crate) mod decl;
pub(crate) mod read;

mod control;
mod cron;
mod dlq;
mod events;
mod flow;
mod job;
mod limits;
mod lookup;
mod worker;

pub use control::*;
pub use cron::*;
pub use dlq::*;
pub use events::*;
pub use flow::*;
pub use job::*;
pub use limits::*;
pub use lookup::*;
pub use worker::*;

/// One bunqueue command and its reply, typed: the client's view.
///
/// Implementors are plain request structs (`#[non_exhaustive]`, built with `new` and
/// setters) whose fields are the command's own; see the [module docs](self) for how one is
/// sent. The server role is [`ServeOperation`](crate::wire::server::ServeOperation).
pub trait Operation: Sized {
    /// The command's wire name (`cmd`), case-sensitive as the server matches it.
    const NAME: &'static str;

    /// Whether the request may be written again on a new connection after the one it was
    /// written on was lost before its reply: [`Replay::Safe`] for reads and for changes that
    /// are idempotent, [`Replay::NotSafe`] for everything else.
    const REPLAY: Replay;

    /// What a successful reply yields.
    type Output;

    /// This request's replay safety: [`REPLAY`](Self::REPLAY), unless its fields decide.
    fn replay(&self) -> Replay {
        Self::REPLAY
    }

    /// Appends the request's fields, without `cmd` and `reqId`.
    fn write_fields(&self, fields: &mut Fields);

    /// Reads the body of a successful (`ok: true`) reply.
    ///
    /// # Errors
    ///
    /// [`ProtocolError::BadField`] when the reply lacks what the command promises.
    fn read_reply(reply: &Value) -> Result<Self::Output, ProtocolError>;

    /// Checks the request before it is sent, with the server's own message and the field's
    /// name, so that a bad request fails locally and at once. The default accepts anything.
    ///
    /// # Errors
    ///
    /// The first field the server would refuse.
    fn validate(&self) -> Result<(), ValidationError> {
        Ok(())
    }

    /// The whole request map: `cmd` and the fields.
    fn to_body(&self) -> Value {
        let mut fields = Fields::with_cmd(Self::NAME);
        self.write_fields(&mut fields);
        fields.into_value()
    }

    /// The request as a [`Command::Other`], ready for
    /// [`Session::request_raw`](crate::session::Session::request_raw) with
    /// [`replay`](Self::replay).
    fn to_command(&self) -> Command {
        Command::Other {
            cmd: Self::NAME.to_owned(),
            body: self.to_body(),
        }
    }
}

/// The fields of a request or reply map, in order; absent optional fields are left out, as the
/// official client leaves out `undefined` ones.
///
/// ```
/// use autobatch_core::ops::Fields;
/// use autobatch_core::wire::Value;
/// let mut f = Fields::default();
/// f.put("queue", "emails").put_opt("limit", None::<i64>).put_opt("offset", Some(10_i64));
/// assert_eq!(f.into_value(), Value::map([("queue", Value::from("emails")), ("offset", Value::from(10_i64))]));
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Fields(Vec<(Value, Value)>);

impl Fields {
    fn with_cmd(name: &str) -> Fields {
        let mut f = Fields::default();
        f.put("cmd", name);
        f
    }

    /// Appends `key: value`.
    pub fn put(&mut self, key: &str, value: impl Into<Value>) -> &mut Self {
        self.0.push((Value::from(key), value.into()));
        self
    }

    /// Appends `key: value` when there is a value; leaves the key out otherwise.
    pub fn put_opt<V: Into<Value>>(&mut self, key: &str, value: Option<V>) -> &mut Self {
        if let Some(v) = value {
            self.put(key, v);
        }
        self
    }

    /// The map.
    pub fn into_value(self) -> Value {
        Value::Map(self.0)
    }
}
