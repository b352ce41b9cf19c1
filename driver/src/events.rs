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

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use autobatch_core::session::{QueueEvent, UnsubscribeEvents};
use autobatch_core::wire::validate_queue_name;
use autobatch_core::Error;
use futures_channel::oneshot;
use futures_util::Stream;

use crate::client::Client;
use crate::connect::start_with_events;
use crate::event_buffer::{EventBuffer, EventHook, EventsOptions, EventsStats};
use crate::options::{ClientOptions, ConnectError};
use crate::runtime::Runtime;

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
        let hook = EventHook::new(queue.clone(), buffer.clone(), ready_tx);
        let ends = start_with_events(runtime, &options, hook).await?;
        let client = Client::from_ends(ends);
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
        self.buffer.stats()
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
