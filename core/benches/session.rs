//! What the session itself costs per add, with the server's replies synthesised: a wave of 100
//! concurrent adds through batching into PUSHB frames, replies decoded, outcomes delivered.
//! Everything but the socket.
//!
//! ```text
//! cargo bench -p autobatch-core --bench session
//! ```

use std::time::{Duration, Instant};

use autobatch_core::session::{Event, Session, SessionConfig};
use autobatch_core::wire::server::EncodeResponse;
use autobatch_core::wire::{write_frame, FrameDecoder, JobSpec, Response, Value};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};

/// Answers every PUSHB in `out` with as many ids, and every PUSH with one, as one byte buffer.
/// Each gets the reply of its own kind: a lone add leaves as PUSH, and a PUSHB reply to it would
/// be a protocol error (measuring the error path instead).
fn replies_for(out: &[u8], frames: &mut FrameDecoder, ids: &[String]) -> Vec<u8> {
    frames.extend(out);
    let mut replies = Vec::new();
    while let Some(f) = frames.next_frame().unwrap() {
        let v = Value::decode(&f).unwrap();
        let resp = match v.get("jobs").and_then(Value::as_array) {
            Some(jobs) => Response::PushedBatch(ids[..jobs.len()].to_vec()),
            None => Response::Pushed(ids[0].clone()),
        };
        write_frame(&mut replies, |b| resp.encode(v.get("reqId").unwrap(), b)).unwrap();
    }
    replies
}

fn wave(c: &mut Criterion) {
    let ids: Vec<String> = (0..100)
        .map(|i| format!("01a22bd0-1624-71c8-8cb2-{i:012}"))
        .collect();
    let mut group = c.benchmark_group("session");
    for wave in [1usize, 100] {
        group.throughput(Throughput::Elements(wave as u64));
        group.bench_function(format!("wave_of_{wave}"), |b| {
            let start = Instant::now();
            let mut s = Session::new(SessionConfig::default().ping_interval(None), start).unwrap();
            let mut out = Vec::new();
            s.poll_transmit(start, &mut out);
            while s.poll_event().is_some() {}
            s.handle_connected(start);
            let mut frames = FrameDecoder::new();
            let mut tick = 0u64;
            let job = JobSpec::new(
                "email",
                Value::map([
                    ("to", Value::from("user@example.com")),
                    ("attempt", Value::Int(1)),
                ]),
            );
            b.iter_batched(
                || job.clone(),
                |job| {
                    tick += 1;
                    let now = start + Duration::from_micros(tick);
                    for _ in 0..wave {
                        s.add(now, "emails", job.clone()).unwrap();
                    }
                    let mut done = 0;
                    while done < wave {
                        out.clear();
                        s.poll_transmit(now, &mut out);
                        let replies = replies_for(&out, &mut frames, &ids);
                        s.handle_input(now, &replies);
                        while let Some(e) = s.poll_event() {
                            if let Event::Done { result, .. } = e {
                                result.expect("add accepted");
                                done += 1;
                            }
                        }
                    }
                },
                BatchSize::SmallInput,
            );
        });
    }
    group.finish();
}

criterion_group!(benches, wave);
criterion_main!(benches);
