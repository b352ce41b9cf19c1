//! Lookups (jobs by state or custom id, results, counts per priority, limits, deduplication keys,
//! queues, workers, stats, metrics) for every runtime, against the real bunqueue 2.9.5 and,
//! for what it serves, the embedded broker; each answer checked against what an independent
//! connection ([`RawClient`]: hand-written frames) sees.

#[macro_use]
mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use autobatch_driver::ops::MetricsType;
use autobatch_driver::{Error, JobOptions, JobState, Value, Worker, WorkerOptions};
use autobatch_tests::{RawClient, Target};
use common::*;

/// The ids a raw `GetJobs` lists for `queue` in `state`, in the server's order.
fn raw_job_ids(raw: &mut RawClient, queue: &str, state: &str) -> Vec<String> {
    let reply = raw
        .command(
            "GetJobs",
            &[("queue", Value::from(queue)), ("state", Value::from(state))],
        )
        .expect("GetJobs");
    reply
        .get("jobs")
        .and_then(Value::as_array)
        .expect("jobs")
        .iter()
        .filter_map(|j| j.get("id").and_then(Value::as_str).map(str::to_owned))
        .collect()
}

/// get_jobs lists what a raw GetJobs lists, per state and paged; an unknown state is refused
/// locally.
async fn get_jobs_by_state<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let name = queue_name::<T>("get-jobs");
    let q = client.queue(&name);
    let mut waiting = Vec::new();
    for i in 0..3 {
        waiting.push(q.add("w", &i, JobOptions::new()).await.expect("add"));
    }
    let p = q
        .add("p", &9, JobOptions::new().priority(4))
        .await
        .expect("add");
    let d = q
        .add("d", &9, JobOptions::new().delay(Duration::from_secs(600)))
        .await
        .expect("add");
    let mut check = raw(server);
    let ids = |jobs: Vec<autobatch_driver::Job>| jobs.into_iter().map(|j| j.id).collect::<Vec<_>>();
    let got = ids(q
        .get_jobs(&[JobState::Waiting], 0, 100)
        .await
        .expect("get_jobs"));
    assert_eq!(got, raw_job_ids(&mut check, &name, "waiting"));
    assert_eq!(got, waiting);
    assert_eq!(
        ids(q.get_waiting(1, 3).await.expect("page")),
        waiting[1..3].to_vec()
    );
    assert_eq!(
        ids(q.get_prioritized(0, 10).await.expect("prioritized")),
        vec![p.clone()]
    );
    assert_eq!(
        ids(q.get_delayed(0, 10).await.expect("delayed")),
        vec![d.clone()]
    );
    let many = q
        .get_jobs(&[JobState::Prioritized, JobState::Delayed], 0, 10)
        .await
        .expect("many");
    assert_eq!(many.len(), 2);
    assert!(many.iter().all(|j| j.queue == name && j.state.is_some()));
    assert_eq!(q.get_jobs(&[], 0, 100).await.expect("all").len(), 5);
    match q.get_jobs(&[JobState::from("wating")], 0, 10).await {
        Err(Error::Invalid(e)) => assert_eq!(e.field, "state"),
        other => panic!("expected a local refusal, got {other:?}"),
    }
    client.close().await;
}

/// A job added with a custom id is found by it (the same job a raw GetJob sees); an unknown
/// custom id is `None`.
async fn get_job_by_custom_id<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let name = queue_name::<T>("custom-id");
    let q = client.queue(&name);
    let custom = format!("{name}-order-42");
    let id = q
        .add("a", &1, JobOptions::new().job_id(custom.as_str()))
        .await
        .expect("add");
    let job = q
        .get_job_by_custom_id(&custom)
        .await
        .expect("lookup")
        .expect("found");
    assert_eq!(job.id, id);
    assert_eq!(raw(server).job(&id).map(|j| j.name), Some("a".to_owned()));
    assert_eq!(
        q.get_job_by_custom_id(&format!("{name}-none"))
            .await
            .expect("lookup"),
        None
    );
    client.close().await;
}

/// Counts per priority: waiting, prioritized and delayed jobs (bunqueue's priority queue
/// holds the delayed ones too), not active ones.
async fn counts_per_priority<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let name = queue_name::<T>("per-priority");
    let q = client.queue(&name);
    q.add("a", &1, JobOptions::new().priority(7))
        .await
        .expect("add");
    q.add("b", &2, JobOptions::new()).await.expect("add");
    q.add("c", &3, JobOptions::new().priority(5))
        .await
        .expect("add");
    q.add(
        "d",
        &4,
        JobOptions::new()
            .priority(5)
            .delay(Duration::from_secs(600)),
    )
    .await
    .expect("add");
    let mut check = raw(server);
    // The priority-7 job goes active: not counted.
    raw_pull(&mut check, &name).expect("pull");
    let counts = q.get_counts_per_priority().await.expect("counts");
    assert_eq!(counts, vec![(0.0, 1), (5.0, 2)]);
    // A priority changed to a fraction is kept and read as it is.
    let e = q.add("e", &5, JobOptions::new()).await.expect("add");
    q.change_priority(&e, 1.5, false)
        .await
        .expect("change priority");
    let counts = q.get_counts_per_priority().await.expect("counts");
    assert_eq!(counts, vec![(0.0, 1), (1.5, 1), (5.0, 2)]);
    let job = q.get_job(&e).await.expect("get job").expect("the job");
    assert_eq!(job.priority, 1.5);
    client.close().await;
}

/// The queue's limits, before and after a rate limit set through a raw connection.
async fn queue_limits<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let name = queue_name::<T>("limits");
    let q = client.queue(&name);
    q.add("a", &1, JobOptions::new()).await.expect("add");
    let limits = q.get_queue_limits(None).await.expect("limits");
    assert_eq!(
        (limits.rate_limit, limits.rate_limit_ttl, limits.maxed),
        (None, -2, false)
    );
    let mut check = raw(server);
    check
        .command(
            "RateLimit",
            &[
                ("queue", Value::from(name.as_str())),
                ("limit", Value::from(7_i64)),
            ],
        )
        .expect("RateLimit");
    let limits = q.get_queue_limits(Some(1)).await.expect("limits");
    assert_eq!(limits.rate_limit.map(|r| r.max), Some(7));
    assert!(limits.rate_limit_ttl >= 0);
    assert!(!q.is_maxed().await.expect("is_maxed"));
    client.close().await;
}

/// Pulls the next job of `queue` through `raw` and ACKs it with `result` (none when `None`):
/// its id.
fn raw_ack(raw: &mut RawClient, queue: &str, result: Option<Value>) -> String {
    let (id, token) = raw_pull(raw, queue).expect("a job to ack");
    let mut fields = vec![
        ("id", Value::from(id.as_str())),
        ("token", Value::from(token.as_str())),
    ];
    fields.extend(result.map(|r| ("result", r)));
    raw.command("ACK", &fields).expect("ACK");
    id
}

/// A job's result as its ACK set it: one ACKed through a raw connection, one by a worker
/// (checked against a raw GetResult); `None` for a job ACKed without one, a job still
/// waiting, and an unknown id.
async fn get_result<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let name = queue_name::<T>("result");
    let q = client.queue(&name);
    let mut check = raw(server);
    let with_result = q.add("a", &1, JobOptions::new()).await.expect("add");
    let without = q.add("b", &2, JobOptions::new()).await.expect("add");
    let result = Value::map([
        ("total", Value::from(42_i64)),
        ("currency", Value::from("EUR")),
    ]);
    assert_eq!(
        raw_ack(&mut check, &name, Some(result.clone())),
        with_result
    );
    assert_eq!(raw_ack(&mut check, &name, None), without);
    let waiting = q.add("c", &3, JobOptions::new()).await.expect("add");
    let read = |id: String| {
        let q = q.clone();
        async move { q.get_result(&id).await.expect("get_result") }
    };
    assert_eq!(read(with_result).await, Some(result));
    assert_eq!(check.state(&without), "completed");
    assert_eq!(read(without).await, None);
    assert_eq!(read(waiting.clone()).await, None);
    assert_eq!(read(format!("{name}-no-such-job")).await, None);

    // The worker takes the waiting job; its processor's return value is the result.
    let worker = within::<T, _>(
        "worker start",
        Worker::<T::R>::start(
            options(server),
            WorkerOptions::new(&name).poll_timeout(Duration::from_millis(100)),
            |job| async move {
                let n: i64 = job.data().map_err(|e| e.to_string())?;
                Ok::<_, String>(BTreeMap::from([("doubled", n * 2)]))
            },
        ),
    )
    .await
    .expect("worker");
    eventually::<T>("the worker completes the job", || {
        check.state(&waiting) == "completed"
    })
    .await;
    within::<T, _>("worker close", worker.close()).await;
    let doubled = Value::map([("doubled", Value::from(6_i64))]);
    assert_eq!(read(waiting.clone()).await, Some(doubled.clone()));
    let raw_result = check
        .command("GetResult", &[("id", Value::from(waiting.as_str()))])
        .expect("GetResult");
    assert_eq!(raw_result.get("result"), Some(&doubled));
    client.close().await;
}

/// The job holding a deduplication key, and `None` for a key nobody holds.
async fn deduplication_job_id<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let name = queue_name::<T>("dedup-id");
    let q = client.queue(&name);
    let id = q
        .add("a", &1, JobOptions::new().unique_key("k"))
        .await
        .expect("add");
    assert_eq!(
        q.get_deduplication_job_id("k").await.expect("lookup"),
        Some(id)
    );
    assert_eq!(
        q.get_deduplication_job_id("none").await.expect("lookup"),
        None
    );
    client.close().await;
}

/// The server's queues include one that holds a job.
async fn list_queues<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let name = queue_name::<T>("queues");
    client
        .queue(&name)
        .add("a", &1, JobOptions::new())
        .await
        .expect("add");
    assert!(client
        .list_queues()
        .await
        .expect("list_queues")
        .contains(&name));
    client.close().await;
}

/// What the broker does not serve is refused with its own error naming the command: the
/// dashboards.
async fn broker_refuses_what_it_does_not_serve<T: Rt>(target: Target) {
    let server = target.shared();
    let mut check = raw(server);
    let reply = check.command("DashboardOverview", &[]).expect("raw");
    assert_eq!(
        reply.get("error").and_then(Value::as_str),
        Some("DashboardOverview is not supported by autobatch-broker (see its README section)")
    );
}

/// The server's queues include a new one; a worker registered through a raw connection is
/// listed, and counted as this queue's.
async fn queues_and_workers<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let name = queue_name::<T>("list");
    let q = client.queue(&name);
    q.add("a", &1, JobOptions::new()).await.expect("add");
    assert!(client
        .list_queues()
        .await
        .expect("list_queues")
        .contains(&name));
    let mut worker = raw(server);
    let worker_id = format!("{name}-worker");
    worker
        .command(
            "RegisterWorker",
            &[
                ("name", Value::from(worker_id.as_str())),
                ("workerId", Value::from(worker_id.as_str())),
                ("queues", Value::Array(vec![Value::from(name.as_str())])),
                ("concurrency", Value::from(3_i64)),
            ],
        )
        .expect("RegisterWorker");
    let list = client.list_workers().await.expect("list_workers");
    let w = list
        .workers
        .iter()
        .find(|w| w.id == worker_id)
        .expect("registered worker listed");
    assert_eq!((w.concurrency, w.queues.clone()), (3, vec![name.clone()]));
    assert!(list.stats.total >= 1);
    let mine = q.get_workers().await.expect("get_workers");
    assert_eq!(
        mine.iter().map(|w| w.id.as_str()).collect::<Vec<_>>(),
        vec![worker_id.as_str()]
    );
    client.close().await;
}

/// Server-wide stats and metrics reflect a push; a queue's metrics and the storage health
/// read; a bad queue name for metrics is refused locally.
async fn stats_and_metrics<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let name = queue_name::<T>("stats");
    let q = client.queue(&name);
    q.add("a", &1, JobOptions::new()).await.expect("add");
    let stats = client.server_stats().await.expect("stats");
    assert!(stats.waiting >= 1);
    let metrics = client.server_metrics().await.expect("metrics");
    assert!(metrics.total_pushed >= 1);
    let mut check = raw(server);
    let done = raw_complete(&mut check, &name);
    assert_eq!(check.state(&done), "completed");
    let m = q
        .get_metrics(MetricsType::Completed, 0, -1)
        .await
        .expect("queue metrics");
    assert_eq!(m.points as usize, m.data.len());
    assert!(!client.storage_status().await.expect("storage").disk_full);
    let bad = client.queue("bad queue!");
    assert!(matches!(
        bad.get_metrics(MetricsType::Failed, 0, -1).await,
        Err(Error::Invalid(e)) if e.field == "queue"
    ));
    client.close().await;
}

scenarios! {
    bunqueue => [
        get_jobs_by_state, get_job_by_custom_id, get_result, counts_per_priority, queue_limits,
        deduplication_job_id, queues_and_workers, list_queues, stats_and_metrics,
    ];
    // What the embedded broker serves.
    broker => [
        get_jobs_by_state, get_job_by_custom_id, get_result, counts_per_priority, queue_limits,
        deduplication_job_id, list_queues, stats_and_metrics, broker_refuses_what_it_does_not_serve,
    ];
}
