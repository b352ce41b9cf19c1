//! autobatch itself: `Client::connect`, `client.queue(name)`, `queue.add(..).await`, on the
//! runtime chosen with `--runtime`, and the embedded broker of the default run.
//!
//! The bench thread drives the client with its runtime's `block_on`; the client's pump task
//! runs where the adapter spawns it: on the same thread for tokio (a current-thread runtime, like
//! bunqueue's TS client on its single event loop) and for `smol-local` / `async-std-local`
//! (`SmolRuntime::with_executor`, `AsyncStdRuntime::local`), on smol's and async-std's global
//! executors for `smol` / `async-std`, on a worker thread for `tokio-multi-thread` (whose
//! cells run in a spawned task).
//!
//! With `--tls` the same client runs over TLS too (rustls, through the driver's
//! futures-rustls wrapper), against a second embedded broker that serves TLS.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use autobatch_broker::{BrokerConfig, BrokerTls, EmbeddedBroker};
use autobatch_driver::{Client, ClientOptions, Error, JobOptions, Queue, Runtime, TlsOptions};
use futures::future::join_all;
use futures::FutureExt;
use serde::Serialize;

use crate::cpu::{self, Threads};
use crate::runtime_kind::RuntimeKind;
use crate::workload::{waves, Cell, CellCost, Contender, Latency, Pattern};

/// The embedded broker of the default run: in-process, memory, own threads.
pub struct Broker(EmbeddedBroker);

impl Broker {
    /// Start it on a free loopback port.
    pub fn start() -> io::Result<Broker> {
        EmbeddedBroker::start(BrokerConfig::default()).map(Broker)
    }

    /// The same broker, serving TLS with `tls`.
    pub fn start_tls(tls: BrokerTls) -> io::Result<Broker> {
        EmbeddedBroker::start(BrokerConfig::default().tls(tls)).map(Broker)
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.0.addr()
    }
}

/// The payload of every add: `{i}`, as bench.ts sends (the client floor sends the same).
#[derive(Serialize)]
pub struct Data {
    /// The add's index in its cell.
    pub i: usize,
}

/// Runs a future to completion on the bench thread.
trait BlockOn {
    fn block_on<F: Future>(&self, f: F) -> F::Output;

    /// Runs a cell's adds: on the bench thread, unless the runtime puts them elsewhere.
    fn run_cell<F>(&self, f: F) -> F::Output
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.block_on(f)
    }
}

struct TokioExec(tokio::runtime::Runtime);

impl BlockOn for TokioExec {
    fn block_on<F: Future>(&self, f: F) -> F::Output {
        self.0.block_on(f)
    }
}

/// A multi-thread tokio runtime: a cell's adds run in a task spawned on it (a worker thread),
/// as a server's request handlers do, not in `block_on` on the bench thread.
struct TokioMtExec(tokio::runtime::Runtime);

impl BlockOn for TokioMtExec {
    fn block_on<F: Future>(&self, f: F) -> F::Output {
        self.0.block_on(f)
    }

    fn run_cell<F>(&self, f: F) -> F::Output
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.0
            .block_on(self.0.spawn(f))
            .expect("the cell's task panicked")
    }
}

struct SmolExec;

impl BlockOn for SmolExec {
    fn block_on<F: Future>(&self, f: F) -> F::Output {
        smol::block_on(f)
    }
}

/// A smol `Executor` run by the bench thread: the pump is a task of it
/// (`SmolRuntime::with_executor`), so callers and pump share the thread.
struct SmolLocalExec(std::sync::Arc<smol::Executor<'static>>);

impl BlockOn for SmolLocalExec {
    fn block_on<F: Future>(&self, f: F) -> F::Output {
        smol::block_on(self.0.run(f))
    }
}

struct AsyncStdExec;

impl BlockOn for AsyncStdExec {
    fn block_on<F: Future>(&self, f: F) -> F::Output {
        async_std::task::block_on(f)
    }
}

/// One autobatch client (one connection), batching on or off.
struct Autobatch<R: Runtime, E: BlockOn> {
    exec: E,
    client: Client<R>,
    batching: bool,
    idempotent: bool,
    tls: bool,
    runtime: RuntimeKind,
    frames: Option<u64>,
    cost: CellCost,
    /// `--spawn-adds`: every add of a wave in its own tokio task.
    spawn: bool,
}

/// How an autobatch contender's client is set up.
#[derive(Clone)]
pub struct Setup {
    /// Where it connects.
    pub addr: SocketAddr,
    /// `false` is `ClientOptions::batching(None)` (every add its own PUSH), `true` the default
    /// batching configuration.
    pub batching: bool,
    /// `ClientOptions::idempotent_adds`: every add carries a job id of the client's own.
    pub idempotent: bool,
    /// Over TLS, with these options.
    pub tls: Option<TlsOptions>,
    /// `--spawn-adds`: every add of a wave in its own tokio task.
    pub spawn: bool,
}

/// The autobatch contender on `runtime`, set up as `setup` says.
pub fn contender(runtime: RuntimeKind, setup: Setup) -> io::Result<Box<dyn Contender>> {
    Ok(match runtime {
        RuntimeKind::Tokio => {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let exec = TokioExec(rt);
            let handle = exec.0.handle().clone();
            let rt = autobatch_tokio::TokioRuntime::new(handle);
            Box::new(Autobatch::connect(exec, rt, runtime, setup)?)
        }
        RuntimeKind::TokioMultiThread => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?;
            let exec = TokioMtExec(rt);
            let handle = exec.0.handle().clone();
            let rt = autobatch_tokio::TokioRuntime::new(handle);
            Box::new(Autobatch::connect(exec, rt, runtime, setup)?)
        }
        RuntimeKind::Smol => Box::new(Autobatch::connect(
            SmolExec,
            autobatch_smol::SmolRuntime::default(),
            runtime,
            setup,
        )?),
        RuntimeKind::SmolLocal => {
            let ex = std::sync::Arc::new(smol::Executor::new());
            let rt = autobatch_smol::SmolRuntime::with_executor(ex.clone());
            Box::new(Autobatch::connect(SmolLocalExec(ex), rt, runtime, setup)?)
        }
        RuntimeKind::AsyncStdLocal => Box::new(Autobatch::connect(
            AsyncStdExec,
            autobatch_async_std::AsyncStdRuntime::local(),
            runtime,
            setup,
        )?),
        RuntimeKind::AsyncStd => Box::new(Autobatch::connect(
            AsyncStdExec,
            autobatch_async_std::AsyncStdRuntime::default(),
            runtime,
            setup,
        )?),
    })
}

impl<R: Runtime, E: BlockOn> Autobatch<R, E> {
    fn connect(exec: E, rt: R, runtime: RuntimeKind, setup: Setup) -> io::Result<Self> {
        let Setup {
            addr,
            batching,
            idempotent,
            tls,
            spawn,
        } = setup;
        let mut opts =
            ClientOptions::new(addr.ip().to_string(), addr.port()).idempotent_adds(idempotent);
        if !batching {
            opts = opts.batching(None);
        }
        let with_tls = tls.is_some();
        if let Some(tls) = tls {
            opts = opts.tls(tls);
        }
        let client = exec
            .block_on(Client::connect_with(rt, opts))
            .map_err(io::Error::other)?;
        Ok(Autobatch {
            exec,
            client,
            batching,
            idempotent,
            tls: with_tls,
            runtime,
            frames: None,
            cost: CellCost::default(),
            spawn,
        })
    }
}

/// `n` adds to `q` in `pattern`: `await` one by one, or `join_all` over waves (with `spawn`,
/// of one tokio task per add). With `lat`, each add's latency (from the start of its wave to
/// its reply) is pushed onto it: one clock read per add, inside the timed region, as bench.ts
/// does for the TS client.
async fn adds<R: Runtime>(
    q: &Queue<R>,
    pattern: Pattern,
    n: usize,
    spawn: bool,
    mut lat: Option<&mut Vec<Duration>>,
) -> Result<(), Error> {
    match pattern {
        Pattern::All(w) if spawn => {
            let mut i = 0;
            for k in waves(n, w) {
                let start = Instant::now();
                let wave = (i..i + k).map(|i| {
                    let q = q.clone();
                    tokio::spawn(async move {
                        let r = q.add("bench", &Data { i }, JobOptions::new()).await;
                        (r, Instant::now())
                    })
                });
                for r in join_all(wave.collect::<Vec<_>>()).await {
                    let (r, done) = r.expect("an add's task panicked");
                    r?;
                    if let Some(lat) = lat.as_deref_mut() {
                        lat.push(done - start);
                    }
                }
                i += k;
            }
        }
        Pattern::Seq => {
            for i in 0..n {
                let start = Instant::now();
                q.add("bench", &Data { i }, JobOptions::new()).await?;
                if let Some(lat) = lat.as_deref_mut() {
                    lat.push(start.elapsed());
                }
            }
        }
        Pattern::All(w) => {
            let mut i = 0;
            for k in waves(n, w) {
                let start = Instant::now();
                let wave = (i..i + k).map(|i| {
                    q.add("bench", &Data { i }, JobOptions::new())
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
        }
    }
    Ok(())
}

impl<R: Runtime, E: BlockOn> Contender for Autobatch<R, E> {
    fn id(&self) -> String {
        format!(
            "autobatch-{}{}{}",
            if self.tls { "tls-" } else { "" },
            if self.idempotent { "idempotent-" } else { "" },
            if self.batching { "on" } else { "off" }
        )
    }

    fn label(&self) -> String {
        format!(
            "autobatch {} ({}){}, batching {}{}",
            env!("CARGO_PKG_VERSION"),
            self.runtime.name(),
            if self.tls { " over TLS" } else { "" },
            if self.batching { "on" } else { "off" },
            if self.idempotent {
                ", idempotent adds"
            } else {
                ""
            }
        )
    }

    fn run(&mut self, cell: &Cell) -> io::Result<Duration> {
        let q = self.client.queue(&cell.queue);
        let client = self.client.clone();
        let (pattern, warmup, n, spawn) = (cell.pattern, cell.warmup, cell.adds, self.spawn);
        // The cell may run on another thread (`run_cell`): its latencies travel with it.
        let (elapsed, frames, client_cpu, mut lat) = self.exec.run_cell(async move {
            adds(&q, pattern, warmup, spawn, None)
                .await
                .map_err(io::Error::other)?;
            let before = client.stats().await.session.frames_sent;
            // Every thread of this process but the embedded broker's: the client's pump
            // runs on other threads than the caller on some runtimes.
            let mut lat = Vec::with_capacity(n);
            let cpu0 = Threads::Client.now();
            let t0 = Instant::now();
            adds(&q, pattern, n, spawn, Some(&mut lat))
                .await
                .map_err(io::Error::other)?;
            let elapsed = t0.elapsed();
            let client_cpu = cpu::delta(cpu0, Threads::Client.now());
            let after = client.stats().await.session.frames_sent;
            io::Result::Ok((elapsed, after - before, client_cpu, lat))
        })?;
        self.frames = Some(frames);
        self.cost = CellCost {
            client_cpu,
            latency: Latency::of(&mut lat),
        };
        Ok(elapsed)
    }

    fn last_cost(&self) -> CellCost {
        self.cost
    }

    fn last_frames(&self) -> Option<u64> {
        self.frames
    }
}

impl<R: Runtime, E: BlockOn> Drop for Autobatch<R, E> {
    fn drop(&mut self) {
        self.exec.block_on(self.client.close());
    }
}
