//! Cost of the wire layer for one 50-job PUSHB exchange, both roles.
//!
//! Run with `cargo bench -p autobatch-core --bench wire`. Each benchmark handles one frame of
//! 50 jobs (or 50 ids); criterion reports bytes per second, and the time per job is the
//! reported time divided by 50.
//!
//! * `pushb50/encode`: client side, the PUSHB command into a frame;
//! * `pushb50/decode`: broker side, FrameDecoder + Value::decode + Command::decode;
//! * `reply50/encode`: broker side, the `{ok, ids:[50 UUIDs], reqId}` reply into a frame;
//! * `reply50/decode`: client side, FrameDecoder + Value::decode + Incoming::from_value +
//!   `response(PushB)`.
//! * `data/from_serialize`: what an add does to the caller's data (a small struct) before it
//!   is queued (`from_serialize_json`: the same data as a `serde_json::Value`);
//!   `data/deserialize`: a worker reading it back from a decoded frame.

use std::hint::black_box;

use autobatch_core::wire::server::{DecodeCommand, EncodeResponse};
use autobatch_core::wire::{
    write_frame, Command, CommandKind, FrameDecoder, Incoming, JobSpec, Response, Value,
};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

const JOBS: usize = 50;

fn pushb() -> Command {
    let jobs = (0..JOBS)
        .map(|i| {
            JobSpec::new(
                "send-email",
                Value::map([
                    ("to", Value::from(format!("user-{i}@example.com"))),
                    ("attempt", Value::Int(1)),
                    (
                        "tags",
                        Value::Array(vec![Value::from("welcome"), Value::from("email")]),
                    ),
                ]),
            )
        })
        .collect();
    Command::PushB {
        queue: "emails".into(),
        jobs,
    }
}

fn ids() -> Vec<String> {
    (0..JOBS)
        .map(|i| format!("01a22bd0-0e2e-714f-837e-ecc0bc23{i:04x}"))
        .collect()
}

fn frame_of(body: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut out = Vec::new();
    write_frame(&mut out, body).unwrap();
    out
}

fn wire(c: &mut Criterion) {
    let req_id = Value::from("1");
    let cmd = pushb();
    let request = frame_of(|b| cmd.encode(Some(&req_id), b));
    let reply = Response::PushedBatch(ids());
    let reply_frame = frame_of(|b| reply.encode(&req_id, b));

    let mut g = c.benchmark_group("pushb50");
    g.throughput(Throughput::Bytes(request.len() as u64));
    g.bench_function("encode", |b| {
        let mut out = Vec::with_capacity(request.len());
        b.iter(|| {
            out.clear();
            write_frame(&mut out, |buf| black_box(&cmd).encode(Some(&req_id), buf)).unwrap();
            black_box(&out);
        })
    });
    g.bench_function("decode", |b| {
        let mut frames = FrameDecoder::new();
        b.iter(|| {
            frames.extend(black_box(&request));
            let body = frames.next_frame().unwrap().unwrap();
            let (id, cmd) = Command::decode(&Value::decode(&body).unwrap());
            let Ok(Command::PushB { jobs, .. }) = cmd else {
                unreachable!()
            };
            assert_eq!(jobs.len(), JOBS);
            black_box((id, jobs));
        })
    });
    g.finish();

    let mut g = c.benchmark_group("reply50");
    g.throughput(Throughput::Bytes(reply_frame.len() as u64));
    g.bench_function("encode", |b| {
        let mut out = Vec::with_capacity(reply_frame.len());
        b.iter(|| {
            out.clear();
            write_frame(&mut out, |buf| black_box(&reply).encode(&req_id, buf)).unwrap();
            black_box(&out);
        })
    });
    g.bench_function("decode", |b| {
        let mut frames = FrameDecoder::new();
        b.iter(|| {
            frames.extend(black_box(&reply_frame));
            let body = frames.next_frame().unwrap().unwrap();
            let Ok(Incoming::Reply(r)) = Incoming::from_value(Value::decode(&body).unwrap()) else {
                unreachable!()
            };
            let Ok(Response::PushedBatch(ids)) = r.response(CommandKind::PushB) else {
                unreachable!()
            };
            assert_eq!(ids.len(), JOBS);
            black_box(ids);
        })
    });
    g.finish();
    eprintln!(
        "frame sizes: PUSHB of {JOBS} jobs = {} bytes, reply of {JOBS} ids = {} bytes",
        request.len(),
        reply_frame.len()
    );
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Email {
    to: String,
    attempt: u32,
    tags: Vec<String>,
    sent_at: u64,
}

fn data(c: &mut Criterion) {
    let email = Email {
        to: "user-1@example.com".into(),
        attempt: 1,
        tags: vec!["welcome".into(), "email".into()],
        sent_at: 1_700_000_000_000,
    };
    let mut g = c.benchmark_group("data");
    g.bench_function("from_serialize", |b| {
        b.iter(|| black_box(Value::from_serialize(black_box(&email)).unwrap()))
    });
    // The same data as a dynamic JSON value: a map either way, whatever the serializer.
    let json = serde_json::json!({
        "to": "user-1@example.com",
        "attempt": 1,
        "tags": ["welcome", "email"],
        "sent_at": 1_700_000_000_000u64,
    });
    g.bench_function("from_serialize_json", |b| {
        b.iter(|| black_box(Value::from_serialize(black_box(&json)).unwrap()))
    });
    let v = Value::from_serialize(&email).unwrap();
    let push = Value::map([("cmd", Value::from("PUSH")), ("data", v)]).to_bytes();
    let decoded = Value::decode(&push).unwrap();
    let data = decoded.get("data").unwrap();
    g.bench_function("deserialize", |b| {
        b.iter(|| black_box(black_box(data).deserialize::<Email>().unwrap()))
    });
    g.finish();
}

criterion_group!(benches, wire, data);
criterion_main!(benches);
