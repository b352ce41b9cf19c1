//! The pump moved by an add's own poll (see `direct.rs` for why): the add handed to the
//! session, the connection turned with the caller's waker as the socket's reader, and the read
//! role passed on once the caller's answer is in — to another caller still waiting, when one
//! has shown itself, else to the task.

use std::task::{Context, Waker};

use autobatch_core::wire::EncodedJob;

use super::{Pump, ReadBy, Reader, CALLER_WATCH};
use crate::cmd::Ticket;
use crate::direct::Handed;
use crate::reply::Reply;
use crate::runtime::Runtime;

impl<R: Runtime> Pump<R> {
    /// Whether the task reads in its turn: when no caller does, or when the caller that
    /// does has held the role past its watch (its future may not be polled again).
    pub(super) fn task_reads(&self, now: std::time::Instant) -> bool {
        self.reader == Reader::Task || self.caller_watch.is_some_and(|w| w <= now)
    }

    /// Whether callers may move the connection on their own poll: it is running, and its
    /// task has been polled (its waker is what they register for everything but reads).
    fn open_to_callers(&self) -> bool {
        !self.shutting_down && self.rx_open && self.task_waker.is_some() && !self.finished()
    }

    /// A caller found the connection held (see `conn.rs`), perhaps woken to read: reads
    /// what the socket holds, as that caller would have, and hands the read role on if that
    /// read answered the reading caller, which will not look at the connection again.
    pub(crate) fn catch_up(&mut self) {
        if !self.open_to_callers() {
            return;
        }
        self.as_task(|pump, task_cx| {
            pump.turn(task_cx, ReadBy::ForReader);
            pump.pass_read_role_once_answered(task_cx);
        });
    }

    /// The caller of `ticket` stopped waiting: it neither reads nor stands by any more.
    pub(super) fn caller_gone(&mut self, ticket: Ticket) {
        if self.reader == Reader::Caller(ticket) {
            self.reader = Reader::Task;
        }
        if self.standby.as_ref().is_some_and(|(t, _)| *t == ticket) {
            self.standby = None;
        }
    }

    /// [`Direct::add`](crate::direct::Direct::add) on the connection.
    pub(crate) fn add_from_caller(
        &mut self,
        cx: &mut Context<'_>,
        ticket: Ticket,
        queue: &str,
        job: EncodedJob,
        reply: Reply,
    ) -> Result<Handed, (EncodedJob, Reply)> {
        if !self.open_to_callers() {
            return Err((job, reply));
        }
        let now = self.runtime.now();
        let op = match self.session.add_encoded(now, queue, job) {
            Ok(op) => op,
            Err(e) => {
                // Refused: the answer is in the caller's slot, which wakes it.
                let _ = reply.send(Err(e));
                return Ok(Handed::Yielded);
            }
        };
        // Others out: adds are coming concurrently, and this one may have company.
        self.coalesce |= !self.waiters.is_empty();
        self.waiting(op, ticket, reply);
        self.adds_since_flush += 1;
        if !self.coalesce {
            self.flush_owed = true;
            self.drive_from_caller(cx, ticket);
            return Ok(Handed::Written);
        }
        if self.flush_owed {
            // An add before it in this burst yielded, and its next poll writes them all.
            // Only one add of a burst wakes its task: a `FuturesUnordered` (under
            // `join_all`) takes two children that wake themselves in one poll as a sign to
            // yield the whole set, which would cost a reschedule per two adds.
            self.stand_by(ticket, cx.waker());
            return Ok(Handed::Yielded);
        }
        self.flush_owed = true;
        // Should that add not be polled again, the task writes the burst.
        self.watch_caller(now);
        self.arm_timer_for_task(now);
        self.runtime.yield_now(cx);
        Ok(Handed::Yielded)
    }

    /// Sets the task's timer for the next deadline outside a turn (registered with the
    /// task's waker), waking the task if one is due already.
    fn arm_timer_for_task(&mut self, now: std::time::Instant) {
        self.as_task(|pump, task_cx| {
            if pump.arm_timer(task_cx, now) {
                pump.task_needed = true;
            }
        });
    }

    /// Runs `work` outside the task's own turn (on a caller's poll, or catching up as the
    /// connection is let go) with a context made from the task's waker, as that turn has it
    /// (a write that would block, the timer: they wake the task), then wakes the task for
    /// what `work` left that only the task does. Runs nothing, and returns `false`, before
    /// the task has first been polled.
    fn as_task(&mut self, work: impl FnOnce(&mut Self, &mut Context<'_>)) -> bool {
        let Some(waker) = self.task_waker.take() else {
            return false;
        };
        work(self, &mut Context::from_waker(&waker));
        if std::mem::take(&mut self.task_needed) || self.finished() {
            waker.wake_by_ref();
        }
        self.task_waker = Some(waker);
        true
    }

    /// [`Direct::drive`](crate::direct::Direct::drive) on the connection.
    pub(crate) fn drive_from_caller(&mut self, cx: &mut Context<'_>, ticket: Ticket) -> bool {
        let waiting = self.tickets.contains_key(&ticket);
        let reads =
            waiting && matches!(self.reader, Reader::Task) || self.reader == Reader::Caller(ticket);
        if waiting && !reads {
            self.stand_by(ticket, cx.waker());
        }
        if !self.open_to_callers() || !(reads || self.flush_owed) {
            return false;
        }
        let read = if reads && waiting {
            ReadBy::Caller(ticket, cx.waker())
        } else {
            ReadBy::Nobody
        };
        self.as_task(|pump, task_cx| {
            pump.driving = Some(ticket);
            pump.turn(task_cx, read);
            pump.pass_read_role_once_answered(task_cx);
            pump.driving = None;
        })
    }

    /// The reading caller has its answer: the role goes on (see `pass_read_role`).
    fn pass_read_role_once_answered(&mut self, task_cx: &mut Context<'_>) {
        if let Reader::Caller(ticket) = self.reader {
            if !self.tickets.contains_key(&ticket) {
                self.pass_read_role(task_cx);
            }
        }
    }

    /// Records the caller of `ticket`, whose answer is out while another reads, as the next
    /// reader.
    fn stand_by(&mut self, ticket: Ticket, waker: &Waker) {
        match &self.standby {
            Some((t, w)) if *t == ticket && w.will_wake(waker) => {}
            _ => self.standby = Some((ticket, waker.clone())),
        }
    }

    /// The reading caller's answer is in: "readable" goes to the caller standing by if it
    /// still waits, else to the task. Bytes that came after the last read are read now,
    /// since the caller that was told of them will not look again.
    fn pass_read_role(&mut self, task_cx: &mut Context<'_>) {
        // Each round takes the standby: reading for it may answer it too, and then the role
        // moves on again (to the task, as nobody else stood by meanwhile).
        loop {
            let next = self
                .standby
                .take()
                .filter(|(t, _)| self.tickets.contains_key(t));
            let Some((next, waker)) = next else {
                self.reader = Reader::Task;
                self.caller_watch = None;
                if self.relay.pass_to(task_cx.waker()) {
                    self.turn(task_cx, ReadBy::Task);
                }
                return;
            };
            self.reader = Reader::Caller(next);
            self.caller_watch = Some(self.runtime.now() + CALLER_WATCH);
            if !self.relay.pass_to(&waker) {
                return;
            }
            self.turn(task_cx, ReadBy::Caller(next, &waker));
            if self.tickets.contains_key(&next) {
                return;
            }
        }
    }
}
