//! `--web`: the handler of bunqueue's auto-batching write-up (<https://bunqueue.dev>),
//! `POST /orders` → one `queue.add('process-order', order)` → `202 {status: 'queued'}`, measured
//! as a web server: the `web_orders` example (axum) on tokio `multi_thread` (2 workers) and
//! `current_thread`, and as the peer the same endpoint on Bun (`Bun.serve`, bunqueue's TS
//! client, `bench/web/orders.ts`), each with batching off and on and without the add (the
//! baseline), loaded by `wrk` with keep-alive connections.
//!
//! One cell = one web process, freshly started: a warm-up wrk run, then the timed one, with
//! `/proc` read around it (the web process's CPU and context switches, the server's CPU) and a
//! counting proxy between the web process and the server (PUSH and PUSHB frames). Then SIGTERM:
//! the web process finishes what is in flight and closes its client, and the server's count of
//! the `orders` queue must hold every 202 (no more than the requests wrk left unanswered
//! besides); the queue is then obliterated, so every cell starts from an empty server.

mod model;
mod process;
mod report;
mod svg;
mod wrk;

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use autobatch_tests::{CountingProxy, RawClient};

use crate::cpu::{self, Threads};
pub use model::{Mode, Stack, WebCell, WebPlan, WebRun};
use process::WebProcess;

pub use report::{headline, markdown, render};
pub use svg::render as render_svg;

/// A `--web` run read back from the JSON document it wrote (`--json`): the run and the machine
/// it ran on. `Err` names what the document lacks.
pub fn from_json(doc: &serde_json::Value) -> Result<(WebRun, crate::machine::MachineInfo), String> {
    let run = doc.get("run").ok_or("no `run`")?;
    let run: WebRun = serde_json::from_value(run.clone()).map_err(|e| format!("`run`: {e}"))?;
    let machine = doc
        .get("machine")
        .and_then(crate::machine::MachineInfo::from_json)
        .ok_or("no `machine`, or one missing a field")?;
    Ok((run, machine))
}

/// The queue the endpoint adds to (the example's `QUEUE`, orders.ts's queue).
const QUEUE: &str = "orders";

/// The server under the web processes.
pub struct WebServer {
    /// Its address (the proxy's upstream).
    pub addr: SocketAddr,
    /// Its threads, for its CPU time.
    pub threads: Option<Threads>,
    /// For the report.
    pub describe: String,
}

/// Runs the plan against `server`.
pub fn run(plan: &WebPlan, server: &WebServer) -> io::Result<WebRun> {
    let root = autobatch_tests::workspace_root();
    let web_dir = root.join("bench").join("web");
    let example = process::build_example(&root)?;
    let install = autobatch_tests::BunqueueInstall::locate()?;
    process::link_node_modules(&web_dir, &install.node_modules)?;
    let script = web_dir.join("post.lua");
    let proxy = CountingProxy::try_start(server.addr)?;
    let mut auditor = RawClient::connect(server.addr, None)?;
    obliterate(&mut auditor)?;

    let started = Instant::now();
    let total = plan.reps * plan.connections.len() * plan.stacks.len() * Mode::ALL.len();
    let mut cells = Vec::with_capacity(total);
    for rep in 0..plan.reps {
        for &connections in &plan.connections {
            for &stack in &plan.stacks {
                for mode in Mode::ALL {
                    eprint!(
                        "[{}/{total}] {}, {}, {connections} connection{} … ",
                        cells.len() + 1,
                        stack.label(),
                        mode.label(),
                        if connections == 1 { "" } else { "s" }
                    );
                    let cmd = match stack {
                        Stack::Bun => bun_command(&install.bun, &web_dir, proxy.addr(), mode),
                        _ => axum_command(&example, proxy.addr(), stack, mode),
                    };
                    let cell = run_cell(
                        plan,
                        server,
                        &proxy,
                        &mut auditor,
                        &script,
                        cmd,
                        (stack, mode, connections, rep),
                    )?;
                    eprintln!(
                        "{:.0} req/s, p50 {} µs",
                        cell.wrk.per_sec(),
                        cell.wrk.p50_us
                    );
                    cells.push(cell);
                }
            }
        }
    }
    Ok(WebRun {
        plan: plan.clone(),
        server: server.describe.clone(),
        cells,
        wall_s: started.elapsed().as_secs_f64(),
    })
}

fn axum_command(example: &Path, upstream: SocketAddr, stack: Stack, mode: Mode) -> Command {
    let mut cmd = Command::new(example);
    cmd.args([
        "--listen",
        "127.0.0.1:0",
        "--bunqueue",
        &upstream.to_string(),
    ]);
    match stack {
        Stack::AxumCurrentThread => cmd.args(["--runtime", "current_thread"]),
        _ => cmd.args(["--runtime", "multi_thread", "--workers", "2"]),
    };
    match mode {
        Mode::NoAdd => cmd.arg("--no-add"),
        Mode::Off => cmd.args(["--batching", "off"]),
        Mode::On => cmd.args(["--batching", "on"]),
    };
    cmd
}

fn bun_command(bun: &Path, web_dir: &PathBuf, upstream: SocketAddr, mode: Mode) -> Command {
    let mut cmd = Command::new(bun);
    cmd.current_dir(web_dir)
        .args(["--no-install", "run", "orders.ts", "127.0.0.1", "0"])
        .arg(upstream.to_string())
        .arg(if mode == Mode::On { "on" } else { "off" });
    if mode == Mode::NoAdd {
        cmd.arg("no-add");
    }
    cmd
}

fn run_cell(
    plan: &WebPlan,
    server: &WebServer,
    proxy: &CountingProxy,
    auditor: &mut RawClient,
    script: &Path,
    cmd: Command,
    (stack, mode, connections, rep): (Stack, Mode, usize, usize),
) -> io::Result<WebCell> {
    let web = WebProcess::start(cmd)?;
    let warm = wrk::run(script, web.addr(), connections, plan.warmup)?;

    proxy.reset();
    let web0 = web.usage();
    let server0 = server.threads.as_ref().and_then(Threads::now);
    let timed = wrk::run(script, web.addr(), connections, plan.duration)?;
    let server1 = server.threads.as_ref().and_then(Threads::now);
    let web1 = web.usage();
    let frames = proxy.snapshot();
    web.stop()?;

    let (web_cpu, web_switches) = process::used(web0, web1);
    let jobs = count(auditor)?;
    obliterate(auditor)?;
    let cell = WebCell {
        stack,
        mode,
        connections,
        rep,
        wrk: timed,
        push_frames: frames.cmd("PUSH"),
        pushb_frames: frames.cmd("PUSHB"),
        web_cpu_us: web_cpu.map(|d| d.as_secs_f64() * 1e6),
        web_switches,
        server_cpu_us: cpu::delta(server0, server1).map(|d| d.as_secs_f64() * 1e6),
        accepted: if mode == Mode::NoAdd {
            0
        } else {
            warm.accepted() + timed.accepted()
        },
        jobs,
        unanswered_bound: if mode == Mode::NoAdd {
            0
        } else {
            2 * connections as u64
        },
    };
    check(&cell, &warm)?;
    Ok(cell)
}

/// Every 202 is a job, no more jobs than requests wrk may have left unanswered, and no
/// request got anything but a 2xx.
fn check(cell: &WebCell, warm: &wrk::WrkResult) -> io::Result<()> {
    let what = format!(
        "{}, {}, {} connections",
        cell.stack.label(),
        cell.mode.label(),
        cell.connections
    );
    if cell.lost() > 0 {
        return Err(io::Error::other(format!(
            "{what}: {} requests answered 202 but the server holds {} jobs: {} lost",
            cell.accepted,
            cell.jobs,
            cell.lost()
        )));
    }
    if cell.jobs > cell.accepted + cell.unanswered_bound {
        return Err(io::Error::other(format!(
            "{what}: the server holds {} jobs for {} requests answered 202 (and at most {} \
             unanswered)",
            cell.jobs, cell.accepted, cell.unanswered_bound
        )));
    }
    let failures = cell.wrk.failures() + warm.failures();
    if failures > 0 {
        return Err(io::Error::other(format!(
            "{what}: {failures} requests were not answered 2xx (wrk: timed {:?}, warm-up {:?})",
            cell.wrk, warm
        )));
    }
    Ok(())
}

/// Jobs in the `orders` queue, every state.
fn count(auditor: &mut RawClient) -> io::Result<u64> {
    let c = auditor.counts(QUEUE);
    Ok(c.waiting
        + c.prioritized
        + c.delayed
        + c.active
        + c.paused
        + c.waiting_children
        + c.completed
        + c.failed)
}

fn obliterate(auditor: &mut RawClient) -> io::Result<()> {
    let queue = autobatch_driver::Value::from(QUEUE);
    auditor
        .command("Obliterate", &[("queue", queue)])
        .map(|_| ())
        .map_err(io::Error::other)
}

/// `--web`'s entry: starts the server (the embedded broker, or bunqueue 2.9.5 with
/// `bunqueue`), runs the plan, prints the report and writes the JSON and SVG asked for.
pub fn main(
    plan: &WebPlan,
    bunqueue: bool,
    json: Option<&Path>,
    svg: Option<&Path>,
    machine: &crate::machine::MachineInfo,
) -> io::Result<()> {
    let embedded;
    let bunqueue_server;
    let server = if bunqueue {
        eprintln!(
            "starting bunqueue {} …",
            autobatch_tests::install::BUNQUEUE_VERSION
        );
        bunqueue_server =
            autobatch_tests::BunqueueServer::start(autobatch_tests::ServerOptions::memory())?;
        WebServer {
            addr: bunqueue_server.addr(),
            threads: bunqueue_server
                .pid()
                .map(|pid| Threads::Processes(vec![pid])),
            describe: format!(
                "bunqueue {} (bun {}, memory, rate limit lifted) at {}",
                autobatch_tests::install::BUNQUEUE_VERSION,
                autobatch_tests::install::BUN_VERSION,
                bunqueue_server.addr()
            ),
        }
    } else {
        embedded = crate::autobatch::Broker::start()?;
        WebServer {
            addr: embedded.addr(),
            threads: Some(Threads::EmbeddedBroker),
            describe: format!(
                "embedded autobatch-broker (in the bench process, memory) at {}",
                embedded.addr()
            ),
        }
    };
    let result = run(plan, &server)?;
    print!("{}", render(&result, machine));
    if let Some(path) = json {
        let doc = serde_json::json!({
            "mode": "web",
            "machine": machine.to_json(),
            "run": result,
        });
        std::fs::write(path, serde_json::to_string_pretty(&doc)? + "\n")?;
        eprintln!("wrote {}", path.display());
    }
    if let Some(path) = svg {
        std::fs::write(path, render_svg(&result))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}
