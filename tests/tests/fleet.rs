//! bunqueue 2.9.5's PostgreSQL multi-broker mode, for real: one throwaway PostgreSQL 15 and two
//! bunqueue brokers on it per scenario (every scenario has a namespace of its own on one
//! shared database server), driven by autobatch clients: one client per broker in the first
//! scenarios, one client on both brokers (`ClientOptions::broker`) in the `one_client_*` ones.
//!
//! Nothing is skipped: without PostgreSQL (`apt-get install -y postgresql`, which
//! `scripts/test.sh` runs when it is missing) or bunqueue (`scripts/bunqueue.sh install`)
//! every scenario fails with the command to run.
//!
//! What landed is checked through [`RawClient`] connections that share nothing with the client
//! under test. A broker sees the other brokers' writes only after its next poll of the
//! database (50 ms here), so counts are read with `eventually`. The only durations are hang
//! guards and the short timeouts of the failure scenarios; no assertion depends on timing.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use autobatch_driver::{ClientOptions, Error, JobOptions, Worker, WorkerOptions};
use autobatch_tests::fleet::shared_postgres;
use autobatch_tests::{CountingProxy, Fleet, FleetOptions, RawClient};
use futures_util::future::{join, join_all};

mod common;

use common::*;

type R = autobatch_tokio::TokioRuntime;

/// Two brokers on the shared PostgreSQL, in a namespace of this scenario's own.
fn fleet(scenario: &str) -> Fleet {
    let pg = shared_postgres().unwrap_or_else(|e| panic!("{e}"));
    let mut opts = FleetOptions::for_tests(2);
    opts.namespace = Some(format!("{scenario}-{}", std::process::id()));
    Fleet::start_on(pg, opts).unwrap_or_else(|e| panic!("{e}"))
}

/// `GetJobCounts` of `queue` on a broker, summed over every state.
fn total(raw: &mut RawClient, queue: &str) -> u64 {
    let c = raw.counts(queue);
    c.waiting + c.prioritized + c.delayed + c.active + c.completed + c.failed + c.paused
}

/// Which job (by its data) ran on which broker, how often.
#[derive(Clone, Default)]
struct Runs(Arc<Mutex<HashMap<i64, Vec<usize>>>>);

impl Runs {
    fn record(&self, i: i64, broker: usize) {
        self.0.lock().unwrap().entry(i).or_default().push(broker);
    }
    fn snapshot(&self) -> HashMap<i64, Vec<usize>> {
        self.0.lock().unwrap().clone()
    }
}

/// A worker on `addr` recording every job it runs in `runs` as `broker`.
async fn worker(addr: SocketAddr, queue: &str, broker: usize, runs: &Runs) -> Worker<R> {
    worker_with(options(addr), queue, broker, runs).await
}

/// A worker with `opts` (one broker or several) recording every job it runs in `runs` as
/// `broker`.
async fn worker_with(opts: ClientOptions, queue: &str, broker: usize, runs: &Runs) -> Worker<R> {
    let runs = runs.clone();
    within::<Tokio, _>(
        "worker start",
        Worker::<R>::start(
            opts,
            WorkerOptions::new(queue)
                .concurrency(5)
                .poll_timeout(Duration::from_millis(200)),
            move |job| {
                let runs = runs.clone();
                async move {
                    let i: i64 = job.data.deserialize().map_err(|e| e.to_string())?;
                    runs.record(i, broker);
                    Ok::<_, String>(i)
                }
            },
        ),
    )
    .await
    .expect("worker")
}

/// Every acknowledged add (`(data, id)`) is on the surviving broker with its data, read
/// through `raw1`.
async fn survivor_holds(raw1: &mut RawClient, acked: &[(i64, String)]) {
    eventually::<Tokio>("the survivor sees every acknowledged add", || {
        acked.iter().all(|(_, id)| raw1.job(id).is_some())
    })
    .await;
    for (j, id) in acked {
        let job = raw1.job(id).expect("acknowledged add");
        assert_eq!(job.data.as_i64(), Some(*j), "{id}");
    }
}

/// Nothing ran twice, the survivor holds exactly the jobs that ran, and their number lies in
/// `expected`: the acknowledged adds, plus at most the adds whose fate the kill left unknown.
/// Returns how many jobs the queue holds.
async fn each_ran_once(
    raw1: &mut RawClient,
    queue: &str,
    runs: &Runs,
    expected: std::ops::RangeInclusive<usize>,
) -> usize {
    let runs = runs.snapshot();
    assert!(runs.values().all(|v| v.len() == 1), "a job ran twice");
    eventually::<Tokio>("the survivor counts every completion", || {
        raw1.counts(queue).completed == runs.len() as u64
    })
    .await;
    let present = total(raw1, queue) as usize;
    assert_eq!(present, runs.len());
    assert!(
        expected.contains(&present),
        "{present} jobs, expected {expected:?}"
    );
    present
}

/// Producers on autobatch spread over both brokers (one client each, waves of 25 concurrent
/// adds) while a worker on each broker drains the queue: every job runs exactly once, jobs
/// added through one broker run on the other, and both brokers count every completion.
#[test]
fn producers_and_workers_across_brokers() {
    const N: i64 = 200;
    let fleet = fleet("spread");
    let name = "spread";
    Tokio::block_on(async {
        let runs = Runs::default();
        let workers = [
            worker(fleet.addr(0), name, 0, &runs).await,
            worker(fleet.addr(1), name, 1, &runs).await,
        ];
        let producers = [
            connect::<Tokio>(options(fleet.addr(0))).await,
            connect::<Tokio>(options(fleet.addr(1))).await,
        ];
        // Job i goes through broker i % 2.
        let produce = |p: usize| {
            let q = producers[p].queue(name);
            async move {
                let mut ids = Vec::new();
                let mine: Vec<i64> = (0..N).filter(|i| *i as usize % 2 == p).collect();
                for wave in mine.chunks(25) {
                    let adds = wave.iter().map(|i| q.add("spread", i, JobOptions::new()));
                    for r in join_all(adds).await {
                        ids.push(r.expect("add"));
                    }
                }
                ids
            }
        };
        let (a, b) = within::<Tokio, _>("produce", join(produce(0), produce(1))).await;
        assert_eq!(a.len() + b.len(), N as usize);

        let mut raws = [raw(fleet.addr(0)), raw(fleet.addr(1))];
        for (k, raw) in raws.iter_mut().enumerate() {
            eventually::<Tokio>(&format!("broker {k} counts {N} completions"), || {
                raw.counts(name).completed == N as u64
            })
            .await;
        }
        for w in &workers {
            within::<Tokio, _>("worker close", w.close()).await;
        }
        for p in &producers {
            within::<Tokio, _>("producer close", p.close()).await;
        }
        let runs = runs.snapshot();
        for i in 0..N {
            let on = runs.get(&i).map(Vec::as_slice).unwrap_or_default();
            assert_eq!(on.len(), 1, "job {i} ran {} times ({on:?})", on.len());
        }
        assert_eq!(runs.len(), N as usize);
        // Jobs added through one broker ran on the other (both workers pull from the
        // database, not from their broker's own adds).
        let crossed = (0..N).filter(|i| runs[i][0] != *i as usize % 2).count();
        eprintln!(
            "spread: {N} jobs, broker 0 ran {}, broker 1 ran {}, {crossed} ran on the broker they were not added through",
            runs.values().filter(|v| v[0] == 0).count(),
            runs.values().filter(|v| v[0] == 1).count(),
        );
        for (k, raw) in raws.iter_mut().enumerate() {
            let c = raw.counts(name);
            assert_eq!(c.failed, 0, "broker {k}: {c:?}");
            assert_eq!(total(raw, name), N as u64, "broker {k}: {c:?}");
        }
    });
}

/// A worker on broker 1 alone drains jobs added through broker 0 alone.
#[test]
fn worker_on_the_other_broker_drains() {
    const N: i64 = 60;
    let fleet = fleet("cross");
    let name = "cross";
    Tokio::block_on(async {
        let runs = Runs::default();
        let producer = connect::<Tokio>(options(fleet.addr(0))).await;
        let q = producer.queue(name);
        let ids: Vec<String> = within::<Tokio, _>(
            "produce",
            join_all((0..N).map(|i| q.add("cross", &i, JobOptions::new()))),
        )
        .await
        .into_iter()
        .map(|r| r.expect("add"))
        .collect();
        let w = worker(fleet.addr(1), name, 1, &runs).await;
        let mut raw0 = raw(fleet.addr(0));
        eventually::<Tokio>("broker 0 counts every completion", || {
            raw0.counts(name).completed == N as u64
        })
        .await;
        within::<Tokio, _>("worker close", w.close()).await;
        within::<Tokio, _>("producer close", producer.close()).await;
        let runs = runs.snapshot();
        assert_eq!(runs.len(), N as usize);
        assert!(runs.values().all(|v| v == &[1]), "{runs:?}");
        assert_eq!(raw0.state(&ids[0]), "completed");
    });
}

/// One broker SIGKILLed mid-wave: every add resolves (an id or a transport error); every
/// acknowledged durable add is on the surviving broker exactly once; adds through the
/// survivor never fail; the killed broker restarts under its id (once its stale window has
/// passed), the client reconnects to it, and its worker takes the work.
#[test]
fn broker_killed_mid_wave() {
    let mut fleet = fleet("kill");
    let name = "kill";
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // Client 0 reaches broker 0 through a frame-counting proxy, so the kill can land while a
    // wave's PUSH frames are on their way.
    let proxy = CountingProxy::start(fleet.addr(0));
    let (c0, c1) = rt.block_on(async {
        (
            connect::<Tokio>(fragile_options(proxy.addr())).await,
            connect::<Tokio>(fragile_options(fleet.addr(1))).await,
        )
    });
    let (q0, q1) = (c0.queue(name), c1.queue(name));

    // Durable adds through broker 0 in waves of 20 (each its own PUSH), ordinary adds through
    // broker 1 beside them; once 40 adds through broker 0 are acknowledged, it is killed in the
    // middle of the next wave, after 5 of that wave's PUSH frames went out; the waves go on
    // until adds through it fail.
    let mut acked0: Vec<(i64, String)> = Vec::new();
    let mut lost0 = 0usize;
    let mut ids1: Vec<String> = Vec::new();
    rt.block_on(async {
        let mut killed = false;
        for wave in 0..1000i64 {
            if killed && lost0 > 0 {
                break;
            }
            let kill_now = !killed && acked0.len() >= 40;
            let pushes = proxy.snapshot().cmd("PUSH");
            let wave: Vec<i64> = (wave * 20..wave * 20 + 20).collect();
            let durable = JobOptions::new().durable(true);
            let adds0 = join_all(wave.iter().map(|j| q0.add("kill", j, durable.clone())));
            let adds1 = join_all(
                wave.iter()
                    .map(|j| q1.add("kill", &(-j - 1), JobOptions::new())),
            );
            let killer = async {
                if kill_now {
                    eventually::<Tokio>("5 PUSH frames of the wave", || {
                        proxy.snapshot().cmd("PUSH") >= pushes + 5
                    })
                    .await;
                    fleet.kill(0).expect("kill broker 0");
                }
            };
            let ((r0, r1), ()) =
                within::<Tokio, _>("a wave", join(join(adds0, adds1), killer)).await;
            killed |= kill_now;
            for (j, r) in wave.iter().zip(r0) {
                match r {
                    Ok(id) => acked0.push((*j, id)),
                    Err(e) => {
                        assert!(is_transport(&e), "add through the killed broker: {e:?}");
                        lost0 += 1;
                    }
                }
            }
            for r in r1 {
                ids1.push(r.expect("add through the surviving broker"));
            }
        }
        assert!(lost0 > 0, "adds through the killed broker failed");
    });
    eprintln!(
        "kill: {} durable adds acknowledged by broker 0 before it died, {lost0} failed; {} adds through broker 1",
        acked0.len(),
        ids1.len()
    );

    // Counted through the survivor: every acknowledged durable add is there, with its data.
    let mut raw1 = raw(fleet.addr(1));
    rt.block_on(survivor_holds(&mut raw1, &acked0));

    // The killed broker comes back under its id and takes work again.
    fleet.restart(0).expect("restart broker 0");
    rt.block_on(async {
        let mut after = None;
        for _ in 0..100 {
            let add = q0.add("after", &-1_000_000i64, JobOptions::new().durable(true));
            match within::<Tokio, _>("add after the restart", add).await {
                Ok(id) => {
                    after = Some(id);
                    break;
                }
                Err(e) => {
                    assert!(is_transport(&e), "unexpected error {e:?}");
                    Tokio::sleep(Duration::from_millis(50)).await;
                }
            }
        }
        let after = after.expect("an add through the restarted broker succeeds");
        assert!(c0.stats().await.session.connects >= 2);
        let runs = Runs::default();
        let w = worker(fleet.addr(0), name, 0, &runs).await;
        let mut raw0 = raw(fleet.addr(0));
        eventually::<Tokio>("the restarted broker's worker drains the queue", || {
            let c = raw0.counts(name);
            c.waiting + c.active + c.delayed + c.prioritized == 0
                && runs.snapshot().contains_key(&-1_000_000)
        })
        .await;
        within::<Tokio, _>("worker close", w.close()).await;
        assert_eq!(raw0.state(&after), "completed");
        for (_, id) in &acked0 {
            assert_eq!(raw0.state(id), "completed");
        }
        for id in &ids1 {
            assert_eq!(raw0.state(id), "completed");
        }
        // Nothing is there twice, and nothing ran twice: the queue holds the acknowledged
        // adds, the restart's add and at most the adds whose fate the kill left unknown.
        let lo = acked0.len() + ids1.len() + 1;
        let present = each_ran_once(&mut raw1, name, &runs, lo..=lo + lost0).await;
        eprintln!(
            "kill: {} of the {lost0} adds that failed with a transport error had landed",
            present - lo
        );
        within::<Tokio, _>("close", c0.close()).await;
        within::<Tokio, _>("close", c1.close()).await;
    });
}

/// A broker frozen with SIGSTOP does not stall adds and workers on the other broker (hang
/// guards only); after SIGCONT it answers again.
#[test]
fn frozen_broker_does_not_stall_the_other() {
    const N: i64 = 100;
    let fleet = fleet("freeze");
    let name = "freeze";
    Tokio::block_on(async {
        let runs = Runs::default();
        // Broker 1 has a worker and a producer of its own when it freezes.
        let c1 = connect::<Tokio>(fragile_options(fleet.addr(1))).await;
        let w1 = worker(fleet.addr(1), name, 1, &runs).await;
        c1.queue(name)
            .add("before", &-1i64, JobOptions::new())
            .await
            .expect("add before the freeze");
        // Frozen while idle: a job held by a frozen broker's worker would outlive its lease
        // and run again elsewhere, which is bunqueue's at-least-once redelivery, not a stall.
        let mut raw1 = raw(fleet.addr(1));
        eventually::<Tokio>("the first job completes", || {
            raw1.counts(name).completed == 1
        })
        .await;
        fleet.suspend(1).expect("SIGSTOP broker 1");

        let c0 = connect::<Tokio>(options(fleet.addr(0))).await;
        let w0 = worker(fleet.addr(0), name, 0, &runs).await;
        let q0 = c0.queue(name);
        for wave in (0..N).collect::<Vec<_>>().chunks(20) {
            for r in within::<Tokio, _>(
                "adds while broker 1 is frozen",
                join_all(wave.iter().map(|i| q0.add("freeze", i, JobOptions::new()))),
            )
            .await
            {
                r.expect("add through broker 0");
            }
        }
        eventually::<Tokio>("broker 0's worker runs every job added through it", || {
            let r = runs.snapshot();
            (0..N).all(|i| r.get(&i).is_some_and(|v| v == &[0]))
        })
        .await;
        let mut raw0 = raw(fleet.addr(0));
        eventually::<Tokio>("broker 0 counts them completed", || {
            raw0.counts(name).completed >= N as u64
        })
        .await;

        fleet.resume(1).expect("SIGCONT broker 1");
        within::<Tokio, _>(
            "an add through broker 1 after SIGCONT resolves",
            c1.queue(name).add("after", &-2i64, JobOptions::new()),
        )
        .await
        .map_err(|e: Error| assert!(is_transport(&e), "{e:?}"))
        .ok();
        eventually::<Tokio>("every job completes once broker 1 is back", || {
            let c = raw1.counts(name);
            c.completed == total(&mut raw1, name)
        })
        .await;
        let runs = runs.snapshot();
        assert!(
            runs.values().all(|v| v.len() == 1),
            "a job ran twice: {runs:?}"
        );
        for w in [&w0, &w1] {
            within::<Tokio, _>("worker close", w.close()).await;
        }
        within::<Tokio, _>("close", c0.close()).await;
        within::<Tokio, _>("close", c1.close()).await;
    });
}

/// Whether bunqueue's custom-id deduplication holds ACROSS brokers in PostgreSQL mode: the same
/// custom id added through both brokers, one after the other and at the same time.
///
/// Finding (bunqueue 2.9.5, PostgreSQL 15): it holds. The second add of a live custom id,
/// through either broker and even when both race, returns the first job's id and inserts
/// nothing — the database, not a broker's memory, owns the id (in PostgreSQL mode the job id
/// *is* the custom id). So a multi-broker client may replay a custom-id add on another broker
/// exactly as it replays one on a reconnection, with the same limit: once the job has
/// completed, the same add is not deduplicated but runs again — here it replaces the completed
/// job under the same id, with the new data, waiting (checked last; the completed count drops
/// by one).
#[test]
fn custom_ids_deduplicate_across_brokers() {
    const RACES: usize = 20;
    let fleet = fleet("dedup");
    let name = "dedup";
    Tokio::block_on(async {
        let c0 = connect::<Tokio>(options(fleet.addr(0))).await;
        let c1 = connect::<Tokio>(options(fleet.addr(1))).await;
        let (q0, q1) = (c0.queue(name), c1.queue(name));
        let id_opts = |id: &str| JobOptions::new().job_id(id.to_owned());

        // One after the other.
        let a = q0
            .add("dedup", &1i64, id_opts("same"))
            .await
            .expect("add via 0");
        let b = q1
            .add("dedup", &2i64, id_opts("same"))
            .await
            .expect("add via 1");
        assert_eq!(a, b, "the second add returns the first job's id");

        // Racing, one batch through each broker at once.
        async fn race(q: &autobatch_driver::Queue<R>, tag: i64) -> Vec<Result<String, Error>> {
            let adds = (0..RACES).map(|k| {
                let opts = JobOptions::new().job_id(format!("race-{k}"));
                q.add("dedup", &tag, opts)
            });
            join_all(adds).await
        }
        let (r0, r1) = within::<Tokio, _>("racing adds", join(race(&q0, 10), race(&q1, 11))).await;
        for (x, y) in r0.into_iter().zip(r1) {
            assert_eq!(x.expect("add via 0"), y.expect("add via 1"));
        }

        // Counted through both brokers once they have caught up.
        let expected = 1 + RACES as u64;
        for addr in fleet.addrs() {
            let mut raw = raw(addr);
            eventually::<Tokio>("counts settle", || total(&mut raw, name) >= expected).await;
            Tokio::sleep(Duration::from_millis(300)).await;
            assert_eq!(total(&mut raw, name), expected, "through {addr}");
            assert_eq!(raw.job(&a).and_then(|j| j.data.as_i64()), Some(1));
        }

        // Once the job has completed, its custom id is free again: the same add through the
        // other broker inserts a new job (the documented limit of replaying custom-id adds).
        let runs = Runs::default();
        let w = worker(fleet.addr(0), name, 0, &runs).await;
        let mut raw1 = raw(fleet.addr(1));
        eventually::<Tokio>("everything completed", || {
            raw1.counts(name).completed == expected
        })
        .await;
        within::<Tokio, _>("worker close", w.close()).await;
        let again = q1
            .add("dedup", &3i64, id_opts("same"))
            .await
            .expect("re-add");
        assert_eq!(again, a, "the job id is the custom id");
        let mut raw0 = raw(fleet.addr(0));
        for raw in [&mut raw0, &mut raw1] {
            eventually::<Tokio>("the completed job is replaced by a waiting one", || {
                raw.job(&a).and_then(|j| j.data.as_i64()) == Some(3)
            })
            .await;
            let c = raw.counts(name);
            assert_eq!((c.waiting, c.completed), (1, expected - 1), "{c:?}");
            assert_eq!(raw.state(&a), "waiting");
        }
        within::<Tokio, _>("close", c0.close()).await;
        within::<Tokio, _>("close", c1.close()).await;
    });
}

// ------------------------------------------------------------------ one client, both brokers

/// Options that reach both brokers of `fleet` from one client (broker 0 first).
fn both(fleet: &Fleet, base: fn(SocketAddr) -> ClientOptions) -> ClientOptions {
    let b = fleet.addr(1);
    base(fleet.addr(0)).broker(b.ip().to_string(), b.port())
}

/// Two brokers with bunqueue's default 30 s lease: a broker frozen for a few seconds is not
/// purged and fenced by the other meanwhile.
fn fleet_long_lease(scenario: &str) -> Fleet {
    let pg = shared_postgres().unwrap_or_else(|e| panic!("{e}"));
    let mut opts = FleetOptions::for_tests(2);
    opts.lease = None;
    opts.namespace = Some(format!("{scenario}-{}", std::process::id()));
    Fleet::start_on(pg, opts).unwrap_or_else(|e| panic!("{e}"))
}

/// A worker on both brokers of `fleet` recording every job it runs in `runs` (as broker 0:
/// Quick reconnects (brokers restart in these scenarios), with a command timeout far above
/// what a durable add to a busy PostgreSQL-backed broker takes on a loaded machine: the only
/// failures these scenarios expect are the kill's (a 2 s timeout fired there under load).
fn quick_reconnects(addr: SocketAddr) -> ClientOptions {
    fragile_options(addr).command_timeout(Duration::from_secs(20))
}

/// which broker handed it out is in the worker's per-broker stats).
async fn worker_on_both(fleet: &Fleet, queue: &str, runs: &Runs) -> Worker<R> {
    worker_with(both(fleet, options), queue, 0, runs).await
}

/// One client on both brokers adds in concurrent waves while one worker on both brokers
/// drains: the adds are spread over both brokers (batches per broker), the worker pulls from
/// both and settles each job on the broker it came from, and every job runs exactly once —
/// checked through raw connections to each broker.
#[test]
fn one_client_spreads_adds_over_both_brokers() {
    const N: i64 = 200;
    let fleet = fleet("one-client");
    let name = "one-client";
    Tokio::block_on(async {
        let runs = Runs::default();
        let w = worker_on_both(&fleet, name, &runs).await;
        let client = connect::<Tokio>(both(&fleet, options)).await;
        assert_eq!(client.brokers().len(), 2);
        assert!(client.brokers().iter().all(|b| b.connected && b.live));
        let q = client.queue(name);
        let mut ids = Vec::new();
        for wave in (0..N).collect::<Vec<_>>().chunks(25) {
            let adds = wave.iter().map(|i| q.add("spread", i, JobOptions::new()));
            for r in within::<Tokio, _>("a wave", join_all(adds)).await {
                ids.push(r.expect("add"));
            }
        }
        let mut distinct = ids.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), N as usize, "every add has its own id");

        let mut raws = [raw(fleet.addr(0)), raw(fleet.addr(1))];
        for (k, raw) in raws.iter_mut().enumerate() {
            eventually::<Tokio>(&format!("broker {k} counts {N} completions"), || {
                raw.counts(name).completed == N as u64
            })
            .await;
        }
        let per_broker = client.broker_stats().await;
        let pulled = w.broker_stats().await;
        within::<Tokio, _>("worker close", w.close()).await;
        within::<Tokio, _>("close", client.close()).await;

        let adds: Vec<u64> = per_broker.iter().map(|s| s.session.adds_ok).collect();
        let received: Vec<u64> = pulled.iter().map(|s| s.session.jobs_received).collect();
        eprintln!("one client: adds per broker {adds:?}, jobs pulled per broker {received:?}");
        assert_eq!(adds.iter().sum::<u64>(), N as u64);
        assert!(
            adds.iter().all(|&n| n > 0),
            "both brokers took adds: {adds:?}"
        );
        assert_eq!(client.stats().await.session.adds_ok, N as u64);
        assert!(
            received.iter().sum::<u64>() >= N as u64,
            "the worker received every job: {received:?}"
        );
        let runs = runs.snapshot();
        for i in 0..N {
            let n = runs.get(&i).map_or(0, Vec::len);
            assert_eq!(n, 1, "job {i} ran {n} times");
        }
        for (k, raw) in raws.iter_mut().enumerate() {
            let c = raw.counts(name);
            assert_eq!(c.failed, 0, "broker {k}: {c:?}");
            assert_eq!(total(raw, name), N as u64, "broker {k}: {c:?}");
        }
        for id in ids.iter().step_by(17) {
            assert_eq!(raws[0].state(id), "completed");
            assert_eq!(raws[1].state(id), "completed");
        }
    });
}

/// The same custom ids added twice at once through one client on both brokers (round-robin
/// puts the two adds of a pair on different brokers): bunqueue's dedup holds across brokers,
/// so each pair gets one id and one job exists per id.
#[test]
fn one_client_custom_ids_deduplicate_across_its_brokers() {
    const K: usize = 20;
    let fleet = fleet("one-client-dedup");
    let name = "one-client-dedup";
    Tokio::block_on(async {
        let client = connect::<Tokio>(both(&fleet, options)).await;
        let q = client.queue(name);
        let adds = (0..K).flat_map(|k| {
            let opts = JobOptions::new().job_id(format!("pair-{k}"));
            [
                q.add("dedup", &(k as i64), opts.clone()),
                q.add("dedup", &(k as i64), opts),
            ]
        });
        let ids: Vec<String> = within::<Tokio, _>("adds", join_all(adds))
            .await
            .into_iter()
            .map(|r| r.expect("add"))
            .collect();
        for pair in ids.chunks(2) {
            assert_eq!(pair[0], pair[1]);
        }
        let per_broker = client.broker_stats().await;
        assert!(
            per_broker.iter().all(|s| s.session.adds_ok > 0),
            "both brokers took adds"
        );
        for addr in fleet.addrs() {
            let mut raw = raw(addr);
            eventually::<Tokio>("counts settle", || total(&mut raw, name) >= K as u64).await;
            Tokio::sleep(Duration::from_millis(300)).await;
            assert_eq!(total(&mut raw, name), K as u64, "through {addr}");
        }
        within::<Tokio, _>("close", client.close()).await;
    });
}

/// One client on both brokers; broker 0 SIGKILLed in the middle of a wave of durable adds
/// (each its own PUSH). Every add resolves: an id, or a transport error for one that was
/// written to the killed broker; adds not yet written there go to broker 1. The waves after
/// the kill all succeed (no add waits on the dead broker). Every acknowledged add is counted
/// through the survivor exactly once. Broker 0 restarts under its id, the client reconnects
/// and sends it work again, and a worker on both brokers runs every job once.
#[test]
fn one_client_survives_a_broker_killed_mid_wave() {
    const WAVE: i64 = 20;
    const KILL_WAVE: i64 = 300;
    let mut fleet = fleet("one-client-kill");
    let name = "one-client-kill";
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = rt.block_on(connect::<Tokio>(both(&fleet, quick_reconnects)));
    let q = client.queue(name);
    let durable = JobOptions::new().durable(true);
    let mut acked: Vec<(i64, String)> = Vec::new();
    let mut lost = 0usize;
    let mut next = 0i64;
    let mut wave = |rt: &tokio::runtime::Runtime, n: i64, kill: Option<&mut Fleet>| {
        let data: Vec<i64> = (next..next + n).collect();
        next += n;
        let adds = join_all(data.iter().map(|j| q.add("kill", j, durable.clone())));
        let killer = async {
            if let Some(fleet) = kill {
                // The adds were handed to the links when first polled (before this): kill
                // while broker 0 has some of them out.
                eventually::<Tokio>("adds in flight on broker 0", || {
                    client.brokers()[0].adds_in_flight > 0
                })
                .await;
                fleet.kill(0).expect("kill broker 0");
            }
        };
        let (results, ()) = rt.block_on(within::<Tokio, _>("a wave", join(adds, killer)));
        let mut failed = 0;
        for (j, r) in data.iter().zip(results) {
            match r {
                Ok(id) => acked.push((*j, id)),
                Err(e) => {
                    assert!(
                        matches!(
                            e,
                            Error::ConnectionLost {
                                maybe_applied: true
                            }
                        ),
                        "only adds written to the killed broker fail: {e:?}"
                    );
                    failed += 1;
                }
            }
        }
        failed
    };
    for _ in 0..3 {
        assert_eq!(wave(&rt, WAVE, None), 0, "before the kill");
    }
    let before = rt.block_on(client.broker_stats());
    assert!(
        before.iter().all(|s| s.session.adds_ok > 0),
        "both took adds"
    );
    lost += wave(&rt, KILL_WAVE, Some(&mut fleet));
    assert!(!client.brokers()[0].connected, "broker 0 is down");
    for _ in 0..3 {
        assert_eq!(
            wave(&rt, WAVE, None),
            0,
            "after the kill, adds go to broker 1"
        );
    }
    let withdrawn = rt.block_on(client.broker_stats())[0].session.adds_cancelled;
    eprintln!(
        "one-client kill: {} adds acknowledged, {lost} lost with the killed broker (written to it), {withdrawn} withdrawn from it unwritten and sent to broker 1",
        acked.len()
    );

    // Counted through the survivor: every acknowledged add is there, with its data.
    let mut raw1 = raw(fleet.addr(1));
    rt.block_on(survivor_holds(&mut raw1, &acked));

    // Broker 0 comes back and takes work again.
    fleet.restart(0).expect("restart broker 0");
    rt.block_on(async {
        eventually::<Tokio>("the client reconnects to broker 0", || {
            client.brokers()[0].live
        })
        .await;
        let ok0 = client.broker_stats().await[0].session.adds_ok;
        for _ in 0..100 {
            if client.broker_stats().await[0].session.adds_ok > ok0 {
                break;
            }
            let data: Vec<i64> = (next..next + WAVE).collect();
            next += WAVE;
            let adds = data.iter().map(|j| q.add("kill", j, durable.clone()));
            for (j, r) in data
                .iter()
                .zip(within::<Tokio, _>("a wave", join_all(adds)).await)
            {
                acked.push((*j, r.expect("add after the restart")));
            }
        }
        assert!(
            client.broker_stats().await[0].session.adds_ok > ok0,
            "the restarted broker takes adds again"
        );

        // Every job runs exactly once; the acknowledged ones all ran.
        let runs = Runs::default();
        let w = worker_on_both(&fleet, name, &runs).await;
        eventually::<Tokio>("every acknowledged add ran", || {
            let r = runs.snapshot();
            acked.iter().all(|(j, _)| r.contains_key(j))
        })
        .await;
        eventually::<Tokio>("the queue is drained", || {
            let c = raw1.counts(name);
            c.waiting + c.active + c.delayed + c.prioritized == 0
        })
        .await;
        within::<Tokio, _>("worker close", w.close()).await;
        let present = each_ran_once(&mut raw1, name, &runs, acked.len()..=acked.len() + lost).await;
        eprintln!(
            "one-client kill: {} of the {lost} adds lost with the broker had landed",
            present - acked.len()
        );
        within::<Tokio, _>("close", client.close()).await;
    });
}

/// One client on both brokers; broker 1 frozen with SIGSTOP. The adds that reached it before
/// the client noticed wait (the command timeout is longer than the hang guard), but once its
/// link counts as stalled every add goes to broker 0: waves of adds complete under the hang
/// guard. After SIGCONT the waiting adds resolve and broker 1 takes work again.
#[test]
fn one_client_frozen_broker_does_not_stall_adds() {
    const WAVE: i64 = 20;
    let fleet = fleet_long_lease("one-client-freeze");
    let name = "one-client-freeze";
    Tokio::block_on(async {
        let opts = both(&fleet, options)
            .command_timeout(HANG * 2)
            .stall_timeout(Duration::from_millis(300));
        let client = connect::<Tokio>(opts).await;
        let q = client.queue(name);
        let add_wave = |from: i64| {
            let q = q.clone();
            async move {
                let adds = (from..from + WAVE).map(|j| q.add("freeze", &j, JobOptions::new()));
                join_all(adds).await
            }
        };
        for r in within::<Tokio, _>("warm-up", add_wave(0)).await {
            r.expect("add before the freeze");
        }
        fleet.suspend(1).expect("SIGSTOP broker 1");
        // Sent while the client still takes broker 1 for live: some wait on it.
        let early = tokio::spawn(add_wave(1000));
        eventually::<Tokio>("the client marks broker 1 stalled", || {
            let b = client.brokers();
            b[0].live && !b[1].live && b[1].connected
        })
        .await;
        let mut ids = Vec::new();
        for k in 0..5 {
            for r in
                within::<Tokio, _>("adds while broker 1 is frozen", add_wave(2000 + k * WAVE)).await
            {
                ids.push(r.expect("add while broker 1 is frozen"));
            }
        }
        let mut raw0 = raw(fleet.addr(0));
        eventually::<Tokio>("broker 0 has every add made during the freeze", || {
            ids.iter().all(|id| raw0.job(id).is_some())
        })
        .await;

        fleet.resume(1).expect("SIGCONT broker 1");
        let early = within::<Tokio, _>("the early adds after SIGCONT", early)
            .await
            .expect("task");
        let mut waited = 0;
        for r in early {
            match r {
                Ok(_) => waited += 1,
                Err(e) => assert!(is_transport(&e), "{e:?}"),
            }
        }
        let on1 = client.broker_stats().await[1].session.adds_ok;
        eprintln!(
            "one-client freeze: {} adds during the freeze all went to broker 0; of the early wave, {waited} resolved after SIGCONT ({on1} adds acknowledged by broker 1 in all)",
            ids.len()
        );
        eventually::<Tokio>("broker 1 is live again", || client.brokers()[1].live).await;
        let ok1 = client.broker_stats().await[1].session.adds_ok;
        for r in within::<Tokio, _>("adds after SIGCONT", add_wave(9000)).await {
            r.expect("add after SIGCONT");
        }
        assert!(
            client.broker_stats().await[1].session.adds_ok > ok1,
            "broker 1 takes adds again"
        );
        within::<Tokio, _>("close", client.close()).await;
    });
}

/// `connect` with one broker down succeeds, the client works through the other, and the
/// broker that was down joins once it is up.
#[test]
fn one_client_connects_with_a_broker_down() {
    let mut fleet = fleet("one-client-down");
    let name = "one-client-down";
    fleet.broker_mut(1).stop().expect("stop broker 1");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = rt.block_on(connect::<Tokio>(both(&fleet, quick_reconnects)));
    let q = client.queue(name);
    rt.block_on(async {
        let b = client.brokers();
        assert!(b[0].live && !b[1].connected, "{b:?}");
        let adds = (0..20i64).map(|j| q.add("down", &j, JobOptions::new()));
        for r in within::<Tokio, _>("adds with broker 1 down", join_all(adds)).await {
            r.expect("add");
        }
        within::<Tokio, _>("ping", client.ping())
            .await
            .expect("ping");
    });
    fleet.restart(1).expect("start broker 1");
    rt.block_on(async {
        eventually::<Tokio>("broker 1 joins", || client.brokers()[1].live).await;
        let adds = (0..20i64).map(|j| q.add("down", &j, JobOptions::new()));
        for r in within::<Tokio, _>("adds with both up", join_all(adds)).await {
            r.expect("add");
        }
        assert!(client.broker_stats().await[1].session.adds_ok > 0);
        within::<Tokio, _>("close", client.close()).await;
    });
}

// ------------------------------------------------------------------ failover, shared storage

/// The rows of `queue` in `fleet`'s namespace, read from PostgreSQL itself: `(id, state)`.
fn db_jobs(fleet: &Fleet, queue: &str) -> HashMap<String, String> {
    let ns = fleet
        .options()
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let rows = fleet
        .postgres()
        .query(&format!(
            "SELECT id, state FROM bunqueue_jobs WHERE namespace = '{ns}' AND queue = '{queue}'"
        ))
        .expect("query the jobs table");
    rows.lines()
        .filter_map(|l| l.split_once('|'))
        .map(|(id, state)| (id.to_owned(), state.to_owned()))
        .collect()
}

/// Options for one client on both brokers that share storage, with a command timeout of
/// an hour: far over the hang guard, so an add left waiting on the killed broker for its
/// timeout fails the scenario instead of resolving late.
fn failover_options(fleet: &Fleet) -> ClientOptions {
    both(fleet, |a| {
        fragile_options(a).command_timeout(Duration::from_secs(3600))
    })
    .shared_storage(true)
}

/// One client on both brokers of a shared-storage fleet; broker 0 SIGKILLed while thousands
/// of batched adds, plain and with custom ids, are out. Every add resolves under the hang
/// guard although the command timeout is an hour: those not written to broker 0 move to
/// broker 1, plain adds written to it fail as maybe applied, custom-id adds written to it
/// are replayed on broker 1 after a lookup of their id. Counted in the database: every
/// acknowledged add is a row, every custom id is a row, and nothing else is.
#[test]
fn one_client_kill_resolves_every_add_at_once() {
    const N: i64 = 4000;
    let mut fleet = fleet("kill-at-once");
    let name = "kill-at-once";
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = rt.block_on(connect::<Tokio>(failover_options(&fleet)));
    let q = client.queue(name);
    let opts: Vec<JobOptions> = (0..N)
        .map(|j| match j % 2 {
            0 => JobOptions::new(),
            _ => JobOptions::new().job_id(format!("c-{j}")),
        })
        .collect();
    let data: Vec<i64> = (0..N).collect();
    let adds = join_all(
        data.iter()
            .map(|j| q.add("kill", j, opts[*j as usize].clone())),
    );
    let killer = async {
        eventually::<Tokio>("adds in flight on broker 0", || {
            client.brokers()[0].adds_in_flight > 0
        })
        .await;
        fleet.kill(0).expect("kill broker 0");
        std::time::Instant::now()
    };
    let (results, killed) = rt.block_on(within::<Tokio, _>("every add", join(adds, killer)));
    // Reported, not asserted: how long the last add took to resolve after the kill.
    let settled_after = killed.elapsed();
    let mut acked = Vec::new();
    let mut maybe = 0usize;
    for (j, r) in (0..N).zip(results) {
        match (j % 2, r) {
            (0, Ok(id)) => acked.push(id),
            (
                0,
                Err(Error::ConnectionLost {
                    maybe_applied: true,
                }),
            ) => maybe += 1,
            (1, Ok(id)) => assert_eq!(id, format!("c-{j}"), "a custom id is the job's id"),
            (_, Err(e)) => panic!("add {j} failed: {e:?}"),
            _ => unreachable!(),
        }
    }
    let stats = rt.block_on(client.broker_stats());
    eprintln!(
        "kill at once: every add resolved {settled_after:?} after the kill; {} plain adds acknowledged, {maybe} written to the killed broker (maybe applied), {} adds given back by it for broker 1, {} custom-id adds acknowledged",
        acked.len(),
        stats[0].session.adds_cancelled,
        N / 2
    );
    assert!(!client.brokers()[0].connected, "broker 0 is down");

    let rows = db_jobs(&fleet, name);
    for id in &acked {
        assert!(rows.contains_key(id), "acknowledged add {id} is a row");
    }
    for j in (1..N).step_by(2) {
        assert!(
            rows.contains_key(&format!("c-{j}")),
            "custom id c-{j} is a row"
        );
    }
    let custom = (N / 2) as usize;
    assert!(
        rows.len() >= acked.len() + custom && rows.len() <= acked.len() + custom + maybe,
        "{} rows for {} acknowledged plain adds, {custom} custom ids and {maybe} unknown",
        rows.len(),
        acked.len()
    );
    rt.block_on(within::<Tokio, _>("close", client.close()));
}

/// `one_client_kill_resolves_every_add_at_once` with
/// [`idempotent_adds`](autobatch_driver::ClientOptions::idempotent_adds): the same kill
/// during a wave of plain adds leaves none of them maybe applied. Each add written to the
/// killed broker is looked up on the live one and added there only if no job has its id, so
/// every add is acknowledged and the database holds exactly one row per add.
#[test]
fn one_client_kill_with_idempotent_adds_leaves_no_add_maybe_applied() {
    const N: i64 = 4000;
    let mut fleet = fleet("kill-idempotent");
    let name = "kill-idempotent";
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let opts = failover_options(&fleet).idempotent_adds(true);
    let client = rt.block_on(connect::<Tokio>(opts));
    let q = client.queue(name);
    let data: Vec<i64> = (0..N).collect();
    let adds = join_all(data.iter().map(|j| q.add("kill", j, JobOptions::new())));
    let killer = async {
        eventually::<Tokio>("adds in flight on broker 0", || {
            client.brokers()[0].adds_in_flight > 0
        })
        .await;
        fleet.kill(0).expect("kill broker 0");
    };
    let (results, ()) = rt.block_on(within::<Tokio, _>("every add", join(adds, killer)));
    let ids: Vec<String> = (0..N)
        .zip(results)
        .map(|(j, r)| r.unwrap_or_else(|e| panic!("idempotent add {j} ended {e:?}")))
        .collect();
    let stats = rt.block_on(client.broker_stats());
    eprintln!(
        "kill with idempotent adds: {} adds acknowledged, {} of them given back unwritten by the killed broker",
        ids.len(),
        stats[0].session.adds_cancelled,
    );
    assert!(!client.brokers()[0].connected, "broker 0 is down");
    let rows = db_jobs(&fleet, name);
    for id in &ids {
        assert!(rows.contains_key(id), "acknowledged add {id} is a row");
    }
    assert_eq!(rows.len(), N as usize, "one row per add");
    rt.block_on(within::<Tokio, _>("close", client.close()));
}

/// A worker on both brokers (`shared_storage` as given), 1,000 jobs; broker 0 SIGKILLed while
/// it runs jobs pulled from there. Every job completes, counted in the database, and
/// `Worker::close` returns under the hang guard although the command timeout is an hour
/// (nothing waits on the dead broker). Returns how many jobs ran more than once.
fn worker_kill(name: &str, shared_storage: bool) -> usize {
    const N: i64 = 1000;
    let mut fleet = fleet(name);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let runs = Runs::default();
    rt.block_on(async {
        let client = connect::<Tokio>(both(&fleet, options)).await;
        let q = client.queue(name);
        let data: Vec<i64> = (0..N).collect();
        for r in within::<Tokio, _>(
            "adds",
            join_all(data.iter().map(|j| q.add("job", j, JobOptions::new()))),
        )
        .await
        {
            r.expect("add");
        }
        within::<Tokio, _>("close", client.close()).await;
    });
    let w = rt.block_on(async {
        let runs = runs.clone();
        within::<Tokio, _>(
            "worker start",
            Worker::<R>::start(
                failover_options(&fleet).shared_storage(shared_storage),
                // A short lock: the jobs of a pull the dead broker never answered go back
                // to waiting when it expires (bunqueue's rule), seconds after the kill.
                WorkerOptions::new(name)
                    .concurrency(5)
                    .lock_ttl(Duration::from_secs(5))
                    .poll_timeout(Duration::from_millis(200)),
                move |job| {
                    let runs = runs.clone();
                    async move {
                        let i: i64 = job.data.deserialize().map_err(|e| e.to_string())?;
                        runs.record(i, 0);
                        // Long enough that jobs are running when the broker dies.
                        tokio::time::sleep(Duration::from_millis(5)).await;
                        Ok::<_, String>(i)
                    }
                },
            ),
        )
        .await
        .expect("worker")
    });
    rt.block_on(async {
        eventually::<Tokio>("jobs pulled from broker 0 are running", || {
            runs.snapshot().len() >= (N / 5) as usize
        })
        .await;
        assert!(w.broker_stats().await[0].session.jobs_received > 0);
    });
    fleet.kill(0).expect("kill broker 0");
    rt.block_on(async {
        eventually::<Tokio>("every job completed, counted in the database", || {
            let rows = db_jobs(&fleet, name);
            rows.len() == N as usize && rows.values().all(|s| s == "completed")
        })
        .await;
        let closing = std::time::Instant::now();
        within::<Tokio, _>("worker close after the kill", w.close()).await;
        // Reported, not asserted.
        eprintln!("worker kill: close took {:?}", closing.elapsed());
    });
    let runs = runs.snapshot();
    let twice: Vec<_> = runs.iter().filter(|(_, v)| v.len() > 1).collect();
    eprintln!(
        "worker kill (shared storage {shared_storage}): {} jobs ran, {} of them more than once",
        runs.len(),
        twice.len()
    );
    assert_eq!(runs.len(), N as usize, "every job ran");
    twice.len()
}

/// Under shared storage the results of the killed broker's jobs go to broker 1 with their
/// lock tokens (and their locks are renewed there): no job runs twice.
#[test]
fn worker_kill_runs_each_job_once_under_shared_storage() {
    assert_eq!(worker_kill("worker-kill", true), 0, "a job ran twice");
}

/// Without shared storage the killed broker's results wait for it; the jobs whose locks
/// expire meanwhile run again on broker 1 (at least once: every job completes).
#[test]
fn worker_kill_without_shared_storage_is_at_least_once() {
    worker_kill("worker-kill-apart", false);
}

// ------------------------------------------------------------------ capacity

/// CPU time (user + system) of process `pid` and, with `children`, of its children, living
/// and reaped, in microseconds, from `/proc`.
fn cpu_micros(pid: u32, children: bool) -> u64 {
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    let stat = |p: &str| -> Option<Vec<u64>> {
        let s = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
        // After the command's closing parenthesis: state is field 3, utime 14 … cstime 17.
        let rest = &s[s.rfind(')')? + 2..];
        Some(rest.split(' ').map(|f| f.parse().unwrap_or(0)).collect())
    };
    let Some(f) = stat(&pid.to_string()) else {
        return 0;
    };
    if !children {
        return (f[11] + f[12]) * 1_000_000 / ticks;
    }
    let own = f[11] + f[12] + f[13] + f[14];
    let children: u64 = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| stat(e.file_name().to_str()?))
        .filter(|f| f[1] == pid as u64)
        .map(|f| f[11] + f[12])
        .sum();
    (own + children) * 1_000_000 / ticks
}

/// The capacity model's inputs (docs/fleet.md): CPU per add of the client, one broker and
/// PostgreSQL (`fsync` on, as in production), for plain adds from 100 concurrent producers
/// through one broker, each part measured from `/proc`. Prints the figures; asserts only
/// that every add landed.
///
/// `cargo test --release -p autobatch-tests --test fleet -- --ignored fleet_cpu_per_add --nocapture`
#[test]
#[ignore = "a measurement: run it alone on a quiet machine"]
fn fleet_cpu_per_add() {
    const PRODUCERS: usize = 100;
    const EACH: usize = 200;
    let fleet = Fleet::start(FleetOptions::new(1)).unwrap_or_else(|e| panic!("{e}"));
    let broker = fleet.broker(0).pid().expect("broker pid");
    let pg = fleet.postgres().pid().expect("postgres pid");
    let me = std::process::id();
    Tokio::block_on(async {
        let client = connect::<Tokio>(options(fleet.addr(0))).await;
        let q = client.queue("capacity");
        // Warm up: the queue, the connections and the JIT.
        let warm: Vec<i64> = (0..500).collect();
        for r in join_all(warm.iter().map(|i| q.add("w", i, JobOptions::new()))).await {
            r.expect("warm-up add");
        }
        // The test process's own time only: the broker and PostgreSQL are its children.
        let before = (
            cpu_micros(me, false),
            cpu_micros(broker, true),
            cpu_micros(pg, true),
        );
        let started = std::time::Instant::now();
        let producers = (0..PRODUCERS).map(|p| {
            let q = &q;
            async move {
                for i in 0..EACH {
                    q.add("c", &(p * EACH + i), JobOptions::new())
                        .await
                        .expect("add");
                }
            }
        });
        within::<Tokio, _>("the adds", join_all(producers)).await;
        let wall = started.elapsed();
        let after = (
            cpu_micros(me, false),
            cpu_micros(broker, true),
            cpu_micros(pg, true),
        );
        let n = (PRODUCERS * EACH) as f64;
        let per = |a: u64, b: u64| (b - a) as f64 / n;
        eprintln!(
            "cpu per add: client {:.1} µs, broker {:.1} µs, postgres {:.1} µs; {:.0} adds/s on this machine",
            per(before.0, after.0),
            per(before.1, after.1),
            per(before.2, after.2),
            n / wall.as_secs_f64()
        );
        within::<Tokio, _>("close", client.close()).await;
    });
}
