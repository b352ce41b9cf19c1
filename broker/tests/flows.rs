//! Flows over the wire, in raw frames: PUSHF refused whole with bunqueue 2.9.5's messages
//! (nothing added), a flow's parent released by its last child as another connection sees
//! it, and WaitJob held without blocking the connection's other requests. Outcomes only: no
//! test asserts a duration.

mod common;

use autobatch_broker::{BrokerConfig, EmbeddedBroker};
use autobatch_core::wire::Value;
use common::*;

fn broker() -> EmbeddedBroker {
    EmbeddedBroker::start(BrokerConfig::default()).unwrap()
}

/// A PUSHF job as bunqueue's FlowProducer plans it (`__parentId`, `__parentQueue`,
/// `__childrenIds` in the data, `dependsOn` = `childrenIds` for a parent).
fn job(id: &str, queue: &str, parent: Option<(&str, &str)>, children: &[&str]) -> Value {
    let ids = || arr(children.iter().map(|c| s(c)).collect());
    let mut data = vec![("n", int(1))];
    let mut input = vec![("name", s(id))];
    if let Some((p, pq)) = parent {
        data.extend([("__parentId", s(p)), ("__parentQueue", s(pq))]);
        input.push(("parentId", s(p)));
    }
    if !children.is_empty() {
        data.push(("__childrenIds", ids()));
        input.extend([("dependsOn", ids()), ("childrenIds", ids())]);
    }
    input.push(("data", Value::map(data)));
    Value::map([
        ("id", s(id)),
        ("queue", s(queue)),
        ("input", Value::map(input)),
    ])
}

fn counts(c: &mut Raw, queue: &str) -> Value {
    let r = c.call("GetJobCounts", vec![("queue", s(queue))]);
    assert!(ok(&r), "{r:?}");
    r.get("counts").cloned().unwrap()
}

fn state(c: &mut Raw, id: &str) -> String {
    let r = c.call("GetState", vec![("id", s(id))]);
    r.get("state").and_then(Value::as_str).unwrap().to_owned()
}

/// bunqueue's checks, each refusing the whole flow before anything is added.
#[test]
fn bad_flows_are_refused_whole() {
    let b = broker();
    let mut c = Raw::connect(b.addr());
    let good = || {
        vec![
            job("c1", "fq", Some(("p1", "fq")), &[]),
            job("p1", "fq", None, &["c1"]),
        ]
    };
    let refused = |c: &mut Raw, jobs: Vec<Value>| {
        let r = c.call("PUSHF", vec![("jobs", arr(jobs))]);
        err(&r).to_owned()
    };
    let mut cycle = good();
    cycle[0] = job("c1", "fq", Some(("p1", "fq")), &["p1"]);
    // c1 now lists p1 as its child, which does not point back.
    assert_eq!(
        refused(&mut c, cycle),
        "flow child p1 does not point back to parent c1"
    );
    let mut orphan = good();
    orphan.remove(1);
    assert_eq!(refused(&mut c, orphan), "flow parent not found: p1");
    let mut bad_queue = good();
    bad_queue[0] = job("c1", "f q", Some(("p1", "fq")), &[]);
    assert_eq!(refused(&mut c, bad_queue), "invalid flow queue: f q");
    let mut dup = good();
    dup.push(job("c1", "fq", None, &[]));
    assert_eq!(refused(&mut c, dup), "duplicate flow job id: c1");
    let r = c.call("PUSHF", vec![("jobs", s("nope"))]);
    assert_eq!(err(&r), "flow jobs must be an array");
    assert_eq!(counts(&mut c, "fq").get("waiting"), Some(&int(0)));

    // A taken id refuses the flow; nothing of it lands.
    push(&mut c, "fq", int(1), vec![("jobId", s("c1"))]);
    assert_eq!(refused(&mut c, good()), "Flow job c1 already exists");
    assert_eq!(state(&mut c, "p1"), "unknown");
    let r = c.call("PUSHF", vec![("jobs", arr(vec![]))]);
    assert!(ok(&r), "an empty flow: {r:?}");
}

/// The parent waits (counted in `waiting-children`, not pullable) until its child completes;
/// a second connection sees each step; the reply snapshots every job in request order.
#[test]
fn parent_released_by_its_last_child() {
    let b = broker();
    let mut c = Raw::connect(b.addr());
    let mut other = Raw::connect(b.addr());
    let r = c.call(
        "PUSHF",
        vec![(
            "jobs",
            arr(vec![
                job("k1", "kids", Some(("top1", "top")), &[]),
                job("k2", "kids", Some(("top1", "top")), &[]),
                job("top1", "top", None, &["k1", "k2"]),
            ]),
        )],
    );
    assert!(ok(&r), "{r:?}");
    let snapshots = r.get("data").and_then(|d| d.get("jobs")).unwrap();
    let ids: Vec<&str> = snapshots
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j.get("id").and_then(Value::as_str).unwrap())
        .collect();
    assert_eq!(ids, ["k1", "k2", "top1"]);
    assert_eq!(state(&mut other, "top1"), "waiting-children");
    assert_eq!(
        counts(&mut other, "top").get("waiting-children"),
        Some(&int(1))
    );
    let r = other.call(
        "GetJobs",
        vec![
            ("queue", s("top")),
            ("state", arr(vec![s("waiting-children")])),
        ],
    );
    assert_eq!(
        r.get("jobs").and_then(Value::as_array).map(|j| j.len()),
        Some(1)
    );
    assert_eq!(pull_owned(&mut c, "top"), None);
    for expect in ["k1", "k2"] {
        let (id, token) = pull_owned(&mut c, "kids").expect("a child");
        assert_eq!(id, expect);
        let r = c.call(
            "ACK",
            vec![("id", s(&id)), ("token", s(&token)), ("result", s(&id))],
        );
        assert!(ok(&r), "{r:?}");
    }
    assert_eq!(state(&mut other, "top1"), "waiting");
    let r = other.call("GetChildrenValues", vec![("id", s("top1"))]);
    let values = r.get("data").and_then(|d| d.get("values")).unwrap();
    assert_eq!(
        values,
        &Value::map([("kids:k1", s("k1")), ("kids:k2", s("k2"))])
    );
    let r = other.call("GetJob", vec![("id", s("k1"))]);
    assert_eq!(
        r.get("job").and_then(|j| j.get("parentId")),
        Some(&s("top1"))
    );
    assert_eq!(
        pull_owned(&mut c, "top").map(|(id, _)| id).as_deref(),
        Some("top1")
    );
}

/// WaitJob is held while the connection's other requests are answered, ends with the job's
/// return value when another connection completes it, times out with `completed: false`, and
/// refuses an unknown id.
#[test]
fn wait_job_is_held_without_blocking() {
    let b = broker();
    let mut c = Raw::connect(b.addr());
    let mut worker = Raw::connect(b.addr());
    let id = push(&mut c, "wq", int(1), vec![]);
    let r = c.call("WaitJob", vec![("id", s(&id)), ("timeout", int(0))]);
    assert_eq!(r.get("completed"), Some(&Value::Bool(false)), "{r:?}");
    let r = c.call("WaitJob", vec![("id", s("nope"))]);
    assert_eq!(err(&r), "Job not found");

    let wait = c.send("WaitJob", vec![("id", s(&id)), ("timeout", int(600_000))]);
    let ping = c.send("Ping", vec![]);
    let r = c.recv();
    assert_eq!(
        r.get("reqId"),
        Some(&s(&ping)),
        "the ping is not held: {r:?}"
    );
    let (pulled, token) = pull_owned(&mut worker, "wq").unwrap();
    // A failure with attempts left does not end the wait.
    let r = worker.call(
        "FAIL",
        vec![("id", s(&pulled)), ("token", s(&token)), ("error", s("x"))],
    );
    assert!(ok(&r));
    let r = worker.call("Promote", vec![("id", s(&pulled))]);
    assert!(ok(&r), "{r:?}");
    let (pulled, token) = pull_owned(&mut worker, "wq").unwrap();
    let r = worker.call(
        "ACK",
        vec![("id", s(&pulled)), ("token", s(&token)), ("result", int(7))],
    );
    assert!(ok(&r));
    let r = c.recv();
    assert_eq!(r.get("reqId"), Some(&s(&wait)));
    assert_eq!(r.get("completed"), Some(&Value::Bool(true)), "{r:?}");
    assert_eq!(r.get("result"), Some(&int(7)));
    // Completed already: answered at once.
    let r = c.call("WaitJob", vec![("id", s(&id))]);
    assert_eq!(r.get("result"), Some(&int(7)));
}
