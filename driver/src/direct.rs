//! What a caller may do to its connection from its own poll: the contract between an add's
//! future and the connection it goes out on, below both (the connection's implementation is
//! `conn.rs`, over the pump's state).
//!
//! Why callers move the connection themselves: handing an add to a task that owns the
//! connection, and its answer back, crosses threads twice on any runtime where that task and
//! the caller run apart (tokio's `multi_thread`, smol's and async-std's global executors), and
//! those two wake-ups cost more than the add's own work. Here the caller's poll takes the
//! connection for a moment (never across an await, and never by waiting for it: when another
//! poll holds it, the add goes through the pump's inbox as any other command does), gives the
//! add to the session and writes what the session says to write. Its next polls read the
//! answers while it waits, as a blocking client would, and the read role passes back to the
//! connection's task once its own answer is in. The task stays for what no caller's poll
//! would do: timers, reconnects, a worker's pulls, event streams, the end.

use std::sync::Arc;
use std::task::Context;

use autobatch_core::wire::EncodedJob;

use crate::cmd::Ticket;
use crate::reply::Reply;

/// What [`Direct::add`] did with an add it took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Handed {
    /// Given to the session, to be written with the adds made beside it: by this caller's
    /// next poll (its task is polled again once the tasks ready beside it have run), or,
    /// when another add of the same burst yielded first, by that one's.
    Yielded,
    /// Given to the session and written at once (the answer may be in already).
    Written,
}

/// A connection as its callers' polls see it.
pub(crate) trait Direct: Send + Sync {
    /// Gives the add of `ticket` to the session now. The answer comes in `reply`.
    ///
    /// While adds come one at a time (nothing else out when each comes), it is written at
    /// once, as the only thing the session has to send, and `cx` registered to read its
    /// answer. Once adds come while others are out, each yields first
    /// ([`Runtime::yield_now`](crate::Runtime::yield_now)), so that the adds its task (and
    /// the tasks queued beside it) make in the same turn leave together, written by its next
    /// [`drive`](Self::drive); a yielded add that then leaves alone turns that back off.
    ///
    /// Gives the job and its reply back when the connection is held by another poll at this
    /// moment, or is ending: the caller then sends it through the pump's inbox.
    fn add(
        &self,
        cx: &mut Context<'_>,
        ticket: Ticket,
        queue: &Arc<str>,
        job: EncodedJob,
        reply: Reply,
    ) -> Result<Handed, (EncodedJob, Reply)>;

    /// Moves the connection on from the poll of the caller waiting for `ticket`: writes what
    /// the session has to send and, while that caller's answer is out and no other caller
    /// reads, reads with `cx`, so that the socket becoming readable wakes this caller. Once
    /// its answer is in, the connection's task reads again. Returns whether the connection
    /// was moved (the answer may have come).
    ///
    /// Does nothing when another poll holds the connection: that one writes, and once it
    /// lets go it reads what the socket said meanwhile.
    fn drive(&self, cx: &mut Context<'_>, ticket: Ticket) -> bool;
}
