//! `--fleet N[,N…]`: the throughput table on bunqueue's PostgreSQL multi-broker mode.
//!
//! One throwaway PostgreSQL (PostgreSQL's default durability: `fsync` and
//! `synchronous_commit` on) and as many bunqueue 2.9.5 brokers as the largest fleet asked for,
//! each with bunqueue's default lease and poll interval, all started before the first cell and
//! kept running to the end. A fleet of `n` means the producers spread over the first `n`
//! brokers; the others stay idle (each polls the database every 250 ms), so every fleet size
//! can be interleaved with every other in one run and their ratios are paired by repetition.
//!
//! How producers spread: the autobatch client talks to one broker, so the autobatch contender
//! holds one client per broker (each with its own connection and batcher) and deals the adds
//! round-robin — add `i` of a cell goes through client `i % n`. The pattern stays the caller's:
//! `join_all(100)` is still 100 adds in flight, 100/n per broker; sequential `await` is still one
//! add at a time (alternating brokers), so it cannot gain from more brokers. bunqueue's TS client
//! is measured the same way (bench.ts's `ports`: one `Queue` per broker, the same dealing).
//!
//! After each cell its jobs are counted through broker 0 — a broker sees the others' adds only
//! after its next poll, so the count is retried for up to [`AUDIT_TIMEOUT`] — and its queue is
//! obliterated.

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use autobatch_driver::{Client, ClientOptions, Error, JobOptions, Queue};
use autobatch_tests::{Fleet, FleetOptions, RawClient};
use autobatch_tokio::TokioRuntime;
use futures::future::join_all;
use futures::FutureExt;
use serde::Serialize;

use crate::cli::Batching;
use crate::cpu::{self, Threads};
use crate::machine::MachineInfo;
use crate::mode::Measure;
use crate::report::RunInfo;
use crate::run::{self, AfterCell, Measurements, NoCheck};
use crate::runtime_kind::RuntimeKind;
use crate::stats::Summary;
use crate::table::{compact, ratio, thousands, Align, Table};
use crate::workload::{waves, Cell, CellCost, Contender, Latency, Pattern};

/// How long the audit waits for broker 0 to see a cell's jobs.
pub const AUDIT_TIMEOUT: Duration = Duration::from_secs(30);

/// Start PostgreSQL and `brokers` brokers (see the module docs).
/// The PostgreSQL postmaster's pid, from its `postmaster.pid` (first line).
pub fn postmaster_pid(fleet: &Fleet) -> Option<u32> {
    let file = fleet.postgres().dir().join("data").join("postmaster.pid");
    std::fs::read_to_string(file)
        .ok()?
        .lines()
        .next()?
        .trim()
        .parse()
        .ok()
}

pub fn start(brokers: usize) -> io::Result<Fleet> {
    Fleet::start(FleetOptions::new(brokers))
}

/// The contender id of `base` (`autobatch-on`, `ts-off`, …) on `n` brokers.
pub fn id(base: &str, n: usize) -> String {
    format!("{base}.n{n}")
}

/// The payload of every add: `{i}`, as bench.ts sends.
#[derive(Serialize)]
struct Data {
    i: usize,
}

/// autobatch on tokio, one client per broker, adds dealt round-robin.
pub struct FleetAutobatch {
    rt: tokio::runtime::Runtime,
    clients: Vec<Client<TokioRuntime>>,
    batching: bool,
    frames: Option<u64>,
    cost: CellCost,
}

impl FleetAutobatch {
    /// One client per address, batching on (the default configuration) or off.
    pub fn connect(addrs: &[SocketAddr], batching: bool) -> io::Result<FleetAutobatch> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let mut clients = Vec::new();
        for a in addrs {
            let mut opts = ClientOptions::new(a.ip().to_string(), a.port());
            if !batching {
                opts = opts.batching(None);
            }
            let runtime = TokioRuntime::new(rt.handle().clone());
            clients.push(
                rt.block_on(Client::connect_with(runtime, opts))
                    .map_err(io::Error::other)?,
            );
        }
        Ok(FleetAutobatch {
            rt,
            clients,
            batching,
            frames: None,
            cost: CellCost::default(),
        })
    }

    async fn frames_sent(&self) -> u64 {
        let mut n = 0;
        for c in &self.clients {
            n += c.stats().await.session.frames_sent;
        }
        n
    }
}

/// `n` adds in `pattern`, add `i` through `queues[i % queues.len()]`; with `lat`, each add's
/// latency (from the start of its wave) is pushed onto it.
async fn adds(
    queues: &[Queue<TokioRuntime>],
    pattern: Pattern,
    n: usize,
    mut lat: Option<&mut Vec<Duration>>,
) -> Result<(), Error> {
    let m = queues.len();
    let waves: Box<dyn Iterator<Item = usize>> = match pattern {
        Pattern::Seq => Box::new(std::iter::repeat_n(1, n)),
        Pattern::All(w) => Box::new(waves(n, w)),
    };
    let mut i = 0;
    for k in waves {
        let start = Instant::now();
        let wave = (i..i + k).map(|i| {
            queues[i % m]
                .add("bench", &Data { i }, JobOptions::new())
                .map(|r| (r, Instant::now()))
        });
        for (r, done) in join_all(wave).await {
            r?;
            if let Some(lat) = lat.as_deref_mut() {
                lat.push(done - start);
            }
        }
        i += k;
    }
    Ok(())
}

impl Contender for FleetAutobatch {
    fn id(&self) -> String {
        let base = if self.batching {
            "autobatch-on"
        } else {
            "autobatch-off"
        };
        id(base, self.clients.len())
    }

    fn label(&self) -> String {
        let n = self.clients.len();
        format!(
            "autobatch {} (tokio), batching {}, {n} broker{}",
            env!("CARGO_PKG_VERSION"),
            if self.batching { "on" } else { "off" },
            if n == 1 { "" } else { "s" }
        )
    }

    fn run(&mut self, cell: &Cell) -> io::Result<Duration> {
        let queues: Vec<_> = self.clients.iter().map(|c| c.queue(&cell.queue)).collect();
        let mut lat = Vec::with_capacity(cell.adds);
        let (elapsed, frames, client_cpu) = self.rt.block_on(async {
            adds(&queues, cell.pattern, cell.warmup, None)
                .await
                .map_err(io::Error::other)?;
            let before = self.frames_sent().await;
            let cpu0 = Threads::Client.now();
            let t0 = Instant::now();
            adds(&queues, cell.pattern, cell.adds, Some(&mut lat))
                .await
                .map_err(io::Error::other)?;
            let elapsed = t0.elapsed();
            let client_cpu = cpu::delta(cpu0, Threads::Client.now());
            let after = self.frames_sent().await;
            io::Result::Ok((elapsed, after - before, client_cpu))
        })?;
        self.frames = Some(frames);
        self.cost = CellCost {
            client_cpu,
            latency: Latency::of(&mut lat),
        };
        Ok(elapsed)
    }

    fn last_frames(&self) -> Option<u64> {
        self.frames
    }

    fn last_cost(&self) -> CellCost {
        self.cost
    }
}

impl Drop for FleetAutobatch {
    fn drop(&mut self) {
        for c in &self.clients {
            self.rt.block_on(c.close());
        }
    }
}

/// Counts each cell's jobs through broker 0 (retrying while it catches up with the other
/// brokers) and obliterates its queue.
pub struct FleetAuditor {
    raw: RawClient,
}

impl FleetAuditor {
    /// A raw connection to `addr`.
    pub fn connect(addr: SocketAddr) -> io::Result<FleetAuditor> {
        Ok(FleetAuditor {
            raw: RawClient::connect(addr, None)?,
        })
    }

    fn jobs_in(&mut self, queue: &str) -> u64 {
        let c = self.raw.counts(queue);
        c.waiting + c.prioritized + c.delayed + c.active + c.paused + c.waiting_children
    }
}

impl AfterCell for FleetAuditor {
    fn after(&mut self, cell: &Cell, expected: Option<usize>) -> io::Result<()> {
        let Some(expected) = expected else {
            return Ok(());
        };
        let deadline = Instant::now() + AUDIT_TIMEOUT;
        loop {
            let found = self.jobs_in(&cell.queue);
            if found == expected as u64 {
                break;
            }
            if found > expected as u64 || Instant::now() >= deadline {
                return Err(io::Error::other(format!(
                    "queue {} holds {found} jobs after the cell (counted through broker 0), \
                     expected {expected}: adds were lost or duplicated",
                    cell.queue
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let queue = autobatch_driver::Value::from(cell.queue.as_str());
        self.raw
            .command("Obliterate", &[("queue", queue)])
            .map_err(io::Error::other)?;
        Ok(())
    }
}

/// The paired ratio `a / b` (same repetition).
fn paired(m: &Measurements, a: &str, b: &str, p: Pattern) -> Option<Summary> {
    crate::report::ratio_summary(m, a, b, p)
}

fn ops(s: Option<Summary>) -> String {
    match s {
        Some(s) if s.n > 1 => format!(
            "{} ({}–{})",
            thousands(s.median),
            compact(s.min),
            compact(s.max)
        ),
        Some(s) => thousands(s.median),
        None => "–".into(),
    }
}

fn times(s: Option<Summary>) -> String {
    s.map(|s| ratio(s.median)).unwrap_or_else(|| "–".into())
}

/// The fleet report: the throughput table for every fleet size, then how each client scales with
/// the brokers.
pub fn render(header: &str, sizes: &[usize], patterns: &[Pattern], m: &Measurements) -> String {
    let mut out = String::from(header);
    for &n in sizes {
        out.push_str(&format!("\n{}:\n", brokers(n)));
        out.push_str(&size_table(n, patterns, m));
    }
    let clients: Vec<(String, String)> = sizes
        .iter()
        .flat_map(|&n| {
            let b = brokers(n);
            [
                (id("autobatch-off", n), format!("autobatch off, {b}")),
                (id("autobatch-on", n), format!("autobatch on, {b}")),
                (id("ts-off", n), format!("TS client off, {b}")),
                (id("ts-on", n), format!("TS client on, {b}")),
            ]
        })
        .collect();
    if let Some(costs) = crate::report::render_costs(m, patterns, &clients) {
        out.push('\n');
        out.push_str(&costs);
        out.push_str("(server CPU: every broker and every PostgreSQL process)\n");
    }
    if sizes.len() > 1 {
        for client in ["autobatch-on", "autobatch-off", "ts-on", "ts-off"] {
            out.push_str(&format!(
                "\nScaling, {client} (ops/s; in brackets: ÷ {}, paired by rep):\n",
                brokers(sizes[0])
            ));
            out.push_str(&scaling_table(client, sizes, patterns, m));
        }
    }
    out.push_str(&format!(
        "\n{} cells in {:.2} s wall time\n",
        m.samples.len(),
        m.wall.as_secs_f64()
    ));
    out
}

/// `1 broker`, `2 brokers`, …
fn brokers(n: usize) -> String {
    format!("{n} broker{}", plural(n))
}

/// `""` for one, `"s"` for more.
fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// The throughput table of the fleet of `n`: autobatch batching off and on, and bunqueue's TS
/// client beside it.
fn size_table(n: usize, patterns: &[Pattern], m: &Measurements) -> String {
    let (off, on, ts_off, ts_on) = (
        id("autobatch-off", n),
        id("autobatch-on", n),
        id("ts-off", n),
        id("ts-on", n),
    );
    let mut t = Table::new(&[
        ("Pattern (ops/s)", Align::Left),
        ("autobatch off", Align::Right),
        ("autobatch on", Align::Right),
        ("Improvement", Align::Right),
        ("Adds per frame off / on", Align::Right),
        ("TS client off", Align::Right),
        ("TS client on", Align::Right),
        ("autobatch on ÷ TS on", Align::Right),
    ]);
    let per_frame = |id: &str, p: Pattern| {
        m.adds_per_frame(id, p)
            .map(|x| format!("{x:.1}"))
            .unwrap_or_else(|| "–".into())
    };
    for &p in patterns {
        t.row(vec![
            p.label(),
            ops(m.summary(&off, p)),
            ops(m.summary(&on, p)),
            times(paired(m, &on, &off, p)),
            format!("{} / {}", per_frame(&off, p), per_frame(&on, p)),
            ops(m.summary(&ts_off, p)),
            ops(m.summary(&ts_on, p)),
            times(paired(m, &on, &ts_on, p)),
        ]);
    }
    t.render()
}

/// How `client` scales: its ops/s on every fleet size, each beside its ratio to the smallest.
fn scaling_table(client: &str, sizes: &[usize], patterns: &[Pattern], m: &Measurements) -> String {
    let base = sizes[0];
    let heads: Vec<String> = sizes.iter().map(|&n| brokers(n)).collect();
    let mut header: Vec<(&str, Align)> = vec![("Pattern", Align::Left)];
    header.extend(heads.iter().map(|h| (h.as_str(), Align::Right)));
    let mut t = Table::new(&header);
    for &p in patterns {
        let mut row = vec![p.label()];
        for &n in sizes {
            let s = m.summary(&id(client, n), p);
            row.push(if n == base {
                ops(s).split(' ').next().unwrap_or("–").to_owned()
            } else {
                format!(
                    "{} ({})",
                    s.map(|s| thousands(s.median)).unwrap_or_else(|| "–".into()),
                    times(paired(m, &id(client, n), &id(client, base), p))
                )
            });
        }
        t.row(row);
    }
    t.render()
}

/// `--fleet`'s run: starts PostgreSQL and as many brokers as the largest of `sizes`, runs
/// `measure`'s cells for every fleet size, prints the fleet report and writes the JSON
/// document asked for; `machine` was read when the run started.
pub fn main(sizes: &[usize], measure: &Measure, machine: MachineInfo) -> io::Result<()> {
    let Some(&most) = sizes.iter().max() else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "--fleet needs at least one broker count above 0",
        ));
    };
    if measure.runtimes != [RuntimeKind::Tokio] {
        eprintln!("autobatch-bench: --fleet measures autobatch on tokio only");
    }
    eprintln!(
        "starting PostgreSQL and {most} bunqueue {} broker{} …",
        autobatch_tests::install::BUNQUEUE_VERSION,
        plural(most)
    );
    let fleet = start(most)?;
    let addrs = fleet.addrs();
    let mut contenders = contenders(sizes, measure.batching, &addrs)?;
    let mut auditor: Box<dyn AfterCell> = if measure.no_verify {
        Box::new(NoCheck)
    } else {
        Box::new(FleetAuditor::connect(addrs[0])?)
    };
    let measurements = run::run(
        &measure.plan,
        &mut contenders,
        auditor.as_mut(),
        Some(&server_threads(&fleet, most)),
    )?;
    drop(contenders);
    let info = RunInfo {
        machine,
        server: describe(&fleet, most),
        runtime: RuntimeKind::Tokio.name().into(),
        runtimes: vec![RuntimeKind::Tokio.name().into()],
        plan: measure.plan.clone(),
        compare: false,
        smoke: measure.smoke,
        tls: None,
    };
    let header = header(&info);
    print!(
        "{}",
        render(&header, sizes, &info.plan.patterns, &measurements)
    );
    if let Some(path) = &measure.output.json {
        write_json(path, &info, sizes, &measurements)?;
    }
    if measure.output.svg.is_some() {
        eprintln!("autobatch-bench: --svg is not drawn for --fleet");
    }
    drop(fleet);
    Ok(())
}

/// For every fleet size, autobatch then bunqueue's TS client, with each batching setting.
fn contenders(
    sizes: &[usize],
    batching: Batching,
    addrs: &[SocketAddr],
) -> io::Result<Vec<Box<dyn Contender>>> {
    let mut contenders: Vec<Box<dyn Contender>> = Vec::new();
    for &n in sizes {
        for &on in batching.modes() {
            contenders.push(Box::new(FleetAutobatch::connect(&addrs[..n], on)?));
        }
        for &on in batching.modes() {
            contenders.push(Box::new(crate::ts::TsClient::fleet(&addrs[..n], on)?));
        }
    }
    Ok(contenders)
}

/// The server is the brokers and the database: every backend PostgreSQL runs for them.
fn server_threads(fleet: &Fleet, brokers: usize) -> Threads {
    let mut pids: Vec<u32> = (0..brokers).filter_map(|i| fleet.broker(i).pid()).collect();
    pids.extend(postmaster_pid(fleet));
    Threads::Trees(pids)
}

/// The fleet in words, for the report and the JSON document.
fn describe(fleet: &Fleet, brokers: usize) -> String {
    format!(
        "PostgreSQL {} (fsync on, loopback) with {brokers} bunqueue {} broker{} (bun {}, rate limit \
         lifted, lease and poll interval bunqueue's defaults); a fleet of N = producers spread \
         round-robin over the first N brokers, one connection per broker",
        fleet.postgres().version(),
        autobatch_tests::install::BUNQUEUE_VERSION,
        plural(brokers),
        autobatch_tests::install::BUN_VERSION,
    )
}

/// The lines above the fleet report's tables: what ran, where, and how big.
fn header(info: &RunInfo) -> String {
    format!(
        "autobatch-bench: add() throughput on bunqueue's PostgreSQL fleet\n\
         server:   {}\n\
         clients:  autobatch on tokio (one client per broker) and bunqueue's TS client (one Queue \
         per broker), add i through broker i % N\n\
         machine:  {}\n\
         versions: {}\n\
         cells:    {} timed adds each (after {} warm-up adds), {} rep{} interleaved{}; ops/s = \
         median (min–max over reps); ratios = medians of per-rep ratios between cells run back \
         to back\n",
        info.server,
        info.machine.one_line(),
        info.machine.versions_line(),
        thousands(info.plan.adds as f64),
        info.plan.warmup,
        info.plan.reps,
        plural(info.plan.reps),
        if info.smoke {
            " (SMOKE RUN: too small to mean anything)"
        } else {
            ""
        }
    )
}

/// The `--json` document of a fleet run: the common document, marked as a fleet's.
fn write_json(
    path: &std::path::Path,
    info: &RunInfo,
    sizes: &[usize],
    measurements: &Measurements,
) -> io::Result<()> {
    let mut doc = crate::report::to_json(info, measurements);
    doc["mode"] = serde_json::json!("fleet");
    doc["fleet_sizes"] = serde_json::json!(sizes);
    std::fs::write(path, serde_json::to_string_pretty(&doc)? + "\n")?;
    eprintln!("wrote {}", path.display());
    Ok(())
}
