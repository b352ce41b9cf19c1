//! Protocol conformance with raw frames: framing, malformed input, validation, auth, lookups
//! and the official Worker's housekeeping.

mod common;

use autobatch_broker::{BrokerConfig, EmbeddedBroker};
use autobatch_core::wire::{write_frame, Value};
use common::*;

fn broker() -> EmbeddedBroker {
    EmbeddedBroker::start(BrokerConfig::default()).unwrap()
}

#[test]
fn hello_ping_and_req_id_echo() {
    let b = broker();
    let mut c = Raw::connect(b.addr());
    let r = c.call("Hello", vec![("protocolVersion", int(99))]);
    assert!(ok(&r));
    assert_eq!(r.get("protocolVersion"), Some(&int(3)));
    assert_eq!(r.get("server"), Some(&s("bunqueue")));
    let r = c.call("Ping", vec![]);
    let data = r.get("data").unwrap();
    assert_eq!(data.get("pong"), Some(&Value::Bool(true)));
    assert!(
        matches!(data.get("time"), Some(Value::F64(_))),
        "time is a float64"
    );
    // An int reqId comes back as an int; none comes back as undefined.
    c.send_value(&Value::map([("cmd", s("Ping")), ("reqId", int(42))]));
    assert_eq!(c.recv().get("reqId"), Some(&int(42)));
    c.send_value(&Value::map([("cmd", s("Ping"))]));
    assert_eq!(c.recv().get("reqId"), Some(&Value::Undefined));
}

#[test]
fn frames_split_across_writes_and_coalesced() {
    let b = broker();
    let mut c = Raw::connect(b.addr());
    let mut wire = Vec::new();
    for i in 0..20 {
        let v = Value::map([("cmd", s("Ping")), ("reqId", s(&i.to_string()))]);
        write_frame(&mut wire, |o| v.encode(o)).unwrap();
    }
    c.send_bytes(&wire); // twenty frames in one write
    let mut seen: Vec<String> = (0..20)
        .map(|_| c.recv().get("reqId").unwrap().as_str().unwrap().to_owned())
        .collect();
    seen.sort_by_key(|s| s.parse::<u32>().unwrap());
    assert_eq!(seen, (0..20).map(|i| i.to_string()).collect::<Vec<_>>());
    // One frame byte by byte.
    let mut one = Vec::new();
    let v = Value::map([("cmd", s("Ping")), ("reqId", s("x"))]);
    write_frame(&mut one, |o| v.encode(o)).unwrap();
    for byte in one {
        c.send_bytes(&[byte]);
    }
    assert_eq!(c.recv().get("reqId"), Some(&s("x")));
}

#[test]
fn malformed_input_gets_errors_and_the_connection_stays() {
    let b = broker();
    let mut c = Raw::connect(b.addr());
    let format = "Invalid command format";
    // Zero-length frame.
    c.send_bytes(&[0, 0, 0, 0]);
    let r = c.recv();
    assert_eq!(err(&r), format);
    assert_eq!(r.get("reqId"), Some(&Value::Undefined));
    // Reserved byte, truncated value, trailing bytes, nil.
    for body in [
        &[0xc1][..],
        &[0x92, 0x01],
        &[0xc0, 0xc0],
        &[0xc0],
        &[0xd9, 0x05, b'a'],
    ] {
        c.send_body(body);
        let r = c.recv();
        assert_eq!(err(&r), format, "{body:?}");
        assert_eq!(r.get("reqId"), Some(&Value::Undefined));
    }
    // Decodable but not a command.
    for v in [
        int(5),
        arr(vec![s("PUSH")]),
        s("Ping"),
        Value::map([("reqId", int(3))]),
        Value::map([("cmd", int(1)), ("reqId", int(3))]),
    ] {
        c.send_value(&v);
        let r = c.recv();
        assert_eq!(err(&r), "Invalid command", "{v:?}");
        assert_eq!(
            r.get("reqId"),
            Some(&Value::Undefined),
            "only string reqIds are echoed"
        );
    }
    c.send_value(&Value::map([("reqId", s("r1"))]));
    let r = c.recv();
    assert_eq!(err(&r), "Invalid command");
    assert_eq!(r.get("reqId"), Some(&s("r1")));
    // Unknown and case-mismatched commands.
    assert_eq!(err(&c.call("Bogus", vec![])), "Unknown command: Bogus");
    assert_eq!(err(&c.call("ping", vec![])), "Unknown command: ping");
    // Still usable.
    assert!(ok(&c.call("Ping", vec![])));
}

#[test]
fn oversized_header_gets_one_error_then_fin_and_others_are_unaffected() {
    let b = broker();
    let mut other = Raw::connect(b.addr());
    let mut c = Raw::connect(b.addr());
    assert!(ok(&c.call("Ping", vec![])));
    let mut bytes = (64u32 * 1024 * 1024 + 1).to_be_bytes().to_vec();
    bytes.extend_from_slice(&[0xc0; 100]);
    c.send_bytes(&bytes);
    let r = c.recv();
    assert_eq!(
        err(&r),
        "Frame too large: 67108865 bytes exceeds maximum 67108864"
    );
    assert_eq!(r.get("reqId"), Some(&Value::Undefined));
    assert!(c.at_eof(), "the broker closes after the error frame");
    assert!(ok(&other.call("Ping", vec![])));
    // Exactly 64 MiB is accepted: the broker waits for the body (a Ping after it on another
    // connection still answers).
    let mut c = Raw::connect(b.addr());
    c.send_bytes(&(64u32 * 1024 * 1024).to_be_bytes());
    assert!(ok(&other.call("Ping", vec![])));
}

#[test]
fn wrong_types_in_every_push_field_get_typed_errors() {
    let b = broker();
    let mut c = Raw::connect(b.addr());
    let mut other = Raw::connect(b.addr());
    let cases: Vec<(&str, Value, &str)> = vec![
        ("queue", int(1), "Queue name is required"),
        (
            "queue",
            s("bad queue"),
            "Queue name contains invalid characters",
        ),
        (
            "queue",
            s(&"q".repeat(257)),
            "Queue name too long (max 256 characters)",
        ),
        (
            "name",
            int(1),
            "Job name must be a non-empty string of at most 256 characters",
        ),
        (
            "name",
            s(""),
            "Job name must be a non-empty string of at most 256 characters",
        ),
        (
            "data",
            Value::BigInt(1),
            "Job data must be JSON serializable",
        ),
        ("priority", s("x"), "priority must be a number"),
        ("priority", Value::F64(1.5), "priority must be an integer"),
        ("priority", Value::BigInt(5), "priority must be a number"),
        (
            "priority",
            int(2_000_000),
            "priority must be at most 1000000",
        ),
        ("delay", s("x"), "delay must be a number"),
        ("delay", int(-1), "delay must be at least 0"),
        ("maxAttempts", int(0), "maxAttempts must be at least 1"),
        (
            "maxAttempts",
            Value::Bool(true),
            "maxAttempts must be a number",
        ),
        ("backoff", s("x"), "backoff must be a number"),
        (
            "backoff",
            Value::map([("type", s("linear"))]),
            "backoff.type must be 'fixed' or 'exponential'",
        ),
        ("timeout", s("x"), "timeout must be a number"),
        ("ttl", arr(vec![]), "ttl must be a number"),
        (
            "timestamp",
            Value::BigInt(1),
            "Invalid mix of BigInt and other type in addition.",
        ),
    ];
    for (field, bad, msg) in cases {
        let mut pairs = vec![("queue", s("q")), ("name", s("n")), ("data", int(1))];
        pairs.retain(|(k, _)| *k != field);
        pairs.push((field, bad.clone()));
        let r = c.call("PUSH", pairs);
        assert_eq!(err(&r), msg, "{field} = {bad:?}");
        assert!(ok(&other.call("Ping", vec![])));
    }
    assert_eq!(
        other.call("Count", vec![("queue", s("q"))]).get("count"),
        Some(&int(0))
    );
    assert!(
        ok(&c.call("Ping", vec![])),
        "the connection is still usable"
    );
}

#[test]
fn pushb_validates_every_item_first() {
    let b = broker();
    let mut c = Raw::connect(b.addr());
    let good = Value::map([("name", s("a")), ("data", int(1))]);
    let bad = Value::map([("name", s("b")), ("priority", s("high"))]);
    let r = c.call(
        "PUSHB",
        vec![
            ("queue", s("q")),
            ("jobs", arr(vec![good.clone(), bad, good.clone()])),
        ],
    );
    assert_eq!(err(&r), "jobs[1]: priority must be a number");
    assert_eq!(
        c.call("Count", vec![("queue", s("q"))]).get("count"),
        Some(&int(0))
    );
    let r = c.call("PUSHB", vec![("queue", s("q")), ("jobs", arr(vec![]))]);
    assert_eq!(r.get("ids"), Some(&arr(vec![])));
    let dep = Value::map([("name", s("a")), ("dependsOn", arr(vec![s("nope")]))]);
    let r = c.call(
        "PUSHB",
        vec![("queue", s("q")), ("jobs", arr(vec![good, dep]))],
    );
    assert_eq!(err(&r), "jobs[1]: Dependency job not found: nope");
    assert_eq!(
        c.call("Count", vec![("queue", s("q"))]).get("count"),
        Some(&int(0))
    );
}

#[test]
fn lookups_counts_and_results() {
    let b = broker();
    let mut c = Raw::connect(b.addr());
    let id = push(&mut c, "q", Value::map([("x", int(1))]), vec![]);
    push(&mut c, "q", int(2), vec![("priority", int(5))]);
    push(&mut c, "q", int(3), vec![("delay", int(3_600_000))]);
    assert_eq!(id.len(), 36, "UUID text");
    let job = c.call("GetJob", vec![("id", s(&id))]);
    let job = job.get("job").unwrap();
    assert_eq!(job.get("state"), Some(&s("waiting")));
    assert_eq!(job.get("data"), Some(&Value::map([("x", int(1))])));
    assert!(matches!(job.get("createdAt"), Some(Value::F64(_))));
    assert_eq!(
        err(&c.call("GetJob", vec![("id", s("nope"))])),
        "Job not found"
    );
    let r = c.call("GetState", vec![("id", s("nope"))]);
    assert_eq!(r.get("state"), Some(&s("unknown")));
    assert_eq!(r.get("id"), Some(&s("nope")));
    assert_eq!(
        c.call("Count", vec![("queue", s("q"))]).get("count"),
        Some(&int(3))
    );
    let counts = c.call("GetJobCounts", vec![("queue", s("q"))]);
    let counts = counts.get("counts").unwrap();
    for (k, n) in [
        ("waiting", 1),
        ("prioritized", 1),
        ("delayed", 1),
        ("active", 0),
        ("completed", 0),
        ("failed", 0),
        ("waiting-children", 0),
        ("paused", 0),
    ] {
        assert_eq!(counts.get(k), Some(&int(n)), "{k}");
    }
    // The prioritized job comes first; ack it with a result.
    let r = c.call("PULL", vec![("queue", s("q"))]);
    assert!(r.get("token").is_none(), "no owner, no token key");
    let first = r.get("job").unwrap().get("id").unwrap().clone();
    assert_ne!(first, s(&id));
    let r = c.call("ACK", vec![("id", first.clone()), ("result", s("done"))]);
    assert!(ok(&r));
    assert_eq!(r.get("id"), Some(&Value::Undefined));
    assert_eq!(
        c.call("GetResult", vec![("id", first.clone())])
            .get("result"),
        Some(&s("done"))
    );
    assert_eq!(
        c.call("GetState", vec![("id", first)]).get("state"),
        Some(&s("completed"))
    );
    assert_eq!(
        c.call("GetResult", vec![("id", s("nope"))]).get("result"),
        Some(&Value::Undefined)
    );
}

#[test]
fn auth_gates_every_command() {
    let b = EmbeddedBroker::start(BrokerConfig::default().auth_token("secret")).unwrap();
    let mut c = Raw::connect(b.addr());
    for cmd in ["Ping", "Hello", "SubscribeEvents", "PUSH", "Nonsense"] {
        assert_eq!(err(&c.call(cmd, vec![])), "Not authenticated", "{cmd}");
    }
    assert_eq!(
        err(&c.call("Auth", vec![("token", s("wrong"))])),
        "Invalid token"
    );
    assert_eq!(
        err(&c.call("Auth", vec![("token", int(1))])),
        "Invalid token"
    );
    let r = c.call("Auth", vec![("token", s("secret"))]);
    assert!(ok(&r));
    assert_eq!(r.get("id"), Some(&Value::Undefined));
    assert!(ok(&c.call("Ping", vec![])));
    assert_eq!(
        err(&c.call("Auth", vec![("token", s("wrong"))])),
        "Invalid token"
    );
    assert!(
        ok(&c.call("Ping", vec![])),
        "a failed Auth does not undo a success"
    );
    // Per connection.
    let mut d = Raw::connect(b.addr());
    assert_eq!(err(&d.call("Ping", vec![])), "Not authenticated");
    // Without tokens, Auth fails.
    let open = broker();
    let mut e = Raw::connect(open.addr());
    assert_eq!(
        err(&e.call("Auth", vec![("token", s("secret"))])),
        "Invalid token"
    );
}

#[test]
fn worker_housekeeping() {
    let b = broker();
    let mut c = Raw::connect(b.addr());
    let r = c.call("SubscribeEvents", vec![("queue", s("q"))]);
    assert!(ok(&r));
    assert_eq!(r.get("id"), Some(&Value::Undefined));
    assert!(ok(&c.call("UnsubscribeEvents", vec![("queue", s("q"))])));
    let r = c.call(
        "RegisterWorker",
        vec![
            ("name", s("w")),
            ("queues", arr(vec![s("q")])),
            ("workerId", s("w-1")),
        ],
    );
    assert_eq!(r.get("data").unwrap().get("workerId"), Some(&s("w-1")));
    let r = c.call("Heartbeat", vec![("id", s("w-1"))]);
    assert_eq!(r.get("data").unwrap().get("ok"), Some(&Value::Bool(true)));
    assert_eq!(
        err(&c.call("Heartbeat", vec![("id", s("w-2"))])),
        "Worker not found"
    );
    let id = push(&mut c, "q", int(1), vec![]);
    let (pid, token) = pull_owned(&mut c, "q").unwrap();
    assert_eq!(pid, id);
    assert!(ok(&c.call(
        "JobHeartbeat",
        vec![("id", s(&id)), ("token", s(&token))]
    )));
    assert_eq!(
        err(&c.call("JobHeartbeat", vec![("id", s(&id)), ("token", s("bad"))])),
        "Job not found or not active (or invalid token)"
    );
    let r = c.call(
        "JobHeartbeatB",
        vec![
            ("ids", arr(vec![s(&id), s("nope")])),
            ("tokens", arr(vec![s(&token), s("")])),
        ],
    );
    assert_eq!(r.get("data").unwrap().get("count"), Some(&int(1)));
    let r = c.call("UnregisterWorker", vec![("workerId", s("w-1"))]);
    assert_eq!(
        r.get("data").unwrap().get("removed"),
        Some(&Value::Bool(true))
    );
    assert_eq!(
        err(&c.call("UnregisterWorker", vec![("workerId", s("w-1"))])),
        "Worker not found"
    );
}

#[test]
fn garbage_from_one_client_does_not_affect_others() {
    let b = broker();
    let mut good = Raw::connect(b.addr());
    let mut bad = Raw::connect(b.addr());
    for i in 0..50u8 {
        bad.send_body(&[0xc1, i]);
        let id = push(&mut good, "q", int(i as i64), vec![]);
        assert_eq!(state(&mut good, &id), "waiting");
    }
    for _ in 0..50 {
        assert_eq!(err(&bad.recv()), "Invalid command format");
    }
    assert_eq!(
        good.call("Count", vec![("queue", s("q"))]).get("count"),
        Some(&int(50))
    );
}

#[test]
fn a_client_that_never_reads_does_not_stall_others() {
    let b = broker();
    let mut slow = Raw::connect(b.addr());
    let big = Value::Bin(vec![7; 1024 * 1024]);
    let id = push(&mut slow, "big", big, vec![]);
    // ~300 MiB of replies asked for, none read: the broker stops reading this socket once its
    // replies back up (and would close it past the 64 MiB budget) instead of buffering them.
    for _ in 0..300 {
        slow.send("GetJob", vec![("id", s(&id))]);
    }
    let mut other = Raw::connect(b.addr());
    for _ in 0..20 {
        assert!(ok(&other.call("Ping", vec![])));
    }
    assert_eq!(
        other.call("Count", vec![("queue", s("big"))]).get("count"),
        Some(&int(1))
    );
}
