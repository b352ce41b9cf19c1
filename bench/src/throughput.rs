//! The throughput table's run, [`Table`]: the main job against the embedded broker or
//! `--server`, `--compare` beside bunqueue's own clients, and `--tls` against twin embedded
//! brokers. Starts the server, lines up the contenders, runs the cells, prints the report
//! and writes the files asked for.

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;

use crate::cli::Storage;
use crate::machine::MachineInfo;
use crate::mode::{Measure, Output, Table};
use crate::official::{Auditor, Official};
use crate::report::RunInfo;
use crate::run::{self, Measurements};
use crate::workload::{self, Contender};
use crate::{autobatch, ceiling, client_floor, cpu, floor, report, svg, ts};

/// Runs `table` with `measure`'s sizes; `machine` was read when the run started.
pub fn main(table: &Table, measure: &Measure, machine: MachineInfo) -> io::Result<()> {
    let mut db_dir = DbDir::default();
    let server = Server::start(table, &mut db_dir)?;
    let tls = match table {
        Table::Tls => Some(TwinTls::start()?),
        _ => None,
    };
    let addr = server.addr();
    let compare = matches!(table, Table::Compare { .. });
    let mut contenders = autobatch_contenders(measure, addr, tls.as_ref(), compare)?;
    if compare && !measure.client_only {
        contenders.extend(peer_contenders(measure, addr)?);
    }
    if tls.is_none() && !measure.client_only {
        contenders.extend(yardsticks(measure, addr)?);
    }
    let mut auditor = auditor(measure, addr, tls.as_ref())?;
    let measurements = run::run(
        &measure.plan,
        &mut contenders,
        auditor.as_mut(),
        server.threads().as_ref(),
    )?;
    drop(contenders);
    let info = RunInfo {
        machine,
        server: server.describe(),
        runtime: measure.runtimes[0].name().into(),
        runtimes: measure.runtimes.iter().map(|r| r.name().into()).collect(),
        plan: measure.plan.clone(),
        compare,
        tls: tls.as_ref().map(TwinTls::describe),
        smoke: measure.smoke,
    };
    report_and_write(&info, &measurements, &measure.output)?;
    // The database directory outlives the server that writes into it.
    drop(server);
    drop(tls);
    drop(db_dir);
    Ok(())
}

/// The server measured against; kept alive for the whole run.
enum Server {
    /// The embedded broker, in this process.
    Embedded(autobatch::Broker),
    /// bunqueue 2.9.5, started for `--compare`, with its storage.
    Bunqueue(Box<autobatch_tests::BunqueueServer>, Storage),
    /// `--server`: its address and the name it was given by.
    External(SocketAddr, String),
}

impl Server {
    /// `--server`'s, bunqueue started for `--compare`, or the embedded broker.
    fn start(table: &Table, db_dir: &mut DbDir) -> io::Result<Server> {
        match table {
            Table::Main { server: Some(s) }
            | Table::Compare {
                server: Some(s), ..
            } => Ok(Server::External(resolve(s)?, s.clone())),
            Table::Compare {
                server: None,
                storage,
            } => Server::start_bunqueue(*storage, db_dir),
            Table::Main { server: None } | Table::Tls => {
                Ok(Server::Embedded(autobatch::Broker::start()?))
            }
        }
    }

    /// bunqueue 2.9.5 with `storage`, its SQLite file (if any) in `db_dir`.
    fn start_bunqueue(storage: Storage, db_dir: &mut DbDir) -> io::Result<Server> {
        eprintln!(
            "starting bunqueue {} …",
            autobatch_tests::install::BUNQUEUE_VERSION
        );
        let opts = match storage {
            Storage::Memory => autobatch_tests::ServerOptions::memory(),
            Storage::Sqlite => autobatch_tests::ServerOptions::sqlite(db_dir.path()?),
        };
        Ok(Server::Bunqueue(
            Box::new(autobatch_tests::BunqueueServer::start(opts)?),
            storage,
        ))
    }

    /// Where the contenders connect.
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

    /// The server in words, for the report and the JSON document.
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

/// `--server`'s `HOST:PORT`, resolved to its first address.
fn resolve(s: &str) -> io::Result<SocketAddr> {
    s.to_socket_addrs()?.next().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{s} resolves to no address"),
        )
    })
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

/// `--tls`'s twin broker serving TLS, with a CA and certificate made at start, and the
/// client's options that trust that CA alone.
struct TwinTls {
    /// The CA and the broker's certificate.
    pki: autobatch_tests::TestPki,
    /// The broker serving TLS.
    broker: autobatch::Broker,
    /// The client's TLS options.
    client: autobatch_driver::TlsOptions,
}

impl TwinTls {
    /// Makes the CA and certificate and starts the broker.
    fn start() -> io::Result<TwinTls> {
        let pki = autobatch_tests::TestPki::generate();
        let broker = autobatch::Broker::start_tls(pki.broker_tls())?;
        let client = autobatch_driver::TlsOptions::new()
            .roots(autobatch_driver::TlsRoots::None)
            .ca_pem(pki.ca_pem().as_bytes().to_vec());
        Ok(TwinTls {
            pki,
            broker,
            client,
        })
    }

    /// The TLS broker in words, for the report and the JSON document.
    fn describe(&self) -> String {
        format!(
            "a twin embedded autobatch-broker serving TLS at {} (rustls, ring; TLS 1.3; \
             ECDSA P-256 certificate made at start)",
            self.broker.addr()
        )
    }
}

/// autobatch with each batching setting: on the first runtime, over TLS beside it with
/// `--tls`, then on every further runtime, tagged with its name (`autobatch-on:smol`). With
/// `--compare`, batching on with idempotent adds beside it too, so that the report says what
/// the option costs.
fn autobatch_contenders(
    measure: &Measure,
    addr: SocketAddr,
    tls: Option<&TwinTls>,
    compare: bool,
) -> io::Result<Vec<Box<dyn Contender>>> {
    let first = measure.runtimes[0];
    let setup = |addr, batching| autobatch::Setup {
        addr,
        batching,
        idempotent: false,
        tls: None,
        spawn: measure.spawn_adds,
    };
    let mut contenders: Vec<Box<dyn Contender>> = Vec::new();
    for &on in measure.batching.modes() {
        contenders.push(autobatch::contender(first, setup(addr, on))?);
        if on && compare {
            let idempotent = autobatch::Setup {
                idempotent: true,
                ..setup(addr, on)
            };
            contenders.push(autobatch::contender(first, idempotent)?);
        }
        if let Some(tls) = tls {
            let over_tls = autobatch::Setup {
                tls: Some(tls.client.clone()),
                ..setup(tls.broker.addr(), on)
            };
            contenders.push(autobatch::contender(first, over_tls)?);
        }
        for &rt in &measure.runtimes[1..] {
            let c = autobatch::contender(rt, setup(addr, on))?;
            contenders.push(Box::new(workload::Tagged::new(c, rt.name())));
        }
    }
    Ok(contenders)
}

/// `--compare`'s peers: bunqueue's TS client with each batching setting, and the official
/// Rust client.
fn peer_contenders(measure: &Measure, addr: SocketAddr) -> io::Result<Vec<Box<dyn Contender>>> {
    let mut contenders: Vec<Box<dyn Contender>> = Vec::new();
    for &on in measure.batching.modes() {
        contenders.push(Box::new(ts::TsClient::new(addr, on)?));
    }
    contenders.push(Box::new(Official::connect(addr)?));
    Ok(contenders)
}

/// The yardsticks beside the clients: the ping-pong floors, the server's ceilings and the
/// client floors.
fn yardsticks(measure: &Measure, addr: SocketAddr) -> io::Result<Vec<Box<dyn Contender>>> {
    let mut contenders: Vec<Box<dyn Contender>> = vec![
        Box::new(floor::PingFloor::ping(addr)?),
        Box::new(floor::PingFloor::push(addr)?),
        Box::new(ceiling::Ceiling::connect(addr, ceiling::Shape::Pipelined)?),
        Box::new(ceiling::Ceiling::connect(addr, ceiling::Shape::Waves)?),
        Box::new(client_floor::ClientFloor::connect(
            addr,
            client_floor::Framing::Batched,
        )?),
    ];
    if measure.batching.modes().contains(&false) {
        // The yardstick of batching off, beside its large waves only.
        contenders.push(Box::new(client_floor::ClientFloor::connect(
            addr,
            client_floor::Framing::Unbatched,
        )?));
    }
    Ok(contenders)
}

/// What runs after each cell: nothing with `--no-verify`, else the job count on the server
/// the cell added to.
fn auditor(
    measure: &Measure,
    addr: SocketAddr,
    tls: Option<&TwinTls>,
) -> io::Result<Box<dyn run::AfterCell>> {
    Ok(match tls {
        _ if measure.no_verify => Box::new(run::NoCheck),
        None => Box::new(Auditor::connect(addr)?),
        Some(tls) => Box::new(run::TlsRouted {
            plain: Auditor::connect(addr)?,
            tls: run::TlsAuditor::connect(tls.broker.addr(), tls.pki.ca_pem().as_bytes())?,
        }),
    })
}

/// Prints the report and writes the JSON document and the chart asked for.
fn report_and_write(
    info: &RunInfo,
    measurements: &Measurements,
    output: &Output,
) -> io::Result<()> {
    print!("{}", report::render(info, measurements));
    if let Some(path) = &output.json {
        let doc = report::to_json(info, measurements);
        std::fs::write(path, serde_json::to_string_pretty(&doc)? + "\n")?;
        eprintln!("wrote {}", path.display());
    }
    if let Some(path) = &output.svg {
        let doc = report::to_json(info, measurements);
        let chart = svg::render(&doc)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
        std::fs::write(path, chart)?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}
