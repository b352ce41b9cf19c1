//! Ingest measurement: PUSHB of 100 jobs from one Rust client over a std socket, pipelined.
//!
//! ```text
//! cargo run --release -p autobatch-broker --example ingest -- [memory|sqlite] [jobs] [window]
//! ```

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Instant;

use autobatch_broker::{BrokerConfig, EmbeddedBroker};
use autobatch_core::wire::{write_frame, Command, FrameDecoder, JobSpec, Value};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map(String::as_str).unwrap_or("memory");
    let total: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(200_000);
    let window: usize = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(8);
    let dir = std::env::temp_dir().join(format!("autobatch-ingest-{}", std::process::id()));
    let mut config = BrokerConfig::default();
    if mode == "sqlite" {
        config = config.data_path(dir.join("ingest.db"));
    }
    let broker = EmbeddedBroker::start(config).unwrap();
    let mut s = TcpStream::connect(broker.addr()).unwrap();
    s.set_nodelay(true).unwrap();
    let batch = 100;
    let batches = total / batch;
    let mut dec = FrameDecoder::new();
    let mut buf = vec![0u8; 256 * 1024];
    let (mut sent, mut done, mut in_flight) = (0usize, 0usize, 0usize);
    let mut out = Vec::new();
    let started = Instant::now();
    while done < batches {
        out.clear();
        while in_flight < window && sent < batches {
            let jobs = (0..batch)
                .map(|k| {
                    JobSpec::new(
                        "ingest",
                        Value::map([("i", Value::Int((sent * batch + k) as i64))]),
                    )
                })
                .collect();
            let cmd = Command::PushB {
                queue: "ingest".into(),
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
            assert!(n > 0, "broker closed");
            dec.extend(&buf[..n]);
        }
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{mode}: {} jobs in {:.3} s = {:.0} jobs/s (PUSHB of {batch}, window {window})",
        batches * batch,
        secs,
        (batches * batch) as f64 / secs
    );
    broker.stop().unwrap();
    let _ = std::fs::remove_dir_all(dir);
}
