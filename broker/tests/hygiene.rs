//! Limits a hostile or broken client cannot get around, and a clean stop.
//!
//! Every assertion is about behaviour or ordering; time only appears as generous hang guards
//! (the socket read timeout of `Raw`, 20 s, and the `eventually` loops).

mod common;

use std::io::{ErrorKind, Read, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use autobatch_broker::{BrokerConfig, EmbeddedBroker};
use autobatch_core::wire::{write_frame, Value};
use common::*;

/// Polls `cond` until it holds; panics after a minute (a hang guard, not a threshold).
fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "never happened: {what}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A frame holding `v`.
fn frame_of(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    write_frame(&mut out, |b| b.extend_from_slice(&v.to_bytes())).unwrap();
    out
}

/// A Ping padded with `pad` bytes of binary, so its frame is about that large.
fn padded_ping(req_id: &str, pad: usize) -> Vec<u8> {
    frame_of(&Value::map([
        ("cmd", s("Ping")),
        ("reqId", s(req_id)),
        ("pad", Value::Bin(vec![7; pad])),
    ]))
}

/// Whether the peer closed the connection (EOF or reset) before sending anything more.
fn closed_without_more(c: &mut Raw) -> bool {
    let mut b = [0u8; 64];
    match c.s.read(&mut b) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) if matches!(e.kind(), ErrorKind::ConnectionReset | ErrorKind::BrokenPipe) => true,
        Err(e) => panic!("the connection stayed open: {e}"),
    }
}

// ---- 1. Pre-auth frame cap, and large decodes off the reactor ----

#[test]
fn unauthenticated_large_header_is_refused_before_its_body() {
    let b = EmbeddedBroker::start(BrokerConfig::default().auth_token("secret")).unwrap();
    let mut c = Raw::connect(b.addr());
    // Only the header: the broker must answer from it, without waiting for 1 MiB of body.
    c.send_bytes(&(1u32 << 20).to_be_bytes());
    let r = c.recv();
    assert!(
        err(&r).starts_with("Frame too large: 1048576 bytes exceeds maximum 65536"),
        "{r:?}"
    );
    assert_eq!(r.get("reqId"), Some(&Value::Undefined));
    assert!(c.at_eof(), "the broker closes after the error frame");
    // A frame of exactly the cap is still accepted before Auth (and refused as unauthenticated).
    let mut c = Raw::connect(b.addr());
    let body = Value::map([
        ("cmd", s("Ping")),
        ("reqId", s("p")),
        ("pad", Value::Bin(vec![1; 64 * 1024 - 20])),
    ])
    .to_bytes();
    let mut padded = body.clone();
    padded.resize(64 * 1024, 0xc0); // trailing bytes: "Invalid command format", not a close
    c.send_body(&padded);
    assert_eq!(err(&c.recv()), "Invalid command format");
    assert!(ok(&c.call("Auth", vec![("token", s("secret"))])));
}

#[test]
fn authenticated_clients_may_send_large_frames_even_pipelined_after_auth() {
    let b = EmbeddedBroker::start(BrokerConfig::default().auth_token("secret")).unwrap();
    let mut c = Raw::connect(b.addr());
    // Auth and a 1 MiB frame in one write: the cap applies to what precedes the Auth.
    let mut bytes = frame_of(&Value::map([
        ("cmd", s("Auth")),
        ("reqId", s("a")),
        ("token", s("secret")),
    ]));
    bytes.extend(padded_ping("big", 1 << 20));
    c.send_bytes(&bytes);
    let mut replies = vec![c.recv(), c.recv()];
    replies.sort_by_key(|r| r.get("reqId").and_then(Value::as_str).map(str::to_owned));
    assert!(ok(&replies[0]) && ok(&replies[1]), "{replies:?}");
    assert_eq!(replies[1].get("reqId"), Some(&s("big")));
    c.send_bytes(&padded_ping("big2", 2 << 20));
    assert!(ok(&c.recv()));
}

/// PUSH with an invalid queue name and, as data, an array32 of `n` nils: about `n` bytes on
/// the wire, a decode of `n` values (then refused: nothing is stored).
fn hostile_body(req_id: &str, n: u32) -> Vec<u8> {
    let mut body = Value::map([
        ("cmd", s("PUSH")),
        ("reqId", s(req_id)),
        ("queue", s("")),
        ("name", s("x")),
    ])
    .to_bytes();
    // A fixmap of 4 entries: make room for a 5th, `data`.
    assert_eq!(body[0], 0x84);
    body[0] = 0x85;
    body.extend_from_slice(&[0xa4, b'd', b'a', b't', b'a', 0xdd]);
    body.extend_from_slice(&n.to_be_bytes());
    body.resize(body.len() + n as usize, 0xc0);
    body
}

#[test]
fn huge_hostile_frames_do_not_stall_other_connections() {
    let b = EmbeddedBroker::start(BrokerConfig::default()).unwrap();
    let addr = b.addr();
    let mut pinger = Raw::connect(addr);
    assert!(ok(&pinger.call("Ping", vec![])));
    const CONNS: usize = 3;
    const FRAMES: usize = 3;
    const NILS: u32 = 16 * 1024 * 1024;
    let total = CONNS * FRAMES;
    let done = Arc::new(AtomicUsize::new(0));
    let hostile: Vec<_> = (0..CONNS)
        .map(|k| {
            let done = done.clone();
            std::thread::spawn(move || {
                let mut reader = Raw::connect(addr);
                reader
                    .s
                    .set_read_timeout(Some(Duration::from_secs(300)))
                    .unwrap();
                let mut w = reader.s.try_clone().unwrap();
                let writer = std::thread::spawn(move || {
                    for f in 0..FRAMES {
                        let mut out = Vec::new();
                        let body = hostile_body(&format!("h{k}-{f}"), NILS);
                        write_frame(&mut out, |b| b.extend_from_slice(&body)).unwrap();
                        w.write_all(&out).unwrap();
                    }
                });
                for _ in 0..FRAMES {
                    let r = reader.recv();
                    assert!(!ok(&r), "{r:?}");
                    done.fetch_add(1, Ordering::SeqCst);
                }
                writer.join().unwrap();
            })
        })
        .collect();
    // Once the flood is being decoded (a first hostile reply is out), many decodes remain.
    eventually("a first hostile reply", || done.load(Ordering::SeqCst) > 0);
    let before = done.load(Ordering::SeqCst);
    const PINGS: usize = 40;
    for _ in 0..PINGS {
        assert!(ok(&pinger.call("Ping", vec![])));
    }
    let after = done.load(Ordering::SeqCst);
    eprintln!("hostile frames done: {before} before the pings, {after} after, of {total}");
    for h in hostile {
        h.join().unwrap();
    }
    // Ordering, not time: the pings did not wait for the hostile work. Had they queued behind
    // the decodes (as when decodes ran on the runtime's workers), every hostile frame would be
    // done, or several would have finished during the pings; off the reactor, at most the few
    // decodes already running can finish meanwhile.
    assert!(
        after < total,
        "{PINGS} pings waited for every hostile decode ({after} of {total} done)"
    );
    assert!(
        after - before <= 2,
        "{} hostile decodes finished during {PINGS} pings",
        after - before
    );
}

// ---- 2. Connection limits and deadlines ----

#[test]
fn a_trickled_partial_frame_is_closed_at_its_fixed_deadline() {
    let b = EmbeddedBroker::start(
        BrokerConfig::default().partial_frame_timeout(Some(Duration::from_millis(500))),
    )
    .unwrap();
    let mut c = Raw::connect(b.addr());
    c.send_bytes(&1000u32.to_be_bytes());
    // One byte every 100 ms: a deadline that each read pushed back would never pass.
    let mut w = c.s.try_clone().unwrap();
    let trickle = std::thread::spawn(move || {
        for _ in 0..400 {
            std::thread::sleep(Duration::from_millis(100));
            if w.write_all(&[0xc0]).is_err() {
                return;
            }
        }
    });
    assert!(closed_without_more(&mut c), "no reply, just a close");
    // Others are served.
    let mut d = Raw::connect(b.addr());
    assert!(ok(&d.call("Ping", vec![])));
    drop(c);
    trickle.join().unwrap();
}

#[test]
fn connections_past_max_are_refused_and_existing_ones_keep_working() {
    let b = EmbeddedBroker::start(BrokerConfig::default().max_connections(2)).unwrap();
    let mut a = Raw::connect(b.addr());
    let mut c2 = Raw::connect(b.addr());
    assert!(ok(&a.call("Ping", vec![])));
    assert!(ok(&c2.call("Ping", vec![])));
    let mut refused = Raw::connect(b.addr());
    let r = refused.try_recv().expect("an error frame");
    assert_eq!(err(&r), "Too many connections");
    assert!(refused.at_eof());
    assert!(ok(&a.call("Ping", vec![])));
    assert!(ok(&c2.call("Ping", vec![])));
    // A slot freed is a slot taken again.
    drop(a);
    eventually("the closed connection is counted out", || {
        b.connection_count() == 1
    });
    let mut d = Raw::connect(b.addr());
    assert!(ok(&d.call("Ping", vec![])));
}

#[test]
fn partial_frame_budget_closes_the_connection_that_would_exceed_it() {
    let b = EmbeddedBroker::start(BrokerConfig::default().partial_frame_budget(1 << 20)).unwrap();
    // A holds 700 KiB of an incomplete (valid) frame.
    let mut a = Raw::connect(b.addr());
    let a_frame = padded_ping("a", 700 * 1024);
    let (a_head, a_tail) = a_frame.split_at(a_frame.len() - 10);
    a.send_bytes(a_head);
    eventually("A's bytes are buffered", || {
        b.partial_frame_bytes() >= 600 * 1024
    });
    // B's frame would take the total past 1 MiB.
    let mut bb = Raw::connect(b.addr());
    let b_frame = padded_ping("b", 700 * 1024);
    bb.send_bytes(&b_frame[..500 * 1024]);
    let r = bb.recv();
    assert!(err(&r).contains("buffer"), "{r:?}");
    assert!(closed_without_more(&mut bb));
    // Others keep working, and A's frame completes.
    let mut c = Raw::connect(b.addr());
    assert!(ok(&c.call("Ping", vec![])));
    a.send_bytes(a_tail);
    let r = a.recv();
    assert!(ok(&r));
    assert_eq!(r.get("reqId"), Some(&s("a")));
    eventually("the budget is given back", || b.partial_frame_bytes() == 0);
}

// ---- 3. Bounded per-queue bookkeeping ----

#[test]
fn pulls_on_many_empty_queues_leave_no_index_behind() {
    let b = EmbeddedBroker::start(BrokerConfig::default()).unwrap();
    let mut c = Raw::connect(b.addr());
    let baseline = b.queue_count();
    for chunk in 0..20 {
        let ids: Vec<String> = (0..500)
            .map(|i| {
                let q = s(&format!("empty-{chunk}-{i}"));
                match i % 3 {
                    0 => c.send("PULL", vec![("queue", q)]),
                    1 => c.send("PULLB", vec![("queue", q), ("count", int(5))]),
                    _ => c.send("PULL", vec![("queue", q), ("owner", s("w"))]),
                }
            })
            .collect();
        for _ in &ids {
            assert!(ok(&c.recv()));
        }
    }
    // Long-polls that time out leave too.
    for i in 0..10 {
        c.send(
            "PULL",
            vec![("queue", s(&format!("poll-{i}"))), ("timeout", int(50))],
        );
    }
    for _ in 0..10 {
        assert!(ok(&c.recv()));
    }
    eventually("the empty queues are forgotten", || {
        b.queue_count() == baseline
    });
    // A queue whose only job completes with removeOnComplete goes too; one with a job stays.
    let id = push(&mut c, "gone", int(1), vec![]);
    let (pulled, token) = pull_owned(&mut c, "gone").unwrap();
    assert_eq!(pulled, id);
    assert!(ok(&c.call(
        "ACK",
        vec![
            ("id", s(&id)),
            ("token", s(&token)),
            ("removeOnComplete", Value::Bool(true))
        ]
    )));
    push(&mut c, "kept", int(1), vec![]);
    assert_eq!(b.queue_count(), baseline + 1);
    assert_eq!(
        c.call("Count", vec![("queue", s("kept"))]).get("count"),
        Some(&int(1))
    );
}

// ---- 4. A request answered next to an oversized header ----

#[test]
fn a_request_before_an_oversized_header_is_answered_first() {
    let b = EmbeddedBroker::start(BrokerConfig::default()).unwrap();
    let mut other = Raw::connect(b.addr());
    for round in 0..5 {
        let mut c = Raw::connect(b.addr());
        let mut bytes = frame_of(&Value::map([
            ("cmd", s("PUSH")),
            ("reqId", s("p")),
            ("queue", s("q4")),
            ("name", s("j")),
            ("data", int(round)),
        ]));
        bytes.extend_from_slice(&(64u32 * 1024 * 1024 + 1).to_be_bytes());
        c.send_bytes(&bytes);
        let pushed = c.recv();
        assert!(ok(&pushed), "round {round}: {pushed:?}");
        assert_eq!(pushed.get("reqId"), Some(&s("p")));
        let id = pushed.get("id").and_then(Value::as_str).unwrap().to_owned();
        let r = c.recv();
        assert_eq!(
            err(&r),
            "Frame too large: 67108865 bytes exceeds maximum 67108864"
        );
        assert!(c.at_eof());
        assert_eq!(state(&mut other, &id), "waiting");
    }
}

// ---- 5. Shutdown ----

#[test]
fn stopping_answers_a_parked_long_poll_before_closing() {
    let b = EmbeddedBroker::start(BrokerConfig::default()).unwrap();
    let mut c = Raw::connect(b.addr());
    c.send(
        "PULL",
        vec![("queue", s("never")), ("timeout", int(60_000))],
    );
    // Ping answered: the pull above is parked, not stuck in the read loop.
    let id = c.send("Ping", vec![]);
    assert_eq!(c.recv().get("reqId"), Some(&s(&id)));
    let stopper = std::thread::spawn(move || b.stop());
    // The parked pull is answered (empty) before the close.
    let r = c.try_recv().expect("the long-poll's reply");
    assert!(ok(&r), "{r:?}");
    assert_eq!(r.get("job"), Some(&Value::Nil));
    assert!(c.at_eof());
    stopper.join().unwrap().unwrap();
}
