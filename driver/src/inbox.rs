//! The channel from callers to a pump: a locked `Vec` that the pump swaps out whole, and a
//! waker stored only while the pump sleeps on an empty inbox.
//!
//! Why not `futures_channel::mpsc`: it allocates a node per message and the pump pops them one
//! at a time, registering its waker after each pop; while the pump then works (reads, session,
//! writes), every caller's send wakes it again. On a runtime where callers and pump run on
//! different threads (tokio's `multi_thread`, smol's and async-std's global executors), each
//! of those wake-ups is a task rescheduled and often a thread unparked: that was most of the
//! extra cost of an add there. Here a send wakes the pump only on the transition from "pump
//! asleep, inbox empty" to "one command waiting": once per burst, whatever its size, and never
//! while the pump is running (it looks at the inbox again before it sleeps).

use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Waker;

use crate::cmd::Cmd;
use crate::reply::{self, Board, Outcome, Reply};

struct State {
    cmds: Vec<Cmd>,
    /// The pump's waker, present only while the pump sleeps with the inbox seen empty.
    waker: Option<Waker>,
    /// Live [`Sender`]s: at zero (and nothing queued) the pump knows every handle is gone.
    senders: usize,
    /// The pump has ended: sends fail (their command comes back to the caller).
    closed: bool,
}

struct Inner {
    state: Mutex<State>,
    /// Where the pump answers the callers' operations (the other direction).
    replies: Arc<Board>,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves the state consistent (every change is one
        // push, swap or counter step), so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A caller's end; cloning it counts one more sender.
pub(crate) struct Sender(Arc<Inner>);

/// The pump's end.
pub(crate) struct Receiver(Arc<Inner>);

/// A send to a pump that has ended (the command is dropped: nobody would answer it).
#[derive(Debug)]
pub(crate) struct Closed;

/// A new, open inbox.
pub(crate) fn inbox() -> (Sender, Receiver) {
    let inner = Arc::new(Inner {
        state: Mutex::new(State {
            cmds: Vec::new(),
            waker: None,
            senders: 1,
            closed: false,
        }),
        replies: Arc::default(),
    });
    (Sender(inner.clone()), Receiver(inner))
}

impl Sender {
    /// A new operation's reply slot: the [`Reply`] goes to the pump inside its command, the
    /// caller awaits the [`Outcome`].
    pub(crate) fn reply_slot(&self) -> (Reply, Outcome) {
        reply::channel(&self.0.replies)
    }

    /// [`reply_slot`](Self::reply_slot) for a caller polled with `waker`: the slot holds the
    /// waker from the start, so the caller need not reach the slot again before its answer.
    pub(crate) fn reply_slot_waking(&self, waker: &Waker) -> (Reply, Outcome) {
        reply::channel_waking(&self.0.replies, waker)
    }

    /// Queues `cmd` for the pump, waking it if it sleeps. Fails once the pump has ended.
    pub(crate) fn unbounded_send(&self, cmd: Cmd) -> Result<(), Closed> {
        let waker = {
            let mut s = self.0.lock();
            if s.closed {
                // Dropped outside the lock: dropping its reply sender wakes the caller.
                drop(s);
                drop(cmd);
                return Err(Closed);
            }
            s.cmds.push(cmd);
            s.waker.take()
        };
        // Woken outside the lock: the pump's first act is to take it.
        if let Some(w) = waker {
            w.wake();
        }
        Ok(())
    }
}

impl std::fmt::Debug for Sender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.0.lock();
        f.debug_struct("Sender")
            .field("queued", &s.cmds.len())
            .field("closed", &s.closed)
            .finish()
    }
}

impl Clone for Sender {
    fn clone(&self) -> Self {
        self.0.lock().senders += 1;
        Sender(self.0.clone())
    }
}

impl Drop for Sender {
    fn drop(&mut self) {
        let waker = {
            let mut s = self.0.lock();
            s.senders -= 1;
            if s.senders == 0 {
                s.waker.take()
            } else {
                None
            }
        };
        // The last handle is gone: the pump must wake to finish and stop.
        if let Some(w) = waker {
            w.wake();
        }
    }
}

impl Receiver {
    /// Moves every queued command to the end of `out` (one lock, no per-command work).
    /// Returns `false` once every sender is gone and nothing more can come.
    pub(crate) fn drain(&mut self, out: &mut Vec<Cmd>) -> bool {
        let mut s = self.0.lock();
        if out.is_empty() {
            // Swapping keeps both vectors' capacity: no allocation in the steady state.
            std::mem::swap(&mut s.cmds, out);
        } else {
            out.append(&mut s.cmds);
        }
        s.senders > 0
    }

    /// Goes to sleep on the inbox: stores `waker` to be woken by the next send, unless
    /// commands have arrived (or the last sender went) since the last [`drain`](Self::drain).
    /// Returns whether it sleeps; `false` means: drain again.
    pub(crate) fn park(&mut self, waker: &Waker) -> bool {
        let mut s = self.0.lock();
        if !s.cmds.is_empty() || s.senders == 0 {
            return false;
        }
        match &mut s.waker {
            Some(w) if w.will_wake(waker) => {}
            slot => *slot = Some(waker.clone()),
        }
        true
    }

    /// Ends the inbox: later sends fail, and what is still queued is dropped (its callers see
    /// their reply channel closed).
    pub(crate) fn close(&mut self) {
        let dropped = {
            let mut s = self.0.lock();
            s.closed = true;
            s.waker = None;
            std::mem::take(&mut s.cmds)
        };
        // Dropped outside the lock: dropping a reply sender wakes its caller.
        drop(dropped);
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_wake::Count;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn stats() -> Cmd {
        Cmd::Stats(futures_channel::oneshot::channel().0)
    }

    #[test]
    fn a_burst_wakes_a_sleeping_pump_once_and_a_running_one_never() {
        let (tx, mut rx) = inbox();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut got = Vec::new();
        assert!(rx.drain(&mut got));
        assert!(got.is_empty());
        // Running (not parked): sends do not wake.
        tx.unbounded_send(stats()).unwrap();
        assert_eq!(count.0.load(Ordering::SeqCst), 0);
        // Something arrived since the drain: parking refuses.
        assert!(!rx.park(&waker));
        assert!(rx.drain(&mut got));
        assert_eq!(got.len(), 1);
        got.clear();
        // Asleep: the first send of a burst wakes, the rest do not.
        assert!(rx.park(&waker));
        for _ in 0..100 {
            tx.unbounded_send(stats()).unwrap();
        }
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert!(rx.drain(&mut got));
        assert_eq!(got.len(), 100, "one drain takes the whole burst");
        tx.unbounded_send(stats()).unwrap();
        assert_eq!(
            count.0.load(Ordering::SeqCst),
            1,
            "a send to a running pump wakes nothing"
        );
    }

    #[test]
    fn the_last_sender_going_wakes_the_pump_and_ends_the_inbox() {
        let (tx, mut rx) = inbox();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let tx2 = tx.clone();
        assert!(rx.park(&waker));
        drop(tx);
        assert_eq!(
            count.0.load(Ordering::SeqCst),
            0,
            "one sender is still there"
        );
        tx2.unbounded_send(stats()).unwrap();
        drop(tx2);
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        let mut got = Vec::new();
        assert!(!rx.drain(&mut got), "no sender left");
        assert_eq!(got.len(), 1, "what was sent before is still delivered");
        assert!(
            !rx.park(&waker),
            "nothing can wake it any more: it must not sleep"
        );
    }

    #[test]
    fn sends_after_close_fail_and_queued_replies_are_dropped() {
        let (tx, mut rx) = inbox();
        let (reply, mut answer) = futures_channel::oneshot::channel();
        tx.unbounded_send(Cmd::Stats(reply)).unwrap();
        rx.close();
        assert!(matches!(
            answer.try_recv(),
            Err(futures_channel::oneshot::Canceled)
        ));
        assert!(tx.unbounded_send(stats()).is_err());
    }

    #[test]
    fn a_pump_dropped_without_closing_refuses_sends_and_drops_what_was_queued() {
        let (tx, rx) = inbox();
        let (reply, mut answer) = futures_channel::oneshot::channel();
        tx.unbounded_send(Cmd::Stats(reply)).unwrap();
        drop(rx);
        assert!(matches!(
            answer.try_recv(),
            Err(futures_channel::oneshot::Canceled)
        ));
        assert!(tx.unbounded_send(stats()).is_err());
    }
}
