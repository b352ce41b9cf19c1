//! Errors of the wire layer, one enum per stage: framing, MessagePack decoding, and the typed
//! reading of a command or reply.

/// A MessagePack body that could not be decoded. The frame was consumed whole, so the stream
/// stays usable: the server answers `"Invalid command format"` and keeps the connection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The value ends before its announced length (or a header announces more than remains).
    #[error("truncated MessagePack value at byte {at}")]
    Truncated {
        /// Offset in the body where more bytes were needed.
        at: usize,
    },
    /// `0xc1`, the byte MessagePack never uses.
    #[error("reserved byte 0xc1 at byte {at}")]
    ReservedByte {
        /// Offset of the byte.
        at: usize,
    },
    /// A frame must hold exactly one value.
    #[error("{extra} trailing bytes after the value")]
    TrailingBytes {
        /// How many bytes were left.
        extra: usize,
    },
    /// Nesting deeper than [`MAX_DEPTH`](super::codec::MAX_DEPTH).
    #[error("nesting deeper than {limit} levels")]
    TooDeep {
        /// The limit.
        limit: usize,
    },
    /// Decoding would allocate more than the budget for a frame of this length
    /// ([`DECODE_BUDGET_FACTOR`](super::codec::DECODE_BUDGET_FACTOR) × its length +
    /// [`DECODE_BUDGET_FLOOR`](super::codec::DECODE_BUDGET_FLOOR)): a frame of many tiny
    /// items, nothing bunqueue's clients send. Refused before the memory is taken.
    #[error("a frame of {frame_len} bytes would take too much memory to decode")]
    TooExpensive {
        /// The frame's length in bytes.
        frame_len: usize,
    },
}

/// A framing violation: the 4-byte length header itself is unacceptable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// The header announces more than the 64 MiB maximum. Fatal: the stream cannot be resynced
    /// (bunqueue answers once with `"Frame too large: …"` and closes).
    #[error("Frame too large: {len} bytes exceeds maximum {max}")]
    TooLarge {
        /// Announced length.
        len: usize,
        /// The maximum.
        max: usize,
    },
    /// A zero-length frame. Not fatal: the empty frame is consumed and the stream goes on
    /// (bunqueue answers `"Invalid command format"`).
    #[error("zero-length frame")]
    Empty,
}

impl FrameError {
    /// Whether the byte stream is unusable after this error and the connection must close.
    pub fn is_fatal(&self) -> bool {
        matches!(self, FrameError::TooLarge { .. })
    }
}

/// A decoded value that is not the command or reply it should be.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolError {
    /// The body is not a map with a string `cmd` (bunqueue: `"Invalid command"`).
    #[error("Invalid command")]
    NotACommand,
    /// A field is missing or has the wrong type.
    #[error("field `{field}`: {problem}")]
    BadField {
        /// The field's wire name.
        field: &'static str,
        /// What was wrong with it.
        problem: &'static str,
    },
    /// A reply frame that is not a map with a boolean `ok` (and not an event frame).
    #[error("reply is not a map with a boolean `ok`")]
    NotAReply,
    /// The body decoded to nil (or `undefined`): bunqueue treats a nullish message like an
    /// undecodable one and answers `"Invalid command format"`, not `"Invalid command"`.
    #[error("Invalid command format")]
    InvalidFormat,
}
