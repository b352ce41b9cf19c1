//! What an add costs the session, in instructions. Only the session runs (replies are
//! synthesised, no socket), so callgrind counts the client's own work.
//!
//! `add_cost on|off ADDS [WAVE]` makes ADDS adds in waves of WAVE concurrent adds (default 1:
//! each add is written, answered and resolved before the next is made, as
//! `for … { queue.add(…).await }` does). A wave is added all at once, then every frame the
//! session writes is answered at once (one read of all the replies), until the wave is done:
//! how `join_all` over WAVE adds runs against a fast server.
//!
//! Run it under callgrind, and subtract a run of 0 adds (the set-up) to get the cost per add:
//!
//! ```text
//! cargo build --release -p autobatch-core --example add_cost
//! valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.0 target/release/examples/add_cost on 0
//! valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.1 target/release/examples/add_cost on 20000 100
//! ```
//!
//! That total includes the synthesised server (decoding each frame, encoding its reply). To
//! count the session alone, collect only inside its methods:
//!
//! ```text
//! valgrind --tool=callgrind --toggle-collect='autobatch_core::session::machine::Session::*' \
//!     target/release/examples/add_cost on 20000 100
//! ```

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
            eprintln!("usage: add_cost on|off [adds] [wave]");
            std::process::exit(2);
        }
    };
    let adds: u64 = args.next().map_or(20_000, |n| n.parse().expect("adds"));
    let wave: u64 = args.next().map_or(1, |n| n.parse().expect("wave"));
    assert!(wave > 0, "a wave has at least one add");

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
    let mut writes = 0u64;
    let mut made = 0u64;
    // A clock that moves, as a real one does; the session never reads one itself.
    let mut tick = 0u64;
    while made < adds {
        tick += 1;
        let mut now = start + Duration::from_micros(tick);
        let n = wave.min(adds - made);
        for _ in 0..n {
            s.add(now, "emails", job.clone()).expect("add");
        }
        made += n;
        let mut done = 0;
        while done < n {
            out.clear();
            if s.poll_transmit(now, &mut out) {
                writes += 1;
            } else if let Some(t) = s.poll_timeout() {
                // Nothing may be written yet (a linger, say): the driver sleeps until then.
                now = now.max(t);
                s.handle_timeout(now);
                continue;
            }
            replies.clear();
            replies_for(&out, &mut frames, &mut replies);
            s.handle_input(now, &replies);
            while let Some(e) = s.poll_event() {
                if let Event::Done { result, .. } = e {
                    result.expect("add accepted");
                    done += 1;
                }
            }
        }
    }
    let st = s.stats();
    println!(
        "batching {}: {adds} adds in waves of {wave}, {writes} writes, PUSH {} PUSHB {}",
        if batching { "on" } else { "off" },
        st.push_frames,
        st.pushb_frames,
    );
}
