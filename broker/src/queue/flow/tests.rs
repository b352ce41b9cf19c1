//! Flows through the queue state: parents waiting for their children, failure policies,
//! dependencies, detached and relinked children.

use crate::queue::Failure;
use crate::queue::{PullSpec, State};
use crate::store::MemoryStore;
use autobatch_core::wire::{ChildFailure, JobOptions, JobSpec, Value};

fn state() -> State {
    State::new(Box::new(MemoryStore::new()), 0.0).unwrap()
}

/// Options with a field set that has no builder.
fn set(mut o: JobOptions, f: impl FnOnce(&mut JobOptions)) -> JobOptions {
    f(&mut o);
    o
}

/// Pulls one job of `queue` (locked): `(id, token)`.
fn pull(s: &mut State, queue: &str, now: f64) -> Option<(String, String)> {
    let spec = PullSpec {
        queue,
        count: 1,
        locked: true,
        lock_ttl: 30_000,
        tie_to: Some(1),
    };
    let p = s.pull(&spec, now).into_iter().next()?;
    Some((p.id, p.token.unwrap_or_default()))
}

/// A parent `p` (in `top`) with children `c1`, `c2` (in `kids`), each child with `opts`.
fn flow(s: &mut State, opts: impl Fn(JobOptions) -> JobOptions) {
    let kids = ["c1", "c2"].map(String::from).to_vec();
    let parent = JobOptions::new()
        .job_id("p")
        .depends_on(kids.clone())
        .children_ids(kids.clone());
    for c in &kids {
        let o = set(JobOptions::new().job_id(c.as_str()).attempts(1), |o| {
            o.parent_id = Some("p".into())
        });
        let o = opts(o);
        s.push(
            "kids",
            JobSpec::new(c.as_str(), Value::Nil).with_options(o),
            0.0,
        );
    }
    s.push(
        "top",
        JobSpec::new("p", Value::Nil).with_options(parent),
        0.0,
    );
}

fn run(s: &mut State, ok: bool, result: Value) -> String {
    let (id, token) = pull(s, "kids", 1.0).expect("a child is ready");
    if ok {
        s.ack(&id, Some(&token), Some(result), false, 1.0).unwrap();
    } else {
        s.fail(
            &id,
            Some(&token),
            Failure::new(Some(format!("{id} broke"))),
            1.0,
        )
        .unwrap();
    }
    id
}

/// The parent waits in `waiting-children` (counted, not pullable) until its last child
/// completes, then waits to run and reads its children's values in `childrenIds` order.
#[test]
fn parent_waits_for_its_last_child() {
    let mut s = state();
    flow(&mut s, |o| o);
    assert_eq!(s.jobs.get_state("p", 0.0), "waiting-children");
    assert_eq!(s.jobs.counts("top", 0.0).waiting_children, 1);
    assert_eq!(s.jobs.count("top", 0.0), 0);
    assert!(pull(&mut s, "top", 0.0).is_none());
    let first = run(&mut s, true, Value::from(1_i64));
    assert_eq!(s.jobs.get_state("p", 1.0), "waiting-children");
    run(&mut s, true, Value::from(2_i64));
    assert_eq!(s.jobs.get_state("p", 1.0), "waiting");
    assert_eq!(s.jobs.counts("top", 1.0).waiting_children, 0);
    let values = s.jobs.children_values("p");
    let expect = |id: &str| Value::from(if id == first { 1_i64 } else { 2 });
    assert_eq!(
        values,
        vec![
            ("kids:c1".to_owned(), expect("c1")),
            ("kids:c2".to_owned(), expect("c2"))
        ]
    );
    let job = s.get_job_wire("p", 1.0).unwrap();
    assert_eq!(job.children_ids, ["c1", "c2"]);
    assert_eq!(
        s.get_job_wire("c1", 1.0).unwrap().parent_id.as_deref(),
        Some("p")
    );
    assert!(!s.waits.has_dependents(), "nothing left in the index");
}

/// No policy: a child failing for good leaves its parent waiting for good.
#[test]
fn a_failed_child_without_a_policy_keeps_the_parent_waiting() {
    let mut s = state();
    flow(&mut s, |o| o);
    run(&mut s, false, Value::Nil);
    run(&mut s, true, Value::Nil);
    assert_eq!(s.jobs.get_state("p", 1.0), "waiting-children");
    assert!(s.jobs.children_failures("p", false).is_empty());
}

/// failParentOnFailure: the parent fails at once (DLQ, bunqueue's text) and leaves the
/// index; the other child still runs.
#[test]
fn fail_parent_on_failure() {
    let mut s = state();
    flow(&mut s, |o| {
        set(o, |o| o.on_failure = ChildFailure::FailParent.into())
    });
    let bad = run(&mut s, false, Value::Nil);
    assert_eq!(s.jobs.get_state("p", 1.0), "failed");
    let entry = s.jobs.entry("p").and_then(|e| e.run.dlq.clone()).unwrap();
    assert_eq!(
        entry,
        (
            "unknown",
            Some(format!("Child job {bad} failed: {bad} broke"))
        )
    );
    assert_eq!(s.get_job_wire("p", 1.0).unwrap().failed_reason, None);
    assert_eq!(s.jobs.counts("top", 1.0).failed, 1);
    assert_eq!(s.jobs.counts("top", 1.0).waiting_children, 0);
    run(&mut s, true, Value::Nil);
    assert_eq!(s.jobs.get_state("p", 1.0), "failed");
    assert!(!s.waits.has_dependents());
}

/// continueParentOnFailure: the parent runs at once, the failure readable from it;
/// ignoreDependencyOnFailure: the dependency is dropped and its failure kept apart;
/// removeDependencyOnFailure: dropped, nothing kept.
#[test]
fn continue_ignore_and_remove() {
    let mut s = state();
    flow(&mut s, |o| {
        set(o, |o| o.on_failure = ChildFailure::ContinueParent.into())
    });
    let bad = run(&mut s, false, Value::Nil);
    assert_eq!(
        s.jobs.get_state("p", 1.0),
        "waiting",
        "released before c2 ran"
    );
    assert_eq!(
        s.jobs.children_failures("p", false),
        vec![(format!("kids:{bad}"), Value::from(format!("{bad} broke")))]
    );
    assert!(!s.waits.has_dependents());

    for (ignore, ignored) in [(true, 1), (false, 0)] {
        let mut s = state();
        flow(&mut s, |o| {
            if ignore {
                set(o, |o| o.on_failure = ChildFailure::Ignore.into())
            } else {
                set(o, |o| o.on_failure = ChildFailure::RemoveDependency.into())
            }
        });
        run(&mut s, false, Value::Nil);
        assert_eq!(
            s.jobs.get_state("p", 1.0),
            "waiting-children",
            "c2 still runs"
        );
        run(&mut s, true, Value::from(5_i64));
        assert_eq!(s.jobs.get_state("p", 1.0), "waiting");
        assert_eq!(s.jobs.children_failures("p", true).len(), ignored);
        assert_eq!(s.jobs.children_values("p").len(), 1);
        // Completing the parent drops what it collected, as bunqueue does.
        let (id, token) = pull(&mut s, "top", 2.0).unwrap();
        s.ack(&id, Some(&token), None, false, 2.0).unwrap();
        assert!(s.jobs.children_failures("p", true).is_empty());
    }
}

/// A job pushed with `dependsOn` an unfinished job waits for it; cancelling a waiting job
/// takes it out of the index; a delayed parent released becomes delayed.
#[test]
fn depends_on_and_removal() {
    let mut s = state();
    let a = s.push("q", JobSpec::new("a", Value::Nil), 0.0);
    let o = JobOptions::new()
        .depends_on(vec![a.clone()])
        .delay(std::time::Duration::from_millis(100));
    let b = s.push(
        "q",
        JobSpec::new("b", Value::Nil).with_options(o.clone()),
        0.0,
    );
    let c = s.push("q", JobSpec::new("c", Value::Nil).with_options(o), 0.0);
    assert_eq!(s.jobs.get_state(&b, 0.0), "waiting-children");
    assert!(s.cancel(&c));
    assert_eq!(s.jobs.counts("q", 0.0).waiting_children, 1);
    let (id, token) = pull(&mut s, "q", 1.0).unwrap();
    assert_eq!(id, a);
    s.ack(&id, Some(&token), None, false, 1.0).unwrap();
    assert_eq!(s.jobs.get_state(&b, 1.0), "delayed", "its delay still runs");
    assert!(!s.waits.has_dependents());
    // A dependency already completed: no wait.
    let o = JobOptions::new().depends_on(vec![a]);
    let d = s.push("q", JobSpec::new("d", Value::Nil).with_options(o), 1.0);
    assert_eq!(s.jobs.get_state(&d, 1.0), "waiting");
}

/// Children removed on completion still count as done, and their values stay readable
/// from the parent (under their bare ids) until it finishes.
#[test]
fn removed_children_count_and_keep_their_values() {
    let mut s = state();
    flow(&mut s, |o| o.remove_on_complete(true));
    let first = run(&mut s, true, Value::from(1_i64));
    assert_eq!(s.jobs.get_state(&first, 1.0), "unknown", "removed");
    run(&mut s, true, Value::from(2_i64));
    assert_eq!(s.jobs.get_state("p", 1.0), "waiting");
    let mut values = s.jobs.children_values("p");
    values.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(values.len(), 2);
    assert_eq!(values[0].0, "c1");
    let (id, token) = pull(&mut s, "top", 2.0).unwrap();
    s.ack(&id, Some(&token), None, false, 2.0).unwrap();
    assert!(
        s.jobs.children_values("p").is_empty(),
        "released with the parent"
    );
}

/// RemoveChildDependency detaches a child (the data keys: see the differential flow
/// program); the parent, left waiting for nothing, runs. RemoveUnprocessedChildren cancels
/// queued children.
#[test]
fn detaching_children() {
    let mut s = state();
    flow(&mut s, |o| o);
    assert_eq!(s.remove_child_dependency("c1", 0.0), Ok(true));
    assert_eq!(s.jobs.get_state("p", 0.0), "waiting-children");
    assert_eq!(s.get_job_wire("p", 0.0).unwrap().children_ids, ["c2"]);
    assert_eq!(
        s.remove_child_dependency("c1", 0.0),
        Err("Job c1 has no parent".into())
    );
    assert_eq!(
        s.remove_child_dependency("zz", 0.0),
        Err("Job not found: zz".into())
    );
    assert_eq!(s.remove_child_dependency("c2", 0.0), Ok(true));
    assert_eq!(s.jobs.get_state("p", 0.0), "waiting");
    assert!(!s.waits.has_dependents());

    let mut s = state();
    flow(&mut s, |o| o);
    s.remove_unprocessed_children("p");
    assert_eq!(s.jobs.get_state("c1", 0.0), "unknown");
    assert_eq!(s.jobs.get_state("c2", 0.0), "unknown");
    assert_eq!(
        s.jobs.get_state("p", 0.0),
        "waiting-children",
        "as bunqueue: stuck"
    );
}

/// A job added with `parent: {id, queue}` (its data naming the parent) links itself: the
/// parent waits for it; a bare `parentId` links nothing; a parent elsewhere is refused.
#[test]
fn queue_add_with_a_parent_links_it() {
    let mut s = state();
    let host = s.push("q", JobSpec::new("host", Value::Nil), 0.0);
    let data = Value::map([
        ("__parentId", Value::from(host.as_str())),
        ("__parentQueue", Value::from("q")),
    ]);
    assert_eq!(
        s.jobs.parent_to_link(None, Some(&host), &data),
        Ok(Some(host.clone()))
    );
    assert_eq!(
        s.jobs.parent_to_link(None, Some(&host), &Value::Nil),
        Ok(None)
    );
    let elsewhere = Value::map([
        ("__parentId", Value::from(host.as_str())),
        ("__parentQueue", Value::from("r")),
    ]);
    assert!(s
        .jobs
        .parent_to_link(None, Some(&host), &elsewhere)
        .is_err());
    let o = set(JobOptions::new(), |o| o.parent_id = Some(host.clone()));
    let kid = s.push("q", JobSpec::new("kid", data).with_options(o), 0.0);
    s.link_parent(&host, &kid);
    assert_eq!(s.jobs.get_state(&host, 0.0), "waiting-children");
    assert_eq!(
        s.get_job_wire(&host, 0.0).unwrap().children_ids,
        vec![kid.clone()]
    );
    let (id, token) = pull(&mut s, "q", 1.0).unwrap();
    assert_eq!(id, kid, "the parent waits");
    s.ack(&id, Some(&token), None, false, 1.0).unwrap();
    assert_eq!(s.jobs.get_state(&host, 1.0), "waiting");
    assert!(!s.waits.has_dependents());
}

/// WaitJob's view: unknown, not yet completed, completed with its value.
#[test]
fn completion_view() {
    let mut s = state();
    assert_eq!(s.jobs.completion("x"), None);
    let id = s.push("kids", JobSpec::new("a", Value::Nil), 0.0);
    assert_eq!(s.jobs.completion(&id), Some(None));
    let waiter = s.job_waiter(&id);
    let (id, token) = pull(&mut s, "kids", 0.0).unwrap();
    s.ack(&id, Some(&token), Some(Value::from(3_i64)), false, 0.0)
        .unwrap();
    assert_eq!(s.jobs.completion(&id), Some(Some(Value::from(3_i64))));
    drop(waiter);
    s.forget_waiter(&id);
    assert!(s.waits.waiters.is_empty());
}
