//! Queue control operations (pause, resume, drain, clean, obliterate, and the per-job moves)
//! for every runtime, against the real bunqueue 2.9.5 and, for what it serves, the embedded
//! broker; each effect checked through an independent connection ([`RawClient`]: hand-written
//! frames).

#[macro_use]
mod common;

use autobatch_driver::{Error, JobOptions, JobState, ServerErrorKind, Value};
use autobatch_tests::{RawClient, Target};
use common::*;

fn raw_paused(raw: &mut RawClient, name: &str) -> Option<bool> {
    raw.command("IsPaused", &[("queue", Value::from(name))])
        .expect("IsPaused")
        .get("paused")
        .and_then(Value::as_bool)
}

/// Pause stops the queue for workers; resume undoes it: seen through a raw `IsPaused`.
async fn pause_and_resume<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let name = queue_name::<T>("pause");
    let q = client.queue(&name);
    q.add("a", &1, JobOptions::new()).await.expect("add");
    let mut check = raw(server);
    assert_eq!(raw_paused(&mut check, &name), Some(false));
    q.pause().await.expect("pause");
    assert_eq!(raw_paused(&mut check, &name), Some(true));
    assert!(q.is_paused().await.expect("is_paused"));
    q.resume().await.expect("resume");
    assert_eq!(raw_paused(&mut check, &name), Some(false));
    assert!(!q.is_paused().await.expect("is_paused"));
    client.close().await;
}

/// A paused queue hands nothing to a pull (through another connection); after resume the
/// same pull gets the job.
async fn paused_queue_hands_out_nothing<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let name = queue_name::<T>("pause-pull");
    let q = client.queue(&name);
    let id = q.add("a", &1, JobOptions::new()).await.expect("add");
    q.pause().await.expect("pause");
    let mut worker = raw(server);
    assert_eq!(
        raw_pull(&mut worker, &name),
        None,
        "a paused queue handed out a job"
    );
    // bunqueue's paused view: ready jobs count, and list, as `paused` while the queue is.
    let c = worker.counts(&name);
    assert_eq!((c.waiting, c.paused), (0, 1));
    assert!(q
        .get_jobs(&[JobState::Waiting], 0, 10)
        .await
        .expect("get_jobs")
        .is_empty());
    let paused = q
        .get_jobs(&[JobState::from("paused")], 0, 10)
        .await
        .expect("get_jobs");
    assert_eq!(
        paused.iter().map(|j| j.id.as_str()).collect::<Vec<_>>(),
        vec![id.as_str()]
    );
    assert_eq!(
        paused[0].state.as_ref().map(JobState::as_str),
        Some("paused")
    );
    assert_eq!(q.get_jobs(&[], 0, 10).await.expect("get_jobs").len(), 1);
    q.resume().await.expect("resume");
    assert_eq!(raw_pull(&mut worker, &name).map(|(i, _)| i), Some(id));
    client.close().await;
}

/// Drain removes waiting and delayed jobs and says how many; none is left.
async fn drain_removes_waiting_and_delayed<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let name = queue_name::<T>("drain");
    let q = client.queue(&name);
    let a = q.add("a", &1, JobOptions::new()).await.expect("add");
    q.add("b", &2, JobOptions::new().priority(5))
        .await
        .expect("add");
    q.add(
        "c",
        &3,
        JobOptions::new().delay(std::time::Duration::from_secs(600)),
    )
    .await
    .expect("add");
    assert_eq!(q.drain().await.expect("drain"), 3);
    let mut check = raw(server);
    let c = check.counts(&name);
    assert_eq!((c.waiting, c.prioritized, c.delayed), (0, 0, 0));
    assert_eq!(check.job(&a), None);
    client.close().await;
}

/// Clean removes completed jobs older than the grace and returns their ids; an unknown state
/// name is refused locally, naming the field.
async fn clean_completed<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let name = queue_name::<T>("clean");
    let q = client.queue(&name);
    q.add("a", &1, JobOptions::new()).await.expect("add");
    q.add("b", &2, JobOptions::new()).await.expect("add");
    let mut check = raw(server);
    let done = [
        raw_complete(&mut check, &name),
        raw_complete(&mut check, &name),
    ];
    // Grace 0 cleans jobs finished before now: poll until the clock has moved past them.
    let mut cleaned = Vec::new();
    within::<T, _>("clean", async {
        while cleaned.len() < 2 {
            cleaned.extend(
                q.clean(std::time::Duration::ZERO, 10, Some(JobState::Completed))
                    .await
                    .expect("clean"),
            );
            T::sleep(std::time::Duration::from_millis(5)).await;
        }
    })
    .await;
    cleaned.sort();
    let mut want = done.to_vec();
    want.sort();
    assert_eq!(cleaned, want);
    assert_eq!(check.counts(&name).completed, 0);
    for id in &done {
        assert_eq!(check.state(id), "unknown");
    }
    match q
        .clean(
            std::time::Duration::ZERO,
            10,
            Some(JobState::from("finished")),
        )
        .await
    {
        Err(Error::Invalid(e)) => assert_eq!(e.field, "state"),
        other => panic!("expected a local refusal, got {other:?}"),
    }
    client.close().await;
}

/// Obliterate removes the queue's jobs in every state.
async fn obliterate_removes_everything<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let name = queue_name::<T>("obliterate");
    let q = client.queue(&name);
    let a = q.add("a", &1, JobOptions::new()).await.expect("add");
    let d = q
        .add(
            "d",
            &2,
            JobOptions::new().delay(std::time::Duration::from_secs(600)),
        )
        .await
        .expect("add");
    q.obliterate().await.expect("obliterate");
    let mut check = raw(server);
    let c = check.counts(&name);
    assert_eq!((c.waiting, c.delayed), (0, 0));
    assert_eq!(check.job(&a), None);
    assert_eq!(check.job(&d), None);
    client.close().await;
}

/// Remove (Cancel) deletes a waiting job; an unknown one is bunqueue's typed refusal.
async fn remove_a_job<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let name = queue_name::<T>("remove");
    let q = client.queue(&name);
    let a = q.add("a", &1, JobOptions::new()).await.expect("add");
    q.remove(&a).await.expect("remove");
    let mut check = raw(server);
    assert_eq!(check.job(&a), None);
    let (kind, msg) = server_error(q.remove(&a).await.expect_err("second remove"));
    assert_eq!(kind, ServerErrorKind::JobNotFound);
    assert_eq!(msg, "Job not found or cannot be cancelled");
    match q.remove("").await {
        Err(Error::Invalid(e)) => assert_eq!(e.field, "id"),
        other => panic!("expected a local refusal, got {other:?}"),
    }
    client.close().await;
}

/// Promote makes a delayed job waiting; promoting it again is refused; PromoteJobs promotes
/// at most `count`.
async fn promote_one_and_many<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let name = queue_name::<T>("promote");
    let q = client.queue(&name);
    let later = || JobOptions::new().delay(std::time::Duration::from_secs(600));
    let d = q.add("d", &1, later()).await.expect("add");
    q.promote_job(&d).await.expect("promote");
    let mut check = raw(server);
    assert_eq!(check.state(&d), "waiting");
    let (kind, msg) = server_error(q.promote_job(&d).await.expect_err("promote again"));
    assert_eq!(kind, ServerErrorKind::JobNotFound);
    assert_eq!(msg, "Job not found or not delayed");
    q.add("e", &2, later()).await.expect("add");
    q.add("f", &3, later()).await.expect("add");
    assert_eq!(q.promote_jobs(Some(1)).await.expect("promote_jobs"), 1);
    assert_eq!(check.counts(&name).delayed, 1);
    assert_eq!(q.promote_jobs(None).await.expect("promote_jobs"), 1);
    assert_eq!(check.counts(&name).delayed, 0);
    client.close().await;
}

/// ChangePriority sets a job's priority, seen in a raw GetJob; an unknown job is refused.
async fn change_priority<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let name = queue_name::<T>("priority");
    let q = client.queue(&name);
    let a = q
        .add("a", &1, JobOptions::new().priority(1))
        .await
        .expect("add");
    q.change_priority(&a, 9, false)
        .await
        .expect("change_priority");
    let mut check = raw(server);
    assert_eq!(check.job(&a).expect("job").priority, 9.0);
    let (kind, msg) = server_error(
        q.change_priority("no-such-job", 1, false)
            .await
            .expect_err("unknown job"),
    );
    assert_eq!(kind, ServerErrorKind::JobNotFound);
    assert_eq!(msg, "Job not found or not in queue");
    client.close().await;
}

/// ChangeDelay moves a delayed job's run time; an unknown job is refused.
async fn change_delay<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let name = queue_name::<T>("delay");
    let q = client.queue(&name);
    let d = q
        .add(
            "d",
            &1,
            JobOptions::new().delay(std::time::Duration::from_secs(60)),
        )
        .await
        .expect("add");
    let mut check = raw(server);
    let before = check.job(&d).expect("job").run_at;
    q.change_delay(&d, std::time::Duration::from_secs(3600))
        .await
        .expect("change_delay");
    let after = check.job(&d).expect("job").run_at;
    assert!(after > before + 3_000_000.0, "run_at {before} -> {after}");
    assert_eq!(check.state(&d), "delayed");
    let (kind, msg) = server_error(
        q.change_delay("no-such-job", std::time::Duration::from_millis(1))
            .await
            .expect_err("unknown job"),
    );
    assert_eq!(kind, ServerErrorKind::JobNotFound);
    assert_eq!(msg, "Job not found or cannot change delay");
    client.close().await;
}

/// Discard needs an active job's token; with it the job fails for good; retry_job then
/// brings it back to waiting. Retrying an unknown job is bunqueue's refusal.
async fn discard_then_retry<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let name = queue_name::<T>("discard");
    let q = client.queue(&name);
    q.add("a", &1, JobOptions::new()).await.expect("add");
    let mut check = raw(server);
    let (id, token) = raw_pull(&mut check, &name).expect("pull");
    let (kind, _) = server_error(q.discard(&id, None).await.expect_err("no token"));
    assert_eq!(kind, ServerErrorKind::LockToken);
    q.discard(&id, Some(&token)).await.expect("discard");
    assert_eq!(check.state(&id), "failed");
    q.retry_job(&id).await.expect("retry_job");
    assert_eq!(check.state(&id), "waiting");
    let (_, msg) = server_error(q.retry_job("no-such-job").await.expect_err("unknown"));
    assert_eq!(msg, "Cannot move job from state 'unknown' to waiting");
    let (kind, _) = server_error(q.discard("no-such-job", None).await.expect_err("unknown"));
    assert_eq!(kind, ServerErrorKind::JobNotFound);
    client.close().await;
}

/// An active job goes back to delayed, then (MoveToWait with its token from active) to
/// waiting.
async fn move_active_job<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let name = queue_name::<T>("move");
    let q = client.queue(&name);
    q.add("a", &1, JobOptions::new()).await.expect("add");
    let mut check = raw(server);
    let (id, token) = raw_pull(&mut check, &name).expect("pull");
    q.move_job_to_delayed(&id, std::time::Duration::from_secs(600), Some(&token))
        .await
        .expect("move_job_to_delayed");
    assert_eq!(check.state(&id), "delayed");
    q.promote_job(&id).await.expect("promote");
    let (id2, token2) = raw_pull(&mut check, &name).expect("pull again");
    assert_eq!(id2, id);
    q.move_job_to_wait(&id, Some(&token2))
        .await
        .expect("move_job_to_wait");
    assert_eq!(check.state(&id), "waiting");
    let (kind, msg) = server_error(
        q.move_job_to_delayed("no-such-job", std::time::Duration::from_millis(1), None)
            .await
            .expect_err("unknown"),
    );
    assert_eq!(kind, ServerErrorKind::JobNotFound);
    assert_eq!(msg, "Job not found");
    client.close().await;
}

/// RetryCompleted runs a completed job again; a completed job cannot be "retried" through
/// MoveToWait.
async fn retry_completed<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let name = queue_name::<T>("retry-completed");
    let q = client.queue(&name);
    q.add("a", &1, JobOptions::new()).await.expect("add");
    let mut check = raw(server);
    let id = raw_complete(&mut check, &name);
    assert_eq!(check.state(&id), "completed");
    let (_, msg) = server_error(q.retry_job(&id).await.expect_err("completed"));
    assert_eq!(msg, "Cannot move job from state 'completed' to waiting");
    assert_eq!(
        q.retry_completed(Some(&id)).await.expect("retry_completed"),
        1
    );
    assert_eq!(check.state(&id), "waiting");
    client.close().await;
}

/// Deduplication keys: freed by key or by job, seen through a raw GetDeduplicationJobId.
async fn deduplication_keys<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let name = queue_name::<T>("dedup");
    let q = client.queue(&name);
    let holder = |raw: &mut RawClient, key: &str| {
        let reply = raw
            .command(
                "GetDeduplicationJobId",
                &[
                    ("queue", Value::from(name.as_str())),
                    ("deduplicationId", Value::from(key)),
                ],
            )
            .expect("GetDeduplicationJobId");
        let data = reply.get("data").expect("data").expanded().expect("data");
        data.get("jobId").and_then(Value::as_str).map(str::to_owned)
    };
    let mut check = raw(server);
    let a = q
        .add("a", &1, JobOptions::new().unique_key("k1"))
        .await
        .expect("add");
    assert_eq!(holder(&mut check, "k1"), Some(a));
    assert_eq!(q.remove_deduplication_key("k1").await.expect("remove"), 1);
    assert_eq!(holder(&mut check, "k1"), None);
    assert_eq!(q.remove_deduplication_key("k1").await.expect("remove"), 0);
    let b = q
        .add("b", &2, JobOptions::new().unique_key("k2"))
        .await
        .expect("add");
    assert!(q.remove_job_deduplication_key(&b).await.expect("remove"));
    assert_eq!(holder(&mut check, "k2"), None);
    assert!(!q.remove_job_deduplication_key(&b).await.expect("remove"));
    client.close().await;
}

/// What the broker does not serve is refused with its own typed error, never answered
/// wrongly: adding a webhook (it would call out over HTTP), and DLQ automatic retries (it
/// does not retry DLQ entries on its own); the other DLQ settings it applies.
async fn broker_refuses_what_it_does_not_serve<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let name = queue_name::<T>("refused");
    let q = client.queue(&name);
    let id = q.add("a", &1, JobOptions::new()).await.expect("add");
    let set = autobatch_driver::ops::SetDlqConfig::new(
        &name,
        autobatch_driver::ops::DlqConfigUpdate::new()
            .max_entries(100)
            .auto_retry(true),
    );
    let (kind, msg) = server_error(client.run(set).await.expect_err("refused"));
    assert_eq!(kind, ServerErrorKind::Other);
    assert_eq!(
        msg,
        "autoRetry is not supported by autobatch-broker: it does not retry DLQ entries on its own"
    );
    // Nothing of the refused patch was applied; without autoRetry it is.
    let mut check = raw(server);
    let max_entries = |check: &mut RawClient| {
        check
            .command("GetDlqConfig", &[("queue", Value::from(name.as_str()))])
            .expect("GetDlqConfig")
            .get("config")
            .and_then(|c| c.get("maxEntries"))
            .and_then(Value::as_f64)
    };
    assert_eq!(max_entries(&mut check), Some(10_000.0));
    let set = autobatch_driver::ops::SetDlqConfig::new(
        &name,
        autobatch_driver::ops::DlqConfigUpdate::new().max_entries(100),
    );
    client.run(set).await.expect("SetDlqConfig");
    assert_eq!(max_entries(&mut check), Some(100.0));
    let webhook = check
        .command(
            "AddWebhook",
            &[
                ("url", Value::from("https://example.com/hook")),
                ("events", Value::Array(vec![Value::from("job.completed")])),
            ],
        )
        .expect("raw");
    assert_eq!(
        webhook.get("error").and_then(Value::as_str),
        Some("AddWebhook is not supported by autobatch-broker (see its README section)")
    );
    // Nothing happened to the job.
    assert_eq!(check.state(&id), "waiting");
    client.close().await;
}

scenarios! {
    bunqueue => [
        pause_and_resume, paused_queue_hands_out_nothing, drain_removes_waiting_and_delayed,
        clean_completed, obliterate_removes_everything, remove_a_job, promote_one_and_many,
        change_priority, change_delay, discard_then_retry, move_active_job, retry_completed,
        deduplication_keys,
    ];
    // What the embedded broker serves (the rest it refuses, see
    // `broker_refuses_what_it_does_not_serve`).
    broker => [
        pause_and_resume, paused_queue_hands_out_nothing, drain_removes_waiting_and_delayed,
        clean_completed, obliterate_removes_everything, remove_a_job, promote_one_and_many,
        change_priority, change_delay, discard_then_retry, move_active_job, retry_completed,
        deduplication_keys, broker_refuses_what_it_does_not_serve,
    ];
}
