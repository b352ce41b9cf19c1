//! Queue administration for every runtime: the job options beyond the hot path, the
//! dead-letter queue, job schedulers, and limits (rate, concurrency, stall, groups). Against
//! the real bunqueue 2.9.5, each effect is checked through an independent connection
//! ([`RawClient`]: hand-written frames); against the embedded broker, what it serves is
//! checked the same way and what it refuses gives the typed "not supported" error.

#[macro_use]
mod common;

use std::time::Duration;

use autobatch_core::wire::{Command, PullArgs, Response};
use autobatch_driver::ops::{
    CronUpsert, DlqConfigUpdate, DlqFilter, FailureReason, GroupRateLimit, Schedule,
    StallConfigUpdate,
};
use autobatch_driver::{ChildFailure, Debounce, Error, JobOptions, Repeat, ServerErrorKind, Value};
use autobatch_tests::{RawClient, Target};
use common::*;

/// `GetJob` through the raw connection: the whole job map the server stores.
fn raw_job(raw: &mut RawClient, id: &str) -> Value {
    let reply = raw
        .command("GetJob", &[("id", Value::from(id))])
        .expect("GetJob");
    assert_eq!(
        reply.get("ok").and_then(Value::as_bool),
        Some(true),
        "GetJob {id}: {reply:?}"
    );
    reply.get("job").cloned().expect("job")
}

fn num(v: &Value, key: &str) -> Option<f64> {
    v.get(key).and_then(Value::as_f64)
}

fn flag(v: &Value, key: &str) -> Option<bool> {
    v.get(key).and_then(Value::as_bool)
}

/// Every option bunqueue stores, on one job that may repeat (no custom id, no parent).
fn all_options(group: &str) -> JobOptions {
    JobOptions::new()
        .group_id(group)
        .group_max_size(50)
        .priority(7)
        .repeat(Repeat::every(Duration::from_secs(3600)).limit(3))
        .debounce(Debounce::new(format!("{group}-debounce")).ttl(Duration::from_millis(1500)))
        .stack_trace_limit(4)
        .keep_logs(25)
        .size_limit(4096)
        .on_failure(ChildFailure::FailParent)
        .on_failure(ChildFailure::RemoveDependency)
        .on_failure(ChildFailure::Ignore)
}

fn assert_stored(job: &Value, group: &str) {
    assert_eq!(job.get("groupId").and_then(Value::as_str), Some(group));
    assert_eq!(num(job, "priority"), Some(7.0));
    assert_eq!(num(job, "stackTraceLimit"), Some(4.0));
    assert_eq!(num(job, "keepLogs"), Some(25.0));
    assert_eq!(num(job, "sizeLimit"), Some(4096.0));
    assert_eq!(flag(job, "failParentOnFailure"), Some(true));
    assert_eq!(flag(job, "removeDependencyOnFailure"), Some(true));
    assert_eq!(flag(job, "continueParentOnFailure"), Some(false));
    assert_eq!(flag(job, "ignoreDependencyOnFailure"), Some(true));
    let debounce = format!("{group}-debounce");
    assert_eq!(
        job.get("debounceId").and_then(Value::as_str),
        Some(debounce.as_str())
    );
    assert_eq!(num(job, "debounceTtl"), Some(1500.0));
    let repeat = job.get("repeat").expect("repeat stored");
    assert_eq!(num(repeat, "every"), Some(3_600_000.0));
    assert_eq!(num(repeat, "limit"), Some(3.0));
}

/// Every new option arrives, by PUSH (durable) and by PUSHB (batched): seen in a raw GetJob.
async fn job_options_arrive<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let name = queue_name::<T>("options");
    let q = client.queue(&name);
    let mut raw = raw(server);
    let pushed = within::<T, _>(
        "durable add",
        q.add("all", &1, all_options("g-push").durable(true)),
    )
    .await
    .expect("PUSH with every option");
    let bulk = within::<T, _>(
        "add_bulk",
        q.add_bulk(vec![("all", 2, all_options("g-bulk"))]),
    )
    .await
    .expect("PUSHB with every option");
    assert_stored(&raw_job(&mut raw, &pushed), "g-push");
    assert_stored(&raw_job(&mut raw, &bulk[0]), "g-bulk");
    client.close().await;
}

/// The broker accepts every option bunqueue accepts (it stores what it can).
async fn job_options_accepted<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let q = client.queue(queue_name::<T>("options-ok"));
    let mut raw = raw(server);
    let id = within::<T, _>("add", q.add("all", &1, all_options("g").durable(true)))
        .await
        .expect("PUSH with every option");
    let ids = within::<T, _>("add_bulk", q.add_bulk(vec![("all", 2, all_options("g2"))]))
        .await
        .expect("PUSHB with every option");
    assert!(raw.job(&id).is_some());
    assert!(raw.job(&ids[0]).is_some());
    client.close().await;
}

/// Bad options fail locally with bunqueue's words; what only the server checks (a cron
/// pattern) comes back as its typed error.
async fn bad_options_are_typed<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let q = client.queue(queue_name::<T>("bad-options"));
    let local = |r: Result<String, Error>| match r {
        Err(Error::Invalid(e)) => (e.field, e.message),
        other => panic!("expected a local refusal, got {other:?}"),
    };
    let (field, message) = local(q.add("x", &1, JobOptions::new().group_max_size(0)).await);
    assert_eq!(
        (field, message.as_str()),
        (
            "groupMaxSize",
            "group.maxSize must be a positive safe integer"
        )
    );
    let (_, message) = local(
        q.add(
            "x",
            &1,
            JobOptions::new()
                .repeat(Repeat::every(Duration::from_secs(1)).tz("UTC"))
                .job_id("c"),
        )
        .await,
    );
    assert_eq!(
        message,
        "repeat jobs cannot use JobOptions.jobId; use repeat.jobId instead"
    );
    let (_, message) = local(
        q.add("x", &1, JobOptions::new().group_id("g").priority(-1))
            .await,
    );
    assert_eq!(message, "group.priority must be between 0 and 2097151");
    // The server's own checks, through a raw PUSH: same words.
    let mut raw = raw(server);
    let reply = raw
        .command(
            "PUSH",
            &[
                ("queue", Value::from("bad-options-raw")),
                ("name", Value::from("x")),
                ("data", Value::Nil),
                ("groupMaxSize", Value::Int(0)),
            ],
        )
        .expect("raw PUSH");
    assert_eq!(
        reply.get("error").and_then(Value::as_str),
        Some("group.maxSize must be a positive safe integer")
    );
    match q
        .add(
            "x",
            &1,
            JobOptions::new()
                .repeat(Repeat::pattern("not a cron"))
                .durable(true),
        )
        .await
    {
        Err(Error::Server(e)) => {
            assert!(e.message().starts_with("Invalid repeat pattern"), "{e}");
            assert_eq!(e.kind(), ServerErrorKind::Validation);
        }
        other => panic!("expected the server's refusal, got {other:?}"),
    }
    client.close().await;
}

/// A scheduler with a short interval adds jobs (counted through a raw connection); get, list
/// and remove see it; a bad pattern gets the server's typed error.
async fn scheduler_produces_jobs<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let name = queue_name::<T>("sched");
    let q = client.queue(&name);
    let id = format!("{name}-every");
    // Without overlap prevention (on by default), a run adds a job even while the previous
    // one waits: no worker here takes them.
    let op = CronUpsert::every(&name, &id, Duration::from_millis(100))
        .job_name("tick")
        .data(Value::map([("n", Value::Int(1))]))
        .prevent_overlap(false);
    let info = within::<T, _>("upsert", q.upsert_job_scheduler_with(op))
        .await
        .expect("upsert_job_scheduler");
    assert_eq!(
        (info.name.as_str(), info.queue.as_str()),
        (id.as_str(), name.as_str())
    );
    let mut raw = raw(server);
    let got = raw
        .command("CronGet", &[("name", Value::from(id.as_str()))])
        .expect("CronGet");
    let cron = got.get("cron").expect("cron");
    assert_eq!(num(cron, "repeatEvery"), Some(100.0));
    assert_eq!(cron.get("jobName").and_then(Value::as_str), Some("tick"));
    let mut check = common::raw(server);
    eventually::<T>("scheduler adds 2 jobs", || {
        let c = check.counts(&name);
        c.waiting + c.prioritized + c.delayed >= 2
    })
    .await;
    let mine = q
        .get_job_scheduler(&id)
        .await
        .expect("get")
        .expect("present");
    assert_eq!(mine.name, id);
    assert!(q
        .get_job_schedulers()
        .await
        .expect("list")
        .iter()
        .any(|s| s.name == id));
    assert!(q.remove_job_scheduler(&id).await.expect("remove"));
    let gone = raw
        .command("CronGet", &[("name", Value::from(id.as_str()))])
        .expect("CronGet");
    assert_eq!(
        gone.get("error").and_then(Value::as_str),
        Some("Cron job not found")
    );
    assert!(!q.remove_job_scheduler(&id).await.expect("remove again"));
    assert_eq!(q.get_job_scheduler(&id).await.expect("get"), None);
    match q
        .upsert_job_scheduler(&id, Schedule::pattern("61 * * * *"), "tick", &1)
        .await
    {
        Err(Error::Server(e)) => assert!(e.message().starts_with("Invalid cron expression"), "{e}"),
        other => panic!("expected the server's refusal, got {other:?}"),
    }
    assert_eq!(q.get_job_scheduler(&id).await.expect("get"), None);
    match q
        .upsert_job_scheduler(&id, Schedule::Every(Duration::ZERO), "tick", &1)
        .await
    {
        Err(Error::Invalid(e)) => assert_eq!(
            e.message,
            "Cron repeatEvery must be a positive safe integer number of milliseconds"
        ),
        other => panic!("expected a local refusal, got {other:?}"),
    }
    client.close().await;
}

fn pull_many(raw: &mut RawClient, queue: &str, owner: &str) -> usize {
    match raw.call(&Command::PullB {
        args: PullArgs {
            queue: queue.into(),
            timeout: Some(0),
            owner: Some(owner.into()),
            lock_ttl: None,
        },
        count: 10,
    }) {
        Ok(Response::PulledBatch { jobs, .. }) => jobs.len(),
        other => panic!("PULLB: {other:?}"),
    }
}

/// Global concurrency 1: a second PULLB gets nothing while one job is active; cleared, it
/// gets the rest. Stall settings round-trip through a raw GetStallConfig.
async fn concurrency_and_stall<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let name = queue_name::<T>("conc");
    let q = client.queue(&name);
    q.set_global_concurrency(1).await.expect("set concurrency");
    q.add_bulk(vec![
        ("a", 1, JobOptions::new()),
        ("b", 2, JobOptions::new()),
    ])
    .await
    .expect("add");
    let mut raw = raw(server);
    assert_eq!(
        pull_many(&mut raw, &name, "w1"),
        1,
        "concurrency 1 hands out one job"
    );
    assert_eq!(
        pull_many(&mut raw, &name, "w1"),
        0,
        "nothing while one is active"
    );
    let limits = raw_limits(&mut raw, &name);
    assert_eq!(num(&limits, "concurrencyLimit"), Some(1.0));
    assert_eq!(flag(&limits, "maxed"), Some(true));
    assert!(q.is_maxed().await.expect("is_maxed"));
    q.remove_global_concurrency()
        .await
        .expect("clear concurrency");
    assert_eq!(
        raw_limits(&mut raw, &name).get("concurrencyLimit"),
        Some(&Value::Nil)
    );
    assert_eq!(pull_many(&mut raw, &name, "w1"), 1, "the rest once cleared");

    q.set_stall_config(
        StallConfigUpdate::new()
            .max_stalls(1)
            .grace_period(Duration::from_millis(2500)),
    )
    .await
    .expect("set stall");
    let got = raw
        .command("GetStallConfig", &[("queue", Value::from(name.as_str()))])
        .expect("raw");
    let config = got.get("config").expect("config");
    assert_eq!(num(config, "maxStalls"), Some(1.0));
    assert_eq!(num(config, "gracePeriod"), Some(2500.0));
    let typed = q.get_stall_config().await.expect("get stall");
    assert_eq!(
        (typed.max_stalls, typed.grace_period),
        (1, Duration::from_millis(2500))
    );
    client.close().await;
}

/// A rate limit of 1 per minute hands out one job; cleared, the next one comes.
async fn rate_limit_set_and_clear<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let name = queue_name::<T>("rate");
    let q = client.queue(&name);
    q.set_global_rate_limit(1, Duration::from_secs(60))
        .await
        .expect("rate limit");
    q.add_bulk(vec![
        ("a", 1, JobOptions::new()),
        ("b", 2, JobOptions::new()),
    ])
    .await
    .expect("add");
    let mut raw = raw(server);
    assert_eq!(pull_many(&mut raw, &name, "w"), 1, "one per window");
    assert_eq!(pull_many(&mut raw, &name, "w"), 0, "window used up");
    let limits = raw_limits(&mut raw, &name);
    let rate = limits.get("rateLimit").expect("rateLimit");
    assert_eq!(
        (num(rate, "max"), num(rate, "duration")),
        (Some(1.0), Some(60_000.0))
    );
    // The bucket is empty: the wait for the next token is positive, within the window.
    let ttl = q
        .get_rate_limit_ttl(None)
        .await
        .expect("ttl")
        .expect("a window");
    assert!(
        ttl > std::time::Duration::ZERO && ttl <= std::time::Duration::from_secs(60),
        "{ttl:?}"
    );
    assert!(
        !q.is_maxed().await.expect("is_maxed"),
        "no concurrency limit"
    );
    q.remove_global_rate_limit().await.expect("clear");
    assert_eq!(limits_of(&mut raw, &name, "rateLimitTtl"), Some(-2.0));
    assert_eq!(pull_many(&mut raw, &name, "w"), 1, "the next once cleared");

    // The TS `rateLimit(ms)` form: one job per second until the ttl lifts it.
    q.rate_limit(Duration::from_secs(3600))
        .await
        .expect("ttl form");
    let limits = raw_limits(&mut raw, &name);
    let rate = limits.get("rateLimit").expect("rateLimit");
    assert_eq!(
        (num(rate, "max"), num(rate, "duration")),
        (Some(1.0), Some(1000.0))
    );
    let ttl = num(&limits, "rateLimitTtl").expect("rateLimitTtl");
    assert!(ttl > 0.0 && ttl <= 3_600_000.0, "the ttl left: {ttl}");
    q.remove_global_rate_limit().await.expect("clear");
    assert_eq!(
        raw_limits(&mut raw, &name).get("rateLimit"),
        Some(&Value::Nil)
    );
    client.close().await;
}

/// GetQueueLimits' `limits` through the raw connection.
fn raw_limits(raw: &mut RawClient, queue: &str) -> Value {
    raw.command("GetQueueLimits", &[("queue", Value::from(queue))])
        .expect("GetQueueLimits")
        .get("data")
        .and_then(|d| d.get("limits"))
        .cloned()
        .expect("limits")
}

fn limits_of(raw: &mut RawClient, queue: &str, key: &str) -> Option<f64> {
    num(&raw_limits(raw, queue), key)
}

/// Fails a job for good through the raw connection; returns its id.
fn fail_for_good(raw: &mut RawClient, queue: &str) -> String {
    let (job, token) = match raw.call(&Command::Pull(PullArgs {
        queue: queue.into(),
        timeout: Some(0),
        owner: Some("w".into()),
        lock_ttl: None,
    })) {
        Ok(Response::Pulled {
            job: Some(job),
            token,
        }) => (job, token),
        other => panic!("PULL: {other:?}"),
    };
    raw.call(&Command::Fail {
        id: job.id.clone(),
        error: Some("boom".into()),
        token,
        unrecoverable: false,
        stack: vec![],
        remove_on_fail: false,
    })
    .expect("FAIL");
    job.id
}

fn raw_dlq_len(raw: &mut RawClient, queue: &str) -> usize {
    let reply = raw
        .command("Dlq", &[("queue", Value::from(queue))])
        .expect("Dlq");
    reply
        .get("entries")
        .and_then(Value::as_array)
        .map_or(0, <[Value]>::len)
}

/// A job that fails for good lands in the DLQ; list, stats, retry, remove, purge and the
/// config, each seen through the raw connection.
async fn dlq_round_trip<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let name = queue_name::<T>("dlq");
    let q = client.queue(&name);
    let mut raw = raw(server);
    q.add("x", &1, JobOptions::new().attempts(1))
        .await
        .expect("add");
    let id = fail_for_good(&mut raw, &name);
    eventually::<T>("job in the DLQ", || raw_dlq_len(&mut raw, &name) == 1).await;

    let entries = q.get_dlq(DlqFilter::new()).await.expect("get_dlq");
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].job.id, id);
    assert_eq!(entries[0].reason, FailureReason::MaxAttemptsExceeded);
    assert_eq!(entries[0].error.as_deref(), Some("boom"));
    assert_eq!(q.get_dlq_jobs(Some(1)).await.expect("jobs")[0].id, id);
    assert!(q
        .get_dlq(DlqFilter::new().reason(FailureReason::Stalled))
        .await
        .expect("filtered")
        .is_empty());
    let stats = q.get_dlq_stats().await.expect("stats");
    assert_eq!(stats.total, 1);
    assert_eq!(stats.by_reason.get("max_attempts_exceeded"), Some(&1));

    assert_eq!(q.retry_dlq(Some(&id)).await.expect("retry"), 1);
    assert_eq!(raw_dlq_len(&mut raw, &name), 0);
    assert_eq!(raw.state(&id), "waiting");

    let id = fail_for_good(&mut raw, &name);
    eventually::<T>("back in the DLQ", || raw_dlq_len(&mut raw, &name) == 1).await;
    assert!(q.remove_dlq_job(&id).await.expect("remove"));
    assert_eq!(raw_dlq_len(&mut raw, &name), 0);
    assert!(!q.remove_dlq_job(&id).await.expect("remove again"));
    assert_eq!(q.purge_dlq().await.expect("purge"), 0);
    if target == Target::Broker {
        // The broker keeps bunqueue's default DLQ settings (see `broker_refuses_typed`).
        client.close().await;
        return;
    }

    q.set_dlq_config(DlqConfigUpdate::new().max_entries(5).auto_retry(true))
        .await
        .expect("set config");
    let got = raw
        .command("GetDlqConfig", &[("queue", Value::from(name.as_str()))])
        .expect("raw");
    let config = got.get("config").expect("config");
    assert_eq!(num(config, "maxEntries"), Some(5.0));
    assert_eq!(flag(config, "autoRetry"), Some(true));
    let typed = q.get_dlq_config().await.expect("get config");
    assert_eq!((typed.max_entries, typed.auto_retry), (5, true));
    client.close().await;
}

/// Group controls, seen through raw lookups; a bad group id or limit is refused with the
/// server's own words (locally, and the same words from the server itself).
async fn group_controls<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let name = queue_name::<T>("groups");
    let q = client.queue(&name);
    let mut raw = raw(server);
    let group = |cmd: &str, raw: &mut RawClient| {
        raw.command(
            cmd,
            &[
                ("queue", Value::from(name.as_str())),
                ("groupId", Value::from("t1")),
            ],
        )
        .expect(cmd)
        .get("data")
        .cloned()
        .expect("data")
    };
    q.set_group_concurrency("t1", 2)
        .await
        .expect("set concurrency");
    assert_eq!(
        num(&group("GetGroupConcurrency", &mut raw), "concurrency"),
        Some(2.0)
    );
    assert_eq!(q.get_group_concurrency("t1").await.expect("get"), Some(2));
    assert!(q.remove_group_concurrency("t1").await.expect("remove"));
    assert_eq!(
        group("GetGroupConcurrency", &mut raw).get("concurrency"),
        Some(&Value::Nil)
    );

    let limit = GroupRateLimit::new(5, Duration::from_secs(2));
    q.set_group_rate_limit("t1", limit).await.expect("set rate");
    let raw_limit = group("GetGroupRateLimit", &mut raw);
    let l = raw_limit.get("limit").expect("limit");
    assert_eq!(
        (num(l, "max"), num(l, "duration")),
        (Some(5.0), Some(2000.0))
    );
    assert_eq!(
        q.get_group_rate_limit("t1").await.expect("get"),
        Some(limit)
    );
    assert!(q.remove_group_rate_limit("t1").await.expect("remove"));
    assert!(!q.remove_group_rate_limit("t1").await.expect("remove again"));

    assert!(q.pause_group("t1").await.expect("pause"));
    assert_eq!(
        flag(&group("IsGroupPaused", &mut raw), "paused"),
        Some(true)
    );
    assert!(q.is_group_paused("t1").await.expect("is paused"));
    assert!(q.resume_group("t1").await.expect("resume"));
    assert_eq!(
        flag(&group("IsGroupPaused", &mut raw), "paused"),
        Some(false)
    );

    q.add("x", &1, JobOptions::new().group_id("t1"))
        .await
        .expect("add");
    eventually::<T>("group count", || {
        num(&group("GetGroupJobsCount", &mut raw), "count") == Some(1.0)
    })
    .await;
    assert_eq!(q.get_group_jobs_count("t1").await.expect("count"), 1);
    assert_eq!(q.get_group_active_count("t1").await.expect("active"), 0);

    match q.set_group_concurrency("t1", 0).await {
        Err(Error::Invalid(e)) => {
            assert_eq!(e.message, "concurrency must be a positive safe integer")
        }
        other => panic!("expected a local refusal, got {other:?}"),
    }
    let server_says = raw
        .command(
            "SetGroupConcurrency",
            &[
                ("queue", Value::from(name.as_str())),
                ("groupId", Value::from("t1")),
                ("concurrency", Value::Int(0)),
            ],
        )
        .expect("raw");
    assert_eq!(
        server_says.get("error").and_then(Value::as_str),
        Some("concurrency must be a positive safe integer")
    );
    match q.pause_group("").await {
        Err(Error::Invalid(e)) => assert_eq!(e.message, "groupId must be a non-empty string"),
        other => panic!("expected a local refusal, got {other:?}"),
    }
    client.close().await;
}

/// A group's counts: queued jobs of one group and of all, active jobs of one, through the
/// typed calls and a raw connection; a bad group id is refused with the server's words.
async fn group_counts<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let name = queue_name::<T>("group-counts");
    let q = client.queue(&name);
    let mut raw = raw(server);
    let count = |cmd: &str, group: Option<&str>, raw: &mut RawClient| {
        let mut f = vec![("queue", Value::from(name.as_str()))];
        if let Some(g) = group {
            f.push(("groupId", Value::from(g)));
        }
        num(
            raw.command(cmd, &f).expect(cmd).get("data").expect("data"),
            "count",
        )
    };
    q.add_bulk(vec![
        ("a", 1, JobOptions::new().group_id("t1")),
        ("b", 2, JobOptions::new().group_id("t1")),
    ])
    .await
    .expect("add");
    assert_eq!(q.get_group_active_count("t1").await.expect("active"), 0);
    // Only t1's jobs wait, so whichever order a server pulls in, a job of t1 goes active.
    assert!(raw_pull(&mut raw, &name).is_some(), "a job");
    assert_eq!(
        count("GetGroupActiveCount", Some("t1"), &mut raw),
        Some(1.0)
    );
    assert_eq!(q.get_group_active_count("t1").await.expect("active"), 1);
    q.add_bulk(vec![
        ("c", 3, JobOptions::new().group_id("t2")),
        ("d", 4, JobOptions::new()),
    ])
    .await
    .expect("add");
    assert_eq!(q.get_group_jobs_count("t1").await.expect("count"), 1);
    assert_eq!(count("GetGroupJobsCount", Some("t1"), &mut raw), Some(1.0));
    assert_eq!(count("GetGroupJobsCount", Some("t2"), &mut raw), Some(1.0));
    assert_eq!(count("GetGroupsJobsCount", None, &mut raw), Some(2.0));
    assert_eq!(q.get_group_active_count("t2").await.expect("active"), 0);
    assert_eq!(
        count("GetGroupJobsCount", Some("none"), &mut raw),
        Some(0.0)
    );
    let server_says = raw
        .command(
            "GetGroupJobsCount",
            &[
                ("queue", Value::from(name.as_str())),
                ("groupId", Value::from("")),
            ],
        )
        .expect("raw");
    assert_eq!(
        server_says.get("error").and_then(Value::as_str),
        Some("groupId must be a non-empty string")
    );
    client.close().await;
}

/// DLQ automatic retries are refused with a typed server error naming the setting (the
/// broker does not retry DLQ entries on its own); the other settings are applied.
async fn broker_refuses_auto_retry<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let q = client.queue(queue_name::<T>("refused"));
    match q
        .set_dlq_config(DlqConfigUpdate::new().auto_retry(true))
        .await
    {
        Err(Error::Server(e)) => {
            assert_eq!(e.kind(), ServerErrorKind::Other);
            assert!(e.message().starts_with("autoRetry is not supported"), "{e}");
        }
        other => panic!("expected the broker's refusal, got {other:?}"),
    }
    q.set_dlq_config(DlqConfigUpdate::new().max_entries(5))
        .await
        .expect("set_dlq_config");
    let config = q.get_dlq_config().await.expect("get_dlq_config");
    assert_eq!((config.max_entries, config.auto_retry), (5, false));
    client.close().await;
}

/// The broker answers a queue's DLQ and stall settings with bunqueue's defaults until they
/// are set, seen through a raw connection as well.
async fn defaults_served<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let name = queue_name::<T>("defaults");
    let q = client.queue(&name);
    let dlq = q.get_dlq_config().await.expect("get_dlq_config");
    assert_eq!(dlq, autobatch_driver::ops::DlqConfig::default());
    let stall = q.get_stall_config().await.expect("get_stall_config");
    assert_eq!(stall, autobatch_driver::ops::StallConfig::default());
    let mut raw = raw(server);
    let got = raw
        .command("GetDlqConfig", &[("queue", Value::from(name.as_str()))])
        .expect("raw");
    let config = got.get("config").expect("config");
    assert_eq!(num(config, "maxEntries"), Some(10_000.0));
    assert_eq!(flag(config, "autoRetry"), Some(false));
    let got = raw
        .command("GetStallConfig", &[("queue", Value::from(name.as_str()))])
        .expect("raw");
    assert_eq!(
        num(got.get("config").expect("config"), "maxStalls"),
        Some(3.0)
    );
    client.close().await;
}

scenarios! {
    bunqueue => [
        job_options_arrive, bad_options_are_typed, scheduler_produces_jobs,
        concurrency_and_stall, rate_limit_set_and_clear, dlq_round_trip, group_controls,
        group_counts,
    ];
    broker => [
        job_options_accepted, broker_refuses_auto_retry, defaults_served, dlq_round_trip,
        concurrency_and_stall, rate_limit_set_and_clear, group_controls, group_counts,
        scheduler_produces_jobs,
    ];
}
