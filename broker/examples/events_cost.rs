//! What one event subscriber costs the embedded broker (memory mode): PUSHB of 100 jobs, 8 in
//! flight, from one std-socket client, with no subscriber and with one that reads every
//! `pushed` event of the queue, interleaved, median of the rounds.
//!
//! ```text
//! cargo run --release -p autobatch-broker --example events_cost -- [jobs] [rounds]
//! ```

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::thread;
use std::time::Instant;

use autobatch_broker::{BrokerConfig, EmbeddedBroker};
use autobatch_core::wire::{write_frame, Command, FrameDecoder, JobSpec, Value};

const BATCH: usize = 100;
const WINDOW: usize = 8;

/// One frame in, decoded frames out, over a blocking socket.
struct Conn {
    s: TcpStream,
    dec: FrameDecoder,
    buf: Vec<u8>,
}

impl Conn {
    fn new(addr: SocketAddr) -> Conn {
        let s = TcpStream::connect(addr).unwrap();
        s.set_nodelay(true).unwrap();
        Conn {
            s,
            dec: FrameDecoder::new(),
            buf: vec![0u8; 256 * 1024],
        }
    }

    fn recv(&mut self) -> Value {
        loop {
            if let Some(f) = self.dec.next_frame().unwrap() {
                return Value::decode(&f).unwrap();
            }
            let n = self.s.read(&mut self.buf).unwrap();
            assert!(n > 0, "broker closed");
            self.dec.extend(&self.buf[..n]);
        }
    }
}

/// Pushes `total` jobs to `queue`; returns jobs/s.
fn ingest(addr: SocketAddr, queue: &str, total: usize) -> f64 {
    let mut c = Conn::new(addr);
    let batches = total / BATCH;
    let (mut sent, mut done) = (0, 0);
    let mut out = Vec::new();
    let started = Instant::now();
    while done < batches {
        out.clear();
        while sent - done < WINDOW && sent < batches {
            let jobs = (0..BATCH)
                .map(|k| JobSpec::new("j", Value::map([("i", Value::Int(k as i64))])))
                .collect();
            let cmd = Command::PushB {
                queue: queue.into(),
                jobs,
            };
            write_frame(&mut out, |b| cmd.encode(Some(&Value::from("r")), b)).unwrap();
            sent += 1;
        }
        c.s.write_all(&out).unwrap();
        let r = c.recv();
        assert_eq!(r.get("ok"), Some(&Value::Bool(true)), "{r:?}");
        done += 1;
    }
    (batches * BATCH) as f64 / started.elapsed().as_secs_f64()
}

/// Subscribes to `queue` and reads until `expect` events came; returns once subscribed.
fn subscriber(addr: SocketAddr, queue: &str, expect: usize) -> thread::JoinHandle<()> {
    let mut c = Conn::new(addr);
    let cmd = Value::map([
        ("cmd", Value::from("SubscribeEvents")),
        ("queue", Value::from(queue)),
        ("reqId", Value::from("s")),
    ]);
    let mut out = Vec::new();
    write_frame(&mut out, |b| cmd.encode(b)).unwrap();
    c.s.write_all(&out).unwrap();
    assert_eq!(c.recv().get("ok"), Some(&Value::Bool(true)));
    thread::spawn(move || {
        let mut seen = 0;
        while seen < expect {
            if c.recv().get("type").and_then(Value::as_str) == Some("event") {
                seen += 1;
            }
        }
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let total: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let rounds: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(5);
    let broker = EmbeddedBroker::start(BrokerConfig::default()).unwrap();
    let (mut without, mut with) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        without.push(ingest(broker.addr(), &format!("plain-{round}"), total));
        let queue = format!("watched-{round}");
        let reader = subscriber(broker.addr(), &queue, total / BATCH * BATCH);
        with.push(ingest(broker.addr(), &queue, total));
        reader.join().unwrap();
    }
    println!("PUSHB of {BATCH}, {WINDOW} in flight, {total} jobs a run, median of {rounds}");
    println!("no subscriber:  {:>10.0} jobs/s", median(without));
    println!("one subscriber: {:>10.0} jobs/s", median(with));
}
