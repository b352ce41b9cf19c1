//! A queue's rate and concurrency limits over raw frames: bad limits and missing queues get
//! bunqueue's errors, a long-poll held back by the concurrency limit gets its job once a slot
//! frees, and a closed connection's jobs give their slots back.

mod common;

use autobatch_broker::{BrokerConfig, EmbeddedBroker};
use autobatch_core::wire::Value;
use common::*;

fn broker() -> EmbeddedBroker {
    EmbeddedBroker::start(BrokerConfig::default()).unwrap()
}

fn limits(c: &mut Raw, queue: &str) -> Value {
    let r = c.call("GetQueueLimits", vec![("queue", s(queue))]);
    r.get("data")
        .and_then(|d| d.get("limits"))
        .cloned()
        .expect("limits")
}

fn pull_locked(c: &mut Raw, queue: &str, timeout: i64) -> Value {
    c.call(
        "PULL",
        vec![
            ("queue", s(queue)),
            ("owner", s("w")),
            ("timeout", int(timeout)),
        ],
    )
}

#[test]
fn bad_limits_get_bunqueues_error() {
    let b = broker();
    let mut c = Raw::connect(b.addr());
    for (cmd, limit) in [
        ("RateLimit", None),
        ("RateLimit", Some(s("lots"))),
        ("SetConcurrency", Some(Value::Nil)),
        ("SetConcurrency", Some(Value::map([("n", int(1))]))),
    ] {
        let mut f = vec![("queue", s("q"))];
        f.extend(limit.map(|l| ("limit", l)));
        assert_eq!(
            err(&c.call(cmd, f)),
            "limit must be a finite number",
            "{cmd}"
        );
    }
    // No queue: bunqueue's queue hash throws, and its message is the answer (after the
    // limit's own check).
    for (cmd, limit) in [
        ("RateLimit", Some(int(1))),
        ("SetConcurrency", Some(int(1))),
        ("RateLimitClear", None),
        ("ClearConcurrency", None),
        ("GetQueueLimits", None),
    ] {
        let f: Vec<_> = limit.into_iter().map(|l| ("limit", l)).collect();
        assert_eq!(
            err(&c.call(cmd, f)),
            "undefined is not an object (evaluating 'str.length')",
            "{cmd}"
        );
    }
    assert_eq!(
        err(&c.call("RateLimit", vec![("queue", Value::Nil)])),
        "limit must be a finite number"
    );
    assert_eq!(
        err(&c.call(
            "SetConcurrency",
            vec![("queue", Value::Nil), ("limit", int(1))]
        )),
        "null is not an object (evaluating 'str.length')"
    );
    // Nothing was set.
    let l = limits(&mut c, "q");
    assert_eq!(l.get("rateLimit"), Some(&Value::Nil));
    assert_eq!(l.get("concurrencyLimit"), Some(&Value::Nil));
    // A number in a string is coerced, as JS `Number()` does.
    assert!(ok(&c.call(
        "SetConcurrency",
        vec![("queue", s("q")), ("limit", s(" 3 "))]
    )));
    assert_eq!(limits(&mut c, "q").get("concurrencyLimit"), Some(&int(3)));
}

#[test]
fn a_held_back_long_poll_gets_the_job_once_a_slot_frees() {
    let b = broker();
    let mut a = Raw::connect(b.addr());
    let mut waiter = Raw::connect(b.addr());
    push(&mut a, "q", int(1), vec![]);
    push(&mut a, "q", int(2), vec![]);
    assert!(ok(&a.call(
        "SetConcurrency",
        vec![("queue", s("q")), ("limit", int(1))]
    )));
    let first = pull_locked(&mut a, "q", 0);
    let id = first.get("job").and_then(|j| j.get("id")).cloned().unwrap();
    let token = first.get("token").cloned().unwrap();
    assert_eq!(
        pull_locked(&mut waiter, "q", 0).get("job"),
        Some(&Value::Nil),
        "held back"
    );
    // A long-poll longer than the connection's 20-s read timeout: only the slot freed by
    // the ACK can answer it in time (a missed wake-up fails the read instead of passing late).
    let req = waiter.send(
        "PULL",
        vec![
            ("queue", s("q")),
            ("owner", s("w")),
            ("timeout", int(60_000)),
        ],
    );
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert!(ok(&a.call("ACK", vec![("id", id), ("token", token)])));
    let r = waiter.recv();
    assert_eq!(r.get("reqId"), Some(&s(&req)));
    let job = r.get("job").expect("job");
    assert_eq!(job.get("data"), Some(&int(2)), "{r:?}");
    assert_eq!(limits(&mut a, "q").get("maxed"), Some(&Value::Bool(true)));
}

#[test]
fn a_closed_connections_jobs_free_their_slots() {
    let b = broker();
    let mut c = Raw::connect(b.addr());
    push(&mut c, "q", int(1), vec![]);
    push(&mut c, "q", int(2), vec![]);
    assert!(ok(&c.call(
        "SetConcurrency",
        vec![("queue", s("q")), ("limit", int(1))]
    )));
    {
        let mut gone = Raw::connect(b.addr());
        assert!(pull_locked(&mut gone, "q", 0)
            .get("job")
            .is_some_and(|j| !j.is_nullish()));
        assert_eq!(limits(&mut c, "q").get("maxed"), Some(&Value::Bool(true)));
    }
    // The broker notices the close on its own time: wait for the job to be back.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while limits(&mut c, "q").get("maxed") != Some(&Value::Bool(false)) {
        assert!(std::time::Instant::now() < deadline, "the slot stays taken");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let counts = c.call("GetJobCounts", vec![("queue", s("q"))]);
    assert_eq!(
        counts.get("counts").and_then(|c| c.get("waiting")),
        Some(&int(2))
    );
    assert!(pull_locked(&mut c, "q", 0)
        .get("job")
        .is_some_and(|j| !j.is_nullish()));
}
