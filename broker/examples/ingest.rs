//! Ingest rate: PUSHB of 100 jobs from one Rust client over a std socket, pipelined, against
//! the embedded broker and against bunqueue 2.9.5, memory and SQLite mode, in one run.
//!
//! ```text
//! cargo run --release -p autobatch-broker --example ingest -- [jobs] [window] [rounds]
//! ```
//!
//! The four servers take turns for `rounds` rounds (default 3) and the median is reported, so
//! a noisy machine hits them all alike. bunqueue is installed by `scripts/bunqueue.sh install`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Instant;

use autobatch_broker::{BrokerConfig, EmbeddedBroker};
use autobatch_core::wire::{write_frame, Command, FrameDecoder, JobSpec, Value};
use autobatch_tests::{BunqueueServer, ServerOptions};

const BATCH: usize = 100;

/// Pushes `total` jobs in PUSHB of 100 with `window` requests in flight; returns jobs/s.
fn ingest(addr: SocketAddr, queue: &str, total: usize, window: usize) -> f64 {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_nodelay(true).unwrap();
    let batches = total / BATCH;
    let mut dec = FrameDecoder::new();
    let mut buf = vec![0u8; 256 * 1024];
    let (mut sent, mut done, mut in_flight) = (0usize, 0usize, 0usize);
    let mut out = Vec::new();
    let started = Instant::now();
    while done < batches {
        out.clear();
        while in_flight < window && sent < batches {
            let jobs = (0..BATCH)
                .map(|k| {
                    let i = (sent * BATCH + k) as i64;
                    JobSpec::new("ingest", Value::map([("i", Value::Int(i))]))
                })
                .collect();
            let cmd = Command::PushB {
                queue: queue.into(),
                jobs,
            };
            let req = Value::from(sent.to_string());
            write_frame(&mut out, |b| cmd.encode(Some(&req), b)).unwrap();
            sent += 1;
            in_flight += 1;
        }
        s.write_all(&out).unwrap();
        loop {
            if let Some(f) = dec.next_frame().unwrap() {
                let r = Value::decode(&f).unwrap();
                assert_eq!(r.get("ok"), Some(&Value::Bool(true)), "{r:?}");
                done += 1;
                in_flight -= 1;
                break;
            }
            let n = s.read(&mut buf).unwrap();
            assert!(n > 0, "server closed");
            dec.extend(&buf[..n]);
        }
    }
    (batches * BATCH) as f64 / started.elapsed().as_secs_f64()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let total: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let window: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(8);
    let rounds: usize = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(3);
    let dir = tempfile::tempdir().unwrap();

    let broker_mem = EmbeddedBroker::start(BrokerConfig::default()).unwrap();
    let broker_sql =
        EmbeddedBroker::start(BrokerConfig::default().data_path(dir.path().join("broker.db")))
            .unwrap();
    let bq_mem = BunqueueServer::start(ServerOptions::memory()).expect("start bunqueue");
    let bq_sql = BunqueueServer::start(ServerOptions::sqlite(dir.path().join("bunqueue.db")))
        .expect("start bunqueue (sqlite)");
    let servers: [(&str, SocketAddr); 4] = [
        ("autobatch-broker, memory", broker_mem.addr()),
        ("autobatch-broker, SQLite", broker_sql.addr()),
        ("bunqueue 2.9.5, memory", bq_mem.addr()),
        ("bunqueue 2.9.5, SQLite", bq_sql.addr()),
    ];
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); servers.len()];
    for round in 0..rounds {
        for (i, (name, addr)) in servers.iter().enumerate() {
            eprintln!("[round {}/{rounds}] {name}", round + 1);
            rates[i].push(ingest(*addr, &format!("ingest-{round}"), total, window));
        }
    }
    println!("PUSHB of {BATCH} jobs, {window} in flight, {total} jobs a run, median of {rounds} interleaved runs");
    println!("{:<28} {:>12}", "server", "jobs/s");
    for ((name, _), r) in servers.iter().zip(rates) {
        println!("{name:<28} {:>12.0}", median(r));
    }
}
