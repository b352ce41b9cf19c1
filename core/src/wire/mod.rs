//! The bunqueue 2.9.5 wire protocol, pure: framing, MessagePack values with bunqueue's number
//! rules, and typed commands and replies. The client role is here; the broker role (reading
//! requests, writing replies) is in [`server`], out of a client's way.
//!
//! ```
//! use autobatch_core::wire::server::DecodeCommand;
//! use autobatch_core::wire::{write_frame, Command, FrameDecoder, JobSpec, Value};
//!
//! // Client side: encode a PUSHB of two jobs into a frame.
//! let jobs = vec![JobSpec::new("email", Value::from("a")), JobSpec::new("email", Value::from("b"))];
//! let cmd = Command::PushB { queue: "emails".into(), jobs };
//! let mut out = Vec::new();
//! write_frame(&mut out, |buf| cmd.encode(Some(&Value::from("1")), buf)).unwrap();
//!
//! // Broker side: decode it back.
//! let mut frames = FrameDecoder::new();
//! frames.extend(&out);
//! let body = frames.next_frame().unwrap().unwrap();
//! let (req_id, decoded) = Command::decode(&Value::decode(&body).unwrap());
//! assert_eq!(req_id, Value::from("1"));
//! let Ok(Command::PushB { queue, jobs: back }) = decoded else { panic!("not a PUSHB") };
//! assert_eq!((queue.as_str(), back.len()), ("emails", 2));
//! // Like the official client, PUSHB items always carry both remove flags (false by default).
//! assert_eq!(back[0].opts.remove_on_complete, Some(false));
//! ```

mod child_failure;
mod codec;
mod command;
mod encode;
mod encode_serde;
mod encoded;
mod error;
mod frame;
mod job;
mod options;
mod push;
mod reply;
pub mod server;
mod size;
mod value;
mod value_serde;

pub use child_failure::{ChildFailure, ChildFailures};
pub use codec::{Encoder, DECODE_BUDGET_FACTOR, DECODE_BUDGET_FLOOR, MAX_DEPTH};
pub(crate) use codec::{PushIds, PushReply};
pub use command::{Command, CommandKind, PullArgs};
pub use encoded::EncodedJob;
pub(crate) use encoded::{
    encode_push as encode_push_encoded, encode_pushb as encode_pushb_encoded,
};
pub use error::{DecodeError, FrameError, ProtocolError};
pub use frame::{write_frame, FrameDecoder, MAX_FRAME};
pub(crate) use job::{check_group_id, millis};
pub use job::{
    validate_data, validate_queue_name, Backoff, Debounce, Dedup, Job, JobOptions, JobSpec,
    JobState, Repeat, ValidationError, MAX_ATTEMPTS, MAX_DATA_JSON_LEN, MAX_DELAY_MS,
    MAX_GROUP_PRIORITY, MAX_NAME_CHARS, MAX_PRIORITY, MAX_SAFE_INTEGER, MAX_TIMEOUT_MS,
};
pub use push::pushb_jobs_budget;
pub use reply::{Incoming, JobCounts, Reply, Response};
pub(crate) use value::js_number;
pub use value::{DataError, RawValue, Value, JS_INT_MAX, JS_INT_MIN};
