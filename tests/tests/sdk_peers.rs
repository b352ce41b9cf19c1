//! bunqueue's official SDKs as peers: one short scenario through each SDK against the real
//! bunqueue 2.9.5 server, the broker in memory and the broker on SQLite, and what the SDK
//! hands back compared whole. The broker must look like bunqueue to the clients people
//! already run.
//!
//! * The Rust SDK, `bunqueue-client` 0.1.1 from crates.io (a dev-dependency):
//!   [`rust_sdk_sees_the_broker_as_bunqueue`].
//! * The Python SDK, `bunqueue-client` 0.1.5 from PyPI, in the venv that
//!   `scripts/sdk-peers.sh install` makes (`.peers/venv`): the same scenario in
//!   `tests/peers/sdk_python/scenario.py`, [`python_sdk_sees_the_broker_as_bunqueue`]. A missing
//!   venv fails the test with the command that installs it.
//!
//! The Python package's source distribution also ships its own end-to-end tests; they are not
//! run here. They start bunqueue from its source tree (the harness would have to stand in for
//! that), and against a running bunqueue 2.9.5 they take about a hundred seconds a server,
//! eleven of them failing on bunqueue itself after waiting out 15-second bounds: far past the
//! few seconds a peer gets in this suite.
//!
//! The SDKs send the pre-2.8.56 job envelope (the job's name inside `data`, no `name` key),
//! so every add here goes through the legacy form. Job records are compared the way
//! `tests/differential.rs` compares them: every key, times as classes (a time or none), ids by
//! creation order, the queue's name (each server has its own) as `#queue`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex};

use autobatch_tests::compare::{completed_progress_class, time_classes};
use autobatch_tests::{workspace_root, Target};
use bunqueue_client::{
    Backoff, BulkEntry, ConnectionOptions, JobOptions, ProcessError, Queue, Value, Worker,
    WorkerOptions,
};
use serde_json::{json, Value as Json};

/// Keys of a job record (and of a DLQ entry's attempts) that hold a wall-clock time or a
/// duration: compared as classes (`"#time"` for a number, else as sent), since the servers'
/// clocks differ.
const TIME_KEYS: &[&str] = &[
    "createdAt",
    "runAt",
    "startedAt",
    "completedAt",
    "lastHeartbeat",
    "timestamp",
    "failedAt",
    "duration",
    "enteredAt",
    "expiresAt",
    "processedOn",
    "finishedOn",
    "lockExpiresAt",
    // A job scheduler's next run.
    "nextRun",
];

/// The three servers every scenario runs against, by name.
fn servers(sqlite: &autobatch_broker::EmbeddedBroker) -> [(&'static str, SocketAddr); 3] {
    [
        ("bunqueue", Target::Bunqueue.shared()),
        ("broker", Target::Broker.shared()),
        ("broker-sqlite", sqlite.addr()),
    ]
}

/// A broker on SQLite in a temporary directory, for one test.
fn sqlite_broker(dir: &tempfile::TempDir) -> autobatch_broker::EmbeddedBroker {
    autobatch_broker::EmbeddedBroker::start(
        autobatch_broker::BrokerConfig::default().data_path(dir.path().join("jobs.db")),
    )
    .expect("broker on SQLite")
}

/// What one SDK saw on one server: named steps, each a JSON document, and the ids the
/// scenario met, in creation order.
#[derive(Default)]
struct Seen {
    steps: Vec<(String, Json)>,
    ids: Vec<String>,
}

impl Seen {
    fn note_id(&mut self, id: &str) {
        if !id.is_empty() && !self.ids.iter().any(|x| x == id) {
            self.ids.push(id.to_owned());
        }
    }

    fn step(&mut self, what: impl Into<String>, v: Json) {
        self.steps.push((what.into(), v));
    }

    /// The steps as the comparison sees them: the queue's name as `#queue`, ids as `#<slot>`,
    /// times as classes, a stack trace's frames as a class.
    fn normalised(&self, queue: &str) -> Vec<(String, Json)> {
        self.steps
            .iter()
            .map(|(what, v)| {
                let v = serde_json::to_string(v)
                    .expect("json")
                    .replace(queue, "#queue");
                let v = serde_json::from_str(&v).expect("json");
                (
                    what.clone(),
                    normalise(time_classes(v, TIME_KEYS), &self.ids),
                )
            })
            .collect()
    }
}

/// `v` (its times already classes, see [`time_classes`]) with ids as `#<slot>` (inside
/// strings too: error texts name ids), and the frames of a stack trace after its first line as
/// `"#frame"` (the SDKs send their own process's backtrace, whose frames name this test's
/// threads; the first line carries the error).
fn normalise(v: Json, ids: &[String]) -> Json {
    match v {
        Json::String(mut s) => {
            // Longest first, so an id that contains another is replaced whole.
            let mut by_len: Vec<(usize, &String)> = ids.iter().enumerate().collect();
            by_len.sort_by_key(|(_, id)| std::cmp::Reverse(id.len()));
            for (slot, id) in by_len {
                if s.contains(id.as_str()) {
                    s = s.replace(id.as_str(), &format!("#{slot}"));
                }
            }
            Json::String(s)
        }
        Json::Array(a) => Json::Array(a.into_iter().map(|v| normalise(v, ids)).collect()),
        Json::Object(m) => Json::Object(
            m.into_iter()
                .map(|(k, v)| {
                    let v = if k == "stacktrace" || k == "stack" {
                        match v {
                            Json::Array(lines) => Json::Array(
                                lines
                                    .into_iter()
                                    .enumerate()
                                    .map(|(i, l)| if i == 0 { l } else { json!("#frame") })
                                    .collect(),
                            ),
                            other => other,
                        }
                    } else {
                        v
                    };
                    (k, normalise(v, ids))
                })
                .collect(),
        ),
        other => other,
    }
}

/// Every server saw what bunqueue saw; each step that diverged is named.
fn assert_alike(sdk: &str, runs: &[(&str, Vec<(String, Json)>)]) {
    let (_, bunqueue) = &runs[0];
    if std::env::var_os("DIFF_TRACE").is_some() {
        for (what, x) in bunqueue {
            eprintln!("{what}\n  -> {x}");
        }
    }
    let mut diverged = Vec::new();
    for (server, seen) in &runs[1..] {
        // bunqueue's two modes differ in a completed job's progress; the broker follows each.
        let class = |v: &Json| match *server {
            "broker-sqlite" => completed_progress_class(v.clone()),
            _ => v.clone(),
        };
        for ((what, a), (_, b)) in bunqueue.iter().zip(seen) {
            let (a, b) = (class(a), class(b));
            if a != b {
                diverged.push(format!(
                    "{sdk} on {server}, {what}\n  bunqueue: {a}\n  {server}: {b}"
                ));
            }
        }
        if bunqueue.len() != seen.len() {
            diverged.push(format!(
                "{sdk} on {server}: {} steps, bunqueue {}",
                seen.len(),
                bunqueue.len()
            ));
        }
    }
    assert!(
        diverged.is_empty(),
        "{} diverged from bunqueue:\n{}",
        sdk,
        diverged.join("\n")
    );
}

// ------------------------------------------------------------------------------ Rust SDK

/// A MessagePack value as JSON (the SDK's own `value_to_json` writes strings in their debug
/// form, quotes included, which reads badly in a failure).
fn rust_json(v: &Value) -> Json {
    match v {
        Value::Nil => Json::Null,
        Value::Boolean(b) => json!(b),
        Value::Integer(i) => i
            .as_i64()
            .map(Json::from)
            .or_else(|| i.as_u64().map(Json::from))
            .unwrap_or(Json::Null),
        Value::F32(f) => json!(f),
        Value::F64(f) => json!(f),
        Value::String(s) => match s.as_str() {
            Some(s) => json!(s),
            None => json!({"#bytes": s.as_bytes()}),
        },
        Value::Binary(b) => json!({"#bytes": b}),
        Value::Array(a) => Json::Array(a.iter().map(rust_json).collect()),
        Value::Map(m) => rust_map(m),
        Value::Ext(t, b) => json!({"#ext": t, "#bytes": b}),
    }
}

fn rust_map(m: &[(Value, Value)]) -> Json {
    Json::Object(
        m.iter()
            .map(|(k, v)| {
                let k = match k.as_str() {
                    Some(k) => k.to_owned(),
                    None => k.to_string(),
                };
                (k, rust_json(v))
            })
            .collect(),
    )
}

fn kv(pairs: &[(&str, Value)]) -> Value {
    Value::Map(
        pairs
            .iter()
            .map(|(k, v)| (Value::from(*k), v.clone()))
            .collect(),
    )
}

/// A job with most of the options the Rust SDK sends (not a group: grouped jobs are pulled
/// in bunqueue's group-scheduler order, which the broker does not follow), deduplicated by
/// a key of its queue.
fn everything(queue: &str) -> JobOptions {
    JobOptions {
        ttl: Some(3_600_000),
        timeout: Some(600_000),
        deduplication: Some(bunqueue_client::Deduplication {
            id: format!("{queue}-dedup"),
            ttl: Some(3_600_000),
            extend: None,
            replace: None,
        }),
        tags: vec!["a".into(), "b".into()],
        lifo: Some(true),
        remove_on_complete: Some(false),
        remove_on_fail: Some(false),
        stall_timeout: Some(600_000),
        durable: Some(true),
        stack_trace_limit: Some(3),
        keep_logs: Some(5),
        size_limit: Some(1_000_000),
        fail_parent_on_failure: Some(true),
        ..JobOptions::default()
    }
}

/// The scenario through the Rust SDK against one server.
fn rust_scenario(addr: SocketAddr, queue: &str) -> Seen {
    let connection = ConnectionOptions {
        host: addr.ip().to_string(),
        port: addr.port(),
        ..ConnectionOptions::default()
    };
    let q = Queue::new(queue, connection.clone());
    let mut seen = Seen::default();

    // Adds: plain; with options; with a custom id, twice (the second is deduplicated); data
    // that is not a map (the SDK wraps it as `payload`) and no data at all.
    let custom = format!("{queue}-custom");
    let adds: Vec<(&str, Value, JobOptions)> = vec![
        ("plain", kv(&[("k", Value::from(1))]), JobOptions::default()),
        (
            "options",
            kv(&[("k", Value::from(2))]),
            JobOptions {
                priority: Some(5),
                // An hour: the job stays delayed for the whole scenario on every server.
                delay: Some(3_600_000),
                attempts: Some(4),
                backoff: Some(Backoff::Strategy {
                    kind: "exponential".into(),
                    delay: 2_000,
                    max_delay: Some(60_000),
                }),
                ..JobOptions::default()
            },
        ),
        (
            "custom",
            kv(&[("k", Value::from(3))]),
            JobOptions {
                job_id: Some(custom.clone()),
                ..JobOptions::default()
            },
        ),
        (
            "custom",
            kv(&[("k", Value::from(33))]),
            JobOptions {
                job_id: Some(custom.clone()),
                ..JobOptions::default()
            },
        ),
        ("scalar", Value::from(7), JobOptions::default()),
        ("bare", Value::Nil, JobOptions::default()),
        // Most other options the SDK sends, then a second job under the same
        // deduplication key (its add returns the first job's id).
        (
            "everything",
            kv(&[("k", Value::from(8))]),
            everything(queue),
        ),
        (
            "everything",
            kv(&[("k", Value::from(88))]),
            everything(queue),
        ),
    ];
    for (name, data, opts) in adds {
        match q.add(name, data, opts) {
            Ok(job) => {
                seen.note_id(&job.id());
                seen.step(
                    format!("add {name}"),
                    json!({"id": job.id(), "name": job.name(), "data": rust_json(&job.data()),
                           "raw": rust_map(job.raw())}),
                );
            }
            Err(e) => seen.step(format!("add {name}"), json!({"error": e.to_string()})),
        }
    }
    // A bulk add: one job that fails once and waits an hour to retry, one that fails for
    // good (to the DLQ), one with a priority, one with a custom id.
    let bulk = vec![
        BulkEntry {
            name: "retry".into(),
            data: kv(&[("k", Value::from(4))]),
            options: JobOptions {
                attempts: Some(2),
                backoff: Some(Backoff::Milliseconds(3_600_000)),
                ..JobOptions::default()
            },
        },
        BulkEntry {
            name: "doomed".into(),
            data: kv(&[("k", Value::from(5))]),
            options: JobOptions::default(),
        },
        BulkEntry {
            name: "urgent".into(),
            data: kv(&[("k", Value::from(6))]),
            options: JobOptions {
                priority: Some(9),
                ..JobOptions::default()
            },
        },
        BulkEntry {
            name: "bulk-custom".into(),
            data: Value::Nil,
            options: JobOptions {
                job_id: Some(format!("{queue}-bulk-custom")),
                ..JobOptions::default()
            },
        },
    ];
    match q.add_bulk(bulk) {
        Ok(ids) => {
            ids.iter().for_each(|id| seen.note_id(id));
            seen.step("add_bulk", json!(ids));
        }
        Err(e) => seen.step("add_bulk", json!({"error": e.to_string()})),
    }
    let reads = |q: &Queue, seen: &mut Seen, when: &str| {
        for (slot, id) in seen.ids.clone().into_iter().enumerate() {
            let job = match q.get_job(&id) {
                Ok(Some(job)) => json!({"name": job.name(), "data": rust_json(&job.data()),
                                        "state": job.state(), "attemptsMade": job.attempts_made(),
                                        "raw": rust_map(job.raw())}),
                Ok(None) => json!(null),
                Err(e) => json!({"error": e.to_string()}),
            };
            seen.step(format!("get_job #{slot} {when}"), job);
            let state = q.get_state(&id).map_err(|e| e.to_string());
            seen.step(format!("get_state #{slot} {when}"), json!(state));
        }
        let counts = q.get_job_counts().map_err(|e| e.to_string());
        seen.step(format!("get_job_counts {when}"), json!(counts));
        let count = q.count().map_err(|e| e.to_string());
        seen.step(format!("count {when}"), json!(count));
    };
    reads(&q, &mut seen, "after adds");
    let by_custom = q
        .get_job_by_custom_id(&custom)
        .map(|j| j.map(|j| rust_map(j.raw())))
        .map_err(|e| e.to_string());
    seen.step("get_job_by_custom_id", json!(by_custom));
    let missing = q
        .get_job("no-such-job")
        .map(|j| j.map(|j| rust_map(j.raw())))
        .map_err(|e| e.to_string());
    seen.step("get_job of an unknown id", json!(missing));

    // The worker: one job at a time, no polling wait, no heartbeats. Each job is recorded as
    // the processor sees it; "retry" fails (and waits an hour for its retry), "doomed" fails
    // for good, the others complete with a value.
    let processed: Arc<Mutex<Vec<(String, Json)>>> = Arc::default();
    let record = Arc::clone(&processed);
    let processed_again = {
        let processed = Arc::clone(&processed);
        move |worker: &Worker, seen: &mut Seen| {
            processed.lock().expect("record").clear();
            let mut rounds = Vec::new();
            for _ in 0..20 {
                match worker.run_once() {
                    Ok(0) => break,
                    Ok(n) => rounds.push(json!(n)),
                    Err(e) => {
                        rounds.push(json!({"error": e.to_string()}));
                        break;
                    }
                }
            }
            seen.step("worker pulls again", json!(rounds));
            let mut jobs = processed.lock().expect("record").clone();
            jobs.sort_by(|a, b| a.0.cmp(&b.0));
            for (name, job) in jobs {
                seen.step(format!("processed again {name}"), job);
            }
        }
    };
    let worker = Worker::new(
        queue,
        move |job| {
            // The server has moved the name out of `data` into the record's own `name`,
            // where the SDK's `name()` (which reads `data.name`) does not look.
            let name = job
                .raw()
                .iter()
                .find(|(k, _)| k.as_str() == Some("name"))
                .and_then(|(_, v)| v.as_str())
                .unwrap_or_default()
                .to_owned();
            record.lock().expect("record").push((
                name.clone(),
                json!({"id": job.id(), "data": rust_json(&job.data()),
                       "attemptsMade": job.attempts_made(), "raw": rust_map(job.raw())}),
            ));
            match name.as_str() {
                "retry" => Err(ProcessError::retryable("retry later")),
                "doomed" => Err(ProcessError::unrecoverable("doomed")),
                _ => Ok(kv(&[("done", Value::from(name.as_str()))])),
            }
        },
        WorkerOptions {
            connection: connection.clone(),
            concurrency: 1,
            batch_size: 1,
            poll_timeout_ms: 0,
            heartbeat_interval: None,
            ..WorkerOptions::default()
        },
    );
    // Every ready job, until a pull finds none (the bound only stops a server that keeps
    // handing out jobs).
    let mut rounds = Vec::new();
    for _ in 0..20 {
        match worker.run_once() {
            Ok(0) => break,
            Ok(n) => rounds.push(json!(n)),
            Err(e) => {
                rounds.push(json!({"error": e.to_string()}));
                break;
            }
        }
    }
    seen.step("worker pulls", json!(rounds));
    // The order of ready jobs of one priority follows each server's clock and ids; what each
    // job looked like to the processor is compared by name.
    let mut processed = processed.lock().expect("record").clone();
    processed.sort_by(|a, b| a.0.cmp(&b.0));
    for (name, job) in processed {
        seen.step(format!("processed {name}"), job);
    }

    reads(&q, &mut seen, "after the worker");
    for (slot, id) in seen.ids.clone().into_iter().enumerate() {
        let result = q.get_result(&id).map(|v| rust_json(&v));
        seen.step(
            format!("get_result #{slot}"),
            json!(result.map_err(|e| e.to_string())),
        );
    }
    let dlq = |q: &Queue, count: Option<i64>| {
        json!(q
            .get_dlq(count)
            .map(|entries| entries.iter().map(|e| rust_map(e)).collect::<Vec<_>>())
            .map_err(|e| e.to_string()))
    };
    seen.step("get_dlq", dlq(&q, None));
    seen.step("get_dlq of 1", dlq(&q, Some(1)));
    // The DLQ's job back to waiting, read, failed for good again, then purged.
    seen.step(
        "retry_dlq",
        json!(q.retry_dlq(None, None).map_err(|e| e.to_string())),
    );
    seen.step("get_dlq after retry_dlq", dlq(&q, None));
    seen.step(
        "get_job_counts after retry_dlq",
        json!(q.get_job_counts().map_err(|e| e.to_string())),
    );
    match q.add("late", kv(&[("k", Value::from(9))]), JobOptions::default()) {
        Ok(job) => {
            seen.note_id(&job.id());
            seen.step("add late", json!({"id": job.id()}));
        }
        Err(e) => seen.step("add late", json!({"error": e.to_string()})),
    }
    processed_again(&worker, &mut seen);
    worker.close();
    if let Some(late) = seen.ids.last().cloned() {
        let result = q.get_result(&late).map(|v| rust_json(&v));
        seen.step(
            "get_result of the late job",
            json!(result.map_err(|e| e.to_string())),
        );
    }
    seen.step("purge_dlq", json!(q.purge_dlq().map_err(|e| e.to_string())));
    seen.step("get_dlq after purge_dlq", dlq(&q, None));
    let waiting = q
        .get_jobs(Value::from("waiting"), 0, 100)
        .map(|jobs| jobs.iter().map(|j| rust_map(j.raw())).collect::<Vec<_>>())
        .map_err(|e| e.to_string());
    seen.step("get_jobs waiting", json!(waiting));
    q.close();
    rust_controls(&connection, &format!("{queue}-ctl"), &mut seen);
    rust_flows(&connection, &format!("{queue}-flow"), &mut seen);
    seen
}

/// The SDK's flows, on a queue of their own: a tree (whose children the SDK adds under the
/// parent id `"pending"`, before the parent exists, which bunqueue refuses; the SDK then
/// removes what it added) and a chain of three steps, each depending on the one before, run
/// to completion by a worker.
fn rust_flows(connection: &ConnectionOptions, queue: &str, seen: &mut Seen) {
    use bunqueue_client::{ChainStep, FlowJob, FlowProducer};
    let flows = FlowProducer::new(connection.clone());
    let leaf = |name: &str| FlowJob {
        name: name.into(),
        queue_name: queue.into(),
        data: kv(&[("k", Value::from(1))]),
        options: JobOptions::default(),
        children: Vec::new(),
    };
    let tree = flows.add(FlowJob {
        children: vec![leaf("child-a"), leaf("child-b")],
        ..leaf("parent")
    });
    let tree = tree.map(|node| node.job.id()).map_err(|e| e.to_string());
    seen.step("flows: add a tree", json!(tree));
    let step = |name: &str| ChainStep {
        name: name.into(),
        queue_name: queue.into(),
        data: kv(&[("k", Value::from(2))]),
        options: JobOptions::default(),
    };
    let q = Queue::new(queue, connection.clone());
    match flows.add_chain(vec![step("first"), step("second"), step("third")]) {
        Ok(ids) => {
            ids.iter().for_each(|id| seen.note_id(id));
            seen.step("flows: add_chain", json!(ids));
            let jobs = |q: &Queue| {
                json!(ids
                    .iter()
                    .map(|id| match q.get_job(id) {
                        Ok(Some(j)) => rust_map(j.raw()),
                        Ok(None) => Json::Null,
                        Err(e) => json!({"error": e.to_string()}),
                    })
                    .collect::<Vec<_>>())
            };
            seen.step("flows: the chain's jobs", jobs(&q));
            let worker = Worker::new(
                queue,
                |job| {
                    let data = job.data();
                    Ok(kv(&[("saw", data)]))
                },
                WorkerOptions {
                    connection: connection.clone(),
                    concurrency: 1,
                    batch_size: 1,
                    poll_timeout_ms: 0,
                    heartbeat_interval: None,
                    ..WorkerOptions::default()
                },
            );
            // One step becomes ready as the one before completes; the bound only stops a
            // server that keeps handing out jobs.
            let mut rounds = Vec::new();
            for _ in 0..10 {
                match worker.run_once() {
                    Ok(0) => break,
                    Ok(n) => rounds.push(json!(n)),
                    Err(e) => {
                        rounds.push(json!({"error": e.to_string()}));
                        break;
                    }
                }
            }
            worker.close();
            seen.step("flows: worker pulls", json!(rounds));
            seen.step("flows: the chain's jobs after the worker", jobs(&q));
            let results: Vec<Json> = ids
                .iter()
                .map(|id| {
                    json!(q
                        .get_result(id)
                        .map(|v| rust_json(&v))
                        .map_err(|e| e.to_string()))
                })
                .collect();
            seen.step("flows: the chain's results", json!(results));
        }
        Err(e) => seen.step("flows: add_chain", json!({"error": e.to_string()})),
    }
    let counts = q.get_job_counts().map_err(|e| e.to_string());
    seen.step("flows: get_job_counts", json!(counts));
    q.close();
    flows.close();
}

/// Queue and job controls through the Rust SDK, on a queue of their own: priority, delay,
/// promotion, data, progress and logs of waiting jobs, pause and resume, a listing of two
/// states, a rate limit, a job scheduler (every hour, so it never fires here), clean, drain,
/// remove and obliterate.
fn rust_controls(connection: &ConnectionOptions, queue: &str, seen: &mut Seen) {
    let q = Queue::new(queue, connection.clone());
    let r = |seen: &mut Seen, what: &str, v: Result<Json, bunqueue_client::Error>| {
        seen.step(
            format!("controls: {what}"),
            json!(v.map_err(|e| e.to_string())),
        );
    };
    let mut ids = Vec::new();
    for (name, delay) in [("c1", Some(3_600_000)), ("c2", None), ("c3", None)] {
        let opts = JobOptions {
            delay,
            ..JobOptions::default()
        };
        match q.add(name, kv(&[("k", Value::from(1))]), opts) {
            Ok(job) => {
                seen.note_id(&job.id());
                ids.push(job.id());
            }
            Err(e) => seen.step(format!("controls: add {name}"), json!(e.to_string())),
        }
    }
    let [c1, c2, c3] = &ids[..] else {
        return;
    };
    let job = |q: &Queue, id: &str| {
        q.get_job(id)
            .map(|j| j.map(|j| rust_map(j.raw())).unwrap_or(Json::Null))
    };
    let v = q.change_priority(c2, 7).map(|()| Json::Null);
    r(seen, "change_priority", v);
    let v = job(&q, c2);
    r(seen, "get_job after change_priority", v);
    let v = q.change_delay(c1, 7_200_000).map(|()| Json::Null);
    r(seen, "change_delay", v);
    let v = q.get_state(c1).map(Json::from);
    r(seen, "get_state after change_delay", v);
    let v = q.promote(c1).map(|()| Json::Null);
    r(seen, "promote", v);
    let v = q.get_state(c1).map(Json::from);
    r(seen, "get_state after promote", v);
    let v = q
        .update_job_data(c3, kv(&[("k", Value::from(30))]))
        .map(|()| Json::Null);
    r(seen, "update_job_data", v);
    match q.get_job(c3) {
        Ok(Some(j)) => {
            let v = j.update_progress(40.0, Some("half")).map(|()| Json::Null);
            r(seen, "update_progress", v);
            let v = j.log("hello", Some("info")).map(|()| Json::Null);
            r(seen, "log", v);
        }
        other => seen.step("controls: get_job c3", json!(other.is_ok())),
    }
    let v = q.get_job_logs(c3).map(|l| json!(l));
    r(seen, "get_job_logs", v);
    let v = job(&q, c3);
    r(seen, "get_job after data, progress and log", v);
    let v = q.pause().and_then(|()| q.is_paused()).map(Json::from);
    r(seen, "pause, is_paused", v);
    let v = q.resume().and_then(|()| q.is_paused()).map(Json::from);
    r(seen, "resume, is_paused", v);
    let v = q
        .get_jobs(
            Value::Array(vec![Value::from("waiting"), Value::from("prioritized")]),
            0,
            10,
        )
        .map(|jobs| json!(jobs.iter().map(|j| rust_map(j.raw())).collect::<Vec<_>>()));
    r(seen, "get_jobs waiting and prioritized", v);
    let v = q
        .set_rate_limit(5, Some(1_000), None)
        .and_then(|()| q.clear_rate_limit())
        .map(|()| Json::Null);
    r(seen, "set_rate_limit, clear_rate_limit", v);
    let sched = format!("{queue}-sched");
    let v = q
        .upsert_job_scheduler(
            &sched,
            bunqueue_client::SchedulerRepeat {
                every_ms: Some(3_600_000),
                limit: Some(3),
                ..Default::default()
            },
            bunqueue_client::SchedulerTemplate {
                name: Some("tick".into()),
                data: kv(&[("k", Value::from(1))]),
                options: JobOptions {
                    attempts: Some(2),
                    ..JobOptions::default()
                },
            },
        )
        .map(|()| Json::Null);
    r(seen, "upsert_job_scheduler", v);
    let v = q
        .get_job_scheduler(&sched)
        .map(|m| m.map(|m| rust_map(&m)).unwrap_or(Json::Null));
    r(seen, "get_job_scheduler", v);
    let v = q.remove_job_scheduler(&sched).map(|()| Json::Null);
    r(seen, "remove_job_scheduler", v);
    let v = q
        .get_job_scheduler(&sched)
        .map(|m| m.map(|m| rust_map(&m)).unwrap_or(Json::Null));
    r(seen, "get_job_scheduler after remove", v);
    let v = q.clean(0, 100, "completed").map(|ids| json!(ids));
    r(seen, "clean completed", v);
    let v = q.remove(c2).map(|()| Json::Null);
    r(seen, "remove", v);
    let v = job(&q, c2);
    r(seen, "get_job after remove", v);
    let v = q.drain().map(Json::from);
    r(seen, "drain", v);
    let v = q.get_job_counts().map(|c| json!(c));
    r(seen, "get_job_counts after drain", v);
    let v = q.obliterate().and_then(|()| q.count()).map(Json::from);
    r(seen, "obliterate, count", v);
    q.close();
}

/// The scenario through the official Rust SDK (`bunqueue-client` 0.1.1) on bunqueue, the
/// broker in memory and the broker on SQLite: adds (plain, with priority, delay, attempts and
/// backoff, with a custom id and again with the same id, scalar and empty data, with
/// most other options and a deduplication key), a bulk add, GetJob, GetState, GetJobCounts,
/// Count, GetJobByCustomId, a `Worker` that completes, fails with a retry and fails for good,
/// GetResult, the DLQ read, retried and purged, a waiting listing, queue and job controls
/// ([`rust_controls`]) and flows ([`rust_flows`]). Every job record the SDK returns is
/// compared whole.
#[test]
fn rust_sdk_sees_the_broker_as_bunqueue() {
    let dir = tempfile::tempdir().expect("temp dir");
    let sqlite = sqlite_broker(&dir);
    let runs: Vec<(&str, Vec<(String, Json)>)> = servers(&sqlite)
        .into_iter()
        .map(|(server, addr)| {
            let queue = format!("sdk-rust-{server}-{}", std::process::id());
            (server, rust_scenario(addr, &queue).normalised(&queue))
        })
        .collect();
    assert_alike("Rust SDK", &runs);
    sqlite.stop().expect("stop");
}

// ---------------------------------------------------------------------------- Python SDK

/// The Python SDK's version, pinned by `scripts/sdk-peers.sh`.
const PY_SDK_VERSION: &str = "0.1.5";

/// The venv's python with `bunqueue-client` installed, or the error that says how to install
/// it: the peer is part of the suite, so its absence fails the test.
fn python_sdk() -> PathBuf {
    let python = workspace_root().join(".peers/venv/bin/python");
    let version = Command::new(&python)
        .args([
            "-c",
            "import importlib.metadata as m; print(m.version('bunqueue-client'))",
        ])
        .output();
    match version {
        Ok(out)
            if out.status.success()
                && String::from_utf8_lossy(&out.stdout).trim() == PY_SDK_VERSION =>
        {
            python
        }
        found => panic!(
            "the Python SDK peer (bunqueue-client {PY_SDK_VERSION} in {}) is missing or wrong \
             ({}).\nInstall it with:\n    {}/scripts/sdk-peers.sh install",
            python.display(),
            match found {
                Ok(out) => format!(
                    "found {:?}; {}",
                    String::from_utf8_lossy(&out.stdout).trim(),
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
                Err(e) => e.to_string(),
            },
            workspace_root().display()
        ),
    }
}

/// The scenario of `tests/peers/sdk_python/scenario.py` against one server.
fn python_scenario(python: &PathBuf, addr: SocketAddr, queue: &str) -> Seen {
    let script = workspace_root().join("tests/peers/sdk_python/scenario.py");
    let out = Command::new(python)
        .arg(&script)
        .arg(addr.ip().to_string())
        .arg(addr.port().to_string())
        .arg(queue)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap_or_else(|e| panic!("{} {}: {e}", python.display(), script.display()));
    assert!(
        out.status.success(),
        "scenario.py against {addr} exited with {}:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Json = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "scenario.py printed no JSON ({e}):\n{}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    let mut seen = Seen::default();
    for id in doc["ids"].as_array().expect("ids") {
        seen.note_id(id.as_str().expect("an id"));
    }
    for s in doc["steps"].as_array().expect("steps") {
        seen.step(s[0].as_str().expect("a step's name"), s[1].clone());
    }
    seen
}

/// The scenario through the official Python SDK (`bunqueue-client` 0.1.5) on bunqueue, the
/// broker in memory and the broker on SQLite: adds (plain, with priority, delay, attempts and
/// backoff, with a custom id and again with the same id, scalar and empty data, with most
/// other options and a deduplication key), a bulk add (whose custom id the SDK sends as
/// `customId`), GetJob, GetState, GetJobCounts, Count, GetJobByCustomId, a `Worker` that completes, fails with a retry and fails for good (and
/// a second one that acknowledges in batches), GetResult, the DLQ read, retried and purged, a
/// waiting listing, queue and job controls and flows. Every job record the SDK returns is
/// compared whole, and so are the types of its numbers (an int and a float are different Python
/// values).
#[test]
fn python_sdk_sees_the_broker_as_bunqueue() {
    let python = python_sdk();
    let dir = tempfile::tempdir().expect("temp dir");
    let sqlite = sqlite_broker(&dir);
    let runs: Vec<(&str, Vec<(String, Json)>)> = servers(&sqlite)
        .into_iter()
        .map(|(server, addr)| {
            let queue = format!("sdk-py-{server}-{}", std::process::id());
            (
                server,
                python_scenario(&python, addr, &queue).normalised(&queue),
            )
        })
        .collect();
    assert_alike("Python SDK", &runs);
    sqlite.stop().expect("stop");
}
