//! A chaos soak on bunqueue 2.9.5's PostgreSQL fleet: one PostgreSQL 15 and three brokers,
//! one autobatch client and one worker on all three with
//! [`shared_storage`](autobatch_driver::ClientOptions::shared_storage). Producers add
//! without pause — plain and custom-id adds, and through a second client with
//! [`idempotent_adds`](autobatch_driver::ClientOptions::idempotent_adds) adds that carry a
//! job id of the client's own, one at a time and in concurrent waves — and the worker runs
//! every job, while brokers are SIGKILLed and restarted at random every few
//! seconds (one down at a time, so a live broker always exists).
//!
//! Counted afterwards in the database itself: 0 lost (every acknowledged add is a row),
//! 0 duplicated custom ids, 0 idempotent adds left maybe applied, every add resolved (an id or a typed error; each add is under
//! the hang guard, its command timeout far below it), every job completed, and every job
//! ran exactly once. The worker holds bunqueue's own lock (30 s). A job run twice is told
//! apart by the row's attempt count: a broker's sweep of expired leases counts an attempt
//! (its lock ran out before its settlement arrived), and the handler never fails a job, so
//! a job run twice with no attempt was run twice by failover itself (see docs/fleet.md).
//!
//! About a minute by default; `AUTOBATCH_CHAOS_SECS=3600` soaks for an hour.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use autobatch_driver::{Client, ClientOptions, Error, JobOptions, Worker, WorkerOptions};
use autobatch_tests::fleet::shared_postgres;
use autobatch_tests::{Fleet, FleetOptions, Postgres};

mod common;

use common::*;

type R = autobatch_tokio::TokioRuntime;

const QUEUE: &str = "chaos";

/// How long brokers are killed and restarted: `AUTOBATCH_CHAOS_SECS`, else 60 s.
fn chaos_time() -> Duration {
    let secs = std::env::var("AUTOBATCH_CHAOS_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    Duration::from_secs(secs)
}

/// SplitMix64: the kill schedule, from a seed printed with the results.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn millis(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.next() % (hi - lo))
    }
}

/// What the producers saw.
#[derive(Default)]
struct Tally {
    /// Ids of acknowledged plain adds.
    plain_ok: Vec<String>,
    /// Custom ids acknowledged.
    custom_ok: Vec<String>,
    /// Adds that failed as maybe applied (written to a broker that died).
    maybe: u64,
    /// Of those, adds of the idempotent client whose connection was lost.
    idempotent_maybe: u64,
    /// Adds of the idempotent client unanswered for their command timeout on a connection
    /// that stayed up (a broker slowed by the machine's load): the timeout bounds the wait,
    /// so these stay maybe applied.
    idempotent_timeouts: u64,
    /// Adds of the idempotent client acknowledged (their ids are in `custom_ok`).
    idempotent_ok: u64,
    /// Adds that failed as not applied.
    not_applied: u64,
    /// Adds that failed otherwise (the error's text).
    other: Vec<String>,
    /// The longest any add took to resolve.
    slowest: Duration,
}

/// What a producer adds.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Plain adds: the server names each job.
    Plain,
    /// Adds with custom ids of the producer's.
    Custom,
    /// Plain adds through the client with `idempotent_adds`, which gives each a job id.
    Idempotent,
}

impl Tally {
    fn record(&mut self, kind: Kind, started: Instant, r: Result<String, Error>) {
        self.slowest = self.slowest.max(started.elapsed());
        match r {
            Ok(id) if kind == Kind::Plain => self.plain_ok.push(id),
            Ok(id) => {
                self.idempotent_ok += u64::from(kind == Kind::Idempotent);
                self.custom_ok.push(id);
            }
            Err(Error::ConnectionLost {
                maybe_applied: true,
            }) => {
                self.maybe += 1;
                self.idempotent_maybe += u64::from(kind == Kind::Idempotent);
            }
            Err(Error::Timeout {
                maybe_applied: true,
            }) => {
                self.maybe += 1;
                self.idempotent_timeouts += u64::from(kind == Kind::Idempotent);
            }
            Err(Error::ConnectionLost {
                maybe_applied: false,
            })
            | Err(Error::Timeout {
                maybe_applied: false,
            }) => self.not_applied += 1,
            Err(e) => self.other.push(e.to_string()),
        }
    }
}

/// The fleet's options for one client on all brokers that share storage.
fn fleet_options(fleet: &Fleet) -> ClientOptions {
    let addrs = fleet.addrs();
    let mut o = fragile_options(addrs[0])
        .command_timeout(Duration::from_secs(10))
        .shared_storage(true);
    for a in &addrs[1..] {
        o = o.broker(a.ip().to_string(), a.port());
    }
    o
}

/// `(id, state, custom_id)` of every job of the queue in namespace `ns`, read from the
/// database.
/// The ids of jobs whose lease a broker recovered at least once: bunqueue's sweep of expired
/// leases (`recoverExpiredPostgresLeases`) counts a failed attempt on the row when it sends
/// an active job back to waiting, and the soak's handler never fails a job itself. A job
/// that ran twice without one was run twice by the failover path itself.
fn recovered(pg: &Postgres, ns: &str) -> std::collections::HashSet<String> {
    pg.query(&format!(
        "SELECT id FROM bunqueue_jobs \
         WHERE namespace = '{ns}' AND queue = '{QUEUE}' AND attempts > 0"
    ))
    .expect("query the jobs table")
    .lines()
    .map(|l| l.trim().to_owned())
    .filter(|l| !l.is_empty())
    .collect()
}

fn rows(pg: &Postgres, ns: &str) -> Vec<(String, String, String)> {
    pg.query(&format!(
        "SELECT id, state, coalesce(custom_id, '') FROM bunqueue_jobs \
         WHERE namespace = '{ns}' AND queue = '{QUEUE}'"
    ))
    .expect("query the jobs table")
    .lines()
    .filter_map(|l| {
        let mut f = l.split('|');
        Some((
            f.next()?.to_owned(),
            f.next()?.to_owned(),
            f.next()?.to_owned(),
        ))
    })
    .collect()
}

/// One producer: adds until `stop`, `wave` at a time (1: one after another), with custom ids
/// `"{tag}-{n}"` for [`Kind::Custom`].
async fn produce(
    client: Client<R>,
    tag: &'static str,
    kind: Kind,
    wave: usize,
    stop: Arc<AtomicBool>,
    next: Arc<AtomicU64>,
) -> Tally {
    let q = client.queue(QUEUE);
    let mut tally = Tally::default();
    while !stop.load(Ordering::Acquire) {
        let data: Vec<u64> = (0..wave)
            .map(|_| next.fetch_add(1, Ordering::Relaxed))
            .collect();
        let opts = |n: u64| match kind {
            Kind::Custom => JobOptions::new().job_id(format!("{tag}-{n}")),
            Kind::Plain | Kind::Idempotent => JobOptions::new(),
        };
        let started = Instant::now();
        let adds = data.iter().map(|n| q.add("chaos", n, opts(*n)));
        let results =
            within::<Tokio, _>("a wave of adds", futures_util::future::join_all(adds)).await;
        for r in results {
            tally.record(kind, started, r);
        }
        // A steady load the worker keeps up with on a small machine: the soak is about
        // failover, not throughput.
        tokio::time::sleep(Duration::from_millis(10 * wave as u64)).await;
    }
    tally
}

#[test]
fn chaos_soak_on_a_shared_storage_fleet() {
    let chaos = chaos_time();
    let t0 = Instant::now();
    let pg = shared_postgres().unwrap_or_else(|e| panic!("{e}"));
    let ns = format!("chaos-{}", std::process::id());
    let mut opts = FleetOptions::for_tests(3);
    opts.namespace = Some(ns.clone());
    let mut fleet = Fleet::start_on(pg.clone(), opts).unwrap_or_else(|e| panic!("{e}"));
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(7, |d| d.as_nanos() as u64);
    let mut rng = Rng(seed);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();

    // Which job ran how often, by id.
    let runs: Arc<Mutex<HashMap<String, u32>>> = Arc::default();
    let worker = rt.block_on(async {
        let runs = runs.clone();
        within::<Tokio, _>(
            "worker start",
            Worker::<R>::start(
                fleet_options(&fleet),
                // bunqueue's own lock (30 s): the jobs of a pull a killed broker never
                // answered go back to waiting when it expires, and a settlement that
                // takes longer than it would be an expired lock, not failover.
                WorkerOptions::new(QUEUE)
                    .concurrency(50)
                    .poll_timeout(Duration::from_millis(200)),
                move |job| {
                    let runs = runs.clone();
                    async move {
                        *runs.lock().unwrap().entry(job.id.clone()).or_default() += 1;
                        tokio::time::sleep(Duration::from_millis(1)).await;
                        Ok::<_, String>(())
                    }
                },
            ),
        )
        .await
        .expect("worker")
    });
    let client = rt.block_on(connect::<Tokio>(fleet_options(&fleet)));
    let idempotent = rt.block_on(connect::<Tokio>(
        fleet_options(&fleet).idempotent_adds(true),
    ));
    let stop = Arc::new(AtomicBool::new(false));
    let next = Arc::new(AtomicU64::new(0));
    let producers: Vec<_> = [
        ("plain-seq", Kind::Plain, 1),
        ("custom-seq", Kind::Custom, 1),
        ("idempotent-seq", Kind::Idempotent, 1),
        ("plain-wave", Kind::Plain, 20),
        ("custom-wave", Kind::Custom, 20),
        ("idempotent-wave", Kind::Idempotent, 20),
    ]
    .into_iter()
    .map(|(tag, kind, wave)| {
        let client = match kind {
            Kind::Idempotent => idempotent.clone(),
            Kind::Plain | Kind::Custom => client.clone(),
        };
        rt.spawn(produce(client, tag, kind, wave, stop.clone(), next.clone()))
    })
    .collect();

    eprintln!("chaos: fleet up after {:?}", t0.elapsed());
    // Brokers die and come back at random, one at a time.
    let end = Instant::now() + chaos;
    let mut kills = 0u32;
    while Instant::now() < end {
        std::thread::sleep(rng.millis(1000, 3000));
        let i = (rng.next() % 3) as usize;
        fleet.kill(i).expect("kill a broker");
        kills += 1;
        std::thread::sleep(rng.millis(200, 2000));
        // A broker that does not come up in time (a slow start on a loaded machine, seen
        // once in an hour's run) is started again: the soak is about the client, not about
        // how fast bunqueue boots.
        let mut tries = 1;
        while let Err(e) = fleet.restart(i) {
            assert!(tries < 3, "restart broker {i} ({tries} tries): {e}");
            eprintln!("chaos: broker {i} did not come up, starting it again: {e}");
            tries += 1;
        }
    }
    stop.store(true, Ordering::Release);
    eprintln!("chaos: kills over after {:?}", t0.elapsed());
    let mut tally = Tally::default();
    for p in producers {
        let t = rt.block_on(p).expect("a producer");
        tally.plain_ok.extend(t.plain_ok);
        tally.custom_ok.extend(t.custom_ok);
        tally.maybe += t.maybe;
        tally.idempotent_maybe += t.idempotent_maybe;
        tally.idempotent_timeouts += t.idempotent_timeouts;
        tally.idempotent_ok += t.idempotent_ok;
        tally.not_applied += t.not_applied;
        tally.other.extend(t.other);
        tally.slowest = tally.slowest.max(t.slowest);
    }

    eprintln!("chaos: producers done after {:?}", t0.elapsed());
    // Every job completes (those of pulls the killed brokers never answered once their
    // locks expire).
    let all = rt.block_on(within::<Tokio, _>("every job completes", async {
        loop {
            let rows = rows(&pg, &ns);
            if rows.iter().all(|(_, state, _)| state == "completed") {
                return rows;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }));
    eprintln!("chaos: every job completed after {:?}", t0.elapsed());
    rt.block_on(async {
        within::<Tokio, _>("worker close", worker.close()).await;
        within::<Tokio, _>("client close", client.close()).await;
        within::<Tokio, _>("idempotent client close", idempotent.close()).await;
    });

    eprintln!("chaos: closed after {:?}", t0.elapsed());
    let runs = runs.lock().unwrap().clone();
    let twice = runs.values().filter(|&&n| n > 1).count();
    let recovered = recovered(&pg, &ns);
    let twice_unrecovered: Vec<&String> = runs
        .iter()
        .filter(|(id, &n)| n > 1 && !recovered.contains(*id))
        .map(|(id, _)| id)
        .collect();
    let by_id: HashMap<&str, &str> = all
        .iter()
        .map(|(id, _, c)| (id.as_str(), c.as_str()))
        .collect();
    let mut custom_rows: HashMap<&str, usize> = HashMap::new();
    for (_, _, c) in &all {
        if !c.is_empty() {
            *custom_rows.entry(c.as_str()).or_default() += 1;
        }
    }
    let duplicated = custom_rows.values().filter(|&&n| n > 1).count();
    let lost_plain = tally
        .plain_ok
        .iter()
        .filter(|id| !by_id.contains_key(id.as_str()))
        .count();
    let lost_custom = tally
        .custom_ok
        .iter()
        .filter(|id| !by_id.contains_key(id.as_str()))
        .count();
    eprintln!(
        "chaos: {:?} with {kills} kills (seed {seed}); adds: {} plain and {} custom-id ({} of them idempotent) acknowledged, {} maybe applied ({} of them idempotent after a lost connection, {} after a command timeout), {} not applied, {} other errors; slowest add {:?}; {} rows; lost {} plain, {} custom; {duplicated} custom ids duplicated; {} jobs ran, {twice} more than once ({} after a broker recovered their expired lease, {} without); {} leases recovered",
        chaos,
        tally.plain_ok.len(),
        tally.custom_ok.len(),
        tally.idempotent_ok,
        tally.maybe,
        tally.idempotent_maybe,
        tally.idempotent_timeouts,
        tally.not_applied,
        tally.other.len(),
        tally.slowest,
        all.len(),
        lost_plain,
        lost_custom,
        runs.len(),
        twice - twice_unrecovered.len(),
        twice_unrecovered.len(),
        recovered.len(),
    );
    assert!(kills > 0, "a broker was killed");
    assert!(
        tally.other.is_empty(),
        "untyped failures: {:?}",
        tally.other
    );
    assert_eq!(lost_plain + lost_custom, 0, "acknowledged adds lost");
    assert_eq!(duplicated, 0, "custom ids duplicated");
    assert_eq!(
        tally.idempotent_maybe, 0,
        "idempotent adds left maybe applied by a lost connection while live brokers could \
         answer for them"
    );
    let acked = tally.plain_ok.len() + tally.custom_ok.len();
    assert!(
        all.len() >= acked && all.len() as u64 <= acked as u64 + tally.maybe,
        "{} rows for {acked} acknowledged adds and {} maybe applied",
        all.len(),
        tally.maybe
    );
    for (id, _, _) in &all {
        assert!(
            runs.get(id.as_str()).copied().unwrap_or(0) >= 1,
            "job {id} never ran"
        );
    }
    assert_eq!(runs.len(), all.len(), "no job ran that is not a row");
    assert!(
        twice_unrecovered.is_empty(),
        "{} jobs ran more than once with no expired lease recovered (failover ran them twice), e.g. {:?}",
        twice_unrecovered.len(),
        &twice_unrecovered[..twice_unrecovered.len().min(10)]
    );
    assert_eq!(
        twice, 0,
        "jobs ran more than once, each after its 30 s lock ran out before its settlement arrived"
    );
}
