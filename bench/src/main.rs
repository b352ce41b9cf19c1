//! `autobatch-bench`: add() throughput, batching off and on, measured the way bunqueue's
//! auto-batching write-up (<https://bunqueue.dev>) measures it.
//!
//! With no arguments it starts the embedded broker in-process and measures the write-up's four
//! patterns (sequential `await add`, and waves of 10, 50 and 100 concurrent adds joined with
//! `join_all`) with autobatch's batching off and on, interleaved, 5 repetitions each, and
//! prints the throughput table with medians and spreads. `--compare` runs the same patterns against
//! one real bunqueue 2.9.5 server with autobatch, bunqueue's own TS client and the official
//! Rust client side by side, plus the loopback ping-pong floor. Every run without `--tls` also
//! measures, beside each concurrent cell, the server's ceiling and the client floor (core's
//! encoder and decoder on a blocking socket), and judges the client's CPU per add against the
//! latter; `--client-only` leaves all of those out, for profiling. `--tls` runs the
//! throughput table over TLS and over plain TCP side by side, against twin embedded brokers (one serving
//! TLS with a certificate made at start). `--fleet 1,2,3` runs them on bunqueue's PostgreSQL
//! multi-broker mode (a throwaway PostgreSQL and up to three brokers) with bunqueue's TS
//! client beside autobatch. See `--help`.
#![forbid(unsafe_code)]

mod autobatch;
mod ceiling;
mod chart;
mod client_floor;
mod cpu;
mod fleet;
mod floor;
mod ids;
mod machine;
mod official;
mod render;
mod render_error;
mod report;
mod run;
mod runtime_kind;
mod stats;
mod svg;
mod table;
mod ts;
mod web;
mod workload;

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, ValueEnum};

use crate::official::{Auditor, Official};
use crate::report::RunInfo;
use crate::run::Plan;
use crate::runtime_kind::RuntimeKind;
use crate::workload::{Contender, Pattern};

/// add() throughput of autobatch with batching off and on, the four patterns of bunqueue's
/// auto-batching write-up.
///
/// Without arguments: the embedded broker in-process, the four patterns, 5 interleaved
/// repetitions, the table on stdout and progress on stderr.
#[derive(Debug, Parser)]
#[command(name = "autobatch-bench", version, about, long_about = None)]
struct Args {
    /// Measure against this server (HOST:PORT, e.g. a real bunqueue) instead of starting one.
    #[arg(long, value_name = "HOST:PORT")]
    server: Option<String>,

    /// Runtime adapter(s) for the autobatch client, comma-separated: with several, the same
    /// client runs on each, interleaved, and a table puts them side by side (the goals and
    /// the throughput table are the first one's).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "tokio")]
    runtime: Vec<RuntimeKind>,

    /// Timed adds per cell [default: 20000; 5000 with --compare; 500 with --fleet; 300 with
    /// --smoke].
    #[arg(long, value_name = "N")]
    adds: Option<usize>,

    /// Repetitions of every cell [default: 5; 3 with --fleet; 1 with --smoke].
    #[arg(long, value_name = "N")]
    reps: Option<usize>,

    /// Untimed warm-up adds before each cell [default: adds/20, 50..=1000].
    #[arg(long, value_name = "N")]
    warmup: Option<usize>,

    /// Patterns to run, comma-separated (seq, all10, all50, all100 or any allN).
    #[arg(long, value_delimiter = ',', default_value = "seq,all10,all50,all100")]
    patterns: Vec<String>,

    /// Write machine-readable results (samples, summaries, ratios, machine, date) here.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,

    /// Write an SVG bar chart of the table here.
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,

    /// A quick run to check everything works (a few hundred adds per cell, 1 rep): what CI runs.
    #[arg(long)]
    smoke: bool,

    /// Side by side against one real bunqueue 2.9.5 server: autobatch, bunqueue's TS client
    /// and the official Rust client `bunqueue-client`, plus the ping-pong floor.
    #[arg(long)]
    compare: bool,

    /// With --compare: bunqueue's storage, memory (its default) or SQLite (a database file in
    /// a temporary directory, removed afterwards).
    #[arg(long, value_enum, default_value_t = Storage::Memory, requires = "compare")]
    storage: Storage,

    /// bunqueue's PostgreSQL fleet: start a throwaway PostgreSQL (`initdb` from
    /// /usr/lib/postgresql/15/bin, or $AUTOBATCH_PG_BIN) and as many bunqueue brokers as the
    /// largest size, then measure autobatch and bunqueue's TS client with their producers
    /// spread over the first N brokers, for every N given (e.g. `--fleet 1,2,3`).
    #[arg(long, value_name = "N,…", value_delimiter = ',', conflicts_with_all = ["server", "compare"])]
    fleet: Option<Vec<usize>>,

    /// tokio runtimes only: each add of a wave runs in its own spawned task (joined), as
    /// concurrent request handlers add, instead of `join_all` in one task.
    #[arg(long)]
    spawn_adds: bool,

    /// Which batching modes to run (one mode alone is for profiling; ratios need both).
    #[arg(long, value_enum, default_value_t = Batching::Both)]
    batching: Batching,

    /// Skip counting each cell's jobs on the server afterwards (and emptying its queue).
    #[arg(long)]
    no_verify: bool,

    /// The cost of TLS: the throughput table over plain TCP and over TLS (rustls), interleaved,
    /// against two embedded brokers of the same configuration in this process, one serving
    /// TLS with a certificate made at start. Not with --compare or --server.
    #[arg(long, conflicts_with_all = ["compare", "server"])]
    tls: bool,

    /// Only the autobatch contenders, for profiling (`perf record`): no TS client, no official
    /// client, no floors, no server ceiling, no client floor, so no blocking reads of other
    /// loops run on the bench thread between autobatch's cells. Targets that compare with those
    /// are left out. Add --no-verify to leave out the job count after each cell too.
    #[arg(long, conflicts_with = "fleet")]
    client_only: bool,

    /// Run nothing: print the tables and goals of an earlier run's JSON document (`--json`) as
    /// Markdown, as `scripts/perf-docs.sh` puts them into docs/performance.md.
    #[arg(long, value_name = "FILE.json", exclusive = true)]
    render: Option<PathBuf>,

    /// Run nothing: print README's headline table (every client's adds per second, and
    /// autobatch's ratio to the TS client) from a `--compare` run's JSON document.
    #[arg(long, value_name = "FILE.json", exclusive = true)]
    render_headline: Option<PathBuf>,

    /// Run nothing: print the SVG chart of an earlier run's JSON document (`--json`), as
    /// `scripts/perf-docs.sh` writes bench/results/NAME.svg from bench/results/NAME.json.
    #[arg(long, value_name = "FILE.json", exclusive = true)]
    render_svg: Option<PathBuf>,

    /// The write-up's web endpoint, `POST /orders` with one add per request, under `wrk`: the
    /// web_orders example on tokio multi_thread and current_thread and, as the peer, Bun with
    /// bunqueue's TS client, batching off and on, beside the same handler without the add.
    /// Against the embedded broker, or bunqueue 2.9.5 with --compare. See docs/web.md.
    #[arg(long, conflicts_with_all = ["fleet", "tls", "server"])]
    web: bool,

    /// With --web: only these web servers, comma-separated [default: all three].
    #[arg(long, value_enum, value_delimiter = ',', requires = "web")]
    web_stacks: Vec<web::Stack>,

    /// With --web: only these connection counts, comma-separated [default: 1,10,100,1000;
    /// 1,10 with --smoke].
    #[arg(long, value_delimiter = ',', value_name = "N", requires = "web")]
    web_connections: Vec<usize>,
}

/// `--storage`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Storage {
    /// In memory.
    Memory,
    /// SQLite, on disk.
    Sqlite,
}

/// `--batching`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Batching {
    /// Batching off and on, interleaved.
    Both,
    /// Batching off only.
    Off,
    /// Batching on only.
    On,
}

impl Batching {
    fn modes(self) -> &'static [bool] {
        match self {
            Batching::Both => &[false, true],
            Batching::Off => &[false],
            Batching::On => &[true],
        }
    }
}

/// The server measured against; kept alive for the whole run.
enum Server {
    Embedded(autobatch::Broker),
    Bunqueue(Box<autobatch_tests::BunqueueServer>, Storage),
    External(SocketAddr, String),
}

impl Server {
    fn addr(&self) -> SocketAddr {
        match self {
            Server::Embedded(b) => b.addr(),
            Server::Bunqueue(s, _) => s.addr(),
            Server::External(a, _) => *a,
        }
    }

    /// The threads whose CPU time is the server's, where they can be read.
    fn threads(&self) -> Option<cpu::Threads> {
        match self {
            Server::Embedded(_) => Some(cpu::Threads::EmbeddedBroker),
            Server::Bunqueue(s, _) => s.pid().map(|pid| cpu::Threads::Processes(vec![pid])),
            Server::External(..) => None,
        }
    }

    fn describe(&self) -> String {
        match self {
            Server::Embedded(b) => format!(
                "embedded autobatch-broker (in-process, memory) at {}",
                b.addr()
            ),
            Server::Bunqueue(s, storage) => format!(
                "bunqueue {} (bun {}, {}, rate limit lifted) at {}",
                autobatch_tests::install::BUNQUEUE_VERSION,
                autobatch_tests::install::BUN_VERSION,
                match storage {
                    Storage::Memory => "memory",
                    Storage::Sqlite => "SQLite",
                },
                s.addr()
            ),
            Server::External(a, name) => format!("external server {name} ({a})"),
        }
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    match real_main(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("autobatch-bench: error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn resolve(s: &str) -> io::Result<SocketAddr> {
    s.to_socket_addrs()?.next().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{s} resolves to no address"),
        )
    })
}

fn real_main(args: Args) -> io::Result<()> {
    type Render = fn(&serde_json::Value) -> Result<String, render::RenderError>;
    let rendering: Option<(&PathBuf, Render)> =
        match (&args.render, &args.render_headline, &args.render_svg) {
            (Some(path), _, _) => Some((path, render::markdown)),
            (_, Some(path), _) => Some((path, render::headline)),
            (_, _, Some(path)) => Some((path, render::svg)),
            _ => None,
        };
    if let Some((path, render)) = rendering {
        let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(path)?)?;
        let md = render(&doc).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: {e}", path.display()),
            )
        })?;
        print!("{md}");
        return Ok(());
    }
    let mut patterns = Vec::new();
    for p in &args.patterns {
        patterns.push(Pattern::parse(p.trim()).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("unknown pattern {p:?} (expected seq or allN)"),
            )
        })?);
    }
    let adds = args
        .adds
        .unwrap_or(match (args.smoke, args.compare, args.fleet.is_some()) {
            (true, _, _) => 300,
            (false, true, _) => 5_000,
            (false, false, true) => 500,
            (false, false, false) => 20_000,
        })
        .max(1);
    let reps = args
        .reps
        .unwrap_or(match (args.smoke, args.fleet.is_some()) {
            (true, _) => 1,
            (false, true) => 3,
            (false, false) => 5,
        })
        .max(1);
    let warmup = args.warmup.unwrap_or((adds / 20).clamp(50, 1000));
    let plan = Plan {
        patterns,
        adds,
        warmup,
        reps,
        queue_prefix: "autobatch-bench".into(),
    };
    let machine = machine::MachineInfo::collect();
    if args.web {
        let mut plan = web::WebPlan::new(args.smoke, args.reps);
        if !args.web_stacks.is_empty() {
            plan.stacks = args.web_stacks.clone();
        }
        if !args.web_connections.is_empty() {
            plan.connections = args.web_connections.clone();
        }
        let (json, svg) = (args.json.as_deref(), args.svg.as_deref());
        return web::main(&plan, args.compare, json, svg, &machine);
    }
    if let Some(sizes) = &args.fleet {
        return fleet_main(&args, sizes, plan, machine);
    }

    let mut db_dir = DbDir::default();
    let server = match (&args.server, args.compare) {
        (Some(s), _) => Server::External(resolve(s)?, s.clone()),
        (None, true) => {
            eprintln!(
                "starting bunqueue {} …",
                autobatch_tests::install::BUNQUEUE_VERSION
            );
            let opts = match args.storage {
                Storage::Memory => autobatch_tests::ServerOptions::memory(),
                Storage::Sqlite => autobatch_tests::ServerOptions::sqlite(db_dir.path()?),
            };
            Server::Bunqueue(
                Box::new(autobatch_tests::BunqueueServer::start(opts)?),
                args.storage,
            )
        }
        (None, false) => Server::Embedded(autobatch::Broker::start()?),
    };
    let addr = server.addr();
    // `--tls`: a twin broker serving TLS, with a CA and certificate made now.
    let tls = if args.tls {
        let pki = autobatch_tests::TestPki::generate();
        let broker = autobatch::Broker::start_tls(pki.broker_tls())?;
        let client = autobatch_driver::TlsOptions::new()
            .roots(autobatch_driver::TlsRoots::None)
            .ca_pem(pki.ca_pem().as_bytes().to_vec());
        Some((pki, broker, client))
    } else {
        None
    };

    let runtimes = runtimes(&args.runtime);
    if args.spawn_adds
        && runtimes
            .iter()
            .any(|r| !matches!(r, RuntimeKind::Tokio | RuntimeKind::TokioMultiThread))
    {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "--spawn-adds is for --runtime tokio or tokio-multi-thread",
        ));
    }
    let spawn = args.spawn_adds;
    let mut contenders: Vec<Box<dyn Contender>> = Vec::new();
    for &on in args.batching.modes() {
        contenders.push(autobatch::contender(runtimes[0], addr, on, None, spawn)?);
        if let Some((_, broker, client)) = &tls {
            contenders.push(autobatch::contender(
                runtimes[0],
                broker.addr(),
                on,
                Some(client.clone()),
                spawn,
            )?);
        }
        // Further runtimes: the same client, as `autobatch-on:smol` and so on.
        for &rt in &runtimes[1..] {
            let c = autobatch::contender(rt, addr, on, None, spawn)?;
            contenders.push(Box::new(workload::Tagged::new(c, rt.name())));
        }
    }
    if args.compare && !args.client_only {
        for &on in args.batching.modes() {
            contenders.push(Box::new(ts::TsClient::new(addr, on)?));
        }
        contenders.push(Box::new(Official::connect(addr)?));
    }
    if tls.is_none() && !args.client_only {
        contenders.push(Box::new(floor::PingFloor::ping(addr)?));
        contenders.push(Box::new(floor::PingFloor::push(addr)?));
        contenders.push(Box::new(ceiling::Ceiling::connect(
            addr,
            ceiling::Shape::Pipelined,
        )?));
        contenders.push(Box::new(ceiling::Ceiling::connect(
            addr,
            ceiling::Shape::Waves,
        )?));
        contenders.push(Box::new(client_floor::ClientFloor::connect(
            addr,
            client_floor::Framing::Batched,
        )?));
        if args.batching.modes().contains(&false) {
            // The yardstick of batching off, beside its large waves only.
            contenders.push(Box::new(client_floor::ClientFloor::connect(
                addr,
                client_floor::Framing::Unbatched,
            )?));
        }
    }

    let mut auditor: Box<dyn run::AfterCell> = match &tls {
        _ if args.no_verify => Box::new(NoCheck),
        None => Box::new(Auditor::connect(addr)?),
        Some((pki, broker, _)) => Box::new(run::TlsRouted {
            plain: Auditor::connect(addr)?,
            tls: run::TlsAuditor::connect(broker.addr(), pki.ca_pem().as_bytes())?,
        }),
    };
    let measurements = run::run(
        &plan,
        &mut contenders,
        auditor.as_mut(),
        server.threads().as_ref(),
    )?;
    drop(contenders);

    let info = RunInfo {
        machine,
        server: server.describe(),
        runtime: runtimes[0].name().into(),
        runtimes: runtimes.iter().map(|r| r.name().to_owned()).collect(),
        plan,
        compare: args.compare,
        tls: tls.as_ref().map(|(_, broker, _)| {
            format!(
                "a twin embedded autobatch-broker serving TLS at {} (rustls, ring; TLS 1.3; \
                 ECDSA P-256 certificate made at start)",
                broker.addr()
            )
        }),
        smoke: args.smoke,
    };
    print!("{}", report::render(&info, &measurements));
    if let Some(path) = &args.json {
        let doc = report::to_json(&info, &measurements);
        std::fs::write(path, serde_json::to_string_pretty(&doc)? + "\n")?;
        eprintln!("wrote {}", path.display());
    }
    if let Some(path) = &args.svg {
        let doc = report::to_json(&info, &measurements);
        let chart = svg::render(&doc)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
        std::fs::write(path, chart)?;
        eprintln!("wrote {}", path.display());
    }
    drop(server);
    drop(tls);
    drop(db_dir);
    Ok(())
}

/// `--storage sqlite`'s temporary directory, made on first use and removed on drop.
#[derive(Default)]
struct DbDir(Option<PathBuf>);

impl DbDir {
    /// The database file's path inside the directory.
    fn path(&mut self) -> io::Result<PathBuf> {
        let dir =
            std::env::temp_dir().join(format!("autobatch-bench-sqlite-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        self.0 = Some(dir.clone());
        Ok(dir.join("bunqueue.db"))
    }
}

impl Drop for DbDir {
    fn drop(&mut self) {
        if let Some(dir) = self.0.take() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// `--fleet`: the throughput table on bunqueue's PostgreSQL fleet (see the `fleet` module).
fn fleet_main(
    args: &Args,
    sizes: &[usize],
    plan: Plan,
    machine: machine::MachineInfo,
) -> io::Result<()> {
    let mut sizes: Vec<usize> = sizes.iter().copied().filter(|n| *n > 0).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let Some(&most) = sizes.last() else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "--fleet needs at least one broker count above 0",
        ));
    };
    if args.runtime != [RuntimeKind::Tokio] {
        eprintln!("autobatch-bench: --fleet measures autobatch on tokio only");
    }
    eprintln!(
        "starting PostgreSQL and {most} bunqueue {} broker{} …",
        autobatch_tests::install::BUNQUEUE_VERSION,
        if most == 1 { "" } else { "s" }
    );
    let fleet = fleet::start(most)?;
    let addrs = fleet.addrs();
    let mut contenders: Vec<Box<dyn Contender>> = Vec::new();
    for &n in &sizes {
        for &on in args.batching.modes() {
            contenders.push(Box::new(fleet::FleetAutobatch::connect(&addrs[..n], on)?));
        }
        for &on in args.batching.modes() {
            contenders.push(Box::new(ts::TsClient::fleet(&addrs[..n], on)?));
        }
    }
    let mut auditor: Box<dyn run::AfterCell> = if args.no_verify {
        Box::new(NoCheck)
    } else {
        Box::new(fleet::FleetAuditor::connect(addrs[0])?)
    };
    // The server is the brokers and the database: every backend PostgreSQL runs for them.
    let mut server_pids: Vec<u32> = (0..most).filter_map(|i| fleet.broker(i).pid()).collect();
    server_pids.extend(fleet::postmaster_pid(&fleet));
    let measurements = run::run(
        &plan,
        &mut contenders,
        auditor.as_mut(),
        Some(&cpu::Threads::Trees(server_pids)),
    )?;
    drop(contenders);

    let server = format!(
        "PostgreSQL {} (fsync on, loopback) with {most} bunqueue {} broker{} (bun {}, rate limit \
         lifted, lease and poll interval bunqueue's defaults); a fleet of N = producers spread \
         round-robin over the first N brokers, one connection per broker",
        fleet.postgres().version(),
        autobatch_tests::install::BUNQUEUE_VERSION,
        if most == 1 { "" } else { "s" },
        autobatch_tests::install::BUN_VERSION,
    );
    let info = RunInfo {
        machine,
        server: server.clone(),
        runtime: RuntimeKind::Tokio.name().into(),
        runtimes: vec![RuntimeKind::Tokio.name().into()],
        plan,
        compare: false,
        smoke: args.smoke,
        tls: None,
    };
    let header = format!(
        "autobatch-bench: add() throughput on bunqueue's PostgreSQL fleet\n\
         server:   {server}\n\
         clients:  autobatch on tokio (one client per broker) and bunqueue's TS client (one Queue \
         per broker), add i through broker i % N\n\
         machine:  {}\n\
         versions: {}\n\
         cells:    {} timed adds each (after {} warm-up adds), {} rep{} interleaved{}; ops/s = \
         median (min–max over reps); ratios = medians of per-rep ratios between cells run back \
         to back\n",
        info.machine.one_line(),
        info.machine.versions_line(),
        crate::table::thousands(info.plan.adds as f64),
        info.plan.warmup,
        info.plan.reps,
        if info.plan.reps == 1 { "" } else { "s" },
        if info.smoke {
            " (SMOKE RUN: too small to mean anything)"
        } else {
            ""
        }
    );
    print!(
        "{}",
        fleet::render(&header, &sizes, &info.plan.patterns, &measurements)
    );
    if let Some(path) = &args.json {
        let mut doc = report::to_json(&info, &measurements);
        doc["mode"] = serde_json::json!("fleet");
        doc["fleet_sizes"] = serde_json::json!(sizes);
        std::fs::write(path, serde_json::to_string_pretty(&doc)? + "\n")?;
        eprintln!("wrote {}", path.display());
    }
    if args.svg.is_some() {
        eprintln!("autobatch-bench: --svg is not drawn for --fleet");
    }
    drop(fleet);
    Ok(())
}

/// `--runtime`'s list without repeats, in the order given (never empty: clap's default).
fn runtimes(given: &[RuntimeKind]) -> Vec<RuntimeKind> {
    let mut out: Vec<RuntimeKind> = Vec::new();
    for &r in given {
        if !out.contains(&r) {
            out.push(r);
        }
    }
    if out.is_empty() {
        out.push(RuntimeKind::Tokio);
    }
    out
}

/// `--no-verify`.
struct NoCheck;

impl run::AfterCell for NoCheck {
    fn after(&mut self, _: &workload::Cell, _: Option<usize>) -> io::Result<()> {
        Ok(())
    }
}
