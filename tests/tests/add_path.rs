//! The add's path on its caller's own task: a caller's poll hands its add to the connection,
//! writes it and reads the answers while it waits; the connection's task reads again once
//! that caller's answer is in. These scenarios check that the read role can never be left
//! with a caller that will not read: a future polled and then kept unpolled, a future
//! dropped while it reads, and many tasks adding at once on a work-stealing runtime. Every
//! job is counted on the server through an independent connection.
//!
//! No assertion depends on timing; the durations are hang guards.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use autobatch_driver::JobOptions;
use autobatch_tests::Target;

#[macro_use]
mod common;

use common::*;

/// Polls `add` `times` with a waker that wakes nothing (the first poll hands it to the
/// session, a second writes it and takes the read role). Returns its outcome if it came.
fn poll_then_forget<F: Future + Unpin>(add: &mut F, times: usize) -> Option<F::Output> {
    let waker = futures_util::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    for _ in 0..times {
        if let Poll::Ready(out) = Pin::new(&mut *add).poll(&mut cx) {
            return Some(out);
        }
    }
    None
}

/// The outcome of an add kept unpolled: the one its early polls got, or awaited now.
async fn outcome_of_kept<T: Rt, F: Future>(early: Option<F::Output>, kept: F) -> F::Output {
    match early {
        Some(out) => out,
        None => within::<T, _>("the kept add", kept).await,
    }
}

/// An add whose future is polled and then kept without being polled again (a `select` can
/// hand such a future back) holds the read role with a waker that wakes nothing; the adds
/// beside it are still answered, and so is it once polled again.
async fn an_add_kept_unpolled_stalls_nobody<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let name = queue_name::<T>("kept");
    let q = client.queue(&name);
    let mut kept = Box::pin(q.add("kept", &0, JobOptions::new()));
    let early = poll_then_forget(&mut kept, 2);
    let beside = within::<T, _>("adds beside an unpolled one", async {
        let mut ids = Vec::new();
        for i in 0..20 {
            ids.push(q.add("beside", &i, JobOptions::new()).await.expect("add"));
        }
        ids
    })
    .await;
    let kept = outcome_of_kept::<T, _>(early, kept)
        .await
        .expect("kept add");
    client.close().await;
    let mut raw = raw(server);
    assert_eq!(raw.count(&name), 21);
    for id in beside.iter().chain([&kept]) {
        assert!(raw.job(id).is_some(), "job {id} is not on the server");
    }
}

/// An add dropped while it holds the read role leaves the reading to the connection: the
/// adds after it are answered, and the dropped one is either withdrawn or on the server.
async fn an_add_dropped_while_reading_stalls_nobody<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let name = queue_name::<T>("dropped-reader");
    let q = client.queue(&name);
    let mut dropped = Box::pin(q.add("dropped", &0, JobOptions::new()));
    let answered = poll_then_forget(&mut dropped, 2).is_some();
    drop(dropped);
    within::<T, _>("adds after a dropped reader", async {
        for i in 0..20 {
            q.add("after", &i, JobOptions::new()).await.expect("add");
        }
    })
    .await;
    let cancelled = client.stats().await.session.adds_cancelled;
    client.close().await;
    assert!(cancelled <= 1 && !(answered && cancelled == 1));
    assert_eq!(raw(server).count(&name), 21 - cancelled);
}

/// The first add of a burst yields and writes the burst on its next poll; the adds after it
/// wait for that. Kept unpolled after its first poll, it still leaves the rest of its burst
/// written and answered, and is itself answered once polled again.
async fn a_burst_whose_first_add_is_kept_unpolled_is_still_written<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let name = queue_name::<T>("kept-first");
    let q = client.queue(&name);
    let mut first = Box::pin(q.add("first", &0, JobOptions::new()));
    let early = poll_then_forget(&mut first, 1);
    let second = within::<T, _>(
        "the rest of the burst",
        q.add("second", &1, JobOptions::new()),
    )
    .await
    .expect("second add");
    let first = outcome_of_kept::<T, _>(early, first)
        .await
        .expect("first add");
    client.close().await;
    let mut raw = raw(server);
    assert_eq!(raw.count(&name), 2);
    assert!(raw.job(&first).is_some() && raw.job(&second).is_some());
}

scenarios! {
    bunqueue, broker => [
        an_add_kept_unpolled_stalls_nobody,
        an_add_dropped_while_reading_stalls_nobody,
        a_burst_whose_first_add_is_kept_unpolled_is_still_written,
    ];
}

/// Tasks on tokio's `multi_thread` runtime, as a web server's handlers run: each adds on
/// its own, sequentially and in small waves, so reads and writes pass between tasks on both
/// workers. Every add resolves with a distinct id, and every job is on the server once.
#[test]
fn many_tasks_adding_at_once_on_a_multi_thread_runtime() {
    const TASKS: usize = 64;
    const ADDS: usize = 40;
    let server = Target::Broker.shared();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let name = queue_name::<Tokio>("many-tasks");
    let ids = rt.block_on(async {
        let client = connect::<Tokio>(options(server)).await;
        let tasks: Vec<_> = (0..TASKS)
            .map(|t| {
                let q = client.queue(&name);
                tokio::spawn(async move {
                    let mut ids = Vec::new();
                    for i in 0..ADDS / 2 {
                        ids.push(q.add("seq", &(t, i), JobOptions::new()).await);
                    }
                    let wave = (ADDS / 2..ADDS).map(|i| q.add("wave", &(t, i), JobOptions::new()));
                    ids.extend(futures_util::future::join_all(wave).await);
                    ids
                })
            })
            .collect();
        let mut ids = Vec::new();
        for task in tasks {
            let got = within::<Tokio, _>("a task's adds", task).await;
            ids.extend(got.expect("task").into_iter().map(|r| r.expect("add")));
        }
        client.close().await;
        ids
    });
    let unique: std::collections::HashSet<_> = ids.iter().collect();
    assert_eq!(unique.len(), TASKS * ADDS, "every add has its own id");
    assert_eq!(raw(server).count(&name), (TASKS * ADDS) as u64);
}
