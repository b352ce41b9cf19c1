//! Queue events: what bunqueue pushes on a connection subscribed with [`SubscribeEvents`], typed.
//!
//! bunqueue 2.9.5 keeps **one** subscription per connection (`socket.data.eventQueue`): a
//! second `SubscribeEvents` replaces the first, `UnsubscribeEvents` clears it, and a new
//! connection starts unsubscribed. An event frame is `{type: "event", event: {eventType,
//! queue, jobId, timestamp, …}}` with no `reqId`; the session hands each one out as
//! [`Event::QueueEvent`](super::Event::QueueEvent) and [`QueueEvent::from_frame`] types it.
//!
//! Nothing is stored server-side: events emitted while a connection is down are gone. A
//! subscriber that reconnects is therefore told so ([`QueueEvent::Gap`]), and one that reads
//! too slowly is told how many it lost ([`QueueEvent::Lagged`]); both are produced by the
//! delivery layer (the driver's `QueueEvents`), never by the server.

use crate::ops::read::{number, reply_opt, text};
use crate::wire::Value;

pub use crate::ops::{SubscribeEvents, UnsubscribeEvents};

/// One event of a queue, as bunqueue 2.9.5 emits it (`JobEvent`), plus the two markers of the
/// delivery layer ([`Gap`](Self::Gap), [`Lagged`](Self::Lagged)).
///
/// Names follow the TS `QueueEvents` (BullMQ's): the server's `pushed` is [`Waiting`](Self::Waiting),
/// `pulled` is [`Active`](Self::Active).
///
/// ```
/// use autobatch_core::session::QueueEvent;
/// use autobatch_core::wire::Value;
/// let frame = Value::map([
///     ("type", Value::from("event")),
///     ("event", Value::map([
///         ("eventType", Value::from("completed")),
///         ("queue", Value::from("emails")),
///         ("jobId", Value::from("j1")),
///         ("timestamp", Value::F64(1.0e12)),
///         ("data", Value::from(42_i64)),
///     ])),
/// ]);
/// match QueueEvent::from_frame(&frame) {
///     QueueEvent::Completed { job_id, return_value, .. } => {
///         assert_eq!(job_id, "j1");
///         assert_eq!(return_value, Value::from(42_i64));
///     }
///     other => panic!("{other:?}"),
/// }
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum QueueEvent {
    /// A job was added (`pushed`), or became waiting again (`waiting`: its children finished,
    /// it was promoted or moved back to wait).
    Waiting {
        /// Job id.
        job_id: String,
        /// Server time, epoch milliseconds.
        timestamp: f64,
    },
    /// A worker took the job (`pulled`).
    Active {
        /// Job id.
        job_id: String,
        /// Server time, epoch milliseconds.
        timestamp: f64,
    },
    /// The job's progress changed (`progress`).
    Progress {
        /// Job id.
        job_id: String,
        /// The progress as sent (`progress`, else `data`): usually a number 0..=100.
        progress: Value,
        /// Server time, epoch milliseconds.
        timestamp: f64,
    },
    /// The job completed (`completed`) with its return value.
    Completed {
        /// Job id.
        job_id: String,
        /// What the worker returned ([`Value::Undefined`] when nothing was sent).
        return_value: Value,
        /// Server time, epoch milliseconds.
        timestamp: f64,
    },
    /// An attempt failed (`failed`); the job may be retried.
    Failed {
        /// Job id.
        job_id: String,
        /// The error text (`"Job failed"` when the server sent none, as the TS client says).
        reason: String,
        /// Server time, epoch milliseconds.
        timestamp: f64,
    },
    /// The job moved to delayed (`delayed`).
    Delayed {
        /// Job id.
        job_id: String,
        /// Delay in milliseconds (0 when not sent).
        delay: f64,
        /// Server time, epoch milliseconds.
        timestamp: f64,
    },
    /// The job was removed (`removed`).
    Removed {
        /// Job id.
        job_id: String,
        /// Its state before (`"unknown"` when not sent).
        prev: String,
        /// Server time, epoch milliseconds.
        timestamp: f64,
    },
    /// The job's lock expired without a heartbeat (`stalled`).
    Stalled {
        /// Job id.
        job_id: String,
        /// Server time, epoch milliseconds.
        timestamp: f64,
    },
    /// An add was refused as a duplicate (`duplicated`).
    Duplicated {
        /// Id of the job that already exists.
        job_id: String,
        /// Server time, epoch milliseconds.
        timestamp: f64,
    },
    /// A failed job was retried (`retried`).
    Retried {
        /// Job id.
        job_id: String,
        /// Its state before (`"failed"` when not sent).
        prev: String,
        /// Server time, epoch milliseconds.
        timestamp: f64,
    },
    /// A parent waits for its children (`waiting-children`).
    WaitingChildren {
        /// Job id.
        job_id: String,
        /// Server time, epoch milliseconds.
        timestamp: f64,
    },
    /// The queue has no more waiting jobs (`drained`).
    Drained {
        /// Server time, epoch milliseconds.
        timestamp: f64,
    },
    /// The queue was paused (`paused`).
    Paused {
        /// Server time, epoch milliseconds.
        timestamp: f64,
    },
    /// The queue was resumed (`resumed`).
    Resumed {
        /// Server time, epoch milliseconds.
        timestamp: f64,
    },
    /// An event type this version does not type, or a frame it cannot read: kept whole.
    Other {
        /// `eventType` (empty when absent).
        event_type: String,
        /// The `event` map as received (the whole frame when it had none).
        event: Value,
    },
    /// The connection was lost and the subscription renewed on a new one: events emitted in
    /// between were **not** delivered (bunqueue keeps none for a subscriber). Re-read what
    /// matters (job states, counts) instead of assuming nothing happened.
    Gap,
    /// The consumer read too slowly: the buffer was full and its `missed` oldest events were
    /// dropped. Delivered before the events that were kept.
    Lagged {
        /// Events dropped since the last delivered one.
        missed: u64,
    },
}

impl QueueEvent {
    /// Types an event frame (`{type: "event", event: {…}}`), or an `event` map alone. Never
    /// fails: what it cannot read becomes [`Other`](Self::Other).
    pub fn from_frame(frame: &Value) -> QueueEvent {
        let event = match frame.get("event") {
            Some(e @ Value::Map(_)) => e,
            _ => frame,
        };
        let event_type = event
            .get("eventType")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let job_id = event.get("jobId").and_then(text);
        let timestamp = event.get("timestamp").and_then(number).unwrap_or(0.0);
        let other = || QueueEvent::Other {
            event_type: event_type.to_owned(),
            event: event.clone(),
        };
        let str_or = |key: &str, default: &str| {
            reply_opt(event, key)
                .and_then(text)
                .unwrap_or_else(|| default.to_owned())
        };
        // Events about the queue carry no job; every other one must name its job.
        match event_type {
            "drained" => return QueueEvent::Drained { timestamp },
            "paused" => return QueueEvent::Paused { timestamp },
            "resumed" => return QueueEvent::Resumed { timestamp },
            _ => {}
        }
        let Some(job_id) = job_id else {
            return other();
        };
        match event_type {
            "pushed" | "waiting" => QueueEvent::Waiting { job_id, timestamp },
            "pulled" => QueueEvent::Active { job_id, timestamp },
            "progress" => QueueEvent::Progress {
                job_id,
                progress: reply_opt(event, "progress")
                    .or_else(|| event.get("data"))
                    .cloned()
                    .unwrap_or(Value::Undefined),
                timestamp,
            },
            "completed" => QueueEvent::Completed {
                job_id,
                return_value: event.get("data").cloned().unwrap_or(Value::Undefined),
                timestamp,
            },
            "failed" => QueueEvent::Failed {
                job_id,
                reason: str_or("error", "Job failed"),
                timestamp,
            },
            "delayed" => QueueEvent::Delayed {
                job_id,
                delay: reply_opt(event, "delay").and_then(number).unwrap_or(0.0),
                timestamp,
            },
            "removed" => QueueEvent::Removed {
                job_id,
                prev: str_or("prev", "unknown"),
                timestamp,
            },
            "stalled" => QueueEvent::Stalled { job_id, timestamp },
            "duplicated" => QueueEvent::Duplicated { job_id, timestamp },
            "retried" => QueueEvent::Retried {
                job_id,
                prev: str_or("prev", "failed"),
                timestamp,
            },
            "waiting-children" => QueueEvent::WaitingChildren { job_id, timestamp },
            _ => other(),
        }
    }

    /// The job the event is about, if any.
    pub fn job_id(&self) -> Option<&str> {
        match self {
            QueueEvent::Waiting { job_id, .. }
            | QueueEvent::Active { job_id, .. }
            | QueueEvent::Progress { job_id, .. }
            | QueueEvent::Completed { job_id, .. }
            | QueueEvent::Failed { job_id, .. }
            | QueueEvent::Delayed { job_id, .. }
            | QueueEvent::Removed { job_id, .. }
            | QueueEvent::Stalled { job_id, .. }
            | QueueEvent::Duplicated { job_id, .. }
            | QueueEvent::Retried { job_id, .. }
            | QueueEvent::WaitingChildren { job_id, .. } => Some(job_id),
            QueueEvent::Other { event, .. } => event.get("jobId").and_then(Value::as_str),
            _ => None,
        }
    }

    /// The TS `QueueEvents` event name (`"waiting"`, `"active"`, `"completed"`, …; the raw
    /// `eventType` for [`Other`](Self::Other); `"gap"` and `"lagged"` for the markers).
    pub fn name(&self) -> &str {
        match self {
            QueueEvent::Waiting { .. } => "waiting",
            QueueEvent::Active { .. } => "active",
            QueueEvent::Progress { .. } => "progress",
            QueueEvent::Completed { .. } => "completed",
            QueueEvent::Failed { .. } => "failed",
            QueueEvent::Delayed { .. } => "delayed",
            QueueEvent::Removed { .. } => "removed",
            QueueEvent::Stalled { .. } => "stalled",
            QueueEvent::Duplicated { .. } => "duplicated",
            QueueEvent::Retried { .. } => "retried",
            QueueEvent::WaitingChildren { .. } => "waiting-children",
            QueueEvent::Drained { .. } => "drained",
            QueueEvent::Paused { .. } => "paused",
            QueueEvent::Resumed { .. } => "resumed",
            QueueEvent::Other { event_type, .. } => event_type,
            QueueEvent::Gap => "gap",
            QueueEvent::Lagged { .. } => "lagged",
        }
    }
}

/// An event frame in the server role: `{type: "event", event}` (for the broker).
///
/// ```
/// use autobatch_core::session::{event_frame, QueueEvent};
/// use autobatch_core::wire::Value;
/// let ev = Value::map([("eventType", Value::from("pulled")), ("queue", Value::from("q")), ("jobId", Value::from("1")), ("timestamp", Value::F64(1.0))]);
/// assert_eq!(QueueEvent::from_frame(&event_frame(ev)), QueueEvent::Active { job_id: "1".into(), timestamp: 1.0 });
/// ```
pub fn event_frame(event: Value) -> Value {
    Value::map([("type", Value::from("event")), ("event", event)])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(kvs: &[(&str, Value)]) -> Value {
        event_frame(Value::map(kvs.iter().map(|(k, v)| (*k, v.clone()))))
    }

    #[test]
    fn every_2_9_5_event_type_is_typed() {
        let types = [
            ("pushed", "waiting"),
            ("waiting", "waiting"),
            ("pulled", "active"),
            ("progress", "progress"),
            ("completed", "completed"),
            ("failed", "failed"),
            ("delayed", "delayed"),
            ("removed", "removed"),
            ("stalled", "stalled"),
            ("duplicated", "duplicated"),
            ("retried", "retried"),
            ("waiting-children", "waiting-children"),
            ("drained", "drained"),
            ("paused", "paused"),
            ("resumed", "resumed"),
        ];
        for (wire, name) in types {
            let e = QueueEvent::from_frame(&ev(&[
                ("eventType", Value::from(wire)),
                ("queue", Value::from("q")),
                ("jobId", Value::from("7")),
                ("timestamp", Value::F64(5.0)),
            ]));
            assert_eq!(e.name(), name, "{wire}");
            assert!(!matches!(e, QueueEvent::Other { .. }), "{wire}");
        }
    }

    #[test]
    fn unknown_or_jobless_events_are_kept_whole() {
        let e = QueueEvent::from_frame(&ev(&[("eventType", Value::from("new-thing"))]));
        assert_eq!(e.name(), "new-thing");
        let e = QueueEvent::from_frame(&ev(&[("eventType", Value::from("completed"))]));
        assert!(matches!(e, QueueEvent::Other { .. }));
        let e = QueueEvent::from_frame(&Value::from(3_i64));
        assert!(matches!(e, QueueEvent::Other { .. }));
    }

    #[test]
    fn the_session_hands_out_event_frames_in_order() {
        use crate::session::{Event, Session, SessionConfig};
        use crate::wire::write_frame;

        let now = crate::test_origin();
        let mut s = Session::new(SessionConfig::default(), now).expect("config");
        while s.poll_event().is_some() {}
        s.handle_connected(now);
        let mut input = Vec::new();
        for (i, t) in ["pushed", "pulled"].iter().enumerate() {
            let frame = ev(&[
                ("eventType", Value::from(*t)),
                ("queue", Value::from("q")),
                ("jobId", Value::from(format!("j{i}"))),
            ]);
            write_frame(&mut input, |out| frame.encode(out)).expect("small frame");
        }
        let first_len = {
            let mut one = Vec::new();
            write_frame(&mut one, |out| {
                ev(&[
                    ("eventType", Value::from("pushed")),
                    ("queue", Value::from("q")),
                    ("jobId", Value::from("j0")),
                ])
                .encode(out)
            })
            .expect("small frame");
            one.len() - 4
        };
        s.handle_input(now, &input);
        let mut got = Vec::new();
        while let Some(e) = s.poll_event() {
            if let Event::QueueEvent { frame, bytes } = e {
                got.push((QueueEvent::from_frame(&frame), bytes));
            }
        }
        assert_eq!(
            got,
            vec![
                (
                    QueueEvent::Waiting {
                        job_id: "j0".into(),
                        timestamp: 0.0
                    },
                    first_len
                ),
                (
                    QueueEvent::Active {
                        job_id: "j1".into(),
                        timestamp: 0.0
                    },
                    first_len
                ),
            ]
        );
        assert!(s.is_connected(), "event frames are not protocol errors");
    }

    #[test]
    fn defaults_follow_the_ts_client() {
        let e = QueueEvent::from_frame(&ev(&[
            ("eventType", Value::from("failed")),
            ("jobId", Value::from("1")),
        ]));
        assert_eq!(
            e,
            QueueEvent::Failed {
                job_id: "1".into(),
                reason: "Job failed".into(),
                timestamp: 0.0
            }
        );
        let e = QueueEvent::from_frame(&ev(&[
            ("eventType", Value::from("progress")),
            ("jobId", Value::from("1")),
            ("data", Value::from(50_i64)),
        ]));
        assert_eq!(e.job_id(), Some("1"));
        assert!(
            matches!(e, QueueEvent::Progress { progress, .. } if progress == Value::from(50_i64))
        );
    }
}
