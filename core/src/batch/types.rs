//! The values the batcher hands in and out: handles, batches, and why things happened.

use std::fmt;

/// Handle of one pushed item.
///
/// Assigned by [`Batcher::push`](super::Batcher::push) in strictly increasing order, so comparing
/// two ids tells which item was pushed first. Never reused by one batcher.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ItemId(pub(crate) u64);

/// Handle of one batch handed out by [`Batcher::poll_batch`](super::Batcher::poll_batch), to be
/// given back to [`Batcher::complete`](super::Batcher::complete).
///
/// Assigned in strictly increasing order; never reused by one batcher.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BatchId(pub(crate) u64);

/// Why a batch was flushed when it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FlushReason {
    /// Nothing was in flight: the item goes out at once, so sequential callers pay no latency.
    Idle,
    /// The waiting items reached `max_batch`.
    Size,
    /// The oldest buffered item has waited `linger`.
    Linger,
    /// A batch in flight completed while items were waiting.
    Completion,
    /// The batcher is closed: everything left goes out as fast as in-flight slots allow.
    Close,
}

impl FlushReason {
    /// Every reason, in declaration order (the order of
    /// [`BatchStats::flushes`](super::BatchStats::flushes)).
    pub const ALL: [FlushReason; 5] = [
        FlushReason::Idle,
        FlushReason::Size,
        FlushReason::Linger,
        FlushReason::Completion,
        FlushReason::Close,
    ];

    pub(crate) fn index(self) -> usize {
        match self {
            FlushReason::Idle => 0,
            FlushReason::Size => 1,
            FlushReason::Linger => 2,
            FlushReason::Completion => 3,
            FlushReason::Close => 4,
        }
    }
}

/// A group of items to send together.
///
/// Send it, then report the end of that send (whatever its outcome) with
/// [`Batcher::complete`](super::Batcher::complete) and `id`. Afterwards the emptied `items` vector
/// can be handed back with [`Batcher::recycle`](super::Batcher::recycle) to avoid an allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch<T> {
    /// Identifies this batch to [`Batcher::complete`](super::Batcher::complete).
    pub id: BatchId,
    /// What made this batch go out now.
    pub reason: FlushReason,
    /// The items, oldest first; never empty and never more than `max_batch`; their bytes never
    /// above the batcher's [byte cap](super::Batcher::with_max_batch_bytes) unless this is a
    /// single item that alone declares more.
    pub items: Vec<(ItemId, T)>,
    /// Sum of the bytes declared for these items when they were pushed.
    pub bytes: usize,
}

/// Where an accepted push went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Admission {
    /// The item is in the buffer and will go out with a batch.
    Buffered,
    /// The buffer is full and the policy is [`Backpressure`](super::OverflowPolicy::Backpressure):
    /// the item waits, in order, outside the buffer. It is still owned by the batcher, will be
    /// sent like any other item, and can be cancelled. The caller should slow down.
    Parked,
}

/// Why an item that was accepted left without being sent, as reported by
/// [`Batcher::poll_rejected`](super::Batcher::poll_rejected).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RejectReason {
    /// Dropped as one of the oldest buffered items to make room under
    /// [`OverflowPolicy::DropOldest`](super::OverflowPolicy::DropOldest)
    /// (bunqueue's "Add buffer overflow").
    Overflow,
}

impl fmt::Display for RejectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RejectReason::Overflow => f.write_str("add buffer overflow"),
        }
    }
}

/// A push that was refused. The item is handed back untouched.
///
/// `Debug` does not print the item, so the error can be logged whatever `T` is and without leaking
/// payloads; use [`PushError::into_inner`] to get it back.
#[derive(Clone, PartialEq, Eq)]
pub enum PushError<T> {
    /// The buffer is full and the policy is [`Reject`](super::OverflowPolicy::Reject).
    Rejected(T),
    /// [`Batcher::close`](super::Batcher::close) was called; no more items are taken.
    Closed(T),
    /// The item alone declares more bytes than `max_pending_bytes`, so it could never be buffered.
    TooLarge(T),
}

impl<T> PushError<T> {
    /// The refused item.
    pub fn into_inner(self) -> T {
        match self {
            PushError::Rejected(item) | PushError::Closed(item) | PushError::TooLarge(item) => item,
        }
    }

    /// A borrow of the refused item.
    pub fn item(&self) -> &T {
        match self {
            PushError::Rejected(item) | PushError::Closed(item) | PushError::TooLarge(item) => item,
        }
    }
}

impl<T> fmt::Debug for PushError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            PushError::Rejected(_) => "Rejected",
            PushError::Closed(_) => "Closed",
            PushError::TooLarge(_) => "TooLarge",
        };
        write!(f, "{name}(..)")
    }
}

impl<T> fmt::Display for PushError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PushError::Rejected(_) => "batch buffer is full",
            PushError::Closed(_) => "batcher is closed",
            PushError::TooLarge(_) => "item is larger than max_pending_bytes",
        })
    }
}

impl<T> std::error::Error for PushError<T> {}
