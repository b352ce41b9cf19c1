//! A connection shared by its task and its callers' polls: the pump's state behind one lock.
//!
//! The task ([`PumpTask`]) takes the lock to turn; a caller's poll only ever tries it, and
//! sends its add through the inbox instead when the lock is held (see `direct.rs`), so no
//! caller waits for another, and no caller blocks its thread.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use autobatch_core::wire::EncodedJob;

use crate::cmd::Ticket;
use crate::direct::{Direct, Handed};
use crate::pump::Pump;
use crate::reply::Reply;
use crate::runtime::Runtime;

/// One connection's pump state, shared by its task and its callers.
pub(crate) struct Conn<R: Runtime>(Mutex<Pump<R>>);

impl<R: Runtime> Conn<R> {
    /// The connection of `pump`, and the task to spawn for it.
    pub(crate) fn new(pump: Pump<R>) -> (Arc<Self>, PumpTask<R>) {
        let conn = Arc::new(Conn(Mutex::new(pump)));
        (conn.clone(), PumpTask(conn))
    }

    /// The pump, unless another poll holds it right now. A panic while holding it (a bug)
    /// leaves it to the task, which ends the connection.
    fn try_pump(&self) -> Option<MutexGuard<'_, Pump<R>>> {
        self.0.try_lock().ok()
    }
}

impl<R: Runtime> Direct for Conn<R> {
    fn add(
        &self,
        cx: &mut Context<'_>,
        ticket: Ticket,
        queue: &Arc<str>,
        job: EncodedJob,
        reply: Reply,
    ) -> Result<Handed, (EncodedJob, Reply)> {
        match self.try_pump() {
            Some(mut pump) => pump.add_from_caller(cx, ticket, queue, job, reply),
            None => Err((job, reply)),
        }
    }

    fn drive(&self, cx: &mut Context<'_>, ticket: Ticket) -> bool {
        self.try_pump()
            .is_some_and(|mut pump| pump.drive_from_caller(cx, ticket))
    }
}

/// The task of one connection: turns its pump whenever a caller's poll would not (timers,
/// reconnects, commands through the inbox, reads nobody else does) and ends it.
pub(crate) struct PumpTask<R: Runtime>(Arc<Conn<R>>);

impl<R: Runtime> Future for PumpTask<R> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // The task waits for the lock: a caller holds it for one turn at most.
        match self.0 .0.lock() {
            Ok(mut pump) => pump.poll_task(cx),
            Err(poisoned) => {
                // A caller's poll panicked mid-turn: the state cannot be trusted, so the
                // connection ends and every caller still waiting resolves as closed.
                poisoned.into_inner().abandon();
                Poll::Ready(())
            }
        }
    }
}
