//! The one waker a connection's socket is ever read with: it passes the socket's "readable"
//! on to whoever reads at the moment, a caller waiting for its answer or the pump's task.
//!
//! Why not read with the reader's own waker: the read role moves from task to caller and back
//! on every sequential add, and a socket registered with a new waker may wake the one it
//! replaces (async-io, under smol and async-std, does: it cannot tell whether the old one
//! still waits). That wake lands on the pump's task, usually on another thread: the very
//! hop the caller's own read is there to avoid. Registered with this one waker, the socket
//! never sees the reader change; moving the role is a store here.

use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Wake, Waker};

#[derive(Default)]
struct State {
    /// Who the next "readable" goes to.
    target: Option<Waker>,
    /// The socket said "readable" since the last read began: the reader may not have seen it.
    fired: bool,
}

/// A connection's read waker (see the module docs).
#[derive(Default)]
pub(crate) struct ReadRelay(Mutex<State>);

impl ReadRelay {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Each change under the lock is one field's store: consistent at any panic point.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The waker to read the socket with, the same for the connection's whole life.
    pub(crate) fn waker(self: &Arc<Self>) -> Waker {
        Waker::from(self.clone())
    }

    /// A read is about to begin: what the socket said before it, the read itself sees.
    pub(crate) fn reading(&self) {
        self.lock().fired = false;
    }

    /// Sends the next "readable" to `target`. Returns whether the socket has said
    /// "readable" since the last read began (it went to the previous target, which may no
    /// longer read: the new one must look).
    pub(crate) fn pass_to(&self, target: &Waker) -> bool {
        let mut s = self.lock();
        match &s.target {
            Some(t) if t.will_wake(target) => {}
            _ => s.target = Some(target.clone()),
        }
        s.fired
    }
}

impl Wake for ReadRelay {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let target = {
            let mut s = self.lock();
            s.fired = true;
            s.target.clone()
        };
        if let Some(t) = target {
            t.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_wake::Count;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn counter() -> (Arc<Count>, Waker) {
        let c = Arc::new(Count(AtomicUsize::new(0)));
        (c.clone(), Waker::from(c))
    }

    #[test]
    fn readable_goes_to_the_current_reader_only() {
        let relay = Arc::new(ReadRelay::default());
        let socket_side = relay.waker();
        let (task, task_waker) = counter();
        let (caller, caller_waker) = counter();
        relay.reading();
        assert!(!relay.pass_to(&caller_waker));
        socket_side.wake_by_ref();
        assert_eq!(caller.0.load(Ordering::SeqCst), 1);
        relay.reading();
        assert!(
            !relay.pass_to(&task_waker),
            "the read saw what came before it"
        );
        socket_side.wake_by_ref();
        assert_eq!(
            (
                task.0.load(Ordering::SeqCst),
                caller.0.load(Ordering::SeqCst)
            ),
            (1, 1)
        );
    }

    #[test]
    fn a_readable_after_the_last_read_is_reported_to_the_next_reader() {
        let relay = Arc::new(ReadRelay::default());
        let socket_side = relay.waker();
        let (_, task_waker) = counter();
        let (caller, caller_waker) = counter();
        relay.reading();
        relay.pass_to(&caller_waker);
        // Bytes arrive after the caller's read found none, just as its answer came.
        socket_side.wake_by_ref();
        assert_eq!(caller.0.load(Ordering::SeqCst), 1);
        assert!(
            relay.pass_to(&task_waker),
            "the task must read: the caller that was told may be gone"
        );
    }

    #[test]
    fn the_socket_always_sees_the_same_waker() {
        let relay = Arc::new(ReadRelay::default());
        assert!(relay.waker().will_wake(&relay.waker()));
    }
}
