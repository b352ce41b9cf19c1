//! Queue events pushed to subscribed connections, as bunqueue 2.9.5 does
//! (`infrastructure/server/tcp/connections.js`, `broadcastEvent`).
//!
//! * One subscription per connection: `SubscribeEvents {queue}` replaces the previous one,
//!   `UnsubscribeEvents` and the connection's end remove it. No filter by event type: every
//!   event of exactly that queue is sent.
//! * Each event is one frame `{type: "event", event: {eventType, …}}` without `reqId`, with the
//!   keys (and key order) bunqueue's `broadcast` calls use, written into the subscriber's
//!   outbox between its replies.
//! * Events are published while the queue state's lock is held, so every subscriber sees
//!   them in the order the state changed.
//! * Backpressure, bunqueue's `dropForWriteOverflow`: an event goes through the connection's
//!   outbox like a reply, under the same write budget (`max_write_queue_bytes`). A subscriber
//!   that does not read is cut off (its connection closed, its queued output dropped) once its
//!   pending output passes the budget; memory stays bounded in bytes. Its client sees the
//!   connection close and may subscribe again (autobatch's `QueueEvents` reports a gap).
//! * With no subscriber at all, publishing costs one emptiness check: the event is not
//!   built, its payloads are not cloned.

use std::collections::HashMap;
use std::sync::Arc;

use autobatch_core::wire::{write_frame, Value};

use crate::clock::now_ms;
use crate::conn_id::ConnId;

/// Where a subscriber's event frames go: its connection's outbox.
pub(crate) trait EventSink: Send + Sync {
    /// Queues one whole frame (header included). Over the connection's write budget the
    /// frame is dropped and the connection is cut instead; never blocks.
    fn push_event(&self, frame: Vec<u8>);
}

/// A subscribed connection and where its frames go.
type Subscriber = (ConnId, Arc<dyn EventSink>);

/// The subscriptions of one broker, kept inside the queue state (under its lock).
#[derive(Default)]
pub(crate) struct Events {
    /// Subscribers by queue name.
    queues: HashMap<String, Vec<Subscriber>>,
    /// The queue each subscribed connection listens to.
    conns: HashMap<ConnId, String>,
    /// Events emitted per queue, subscribed to or not, up to [`MAX_QUEUE_EVENTS`]: bunqueue's
    /// event journal in memory mode keeps only their number, which TrimEvents trims. Counted
    /// under `&self`, as `emit` is.
    journal: std::cell::RefCell<HashMap<String, u64>>,
}

/// bunqueue's `maxQueueEvents`: the journal of a queue counts up to this many events.
pub(crate) const MAX_QUEUE_EVENTS: u64 = 10_000;

/// One event's keys after `eventType` (in bunqueue's order), given the timestamp.
pub(crate) type Fields = Vec<(&'static str, Value)>;

impl Events {
    /// Subscribes `conn` to `queue`, replacing its earlier subscription (one per connection).
    pub fn subscribe(&mut self, conn: ConnId, queue: &str, sink: Arc<dyn EventSink>) {
        self.unsubscribe(conn);
        self.conns.insert(conn, queue.to_owned());
        self.queues
            .entry(queue.to_owned())
            .or_default()
            .push((conn, sink));
    }

    /// Ends `conn`'s subscription, if any.
    pub fn unsubscribe(&mut self, conn: ConnId) {
        let Some(queue) = self.conns.remove(&conn) else {
            return;
        };
        if let Some(subs) = self.queues.get_mut(&queue) {
            subs.retain(|(c, _)| *c != conn);
            if subs.is_empty() {
                self.queues.remove(&queue);
            }
        }
    }

    /// Connections subscribed right now.
    #[cfg(test)]
    pub fn subscribers(&self) -> usize {
        self.conns.len()
    }

    /// Whether any connection is subscribed (the check the hot path pays).
    #[inline]
    pub fn listening(&self) -> bool {
        !self.conns.is_empty()
    }

    /// Whether an event of `queue` would go anywhere (for callers that must copy something
    /// before they know).
    #[inline]
    pub fn wants(&self, queue: &str) -> bool {
        self.listening() && self.queues.contains_key(queue)
    }

    /// Counts one event of `queue` in its journal (see [`Events::journal`]); `emit` does it,
    /// callers that emit only when [`wants`](Self::wants) call it when they do not.
    pub fn note(&self, queue: &str) {
        let mut journal = self.journal.borrow_mut();
        match journal.get_mut(queue) {
            Some(n) => *n = (*n + 1).min(MAX_QUEUE_EVENTS),
            None => {
                journal.insert(queue.to_owned(), 1);
            }
        }
    }

    /// TrimEvents: keeps at most `max_len` of `queue`'s journaled events; how many went.
    pub fn trim(&self, queue: &str, max_len: u64) -> u64 {
        let mut journal = self.journal.borrow_mut();
        let kept = journal.get(queue).copied().unwrap_or(0);
        if kept <= max_len {
            return 0;
        }
        if max_len == 0 {
            journal.remove(queue);
        } else {
            journal.insert(queue.to_owned(), max_len);
        }
        kept - max_len
    }

    /// Obliterate: the queue's journal goes with it.
    pub fn forget_journal(&self, queue: &str) {
        self.journal.borrow_mut().remove(queue);
    }

    /// Sends one event of `queue` to its subscribers. `fields` builds the keys after
    /// `eventType` from the timestamp; it runs only when someone listens to `queue`.
    #[inline]
    pub fn emit(&self, queue: &str, event_type: &str, fields: impl FnOnce(f64) -> Fields) {
        self.note(queue);
        // The hot path without subscribers: one check, nothing built.
        if !self.listening() {
            return;
        }
        let Some(subs) = self.queues.get(queue) else {
            return;
        };
        let mut event = Vec::with_capacity(8);
        event.push((Value::from("eventType"), Value::from(event_type)));
        event.extend(
            fields(now_ms())
                .into_iter()
                .map(|(k, v)| (Value::from(k), v)),
        );
        let msg = Value::Map(vec![
            (Value::from("type"), Value::from("event")),
            (Value::from("event"), Value::Map(event)),
        ]);
        let mut frame = Vec::new();
        if write_frame(&mut frame, |b| msg.encode(b)).is_err() {
            // Above the 64 MiB frame limit (a huge return value or job data): no client could
            // read it, so it is not sent. Subscribers miss this one event.
            return;
        }
        // One encoding shared by every subscriber; the last one takes it without a copy.
        // Never empty (an emptied entry is removed), but a panic is not worth the check.
        let Some((last, rest)) = subs.split_last() else {
            return;
        };
        for (_, sink) in rest {
            sink.push_event(frame.clone());
        }
        last.1.push_event(frame);
    }
}

/// `{eventType, queue, jobId, timestamp}`: bunqueue's `pushed` and `pulled`. Borrows until
/// the event is built, so that nothing is copied when nobody listens.
pub(crate) fn job_event<'a>(queue: &'a str, id: &'a str) -> impl FnOnce(f64) -> Fields + 'a {
    move |ts| {
        vec![
            ("queue", Value::from(queue)),
            ("jobId", Value::from(id)),
            ("timestamp", Value::F64(ts)),
        ]
    }
}

/// A JS number as bunqueue encodes it: an integer value as an int, anything else as a float.
pub(crate) fn js_number(f: f64) -> Value {
    if f.fract() == 0.0 && f.abs() < 9_007_199_254_740_992.0 {
        Value::Int(f as i64)
    } else {
        Value::F64(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[derive(Default)]
    struct Collect(Mutex<Vec<Vec<u8>>>);

    impl EventSink for Collect {
        fn push_event(&self, frame: Vec<u8>) {
            self.0.lock().unwrap().push(frame);
        }
    }

    fn decoded(sink: &Collect) -> Vec<Value> {
        sink.0
            .lock()
            .unwrap()
            .iter()
            .map(|f| Value::decode(&f[4..]).unwrap())
            .collect()
    }

    #[test]
    fn filters_by_queue_and_replaces_subscriptions() {
        let mut ev = Events::default();
        let (a, b) = (Arc::new(Collect::default()), Arc::new(Collect::default()));
        ev.subscribe(1, "q1", a.clone());
        ev.subscribe(2, "q1", b.clone());
        ev.emit("q1", "pushed", job_event("q1", "j1"));
        ev.emit("q2", "pushed", job_event("q2", "j2"));
        ev.subscribe(2, "q2", b.clone());
        ev.emit("q2", "pushed", job_event("q2", "j3"));
        ev.unsubscribe(1);
        ev.emit("q1", "pushed", job_event("q1", "j4"));
        let a = decoded(&a);
        let b = decoded(&b);
        assert_eq!(a.len(), 1);
        assert_eq!(b.len(), 2);
        let ev1 = a[0].get("event").unwrap();
        assert_eq!(a[0].get("type").and_then(Value::as_str), Some("event"));
        assert_eq!(ev1.get("eventType").and_then(Value::as_str), Some("pushed"));
        assert_eq!(ev1.get("jobId").and_then(Value::as_str), Some("j1"));
        let jobs: Vec<_> = b
            .iter()
            .map(|v| v.get("event").unwrap().get("jobId").unwrap().clone())
            .collect();
        assert_eq!(jobs, [Value::from("j1"), Value::from("j3")]);
        assert_eq!(ev.subscribers(), 1);
        ev.unsubscribe(2);
        ev.unsubscribe(2);
        assert!(!ev.wants("q2"));
        assert!(ev.queues.is_empty());
    }

    #[test]
    fn nothing_is_built_without_subscribers() {
        let ev = Events::default();
        ev.emit("q", "pushed", |_| {
            unreachable!("built without a subscriber")
        });
    }
}
