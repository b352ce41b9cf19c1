//! The worker's job handle, outcomes and lifecycle, and the queue's job-record methods, for
//! every runtime against the real bunqueue 2.9.5; each effect is checked through an independent
//! connection ([`RawClient::command`]: hand-written frames).

#[macro_use]
mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use autobatch_driver::{
    ActiveJob, Error, JobError, JobOptions, Value, Worker, WorkerEvent, WorkerOptions,
};
use autobatch_tests::{RawClient, Target};
use common::*;
use futures_util::StreamExt;

fn id_field(id: &str) -> [(&str, Value); 1] {
    [("id", Value::from(id))]
}

/// Raw `GetProgress`: `(progress, message)` while the job is active.
fn raw_progress(raw: &mut RawClient, id: &str) -> Option<(f64, Option<String>)> {
    let r = raw
        .command("GetProgress", &id_field(id))
        .expect("GetProgress");
    if r.get("ok").and_then(Value::as_bool) != Some(true) {
        return None;
    }
    Some((
        r.get("progress").and_then(Value::as_f64).unwrap_or(-1.0),
        r.get("message").and_then(Value::as_str).map(str::to_owned),
    ))
}

/// Raw `GetLogs`: the messages.
fn raw_logs(raw: &mut RawClient, id: &str) -> Vec<String> {
    let r = raw.command("GetLogs", &id_field(id)).expect("GetLogs");
    r.get("data")
        .and_then(|d| d.get("logs"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|l| l.get("message").and_then(Value::as_str).map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Raw `ListWorkers`: the ids listed.
fn raw_workers(raw: &mut RawClient) -> Vec<String> {
    let r = raw.command("ListWorkers", &[]).expect("ListWorkers");
    r.get("data")
        .and_then(|d| d.get("workers"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|w| w.get("id").and_then(Value::as_str).map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn worker_options(name: &str) -> WorkerOptions {
    WorkerOptions::new(name).poll_timeout(Duration::from_millis(200))
}

async fn add_one<T: Rt>(server: std::net::SocketAddr, name: &str, opts: JobOptions) -> String {
    let client = connect::<T>(options(server)).await;
    let id = client.queue(name).add("job", &3, opts).await.expect("add");
    client.close().await;
    id
}

/// A processor that holds its job until `release` is set.
async fn hold<T: Rt>(release: &AtomicBool) {
    while !release.load(Ordering::SeqCst) {
        T::sleep(Duration::from_millis(10)).await;
    }
}

/// Progress and log lines written through the job handle are on the server while the job
/// runs — awaited or not — seen by raw GetProgress and GetLogs; the logs outlive the job.
async fn progress_and_logs<T: Rt>(target: Target) {
    let server = target.shared();
    let name = queue_name::<T>("progress");
    let id = add_one::<T>(server, &name, JobOptions::new()).await;
    let release = Arc::new(AtomicBool::new(false));
    let step = Arc::new(AtomicUsize::new(0));
    let (rel, st) = (release.clone(), step.clone());
    let worker = within::<T, _>(
        "worker start",
        Worker::<T::R>::start(
            options(server),
            worker_options(&name),
            move |job: ActiveJob| {
                let (rel, st) = (rel.clone(), st.clone());
                async move {
                    let n: i64 = job.data()?;
                    job.update_progress_with(40.0, "fetching").await?;
                    job.log("first line").await?;
                    st.store(1, Ordering::SeqCst);
                    // Not awaited: sent all the same.
                    job.update_progress(60.0).detach();
                    job.log("second line").detach();
                    hold::<T>(&rel).await;
                    Ok::<_, JobError>(n * 2)
                }
            },
        ),
    )
    .await
    .expect("worker");
    let mut raw = raw(server);
    eventually::<T>("progress 60 and two log lines", || {
        raw_progress(&mut raw, &id).is_some_and(|(p, _)| p == 60.0)
            && raw_logs(&mut raw, &id).len() == 2
    })
    .await;
    assert_eq!(step.load(Ordering::SeqCst), 1);
    assert_eq!(
        raw_progress(&mut raw, &id),
        Some((60.0, Some("fetching".to_owned())))
    );
    assert_eq!(raw_logs(&mut raw, &id), ["first line", "second line"]);
    release.store(true, Ordering::SeqCst);
    eventually::<T>("completed", || raw.state(&id) == "completed").await;
    assert_eq!(raw_logs(&mut raw, &id), ["first line", "second line"]);
    within::<T, _>("worker close", worker.close()).await;
}

/// Interop: progress and log lines written by autobatch's worker are what bunqueue's own TS
/// client sees of the job (`getJob().progress`, `getJobLogs`).
async fn ts_client_sees_progress_and_logs<T: Rt>(target: Target) {
    let server = target.shared();
    let name = queue_name::<T>("tsview");
    let id = add_one::<T>(server, &name, JobOptions::new()).await;
    let release = Arc::new(AtomicBool::new(false));
    let ready = Arc::new(AtomicBool::new(false));
    let (rel, rdy) = (release.clone(), ready.clone());
    let worker = Worker::<T::R>::start(
        options(server),
        worker_options(&name),
        move |job: ActiveJob| {
            let (rel, rdy) = (rel.clone(), rdy.clone());
            async move {
                job.update_progress_with(42.0, "from autobatch").await?;
                job.log("line from autobatch").await?;
                rdy.store(true, Ordering::SeqCst);
                hold::<T>(&rel).await;
                Ok::<_, JobError>(())
            }
        },
    )
    .await
    .expect("worker");
    eventually::<T>("progress written", || ready.load(Ordering::SeqCst)).await;
    let view = autobatch_tests::TsPeer::new("job_view.ts")
        .target(server)
        .options(&serde_json::json!({ "queue": name, "id": id }))
        .run_json()
        .expect("job_view.ts ran");
    release.store(true, Ordering::SeqCst);
    assert_eq!(view["state"], serde_json::json!("active"), "{view}");
    assert_eq!(view["progress"], serde_json::json!(42), "{view}");
    assert_eq!(
        view["logs"],
        serde_json::json!(["[info] line from autobatch"]),
        "{view}"
    );
    within::<T, _>("worker close", worker.close()).await;
}

/// Interop: bunqueue's own TS `QueueEvents` (a dashboard's view) sees an autobatch worker's
/// progress, then the job's completion with its return value, in that order.
async fn ts_queue_events_see_progress<T: Rt>(target: Target) {
    let server = target.shared();
    let name = queue_name::<T>("tsevents");
    let listener = autobatch_tests::TsPeer::new("events_ts_listen.ts")
        .target(server)
        .options(&serde_json::json!({ "queue": name, "count": 1 }))
        .spawn()
        .expect("events_ts_listen.ts started");
    eventually::<T>("the TS QueueEvents subscribed", || {
        listener.stdout_so_far().contains("\"ready\"")
    })
    .await;
    let id = add_one::<T>(server, &name, JobOptions::new()).await;
    let worker = Worker::<T::R>::start(
        options(server),
        worker_options(&name),
        move |job: ActiveJob| async move {
            job.update_progress(42.0).await?;
            Ok::<_, JobError>("done by autobatch")
        },
    )
    .await
    .expect("worker");
    let mut raw = raw(server);
    eventually::<T>("completed", || raw.state(&id) == "completed").await;
    within::<T, _>("worker close", worker.close()).await;
    let seen = listener
        .wait()
        .and_then(|out| out.success())
        .and_then(|out| out.json_lines())
        .expect("events_ts_listen.ts ran");
    assert_eq!(
        seen,
        [
            serde_json::json!({ "ready": true }),
            serde_json::json!({ "event": "progress", "jobId": id, "data": 42 }),
            serde_json::json!({ "event": "completed", "jobId": id, "returnvalue": "done by autobatch" }),
        ],
    );
}

/// An unrecoverable error fails the job at once, attempts left or not: one run, state failed.
async fn unrecoverable_is_not_retried<T: Rt>(target: Target) {
    let server = target.shared();
    let name = queue_name::<T>("unrecoverable");
    let id = add_one::<T>(server, &name, JobOptions::new().attempts(5)).await;
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    let worker = Worker::<T::R>::start(
        options(server),
        worker_options(&name),
        move |_job: ActiveJob| {
            r.fetch_add(1, Ordering::SeqCst);
            async { Err::<(), _>(JobError::unrecoverable("the account is gone")) }
        },
    )
    .await
    .expect("worker");
    let mut raw = raw(server);
    eventually::<T>("failed", || raw.state(&id) == "failed").await;
    within::<T, _>("worker close", worker.close()).await;
    assert_eq!(runs.load(Ordering::SeqCst), 1, "run once, not retried");
    let job = raw.job(&id).expect("job");
    assert_eq!(job.failed_reason.as_deref(), Some("the account is gone"));
}

/// Adds two jobs to `name`, one that completes (returns 1) and one that fails with no attempt
/// left, and starts a worker on them; returns their ids (completing, failing) and the worker.
async fn one_ok_one_failing<T: Rt>(
    server: std::net::SocketAddr,
    name: &str,
    worker: WorkerOptions,
) -> (String, String, Worker<T::R>) {
    let ok = add_one::<T>(server, name, JobOptions::new()).await;
    let bad = add_one::<T>(server, name, JobOptions::new().attempts(1)).await;
    let failing = bad.clone();
    let worker = Worker::<T::R>::start(options(server), worker, move |job: ActiveJob| {
        let fail = job.id == failing;
        async move {
            if fail {
                Err("no".to_owned())
            } else {
                Ok(1)
            }
        }
    })
    .await
    .expect("worker");
    (ok, bad, worker)
}

/// The worker-level `remove_on_complete` / `remove_on_fail` remove the jobs it finishes (sent
/// with ACKB and FAIL), though the jobs themselves asked to be kept: the server then does not
/// know them, read through an independent connection.
async fn worker_removes_finished_jobs<T: Rt>(target: Target) {
    let server = target.shared();
    let name = queue_name::<T>("remove-on");
    let (ok, bad, worker) = one_ok_one_failing::<T>(
        server,
        &name,
        worker_options(&name)
            .concurrency(2)
            .remove_on_complete(true)
            .remove_on_fail(true),
    )
    .await;
    let mut events = worker.events();
    let mut finished = 0;
    while finished < 2 {
        match within::<T, _>("event", events.next()).await.expect("event") {
            WorkerEvent::Completed { .. } | WorkerEvent::Failed { .. } => finished += 1,
            _ => {}
        }
    }
    // Close flushes the batched ACK and waits for every answer.
    within::<T, _>("worker close", worker.close()).await;
    let mut raw = raw(server);
    assert_eq!(raw.state(&ok), "unknown", "completed job removed");
    assert_eq!(raw.state(&bad), "unknown", "failed job removed");
}

/// The first `events()` call gets what happened since the worker started: here both jobs are
/// finished (read through an independent connection) before anyone subscribes, as happens
/// when a multi-threaded runtime runs the worker while the caller is still in `start`.
async fn first_subscriber_sees_events_since_start<T: Rt>(target: Target) {
    let server = target.shared();
    let name = queue_name::<T>("events-since-start");
    let (ok, bad, worker) =
        one_ok_one_failing::<T>(server, &name, worker_options(&name).concurrency(1)).await;
    let mut raw = raw(server);
    eventually::<T>("both finished", || {
        raw.state(&ok) == "completed" && raw.state(&bad) == "failed"
    })
    .await;
    let mut events = worker.events();
    let mut finished = Vec::new();
    while finished.len() < 2 {
        match within::<T, _>("event", events.next()).await.expect("event") {
            WorkerEvent::Completed { id, result } => finished.push((id, Some(result))),
            WorkerEvent::Failed { id, .. } => finished.push((id, None)),
            _ => {}
        }
    }
    finished.sort_by_key(|(id, _)| *id != ok);
    assert_eq!(finished, [(ok, Some(Value::Int(1))), (bad, None)]);
    within::<T, _>("worker close", worker.close()).await;
}

/// A plain error with attempts left is retried (the contrast to the unrecoverable one).
async fn plain_error_is_retried<T: Rt>(target: Target) {
    let server = target.shared();
    let name = queue_name::<T>("retried");
    let id = add_one::<T>(server, &name, JobOptions::new().attempts(2)).await;
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    let worker = Worker::<T::R>::start(
        options(server),
        worker_options(&name),
        move |_job: ActiveJob| {
            r.fetch_add(1, Ordering::SeqCst);
            async { Err::<(), _>(JobError::new(std::io::Error::other("flaky"))) }
        },
    )
    .await
    .expect("worker");
    let mut raw = raw(server);
    eventually::<T>("failed after two runs", || raw.state(&id) == "failed").await;
    within::<T, _>("worker close", worker.close()).await;
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

/// A delay outcome moves the job to delayed (MoveToDelayed with the lock token), not failed.
async fn delay_moves_to_delayed<T: Rt>(target: Target) {
    let server = target.shared();
    let name = queue_name::<T>("delay");
    let id = add_one::<T>(server, &name, JobOptions::new().attempts(1)).await;
    let worker = Worker::<T::R>::start(
        options(server),
        worker_options(&name),
        |_job: ActiveJob| async { Err::<(), _>(JobError::delay(Duration::from_secs(600))) },
    )
    .await
    .expect("worker");
    let mut raw = raw(server);
    eventually::<T>("delayed", || raw.state(&id) == "delayed").await;
    within::<T, _>("worker close", worker.close()).await;
    assert_eq!(raw.state(&id), "delayed");
}

/// A rate-limited outcome hands the job back to waiting, and the worker pulls nothing more.
async fn rate_limited_goes_back_to_waiting<T: Rt>(target: Target) {
    let server = target.shared();
    let name = queue_name::<T>("ratelimit");
    let id = add_one::<T>(server, &name, JobOptions::new()).await;
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    let worker = Worker::<T::R>::start(
        options(server),
        worker_options(&name),
        move |_job: ActiveJob| {
            r.fetch_add(1, Ordering::SeqCst);
            async { Err::<(), _>(JobError::rate_limited(Duration::from_secs(600))) }
        },
    )
    .await
    .expect("worker");
    let mut raw = raw(server);
    eventually::<T>("ran once", || runs.load(Ordering::SeqCst) == 1).await;
    eventually::<T>("waiting", || raw.state(&id) == "waiting").await;
    within::<T, _>("worker close", worker.close()).await;
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(raw.state(&id), "waiting");
}

/// `update_data` and `extend_lock` through the handle: the new data is on the server.
async fn update_data_and_extend_lock<T: Rt>(target: Target) {
    let server = target.shared();
    let name = queue_name::<T>("update");
    let id = add_one::<T>(server, &name, JobOptions::new()).await;
    let worker = Worker::<T::R>::start(
        options(server),
        worker_options(&name),
        |job: ActiveJob| async move {
            job.extend_lock(Duration::from_secs(60)).await?;
            job.update_data(&serde_json::json!({ "step": 2 })).await?;
            Ok::<_, JobError>(())
        },
    )
    .await
    .expect("worker");
    let mut raw = raw(server);
    eventually::<T>("completed", || raw.state(&id) == "completed").await;
    within::<T, _>("worker close", worker.close()).await;
    let job = raw.job(&id).expect("job");
    assert_eq!(job.data, Value::map([("step", Value::Int(2))]));
}

/// The worker registers: raw ListWorkers lists its id while it runs, not after close.
async fn list_workers_shows_the_worker<T: Rt>(target: Target) {
    let server = target.shared();
    let name = queue_name::<T>("listed");
    let worker = Worker::<T::R>::start(
        options(server),
        worker_options(&name).name("mailer"),
        |_job: ActiveJob| async { Ok::<(), String>(()) },
    )
    .await
    .expect("worker");
    let wid = worker.id().to_owned();
    assert_eq!(worker.name(), "mailer");
    let mut raw = raw(server);
    eventually::<T>("listed", || raw_workers(&mut raw).contains(&wid)).await;
    within::<T, _>("worker close", worker.close()).await;
    assert!(
        !raw_workers(&mut raw).contains(&wid),
        "unregistered on close"
    );
}

/// The client-side limiter: one job per (long) window, so of two jobs one runs and the other
/// stays waiting.
async fn limiter_caps_jobs_per_window<T: Rt>(target: Target) {
    let server = target.shared();
    let name = queue_name::<T>("limiter");
    let a = add_one::<T>(server, &name, JobOptions::new()).await;
    let b = add_one::<T>(server, &name, JobOptions::new()).await;
    let worker = Worker::<T::R>::start(
        options(server),
        worker_options(&name)
            .concurrency(4)
            .limiter(1, Duration::from_secs(600)),
        |_job: ActiveJob| async { Ok::<(), String>(()) },
    )
    .await
    .expect("worker");
    let mut raw = raw(server);
    eventually::<T>("one completed", || {
        raw.state(&a) == "completed" || raw.state(&b) == "completed"
    })
    .await;
    let mut states = [raw.state(&a), raw.state(&b)];
    states.sort();
    assert_eq!(states, ["completed", "waiting"]);
    within::<T, _>("worker close", worker.close()).await;
}

/// A forced close hands the jobs still running back to waiting at once (not after their lock
/// expires), and stops their processors.
async fn forced_close_releases_held_jobs<T: Rt>(target: Target) {
    let server = target.shared();
    let name = queue_name::<T>("forced");
    let id = add_one::<T>(server, &name, JobOptions::new()).await;
    let never = Arc::new(AtomicBool::new(false));
    let n = never.clone();
    let worker = Worker::<T::R>::start(
        options(server),
        worker_options(&name).lock_ttl(Duration::from_secs(60)),
        move |_job: ActiveJob| {
            let n = n.clone();
            async move {
                hold::<T>(&n).await;
                Ok::<(), String>(())
            }
        },
    )
    .await
    .expect("worker");
    let mut raw = raw(server);
    eventually::<T>("active", || raw.state(&id) == "active").await;
    let report = within::<T, _>(
        "forced close",
        worker.close_with_grace(Duration::from_millis(100)),
    )
    .await;
    assert_eq!(report.released, std::slice::from_ref(&id));
    assert_eq!(raw.state(&id), "waiting", "handed back at once");
}

/// Opens once `n` processors have started: each waits on it, so with fewer than `n` running
/// at once it never opens (and the scenario's hang guard fails it).
struct Latch {
    started: AtomicUsize,
    n: usize,
    /// Whether it is open, and the wakers of those waiting until it is.
    state: std::sync::Mutex<(bool, Vec<std::task::Waker>)>,
}

impl Latch {
    fn new(n: usize) -> Arc<Self> {
        Arc::new(Latch {
            started: AtomicUsize::new(0),
            n,
            state: std::sync::Mutex::new((false, Vec::new())),
        })
    }

    /// Counts one processor in; the `n`-th opens the latch.
    fn arrive(&self) {
        if self.started.fetch_add(1, Ordering::SeqCst) + 1 == self.n {
            let waiting = {
                let mut state = self.state.lock().expect("latch");
                state.0 = true;
                std::mem::take(&mut state.1)
            };
            waiting.into_iter().for_each(std::task::Waker::wake);
        }
    }

    /// Resolves once the latch is open.
    fn opened(&self) -> impl std::future::Future<Output = ()> + '_ {
        std::future::poll_fn(|cx| {
            let mut state = self.state.lock().expect("latch");
            if state.0 {
                std::task::Poll::Ready(())
            } else {
                state.1.push(cx.waker().clone());
                std::task::Poll::Pending
            }
        })
    }
}

/// A concurrency above one pull's 1,000 jobs: a worker of 1,500 runs 1,200 jobs at once
/// (none finishes before all have started), pulled in several PULLBs; all complete, as a
/// raw connection counts.
async fn concurrency_beyond_one_pull<T: Rt>(target: Target) {
    const JOBS: usize = 1_200;
    let server = target.shared();
    let name = queue_name::<T>("wide");
    let client = connect::<T>(options(server)).await;
    let q = client.queue(&name);
    let adds = (0..JOBS).map(|i| q.add("slow", &i, JobOptions::new()));
    for id in within::<T, _>("adds", futures_util::future::join_all(adds)).await {
        id.expect("add");
    }
    let latch = Latch::new(JOBS);
    let l = latch.clone();
    let worker = within::<T, _>(
        "worker start",
        Worker::<T::R>::start(
            options(server),
            worker_options(&name).concurrency(1_500),
            move |_job| {
                let l = l.clone();
                async move {
                    l.arrive();
                    l.opened().await;
                    Ok::<(), String>(())
                }
            },
        ),
    )
    .await
    .expect("worker");
    within::<T, _>("all jobs running at once", latch.opened()).await;
    let mut raw = raw(server);
    eventually::<T>("every job completed", || {
        raw.counts(&name).completed == JOBS as u64
    })
    .await;
    within::<T, _>("worker close", worker.close()).await;
    client.close().await;
}

/// A paused worker pulls nothing; resumed, it processes the job.
async fn pause_and_resume_worker<T: Rt>(target: Target) {
    let server = target.shared();
    let name = queue_name::<T>("wpause");
    let worker = Worker::<T::R>::start(
        options(server),
        worker_options(&name),
        |_job: ActiveJob| async { Ok::<(), String>(()) },
    )
    .await
    .expect("worker");
    worker.pause();
    assert!(worker.is_paused());
    // A pull already waiting on the server may still take one job: let it end first.
    T::sleep(Duration::from_millis(400)).await;
    let id = add_one::<T>(server, &name, JobOptions::new()).await;
    let mut raw = raw(server);
    T::sleep(Duration::from_millis(400)).await;
    assert_eq!(raw.state(&id), "waiting", "a paused worker pulls nothing");
    worker.resume();
    eventually::<T>("completed", || raw.state(&id) == "completed").await;
    within::<T, _>("worker close", worker.close()).await;
}

/// The events stream reports a job's life in order: active, progress, completed.
async fn events_stream<T: Rt>(target: Target) {
    let server = target.shared();
    let name = queue_name::<T>("events");
    let worker = Worker::<T::R>::start(
        options(server),
        worker_options(&name),
        |job: ActiveJob| async move {
            job.update_progress(50.0).detach();
            Ok::<_, String>(7)
        },
    )
    .await
    .expect("worker");
    let mut events = worker.events();
    let id = add_one::<T>(server, &name, JobOptions::new()).await;
    let mut seen = Vec::new();
    while seen.len() < 3 {
        let e = within::<T, _>("event", events.next()).await.expect("event");
        // An empty pull may come before the add, or beside the job: `drained_once_per_spell`.
        if e != WorkerEvent::Drained {
            seen.push(e);
        }
    }
    assert_eq!(
        seen,
        [
            WorkerEvent::Active { id: id.clone() },
            WorkerEvent::Progress {
                id: id.clone(),
                progress: 50.0,
                message: None
            },
            WorkerEvent::Completed {
                id: id.clone(),
                result: Value::Int(7)
            },
        ]
    );
    within::<T, _>("worker close", worker.close()).await;
    // The stream ends on close (after a `Drained` for the empty pull that followed the job).
    let rest: Vec<WorkerEvent> = within::<T, _>("end", events.collect()).await;
    assert!(rest.iter().all(|e| *e == WorkerEvent::Drained), "{rest:?}");
}

/// `Drained` comes once per empty spell: at start on an empty queue, again after a job, and
/// not on every empty pull in between.
async fn drained_once_per_spell<T: Rt>(target: Target) {
    let server = target.shared();
    let name = queue_name::<T>("drained");
    let worker = Worker::<T::R>::start(
        options(server),
        worker_options(&name).concurrency(1),
        |_job: ActiveJob| async move { Ok::<_, String>(1) },
    )
    .await
    .expect("worker");
    let mut events = worker.events();
    let first = within::<T, _>("event", events.next()).await;
    assert_eq!(
        first,
        Some(WorkerEvent::Drained),
        "an empty queue is drained"
    );
    let id = add_one::<T>(server, &name, JobOptions::new()).await;
    let mut seen = Vec::new();
    while seen.len() < 3 {
        seen.push(within::<T, _>("event", events.next()).await.expect("event"));
    }
    assert_eq!(seen[0], WorkerEvent::Active { id: id.clone() });
    assert!(seen.contains(&WorkerEvent::Drained), "{seen:?}");
    assert!(
        seen.contains(&WorkerEvent::Completed {
            id: id.clone(),
            result: Value::Int(1)
        }),
        "{seen:?}"
    );
    // Several more empty pulls (each one a frame answered) without a job: no more `Drained`.
    let answered = worker.stats().await.session.frames_received;
    within::<T, _>("idle pulls", async {
        while worker.stats().await.session.frames_received < answered + 4 {
            T::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    let id = add_one::<T>(server, &name, JobOptions::new()).await;
    let next = within::<T, _>("event", events.next()).await;
    assert_eq!(
        next,
        Some(WorkerEvent::Active { id }),
        "no Drained while idle"
    );
    within::<T, _>("worker close", worker.close()).await;
}

/// The queue's job-record methods: effects seen raw, wrong input refused with bunqueue's text.
async fn queue_job_methods<T: Rt>(target: Target) {
    let server = target.shared();
    let name = queue_name::<T>("qjob");
    let client = connect::<T>(options(server)).await;
    let q = client.queue(&name);
    let id = q.add("j", &1, JobOptions::new()).await.expect("add");
    let mut raw = raw(server);

    q.add_job_log(&id, "by hand").await.expect("add_job_log");
    q.add_job_log(&id, "again").await.expect("add_job_log");
    assert_eq!(raw_logs(&mut raw, &id), ["by hand", "again"]);
    let logs = q.get_job_logs(&id, None).await.expect("get_job_logs");
    assert_eq!(logs.count, 2);
    assert_eq!(logs.logs[1].message, "again");
    assert_eq!(logs.logs[1].level, "info");
    let one = q.get_job_logs(&id, Some((1, 1))).await.expect("range");
    assert_eq!((one.count, one.logs.len()), (2, 1));
    q.clear_job_logs(&id, Some(1)).await.expect("clear keep 1");
    assert_eq!(raw_logs(&mut raw, &id), ["again"]);
    q.clear_job_logs(&id, None).await.expect("clear");
    assert!(raw_logs(&mut raw, &id).is_empty());

    q.update_job_data(&id, &serde_json::json!({"a": 1}))
        .await
        .expect("update_job_data");
    assert_eq!(
        raw.job(&id).expect("job").data,
        Value::map([("a", Value::Int(1))])
    );

    // Progress only for active jobs: bunqueue's own text.
    match q.update_job_progress(&id, 10.0, None).await {
        Err(Error::Server(e)) => {
            assert_eq!(e.message(), "Job is not active (current state: waiting)")
        }
        other => panic!("{other:?}"),
    }
    match q.get_job_progress(&id).await {
        Err(Error::Server(e)) => {
            assert_eq!(e.message(), "Job is not active (current state: waiting)")
        }
        other => panic!("{other:?}"),
    }
    match q.update_job_progress("no-such-job", 10.0, None).await {
        Err(Error::Server(e)) => assert_eq!(e.message(), "Job not found"),
        other => panic!("{other:?}"),
    }
    match q.add_job_log("no-such-job", "x").await {
        Err(Error::Server(e)) => assert_eq!(e.message(), "Job not found"),
        other => panic!("{other:?}"),
    }
    match q.update_job_data("no-such-job", &1).await {
        Err(Error::Server(e)) => assert_eq!(e.message(), "Job not found or cannot be updated"),
        other => panic!("{other:?}"),
    }
    match q
        .extend_job_lock(&id, Some("wrong"), Duration::from_secs(1))
        .await
    {
        Err(Error::Server(e)) => assert_eq!(e.message(), "Lock not found or invalid token"),
        other => panic!("{other:?}"),
    }
    match q
        .move_job_to_delayed("no-such-job", Duration::from_secs(1), None)
        .await
    {
        Err(Error::Server(e)) => assert_eq!(e.message(), "Job not found"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        q.extend_job_locks(&[(id.as_str(), Some("wrong"), Duration::from_secs(1))])
            .await
            .expect("extend_job_locks"),
        0
    );
    // Refused locally, before anything is sent.
    match q.update_job_progress(&id, f64::NAN, None).await {
        Err(Error::Invalid(v)) => assert_eq!(v.field, "progress"),
        other => panic!("{other:?}"),
    }
    match q.get_job_logs("", None).await {
        Err(Error::Invalid(v)) => assert_eq!(v.field, "id"),
        other => panic!("{other:?}"),
    }
    // The delayed move of a waiting job: bunqueue moves it (ChangeDelay semantics).
    q.move_job_to_delayed(&id, Duration::from_secs(600), None)
        .await
        .expect("move_job_to_delayed");
    assert_eq!(raw.state(&id), "delayed");
    q.move_job_to_wait(&id, None)
        .await
        .expect("move_job_to_wait");
    assert_eq!(raw.state(&id), "waiting");
    client.close().await;
}

scenarios! {
    bunqueue, broker => [
        progress_and_logs,
        ts_client_sees_progress_and_logs,
        ts_queue_events_see_progress,
        unrecoverable_is_not_retried,
        plain_error_is_retried,
        delay_moves_to_delayed,
        rate_limited_goes_back_to_waiting,
        update_data_and_extend_lock,
        list_workers_shows_the_worker,
        forced_close_releases_held_jobs,
        pause_and_resume_worker,
        events_stream,
        drained_once_per_spell,
        worker_removes_finished_jobs,
        first_subscriber_sees_events_since_start,
        queue_job_methods,
        limiter_caps_jobs_per_window,
        concurrency_beyond_one_pull,
    ];
}
