//! The broker's side of the protocol: reading a request, answering it.
//!
//! A client never needs these, so they stay out of its way, as rustls keeps its internals
//! behind dedicated modules: the client-side API ([`Command::encode`], [`Incoming`],
//! [`Reply::response`], [`Operation`]) is in [`wire`](super) and [`ops`](crate::ops); reading
//! requests and writing replies is here, as three traits to bring into scope (for the hot-path
//! commands and for every typed operation, [`ServeOperation`]), plus [`encode_error`] and
//! [`CommandError`]. The embedded broker, the test harness' simulated broker and the golden
//! tests use them.
//!
//! ```
//! use autobatch_core::wire::server::{DecodeCommand, EncodeResponse};
//! use autobatch_core::wire::{Command, Response, Value};
//!
//! // A request as a client sends it…
//! let mut request = Vec::new();
//! Command::GetState { id: "j1".into() }.encode(Some(&Value::from("1")), &mut request);
//! // …read in the server role, and answered.
//! let (req_id, cmd) = Command::decode(&Value::decode(&request).unwrap());
//! let cmd = cmd.unwrap();
//! let mut reply = Vec::new();
//! Response::State("waiting".into()).encode_for(&cmd, &req_id, &mut reply);
//! let reply = Value::decode(&reply).unwrap();
//! assert_eq!(reply.get("id"), Some(&Value::from("j1")));
//! assert_eq!(reply.get("reqId"), Some(&Value::from("1")));
//! ```
//!
//! [`Incoming`]: super::Incoming
//! [`Reply::response`]: super::Reply::response

mod decode;

use super::{Command, Response, Value};
use crate::ops::{Fields, Operation};

pub use super::reply::encode_error;
pub use decode::CommandError;

/// Reading a request in the server role.
pub trait DecodeCommand: Sized {
    /// Reads a request map.
    ///
    /// Returns the `reqId` (as sent, [`Value::Undefined`] when absent) alongside the outcome, so
    /// that even a refused request can be answered. Errors carry bunqueue's own messages.
    fn decode(v: &Value) -> (Value, Result<Self, CommandError>);
}

impl DecodeCommand for Command {
    fn decode(v: &Value) -> (Value, Result<Command, CommandError>) {
        decode::decode_request(v)
    }
}

/// Writing a success reply in the server role.
pub trait EncodeResponse {
    /// Appends a success reply map (no frame header), shaped as bunqueue 2.9.5 shapes it:
    /// `{ok:true, <fields>, reqId}`, with `id: undefined` where bunqueue sends it.
    fn encode(&self, req_id: &Value, out: &mut Vec<u8>);

    /// Appends the success reply to `request`, shaped exactly as bunqueue 2.9.5 shapes it.
    ///
    /// Like [`encode`](Self::encode), plus the few shapes that depend on the request rather
    /// than on the typed content: GetState and GetResult echo the request's `id`; a PULL with an
    /// `owner` always carries `token` (nil when no job came); a PULLB without an `owner`
    /// carries no `tokens` key.
    fn encode_for(&self, request: &Command, req_id: &Value, out: &mut Vec<u8>);
}

impl EncodeResponse for Response {
    fn encode(&self, req_id: &Value, out: &mut Vec<u8>) {
        self.encode_reply(req_id, out)
    }

    fn encode_for(&self, request: &Command, req_id: &Value, out: &mut Vec<u8>) {
        self.encode_reply_for(request, req_id, out)
    }
}

/// A typed operation in the server role: reading its request, writing its reply.
///
/// Every [`Operation`] of [`ops`](crate::ops) implements it, from the same declaration as its
/// client side.
///
/// ```
/// use autobatch_core::ops::{IsPaused, Operation};
/// use autobatch_core::wire::server::ServeOperation;
/// use autobatch_core::wire::Value;
/// let request = IsPaused::new("emails").to_body();
/// assert_eq!(IsPaused::read_request(&request).unwrap(), IsPaused::new("emails"));
/// let reply = IsPaused::reply_body(&true);
/// assert_eq!(reply, Value::map([("ok", Value::from(true)), ("paused", Value::from(true))]));
/// assert_eq!(IsPaused::read_reply(&reply), Ok(true));
/// ```
pub trait ServeOperation: Operation {
    /// Reads a request map (with its `cmd`), validating it as bunqueue does.
    ///
    /// # Errors
    ///
    /// [`CommandError::Invalid`] with bunqueue's own message for a field it refuses.
    fn read_request(request: &Value) -> Result<Self, CommandError>;

    /// Appends the fields of the successful reply for `output`, without `ok` and `reqId`.
    fn write_reply(output: &Self::Output, fields: &mut Fields);

    /// The whole successful reply map for `output` (`ok: true` and the fields; the caller
    /// adds `reqId`).
    fn reply_body(output: &Self::Output) -> Value {
        let mut fields = Fields::default();
        fields.put("ok", true);
        Self::write_reply(output, &mut fields);
        fields.into_value()
    }
}
