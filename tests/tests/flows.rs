//! FlowProducer, children's values and failures, and WaitJob, for every runtime against the
//! real bunqueue 2.9.5 and against autobatch-broker (one scenario list for both); effects checked through an independent connection
//! ([`RawClient`]: hand-written frames). Interop: flows added by autobatch are processed by
//! bunqueue's own TS Worker.

#[macro_use]
mod common;

use std::time::Duration;

use autobatch_driver::ops::{ChildFailure, WaitOutcome};
use autobatch_driver::{Error, FlowNode, FlowProducer, JobOptions, ServerErrorKind, Value};
use autobatch_tests::{RawClient, Target, TsPeer};
use common::*;
use serde_json::json;

fn node(queue: &str, name: &str, i: i64) -> FlowNode {
    FlowNode::new(queue, name, &json!({ "i": i })).expect("serialisable")
}

/// PULLs one job of `queue`: `(id, name, token)`, or `None` when there is none.
fn pull(raw: &mut RawClient, queue: &str) -> Option<(String, String, String)> {
    let r = raw
        .command(
            "PULL",
            &[("queue", Value::from(queue)), ("owner", Value::from("raw"))],
        )
        .expect("PULL");
    let job = r.get("job").filter(|j| !j.is_nullish())?;
    let s = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or_default().to_owned();
    Some((s(job.get("id")), s(job.get("name")), s(r.get("token"))))
}

fn ack(raw: &mut RawClient, id: &str, token: &str, result: Value) {
    let r = raw
        .command(
            "ACK",
            &[
                ("id", Value::from(id)),
                ("token", Value::from(token)),
                ("result", result),
            ],
        )
        .expect("ACK");
    assert_eq!(r.get("ok"), Some(&Value::from(true)), "ACK {id}: {r:?}");
}

fn fail(raw: &mut RawClient, id: &str, token: &str, error: &str) {
    let r = raw
        .command(
            "FAIL",
            &[
                ("id", Value::from(id)),
                ("token", Value::from(token)),
                ("error", Value::from(error)),
            ],
        )
        .expect("FAIL");
    assert_eq!(r.get("ok"), Some(&Value::from(true)), "FAIL {id}: {r:?}");
}

/// Adds the tree `merge` (in `top`) ← `a` ← `a1`, and `merge` ← `b` (in `parts`).
async fn add_tree<R: autobatch_driver::Runtime>(
    flows: &FlowProducer<R>,
    top: &str,
    parts: &str,
) -> autobatch_driver::FlowTree {
    flows
        .add(
            node(top, "merge", 0)
                .child(node(parts, "a", 1).child(node(parts, "a1", 11)))
                .child(node(parts, "b", 2)),
        )
        .await
        .expect("add flow")
}

/// A tree of depth 3 lands whole: leaves wait, every parent waits for its children; the
/// parent runs only after its children, and reads their values.
async fn tree_children_before_parent<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let top = queue_name::<T>("flow-top");
    let parts = queue_name::<T>("flow-parts");
    let flows = FlowProducer::new(&client);
    let tree = add_tree(&flows, &top, &parts).await;
    let a = &tree.children[0];
    let b = &tree.children[1];
    let a1 = &a.children[0];
    let mut raw = raw(server);
    assert_eq!(raw.state(&tree.id), "waiting-children");
    assert_eq!(raw.state(&a.id), "waiting-children");
    assert_eq!(raw.state(&a1.id), "waiting");
    assert_eq!(raw.state(&b.id), "waiting");
    let job = raw.job(&a1.id).expect("a1 exists");
    assert_eq!(job.queue, parts);
    assert_eq!(job.name, "a1");
    assert_eq!(
        pull(&mut raw, &top),
        None,
        "the parent waits for its children"
    );

    // Process the leaves, then `a`, through the raw connection.
    let mut done = 0;
    while done < 3 {
        let (id, name, token) = pull(&mut raw, &parts).expect("a child is ready");
        assert!(
            name != "a" || raw.state(&a1.id) == "completed",
            "a runs after a1"
        );
        ack(
            &mut raw,
            &id,
            &token,
            Value::map([("from", Value::from(name.as_str()))]),
        );
        done += 1;
    }
    let q = client.queue(&top);
    let values = q
        .get_children_values(&tree.id)
        .await
        .expect("children values");
    let keys: Vec<&str> = values.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        [format!("{parts}:{}", a.id), format!("{parts}:{}", b.id)]
    );
    assert_eq!(values[1].1, Value::map([("from", Value::from("b"))]));
    assert_eq!(raw.state(&tree.id), "waiting");
    let (id, _, token) = pull(&mut raw, &top).expect("the parent is ready");
    assert_eq!(id, tree.id);
    ack(&mut raw, &id, &token, Value::from("merged"));
    let finished = within::<T, _>(
        "wait",
        q.wait_until_finished(&tree.id, Duration::from_secs(30)),
    )
    .await
    .expect("wait");
    assert_eq!(finished, Some(Value::from("merged")));
    client.close().await;
}

/// `get_flow` reads a tree back in its shape, with the states the server reports; `depth`
/// and `max_children` cut it; an unknown id or another queue's job gives `None`.
async fn get_flow_reads_the_tree<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let top = queue_name::<T>("getflow-top");
    let parts = queue_name::<T>("getflow-parts");
    let flows = FlowProducer::new(&client);
    let tree = add_tree(&flows, &top, &parts).await;
    let mut raw = raw(server);
    let (id, _, token) = pull(&mut raw, &parts).expect("a leaf is ready");
    ack(&mut raw, &id, &token, Value::Int(7));

    let read = flows
        .get_flow(&top, &tree.id)
        .await
        .expect("get_flow")
        .expect("the flow exists");
    fn shape(f: &autobatch_driver::FlowJobs) -> (String, Vec<(String, usize)>) {
        let kids = f
            .children
            .iter()
            .map(|c| (c.job.id.clone(), c.children.len()))
            .collect();
        (f.job.id.clone(), kids)
    }
    let a = &tree.children[0];
    let b = &tree.children[1];
    assert_eq!(
        shape(&read),
        (tree.id.clone(), vec![(a.id.clone(), 1), (b.id.clone(), 0)])
    );
    assert_eq!(read.children[0].children[0].job.id, a.children[0].id);
    assert_eq!(
        read.children[0].job.parent_id.as_deref(),
        Some(tree.id.as_str())
    );
    assert_eq!(read.job.children_ids, vec![a.id.clone(), b.id.clone()]);
    // Each state as an independent connection sees it.
    let mut all = vec![&read];
    while let Some(f) = all.pop() {
        let state = f.job.state.as_ref().map(|s| s.as_str().to_owned());
        assert_eq!(
            state.as_deref(),
            Some(raw.state(&f.job.id).as_str()),
            "{}",
            f.job.name
        );
        all.extend(f.children.iter());
    }
    assert_eq!(
        read.children
            .iter()
            .map(|c| c.job.name.as_str())
            .collect::<Vec<_>>(),
        ["a", "b"]
    );

    let top_only = flows
        .get_flow_with(
            &top,
            &tree.id,
            autobatch_driver::FlowRead::new().depth(1).max_children(1),
        )
        .await
        .expect("get_flow_with")
        .expect("exists");
    assert_eq!(shape(&top_only), (tree.id.clone(), vec![(a.id.clone(), 0)]));
    assert_eq!(
        flows.get_flow(&parts, &tree.id).await.expect("other queue"),
        None
    );
    assert_eq!(
        flows.get_flow(&top, "no-such-job").await.expect("unknown"),
        None
    );
    client.close().await;
}

/// A chain runs step after step.
async fn chain_runs_in_order<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let name = queue_name::<T>("flow-chain");
    let flows = FlowProducer::new(&client);
    let ids = flows
        .add_chain(vec![
            node(&name, "s0", 0),
            node(&name, "s1", 1),
            node(&name, "s2", 2),
        ])
        .await
        .expect("chain");
    assert_eq!(ids.len(), 3);
    let mut raw = raw(server);
    for (i, expected) in ids.iter().enumerate() {
        let (id, step, token) = pull(&mut raw, &name).expect("the next step is ready");
        assert_eq!(&id, expected, "step {i}");
        assert_eq!(step, format!("s{i}"));
        assert_eq!(pull(&mut raw, &name), None, "only one step at a time");
        ack(&mut raw, &id, &token, Value::from(i as i64));
    }
    client.close().await;
}

/// Flows added together run in the order they were added. bunqueue (and autobatch-broker) hand
/// out jobs of one priority by run time, then by id, and a flow's ids are made by the client:
/// ids made in one millisecond must sort in the order they were made, as `Bun.randomUUIDv7()`'s
/// do, or the flows of one `add_bulk` run in a random order.
async fn flows_added_together_run_in_order<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let name = queue_name::<T>("flow-order");
    let flows = FlowProducer::new(&client);
    let trees = flows
        .add_bulk((0..50).map(|i| node(&name, &format!("f{i}"), i)).collect())
        .await
        .expect("add_bulk");
    let mut raw = raw(server);
    for (i, tree) in trees.iter().enumerate() {
        let (id, job, token) = pull(&mut raw, &name).expect("the next flow's job");
        assert_eq!(
            (id.as_str(), job),
            (tree.id.as_str(), format!("f{i}")),
            "flow {i}"
        );
        ack(&mut raw, &id, &token, Value::Nil);
    }
    assert_eq!(pull(&mut raw, &name), None, "nothing else was added");
    client.close().await;
}

/// Atomic: a flow with an id that exists is refused whole; nothing of it is added.
async fn flow_is_all_or_nothing<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let name = queue_name::<T>("flow-atomic");
    let taken = format!("{name}-taken");
    client
        .queue(&name)
        .add("x", &1, JobOptions::new().job_id(taken.as_str()))
        .await
        .expect("add");
    let flows = FlowProducer::new(&client);
    let err = flows
        .add(
            node(&name, "parent", 0)
                .child(node(&name, "fresh", 1))
                .child(node(&name, "clash", 2).options(JobOptions::new().job_id(taken.as_str()))),
        )
        .await
        .expect_err("an existing id refuses the flow");
    match &err {
        Error::Server(e) => assert!(e.message().contains("already exists"), "{e:?}"),
        other => panic!("expected the server's refusal, got {other:?}"),
    }
    let mut raw = raw(server);
    assert_eq!(raw.count(&name), 1, "only the earlier job is there");
    client.close().await;
}

/// Failure policies: an ignored child's failure is readable from its parent, which then runs.
async fn failed_and_ignored_children<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let name = queue_name::<T>("flow-fail");
    let kids = queue_name::<T>("flow-fail-kids");
    let flows = FlowProducer::new(&client);
    let one = JobOptions::new().attempts(1);
    let tree = flows
        .add(
            node(&name, "parent", 0)
                .child(
                    node(&kids, "ignored", 1)
                        .options(one.clone())
                        .on_failure(ChildFailure::Ignore),
                )
                .child(
                    node(&kids, "continued", 2)
                        .options(one)
                        .on_failure(ChildFailure::ContinueParent),
                ),
        )
        .await
        .expect("add flow");
    let mut raw = raw(server);
    for _ in 0..2 {
        let (id, name, token) = pull(&mut raw, &kids).expect("a child");
        fail(&mut raw, &id, &token, &format!("{name} broke"));
    }
    let q = client.queue(&name);
    let ignored = q
        .get_ignored_children_failures(&tree.id)
        .await
        .expect("ignored");
    let failed = q
        .get_failed_children_values(&tree.id)
        .await
        .expect("failed");
    assert_eq!(ignored.len(), 1, "{ignored:?}");
    assert!(ignored[0].0.contains(&tree.children[0].id));
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(failed[0].0.contains(&tree.children[1].id));
    assert_ne!(raw.state(&tree.id), "waiting-children");
    client.close().await;
}

/// WaitJob: an unknown id is the server's `Job not found`; a short wait on a waiting job
/// times out; more than 10 minutes is refused locally with the server's text.
async fn wait_job_edges<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let name = queue_name::<T>("flow-wait");
    let q = client.queue(&name);
    match q.wait_job("no-such-job", Duration::from_millis(10)).await {
        Err(Error::Server(e)) => {
            assert_eq!(e.message(), "Job not found");
            assert_eq!(e.kind(), ServerErrorKind::JobNotFound);
        }
        other => panic!("expected Job not found, got {other:?}"),
    }
    let id = q.add("x", &1, JobOptions::new()).await.expect("add");
    assert_eq!(
        q.wait_job(&id, Duration::from_millis(50))
            .await
            .expect("wait"),
        WaitOutcome::TimedOut
    );
    assert_eq!(
        q.wait_until_finished(&id, Duration::from_millis(50))
            .await
            .expect("wait"),
        None
    );
    match q.wait_job(&id, Duration::from_secs(601)).await {
        Err(Error::Invalid(e)) => {
            assert_eq!(e.field, "timeout");
            assert_eq!(e.message, "timeout must be at most 600000");
        }
        other => panic!("expected a local refusal, got {other:?}"),
    }
    let mut raw = raw(server);
    assert_eq!(raw.state(&id), "waiting", "waiting changed nothing");
    client.close().await;
}

/// Bad flows are refused before anything is sent, with bunqueue's client's messages.
async fn bad_flows_are_refused_locally<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let name = queue_name::<T>("flow-bad");
    let flows = FlowProducer::new(&client);
    let reserved = FlowNode::new(&name, "x", &json!({"__parentId": "p"})).expect("data");
    match flows.add(reserved).await {
        Err(Error::Invalid(e)) => {
            assert_eq!(e.message, "flow job data key is reserved: __parentId")
        }
        other => panic!("{other:?}"),
    }
    let not_a_map = FlowNode::new(&name, "x", &[1, 2]).expect("data");
    match flows.add(not_a_map).await {
        Err(Error::Invalid(e)) => assert_eq!(e.message, "flow job data must be an object"),
        other => panic!("{other:?}"),
    }
    let root_policy = node(&name, "x", 0).on_failure(ChildFailure::FailParent);
    match flows.add(root_policy).await {
        Err(Error::Invalid(e)) => assert_eq!(e.message, "a flow failure policy requires a parent"),
        other => panic!("{other:?}"),
    }
    // A flow job's policy is its node's, one at most: the job options' set is refused.
    let in_options = JobOptions::new().on_failure(ChildFailure::Ignore);
    let child = node(&name, "child", 1).options(in_options);
    match flows.add(node(&name, "parent", 0).child(child)).await {
        Err(Error::Invalid(e)) => assert_eq!(
            e.message,
            "a flow job has one failure policy; set FlowJob::on_failure instead"
        ),
        other => panic!("{other:?}"),
    }
    let mut raw = raw(server);
    assert_eq!(raw.count(&name), 0);
    client.close().await;
}

/// Interop: a flow added by autobatch is processed by bunqueue's TS Worker: children first,
/// and the parent's processor reads its children's values.
async fn ts_worker_processes_our_flow<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let name = queue_name::<T>("flow-ts");
    let flows = FlowProducer::new(&client);
    let tree = flows
        .add(
            node(&name, "parent", 0)
                .child(node(&name, "child", 1))
                .child(node(&name, "child", 2)),
        )
        .await
        .expect("add flow");
    let out = TsPeer::new("flow_ts_worker.ts")
        .target(server)
        .options(&json!({"queue": name, "count": 3}))
        .run_json()
        .expect("flow_ts_worker.ts ran");
    let order: Vec<&str> = out["order"]
        .as_array()
        .expect("order")
        .iter()
        .map(|v| v.as_str().expect("id"))
        .collect();
    assert_eq!(order.len(), 3);
    assert_eq!(order[2], tree.id, "the parent runs last: {order:?}");
    let seen = &out["parentChildrenValues"];
    for child in &tree.children {
        assert!(
            seen.as_object()
                .expect("values")
                .keys()
                .any(|k| k.ends_with(&child.id)),
            "{seen}"
        );
    }
    let mut raw = raw(server);
    assert_eq!(raw.state(&tree.id), "completed");
    client.close().await;
}

/// bunqueue's own FlowProducer and Worker end to end (tests/peers/flow_ts_producer.ts): every
/// job processed once, children before parents, a chain in order, the values and the ignored
/// failure a parent reads, and the counts left. The same checks as the broker's
/// `ts_client.rs`, here against both servers, so they hold for bunqueue itself.
async fn ts_flow_producer_end_to_end<T: Rt>(target: Target) {
    let server = target.shared();
    let top = queue_name::<T>("tsflow-top");
    let parts = queue_name::<T>("tsflow-parts");
    let out = TsPeer::new("flow_ts_producer.ts")
        .target(server)
        .options(&json!({"top": top, "parts": parts, "trees": 5}))
        .run_json()
        .expect("flow_ts_producer.ts ran");
    let processed = out["processed"].as_array().expect("processed");
    let seq = |id: &serde_json::Value| {
        let all: Vec<_> = processed.iter().filter(|p| p["id"] == *id).collect();
        assert_eq!(all.len(), 1, "{id} processed once");
        all[0]["seq"].as_i64().expect("seq")
    };
    assert_eq!(processed.len(), 5 * 4 + 6, "every job processed");
    let key = |id: &serde_json::Value| format!("{parts}:{}", id.as_str().expect("id"));
    for t in out["trees"].as_array().expect("trees") {
        assert!(seq(&t["a1"]) < seq(&t["a"]), "{t}");
        assert!(
            seq(&t["a"]) < seq(&t["id"]) && seq(&t["b"]) < seq(&t["id"]),
            "{t}"
        );
        let merge = processed
            .iter()
            .find(|p| p["id"] == t["id"])
            .expect("merge");
        assert_eq!(
            merge["values"],
            json!({ key(&t["a"]): {"leg": "a"}, key(&t["b"]): {"leg": "b"} })
        );
    }
    let chain = out["chain"].as_array().expect("chain");
    assert!(seq(&chain[0]) < seq(&chain[1]) && seq(&chain[1]) < seq(&chain[2]));
    let policy = &out["policy"];
    let merge = processed
        .iter()
        .find(|p| p["id"] == policy["id"])
        .expect("policy parent");
    assert_eq!(merge["ignored"], json!({ key(&policy["bad"]): "boom" }));
    assert_eq!(
        merge["values"],
        json!({ key(&policy["ok"]): {"leg": "ok"} })
    );
    assert_eq!(out["failed"], json!([policy["bad"]]));
    for (q, completed, failed) in [("top", 6, 0), ("parts", 5 * 3 + 4, 1)] {
        let c = &out["counts"][q];
        assert_eq!(
            (&c["completed"], &c["failed"]),
            (&json!(completed), &json!(failed)),
            "{c}"
        );
        for k in ["waiting", "active", "delayed", "waiting-children"] {
            assert_eq!(c[k], json!(0), "{q} {k}: {c}");
        }
    }
}

/// A parent's events, on its queue: `pushed` (read as waiting) when the flow lands, `waiting`
/// when a `continueParentOnFailure` child releases it, `failed` with bunqueue's text when a
/// `failParentOnFailure` child fails it.
async fn parents_events<T: Rt>(target: Target) {
    use autobatch_driver::{EventsOptions, QueueEvent, QueueEvents};
    use futures_util::StreamExt;
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let top = queue_name::<T>("flowev-top");
    let kids = queue_name::<T>("flowev-kids");
    let mut events = within::<T, _>(
        "subscribe",
        QueueEvents::<T::R>::connect_with(
            T::R::default(),
            options(server),
            &top,
            EventsOptions::default(),
        ),
    )
    .await
    .expect("subscribe");
    let flows = FlowProducer::new(&client);
    let one = JobOptions::new().attempts(1);
    let released = flows
        .add(
            node(&top, "released", 0).child(
                node(&kids, "continued", 1)
                    .options(one.clone())
                    .on_failure(ChildFailure::ContinueParent),
            ),
        )
        .await
        .expect("add");
    let failed = flows
        .add(
            node(&top, "failed", 0).child(
                node(&kids, "fatal", 1)
                    .options(one)
                    .on_failure(ChildFailure::FailParent),
            ),
        )
        .await
        .expect("add");
    let mut raw = raw(server);
    for child in [&released.children[0].id, &failed.children[0].id] {
        let (id, _, token) = pull(&mut raw, &kids).expect("a child");
        assert_eq!(&id, child);
        fail(&mut raw, &id, &token, "boom");
    }
    let mut seen = Vec::new();
    while seen.len() < 4 {
        let e = within::<T, _>("next event", events.next())
            .await
            .expect("the stream goes on");
        seen.push(match e {
            QueueEvent::Waiting { job_id, .. } => format!("waiting {job_id}"),
            QueueEvent::Failed { job_id, reason, .. } => format!("failed {job_id}: {reason}"),
            other => format!("{other:?}"),
        });
    }
    let fatal = &failed.children[0].id;
    assert_eq!(
        seen,
        [
            format!("waiting {}", released.id),
            format!("waiting {}", failed.id),
            format!("waiting {}", released.id),
            format!("failed {}: Child job {fatal} failed: boom", failed.id),
        ]
    );
    assert_eq!(raw.state(&released.id), "waiting");
    assert_eq!(raw.state(&failed.id), "failed");
    client.close().await;
}

scenarios! {
    bunqueue, broker => [
        tree_children_before_parent, chain_runs_in_order, flow_is_all_or_nothing,
        failed_and_ignored_children, wait_job_edges, bad_flows_are_refused_locally,
        ts_worker_processes_our_flow, get_flow_reads_the_tree, ts_flow_producer_end_to_end,
        parents_events, flows_added_together_run_in_order,
    ];
}
