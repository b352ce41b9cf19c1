//! Checks for the session and batcher fuzz targets, shared with the stable replay test
//! `core/tests/fuzz_session_corpus.rs` (both include this file with `#[path]`).
//!
//! The input is read as a little program: each byte picks an operation, the following bytes
//! are its arguments. Whatever the program, nothing may panic, every operation resolves at most
//! once, and after `close` plus enough (virtual) time, every operation has resolved.

#![allow(dead_code)]

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use autobatch_core::batch::{BatchConfig, Batcher, OverflowPolicy};
use autobatch_core::session::{Event, JobFailure, OpId, Session, SessionConfig, WorkerConfig};
use autobatch_core::wire::server::EncodeResponse;
use autobatch_core::wire::{write_frame, FrameDecoder, JobOptions, JobSpec, Response, Value};

struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn u8(&mut self) -> Option<u8> {
        let (b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(*b)
    }
    fn take(&mut self, n: usize) -> &[u8] {
        let n = n.min(self.0.len());
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        a
    }
}

struct Driver {
    s: Session,
    now: Instant,
    connected: bool,
    frames: FrameDecoder,
    /// Requests written and not answered by this driver, decoded.
    sent: VecDeque<Value>,
    ops: HashSet<OpId>,
    done: HashSet<OpId>,
    jobs: Vec<String>,
}

impl Driver {
    fn pump(&mut self) {
        let mut out = Vec::new();
        self.s.poll_transmit(self.now, &mut out);
        if self.connected {
            self.frames.extend(&out);
            while let Ok(Some(f)) = self.frames.next_frame() {
                if let Ok(v) = Value::decode(&f) {
                    self.sent.push_back(v);
                }
            }
        } else {
            assert!(out.is_empty(), "nothing is written while disconnected");
        }
        while let Some(e) = self.s.poll_event() {
            match e {
                Event::Done { op, .. } => {
                    assert!(self.ops.contains(&op), "outcome for an unknown op");
                    assert!(self.done.insert(op), "two outcomes for one op");
                }
                Event::Disconnect => {
                    self.connected = false;
                    self.frames = FrameDecoder::new();
                    self.sent.clear();
                }
                Event::Job { job } => self.jobs.push(job.id),
                // Connect, JobSettled, Closed, and whatever a newer core adds.
                _ => {}
            }
        }
    }

    /// A well-formed answer to the oldest request, so programs get past the first reply.
    fn answer(&mut self) {
        let Some(req) = self.sent.pop_front() else {
            return;
        };
        let req_id = req.get("reqId").cloned().unwrap_or(Value::Undefined);
        let response = match req.get("cmd").and_then(Value::as_str) {
            Some("PUSHB") => {
                let n = req
                    .get("jobs")
                    .and_then(Value::as_array)
                    .map_or(0, <[Value]>::len);
                Response::PushedBatch((0..n).map(|i| format!("j{i}")).collect())
            }
            Some("PUSH") => Response::Pushed("j".into()),
            Some("PULLB") => Response::PulledBatch {
                jobs: vec![autobatch_core::wire::Job::new(
                    format!("p{}", self.jobs.len()),
                    "",
                    "",
                    Value::Undefined,
                )],
                tokens: vec!["t".into()],
            },
            Some("ACKB") => Response::AckedBatch {
                ignored_indices: vec![],
                ignored_ids: vec![],
            },
            _ => Response::Done,
        };
        let mut bytes = Vec::new();
        write_frame(&mut bytes, |b| response.encode(&req_id, b)).unwrap();
        self.s.handle_input(self.now, &bytes);
    }
}

/// The session fed an arbitrary program of adds, server bytes, timeouts and disconnects.
pub fn session_input(data: &[u8]) {
    let mut input = Bytes(data);
    let flags = input.u8().unwrap_or(0);
    let base = Instant::now();
    let mut config = SessionConfig::default().command_timeout(Duration::from_secs(2));
    if flags & 1 != 0 {
        config.token = Some("t".into());
    }
    if flags & 2 != 0 {
        config.batching = None;
    }
    if flags & 4 != 0 {
        config.worker = Some(WorkerConfig::new("w").concurrency(3));
    }
    if let Some(b) = config.batching.as_mut() {
        b.max_batch = 1 + (flags as usize >> 4);
        b.max_pending_items = b.max_batch.max(8);
        b.overflow = match flags & 0x08 {
            0 => OverflowPolicy::Backpressure,
            _ => OverflowPolicy::DropOldest,
        };
    }
    let mut d = Driver {
        s: Session::new(config, base).unwrap(),
        now: base,
        connected: false,
        frames: FrameDecoder::new(),
        sent: VecDeque::new(),
        ops: HashSet::new(),
        done: HashSet::new(),
        jobs: Vec::new(),
    };
    let mut last_op = None;
    while let Some(op) = input.u8() {
        match op % 10 {
            0 | 1 => {
                let arg = input.u8().unwrap_or(0);
                let queue = ["a", "b", "bad queue", ""][arg as usize % 4];
                let mut opts = JobOptions::new();
                if arg & 0x10 != 0 {
                    opts = opts.job_id(format!("c{arg}"));
                }
                if arg & 0x20 != 0 {
                    opts = opts.durable(true);
                }
                if arg & 0x40 != 0 {
                    opts = opts.attempts(0);
                }
                let job = JobSpec::new("n", Value::Int(arg as i64)).with_options(opts);
                if let Ok(op) = d.s.add(d.now, queue, job) {
                    assert!(d.ops.insert(op));
                    last_op = Some(op);
                }
            }
            2 => {
                let n = input.u8().unwrap_or(0) as usize;
                let bytes = input.take(n).to_vec();
                if d.connected {
                    d.s.handle_input(d.now, &bytes);
                }
            }
            3 => {
                let ms = input.u8().unwrap_or(0) as u64 * 20;
                d.now += Duration::from_millis(ms);
                d.s.handle_timeout(d.now);
            }
            4 => {
                if d.connected {
                    d.connected = false;
                    d.s.handle_disconnected(d.now);
                } else {
                    d.connected = true;
                    d.s.handle_connected(d.now);
                }
            }
            5 => {
                if d.connected {
                    d.answer();
                }
            }
            6 => {
                if let Some(op) = last_op {
                    if d.s.cancel(op) {
                        d.ops.remove(&op);
                    }
                }
            }
            7 => {
                if let Some(id) = d.jobs.pop() {
                    let _ = d.s.complete_job(d.now, &id, Value::Nil);
                }
            }
            8 => {
                if let Some(id) = d.jobs.pop() {
                    let _ = d.s.fail_job(d.now, &id, JobFailure::new("boom"));
                }
            }
            _ => d.s.close(d.now),
        }
        d.pump();
    }
    // Wind down: finish held jobs, close, cut the connection, let every timer run out.
    while let Some(id) = d.jobs.pop() {
        let _ = d.s.complete_job(d.now, &id, Value::Nil);
    }
    d.s.close(d.now);
    d.pump();
    if d.connected {
        d.connected = false;
        d.s.handle_disconnected(d.now);
        d.pump();
    }
    for _ in 0..50 {
        if d.s.is_closed() {
            break;
        }
        d.now += Duration::from_millis(1500);
        d.s.handle_timeout(d.now);
        d.pump();
        // Refuse every reconnect: the server is gone for good.
        d.s.handle_connect_failed(d.now);
        d.pump();
    }
    assert!(d.s.is_closed(), "close never finished");
    let unresolved: Vec<_> = d.ops.difference(&d.done).collect();
    assert!(
        unresolved.is_empty(),
        "ops without an outcome: {unresolved:?}"
    );
}

/// The batcher fed an arbitrary sequence of pushes, completions, timeouts, cancels and close.
pub fn batcher_ops(data: &[u8]) {
    let mut input = Bytes(data);
    let flags = input.u8().unwrap_or(0);
    let config = BatchConfig::new()
        .max_batch(1 + (flags & 7) as usize)
        .linger(Duration::from_millis(1 + (flags >> 3 & 3) as u64 * 5))
        .max_in_flight(1 + (flags >> 5 & 3) as usize)
        .max_pending_items(16)
        .max_pending_bytes(64)
        .overflow(match flags >> 7 {
            0 => OverflowPolicy::Backpressure,
            _ => OverflowPolicy::DropOldest,
        });
    let max_batch = config.max_batch;
    let max_in_flight = config.max_in_flight;
    let mut b: Batcher<u32> = Batcher::new(config).unwrap();
    let mut now = Instant::now();
    let mut next = 0u32;
    let mut live: HashMap<u32, autobatch_core::batch::ItemId> = HashMap::new();
    let mut resolved: HashSet<u32> = HashSet::new();
    let mut in_flight = Vec::new();
    let drain = |b: &mut Batcher<u32>,
                 now: Instant,
                 in_flight: &mut Vec<_>,
                 resolved: &mut HashSet<u32>,
                 live: &mut HashMap<u32, _>| {
        while let Some(batch) = b.poll_batch(now) {
            assert!(!batch.items.is_empty() && batch.items.len() <= max_batch);
            for (_, item) in &batch.items {
                assert!(resolved.insert(*item), "item {item} resolved twice");
                live.remove(item);
            }
            in_flight.push(batch.id);
            assert!(in_flight.len() <= max_in_flight);
        }
        while let Some((_, item, _)) = b.poll_rejected() {
            assert!(resolved.insert(item), "item {item} resolved twice");
            live.remove(&item);
        }
    };
    while let Some(op) = input.u8() {
        match op % 5 {
            0 | 1 => {
                let bytes = (op >> 3) as usize;
                if let Ok((id, _)) = b.push(now, next, bytes) {
                    live.insert(next, id);
                } else {
                    resolved.insert(next);
                }
                next += 1;
            }
            2 => {
                if !in_flight.is_empty() {
                    let i = (op >> 3) as usize % in_flight.len();
                    let id = in_flight.remove(i);
                    b.complete(now, id);
                }
            }
            3 => {
                now += Duration::from_millis((op >> 3) as u64);
                b.handle_timeout(now);
            }
            _ => {
                if op & 0x80 != 0 {
                    b.close(now);
                } else if let Some((&item, &id)) = live.iter().min_by_key(|(k, _)| **k) {
                    if b.cancel(id).is_some() {
                        live.remove(&item);
                        assert!(resolved.insert(item));
                    }
                }
            }
        }
        drain(&mut b, now, &mut in_flight, &mut resolved, &mut live);
    }
    b.close(now);
    for _ in 0..10_000 {
        drain(&mut b, now, &mut in_flight, &mut resolved, &mut live);
        match in_flight.pop() {
            Some(id) => b.complete(now, id),
            None => break,
        }
    }
    drain(&mut b, now, &mut in_flight, &mut resolved, &mut live);
    assert!(b.is_drained(), "closed batcher not drained");
    assert_eq!(
        resolved.len() as u32,
        next,
        "every item resolves exactly once"
    );
}
