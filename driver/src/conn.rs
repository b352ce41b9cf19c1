//! A connection shared by its task and its callers' polls: the pump's state behind one lock.
//!
//! The task ([`PumpTask`]) takes the lock to turn; a caller's poll only ever tries it, and
//! sends its add through the inbox instead when the lock is held (see `direct.rs`), so no
//! caller waits for another, and no caller blocks its thread.
//!
//! A caller that finds the lock held may have been woken to read the socket, and cannot: on a
//! runtime with several threads, another poll holds the connection at that moment. It marks
//! the connection before it leaves, and whoever holds it reads for it once it lets go
//! ([`Conn::let_go`]); without that, the answers would wait in the socket until the task's
//! watch on the reading caller runs out.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use autobatch_core::wire::EncodedJob;

use crate::cmd::Ticket;
use crate::direct::{Direct, Handed};
use crate::pump::Pump;
use crate::reply::Reply;
use crate::runtime::Runtime;

/// One connection's pump state, shared by its task and its callers.
pub(crate) struct Conn<R: Runtime> {
    pump: Mutex<Pump<R>>,
    /// A caller found the pump held since its holder took it (see the module docs).
    missed: AtomicBool,
}

impl<R: Runtime> Conn<R> {
    /// The connection of `pump`, and the task to spawn for it.
    pub(crate) fn new(pump: Pump<R>) -> (Arc<Self>, PumpTask<R>) {
        let conn = Arc::new(Conn {
            pump: Mutex::new(pump),
            missed: AtomicBool::new(false),
        });
        (conn.clone(), PumpTask(conn))
    }

    /// The pump, unless another poll holds it right now; then that poll catches up for this
    /// one when it lets go. A panic while holding it (a bug) leaves it to the task, which
    /// ends the connection.
    fn try_pump(&self) -> Option<MutexGuard<'_, Pump<R>>> {
        if let Ok(pump) = self.pump.try_lock() {
            return Some(pump);
        }
        self.missed.store(true, Ordering::SeqCst);
        // The holder may have let go before the mark, and then never sees it: try once more.
        self.pump.try_lock().ok()
    }

    /// Lets go of the pump, then reads for every caller that found it held meanwhile. The
    /// mark is cleared only under the lock, so a mark made while another poll holds it is
    /// seen by that poll when it lets go.
    fn let_go(&self, pump: MutexGuard<'_, Pump<R>>) {
        drop(pump);
        while self.missed.load(Ordering::SeqCst) {
            let Ok(mut pump) = self.pump.try_lock() else {
                return;
            };
            self.missed.store(false, Ordering::SeqCst);
            pump.catch_up();
        }
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
        let Some(mut pump) = self.try_pump() else {
            return Err((job, reply));
        };
        let handed = pump.add_from_caller(cx, ticket, queue, job, reply);
        self.let_go(pump);
        handed
    }

    fn drive(&self, cx: &mut Context<'_>, ticket: Ticket) -> bool {
        let Some(mut pump) = self.try_pump() else {
            return false;
        };
        let answered = pump.drive_from_caller(cx, ticket);
        self.let_go(pump);
        answered
    }
}

/// The task of one connection: turns its pump whenever a caller's poll would not (timers,
/// reconnects, commands through the inbox, reads nobody else does) and ends it.
pub(crate) struct PumpTask<R: Runtime>(Arc<Conn<R>>);

impl<R: Runtime> Future for PumpTask<R> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // The task waits for the lock: a caller holds it for one turn at most.
        match self.0.pump.lock() {
            Ok(mut pump) => {
                let done = pump.poll_task(cx);
                self.0.let_go(pump);
                done
            }
            Err(poisoned) => {
                // A caller's poll panicked mid-turn: the state cannot be trusted, so the
                // connection ends and every caller still waiting resolves as closed.
                poisoned.into_inner().abandon();
                Poll::Ready(())
            }
        }
    }
}
