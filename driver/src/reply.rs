//! Answers from a pump to its callers: one slot per operation in a table the link's callers
//! and its pump share, reused from one operation to the next.
//!
//! Why not `futures_channel::oneshot`: it allocates its shared state per operation, and with
//! a wave of adds out at once those allocations come and go in bursts that glibc's malloc
//! serves slowly (a few hundred instructions per allocation and free, most of them in
//! consolidating its bins). Here a slot is an index into a `Vec` that grows to the most
//! operations ever out at once and is given back when they are all answered; taking and
//! filling a slot is one uncontended lock each, as a oneshot's are.
//!
//! The two ends keep the oneshot's contract: dropping the [`Reply`] unanswered resolves the
//! [`Outcome`] with [`Canceled`] (the pump dropped the operation, the caller reports it
//! closed), and dropping the [`Outcome`] first makes the answer go nowhere. A slot is free
//! again once both ends are done with it, whichever finishes last.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use autobatch_core::wire::Response;
use autobatch_core::Error;

/// What a caller awaits: the operation's result.
pub(crate) type Answer = Result<Response, Error>;

/// Above this many slots, a table whose slots are all free again is shrunk back to it: a
/// burst of a million adds does not keep its million slots for the client's lifetime.
const KEPT_SLOTS: usize = 1024;

/// The pump dropped the operation without answering it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Canceled;

enum Slot {
    Free,
    /// Asked and not yet answered, with the caller's waker once it has polled.
    Waiting(Option<Waker>),
    Answered(Answer),
    /// The pump dropped the operation unanswered.
    Unanswered,
    /// The caller stopped waiting: the slot is free once the pump is done with it.
    Abandoned,
}

#[derive(Default)]
struct Slots {
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// Slots not free.
    live: usize,
}

impl Slots {
    fn take(&mut self, waker: Option<Waker>) -> u32 {
        self.live += 1;
        match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = Slot::Waiting(waker);
                i
            }
            None => {
                let i = u32::try_from(self.slots.len()).expect("fewer than 2^32 operations out");
                self.slots.push(Slot::Waiting(waker));
                i
            }
        }
    }

    /// Frees slot `i`, returning what it held (dropped by the caller, outside the lock).
    fn release(&mut self, i: u32) -> Slot {
        let held = std::mem::replace(&mut self.slots[i as usize], Slot::Free);
        self.live -= 1;
        if self.live == 0 && self.slots.len() > KEPT_SLOTS {
            self.slots.clear();
            self.slots.shrink_to(KEPT_SLOTS);
            self.free.clear();
            self.free.shrink_to(KEPT_SLOTS);
        } else {
            self.free.push(i);
        }
        held
    }
}

/// One link's reply slots, shared by its callers and its pump.
#[derive(Default)]
pub(crate) struct Board(Mutex<Slots>);

impl Board {
    fn lock(&self) -> MutexGuard<'_, Slots> {
        // Every change under the lock is a single slot's state or a push/pop, consistent at
        // any panic point, so a poisoned lock is still usable.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl std::fmt::Debug for Board {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.lock();
        f.debug_struct("Board")
            .field("slots", &s.slots.len())
            .field("live", &s.live)
            .finish()
    }
}

/// A new operation's two ends: the pump answers through the [`Reply`], the caller awaits the
/// [`Outcome`].
pub(crate) fn channel(board: &Arc<Board>) -> (Reply, Outcome) {
    ends(board, board.lock().take(None))
}

/// [`channel`] for a caller polled with `waker`, left in the slot from the start.
pub(crate) fn channel_waking(board: &Arc<Board>, waker: &Waker) -> (Reply, Outcome) {
    ends(board, board.lock().take(Some(waker.clone())))
}

fn ends(board: &Arc<Board>, slot: u32) -> (Reply, Outcome) {
    (
        Reply {
            board: board.clone(),
            slot,
            sent: false,
        },
        Outcome {
            board: board.clone(),
            slot,
            done: false,
        },
    )
}

/// The pump's end of one operation.
pub(crate) struct Reply {
    board: Arc<Board>,
    slot: u32,
    sent: bool,
}

impl Reply {
    /// Answers the operation; gives the answer back if the caller has stopped waiting.
    pub(crate) fn send(mut self, answer: Answer) -> Result<(), Answer> {
        self.sent = true;
        match self.settle(Some(answer), true) {
            None => Ok(()),
            Some(refused) => Err(refused),
        }
    }

    /// [`send`](Self::send) without waking the caller: for a caller whose own poll is
    /// delivering the answer, and which looks at its slot right after (a wake would only
    /// poll its task once more for nothing).
    pub(crate) fn send_quiet(mut self, answer: Answer) -> Result<(), Answer> {
        self.sent = true;
        match self.settle(Some(answer), false) {
            None => Ok(()),
            Some(refused) => Err(refused),
        }
    }

    /// Leaves the answer (or, with `None`, the news that there is none) in the slot and
    /// wakes the caller (if `wake`), if it still waits; otherwise frees the slot (both ends
    /// are done now) and gives the answer back.
    fn settle(&self, answer: Option<Answer>, wake: bool) -> Option<Answer> {
        let mut s = self.board.lock();
        let slot = &mut s.slots[self.slot as usize];
        if let Slot::Waiting(waker) = slot {
            let waker = waker.take();
            *slot = answer.map_or(Slot::Unanswered, Slot::Answered);
            drop(s);
            match waker {
                Some(w) if wake => w.wake(),
                // Dropped outside the lock.
                w => drop(w),
            }
            None
        } else {
            s.release(self.slot);
            answer
        }
    }
}

impl Drop for Reply {
    fn drop(&mut self) {
        if !self.sent {
            self.settle(None, true);
        }
    }
}

impl std::fmt::Debug for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reply").field("slot", &self.slot).finish()
    }
}

/// The caller's end of one operation: resolves to its answer, or to [`Canceled`] if the pump
/// dropped it. Dropping it unresolved lets the answer go nowhere.
pub(crate) struct Outcome {
    board: Arc<Board>,
    slot: u32,
    /// Resolved: the slot stops being this outcome's.
    done: bool,
}

impl Future for Outcome {
    type Output = Result<Answer, Canceled>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(Err(Canceled));
        }
        let mut s = this.board.lock();
        match &mut s.slots[this.slot as usize] {
            Slot::Waiting(waker) => {
                match waker {
                    Some(w) if w.will_wake(cx.waker()) => {}
                    w => *w = Some(cx.waker().clone()),
                }
                Poll::Pending
            }
            _ => {
                let held = s.release(this.slot);
                drop(s);
                this.done = true;
                Poll::Ready(match held {
                    Slot::Answered(answer) => Ok(answer),
                    _ => Err(Canceled),
                })
            }
        }
    }
}

impl Drop for Outcome {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let held = {
            let mut s = self.board.lock();
            let slot = &mut s.slots[self.slot as usize];
            if let Slot::Waiting(_) = slot {
                *slot = Slot::Abandoned;
                None
            } else {
                Some(s.release(self.slot))
            }
        };
        // An answer nobody will read, dropped outside the lock.
        drop(held);
    }
}

impl std::fmt::Debug for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outcome")
            .field("slot", &self.slot)
            .field("done", &self.done)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_wake::Count;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    fn poll(o: &mut Outcome, waker: &Waker) -> Poll<Result<Answer, Canceled>> {
        Pin::new(o).poll(&mut Context::from_waker(waker))
    }

    fn counter() -> (Arc<Count>, Waker) {
        let c = Arc::new(Count(AtomicUsize::new(0)));
        (c.clone(), Waker::from(c))
    }

    /// Parks the thread until `o` resolves.
    fn block_on(mut o: Outcome) -> Result<Answer, Canceled> {
        struct Unpark(std::thread::Thread);
        impl Wake for Unpark {
            fn wake(self: Arc<Self>) {
                self.0.unpark();
            }
        }
        let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
        loop {
            match poll(&mut o, &waker) {
                Poll::Ready(r) => return r,
                Poll::Pending => std::thread::park(),
            }
        }
    }

    fn live(board: &Board) -> (usize, usize) {
        let s = board.lock();
        (s.live, s.slots.len())
    }

    #[test]
    fn an_answer_wakes_the_waiting_caller_once_and_frees_the_slot() {
        let board = Arc::new(Board::default());
        let (reply, mut outcome) = channel(&board);
        let (count, waker) = counter();
        assert!(poll(&mut outcome, &waker).is_pending());
        assert!(poll(&mut outcome, &waker).is_pending());
        assert_eq!(count.0.load(Ordering::SeqCst), 0);
        assert!(reply.send(Ok(Response::Pushed("7".into()))).is_ok());
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert_eq!(live(&board), (1, 1));
        match poll(&mut outcome, &waker) {
            Poll::Ready(Ok(Ok(Response::Pushed(id)))) => assert_eq!(id, "7"),
            other => panic!("{other:?}"),
        }
        assert_eq!(live(&board), (0, 1));
        // Resolved once: polling again does not touch the (reusable) slot.
        assert!(matches!(
            poll(&mut outcome, &waker),
            Poll::Ready(Err(Canceled))
        ));
        let (_r2, _o2) = channel(&board);
        assert_eq!(live(&board), (1, 1), "the freed slot is reused");
    }

    #[test]
    fn an_answer_before_the_first_poll_is_kept() {
        let board = Arc::new(Board::default());
        let (reply, mut outcome) = channel(&board);
        reply.send(Err(Error::Closed)).unwrap();
        let (_, waker) = counter();
        assert!(matches!(
            poll(&mut outcome, &waker),
            Poll::Ready(Ok(Err(Error::Closed)))
        ));
    }

    #[test]
    fn a_reply_dropped_unanswered_cancels_and_wakes_the_caller() {
        let board = Arc::new(Board::default());
        let (reply, mut outcome) = channel(&board);
        let (count, waker) = counter();
        assert!(poll(&mut outcome, &waker).is_pending());
        drop(reply);
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert!(matches!(
            poll(&mut outcome, &waker),
            Poll::Ready(Err(Canceled))
        ));
        assert_eq!(live(&board), (0, 1));
    }

    #[test]
    fn a_caller_that_stops_waiting_gets_its_answer_refused_and_the_slot_back() {
        let board = Arc::new(Board::default());
        let (reply, outcome) = channel(&board);
        drop(outcome);
        assert_eq!(live(&board), (1, 1), "the pump still holds it");
        let refused = reply.send(Ok(Response::Pushed("1".into())));
        assert!(matches!(refused, Err(Ok(Response::Pushed(_)))));
        assert_eq!(live(&board), (0, 1));

        // Either order, and for an unanswered drop too.
        let (reply, outcome) = channel(&board);
        drop(reply);
        drop(outcome);
        let (reply, outcome) = channel(&board);
        drop(outcome);
        drop(reply);
        // Answered, then the caller drops without reading it.
        let (reply, outcome) = channel(&board);
        reply.send(Err(Error::Closed)).unwrap();
        drop(outcome);
        assert_eq!(
            live(&board),
            (0, 1),
            "every slot is free again, and only one was needed"
        );
    }

    #[test]
    fn a_burst_grows_the_table_and_an_idle_table_shrinks_back() {
        let board = Arc::new(Board::default());
        let ends: Vec<_> = (0..KEPT_SLOTS * 3).map(|_| channel(&board)).collect();
        assert_eq!(live(&board), (KEPT_SLOTS * 3, KEPT_SLOTS * 3));
        let (_, waker) = counter();
        for (i, (reply, mut outcome)) in ends.into_iter().enumerate() {
            reply.send(Ok(Response::Pushed(i.to_string()))).unwrap();
            match poll(&mut outcome, &waker) {
                Poll::Ready(Ok(Ok(Response::Pushed(id)))) => assert_eq!(id, i.to_string()),
                other => panic!("slot {i}: {other:?}"),
            }
        }
        let s = board.lock();
        assert_eq!((s.live, s.slots.len()), (0, 0));
        assert!(s.slots.capacity() <= KEPT_SLOTS && s.free.capacity() <= KEPT_SLOTS);
    }

    #[test]
    fn a_table_of_exactly_the_kept_slots_is_kept_whole() {
        let board = Arc::new(Board::default());
        let ends: Vec<_> = (0..KEPT_SLOTS).map(|_| channel(&board)).collect();
        drop(ends);
        assert_eq!(live(&board), (0, KEPT_SLOTS), "only a larger table shrinks");
    }

    #[test]
    fn outcomes_from_many_threads_each_get_their_own_answer() {
        let board = Arc::new(Board::default());
        let mut pending = Vec::new();
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let ends: Vec<_> = (0..500).map(|_| channel(&board)).collect();
                let (replies, outcomes): (Vec<_>, Vec<_>) = ends.into_iter().unzip();
                pending.push(replies);
                std::thread::spawn(move || {
                    for (i, o) in outcomes.into_iter().enumerate() {
                        match block_on(o) {
                            Ok(Ok(Response::Pushed(id))) => assert_eq!(id, format!("{t}-{i}")),
                            other => panic!("{other:?}"),
                        }
                    }
                })
            })
            .collect();
        for (t, replies) in pending.into_iter().enumerate() {
            for (i, r) in replies.into_iter().enumerate() {
                r.send(Ok(Response::Pushed(format!("{t}-{i}")))).unwrap();
            }
        }
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(live(&board).0, 0);
    }
}
