//! The send queue: commands waiting to be written, in order, with their deadlines indexed so
//! the next one is found without scanning the queue, however long it grows.

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
///
/// Nearly every entry is pushed at the back with a deadline no earlier than the last one so
/// pushed (`now + command_timeout`, `now` never going back): those form `run`, sorted by
/// construction, so indexing one costs a push onto a deque and the earliest is its front. The
/// rest — re-sends and the Auth pushed at the front, a batch due by its oldest add, a long
/// poll's later deadline followed by shorter ones — go into the ordered set `others`. (With
/// batching off and 5,000 adds queued, a B-tree insert and remove per command was a tenth of
/// the session's work per add.)
#[derive(Debug)]
pub(super) struct SendQueue<T = Instant> {
    /// `(key, entry)` in send order.
    items: VecDeque<(u64, Queued<T>)>,
    /// `(deadline, key)` of entries pushed at the back in deadline order: sorted by deadline,
    /// and by key too (keys grow with every push), and in the same order as in `items`.
    run: VecDeque<(T, u64)>,
    /// `(deadline, key)` of every other entry of `items`.
    others: BTreeSet<(T, u64)>,
    next_key: u64,
    /// Entries visited by walks over `items` (a cancel, expiries, an Auth failure): the work
    /// that grows with the queue, counted so tests can see where it happens.
    walked: u64,
}

impl<T> Default for SendQueue<T> {
    fn default() -> Self {
        SendQueue {
            items: VecDeque::new(),
            run: VecDeque::new(),
            others: BTreeSet::new(),
            next_key: 0,
            walked: 0,
        }
    }
}

impl<T: Ord + Copy> SendQueue<T> {
    fn next_key(&mut self) -> u64 {
        self.next_key += 1;
        self.next_key
    }

    pub(super) fn push_back(&mut self, q: Queued<T>) {
        let key = self.next_key();
        if self.run.back().is_none_or(|&(d, _)| d <= q.deadline) {
            self.run.push_back((q.deadline, key));
        } else {
            self.others.insert((q.deadline, key));
        }
        self.items.push_back((key, q));
    }

    pub(super) fn push_front(&mut self, q: Queued<T>) {
        let key = self.next_key();
        self.others.insert((q.deadline, key));
        self.items.push_front((key, q));
    }

    /// Drops the index entry of `(deadline, key)`, an entry leaving `items`.
    fn unindex(&mut self, deadline: T, key: u64) {
        let entry = (deadline, key);
        if self.run.front() == Some(&entry) {
            // The usual case: the front of the queue leaves, and it is the front of the run.
            self.run.pop_front();
        } else if !self.others.remove(&entry) {
            if let Ok(i) = self.run.binary_search(&entry) {
                self.run.remove(i);
            }
        }
    }

    pub(super) fn front(&self) -> Option<&Queued<T>> {
        self.items.front().map(|(_, q)| q)
    }

    pub(super) fn pop_front(&mut self) -> Option<Queued<T>> {
        let (key, q) = self.items.pop_front()?;
        self.unindex(q.deadline, key);
        Some(q)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.items.len()
    }

    /// The earliest deadline in the queue: the smaller of two firsts, no walk.
    pub(super) fn next_deadline(&self) -> Option<T> {
        let run = self.run.front().map(|(d, _)| *d);
        let others = self.others.first().map(|(d, _)| *d);
        match (run, others) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Removes and returns, in queue order, every entry whose deadline is at or before `now`.
    /// Walks the queue only when at least one is due.
    pub(super) fn take_expired(&mut self, now: T) -> Vec<Queued<T>> {
        let mut due = HashSet::new();
        while let Some(&(d, key)) = self.run.front() {
            if d > now {
                break;
            }
            self.run.pop_front();
            due.insert(key);
        }
        while let Some(&(d, key)) = self.others.first() {
            if d > now {
                break;
            }
            self.others.pop_first();
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
        self.unindex(q.deadline, key);
        Some(q)
    }

    /// Empties the queue, returning the entries in order.
    pub(super) fn drain(&mut self) -> Vec<Queued<T>> {
        self.run.clear();
        self.others.clear();
        self.walked += self.items.len() as u64;
        self.items.drain(..).map(|(_, q)| q).collect()
    }

    /// Entries visited by walks so far.
    #[cfg(test)]
    pub(super) fn walked(&self) -> u64 {
        self.walked
    }

    /// Index entries, so tests can check that the index stays in step with the queue.
    #[cfg(test)]
    fn indexed(&self) -> usize {
        self.run.len() + self.others.len()
    }
}

/// `(deadline, reqId)` of the written commands awaiting replies, earliest first on demand.
///
/// As in [`SendQueue`], commands are written with deadlines in order (`now + timeout`), so
/// those go into the deque `run` and the rest (a long poll's later deadline followed by shorter
/// ones) into the ordered set `others`. Replies may come in any order, so an answered entry is
/// not taken out of the middle of `run`: it is left there, stale, and dropped when it reaches
/// the front. The front is kept live (`is_live` says whether a reqId still waits with that
/// deadline), so the earliest deadline is read in O(1), and a stale entry lives at most as long
/// as the oldest command still waiting, which its own deadline bounds.
#[derive(Debug)]
pub(super) struct WrittenDeadlines<T = Instant> {
    run: VecDeque<(T, u32)>,
    others: BTreeSet<(T, u32)>,
}

impl<T> Default for WrittenDeadlines<T> {
    fn default() -> Self {
        WrittenDeadlines {
            run: VecDeque::new(),
            others: BTreeSet::new(),
        }
    }
}

impl<T: Ord + Copy> WrittenDeadlines<T> {
    pub(super) fn insert(&mut self, deadline: T, req: u32) {
        if self.run.back().is_none_or(|&(d, _)| d <= deadline) {
            self.run.push_back((deadline, req));
        } else {
            self.others.insert((deadline, req));
        }
    }

    /// `req`, written with `deadline`, has stopped waiting (`is_live` already says so).
    pub(super) fn remove(&mut self, deadline: T, req: u32, is_live: impl Fn(u32, T) -> bool) {
        if !self.others.remove(&(deadline, req)) {
            self.drop_stale(is_live);
        }
    }

    fn drop_stale(&mut self, is_live: impl Fn(u32, T) -> bool) {
        while let Some(&(d, r)) = self.run.front() {
            if is_live(r, d) {
                break;
            }
            self.run.pop_front();
        }
    }

    /// The earliest deadline of a command still waiting.
    pub(super) fn first(&self) -> Option<T> {
        let run = self.run.front().map(|(d, _)| *d);
        let others = self.others.first().map(|(d, _)| *d);
        match (run, others) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Takes every waiting command due at `now`, earliest first. The caller then takes them
    /// out of its map; stale entries left at the front are dropped by the next `remove` or
    /// `take_due`, and never reported (`is_live`).
    pub(super) fn take_due(&mut self, now: T, is_live: impl Fn(u32, T) -> bool) -> Vec<u32> {
        let mut due = Vec::new();
        loop {
            self.drop_stale(&is_live);
            let run = self.run.front().copied().filter(|&(d, _)| d <= now);
            let other = self.others.first().copied().filter(|&(d, _)| d <= now);
            match (run, other) {
                (Some(a), Some(b)) if b < a => {
                    self.others.pop_first();
                    due.push(b.1);
                }
                (Some(a), _) => {
                    self.run.pop_front();
                    due.push(a.1);
                }
                (None, Some(b)) => {
                    self.others.pop_first();
                    due.push(b.1);
                }
                (None, None) => return due,
            }
        }
    }

    pub(super) fn clear(&mut self) {
        self.run.clear();
        self.others.clear();
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
            assert_eq!(q.indexed(), q.items.len(), "index out of step");
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

    /// Commands queued as the session queues them, `now + timeout` with `now` moving on: the
    /// index is a plain deque, no ordered set, however many wait.
    #[test]
    fn deadlines_in_order_cost_no_ordered_set() {
        let mut q = SendQueue::default();
        for i in 0..5_000u64 {
            q.push_back(queued(1_000 + i / 3));
        }
        assert!(
            q.others.is_empty(),
            "in-order deadlines went to the ordered set"
        );
        assert_eq!(q.next_deadline(), Some(1_000));
        while q.pop_front().is_some() {
            assert!(q.others.is_empty());
        }
        assert_eq!((q.indexed(), q.next_deadline()), (0, None));
    }

    #[derive(Debug, Clone)]
    enum Op {
        Back(u64),
        Front(u64),
        Pop,
        /// Removes the first entry with this deadline (a cancel).
        Remove(u64),
        Expire(u64),
        Drain,
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            6 => (0..40u64).prop_map(Op::Back),
            1 => (0..40u64).prop_map(Op::Front),
            4 => Just(Op::Pop),
            2 => (0..40u64).prop_map(Op::Remove),
            1 => (0..40u64).prop_map(Op::Expire),
            1 => Just(Op::Drain),
        ]
    }

    proptest::proptest! {
        /// Against a plain list: the same entries in the same order, the same expiries, and the
        /// earliest deadline always right, whatever the mix of pushes and removals.
        #[test]
        fn the_index_agrees_with_a_plain_list(ops in proptest::collection::vec(op(), 0..200)) {
            let mut q = SendQueue::default();
            let mut model: VecDeque<u64> = VecDeque::new();
            for op in ops {
                match op {
                    Op::Back(d) => {
                        q.push_back(queued(d));
                        model.push_back(d);
                    }
                    Op::Front(d) => {
                        q.push_front(queued(d));
                        model.push_front(d);
                    }
                    Op::Pop => {
                        proptest::prop_assert_eq!(q.pop_front().map(|e| e.deadline), model.pop_front());
                    }
                    Op::Remove(d) => {
                        let got = q.remove_first(|e| e.deadline == d).map(|e| e.deadline);
                        let want = model.iter().position(|&x| x == d).and_then(|i| model.remove(i));
                        proptest::prop_assert_eq!(got, want);
                    }
                    Op::Expire(now) => {
                        let got: Vec<u64> = q.take_expired(now).iter().map(|e| e.deadline).collect();
                        let want: Vec<u64> = model.iter().copied().filter(|&d| d <= now).collect();
                        model.retain(|&d| d > now);
                        proptest::prop_assert_eq!(got, want);
                    }
                    Op::Drain => {
                        let got: Vec<u64> = q.drain().iter().map(|e| e.deadline).collect();
                        proptest::prop_assert_eq!(got, Vec::from(std::mem::take(&mut model)));
                    }
                }
                proptest::prop_assert_eq!(q.indexed(), model.len());
                proptest::prop_assert_eq!(q.next_deadline(), model.iter().min().copied());
                let order: Vec<u64> = q.items.iter().map(|(_, e)| e.deadline).collect();
                proptest::prop_assert_eq!(order, Vec::from(model.clone()));
            }
        }
    }

    #[derive(Debug, Clone)]
    enum WOp {
        /// Writes a command due this far after the last one written (negative: a long poll
        /// went before).
        Write(i8),
        /// The reply to the `n`-th oldest command waiting.
        Reply(usize),
        /// The clock moves on this far, and what is due times out.
        Tick(u8),
    }

    fn wop() -> impl proptest::strategy::Strategy<Value = WOp> {
        use proptest::prelude::*;
        prop_oneof![
            4 => any::<i8>().prop_map(WOp::Write),
            3 => (0..8usize).prop_map(WOp::Reply),
            1 => any::<u8>().prop_map(WOp::Tick),
        ]
    }

    proptest::proptest! {
        /// Against an ordered set of the commands waiting, with replies in any order: the
        /// earliest deadline and what times out are always the same, and stale entries never
        /// outnumber the writes.
        #[test]
        fn written_deadlines_agree_with_an_ordered_set(
            ops in proptest::collection::vec(wop(), 0..300),
        ) {
            let mut w = WrittenDeadlines::default();
            // reqId -> deadline of the commands waiting: the session's in-flight map.
            let mut waiting: std::collections::BTreeMap<u32, i64> = Default::default();
            let (mut now, mut last, mut next_req) = (0i64, 100i64, 0u32);
            for op in ops {
                match op {
                    WOp::Write(step) => {
                        last = (last + i64::from(step)).max(now + 1);
                        next_req += 1;
                        w.insert(last, next_req);
                        waiting.insert(next_req, last);
                    }
                    WOp::Reply(n) => {
                        if let Some((&req, &d)) = waiting.iter().nth(n) {
                            waiting.remove(&req);
                            w.remove(d, req, |r, d| waiting.get(&r) == Some(&d));
                        }
                    }
                    WOp::Tick(step) => {
                        now += i64::from(step);
                        let mut due = w.take_due(now, |r, d| waiting.get(&r) == Some(&d));
                        let mut want: Vec<u32> = waiting
                            .iter()
                            .filter(|(_, &d)| d <= now)
                            .map(|(&r, _)| r)
                            .collect();
                        for r in &due {
                            waiting.remove(r);
                        }
                        due.sort_unstable();
                        want.sort_unstable();
                        proptest::prop_assert_eq!(due, want);
                    }
                }
                proptest::prop_assert_eq!(w.first(), waiting.values().min().copied());
                proptest::prop_assert!(w.run.len() + w.others.len() <= next_req as usize);
            }
        }
    }
}
