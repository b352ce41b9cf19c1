//! Queue behaviour over the wire: pipelining, long-poll, dedup, locks, ACKB, FAIL.
//! Outcomes only: no test asserts a duration.

mod common;

use std::time::Duration;

use autobatch_broker::{BrokerConfig, EmbeddedBroker};
use autobatch_core::wire::Value;
use common::*;

fn broker() -> EmbeddedBroker {
    EmbeddedBroker::start(BrokerConfig::default()).unwrap()
}

fn ids_of(r: &Value) -> Vec<String> {
    r.get("ids")
        .and_then(Value::as_array)
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect()
}

/// Polls GetState until it reads `want` (the broker handles a disconnect asynchronously).
fn eventually_state(c: &mut Raw, id: &str, want: &str) {
    for _ in 0..500 {
        if state(c, id) == want {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("{id} never reached {want}");
}

#[test]
fn replies_come_in_completion_order_and_long_poll_does_not_block() {
    let b = broker();
    let mut c = Raw::connect(b.addr());
    let pull = c.send("PULL", vec![("queue", s("lp")), ("timeout", int(30_000))]);
    let ping = c.send("Ping", vec![]);
    let counts = c.send("GetJobCounts", vec![("queue", s("lp"))]);
    let first: Vec<Value> = (0..2).map(|_| c.recv()).collect();
    let got: Vec<&str> = first
        .iter()
        .map(|r| r.get("reqId").unwrap().as_str().unwrap())
        .collect();
    assert!(
        got.contains(&ping.as_str()) && got.contains(&counts.as_str()),
        "{got:?}"
    );
    // The held PULL is woken by a PUSH on the same connection.
    let push = c.send(
        "PUSH",
        vec![("queue", s("lp")), ("name", s("n")), ("data", int(7))],
    );
    let a = c.recv();
    let bb = c.recv();
    let (push_reply, pull_reply) = if a.get("reqId") == Some(&s(&push)) {
        (a, bb)
    } else {
        (bb, a)
    };
    assert_eq!(pull_reply.get("reqId"), Some(&s(&pull)));
    let id = push_reply.get("id").unwrap();
    assert_eq!(pull_reply.get("job").unwrap().get("id"), Some(id));
    assert_eq!(pull_reply.get("job").unwrap().get("data"), Some(&int(7)));
}

#[test]
fn long_poll_is_woken_by_a_push_on_another_connection() {
    let b = broker();
    let mut waiter = Raw::connect(b.addr());
    let mut producer = Raw::connect(b.addr());
    let req = waiter.send(
        "PULLB",
        vec![
            ("queue", s("w")),
            ("count", int(5)),
            ("timeout", int(30_000)),
            ("owner", s("o")),
        ],
    );
    // Whether the PULLB is already waiting or arrives after the PUSH, it gets the job.
    let id = push(&mut producer, "w", s("hello"), vec![]);
    let r = waiter.recv();
    assert_eq!(r.get("reqId"), Some(&s(&req)));
    let jobs = r.get("jobs").unwrap().as_array().unwrap();
    assert!(!jobs.is_empty());
    assert_eq!(jobs[0].get("id"), Some(&s(&id)));
    assert_eq!(
        r.get("tokens").unwrap().as_array().unwrap().len(),
        jobs.len()
    );
}

#[test]
fn long_poll_ends_empty_and_pull_shapes_follow_the_owner() {
    let b = broker();
    let mut c = Raw::connect(b.addr());
    let r = c.call(
        "PULL",
        vec![("queue", s("e")), ("timeout", int(20)), ("owner", s("o"))],
    );
    assert_eq!(r.get("job"), Some(&Value::Nil));
    assert_eq!(r.get("token"), Some(&Value::Nil));
    let r = c.call("PULL", vec![("queue", s("e"))]);
    assert_eq!(r.get("job"), Some(&Value::Nil));
    assert!(r.get("token").is_none());
    let r = c.call("PULLB", vec![("queue", s("e")), ("count", int(3))]);
    assert_eq!(r.get("jobs"), Some(&arr(vec![])));
    assert!(r.get("tokens").is_none());
    let r = c.call(
        "PULLB",
        vec![("queue", s("e")), ("count", int(3)), ("owner", s("o"))],
    );
    assert_eq!(r.get("tokens"), Some(&arr(vec![])));
    // Limits.
    let bad = |c: &mut Raw, pairs| err(&c.call("PULLB", pairs)).to_owned();
    assert_eq!(
        bad(&mut c, vec![("queue", s("e")), ("count", int(0))]),
        "count must be at least 1"
    );
    assert_eq!(
        bad(&mut c, vec![("queue", s("e")), ("count", int(1001))]),
        "count must be at most 1000"
    );
    assert_eq!(
        bad(
            &mut c,
            vec![
                ("queue", s("e")),
                ("count", int(1)),
                ("timeout", int(60_001))
            ]
        ),
        "timeout must be at most 60000"
    );
    let r = c.call("PULLB", vec![("queue", s("e"))]);
    assert_eq!(
        r.get("jobs"),
        Some(&arr(vec![])),
        "a missing count pulls nothing"
    );
}

#[test]
fn more_long_polls_than_handler_slots_all_get_served() {
    let b = broker();
    let mut c = Raw::connect(b.addr());
    let n = 60; // beyond the 50 handlers a connection runs at once: the rest wait, unrejected
    for _ in 0..n {
        c.send(
            "PULL",
            vec![
                ("queue", s("many")),
                ("timeout", int(30_000)),
                ("detach", Value::Bool(true)),
            ],
        );
    }
    let mut p = Raw::connect(b.addr());
    let jobs: Vec<Value> = (0..n)
        .map(|i| Value::map([("name", s("j")), ("data", int(i))]))
        .collect();
    assert!(ok(
        &p.call("PUSHB", vec![("queue", s("many")), ("jobs", arr(jobs))])
    ));
    let mut seen: Vec<i64> = (0..n)
        .map(|_| {
            let r = c.recv();
            r.get("job").unwrap().get("data").unwrap().as_i64().unwrap()
        })
        .collect();
    seen.sort();
    assert_eq!(seen, (0..n).collect::<Vec<_>>());
}

#[test]
fn custom_ids_and_unique_keys_deduplicate() {
    let b = broker();
    let mut c = Raw::connect(b.addr());
    assert_eq!(push(&mut c, "q1", int(1), vec![("jobId", s("c1"))]), "c1");
    // Global across queues: nothing is added to q2.
    assert_eq!(push(&mut c, "q2", int(2), vec![("jobId", s("c1"))]), "c1");
    assert_eq!(
        c.call("Count", vec![("queue", s("q2"))]).get("count"),
        Some(&int(0))
    );
    // Twice in one batch, and once more already live.
    let item = |cid: &str| Value::map([("name", s("n")), ("customId", s(cid))]);
    let r = c.call(
        "PUSHB",
        vec![
            ("queue", s("q1")),
            ("jobs", arr(vec![item("same"), item("same"), item("c1")])),
        ],
    );
    assert_eq!(ids_of(&r), ["same", "same", "c1"]);
    assert_eq!(
        c.call("Count", vec![("queue", s("q1"))]).get("count"),
        Some(&int(2))
    );
    // A PUSHB item's jobId is ignored.
    let r = c.call(
        "PUSHB",
        vec![
            ("queue", s("q1")),
            (
                "jobs",
                arr(vec![Value::map([("name", s("n")), ("jobId", s("c1"))])]),
            ),
        ],
    );
    assert_ne!(ids_of(&r)[0], "c1");
    // unique keys
    let a = push(&mut c, "u", int(1), vec![("uniqueKey", s("k"))]);
    let b2 = push(&mut c, "u", int(2), vec![("uniqueKey", s("k"))]);
    assert_eq!(a, b2);
    // Once finished, a custom id starts a new generation.
    let r = c.call("PULLB", vec![("queue", s("q1")), ("count", int(10))]);
    for j in r.get("jobs").unwrap().as_array().unwrap() {
        assert!(ok(
            &c.call("ACK", vec![("id", j.get("id").unwrap().clone())])
        ));
    }
    assert_eq!(state(&mut c, "c1"), "completed");
    assert_eq!(push(&mut c, "q2", int(3), vec![("jobId", s("c1"))]), "c1");
    assert_eq!(state(&mut c, "c1"), "waiting");
    assert_eq!(
        c.call("Count", vec![("queue", s("q2"))]).get("count"),
        Some(&int(1))
    );
}

#[test]
fn ack_checks_tokens_then_state() {
    let b = broker();
    let mut c = Raw::connect(b.addr());
    let id = push(&mut c, "a", int(1), vec![]);
    let (_, token) = pull_owned(&mut c, "a").unwrap();
    assert_eq!(
        err(&c.call("ACK", vec![("id", s(&id))])),
        format!("Lock token required for job {id}")
    );
    assert_eq!(
        err(&c.call("ACK", vec![("id", s(&id)), ("token", s("nope"))])),
        format!("Invalid or expired lock token for job {id}")
    );
    assert!(ok(
        &c.call("ACK", vec![("id", s(&id)), ("token", s(&token))])
    ));
    assert_eq!(
        err(&c.call("ACK", vec![("id", s(&id)), ("token", s(&token))])),
        format!("Job not found or not in processing state: {id}")
    );
}

#[test]
fn ackb_partial_outcomes() {
    let b = broker();
    let mut c = Raw::connect(b.addr());
    let a = push(&mut c, "k", int(1), vec![]);
    let bb = push(&mut c, "k", int(2), vec![]);
    let (pa, ta) = pull_owned(&mut c, "k").unwrap();
    let (pb, tb) = pull_owned(&mut c, "k").unwrap();
    assert_eq!((pa.as_str(), pb.as_str()), (a.as_str(), bb.as_str()));
    // A bad token anywhere: nothing is applied.
    let r = c.call(
        "ACKB",
        vec![
            ("ids", arr(vec![s(&a), s(&bb)])),
            ("tokens", arr(vec![s(&ta), s("bad")])),
        ],
    );
    assert_eq!(
        err(&r),
        format!("Invalid or expired lock token for job {bb}")
    );
    assert_eq!(state(&mut c, &a), "active");
    // Length mismatch.
    let r = c.call(
        "ACKB",
        vec![
            ("ids", arr(vec![s(&a), s(&bb)])),
            ("tokens", arr(vec![s(&ta)])),
        ],
    );
    assert_eq!(err(&r), "ACKB tokens length must match ids length");
    // An unknown id fails the reply but the others are applied.
    let r = c.call(
        "ACKB",
        vec![
            ("ids", arr(vec![s(&a), s("no-such")])),
            ("tokens", arr(vec![s(&ta), s("")])),
            ("results", arr(vec![s("ra"), Value::Undefined])),
        ],
    );
    assert_eq!(err(&r), "Job not found or not in processing state: no-such");
    assert_eq!(state(&mut c, &a), "completed");
    assert_eq!(
        c.call("GetResult", vec![("id", s(&a))]).get("result"),
        Some(&s("ra"))
    );
    let r = c.call(
        "ACKB",
        vec![("ids", arr(vec![s(&bb)])), ("tokens", arr(vec![s(&tb)]))],
    );
    assert!(ok(&r));
    assert_eq!(r.get("id"), Some(&Value::Undefined));
    assert!(r.get("data").is_none());
}

#[test]
fn jobs_return_to_waiting_when_the_pulling_connection_closes() {
    let b = broker();
    let mut c = Raw::connect(b.addr());
    let owned = push(&mut c, "d", int(1), vec![]);
    let plain = push(&mut c, "d", int(2), vec![]);
    let detached = push(&mut c, "d", int(3), vec![]);
    let mut puller = Raw::connect(b.addr());
    let (id, token) = pull_owned(&mut puller, "d").unwrap();
    assert_eq!(id, owned);
    let r = puller.call("PULL", vec![("queue", s("d"))]);
    assert_eq!(r.get("job").unwrap().get("id"), Some(&s(&plain)));
    let r = puller.call(
        "PULL",
        vec![("queue", s("d")), ("detach", Value::Bool(true))],
    );
    assert_eq!(r.get("job").unwrap().get("id"), Some(&s(&detached)));
    drop(puller);
    eventually_state(&mut c, &owned, "waiting");
    eventually_state(&mut c, &plain, "waiting");
    assert_eq!(state(&mut c, &detached), "active");
    assert_eq!(
        err(&c.call("ACK", vec![("id", s(&owned)), ("token", s(&token))])),
        format!("Job not found or not in processing state: {owned}")
    );
}

#[test]
fn fail_retries_with_backoff_then_fails() {
    let b = broker();
    let mut c = Raw::connect(b.addr());
    let id = push(
        &mut c,
        "f",
        int(1),
        vec![("maxAttempts", int(2)), ("backoff", int(1))],
    );
    let (_, t) = pull_owned(&mut c, "f").unwrap();
    let r = c.call(
        "FAIL",
        vec![("id", s(&id)), ("token", s(&t)), ("error", s("boom"))],
    );
    assert!(ok(&r));
    assert_eq!(r.get("id"), Some(&Value::Undefined));
    // Back after its (few ms) backoff: a long-poll picks it up when due.
    let r = c.call(
        "PULL",
        vec![
            ("queue", s("f")),
            ("owner", s("o")),
            ("timeout", int(30_000)),
        ],
    );
    let job = r.get("job").unwrap();
    assert_eq!(job.get("id"), Some(&s(&id)));
    assert_eq!(job.get("attempts"), Some(&int(1)));
    let t = r.get("token").unwrap().clone();
    assert!(ok(&c.call(
        "FAIL",
        vec![("id", s(&id)), ("token", t), ("error", s("again"))]
    )));
    assert_eq!(state(&mut c, &id), "failed");
    let job = c.call("GetJob", vec![("id", s(&id))]);
    assert_eq!(
        job.get("job").unwrap().get("failedReason"),
        Some(&s("again"))
    );
    // Unrecoverable fails at once.
    let id = push(&mut c, "f", int(2), vec![]);
    let (_, t) = pull_owned(&mut c, "f").unwrap();
    assert!(ok(&c.call(
        "FAIL",
        vec![
            ("id", s(&id)),
            ("token", s(&t)),
            ("unrecoverable", Value::Bool(true))
        ]
    )));
    assert_eq!(state(&mut c, &id), "failed");
    let counts = c.call("GetJobCounts", vec![("queue", s("f"))]);
    assert_eq!(counts.get("counts").unwrap().get("failed"), Some(&int(2)));
}

#[test]
fn remove_on_complete_forgets_the_job() {
    let b = broker();
    let mut c = Raw::connect(b.addr());
    let id = push(
        &mut c,
        "r",
        int(1),
        vec![("removeOnComplete", Value::Bool(true))],
    );
    let (_, t) = pull_owned(&mut c, "r").unwrap();
    assert!(ok(&c.call(
        "ACK",
        vec![("id", s(&id)), ("token", s(&t)), ("result", int(5))]
    )));
    assert_eq!(state(&mut c, &id), "unknown");
    assert_eq!(
        err(&c.call("GetJob", vec![("id", s(&id))])),
        "Job not found"
    );
    let counts = c.call("GetJobCounts", vec![("queue", s("r"))]);
    assert_eq!(
        counts.get("counts").unwrap().get("completed"),
        Some(&int(0))
    );
}
