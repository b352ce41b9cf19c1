//! A worker's events: what happened ([`WorkerEvent`]) and the fan-out that hands them to one
//! subscriber ([`WorkerEvents`]).
//!
//! The worker never waits for its subscriber. The buffer between them is bounded twice: in
//! events ([`WORKER_EVENTS_BUFFER`]) and in bytes ([`WORKER_EVENTS_BUFFER_BYTES`], because a
//! `Completed` carries the processor's result, which may be large). What does not fit is
//! counted and reported as one [`WorkerEvent::Lagged`].
//!
//! The first subscriber gets the events from the worker's start: the worker begins pulling
//! inside [`Worker::start`](crate::Worker::start), and on a multi-threaded runtime a job can
//! finish before the caller has had a chance to call [`Worker::events`](crate::Worker::events).

use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use autobatch_core::wire::Value;
use futures_channel::mpsc;
use futures_util::{Stream, StreamExt};

/// Something that happened in a [`Worker`](crate::Worker), from [`Worker::events`](crate::Worker::events).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum WorkerEvent {
    /// A job was handed to the processor.
    Active {
        /// Job id.
        id: String,
    },
    /// A job reported progress ([`ActiveJob::update_progress`](crate::ActiveJob::update_progress)).
    Progress {
        /// Job id.
        id: String,
        /// The progress reported.
        progress: f64,
        /// Its message, if any.
        message: Option<String>,
    },
    /// A job's processor succeeded; its ACK is on its way (batched).
    Completed {
        /// Job id.
        id: String,
        /// What it returned.
        result: Value,
    },
    /// A job's processor failed; its FAIL is on its way.
    Failed {
        /// Job id.
        id: String,
        /// The error's text.
        reason: String,
        /// Whether it was marked unrecoverable (no retry).
        unrecoverable: bool,
    },
    /// A job asked to run again later ([`JobError::delay`](crate::JobError::delay)).
    Delayed {
        /// Job id.
        id: String,
        /// The delay.
        delay: Duration,
    },
    /// A job hit a rate limit ([`JobError::rate_limited`](crate::JobError::rate_limited)): back to waiting, pulls pause.
    RateLimited {
        /// Job id.
        id: String,
        /// How long the worker pulls nothing.
        wait: Duration,
    },
    /// A forced close handed these held jobs back to waiting.
    Released {
        /// Their ids.
        ids: Vec<String>,
    },
    /// A pull came back empty: the queue has no job for this worker right now (TS
    /// `drained`). Once per empty spell: again only after a pull that brought jobs (the TS
    /// worker repeats it at most once a second while idle).
    Drained,
    /// The server had already taken this job back (its lock expired, or it was found
    /// stalled) when the worker's result arrived: the result was not recorded, and the job
    /// may run again elsewhere. A sign that `lock_ttl` is too short for the job.
    LockLost {
        /// Job id.
        id: String,
    },
    /// Something went wrong outside a job (registration, heartbeat), or a job's result could
    /// not be delivered.
    Error {
        /// What.
        message: String,
    },
    /// The consumer was too slow: this many events were dropped just before this one.
    Lagged {
        /// How many.
        missed: u64,
    },
}
impl WorkerEvent {
    /// About how many bytes the event holds: its strings and its result, plus a fixed share
    /// for itself. What the byte bound counts.
    fn approx_bytes(&self) -> usize {
        const BASE: usize = std::mem::size_of::<WorkerEvent>();
        BASE + match self {
            Self::Active { id }
            | Self::Delayed { id, .. }
            | Self::RateLimited { id, .. }
            | Self::LockLost { id } => id.len(),
            Self::Progress { id, message, .. } => {
                id.len() + message.as_ref().map_or(0, String::len)
            }
            Self::Completed { id, result } => id.len() + approx_value_bytes(result),
            Self::Failed { id, reason, .. } => id.len() + reason.len(),
            Self::Released { ids } => ids.iter().map(|id| id.len() + size_of::<String>()).sum(),
            Self::Error { message } => message.len(),
            Self::Drained | Self::Lagged { .. } => 0,
        }
    }
}

/// About how many bytes a value holds in memory: its text and bytes, plus a fixed share per
/// node. Walked with an explicit stack, so a deep value cannot overflow ours.
fn approx_value_bytes(value: &Value) -> usize {
    const NODE: usize = std::mem::size_of::<Value>();
    let mut total = 0;
    let mut stack = vec![value];
    while let Some(v) = stack.pop() {
        total += NODE;
        match v {
            Value::Str(s) => total += s.len(),
            Value::Raw(raw) => total += raw.as_bytes().len(),
            Value::Bin(b) | Value::Ext(_, b) => total += b.len(),
            Value::Array(items) => stack.extend(items),
            Value::Map(entries) => {
                for (k, v) in entries {
                    stack.push(k);
                    stack.push(v);
                }
            }
            _ => {}
        }
    }
    total
}

/// How many events [`Worker::events`](crate::Worker::events) buffers for a consumer that is behind (or, before the
/// first call to it, since the worker started).
pub const WORKER_EVENTS_BUFFER: usize = 1024;

/// How many bytes of events (their ids, texts and results) [`Worker::events`](crate::Worker::events) buffers for a
/// consumer that is behind, or before its first call. One event larger than this still gets
/// through when nothing else is waiting.
pub const WORKER_EVENTS_BUFFER_BYTES: usize = 1 << 20;

/// An event in the buffer, with the bytes it was counted as.
type Held = (WorkerEvent, usize);

struct Hub {
    /// The way to the current subscriber (or to the parked buffer before the first one);
    /// `None` once the worker closed or the subscriber went away.
    tx: Option<mpsc::Sender<Held>>,
    /// The first subscriber's end, made with the worker so that nothing between the start
    /// and the first [`Worker::events`](crate::Worker::events) call is lost.
    parked: Option<mpsc::Receiver<Held>>,
    /// What the current buffer holds, shared with its stream (which gives it back as it
    /// yields).
    backlog: Arc<Backlog>,
    /// Events dropped since the last one delivered.
    missed: u64,
    closed: bool,
}

/// The worker's event fan-out: one subscriber at a time, a buffer bounded in events and
/// bytes, and drops counted rather than blocking the worker.
#[derive(Clone)]
pub(crate) struct WorkerEvents(Arc<Mutex<Hub>>);

impl Default for WorkerEvents {
    fn default() -> Self {
        let (tx, rx) = mpsc::channel(WORKER_EVENTS_BUFFER);
        Self(Arc::new(Mutex::new(Hub {
            tx: Some(tx),
            parked: Some(rx),
            backlog: Arc::default(),
            missed: 0,
            closed: false,
        })))
    }
}

impl WorkerEvents {
    fn hub(&self) -> std::sync::MutexGuard<'_, Hub> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The stream for a new subscriber: the first one gets the events buffered since the
    /// start; each later one starts empty and ends the previous stream.
    pub(crate) fn subscribe(&self) -> EventStream {
        let mut hub = self.hub();
        if let Some(rx) = hub.parked.take() {
            return EventStream {
                rx,
                backlog: hub.backlog.clone(),
            };
        }
        let (tx, rx) = mpsc::channel(WORKER_EVENTS_BUFFER);
        let backlog = Arc::new(Backlog::default());
        // After close the sender is dropped at once: the stream ends.
        hub.tx = (!hub.closed).then_some(tx);
        hub.backlog = backlog.clone();
        hub.missed = 0;
        EventStream { rx, backlog }
    }

    /// Hands an event to the subscriber. It is built only when someone may read it and the
    /// buffer has room (a `Completed` clones the result).
    pub(crate) fn emit_with(&self, event: impl FnOnce() -> WorkerEvent) {
        let mut hub = self.hub();
        match &hub.tx {
            None => return,
            Some(tx) if tx.is_closed() => {
                hub.tx = None;
                return;
            }
            Some(_) => {}
        }
        // A `Lagged` goes first when events were dropped: room for both, or neither is sent.
        let slots = if hub.missed > 0 { 2 } else { 1 };
        if !hub.fits(slots, 0) {
            hub.missed += 1;
            return;
        }
        let event = event();
        let bytes = event.approx_bytes();
        let lagged = (hub.missed > 0).then(|| WorkerEvent::Lagged { missed: hub.missed });
        let lagged_bytes = lagged.as_ref().map_or(0, WorkerEvent::approx_bytes);
        // Both or neither: a small `Lagged` must not take the room its event then lacks.
        if !hub.fits(slots, lagged_bytes + bytes) {
            hub.missed += 1;
            return;
        }
        if let Some(lagged) = lagged {
            if !hub.send(lagged, lagged_bytes) {
                hub.missed += 1;
                return;
            }
            hub.missed = 0;
        }
        if !hub.send(event, bytes) {
            hub.missed += 1;
        }
    }

    pub(crate) fn progress(&self, id: &str, progress: f64, message: Option<String>) {
        self.emit_with(|| WorkerEvent::Progress {
            id: id.to_owned(),
            progress,
            message,
        });
    }

    /// The worker is done: the stream ends once its buffer is read.
    pub(crate) fn close(&self) {
        let mut hub = self.hub();
        hub.closed = true;
        hub.tx = None;
    }
}

impl Hub {
    /// Whether this many more events and bytes fit in the buffer. One event larger than the
    /// byte bound passes when nothing else waits, or it could never be delivered.
    fn fits(&self, events: usize, bytes: usize) -> bool {
        let held = self.backlog.bytes.load(Ordering::Acquire);
        self.backlog.events.load(Ordering::Acquire) + events <= WORKER_EVENTS_BUFFER
            && (held == 0 || held + bytes <= WORKER_EVENTS_BUFFER_BYTES)
    }

    /// Puts the event in the buffer if the channel has room; `false` if it was dropped.
    fn send(&mut self, event: WorkerEvent, bytes: usize) -> bool {
        let Some(tx) = &mut self.tx else { return false };
        // Counted before it is sent: the stream may take it (and give it back) at once.
        self.backlog.add(bytes);
        match tx.try_send((event, bytes)) {
            Ok(()) => true,
            Err(e) => {
                self.backlog.take(bytes);
                if e.is_disconnected() {
                    self.tx = None;
                }
                false
            }
        }
    }
}

/// What a buffer holds, counted by the hub as it sends and by the stream as it yields.
#[derive(Default)]
struct Backlog {
    events: AtomicUsize,
    bytes: AtomicUsize,
}

impl Backlog {
    fn add(&self, bytes: usize) {
        self.events.fetch_add(1, Ordering::AcqRel);
        self.bytes.fetch_add(bytes, Ordering::AcqRel);
    }

    fn take(&self, bytes: usize) {
        self.events.fetch_sub(1, Ordering::AcqRel);
        self.bytes.fetch_sub(bytes, Ordering::AcqRel);
    }
}

/// The subscriber's end of [`WorkerEvents`]: gives each event back to the bounds as it yields
/// it.
pub(crate) struct EventStream {
    rx: mpsc::Receiver<Held>,
    backlog: Arc<Backlog>,
}

impl Stream for EventStream {
    type Item = WorkerEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<WorkerEvent>> {
        self.rx.poll_next_unpin(cx).map(|held| {
            held.map(|(event, bytes)| {
                self.backlog.take(bytes);
                event
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::FutureExt;

    fn active(n: usize) -> WorkerEvent {
        WorkerEvent::Active { id: n.to_string() }
    }

    /// Everything ready in the stream now, and whether it has ended.
    fn drain(stream: &mut EventStream) -> (Vec<WorkerEvent>, bool) {
        let mut out = Vec::new();
        loop {
            match stream.next().now_or_never() {
                Some(Some(e)) => out.push(e),
                Some(None) => return (out, true),
                None => return (out, false),
            }
        }
    }

    #[test]
    fn the_first_subscriber_gets_the_events_since_the_start() {
        let events = WorkerEvents::default();
        events.emit_with(|| active(1));
        events.emit_with(|| WorkerEvent::Drained);
        let mut stream = events.subscribe();
        events.emit_with(|| active(2));
        let (seen, ended) = drain(&mut stream);
        assert_eq!(seen, [active(1), WorkerEvent::Drained, active(2)]);
        assert!(!ended);
    }

    #[test]
    fn a_later_subscriber_starts_now_and_ends_the_earlier_stream() {
        let events = WorkerEvents::default();
        let mut first = events.subscribe();
        events.emit_with(|| active(1));
        let mut second = events.subscribe();
        events.emit_with(|| active(2));
        assert_eq!(drain(&mut first), (vec![active(1)], true));
        assert_eq!(drain(&mut second), (vec![active(2)], false));
    }

    #[test]
    fn close_ends_the_stream_after_what_it_holds() {
        let events = WorkerEvents::default();
        events.emit_with(|| active(1));
        events.close();
        events.emit_with(|| active(2));
        assert_eq!(drain(&mut events.subscribe()), (vec![active(1)], true));
        // A subscriber after the close gets an ended stream, not one that never ends.
        assert_eq!(drain(&mut events.subscribe()), (vec![], true));
    }

    #[test]
    fn the_count_bound_drops_and_reports_lagged() {
        let events = WorkerEvents::default();
        let mut stream = events.subscribe();
        let extra = 5;
        for n in 0..WORKER_EVENTS_BUFFER + extra {
            events.emit_with(|| active(n));
        }
        let (seen, _) = drain(&mut stream);
        assert_eq!(
            seen,
            (0..WORKER_EVENTS_BUFFER).map(active).collect::<Vec<_>>()
        );
        events.emit_with(|| active(0));
        assert_eq!(
            drain(&mut stream).0,
            [
                WorkerEvent::Lagged {
                    missed: extra as u64
                },
                active(0)
            ]
        );
    }

    #[test]
    fn the_byte_bound_drops_large_results_until_read() {
        let events = WorkerEvents::default();
        let mut stream = events.subscribe();
        let big = |n: usize| WorkerEvent::Completed {
            id: n.to_string(),
            result: Value::Bin(vec![0; WORKER_EVENTS_BUFFER_BYTES / 4]),
        };
        for n in 0..8 {
            events.emit_with(|| big(n));
        }
        // Named by id, not printed whole when they differ.
        let ids = |seen: Vec<WorkerEvent>| -> Vec<String> {
            seen.into_iter()
                .map(|e| match e {
                    WorkerEvent::Completed { id, .. } => id,
                    other => format!("{other:?}"),
                })
                .collect()
        };
        assert_eq!(
            ids(drain(&mut stream).0),
            ["0", "1", "2"],
            "3 fit in the bytes"
        );
        // Read: the bytes are free again, and the drops are reported first.
        events.emit_with(|| big(9));
        assert_eq!(ids(drain(&mut stream).0), ["Lagged { missed: 5 }", "9"]);
    }

    #[test]
    fn one_event_over_the_byte_bound_passes_when_nothing_waits() {
        let events = WorkerEvents::default();
        let mut stream = events.subscribe();
        let huge = WorkerEvent::Completed {
            id: "h".into(),
            result: Value::Bin(vec![0; WORKER_EVENTS_BUFFER_BYTES * 2]),
        };
        events.emit_with(|| huge.clone());
        events.emit_with(|| active(1));
        assert_eq!(drain(&mut stream).0, [huge]);
    }

    #[test]
    fn nobody_listening_builds_nothing() {
        let events = WorkerEvents::default();
        drop(events.subscribe());
        events.emit_with(|| unreachable!("a dropped stream has no events built for it"));
    }

    #[test]
    fn a_full_buffer_builds_nothing() {
        // A worker nobody subscribed to fills its parked buffer once, then stops cloning
        // results for it.
        let events = WorkerEvents::default();
        for n in 0..WORKER_EVENTS_BUFFER {
            events.emit_with(|| active(n));
        }
        events.emit_with(|| unreachable!("no room: the event is not built"));
        let (seen, _) = drain(&mut events.subscribe());
        assert_eq!(seen.len(), WORKER_EVENTS_BUFFER);
    }

    #[test]
    fn a_deep_value_is_sized_without_recursion() {
        let mut v = Value::Str("x".into());
        for _ in 0..100_000 {
            v = Value::Array(vec![v]);
        }
        assert!(approx_value_bytes(&v) > 100_000);
        // Dropping it recursively would overflow the test's stack: take it apart by hand.
        let mut v = Some(v);
        while let Some(Value::Array(mut items)) = v.take() {
            v = items.pop();
        }
    }
}
