//! Idempotent adds (`ClientOptions::idempotent_adds`) against every runtime adapter and both
//! servers: a connection lost with adds written and unanswered leaves none of them "maybe
//! applied", and every job exists exactly once, including those that finished before their
//! add's answer could arrive.
//!
//! What landed is checked through [`RawClient`], a connection of its own that shares nothing
//! with the client under test; the [`CountingProxy`] between client and server holds the
//! server's answers back and cuts the connection.

use std::time::Duration;

use autobatch_driver::{Error, JobOptions};
use autobatch_tests::{CountingProxy, RawClient, Target};
use futures_util::future::join;
use futures_util::future::join_all;

#[macro_use]
mod common;

use common::*;

/// How many adds the wave makes.
const WAVE: usize = 300;
/// How many of the landed jobs a worker completes before the cut.
const FINISHED: usize = 20;

/// Adds that landed and were not answered when the connection was cut: each resolves with
/// its job's id once the client has looked it up, and none is added twice, even where its
/// job completed meanwhile (a completed job frees its custom id on bunqueue, so a blind
/// replay would add and run it again).
async fn a_cut_mid_wave_leaves_no_add_maybe_applied<T: Rt>(target: Target) {
    let server = target.shared();
    let proxy = CountingProxy::start(server);
    // Quick reconnects; a command timeout long enough that held answers never time out.
    let opts = fragile_options(proxy.addr())
        .command_timeout(Duration::from_secs(30))
        .idempotent_adds(true);
    let client = connect::<T>(opts).await;
    let name = queue_name::<T>("idem-cut");
    let q = client.queue(&name);
    proxy.hold_replies();
    let wave = join_all((0..WAVE).map(|i| q.add("idem", &i, JobOptions::new())));
    let cutter = async {
        let mut raw = raw(server);
        // Every add the client wrote has landed on the server before the cut.
        eventually::<T>("the written adds landed", || {
            let c = proxy.snapshot();
            let written = c.pushb_total() as u64 + c.cmd("PUSH");
            written >= 100 && raw.count(&name) == written
        })
        .await;
        for _ in 0..FINISHED {
            raw_complete(&mut raw, &name);
        }
        proxy.cut_all();
        // Answers flow again only on the new connection: none of the old one's gets through.
        eventually::<T>("a reconnect", || proxy.snapshot().connections >= 2).await;
        proxy.release_replies();
    };
    let (results, ()) = within::<T, _>("wave with a cut", join(wave, cutter)).await;
    let ids = landed_once(&mut raw(server), &name, &results);
    assert_eq!(ids.len(), WAVE);
    let stats = client.stats().await;
    assert_eq!(stats.session.adds_ok, WAVE as u64, "{stats:?}");
    within::<T, _>("close", client.close()).await;
}

/// The ids the client makes keep a queue first in, first out: jobs of equal priority are handed
/// out in the order of their ids, and ids made in one millisecond still sort in the order the
/// adds were made.
async fn idempotent_adds_are_pulled_in_the_order_they_were_added<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server).idempotent_adds(true)).await;
    let name = queue_name::<T>("idem-order");
    let q = client.queue(&name);
    let mut added = Vec::new();
    for i in 0..50 {
        added.push(q.add("idem", &i, JobOptions::new()).await.expect("add"));
    }
    let mut raw = raw(server);
    let pulled: Vec<String> = std::iter::from_fn(|| raw_pull(&mut raw, &name).map(|(id, _)| id))
        .take(50)
        .collect();
    assert_eq!(pulled, added);
    within::<T, _>("close", client.close()).await;
}

/// Every add succeeded, with ids that each name one job on the server; the queue holds
/// exactly the wave (the finished jobs among them). Returns the ids.
fn landed_once(raw: &mut RawClient, queue: &str, results: &[Result<String, Error>]) -> Vec<String> {
    let mut ids = Vec::new();
    for r in results {
        match r {
            Ok(id) => ids.push(id.clone()),
            Err(e) => panic!("an idempotent add ended {e:?}"),
        }
    }
    let distinct: std::collections::HashSet<&String> = ids.iter().collect();
    assert_eq!(distinct.len(), ids.len(), "two adds answered with one id");
    for id in &ids {
        let job = raw
            .job(id)
            .unwrap_or_else(|| panic!("{id} reported added but missing"));
        assert_eq!(job.queue, queue);
    }
    let counts = raw.counts(queue);
    assert_eq!(counts.completed, FINISHED as u64, "{counts:?}");
    assert_eq!(
        counts.waiting + counts.completed,
        WAVE as u64,
        "every add is one job: {counts:?}"
    );
    ids
}

scenarios! {
    bunqueue, broker => [
        a_cut_mid_wave_leaves_no_add_maybe_applied,
        idempotent_adds_are_pulled_in_the_order_they_were_added,
    ];
}
