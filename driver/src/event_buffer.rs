//! The pump's side of a [`QueueEvents`](crate::QueueEvents) subscription: the hook that
//! subscribes on every connection and types the event frames, and the bounded buffer it fills
//! for the stream ([`EventsOptions`], [`EventsStats`]).
//!
//! The connection is never slowed down for a reader (bunqueue itself would cut a connection
//! whose socket backs up): when a new event does not fit, the **oldest** buffered events are
//! dropped until it does, and the next item the stream yields is a [`QueueEvent::Lagged`]
//! `{ missed }` counting them, followed by the events that were kept, in order. A reconnect is
//! marked with a [`QueueEvent::Gap`] before anything the new connection delivers.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use autobatch_core::ops::Operation;
use autobatch_core::session::{OpId, QueueEvent, Session, SubscribeEvents};
use autobatch_core::wire::{Response, Value};
use autobatch_core::{Error, ServerError};
use futures_channel::oneshot;

/// Bounds of a [`QueueEvents`](crate::QueueEvents) buffer.
///
/// ```
/// use autobatch_driver::EventsOptions;
/// let opts = EventsOptions::default().max_events(1_000).max_bytes(1 << 20);
/// assert_eq!(opts.max_events_value(), 1_000);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct EventsOptions {
    max_events: usize,
    max_bytes: usize,
}

impl Default for EventsOptions {
    /// 10,000 events or 16 MiB of frames, whichever is reached first.
    fn default() -> Self {
        EventsOptions {
            max_events: 10_000,
            max_bytes: 16 << 20,
        }
    }
}

impl EventsOptions {
    /// Most events held for the consumer (at least 1).
    pub fn max_events(mut self, n: usize) -> Self {
        self.max_events = n.max(1);
        self
    }

    /// Most encoded bytes held for the consumer (one event is always kept, however large).
    pub fn max_bytes(mut self, n: usize) -> Self {
        self.max_bytes = n;
        self
    }

    /// The event bound.
    pub fn max_events_value(&self) -> usize {
        self.max_events
    }

    /// The byte bound.
    pub fn max_bytes_value(&self) -> usize {
        self.max_bytes
    }
}

#[derive(Debug)]
struct Inner {
    items: VecDeque<(QueueEvent, usize)>,
    bytes: usize,
    missed: u64,
    closed: bool,
    waker: Option<Waker>,
    opts: EventsOptions,
    /// Totals since the start, for [`QueueEvents::stats`](crate::QueueEvents::stats).
    delivered: u64,
    dropped: u64,
    gaps: u64,
}

/// The bounded buffer between the pump and the stream.
#[derive(Debug)]
pub(crate) struct EventBuffer(Mutex<Inner>);

impl EventBuffer {
    pub(crate) fn new(opts: EventsOptions) -> Self {
        EventBuffer(Mutex::new(Inner {
            items: VecDeque::new(),
            bytes: 0,
            missed: 0,
            closed: false,
            waker: None,
            opts,
            delivered: 0,
            dropped: 0,
            gaps: 0,
        }))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `event`, dropping the oldest ones that leave no room for it.
    fn push(&self, event: QueueEvent, bytes: usize) {
        let mut g = self.lock();
        if g.closed {
            return;
        }
        if matches!(event, QueueEvent::Gap) {
            g.gaps += 1;
        }
        while !g.items.is_empty()
            && (g.items.len() >= g.opts.max_events || g.bytes + bytes > g.opts.max_bytes)
        {
            if let Some((_, b)) = g.items.pop_front() {
                g.bytes -= b;
                g.missed += 1;
                g.dropped += 1;
            }
        }
        g.bytes += bytes;
        g.items.push_back((event, bytes));
        if let Some(w) = g.waker.take() {
            w.wake();
        }
    }

    /// The stream's counters now.
    pub(crate) fn stats(&self) -> EventsStats {
        let g = self.lock();
        EventsStats {
            delivered: g.delivered,
            dropped: g.dropped,
            gaps: g.gaps,
            buffered: g.items.len(),
        }
    }

    /// Ends the stream once what is buffered is read.
    pub(crate) fn close(&self) {
        let mut g = self.lock();
        g.closed = true;
        if let Some(w) = g.waker.take() {
            w.wake();
        }
    }

    /// The next item for the stream: a `Lagged` marker first when events were dropped.
    pub(crate) fn poll_next(&self, cx: &mut Context<'_>) -> Poll<Option<QueueEvent>> {
        let mut g = self.lock();
        if g.missed > 0 {
            let missed = std::mem::take(&mut g.missed);
            return Poll::Ready(Some(QueueEvent::Lagged { missed }));
        }
        if let Some((event, b)) = g.items.pop_front() {
            g.bytes -= b;
            g.delivered += 1;
            return Poll::Ready(Some(event));
        }
        if g.closed {
            return Poll::Ready(None);
        }
        g.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

/// The pump's side of a subscription: subscribes on every connection, types and buffers the
/// event frames, and marks each reconnect with a [`QueueEvent::Gap`].
pub(crate) struct EventHook {
    queue: String,
    buffer: Arc<EventBuffer>,
    /// The SubscribeEvents in flight on the current connection.
    subscribing: Option<OpId>,
    connections: u64,
    /// Told once, when the first subscription is answered.
    ready: Option<oneshot::Sender<Result<(), Error>>>,
}

impl EventHook {
    /// A hook for `queue` that fills `buffer` and tells `ready` how the first subscription
    /// went.
    pub(crate) fn new(
        queue: String,
        buffer: Arc<EventBuffer>,
        ready: oneshot::Sender<Result<(), Error>>,
    ) -> Self {
        EventHook {
            queue,
            buffer,
            subscribing: None,
            connections: 0,
            ready: Some(ready),
        }
    }

    /// A connection is up: mark the gap if it is not the first, and subscribe on it.
    pub(crate) fn on_connected(&mut self, session: &mut Session, now: Instant) {
        self.connections += 1;
        if self.connections > 1 {
            tracing::info!(queue = %self.queue, "events: reconnected, some may have been missed");
            self.buffer.push(QueueEvent::Gap, 0);
        }
        let op = SubscribeEvents::new(self.queue.as_str());
        // Not replayed by the session: the next connection subscribes afresh (here).
        match session.request_raw(now, op.to_command(), op.replay()) {
            Ok(id) => self.subscribing = Some(id),
            Err(e) => tracing::warn!(queue = %self.queue, error = %e, "events: cannot subscribe"),
        }
    }

    /// The outcome of an operation: whether it was this hook's subscription.
    pub(crate) fn on_done(&mut self, op: OpId, result: &Result<Response, Error>) -> bool {
        if self.subscribing != Some(op) {
            return false;
        }
        self.subscribing = None;
        match result {
            // An older autobatch-broker acknowledged subscriptions but pushed no events, and
            // said so (`events: false`): a stream that would stay silent is refused instead.
            Ok(Response::Other(body)) if body.get("events") == Some(&Value::Bool(false)) => {
                let e = Error::Server(ServerError::from(format!(
                    "SubscribeEvents is not supported by this server ({}): it pushes no events",
                    self.queue
                )));
                tracing::warn!(queue = %self.queue, "events: the server pushes no events");
                self.buffer.close();
                if let Some(tx) = self.ready.take() {
                    let _ = tx.send(Err(e));
                }
            }
            Ok(_) => {
                tracing::debug!(queue = %self.queue, "events: subscribed");
                if let Some(tx) = self.ready.take() {
                    let _ = tx.send(Ok(()));
                }
            }
            // A lost connection is followed by a new one, which subscribes again.
            Err(Error::ConnectionLost { .. }) | Err(Error::Timeout { .. }) => {}
            Err(e) => {
                tracing::warn!(queue = %self.queue, error = %e, "events: subscription refused");
                if let Some(tx) = self.ready.take() {
                    let _ = tx.send(Err(e.clone()));
                }
            }
        }
        true
    }

    /// An event frame.
    pub(crate) fn on_frame(&mut self, frame: &Value, bytes: usize) {
        self.buffer.push(QueueEvent::from_frame(frame), bytes);
    }

    /// The pump ended: the stream ends once drained.
    pub(crate) fn on_end(&mut self) {
        self.buffer.close();
    }
}

/// Counters of a [`QueueEvents`](crate::QueueEvents).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct EventsStats {
    /// Events handed to the consumer (markers excluded until read).
    pub delivered: u64,
    /// Events dropped because the consumer was slow.
    pub dropped: u64,
    /// Reconnects marked with [`QueueEvent::Gap`].
    pub gaps: u64,
    /// Events buffered now.
    pub buffered: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn progress(i: i64) -> QueueEvent {
        QueueEvent::Progress {
            job_id: "j".into(),
            progress: Value::from(i),
            timestamp: 0.0,
        }
    }

    fn drain(b: &EventBuffer) -> Vec<QueueEvent> {
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        let mut out = Vec::new();
        while let Poll::Ready(Some(e)) = b.poll_next(&mut cx) {
            out.push(e);
        }
        out
    }

    #[test]
    fn a_full_buffer_drops_the_oldest_and_says_how_many() {
        let b = EventBuffer::new(EventsOptions::default().max_events(3));
        for i in 0..5 {
            b.push(progress(i), 10);
        }
        assert_eq!(
            drain(&b),
            vec![
                QueueEvent::Lagged { missed: 2 },
                progress(2),
                progress(3),
                progress(4)
            ]
        );
    }

    #[test]
    fn the_byte_bound_counts_frames() {
        let b = EventBuffer::new(EventsOptions::default().max_bytes(25));
        for i in 0..3 {
            b.push(progress(i), 10);
        }
        assert_eq!(
            drain(&b),
            vec![QueueEvent::Lagged { missed: 1 }, progress(1), progress(2)]
        );
        // One event larger than the bound is still delivered.
        b.push(progress(9), 100);
        assert_eq!(drain(&b), vec![progress(9)]);
    }

    #[test]
    fn closed_ends_after_what_is_buffered() {
        let b = EventBuffer::new(EventsOptions::default());
        b.push(QueueEvent::Gap, 0);
        b.close();
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        assert_eq!(b.poll_next(&mut cx), Poll::Ready(Some(QueueEvent::Gap)));
        assert_eq!(b.poll_next(&mut cx), Poll::Ready(None));
    }
}
