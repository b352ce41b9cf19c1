//! The pipelining window: how many commands may be written and unanswered at once, and when a
//! full window is refilled.
//!
//! Refilling a full window as each reply frees a slot writes a few frames at a time: with
//! batching off and adds coming faster than their replies, every read of a few replies was
//! followed by a write of as many PUSH frames, and the server read them a few at a time too —
//! TCP's "silly window syndrome" (RFC 813) at the command level. Clark's remedy applies: once
//! the window is full, wait until half of it is free, then fill it in one write.
//!
//! The wait is bounded in time ([`SessionConfig::full_window_wait`]), because not every command
//! in a window is answered promptly: a worker's long-poll PULL or a `WaitJob` may hold its slot
//! for seconds, and a window half full of those would otherwise never refill. So a full window
//! refills when half of it is answered or when the wait is over, whichever comes first; windows
//! of one or two commands refill as soon as a slot is free, as they always did.
//!
//! [`SessionConfig::full_window_wait`]: super::SessionConfig::full_window_wait

use std::time::{Duration, Instant};

/// The window's size and its refill rule. `T` is the clock's instant type: the session's
/// `Instant`, or plain numbers in tests (core never reads a clock).
#[derive(Debug, Clone)]
pub(super) struct Window<T = Instant, D = Duration> {
    max: usize,
    /// How long a full window waits for half of it to be answered; `None`: not at all.
    full_wait: Option<D>,
    /// While the window waits to refill: when the wait ends, at the latest.
    refill_at: Option<T>,
}

impl<T, D> Window<T, D>
where
    T: Copy + Ord + std::ops::Add<D, Output = T>,
    D: Copy,
{
    pub(super) fn new(max: usize, full_wait: Option<D>) -> Self {
        Window {
            max,
            full_wait,
            refill_at: None,
        }
    }

    /// Whether one more command may be written now, with `in_flight` written and unanswered.
    /// Ends a wait whose condition is met.
    pub(super) fn may_write(&mut self, in_flight: usize, now: T) -> bool {
        if let Some(at) = self.refill_at {
            if in_flight > self.max / 2 && now < at {
                return false;
            }
            self.refill_at = None;
        }
        in_flight < self.max
    }

    /// A command was written and `in_flight` are now out: a window it filled waits to refill.
    pub(super) fn on_written(&mut self, in_flight: usize, now: T) {
        if in_flight >= self.max && self.refill_at.is_none() {
            self.refill_at = self.full_wait.map(|d| now + d);
        }
    }

    /// When a waiting window refills whatever comes back, if it is waiting.
    pub(super) fn poll_timeout(&self) -> Option<T> {
        self.refill_at
    }

    /// The time from [`poll_timeout`](Self::poll_timeout) has come.
    pub(super) fn handle_timeout(&mut self, now: T) {
        if self.refill_at.is_some_and(|at| now >= at) {
            self.refill_at = None;
        }
    }

    /// The connection is gone: the next one starts with an empty window.
    pub(super) fn reset(&mut self) {
        self.refill_at = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes commands while the window lets it, from `in_flight` out: how many went out.
    fn fill(w: &mut Window<u64, u64>, in_flight: &mut usize, now: u64, queued: usize) -> usize {
        let mut wrote = 0;
        while wrote < queued && w.may_write(*in_flight, now) {
            *in_flight += 1;
            wrote += 1;
            w.on_written(*in_flight, now);
        }
        wrote
    }

    #[test]
    fn a_full_window_refills_when_half_of_it_is_answered() {
        let mut w = Window::new(100, Some(5));
        let mut out = 0;
        assert_eq!(fill(&mut w, &mut out, 0, 500), 100);
        // Replies free slots one by one: no write until half the window is free.
        for answered in 1..50 {
            out -= 1;
            assert_eq!(
                fill(&mut w, &mut out, 1, 500),
                0,
                "after {answered} replies"
            );
        }
        out -= 1;
        assert_eq!(out, 50);
        assert_eq!(
            fill(&mut w, &mut out, 1, 500),
            50,
            "the freed half in one go"
        );
        assert_eq!(w.poll_timeout(), Some(1 + 5), "and it waits again");
    }

    #[test]
    fn the_wait_ends_in_time_when_slots_are_held_by_slow_commands() {
        // 70 long polls and waits hold their slots: half the window never frees.
        let mut w = Window::new(100, Some(5));
        let mut out = 0;
        assert_eq!(fill(&mut w, &mut out, 10, 100), 100);
        assert_eq!(w.poll_timeout(), Some(15));
        out -= 30;
        assert_eq!(fill(&mut w, &mut out, 14, 100), 0);
        w.handle_timeout(14);
        assert_eq!(w.poll_timeout(), Some(15), "not yet");
        w.handle_timeout(15);
        assert_eq!(w.poll_timeout(), None);
        assert_eq!(
            fill(&mut w, &mut out, 15, 100),
            30,
            "refilled at the deadline"
        );
    }

    #[test]
    fn the_deadline_is_also_checked_when_writing() {
        let mut w = Window::new(4, Some(5));
        let mut out = 0;
        assert_eq!(fill(&mut w, &mut out, 0, 10), 4);
        out -= 1;
        assert_eq!(fill(&mut w, &mut out, 4, 10), 0);
        assert_eq!(
            fill(&mut w, &mut out, 5, 10),
            1,
            "late poll_transmit, no timer call"
        );
    }

    #[test]
    fn no_wait_refills_each_freed_slot_at_once() {
        let mut w: Window<u64, u64> = Window::new(100, None);
        let mut out = 0;
        assert_eq!(fill(&mut w, &mut out, 0, 500), 100);
        assert_eq!(w.poll_timeout(), None);
        out -= 1;
        assert_eq!(fill(&mut w, &mut out, 0, 500), 1);
    }

    #[test]
    fn windows_of_one_or_two_refill_as_soon_as_a_slot_is_free() {
        for max in [1, 2] {
            let mut w = Window::new(max, Some(5));
            let mut out = 0;
            assert_eq!(fill(&mut w, &mut out, 0, 10), max);
            out -= 1;
            assert_eq!(fill(&mut w, &mut out, 0, 10), 1, "window of {max}");
        }
    }

    #[test]
    fn a_lost_connection_ends_the_wait() {
        let mut w = Window::new(10, Some(5));
        let mut out = 0;
        assert_eq!(fill(&mut w, &mut out, 0, 10), 10);
        w.reset();
        assert_eq!(w.poll_timeout(), None);
        let mut out = 0;
        assert_eq!(fill(&mut w, &mut out, 1, 3), 3);
    }
}
