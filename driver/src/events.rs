//! [`QueueEvents`]: a queue's events as a [`Stream`](futures_util::Stream), on a connection of
//! its own.
//!
//! # Why a connection of its own
//!
//! bunqueue 2.9.5 keeps one subscription per connection (a second `SubscribeEvents` replaces
//! the first) and pushes every event of the queue down it, unasked. Sharing the producer's
//! connection would let a busy queue's events delay that connection's replies, and would
//! allow one subscribed queue per client. bunqueue's own TS `QueueEvents` opens a dedicated
//! TCP connection per instance (`TcpEventSubscription`) for the same reasons; so does this.
//!
//! # Reconnects: never silent
//!
//! The server keeps no events for a subscriber that is away. When the connection is lost,
//! the pump reconnects as any client does; as soon as the new connection is up, a
//! [`QueueEvent::Gap`] is queued (before anything that connection delivers) and
//! `SubscribeEvents` is sent again. Events emitted between the loss and the new
//! subscription are lost: the consumer is told, and should re-read what it depends on.
//!
//! # Slow consumers
//!
//! The buffer between the connection and the stream is bounded by
//! [`EventsOptions::max_events`] and [`EventsOptions::max_bytes`] (encoded frame bytes). The
//! connection is never slowed down for a reader (bunqueue itself would cut a connection
//! whose socket backs up): when a new event does not fit, the **oldest** buffered events
//! are dropped until it does, and the next item the stream yields is a
//! [`QueueEvent::Lagged`] `{ missed }` counting them, followed by the events that were kept,
//! in order.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use autobatch_core::ops::Operation;
use autobatch_core::session::{OpId, QueueEvent, Session, SubscribeEvents, UnsubscribeEvents};
use autobatch_core::wire::{validate_queue_name, Response, Value};
use autobatch_core::{Error, ServerError};
use futures_channel::oneshot;
use futures_util::Stream;

use crate::client::{start_with_events, Client};
use crate::{ClientOptions, ConnectError, Runtime};

/// Bounds of a [`QueueEvents`] buffer.
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
    /// Totals since the start, for [`QueueEvents::stats`].
    delivered: u64,
    dropped: u64,
    gaps: u64,
}

/// The bounded buffer between the pump and the stream.
#[derive(Debug)]
pub(crate) struct EventBuffer(Mutex<Inner>);

impl EventBuffer {
    fn new(opts: EventsOptions) -> Self {
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

    fn close(&self) {
        let mut g = self.lock();
        g.closed = true;
        if let Some(w) = g.waker.take() {
            w.wake();
        }
    }

    fn poll_next(&self, cx: &mut Context<'_>) -> Poll<Option<QueueEvent>> {
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

/// Counters of a [`QueueEvents`].
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

/// A queue's events as a [`Stream`] of [`QueueEvent`], on a connection of its own.
///
/// * **Own connection**: bunqueue keeps one subscription per connection and pushes events
///   unasked; a dedicated connection (as bunqueue's TS `QueueEvents` uses) keeps them from
///   delaying a producer's replies.
/// * **Reconnects are never silent**: the server keeps no events for an absent subscriber.
///   When a new connection is up, a [`QueueEvent::Gap`] is delivered before anything it
///   brings, and `SubscribeEvents` is sent again automatically.
/// * **Slow consumers**: the buffer is bounded ([`EventsOptions`]: events and bytes). The
///   connection is never slowed for a reader; when an event does not fit, the oldest buffered
///   ones are dropped and the next item is [`QueueEvent::Lagged`] `{ missed }`, followed by
///   the kept events in order.
///
/// ```no_run
/// # async fn demo<R: autobatch_driver::Runtime + Default>() -> Result<(), Box<dyn std::error::Error>> {
/// use autobatch_driver::{ClientOptions, QueueEvent, QueueEvents};
/// use futures_util::StreamExt;
///
/// let mut events = QueueEvents::<R>::connect(ClientOptions::default(), "emails").await?;
/// while let Some(event) = events.next().await {
///     match event {
///         QueueEvent::Completed { job_id, return_value, .. } => println!("{job_id}: {return_value:?}"),
///         QueueEvent::Failed { job_id, reason, .. } => eprintln!("{job_id} failed: {reason}"),
///         QueueEvent::Gap => eprintln!("reconnected: events may have been missed"),
///         QueueEvent::Lagged { missed } => eprintln!("too slow: {missed} events dropped"),
///         _ => {}
///     }
/// }
/// # Ok(()) }
/// ```
pub struct QueueEvents<R: Runtime> {
    queue: String,
    client: Client<R>,
    buffer: Arc<EventBuffer>,
}

impl<R: Runtime> std::fmt::Debug for QueueEvents<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueEvents")
            .field("queue", &self.queue)
            .finish_non_exhaustive()
    }
}

impl<R: Runtime> QueueEvents<R> {
    /// Opens a connection and subscribes to `queue`'s events with the default buffer bounds.
    /// Returns once the server acknowledged the subscription: every event emitted after that
    /// is delivered (or reported as missed).
    ///
    /// # Errors
    ///
    /// As [`Client::connect`], plus [`ConnectError::Handshake`] with [`Error::Invalid`] for a
    /// bad queue name (nothing is attempted) or the server's refusal.
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime + Default>() -> Result<(), autobatch_driver::ConnectError> {
    /// let events = autobatch_driver::QueueEvents::<R>::connect(Default::default(), "emails").await?;
    /// events.close().await;
    /// # Ok(()) }
    /// ```
    pub async fn connect(
        options: ClientOptions,
        queue: impl Into<String>,
    ) -> Result<Self, ConnectError>
    where
        R: Default,
    {
        Self::connect_with(R::default(), options, queue, EventsOptions::default()).await
    }

    /// Like [`connect`](Self::connect), on an explicit runtime handle and buffer bounds.
    ///
    /// # Errors
    ///
    /// As [`connect`](Self::connect).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime + Default>() -> Result<(), autobatch_driver::ConnectError> {
    /// use autobatch_driver::{EventsOptions, QueueEvents};
    /// let events = QueueEvents::connect_with(R::default(), Default::default(), "emails",
    ///     EventsOptions::default().max_events(100)).await?;
    /// # events.close().await; Ok(()) }
    /// ```
    pub async fn connect_with(
        runtime: R,
        options: ClientOptions,
        queue: impl Into<String>,
        events: EventsOptions,
    ) -> Result<Self, ConnectError> {
        let queue = queue.into();
        validate_queue_name(&queue).map_err(|e| ConnectError::Handshake(Error::Invalid(e)))?;
        let buffer = Arc::new(EventBuffer::new(events));
        let (ready_tx, ready) = oneshot::channel();
        let hook = EventHook {
            queue: queue.clone(),
            buffer: buffer.clone(),
            subscribing: None,
            connections: 0,
            ready: Some(ready_tx),
        };
        let (tx, shared) = start_with_events(runtime, &options, hook).await?;
        let client = Client::from_parts(tx, shared);
        match ready.await {
            Ok(Ok(())) => Ok(QueueEvents {
                queue,
                client,
                buffer,
            }),
            Ok(Err(e)) => {
                client.close().await;
                Err(ConnectError::Handshake(e))
            }
            Err(_) => Err(ConnectError::Handshake(Error::Closed)),
        }
    }

    /// The queue subscribed to.
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// Counters: delivered, dropped for slowness, gaps, buffered now.
    ///
    /// ```no_run
    /// # fn demo<R: autobatch_driver::Runtime>(events: &autobatch_driver::QueueEvents<R>) {
    /// let s = events.stats();
    /// println!("{} delivered, {} dropped, {} gaps", s.delivered, s.dropped, s.gaps);
    /// # }
    /// ```
    pub fn stats(&self) -> EventsStats {
        let g = self.buffer.lock();
        EventsStats {
            delivered: g.delivered,
            dropped: g.dropped,
            gaps: g.gaps,
            buffered: g.items.len(),
        }
    }

    /// Unsubscribes (`UnsubscribeEvents`) and closes the connection; the stream then yields
    /// what is still buffered and ends.
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(events: autobatch_driver::QueueEvents<R>) {
    /// events.close().await;
    /// # }
    /// ```
    pub async fn close(&self) {
        if let Err(e) = self.client.run(UnsubscribeEvents::new()).await {
            tracing::debug!(queue = %self.queue, error = %e, "events: unsubscribe failed");
        }
        self.client.close().await;
        self.buffer.close();
    }
}

impl<R: Runtime> Stream for QueueEvents<R> {
    type Item = QueueEvent;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<QueueEvent>> {
        self.buffer.poll_next(cx)
    }
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
