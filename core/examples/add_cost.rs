//! What one sequential add costs the session, in instructions: each add is written, answered
//! and resolved before the next is made, as `for … { queue.add(…).await }` does. Only the
//! session runs (replies are synthesised, no socket), so callgrind counts the client's own work.
//!
//! Run it under callgrind twice, batching off and on, and divide by the adds:
//!
//! ```text
//! cargo build --release -p autobatch-core --example add_cost
//! valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.off target/release/examples/add_cost off 20000
//! valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.on  target/release/examples/add_cost on 20000
//! ```
//!
//! The set-up (session, connection, the job) is the same in both runs and small next to 20,000
//! adds; subtracting a run of 0 adds removes it exactly if needed.

use std::time::{Duration, Instant};

use autobatch_core::session::{Event, Session, SessionConfig};
use autobatch_core::wire::server::EncodeResponse;
use autobatch_core::wire::{write_frame, FrameDecoder, JobSpec, Response, Value};

/// Answers every PUSH or PUSHB in `out` as the server would, as one byte buffer.
fn replies_for(out: &[u8], frames: &mut FrameDecoder, replies: &mut Vec<u8>) {
    frames.extend(out);
    while let Some(f) = frames.next_frame().expect("frame") {
        let v = Value::decode(&f).expect("msgpack");
        let id = || "01a22bd0-1624-71c8-8cb2-000000000001".to_owned();
        // Each command gets the reply of its own kind: the session checks the shape.
        let resp = match v.get("cmd").and_then(Value::as_str) {
            Some("PUSHB") => {
                let n = v
                    .get("jobs")
                    .and_then(Value::as_array)
                    .map_or(0, <[Value]>::len);
                Response::PushedBatch(vec![id(); n])
            }
            _ => Response::Pushed(id()),
        };
        write_frame(replies, |b| resp.encode(v.get("reqId").expect("reqId"), b))
            .expect("reply frame");
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let batching = match args.next().as_deref() {
        Some("on") => true,
        Some("off") => false,
        _ => {
            eprintln!("usage: add_cost on|off [adds]");
            std::process::exit(2);
        }
    };
    let adds: u64 = args.next().map_or(20_000, |n| n.parse().expect("adds"));

    let start = Instant::now();
    let mut config = SessionConfig::default().ping_interval(None);
    if !batching {
        config = config.without_batching();
    }
    let mut s = Session::new(config, start).expect("session");
    let mut out = Vec::new();
    let mut replies = Vec::new();
    s.poll_transmit(start, &mut out);
    while s.poll_event().is_some() {}
    s.handle_connected(start);
    let mut frames = FrameDecoder::new();
    let job = JobSpec::new(
        "email",
        Value::map([
            ("to", Value::from("user@example.com")),
            ("attempt", Value::Int(1)),
        ]),
    );
    let mut frames_sent = 0u64;
    for tick in 0..adds {
        // A clock that moves, as a real one does; the session never reads one itself.
        let now = start + Duration::from_micros(tick);
        let op = s.add(now, "emails", job.clone()).expect("add");
        let mut done = false;
        while !done {
            out.clear();
            if s.poll_transmit(now, &mut out) {
                frames_sent += 1;
            }
            replies.clear();
            replies_for(&out, &mut frames, &mut replies);
            s.handle_input(now, &replies);
            while let Some(e) = s.poll_event() {
                if let Event::Done { op: o, result } = e {
                    result.expect("add accepted");
                    done |= o == op;
                }
            }
        }
    }
    let st = s.stats();
    println!(
        "batching {}: {adds} adds, {frames_sent} writes, PUSH {} PUSHB {}",
        if batching { "on" } else { "off" },
        st.push_frames,
        st.pushb_frames,
    );
}
