//! Queue events over raw frames: what a subscribed connection receives for a job's life (the
//! frames and keys bunqueue 2.9.5 sends, see `core/tests/vectors/ops/51_events.jsonl`), the
//! filter by queue, resubscription and unsubscription, and the cut-off of a subscriber that
//! does not read.

mod common;

use std::io::{ErrorKind, Read};
use std::time::{Duration, Instant};

use autobatch_broker::{BrokerConfig, EmbeddedBroker};
use autobatch_core::wire::Value;
use common::*;

fn broker() -> EmbeddedBroker {
    EmbeddedBroker::start(BrokerConfig::default()).unwrap()
}

fn subscribe(c: &mut Raw, queue: &str) {
    let r = c.call("SubscribeEvents", vec![("queue", s(queue))]);
    assert!(ok(&r), "{r:?}");
    assert_eq!(r.get("id"), Some(&Value::Undefined), "{r:?}");
}

/// The next frame, which must be an event: its `event` map.
fn event(c: &mut Raw) -> Value {
    let f = c.recv();
    assert_eq!(
        f.get("type").and_then(Value::as_str),
        Some("event"),
        "{f:?}"
    );
    assert!(f.get("reqId").is_none(), "an event has no reqId: {f:?}");
    f.get("event").cloned().expect("an event map")
}

fn keys(v: &Value) -> Vec<String> {
    match v {
        Value::Map(m) => m
            .iter()
            .map(|(k, _)| k.as_str().unwrap_or_default().to_owned())
            .collect(),
        other => panic!("not a map: {other:?}"),
    }
}

fn field<'a>(v: &'a Value, k: &str) -> &'a Value {
    v.get(k).unwrap_or_else(|| panic!("no {k} in {v:?}"))
}

/// `(eventType, jobId)` after checking the timestamp is a float64 epoch ms, as bunqueue's.
fn kind(e: &Value) -> (String, String) {
    assert!(
        matches!(field(e, "timestamp"), Value::F64(t) if *t > 1e12),
        "{e:?}"
    );
    (
        field(e, "eventType").as_str().unwrap().to_owned(),
        field(e, "jobId").as_str().unwrap().to_owned(),
    )
}

#[test]
fn a_jobs_life_in_bunqueues_frames() {
    let b = broker();
    let mut sub = Raw::connect(b.addr());
    subscribe(&mut sub, "life");
    let mut p = Raw::connect(b.addr());

    let id = push(
        &mut p,
        "life",
        Value::map([("n", int(1))]),
        vec![("maxAttempts", int(1))],
    );
    let e = event(&mut sub);
    assert_eq!(keys(&e), ["eventType", "queue", "jobId", "timestamp"]);
    assert_eq!(kind(&e), ("pushed".into(), id.clone()));
    assert_eq!(field(&e, "queue"), &s("life"));

    let (pulled, token) = pull_owned(&mut p, "life").unwrap();
    assert_eq!(pulled, id);
    let e = event(&mut sub);
    assert_eq!(keys(&e), ["eventType", "queue", "jobId", "timestamp"]);
    assert_eq!(kind(&e), ("pulled".into(), id.clone()));

    let r = p.call("Progress", vec![("id", s(&id)), ("progress", int(50))]);
    assert!(ok(&r), "{r:?}");
    let e = event(&mut sub);
    assert_eq!(
        keys(&e),
        [
            "eventType",
            "jobId",
            "queue",
            "timestamp",
            "progress",
            "data"
        ]
    );
    assert_eq!(kind(&e), ("progress".into(), id.clone()));
    assert_eq!(field(&e, "progress"), &int(50));
    assert_eq!(
        field(&e, "data"),
        &Value::map([("progress", int(50)), ("message", Value::Nil)])
    );

    let result = Value::map([("done", Value::Bool(true))]);
    let r = p.call(
        "ACK",
        vec![
            ("id", s(&id)),
            ("token", s(&token)),
            ("result", result.clone()),
        ],
    );
    assert!(ok(&r), "{r:?}");
    let e = event(&mut sub);
    assert_eq!(
        keys(&e),
        ["eventType", "queue", "jobId", "timestamp", "data"]
    );
    assert_eq!(kind(&e), ("completed".into(), id.clone()));
    assert_eq!(field(&e, "data"), &result);

    // A failure for good: its reason, the job's data, terminal.
    let bad = push(
        &mut p,
        "life",
        Value::map([("n", int(2))]),
        vec![("maxAttempts", int(1))],
    );
    let (_, token) = pull_owned(&mut p, "life").unwrap();
    let r = p.call(
        "FAIL",
        vec![("id", s(&bad)), ("token", s(&token)), ("error", s("boom"))],
    );
    assert!(ok(&r), "{r:?}");
    assert_eq!(kind(&event(&mut sub)), ("pushed".into(), bad.clone()));
    assert_eq!(kind(&event(&mut sub)), ("pulled".into(), bad.clone()));
    let e = event(&mut sub);
    assert_eq!(
        keys(&e),
        [
            "eventType",
            "queue",
            "jobId",
            "timestamp",
            "error",
            "data",
            "terminal"
        ]
    );
    assert_eq!(kind(&e), ("failed".into(), bad.clone()));
    assert_eq!(field(&e, "error"), &s("boom"));
    assert_eq!(field(&e, "data"), &Value::map([("n", int(2))]));
    assert_eq!(field(&e, "terminal"), &Value::Bool(true));

    // A delayed add is `pushed` (not `delayed`); removing it is `removed`, prev waiting.
    let later = push(
        &mut p,
        "life",
        Value::Map(vec![]),
        vec![("delay", int(60_000))],
    );
    assert_eq!(kind(&event(&mut sub)), ("pushed".into(), later.clone()));
    assert!(ok(&p.call("Cancel", vec![("id", s(&later))])));
    let e = event(&mut sub);
    assert_eq!(
        keys(&e),
        ["eventType", "jobId", "queue", "timestamp", "prev"]
    );
    assert_eq!(kind(&e), ("removed".into(), later));
    assert_eq!(field(&e, "prev"), &s("waiting"));
}

#[test]
fn batches_retries_and_moves() {
    let b = broker();
    let mut sub = Raw::connect(b.addr());
    subscribe(&mut sub, "more");
    let mut p = Raw::connect(b.addr());

    // PUSHB: one `pushed` per job, in order.
    let job = |n: i64| Value::map([("name", s("j")), ("data", Value::map([("n", int(n))]))]);
    let r = p.call(
        "PUSHB",
        vec![
            ("queue", s("more")),
            ("jobs", arr(vec![job(1), job(2), job(3)])),
        ],
    );
    assert!(ok(&r), "{r:?}");
    let ids = strings(&r, "ids");
    for id in &ids {
        assert_eq!(kind(&event(&mut sub)), ("pushed".into(), id.clone()));
    }
    // PULLB: one `pulled` per job.
    let r = p.call(
        "PULLB",
        vec![("queue", s("more")), ("count", int(3)), ("owner", s("w"))],
    );
    assert!(ok(&r), "{r:?}");
    let tokens = strings(&r, "tokens");
    for id in &ids {
        assert_eq!(kind(&event(&mut sub)), ("pulled".into(), id.clone()));
    }
    // A failure with attempts left: `failed` not terminal, then `retried` (prev failed).
    let r = p.call(
        "FAIL",
        vec![
            ("id", s(&ids[0])),
            ("token", s(&tokens[0])),
            ("error", s("again")),
        ],
    );
    assert!(ok(&r), "{r:?}");
    let e = event(&mut sub);
    assert_eq!(kind(&e), ("failed".into(), ids[0].clone()));
    assert_eq!(field(&e, "terminal"), &Value::Bool(false));
    let e = event(&mut sub);
    assert_eq!(
        keys(&e),
        ["eventType", "queue", "jobId", "timestamp", "prev"]
    );
    assert_eq!(kind(&e), ("retried".into(), ids[0].clone()));
    assert_eq!(field(&e, "prev"), &s("failed"));
    // MoveToDelayed: `delayed` with the delay.
    let r = p.call(
        "MoveToDelayed",
        vec![
            ("id", s(&ids[1])),
            ("delay", int(5000)),
            ("token", s(&tokens[1])),
        ],
    );
    assert!(ok(&r), "{r:?}");
    let e = event(&mut sub);
    assert_eq!(
        keys(&e),
        ["eventType", "jobId", "queue", "timestamp", "delay"]
    );
    assert_eq!(kind(&e), ("delayed".into(), ids[1].clone()));
    assert_eq!(field(&e, "delay"), &int(5000));
    // A queued job's new delay emits nothing (2.9.5): the next event is the ACKB's.
    let r = p.call(
        "ChangeDelay",
        vec![("id", s(&ids[1])), ("delay", int(9000))],
    );
    assert!(ok(&r), "{r:?}");
    // ACKB: one `completed` per job, with its result.
    let r = p.call(
        "ACKB",
        vec![
            ("ids", arr(vec![s(&ids[2])])),
            ("results", arr(vec![int(7)])),
            ("tokens", arr(vec![s(&tokens[2])])),
        ],
    );
    assert!(ok(&r), "{r:?}");
    let e = event(&mut sub);
    assert_eq!(kind(&e), ("completed".into(), ids[2].clone()));
    assert_eq!(field(&e, "data"), &int(7));
    // An add deduplicated by a live unique key: `duplicated` with the live job's id.
    let first = push(
        &mut p,
        "more",
        Value::Map(vec![]),
        vec![("uniqueKey", s("u1"))],
    );
    assert_eq!(kind(&event(&mut sub)), ("pushed".into(), first.clone()));
    let again = push(
        &mut p,
        "more",
        Value::Map(vec![]),
        vec![("uniqueKey", s("u1"))],
    );
    assert_eq!(again, first);
    let e = event(&mut sub);
    assert_eq!(keys(&e), ["eventType", "queue", "jobId", "timestamp"]);
    assert_eq!(kind(&e), ("duplicated".into(), first));
    // Pause and resume: queue events with an empty jobId.
    assert!(ok(&p.call("Pause", vec![("queue", s("more"))])));
    assert!(ok(&p.call("Resume", vec![("queue", s("more"))])));
    for t in ["paused", "resumed"] {
        let e = event(&mut sub);
        assert_eq!(keys(&e), ["eventType", "queue", "jobId", "timestamp"]);
        assert_eq!(kind(&e), (t.into(), String::new()));
    }
}

#[test]
fn filtered_by_queue_replaced_and_ended() {
    let b = broker();
    let mut sub = Raw::connect(b.addr());
    let mut p = Raw::connect(b.addr());
    // Not subscribed yet: nothing (the reply to Ping comes first).
    push(&mut p, "a", Value::Map(vec![]), vec![]);
    assert!(ok(&sub.call("Ping", vec![])));
    subscribe(&mut sub, "a");
    push(&mut p, "b", Value::Map(vec![]), vec![]); // another queue: not sent
    let a1 = push(&mut p, "a", Value::Map(vec![]), vec![]);
    assert_eq!(kind(&event(&mut sub)), ("pushed".into(), a1));
    // Subscribing again replaces the queue.
    subscribe(&mut sub, "b");
    push(&mut p, "a", Value::Map(vec![]), vec![]);
    let b1 = push(&mut p, "b", Value::Map(vec![]), vec![]);
    assert_eq!(kind(&event(&mut sub)), ("pushed".into(), b1));
    // Unsubscribed: nothing more; unsubscribing twice is fine.
    assert!(ok(&sub.call("UnsubscribeEvents", vec![])));
    assert!(ok(&sub.call("UnsubscribeEvents", vec![])));
    push(&mut p, "b", Value::Map(vec![]), vec![]);
    assert!(ok(&sub.call("Ping", vec![])), "no event before the reply");
    // Validation as bunqueue's.
    let r = sub.call("SubscribeEvents", vec![("queue", s("bad name!"))]);
    assert_eq!(err(&r), "Queue name contains invalid characters");
    let r = sub.call("SubscribeEvents", vec![]);
    assert_eq!(err(&r), "Queue name is required");
}

#[test]
fn several_subscribers_each_get_every_event() {
    let b = broker();
    let mut subs: Vec<Raw> = (0..3).map(|_| Raw::connect(b.addr())).collect();
    for c in &mut subs {
        subscribe(c, "fan");
    }
    let mut p = Raw::connect(b.addr());
    let ids: Vec<String> = (0..5)
        .map(|i| push(&mut p, "fan", Value::map([("i", int(i))]), vec![]))
        .collect();
    for c in &mut subs {
        for id in &ids {
            assert_eq!(kind(&event(c)), ("pushed".into(), id.clone()));
        }
    }
    // A subscriber that leaves is forgotten; the others go on.
    drop(subs.pop());
    let last = push(&mut p, "fan", Value::Map(vec![]), vec![]);
    for c in &mut subs {
        assert_eq!(kind(&event(c)), ("pushed".into(), last.clone()));
    }
}

/// bunqueue's `dropForWriteOverflow`: a subscriber that does not read is cut off once its
/// pending output passes the write budget; the broker and its other clients go on.
#[test]
fn a_subscriber_that_does_not_read_is_cut_off() {
    let mut config = BrokerConfig::default();
    config.write_pause_bytes = 64 * 1024;
    config.max_write_queue_bytes = 256 * 1024;
    let b = EmbeddedBroker::start(config).unwrap();
    let mut sub = Raw::connect(b.addr());
    subscribe(&mut sub, "flood");
    let mut p = Raw::connect(b.addr());
    // Each failure's event carries the job's 64 KiB of data: a few hundred of them pass the
    // socket buffers and then the budget.
    let blob = Value::Str("x".repeat(64 * 1024));
    // ~25 MiB of events: more than loopback socket buffers hold, then the budget.
    let started = Instant::now();
    let mut sent = 0;
    while sent < 400 && started.elapsed() < Duration::from_secs(30) {
        let id = push(&mut p, "flood", blob.clone(), vec![("maxAttempts", int(1))]);
        let (_, token) = pull_owned(&mut p, "flood").unwrap();
        let r = p.call(
            "FAIL",
            vec![("id", s(&id)), ("token", s(&token)), ("error", s("x"))],
        );
        assert!(ok(&r), "{r:?}");
        sent += 1;
    }
    // Read now: what the kernel held, then the end of the connection.
    assert!(closed(&mut sub), "still open after {sent} big events");
    // The producer's connection is unaffected.
    assert!(ok(&p.call("Ping", vec![])));
}

/// Whether the broker closed `c`: its socket reaches EOF (or a reset) once what was queued
/// in the kernel is read.
fn closed(c: &mut Raw) -> bool {
    c.s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match c.s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) if Instant::now() < deadline => continue,
            Ok(_) => return false,
            // No more bytes for a while, and no end: still open.
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return false
            }
            Err(_) => return true,
        }
    }
}

/// The strings of the array `key` of a reply.
fn strings(reply: &Value, key: &str) -> Vec<String> {
    reply
        .get(key)
        .and_then(Value::as_array)
        .unwrap_or_else(|| panic!("no array `{key}` in {reply:?}"))
        .iter()
        .map(|v| v.as_str().expect("a string").to_owned())
        .collect()
}

/// A lost lock in bunqueue's frames: `stalled` (jobId before queue) when the job is requeued;
/// at its last attempt `stalled` with `data: {stallCount, action: "move_to_dlq"}`, then
/// `failed` with the reason text, and the job sits in the DLQ with that error.
#[test]
fn a_lost_lock_in_bunqueues_frames() {
    let b = broker();
    let mut sub = Raw::connect(b.addr());
    subscribe(&mut sub, "lost");
    let mut p = Raw::connect(b.addr());
    let id = push(&mut p, "lost", int(1), vec![("maxAttempts", int(2))]);
    assert_eq!(kind(&event(&mut sub)), ("pushed".into(), id.clone()));
    for attempt in 1..=2 {
        let r = p.call(
            "PULL",
            vec![
                ("queue", s("lost")),
                ("owner", s("w1")),
                ("lockTtl", int(50)),
            ],
        );
        assert!(ok(&r), "{r:?}");
        assert_eq!(kind(&event(&mut sub)), ("pulled".into(), id.clone()));
        // No heartbeat: the lock runs out and the broker's sweep takes the job back.
        let e = event(&mut sub);
        assert_eq!(kind(&e), ("stalled".into(), id.clone()));
        if attempt == 1 {
            assert_eq!(keys(&e), ["eventType", "jobId", "queue", "timestamp"]);
            assert_eq!(state(&mut p, &id), "waiting");
        } else {
            assert_eq!(
                keys(&e),
                ["eventType", "jobId", "queue", "timestamp", "data"]
            );
            // Nested maps arrive undecoded: expanded to be read.
            let data = field(&e, "data").expanded().unwrap();
            assert_eq!(field(&data, "stallCount"), &int(2));
            assert_eq!(field(&data, "action"), &s("move_to_dlq"));
            let f = event(&mut sub);
            assert_eq!(kind(&f), ("failed".into(), id.clone()));
            assert_eq!(
                field(&f, "error"),
                &s("Lock expired (max attempts reached)")
            );
        }
    }
    assert_eq!(state(&mut p, &id), "failed");
    let dlq = p.call("Dlq", vec![("queue", s("lost"))]);
    let entries = field(&dlq, "entries").expanded().unwrap();
    let entry = &entries.as_array().unwrap()[0];
    assert_eq!(field(entry, "reason"), &s("max_attempts_exceeded"));
    assert_eq!(
        field(entry, "error"),
        &s("Lock expired at max attempts (2)")
    );
}
