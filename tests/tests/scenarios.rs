//! One set of scenarios for the async clients, run against every runtime adapter (tokio, smol,
//! async-std) and every server target, by a macro: each scenario is written once, generic over
//! the runtime.
//!
//! What landed on the server is checked through [`RawClient`]: a blocking connection over
//! `std::net` that speaks frames with `autobatch_core::wire` and shares nothing with the
//! client under test. Frames are counted by a [`CountingProxy`] between the client and the
//! server. No assertion depends on timing; the only durations are hang guards and the short
//! timeouts of the failure scenarios.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use autobatch_driver::{
    BatchConfig, Client, ConnectError, Error, FlushReason, JobOptions, OptionsError, Replay,
    Response, Value, Worker, WorkerOptions,
};
use autobatch_tests::target::AUTH_TOKEN;
use autobatch_tests::{CountingProxy, RawClient, Target};
use futures_util::future::{join, join_all};
use futures_util::FutureExt;

#[macro_use]
mod common;

use common::*;

// ------------------------------------------------------------------------------ scenarios

/// Sequential adds pay nothing: one PUSH per add, never a PUSHB, every flush an idle flush.
async fn sequential_adds<T: Rt>(target: Target) {
    let server = target.shared();
    let proxy = CountingProxy::start(server);
    let client = connect::<T>(options(proxy.addr())).await;
    let name = queue_name::<T>("seq");
    let q = client.queue(&name);
    let mut ids = Vec::new();
    for i in 0..20 {
        ids.push(q.add("seq", &i, JobOptions::new()).await.expect("add"));
    }
    let c = proxy.snapshot();
    // Each add goes out alone as the PUSH it is: a PUSHB of one costs some servers far more
    // (bunqueue on PostgreSQL), and sequential code must pay nothing for batching.
    assert_eq!(c.cmd("PUSH"), 20, "{c:?}");
    assert_eq!(c.cmd("PUSHB"), 0, "{c:?}");
    let stats = client.stats().await;
    let qs = stats.queue(&name).expect("queue stats");
    assert_eq!(qs.flushes_for(FlushReason::Idle), 20, "{qs:?}");
    for r in [
        FlushReason::Size,
        FlushReason::Linger,
        FlushReason::Completion,
    ] {
        assert_eq!(qs.flushes_for(r), 0, "{r:?} flush in {qs:?}");
    }
    client.close().await;
    let mut raw = raw(server);
    assert_eq!(raw.count(&name), 20);
    for id in &ids {
        assert_eq!(raw.state(id), "waiting");
    }
}

/// Waves of concurrent adds are batched: a wave of 100 takes a handful of PUSHB, not 100.
///
/// The server's replies are held until every add of the wave is in the client's hands. How a
/// wave splits into frames otherwise depends on how the OS schedules the caller: where it
/// runs beside other threads, a caller descheduled between adds lets each one be answered
/// before the next arrives, and each then rightly leaves alone, as a sequential add does. Held replies make "adds that come while a frame is in flight share
/// the next frame" the only thing that decides, on every runtime. A long linger keeps a slow
/// caller's adds from being flushed a few at a time meanwhile.
async fn concurrent_waves<T: Rt>(target: Target) {
    let server = target.shared();
    let proxy = CountingProxy::start(server);
    let batching = BatchConfig::new().linger(Duration::from_secs(30));
    let client = connect::<T>(options(proxy.addr()).batching(Some(batching))).await;
    let name = queue_name::<T>("waves");
    let q = client.queue(&name);
    let mut all = std::collections::HashSet::new();
    let mut pushed = 0;
    for wave in [10usize, 50, 100] {
        proxy.reset();
        proxy.hold_replies();
        pushed += wave as u64;
        let adds = join_all((0..wave).map(|i| q.add("wave", &i, JobOptions::new())));
        let release = async {
            while client
                .stats()
                .await
                .queue(&name)
                .map_or(0, |s| s.items_pushed)
                < pushed
            {
                T::sleep(Duration::from_millis(5)).await;
            }
            proxy.release_replies();
        };
        let (ids, ()) = within::<T, _>("wave", join(adds, release)).await;
        for id in ids {
            assert!(all.insert(id.expect("add")), "duplicate id");
        }
        let c = proxy.snapshot();
        // Every add left in a frame. At most the first leaves alone, as the PUSH it is (where
        // the pump saw it before the rest); the others wait for its answer or a full batch.
        let pushes = c.cmd("PUSH") as usize;
        assert_eq!(c.pushb_total() + pushes, wave, "{c:?}");
        assert!(pushes <= 1, "a wave of {wave} was not batched: {c:?}");
        assert!(
            c.cmd("PUSHB") as usize <= wave.div_ceil(50) + 1,
            "a wave of {wave} took {c:?}"
        );
    }
    client.close().await;
    assert_eq!(raw(server).count(&name), 160);
}

/// The future of an add stays a few words: `join_all` and spawned tasks move and store one
/// per add, and when it held the job inline and the several-broker path's state (3,840 bytes)
/// copying it was the largest cost of an add at 100 concurrent.
async fn an_add_future_is_small<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let name = queue_name::<T>("small-future");
    let q = client.queue(&name);
    let add = q.add("small", &1u32, JobOptions::new());
    let size = std::mem::size_of_val(&add);
    // 64 bytes, debug and release: the encoded job (48) until sent, then its reply slot and
    // guards (the hand-written `AddFuture`); 336 as an `async` block, 3,840 before the
    // caller-side work.
    assert!(size <= 128, "the future of an add is {size} bytes");
    let id = add.await.expect("add");
    client.close().await;
    assert_eq!(raw(server).state(&id), "waiting");
}

/// Concurrent adds across several queues each land in their own queue.
async fn several_queues<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let names: Vec<String> = (0..3)
        .map(|i| queue_name::<T>(&format!("multi{i}")))
        .collect();
    let queues: Vec<_> = names.iter().map(|n| client.queue(n)).collect();
    let adds = (0..60).map(|i| queues[i % 3].add("multi", &i, JobOptions::new()));
    for r in within::<T, _>("adds", join_all(adds)).await {
        r.expect("add");
    }
    let stats = client.stats().await;
    for n in &names {
        assert_eq!(stats.queue(n).expect("queue stats").items_sent, 20);
    }
    client.close().await;
    let mut raw = raw(server);
    for n in &names {
        assert_eq!(raw.count(n), 20, "{n}");
    }
}

/// Durable adds bypass the batcher: one PUSH each, even when concurrent.
async fn durable_adds<T: Rt>(target: Target) {
    let server = target.shared();
    let proxy = CountingProxy::start(server);
    let client = connect::<T>(options(proxy.addr())).await;
    let name = queue_name::<T>("durable");
    let q = client.queue(&name);
    let adds = (0..5).map(|i| q.add("durable", &i, JobOptions::new().durable(true)));
    let ids: Vec<String> = within::<T, _>("adds", join_all(adds))
        .await
        .into_iter()
        .map(|r| r.expect("durable add"))
        .collect();
    let c = proxy.snapshot();
    assert_eq!(c.cmd("PUSH"), 5, "{c:?}");
    assert_eq!(c.cmd("PUSHB"), 0, "{c:?}");
    client.close().await;
    let mut raw = raw(server);
    for id in &ids {
        assert!(raw.job(id).is_some(), "{id} not on the server");
    }
}

/// `add_bulk` is one PUSHB with every job, ids in order.
async fn add_bulk<T: Rt>(target: Target) {
    let server = target.shared();
    let proxy = CountingProxy::start(server);
    let client = connect::<T>(options(proxy.addr())).await;
    let name = queue_name::<T>("bulk");
    let q = client.queue(&name);
    let jobs = (0..25)
        .map(|i| ("bulk", i, JobOptions::new().job_id(format!("{name}-{i}"))))
        .collect();
    let ids = within::<T, _>("add_bulk", q.add_bulk(jobs))
        .await
        .expect("add_bulk");
    assert_eq!(ids.len(), 25);
    for (i, id) in ids.iter().enumerate() {
        assert_eq!(id, &format!("{name}-{i}"));
    }
    let c = proxy.snapshot();
    assert_eq!(c.cmd("PUSHB"), 1, "{c:?}");
    assert_eq!(c.pushb_items, vec![25]);
    // Lookups through the client under test agree with the raw connection.
    assert_eq!(q.count().await.expect("count"), 25);
    assert_eq!(q.get_job_counts().await.expect("counts").waiting, 25);
    assert_eq!(
        q.get_state(&ids[0]).await.expect("state"),
        autobatch_driver::JobState::Waiting
    );
    let job = q.get_job(&ids[3]).await.expect("get_job").expect("known");
    assert_eq!(job.data.deserialize::<i64>().expect("data"), 3);
    assert!(q.get_job("no-such-job").await.expect("lookup").is_none());
    client.close().await;
    assert_eq!(raw(server).count(&name), 25);
}

/// A worker with concurrency 10 drains a queue; completions go out as ACKB, never ACK.
async fn worker_drains<T: Rt>(target: Target) {
    let server = target.shared();
    let name = queue_name::<T>("work");
    let client = connect::<T>(options(server)).await;
    let q = client.queue(&name);
    let adds = (0..50i64).map(|i| q.add("work", &i, JobOptions::new()));
    let ids: Vec<String> = join_all(adds)
        .await
        .into_iter()
        .map(|r| r.expect("add"))
        .collect();
    client.close().await;

    let proxy = CountingProxy::start(server);
    let running = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let (r, p) = (running.clone(), peak.clone());
    let worker = within::<T, _>(
        "worker start",
        Worker::<T::R>::start(
            options(proxy.addr()),
            WorkerOptions::new(&name)
                .concurrency(10)
                .poll_timeout(Duration::from_millis(200)),
            move |job| {
                let (r, p) = (r.clone(), p.clone());
                async move {
                    let now = r.fetch_add(1, Ordering::SeqCst) + 1;
                    p.fetch_max(now, Ordering::SeqCst);
                    // Hold the slot across a yield so that jobs overlap.
                    T::sleep(Duration::from_millis(5)).await;
                    r.fetch_sub(1, Ordering::SeqCst);
                    let n: i64 = job.data.deserialize().map_err(|e| e.to_string())?;
                    Ok::<_, String>(n * 2)
                }
            },
        ),
    )
    .await
    .expect("worker");
    let mut raw = raw(server);
    eventually::<T>("all jobs completed", || raw.counts(&name).completed == 50).await;
    within::<T, _>("worker close", worker.close()).await;
    let c = proxy.snapshot();
    assert!(c.cmd("ACKB") >= 1, "{c:?}");
    assert_eq!(c.cmd("ACK"), 0, "{c:?}");
    assert_eq!(c.ackb_total(), 50, "{c:?}");
    assert_eq!(c.cmd("FAIL"), 0, "{c:?}");
    let peak = peak.load(Ordering::SeqCst);
    assert!((1..=10).contains(&peak), "peak concurrency {peak}");
    assert_eq!(raw.state(&ids[7]), "completed");
    let stats = worker.stats().await;
    assert_eq!(stats.session.jobs_completed, 50);
}

/// A job that runs longer than its lock TTL keeps its lock (JobHeartbeatB) and runs once: the
/// server does not hand it out again. (The broker sweeps expired locks every 500 ms, so without
/// heartbeats this job would be pulled a second time.)
async fn long_job_keeps_its_lock<T: Rt>(target: Target) {
    let server = target.shared();
    let name = queue_name::<T>("long");
    let client = connect::<T>(options(server)).await;
    let id = client
        .queue(&name)
        .add("long", &0, JobOptions::new().attempts(5))
        .await
        .expect("add");
    client.close().await;
    let proxy = CountingProxy::start(server);
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    let worker = within::<T, _>(
        "worker start",
        Worker::<T::R>::start(
            options(proxy.addr()),
            WorkerOptions::new(&name)
                .concurrency(2)
                // Renewals go far more often than the lock lasts, so one delayed by a loaded
                // machine still lands in time: 250 ms into a 3 s lock leaves 2.75 s of slack.
                // (Heartbeats at half a 2 s TTL left 1 s, which CI once missed on the shared
                // embedded broker; half a 1 s TTL left 500 ms, which it had missed before.)
                .lock_ttl(Duration::from_millis(3000))
                .heartbeat_interval(Some(Duration::from_millis(250)))
                .poll_timeout(Duration::from_millis(200)),
            move |_job| {
                let r = r.clone();
                async move {
                    r.fetch_add(1, Ordering::SeqCst);
                    // Two and a half lock lifetimes.
                    T::sleep(Duration::from_millis(7500)).await;
                    Ok::<_, String>(())
                }
            },
        ),
    )
    .await
    .expect("worker");
    let mut raw = raw(server);
    eventually::<T>("the long job completed", || raw.state(&id) == "completed").await;
    within::<T, _>("worker close", worker.close()).await;
    assert_eq!(runs.load(Ordering::SeqCst), 1, "processed exactly once");
    let c = proxy.snapshot();
    assert!(c.cmd("JobHeartbeatB") >= 2, "locks renewed: {c:?}");
}

/// A processor error becomes a FAIL: the job ends failed (no attempts left) with the message.
async fn processor_error_fails<T: Rt>(target: Target) {
    let server = target.shared();
    let name = queue_name::<T>("err");
    let client = connect::<T>(options(server)).await;
    let q = client.queue(&name);
    let last = q
        .add("err", &1, JobOptions::new().attempts(1))
        .await
        .expect("add");
    let retried = q
        .add(
            "err",
            &2,
            JobOptions::new()
                .attempts(5)
                .backoff(autobatch_driver::Backoff::Fixed(Duration::from_secs(60))),
        )
        .await
        .expect("add");
    client.close().await;

    let proxy = CountingProxy::start(server);
    let worker = Worker::<T::R>::start(
        options(proxy.addr()),
        WorkerOptions::new(&name).poll_timeout(Duration::from_millis(200)),
        |_job| async { Err::<(), _>("boom: the processor said no") },
    )
    .await
    .expect("worker");
    let mut raw = raw(server);
    eventually::<T>("both jobs failed once", || {
        raw.state(&last) == "failed" && raw.state(&retried) == "delayed"
    })
    .await;
    within::<T, _>("worker close", worker.close()).await;
    let job = raw.job(&last).expect("job");
    assert!(
        job.failed_reason.as_deref().unwrap_or("").contains("boom"),
        "{job:?}"
    );
    let c = proxy.snapshot();
    assert_eq!(c.cmd("FAIL"), 2, "{c:?}");
    assert_eq!(c.ackb_total(), 0, "{c:?}");
}

/// A processor error with a source fails its job with a stack — the message,
/// then one `caused by:` line per cause — which the server keeps as the job's `stacktrace`, read
/// back through an independent connection. The embedded broker does not store stack traces
/// (yet), so the check of what landed runs against bunqueue only.
async fn processor_error_carries_its_stack<T: Rt>(target: Target) {
    #[derive(Debug)]
    struct BadOrder(std::num::ParseIntError);
    impl std::fmt::Display for BadOrder {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("bad order id")
        }
    }
    impl std::error::Error for BadOrder {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }
    let server = target.shared();
    let name = queue_name::<T>("stack");
    let client = connect::<T>(options(server)).await;
    let id = client
        .queue(&name)
        .add("order", &"x1", JobOptions::new().attempts(1))
        .await
        .expect("add");
    client.close().await;
    let proxy = CountingProxy::start(server);
    let worker = Worker::<T::R>::start(
        options(proxy.addr()),
        WorkerOptions::new(&name).poll_timeout(Duration::from_millis(200)),
        |job| async move {
            let raw: String = job.data.deserialize().map_err(|e| e.to_string())?;
            let n: u32 = raw
                .parse()
                .map_err(|e| Box::new(BadOrder(e)) as Box<dyn std::error::Error + Send + Sync>)?;
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(n)
        },
    )
    .await
    .expect("worker");
    let mut raw = raw(server);
    eventually::<T>("the job failed", || raw.state(&id) == "failed").await;
    within::<T, _>("worker close", worker.close()).await;
    assert_eq!(proxy.snapshot().cmd("FAIL"), 1);
    let job = raw.job(&id).expect("job");
    assert_eq!(job.failed_reason.as_deref(), Some("bad order id"));
    let stack = raw.stacktrace(&id);
    if target == Target::Bunqueue {
        assert_eq!(
            stack.as_deref(),
            Some(
                &[
                    "bad order id".to_owned(),
                    "caused by: invalid digit found in string".to_owned()
                ][..]
            ),
        );
    }
}

/// Eight concurrent valid adds of 8.4 MB each, together past the 64 MiB frame
/// limit, all succeed and all land: they leave as more than one PUSHB, each within the limit.
async fn adds_near_the_frame_limit<T: Rt>(target: Target) {
    let server = target.shared();
    let name = queue_name::<T>("huge");
    let proxy = CountingProxy::start(server);
    let client = connect::<T>(options(proxy.addr())).await;
    let q = client.queue(&name);
    let big = "x".repeat(8_400_000);
    let adds = (0..8).map(|_| q.add("big", &big, JobOptions::new()));
    let ids = within::<T, _>("8 big adds", join_all(adds)).await;
    for id in &ids {
        assert!(id.is_ok(), "{id:?}");
    }
    client.close().await;
    // 8 adds of 8.4 MB never fit one 64 MiB frame: they left as several (the first, alone,
    // as a PUSH).
    let c = proxy.snapshot();
    assert!(c.cmd("PUSHB") + c.cmd("PUSH") >= 2, "{c:?}");
    assert_eq!(c.pushb_total() + c.cmd("PUSH") as usize, 8, "{c:?}");
    assert_eq!(raw(server).count(&name), 8);
}

/// A panicking processor fails only its own job; the others complete.
async fn panicking_processor<T: Rt>(target: Target) {
    let server = target.shared();
    let name = queue_name::<T>("panic");
    let client = connect::<T>(options(server)).await;
    let q = client.queue(&name);
    let mut ids = Vec::new();
    for job in ["ok", "ok", "panic", "ok"] {
        ids.push(
            q.add(job, &0, JobOptions::new().attempts(1))
                .await
                .expect("add"),
        );
    }
    client.close().await;
    let worker = Worker::<T::R>::start(
        options(server),
        WorkerOptions::new(&name)
            .concurrency(4)
            .poll_timeout(Duration::from_millis(200)),
        |job| async move {
            if job.name == "panic" {
                panic!("processor panics on purpose");
            }
            Ok::<_, String>("fine")
        },
    )
    .await
    .expect("worker");
    let mut raw = raw(server);
    eventually::<T>("3 completed, 1 failed", || {
        let c = raw.counts(&name);
        c.completed == 3 && c.failed == 1
    })
    .await;
    within::<T, _>("worker close", worker.close()).await;
    assert_eq!(raw.state(&ids[2]), "failed");
    let job = raw.job(&ids[2]).expect("job");
    assert!(
        job.failed_reason.as_deref().unwrap_or("").contains("panic"),
        "{job:?}"
    );
}

/// A good token works; a bad one is refused at connect with AuthFailed, without hanging.
async fn auth_tokens<T: Rt>(target: Target) {
    let server = target.shared_auth();
    let name = queue_name::<T>("auth");
    let good = connect::<T>(options(server).token(AUTH_TOKEN)).await;
    let id = good
        .queue(&name)
        .add("auth", &1, JobOptions::new())
        .await
        .expect("add with a good token");
    good.close().await;
    let mut raw = RawClient::connect(server, Some(AUTH_TOKEN)).expect("raw");
    assert_eq!(raw.state(&id), "waiting");

    let bad = within::<T, _>(
        "connect with a bad token",
        Client::<T::R>::connect(fragile_options(server).token("wrong")),
    )
    .await;
    match bad {
        Err(ConnectError::Handshake(Error::AuthFailed(_))) => {}
        other => panic!("expected AuthFailed, got {other:?}"),
    }
}

/// Bad input fails alone with a typed error; its neighbours in the same wave succeed.
async fn bad_input_fails_alone<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let name = queue_name::<T>("bad");
    let q = client.queue(&name);
    let bad_queue = client.queue("no spaces allowed");
    let huge = "x".repeat(10 * 1024 * 1024 + 1);

    let mut adds: Vec<BoxFut<Result<String, Error>>> = Vec::new();
    for i in 0..5 {
        let q = q.clone();
        adds.push(Box::pin(async move {
            q.add("good", &i, JobOptions::new()).await
        }));
    }
    adds.push(Box::pin(async move {
        bad_queue.add("bad", &0, JobOptions::new()).await
    }));
    let q2 = q.clone();
    adds.push(Box::pin(async move {
        q2.add("bad", &huge, JobOptions::new()).await
    }));
    let q3 = q.clone();
    adds.push(Box::pin(async move {
        q3.add("bad", &0, JobOptions::new().attempts(0)).await
    }));
    let q4 = q.clone();
    adds.push(Box::pin(
        async move { q4.add("", &0, JobOptions::new()).await },
    ));
    for i in 5..10 {
        let q = q.clone();
        adds.push(Box::pin(async move {
            q.add("good", &i, JobOptions::new()).await
        }));
    }
    let results = within::<T, _>("wave", join_all(adds)).await;
    let field = |r: &Result<String, Error>| match r {
        Err(Error::Invalid(v)) => v.field,
        other => panic!("expected Invalid, got {other:?}"),
    };
    assert_eq!(field(&results[5]), "queue");
    assert_eq!(field(&results[6]), "data");
    assert_eq!(field(&results[7]), "maxAttempts");
    assert_eq!(field(&results[8]), "name");
    for r in results[..5].iter().chain(&results[9..]) {
        r.as_ref().expect("good add");
    }
    // Bad options are refused before anything is attempted.
    let err = Client::<T::R>::connect(options(server).max_in_flight_commands(0))
        .await
        .expect_err("invalid options");
    assert!(
        matches!(err, ConnectError::Options(OptionsError::Field { .. })),
        "{err:?}"
    );
    client.close().await;
    assert_eq!(raw(server).count(&name), 10);
}

/// The proxy cuts every connection mid-wave: every caller gets an outcome, each success is on
/// the server, and the client reconnects for the next add.
async fn connection_cut_mid_wave<T: Rt>(target: Target) {
    let server = target.shared();
    let proxy = CountingProxy::start(server);
    let client = connect::<T>(fragile_options(proxy.addr())).await;
    let name = queue_name::<T>("cut");
    let q = client.queue(&name);
    let wave = join_all((0..300).map(|i| q.add("cut", &i, JobOptions::new())));
    let cutter = async {
        eventually::<T>("a first PUSHB", || proxy.snapshot().cmd("PUSHB") >= 1).await;
        proxy.cut_all();
    };
    let (results, ()) = within::<T, _>("wave with a cut", join(wave, cutter)).await;
    let mut raw = raw(server);
    let mut ok = 0;
    for r in &results {
        match r {
            Ok(id) => {
                ok += 1;
                assert!(raw.job(id).is_some(), "{id} reported added but missing");
            }
            Err(e) => assert!(is_transport(e), "unexpected error {e:?}"),
        }
    }
    assert!(ok >= 1, "the first PUSHB went through before the cut");
    // The cut lands a moment after it is signalled, so an add right after the wave may still
    // meet it: retry transport errors until the client has reconnected.
    let mut after = None;
    for _ in 0..100 {
        match within::<T, _>("add after the cut", q.add("after", &0, JobOptions::new())).await {
            Ok(id) => {
                after = Some(id);
                break;
            }
            Err(e) => assert!(is_transport(&e), "unexpected error {e:?}"),
        }
    }
    let after = after.expect("an add succeeds after reconnecting");
    assert!(raw.job(&after).is_some());
    assert!(client.stats().await.session.connects >= 2);
    within::<T, _>("close", client.close()).await;
}

/// An add the client holds unwritten when its connection is lost goes out on the next
/// connection and lands: only the add that was written and not answered may have been applied.
async fn an_unwritten_add_goes_out_on_the_next_connection<T: Rt>(target: Target) {
    let server = target.shared();
    let proxy = CountingProxy::start(server);
    // One batch in flight at a time: the second add waits in the batcher behind the first.
    let batching = BatchConfig::new()
        .max_in_flight(1)
        .linger(Duration::from_secs(60));
    let client = connect::<T>(fragile_options(proxy.addr()).batching(Some(batching))).await;
    let name = queue_name::<T>("unwritten-at-cut");
    let q = client.queue(&name);
    proxy.hold_replies();
    let first = q.add("written", &0, JobOptions::new());
    let then = async {
        eventually::<T>("the first add written", || {
            proxy.snapshot().cmd("PUSH") == 1
        })
        .await;
        let second = q.add("unwritten", &1, JobOptions::new());
        let cutter = async {
            // The second add is in the client's batcher, behind the first.
            while client
                .stats()
                .await
                .queue(&name)
                .map_or(0, |s| s.items_pushed)
                < 2
            {
                T::sleep(Duration::from_millis(5)).await;
            }
            proxy.cut_all();
            // Answers flow again only on the new connection: none of the old one's gets
            // through.
            eventually::<T>("a reconnect", || proxy.snapshot().connections >= 2).await;
            proxy.release_replies();
        };
        join(second, cutter).await.0
    };
    let (written, unwritten) = within::<T, _>("adds with a cut", join(first, then)).await;
    assert_eq!(
        written,
        Err(Error::ConnectionLost {
            maybe_applied: true
        })
    );
    let id = unwritten.expect("the unwritten add is answered on the next connection");
    assert_eq!(raw(server).state(&id), "waiting");
    within::<T, _>("close", client.close()).await;
}

/// An add not yet written waits for a connection to be written on: with the server out of
/// reach, it fails at its command timeout, as not applied.
async fn an_unwritten_add_waits_for_a_connection_until_its_timeout<T: Rt>(target: Target) {
    let server = target.shared();
    let mut proxy = Some(CountingProxy::start(server));
    let addr = proxy.as_ref().map(CountingProxy::addr).unwrap();
    // One batch in flight at a time: the second add waits in the batcher behind the first.
    let batching = BatchConfig::new()
        .max_in_flight(1)
        .linger(Duration::from_secs(60));
    let client = connect::<T>(fragile_options(addr).batching(Some(batching))).await;
    let name = queue_name::<T>("unwritten-unreachable");
    let q = client.queue(&name);
    proxy.as_ref().unwrap().hold_replies();
    let first = q.add("written", &0, JobOptions::new());
    let then = async {
        let pushes = || proxy.as_ref().unwrap().snapshot().cmd("PUSH");
        eventually::<T>("the first add written", || pushes() == 1).await;
        let second = q.add("unwritten", &1, JobOptions::new());
        let unreachable = async {
            // The second add is in the client's batcher, behind the first.
            while client
                .stats()
                .await
                .queue(&name)
                .map_or(0, |s| s.items_pushed)
                < 2
            {
                T::sleep(Duration::from_millis(5)).await;
            }
            // The only way to the server closes: its connection ends, and no new one is
            // accepted.
            drop(proxy.take());
        };
        join(second, unreachable).await.0
    };
    let (written, unwritten) = within::<T, _>("adds", join(first, then)).await;
    assert_eq!(
        written,
        Err(Error::ConnectionLost {
            maybe_applied: true
        })
    );
    assert_eq!(
        unwritten,
        Err(Error::Timeout {
            maybe_applied: false
        })
    );
    within::<T, _>("close", client.close()).await;
}

/// What a broker has in flight counts a bulk add by its jobs and a lookup as one request, until
/// each is answered.
async fn a_broker_counts_the_jobs_and_requests_in_flight_through_it<T: Rt>(target: Target) {
    let server = target.shared();
    let proxy = CountingProxy::start(server);
    let client = connect::<T>(options(proxy.addr())).await;
    let name = queue_name::<T>("in-flight");
    let q = client.queue(&name);
    proxy.hold_replies();
    let jobs = (0..3).map(|i| ("bulk", i, JobOptions::new())).collect();
    let bulk = q.add_bulk(jobs);
    let count = q.count();
    let check = async {
        eventually::<T>("both written", || {
            let c = proxy.snapshot();
            c.cmd("PUSHB") == 1 && c.cmd("Count") == 1
        })
        .await;
        let status = &client.brokers()[0];
        assert_eq!(
            (status.adds_in_flight, status.requests_in_flight),
            (3, 1),
            "{status:?}"
        );
        proxy.release_replies();
    };
    let ((ids, n), ()) = within::<T, _>("bulk and count", join(join(bulk, count), check)).await;
    assert_eq!(ids.expect("add_bulk").len(), 3);
    n.expect("count");
    let status = &client.brokers()[0];
    assert_eq!(
        (status.adds_in_flight, status.requests_in_flight),
        (0, 0),
        "{status:?}"
    );
    within::<T, _>("close", client.close()).await;
}

/// An add dropped before it is written is withdrawn: it never reaches the server, and counts as
/// cancelled.
async fn an_add_dropped_before_it_is_written_never_lands<T: Rt>(target: Target) {
    let server = target.shared();
    let proxy = CountingProxy::start(server);
    // One batch in flight at a time: the adds after the first wait in the batcher.
    let batching = BatchConfig::new()
        .max_in_flight(1)
        .linger(Duration::from_secs(60));
    let client = connect::<T>(options(proxy.addr()).batching(Some(batching))).await;
    let name = queue_name::<T>("dropped-unwritten");
    let q = client.queue(&name);
    proxy.hold_replies();
    let first = q.add("written", &0, JobOptions::new());
    let then = async {
        eventually::<T>("the first add written", || {
            proxy.snapshot().cmd("PUSH") == 1
        })
        .await;
        for i in 0..5 {
            // Polled once (handed to the client), then dropped.
            assert!(q
                .add("dropped", &i, JobOptions::new())
                .now_or_never()
                .is_none());
        }
        let kept = q.add("kept", &0, JobOptions::new());
        let release = async {
            while client
                .stats()
                .await
                .queue(&name)
                .map_or(0, |s| s.items_pushed)
                < 2
            {
                T::sleep(Duration::from_millis(5)).await;
            }
            proxy.release_replies();
        };
        join(kept, release).await.0
    };
    let (first, kept) = within::<T, _>("adds", join(first, then)).await;
    first.expect("first");
    kept.expect("kept");
    let stats = client.stats().await;
    assert_eq!(stats.session.adds_cancelled, 5, "{stats:?}");
    within::<T, _>("close", client.close()).await;
    assert_eq!(raw(server).count(&name), 2);
    let c = proxy.snapshot();
    assert_eq!(c.pushb_total() + c.cmd("PUSH") as usize, 2, "{c:?}");
}

/// The server is killed mid-wave: every caller still gets an outcome and close() returns.
async fn server_killed_mid_wave<T: Rt>(target: Target) {
    let mut server = target.dedicated();
    let proxy = CountingProxy::start(server.addr());
    let client = connect::<T>(fragile_options(proxy.addr())).await;
    let q = client.queue(queue_name::<T>("kill"));
    let wave = join_all((0..300).map(|i| q.add("kill", &i, JobOptions::new())));
    let killer = async {
        eventually::<T>("a first PUSHB", || proxy.snapshot().cmd("PUSHB") >= 1).await;
        server.kill();
    };
    let (results, ()) = within::<T, _>("wave with a kill", join(wave, killer)).await;
    for r in &results {
        if let Err(e) = r {
            assert!(is_transport(e), "unexpected error {e:?}");
        }
    }
    let late = within::<T, _>("add to a dead server", q.add("late", &0, JobOptions::new())).await;
    assert!(matches!(&late, Err(e) if is_transport(e)), "{late:?}");
    within::<T, _>("close with the server gone", client.close()).await;
    let after = q.add("closed", &0, JobOptions::new()).await;
    assert_eq!(after, Err(Error::Closed));
}

/// close() with adds in flight and buffered: every add resolves and is on the server.
async fn close_flushes_everything<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let name = queue_name::<T>("close");
    let q = client.queue(&name);
    // Every add is polled once, so handed to the pump, before the close. (`join_all` does not
    // promise that: it stops its first pass early when the futures it polls are woken at
    // once, as they are where the pump answers from another thread.)
    let mut results = Vec::new();
    let mut pending = Vec::new();
    for i in 0..300 {
        let mut add = Box::pin(q.add("close", &i, JobOptions::new()));
        match (&mut add).now_or_never() {
            Some(r) => results.push(r),
            None => pending.push(add),
        }
    }
    let wave = join_all(pending);
    let (rest, ()) = within::<T, _>("close with work in flight", join(wave, client.close())).await;
    results.extend(rest);
    let ids: Vec<String> = results.into_iter().map(|r| r.expect("add")).collect();
    assert_eq!(ids.len(), 300);
    let mut raw = raw(server);
    assert_eq!(raw.count(&name), 300);
    assert!(raw.job(&ids[299]).is_some());
    assert_eq!(
        q.add("late", &0, JobOptions::new()).await,
        Err(Error::Closed)
    );
    let stats = client.stats().await;
    assert_eq!(stats.session.adds_ok, 300);
}

/// Dropping an add future before its job is sent withdraws it: it never reaches the server.
async fn dropped_add_is_cancelled<T: Rt>(target: Target) {
    let server = target.shared();
    let proxy = CountingProxy::start(server);
    let batching = BatchConfig::new()
        .max_in_flight(1)
        .linger(Duration::from_secs(60))
        .max_batch(1000);
    let client = connect::<T>(options(proxy.addr()).batching(Some(batching))).await;
    let name = queue_name::<T>("cancel");
    let q = client.queue(&name);
    // Hold the only in-flight slot: the first add of a wave goes alone, the rest buffer
    // behind it until it is answered.
    let first = q.add("first", &0, JobOptions::new());
    let mut first = Box::pin(first);
    // On a multi-threaded executor the pump may send it and get the answer before this first
    // poll returns; keep that outcome rather than polling a finished future again.
    let early = (&mut first).now_or_never();
    for i in 0..10 {
        // Polled once (sent to the pump), then dropped: the drop guard cancels it.
        assert!(q
            .add("dropped", &i, JobOptions::new())
            .now_or_never()
            .is_none());
    }
    let kept = q.add("kept", &0, JobOptions::new());
    let (first, kept) = match early {
        Some(first) => (first, within::<T, _>("kept", kept).await),
        None => within::<T, _>("adds", join(first, kept)).await,
    };
    let first = first.expect("first");
    let kept = kept.expect("kept");
    let stats = client.stats().await;
    client.close().await;
    let mut raw = raw(server);
    assert!(raw.job(&first).is_some() && raw.job(&kept).is_some());
    // Whether a dropped add was withdrawn depends on whether it was already sent; each is
    // either cancelled or on the server, never lost in between.
    let cancelled = stats.session.adds_cancelled;
    assert_eq!(
        raw.count(&name),
        12 - cancelled,
        "cancelled {cancelled}, {stats:?}"
    );
    // Sent adds left in PUSHBs, or alone as PUSH (a batch of one).
    let c = proxy.snapshot();
    assert_eq!(
        c.pushb_total() as u64 + c.cmd("PUSH"),
        12 - cancelled,
        "{c:?}"
    );
}

// ------------------------------------------------------------------------------ the matrix

/// A command the typed API lacks goes out through `request_raw`, with the caller's replay
/// rule, and its reply comes back whole; a refusal is a typed server error.
async fn raw_requests<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let name = queue_name::<T>("raw");
    let id = client
        .queue(&name)
        .add("raw", &1, JobOptions::new())
        .await
        .expect("add");
    let body = Value::map([
        ("cmd", Value::from("GetState")),
        ("id", Value::from(id.as_str())),
    ]);
    let reply = client
        .request_raw(body, Replay::Safe)
        .await
        .expect("GetState");
    let Response::Other(v) = reply else {
        panic!("an untyped reply: {reply:?}");
    };
    assert_eq!(
        v.get("state").and_then(Value::as_str),
        Some("waiting"),
        "{v:?}"
    );
    // The server's own word, checked through an independent connection.
    assert_eq!(raw(server).state(&id), "waiting");
    let bogus = Value::map([("cmd", Value::from("NoSuchCommand"))]);
    match client.request_raw(bogus, Replay::NotSafe).await {
        Err(Error::Server(e)) => assert!(e.to_string().contains("Unknown command"), "{e}"),
        other => panic!("an unknown command is refused: {other:?}"),
    }
    // A request that names no command is refused before anything is sent.
    let nameless = Value::map([("id", Value::from(id.as_str()))]);
    match client.request_raw(nameless, Replay::Safe).await {
        Err(Error::Invalid(e)) => assert_eq!(e.field, "cmd", "{e}"),
        other => panic!("a request without cmd is invalid: {other:?}"),
    }
    client.close().await;
}

/// Health: a Ping answered with the server's clock, and Hello's protocol version.
async fn health<T: Rt>(target: Target) {
    let client = connect::<T>(options(target.shared())).await;
    let time = client.ping().await.expect("ping");
    assert!(time > 1.7e12, "the server's clock in epoch ms: {time}");
    let info = client.server_info().await.expect("hello");
    assert_eq!(info.protocol_version, 3, "{info:?}");
    assert_eq!(info.server, "bunqueue", "{info:?}");
    client.close().await;
    assert!(matches!(client.ping().await, Err(Error::Closed)));
}

scenarios! {
    bunqueue, broker => [
        sequential_adds,
        concurrent_waves,
        an_add_future_is_small,
        several_queues,
        durable_adds,
        add_bulk,
        worker_drains,
        long_job_keeps_its_lock,
        processor_error_fails,
        processor_error_carries_its_stack,
        panicking_processor,
        auth_tokens,
        bad_input_fails_alone,
        connection_cut_mid_wave,
        an_unwritten_add_goes_out_on_the_next_connection,
        an_unwritten_add_waits_for_a_connection_until_its_timeout,
        a_broker_counts_the_jobs_and_requests_in_flight_through_it,
        an_add_dropped_before_it_is_written_never_lands,
        server_killed_mid_wave,
        close_flushes_everything,
        dropped_add_is_cancelled,
        adds_near_the_frame_limit,
        raw_requests,
        health,
    ];
}

// ------------------------------------------------------------------------------ throughput

/// Adds per second of one runtime: sequential and in waves of 100, batching on and off.
async fn throughput_of<T: Rt>(server: SocketAddr) -> Vec<(String, f64)> {
    const SEQUENTIAL: usize = 2_000;
    const WAVES: usize = 200;
    let mut rows = Vec::new();
    for batching in [true, false] {
        let mut opts = options(server);
        if !batching {
            opts = opts.batching(None);
        }
        let client = connect::<T>(opts).await;
        let q = client.queue(queue_name::<T>("tput"));
        let mode = if batching { "on" } else { "off" };
        let t = Instant::now();
        for i in 0..SEQUENTIAL {
            q.add("tput", &i, JobOptions::new()).await.expect("add");
        }
        let rate = SEQUENTIAL as f64 / t.elapsed().as_secs_f64();
        rows.push((
            format!("{:<9} batching {mode:<3} sequential", T::NAME),
            rate,
        ));
        let t = Instant::now();
        for w in 0..WAVES {
            let adds = (0..100).map(|i| q.add("tput", &(w * 100 + i), JobOptions::new()));
            for r in join_all(adds).await {
                r.expect("add");
            }
        }
        let rate = (WAVES * 100) as f64 / t.elapsed().as_secs_f64();
        rows.push((
            format!("{:<9} batching {mode:<3} waves of 100", T::NAME),
            rate,
        ));
        client.close().await;
    }
    rows
}

/// Prints adds/s for every runtime against the real server. Not an assertion; run with
/// `cargo test --release -p autobatch-tests --test scenarios -- --ignored --nocapture throughput`.
#[test]
#[ignore = "measurement, not a check"]
fn throughput() {
    let server = Target::Bunqueue.shared();
    let mut rows = Vec::new();
    rows.extend(Tokio::block_on(throughput_of::<Tokio>(server)));
    rows.extend(Smol::block_on(throughput_of::<Smol>(server)));
    rows.extend(AsyncStd::block_on(throughput_of::<AsyncStd>(server)));
    for (what, rate) in rows {
        println!("{what:<40} {rate:>10.0} adds/s");
    }
}
