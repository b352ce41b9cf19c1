//! The send queue: commands waiting to be written, in order, with their deadlines indexed so
//! the next one is found in O(log n) however long the queue grows.

use std::collections::{BTreeSet, HashSet, VecDeque};
use std::time::Instant;

use super::request::Request;

/// A request waiting to be written, or written and waiting for its reply. `T` is the clock's
/// instant type: the session's `Instant`, or plain numbers in tests (core never reads a clock).
#[derive(Debug)]
pub(super) struct Queued<T = Instant> {
    pub(super) req: Request,
    pub(super) deadline: T,
    /// Written at least once (a re-send waiting in the queue may already have been applied).
    pub(super) written: bool,
}

/// A FIFO of [`Queued`] whose earliest deadline is known without scanning it.
#[derive(Debug)]
pub(super) struct SendQueue<T = Instant> {
    /// `(key, entry)` in send order.
    items: VecDeque<(u64, Queued<T>)>,
    /// `(deadline, key)` of every entry of `items`.
    deadlines: BTreeSet<(T, u64)>,
    next_key: u64,
    /// Entries visited by walks over `items` (a cancel, expiries, an Auth failure): the work
    /// that grows with the queue, counted so tests can see where it happens.
    walked: u64,
}

impl<T> Default for SendQueue<T> {
    fn default() -> Self {
        SendQueue {
            items: VecDeque::new(),
            deadlines: BTreeSet::new(),
            next_key: 0,
            walked: 0,
        }
    }
}

impl<T: Ord + Copy> SendQueue<T> {
    fn key(&mut self, q: &Queued<T>) -> u64 {
        self.next_key += 1;
        self.deadlines.insert((q.deadline, self.next_key));
        self.next_key
    }

    pub(super) fn push_back(&mut self, q: Queued<T>) {
        let key = self.key(&q);
        self.items.push_back((key, q));
    }

    pub(super) fn push_front(&mut self, q: Queued<T>) {
        let key = self.key(&q);
        self.items.push_front((key, q));
    }

    pub(super) fn front(&self) -> Option<&Queued<T>> {
        self.items.front().map(|(_, q)| q)
    }

    pub(super) fn pop_front(&mut self) -> Option<Queued<T>> {
        let (key, q) = self.items.pop_front()?;
        self.deadlines.remove(&(q.deadline, key));
        Some(q)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.items.len()
    }

    /// The earliest deadline in the queue: O(log n), no walk.
    pub(super) fn next_deadline(&self) -> Option<T> {
        self.deadlines.first().map(|(d, _)| *d)
    }

    /// Removes and returns, in queue order, every entry whose deadline is at or before `now`.
    /// Walks the queue only when at least one is due.
    pub(super) fn take_expired(&mut self, now: T) -> Vec<Queued<T>> {
        let mut due = HashSet::new();
        while let Some(&(d, key)) = self.deadlines.first() {
            if d > now {
                break;
            }
            self.deadlines.pop_first();
            due.insert(key);
        }
        if due.is_empty() {
            return Vec::new();
        }
        self.walked += self.items.len() as u64;
        let (late, keep): (VecDeque<_>, VecDeque<_>) =
            self.items.drain(..).partition(|(k, _)| due.contains(k));
        self.items = keep;
        late.into_iter().map(|(_, q)| q).collect()
    }

    /// Removes and returns the first entry that `pred` picks.
    pub(super) fn remove_first(&mut self, pred: impl Fn(&Queued<T>) -> bool) -> Option<Queued<T>> {
        let pos = self.items.iter().position(|(_, q)| pred(q));
        self.walked += pos.map_or(self.items.len(), |p| p + 1) as u64;
        let (key, q) = self.items.remove(pos?)?;
        self.deadlines.remove(&(q.deadline, key));
        Some(q)
    }

    /// Empties the queue, returning the entries in order.
    pub(super) fn drain(&mut self) -> Vec<Queued<T>> {
        self.deadlines.clear();
        self.walked += self.items.len() as u64;
        self.items.drain(..).map(|(_, q)| q).collect()
    }

    /// Entries visited by walks so far.
    #[cfg(test)]
    pub(super) fn walked(&self) -> u64 {
        self.walked
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queued(deadline: u64) -> Queued<u64> {
        Queued {
            req: Request::Ping,
            deadline,
            written: false,
        }
    }

    /// 5,000 queued commands: the next deadline is read from the index, never by walking the
    /// queue, however the deadlines are ordered, as entries come and go.
    #[test]
    fn next_deadline_does_not_walk_5000_queued() {
        let t0 = 0u64;
        let mut q = SendQueue::default();
        // Deadlines out of queue order (re-sends go to the front with older deadlines).
        for i in 0..5_000u64 {
            let d = t0 + (i * 7919) % 5_000 + 1;
            if i % 3 == 0 {
                q.push_front(queued(d));
            } else {
                q.push_back(queued(d));
            }
        }
        assert_eq!(q.len(), 5_000);
        assert_eq!(q.next_deadline(), Some(t0 + 1));
        let mut model: Vec<u64> = q.items.iter().map(|(_, e)| e.deadline).collect();
        while !q.is_empty() {
            assert_eq!(q.deadlines.len(), q.items.len(), "index out of step");
            let expect = model.iter().min().copied();
            assert_eq!(q.next_deadline(), expect);
            let popped = q.pop_front().map(|e| e.deadline);
            assert_eq!(popped, Some(model.remove(0)));
        }
        assert_eq!(q.next_deadline(), None);
        assert_eq!(
            q.walked(),
            0,
            "answering the next deadline walked the queue"
        );
        // Nothing due: no walk either.
        q.push_back(queued(t0 + 9_000));
        assert!(q.take_expired(t0).is_empty());
        assert_eq!(q.walked(), 0);
    }

    #[test]
    fn expired_entries_leave_in_queue_order() {
        let ms = |n: u64| n;
        let mut q = SendQueue::default();
        for d in [5, 1, 9, 3] {
            q.push_back(queued(ms(d)));
        }
        let late: Vec<_> = q.take_expired(ms(4)).iter().map(|e| e.deadline).collect();
        assert_eq!(late, vec![ms(1), ms(3)]);
        assert_eq!(q.next_deadline(), Some(ms(5)));
        assert_eq!(q.len(), 2);
        let gone = q.remove_first(|e| e.deadline == ms(9)).map(|e| e.deadline);
        assert_eq!(gone, Some(ms(9)));
        assert_eq!(q.next_deadline(), Some(ms(5)));
        assert_eq!(q.drain().len(), 1);
        assert_eq!(q.next_deadline(), None);
    }
}
