//! Overload against real servers: bunqueue 2.9.5 and the `autobatch-broker` binary, each as a
//! child process that can be frozen (SIGSTOP), thawed (SIGCONT), killed and restarted.
//!
//! * A server that stops reading while producers keep adding: under `Backpressure` the client's
//!   buffer stays within `max_pending` and every blocked caller holds one add; once the server
//!   resumes, every add completes and lands exactly once.
//! * Under `DropOldest`, the adds dropped are reported as `Overflow` to exactly those callers,
//!   and counted; everything else lands.
//! * A server killed mid-load: every caller gets an outcome, the client reconnects with backoff,
//!   and adds after the restart succeed.
//!
//! What landed is counted through an independent raw connection ([`RawClient`]). The only
//! durations are hang guards and how long a server stays frozen; nothing asserts on speed.

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use autobatch_tests::{ping_addr, BunqueueServer, RawClient, ServerOptions};
use autobatch_tokio::{BatchConfig, Client, ClientOptions, Error, JobOptions, OverflowPolicy};

/// A server the test can freeze, kill and restart.
trait Server {
    fn addr(&self) -> SocketAddr;
    fn suspend(&self);
    fn resume(&self);
    fn kill(&mut self);
    fn restart(&mut self);
}

impl Server for BunqueueServer {
    fn addr(&self) -> SocketAddr {
        BunqueueServer::addr(self)
    }
    fn suspend(&self) {
        BunqueueServer::suspend(self).expect("SIGSTOP bunqueue");
    }
    fn resume(&self) {
        BunqueueServer::resume(self).expect("SIGCONT bunqueue");
    }
    fn kill(&mut self) {
        BunqueueServer::kill(self).expect("SIGKILL bunqueue");
    }
    fn restart(&mut self) {
        BunqueueServer::restart(self).expect("restart bunqueue");
    }
}

/// The `autobatch-broker` binary as a child process (memory mode).
struct BrokerProcess {
    child: Option<Child>,
    port: u16,
}

impl BrokerProcess {
    fn binary() -> PathBuf {
        // target/<profile>/deps/overload-… → target/<profile>/autobatch-broker
        let exe = std::env::current_exe().expect("test binary path");
        let bin = exe
            .parent()
            .and_then(|d| d.parent())
            .expect("target dir")
            .join("autobatch-broker");
        if !bin.exists() {
            let status = Command::new(env!("CARGO"))
                .args([
                    "build",
                    "-p",
                    "autobatch-broker",
                    "--bin",
                    "autobatch-broker",
                ])
                .status()
                .expect("cargo build autobatch-broker");
            assert!(status.success(), "could not build the broker binary");
        }
        bin
    }

    fn start() -> BrokerProcess {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut b = BrokerProcess { child: None, port };
        b.spawn();
        b
    }

    fn spawn(&mut self) {
        let child = Command::new(Self::binary())
            .args(["--host", "127.0.0.1", "--port", &self.port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn autobatch-broker");
        self.child = Some(child);
        // The listener comes up a moment after the process starts.
        let give_up = Instant::now() + Duration::from_secs(30);
        while let Err(e) = ping_addr(self.addr(), None, Duration::from_secs(5)) {
            assert!(Instant::now() < give_up, "broker never answered Ping: {e}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn signal(&self, sig: i32) {
        if let Some(c) = &self.child {
            // SAFETY: kill(2) on our own child's pid.
            let rc = unsafe { libc::kill(c.id() as i32, sig) };
            assert_eq!(rc, 0, "kill({sig})");
        }
    }
}

impl Server for BrokerProcess {
    fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }
    fn suspend(&self) {
        self.signal(libc::SIGSTOP);
    }
    fn resume(&self) {
        self.signal(libc::SIGCONT);
    }
    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
    fn restart(&mut self) {
        self.kill();
        self.spawn();
    }
}

impl Drop for BrokerProcess {
    fn drop(&mut self) {
        self.resume();
        self.kill();
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// More producers than the buffer holds, so that a frozen server fills it and the rest park.
const PRODUCERS: usize = 200;
const MAX_PENDING: usize = 50;

fn options(server: &dyn Server, overflow: OverflowPolicy) -> ClientOptions {
    ClientOptions::new("127.0.0.1", server.addr().port())
        .command_timeout(Duration::from_secs(60))
        .batching(Some(
            BatchConfig::new()
                .max_batch(10)
                .max_in_flight(2)
                .max_pending_items(MAX_PENDING)
                .overflow(overflow),
        ))
}

/// Producers add as fast as they can; the server freezes mid-load, then thaws.
fn stalled_server_under_backpressure(server: &mut dyn Server, queue: &str) {
    const PER_PRODUCER: u64 = 50;
    let rt = runtime();
    let addr = server.addr();
    let client = rt
        .block_on(Client::connect(options(
            server,
            OverflowPolicy::Backpressure,
        )))
        .expect("connect");
    let ok = Arc::new(AtomicU64::new(0));
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let q = client.queue(queue);
            let ok = ok.clone();
            rt.spawn(async move {
                for i in 0..PER_PRODUCER {
                    let data = serde_json::json!({ "p": p, "i": i, "pad": "x".repeat(512) });
                    q.add("load", &data, JobOptions::new())
                        .await
                        .expect("add under backpressure");
                    ok.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    // Let the load get going, then freeze the server.
    while ok.load(Ordering::Relaxed) < 500 {
        std::thread::sleep(Duration::from_millis(5));
    }
    server.suspend();
    let rss_before = rss_kib();
    let frozen_at = ok.load(Ordering::Relaxed);
    // While frozen: the client holds at most max_pending buffered adds plus one parked add per
    // blocked producer, however long the freeze lasts.
    let mut max_buffered = 0;
    let mut max_parked = 0;
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until {
        let s = rt.block_on(client.stats()).session;
        max_buffered = max_buffered.max(s.buffered_adds);
        max_parked = max_parked.max(s.parked_adds);
        std::thread::sleep(Duration::from_millis(50));
    }
    let rss_frozen = rss_kib();
    let progressed_while_frozen = ok.load(Ordering::Relaxed) - frozen_at;
    server.resume();
    rt.block_on(async {
        for p in producers {
            tokio::time::timeout(Duration::from_secs(120), p)
                .await
                .expect("a producer hung after the server resumed")
                .expect("producer task");
        }
    });
    rt.block_on(client.close());
    let total = PRODUCERS as u64 * PER_PRODUCER;
    assert_eq!(ok.load(Ordering::Relaxed), total, "every add completed");
    assert!(
        max_buffered as usize <= MAX_PENDING,
        "buffer {max_buffered} > {MAX_PENDING}"
    );
    assert!(
        max_parked > 0,
        "the buffer filled and callers waited for room"
    );
    assert!(
        max_parked as usize <= PRODUCERS,
        "{max_parked} parked adds for {PRODUCERS} callers"
    );
    let landed = RawClient::connect(addr, None)
        .expect("raw connect")
        .count(queue);
    assert_eq!(landed, total, "each add landed exactly once");
    eprintln!(
        "[{queue}] frozen 2 s: {progressed_while_frozen} adds completed while frozen, \
         at most {max_buffered} buffered + {max_parked} parked; RSS {rss_before} KiB -> {rss_frozen} KiB"
    );
}

/// Under DropOldest the callers whose adds were dropped, and only they, get `Overflow`.
fn stalled_server_drop_oldest(server: &mut dyn Server, queue: &str) {
    const ADDS: usize = 3000;
    let rt = runtime();
    let addr = server.addr();
    let client = rt
        .block_on(Client::connect(options(server, OverflowPolicy::DropOldest)))
        .expect("connect");
    // One add first, so the connection is up and the queue's batcher exists.
    rt.block_on(client.queue(queue).add("warm", &0, JobOptions::new()))
        .unwrap();
    server.suspend();
    let q = client.queue(queue);
    let adds: Vec<_> = (0..ADDS)
        .map(|i| {
            let q = q.clone();
            rt.spawn(async move { q.add("burst", &i, JobOptions::new()).await })
        })
        .collect();
    // Every add is in the client (buffered, in flight or dropped) before the thaw.
    loop {
        let s = rt.block_on(client.stats()).session;
        if s.adds as usize > ADDS {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(200));
    server.resume();
    let results: Vec<Result<String, Error>> = rt.block_on(async {
        let mut out = Vec::new();
        for a in adds {
            out.push(
                tokio::time::timeout(Duration::from_secs(120), a)
                    .await
                    .expect("an add hung")
                    .unwrap(),
            );
        }
        out
    });
    let stats = rt.block_on(client.stats()).session;
    rt.block_on(client.close());
    let ok = results.iter().filter(|r| r.is_ok()).count();
    let overflow = results
        .iter()
        .filter(|r| matches!(r, Err(Error::Overflow)))
        .count();
    assert_eq!(
        ok + overflow,
        ADDS,
        "only Ok or Overflow: {:?}",
        results
            .iter()
            .find(|r| !matches!(r, Ok(_) | Err(Error::Overflow)))
    );
    assert!(
        overflow > 0,
        "the buffer overflowed while the server was frozen"
    );
    assert_eq!(stats.adds_rejected as usize, overflow, "drops are counted");
    let landed = RawClient::connect(addr, None)
        .expect("raw connect")
        .count(queue);
    assert_eq!(
        landed as usize,
        ok + 1,
        "exactly the adds reported Ok landed (+ the warm-up)"
    );
    eprintln!("[{queue}] DropOldest: {overflow} of {ADDS} adds dropped and reported, {ok} landed");
}

/// The server dies mid-wave and comes back: nobody hangs, later adds succeed.
fn server_killed_and_restarted(server: &mut dyn Server, queue: &str) {
    let rt = runtime();
    let client = rt
        .block_on(Client::connect(
            ClientOptions::new("127.0.0.1", server.addr().port())
                .command_timeout(Duration::from_secs(5))
                .connect_timeout(Duration::from_secs(2)),
        ))
        .expect("connect");
    let q = client.queue(queue);
    let wave: Vec<_> = (0..2000)
        .map(|i| {
            let q = q.clone();
            rt.spawn(async move { q.add("wave", &i, JobOptions::new()).await })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(20));
    server.kill();
    let outcomes: Vec<Result<String, Error>> = rt.block_on(async {
        let mut out = Vec::new();
        for a in wave {
            out.push(
                tokio::time::timeout(Duration::from_secs(60), a)
                    .await
                    .expect("an add hung after the server died")
                    .unwrap(),
            );
        }
        out
    });
    let failed = outcomes.iter().filter(|r| r.is_err()).count();
    server.restart();
    // The client reconnects by itself (with backoff) and later adds go through.
    let after = rt.block_on(async {
        let mut last = None;
        for _ in 0..100 {
            match q.add("after", &1, JobOptions::new()).await {
                Ok(id) => return Some(id),
                Err(e) => last = Some(e),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("no add succeeded after the restart: {last:?}")
    });
    assert!(after.is_some());
    let stats = rt.block_on(client.stats()).session;
    rt.block_on(client.close());
    assert!(
        stats.connects >= 2,
        "reconnected: {} connects",
        stats.connects
    );
    eprintln!(
        "[{queue}] killed mid-wave: {} ok, {failed} failed with typed errors, {} connects",
        outcomes.len() - failed,
        stats.connects
    );
}

#[test]
fn bunqueue_stalled_backpressure_keeps_memory_bounded_and_loses_nothing() {
    let mut server = BunqueueServer::start(ServerOptions::memory()).expect("start bunqueue");
    stalled_server_under_backpressure(&mut server, "overload-bp");
}

#[test]
fn broker_stalled_backpressure_keeps_memory_bounded_and_loses_nothing() {
    let mut server = BrokerProcess::start();
    stalled_server_under_backpressure(&mut server, "overload-bp");
}

#[test]
fn bunqueue_stalled_drop_oldest_reports_exactly_the_dropped() {
    let mut server = BunqueueServer::start(ServerOptions::memory()).expect("start bunqueue");
    stalled_server_drop_oldest(&mut server, "overload-drop");
}

#[test]
fn broker_stalled_drop_oldest_reports_exactly_the_dropped() {
    let mut server = BrokerProcess::start();
    stalled_server_drop_oldest(&mut server, "overload-drop");
}

#[test]
fn bunqueue_killed_mid_wave_everyone_gets_an_outcome() {
    let mut server = BunqueueServer::start(ServerOptions::memory()).expect("start bunqueue");
    server_killed_and_restarted(&mut server, "overload-kill");
}

#[test]
fn broker_killed_mid_wave_everyone_gets_an_outcome() {
    let mut server = BrokerProcess::start();
    server_killed_and_restarted(&mut server, "overload-kill");
}
