//! QueueEvents for every runtime against the real bunqueue 2.9.5 and against autobatch-broker:
//! the events a job's life produces (caused through an independent connection,
//! [`RawClient::command`]), the gap reported after a connection cut, the slow-consumer policy,
//! and events caused by bunqueue's own TS client arriving in order.

#[macro_use]
mod common;

use std::time::Duration;

use autobatch_driver::{
    ClientOptions, ConnectError, Error, EventsOptions, QueueEvent, QueueEvents, Value,
};
use autobatch_tests::{CountingProxy, RawClient, Target, TsPeer};
use common::*;
use futures_util::future::{select, Either};
use futures_util::StreamExt;
use serde_json::json;

async fn subscribe<T: Rt>(
    opts: ClientOptions,
    queue: &str,
    events: EventsOptions,
) -> QueueEvents<T::R> {
    within::<T, _>(
        "subscribe",
        QueueEvents::<T::R>::connect_with(T::R::default(), opts, queue, events),
    )
    .await
    .unwrap_or_else(|e| panic!("QueueEvents::connect: {e}"))
}

async fn next<T: Rt>(events: &mut QueueEvents<T::R>) -> QueueEvent {
    within::<T, _>("next event", events.next())
        .await
        .expect("the stream goes on")
}

/// The next event, or `None` after `wait` (for a loop that retries until an event comes).
async fn next_within<T: Rt>(events: &mut QueueEvents<T::R>, wait: Duration) -> Option<QueueEvent> {
    let n = events.next();
    match select(n, T::sleep(wait)).await {
        Either::Left((e, _)) => e,
        Either::Right(_) => None,
    }
}

fn push(raw: &mut RawClient, queue: &str, data: Value) -> String {
    let r = raw
        .command(
            "PUSH",
            &[
                ("queue", Value::from(queue)),
                ("name", Value::from("n")),
                ("data", data),
                ("maxAttempts", Value::from(1_i64)),
            ],
        )
        .expect("PUSH");
    r.get("id")
        .and_then(Value::as_str)
        .expect("PUSH gives an id")
        .to_owned()
}

/// PULLs one job: `(id, token)`.
fn pull(raw: &mut RawClient, queue: &str) -> (String, String) {
    let r = raw
        .command(
            "PULL",
            &[("queue", Value::from(queue)), ("owner", Value::from("raw"))],
        )
        .expect("PULL");
    let id = r
        .get("job")
        .and_then(|j| j.get("id"))
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("PULL gave no job: {r:?}"))
        .to_owned();
    let token = r
        .get("token")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    (id, token)
}

/// A job's whole life, caused through a raw connection, arrives typed and in order:
/// waiting, active, progress, completed with its value; then a failure with its reason.
async fn lifecycle_events<T: Rt>(target: Target) {
    let server = target.shared();
    let name = queue_name::<T>("ev-life");
    let mut events = subscribe::<T>(options(server), &name, EventsOptions::default()).await;
    let mut raw = raw(server);

    let id = push(&mut raw, &name, Value::map([("a", Value::from(1_i64))]));
    assert!(
        matches!(next::<T>(&mut events).await, QueueEvent::Waiting { job_id, .. } if job_id == id)
    );
    let (pulled, token) = pull(&mut raw, &name);
    assert_eq!(pulled, id);
    assert!(
        matches!(next::<T>(&mut events).await, QueueEvent::Active { job_id, .. } if job_id == id)
    );
    raw.command(
        "Progress",
        &[
            ("id", Value::from(id.as_str())),
            ("progress", Value::from(40_i64)),
        ],
    )
    .expect("Progress");
    match next::<T>(&mut events).await {
        QueueEvent::Progress {
            job_id, progress, ..
        } => {
            assert_eq!(job_id, id);
            assert_eq!(progress.as_f64(), Some(40.0));
        }
        other => panic!("expected progress, got {other:?}"),
    }
    raw.command(
        "ACK",
        &[
            ("id", Value::from(id.as_str())),
            ("token", Value::from(token.as_str())),
            ("result", Value::map([("done", Value::from(true))])),
        ],
    )
    .expect("ACK");
    match next::<T>(&mut events).await {
        QueueEvent::Completed {
            job_id,
            return_value,
            ..
        } => {
            assert_eq!(job_id, id);
            // Payloads stay encoded (Value::Raw) and compare equal to what they encode.
            assert_eq!(return_value, Value::map([("done", Value::from(true))]));
        }
        other => panic!("expected completed, got {other:?}"),
    }
    // The queue is empty again: bunqueue may say so; skip what is not about jobs.
    let failing = push(&mut raw, &name, Value::map([("b", Value::from(2_i64))]));
    let (_, token) = pull(&mut raw, &name);
    raw.command(
        "FAIL",
        &[
            ("id", Value::from(failing.as_str())),
            ("token", Value::from(token.as_str())),
            ("error", Value::from("boom")),
        ],
    )
    .expect("FAIL");
    let mut seen = Vec::new();
    loop {
        let e = next::<T>(&mut events).await;
        if let QueueEvent::Failed { job_id, reason, .. } = &e {
            assert_eq!(job_id, &failing);
            assert_eq!(reason, "boom");
            break;
        }
        seen.push(e.name().to_owned());
    }
    assert!(
        seen.contains(&"waiting".to_owned()) && seen.contains(&"active".to_owned()),
        "before the failure: {seen:?}"
    );
    // The state seen by an independent connection agrees with the events.
    assert_eq!(raw.state(&id), "completed");
    events.close().await;
    assert_eq!(within::<T, _>("end", events.next()).await, None);
}

/// A cut connection is reported as a gap, and events flow again after the automatic
/// resubscription.
async fn gap_after_cut<T: Rt>(target: Target) {
    let server = target.shared();
    let proxy = CountingProxy::start(server);
    let name = queue_name::<T>("ev-gap");
    let mut events = subscribe::<T>(
        fragile_options(proxy.addr()),
        &name,
        EventsOptions::default(),
    )
    .await;
    let mut raw = raw(server);
    let first = push(&mut raw, &name, Value::Map(vec![]));
    assert!(
        matches!(next::<T>(&mut events).await, QueueEvent::Waiting { job_id, .. } if job_id == first)
    );

    proxy.cut_all();
    // Pushed while the subscriber may be away: it may be missed, and that is what Gap says.
    let _maybe_missed = push(&mut raw, &name, Value::Map(vec![]));
    let mut before_gap = 0;
    loop {
        match next::<T>(&mut events).await {
            QueueEvent::Gap => break,
            QueueEvent::Waiting { .. } => before_gap += 1,
            other => panic!("before the gap: {other:?}"),
        }
    }
    assert!(before_gap <= 1);
    // After the gap the subscription is renewed: a new job's event arrives (pushed again until
    // the resubscription has been answered; a hang guard bounds it).
    let mut pushed = Vec::new();
    let got = loop {
        pushed.push(push(&mut raw, &name, Value::Map(vec![])));
        if let Some(e) = next_within::<T>(&mut events, Duration::from_millis(200)).await {
            break e;
        }
        assert!(pushed.len() < 300, "no event after the gap");
    };
    assert!(
        matches!(&got, QueueEvent::Waiting { job_id, .. } if pushed.contains(job_id)),
        "{got:?}"
    );
    assert_eq!(events.stats().gaps, 1);
    events.close().await;
}

/// A consumer that does not read loses the oldest events, and is told how many.
async fn slow_consumer_is_told<T: Rt>(target: Target) {
    let server = target.shared();
    let name = queue_name::<T>("ev-lag");
    let mut events = subscribe::<T>(
        options(server),
        &name,
        EventsOptions::default().max_events(2),
    )
    .await;
    let mut raw = raw(server);
    let ids: Vec<String> = (0..5)
        .map(|i| push(&mut raw, &name, Value::map([("i", Value::from(i as i64))])))
        .collect();
    eventually::<T>("5 events received", || {
        let s = events.stats();
        s.dropped + s.buffered as u64 == 5
    })
    .await;
    assert_eq!(
        next::<T>(&mut events).await,
        QueueEvent::Lagged { missed: 3 }
    );
    for id in &ids[3..] {
        assert!(
            matches!(next::<T>(&mut events).await, QueueEvent::Waiting { job_id, .. } if &job_id == id)
        );
    }
    events.close().await;
}

/// A bad queue name fails before anything is sent, with bunqueue's message.
async fn bad_queue_name<T: Rt>(target: Target) {
    let server = target.shared();
    let r = QueueEvents::<T::R>::connect_with(
        T::R::default(),
        options(server),
        "bad name!",
        EventsOptions::default(),
    )
    .await;
    match r {
        Err(ConnectError::Handshake(Error::Invalid(e))) => assert_eq!(e.field, "queue"),
        other => panic!("expected a local refusal, got {other:?}"),
    }
}

/// Events caused by bunqueue's TS Queue and Worker arrive in autobatch's QueueEvents, in the
/// order the server emitted them for each job.
async fn ts_producer_and_worker_events<T: Rt>(target: Target) {
    let server = target.shared();
    let name = queue_name::<T>("ev-ts");
    let mut events = subscribe::<T>(options(server), &name, EventsOptions::default()).await;
    let out = TsPeer::new("events_ts_jobs.ts")
        .target(server)
        .options(&json!({"queue": name, "count": 3}))
        .run_json()
        .expect("events_ts_jobs.ts ran");
    let ids: Vec<String> = out["ids"]
        .as_array()
        .expect("ids")
        .iter()
        .map(|v| v.as_str().expect("id").to_owned())
        .collect();
    assert_eq!(ids.len(), 3);
    // Per job: waiting, active, progress 50, completed with {i}.
    let mut per_job: std::collections::HashMap<String, Vec<String>> = Default::default();
    let mut completed = 0;
    while completed < 3 {
        let e = next::<T>(&mut events).await;
        if let QueueEvent::Completed {
            job_id,
            return_value,
            ..
        } = &e
        {
            let i = ids.iter().position(|x| x == job_id).expect("one of ours");
            assert_eq!(return_value, &Value::map([("i", Value::from(i as i64))]));
            completed += 1;
        }
        if let Some(id) = e.job_id() {
            per_job
                .entry(id.to_owned())
                .or_default()
                .push(e.name().to_owned());
        }
    }
    for id in &ids {
        let seq: Vec<&str> = per_job[id]
            .iter()
            .map(String::as_str)
            .filter(|n| *n != "stalled")
            .collect();
        assert_eq!(
            seq,
            ["waiting", "active", "progress", "completed"],
            "job {id}"
        );
    }
    // The adds came in order, too.
    events.close().await;
}

// autobatch-broker pushes events as bunqueue does (broker/src/events.rs): every scenario runs
// against it too.
scenarios! {
    bunqueue, broker => [
        lifecycle_events, gap_after_cut, slow_consumer_is_told, bad_queue_name,
        ts_producer_and_worker_events,
    ];
}
