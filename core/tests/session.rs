//! The session state machine driven by hand: no sockets, no clock, every byte checked.
//!
//! Where a captured conversation exists (`vectors/04_add_concurrent.jsonl`,
//! `vectors/06_worker_ack.jsonl`, `vectors/09_auth.jsonl`), the server's real reply frames are fed
//! back verbatim: the official client numbers reqIds from "1" per connection, and so do we.

use std::time::{Duration, Instant};

use autobatch_core::batch::{BatchConfig, OverflowPolicy};
use autobatch_core::session::{
    Event, JobFailure, OpId, PendingAdds, ReconnectConfig, Release, Session, SessionConfig,
    WorkerConfig,
};
use autobatch_core::wire::server::encode_error;
use autobatch_core::wire::{
    write_frame, Command, EncodedJob, FrameDecoder, JobOptions, JobSpec, PullArgs, Response, Value,
};
use autobatch_core::Error;

struct Harness {
    s: Session,
    now: Instant,
    frames: FrameDecoder,
    /// Requests written since the last `take_sent`, decoded.
    sent: Vec<Value>,
    /// Body length of every frame written, read from its header before anything decodes it.
    frame_lens: Vec<usize>,
    events: Vec<Event>,
}

impl Harness {
    fn new(config: SessionConfig) -> Harness {
        let now = Instant::now();
        let s = Session::new(config, now).unwrap();
        let mut h = Harness {
            s,
            now,
            frames: FrameDecoder::new(),
            sent: Vec::new(),
            frame_lens: Vec::new(),
            events: Vec::new(),
        };
        h.step();
        assert!(h.take_events().contains(&Event::Connect));
        h
    }

    fn connected(config: SessionConfig) -> Harness {
        let mut h = Harness::new(config);
        h.s.handle_connected(h.now);
        h.step();
        h
    }

    fn step(&mut self) {
        let mut out = Vec::new();
        self.s.poll_transmit(self.now, &mut out);
        let mut i = 0;
        while i + 4 <= out.len() {
            let n = u32::from_be_bytes([out[i], out[i + 1], out[i + 2], out[i + 3]]) as usize;
            self.frame_lens.push(n);
            i += 4 + n;
        }
        self.frames.extend(&out);
        while let Some(f) = self.frames.next_frame().unwrap() {
            self.sent.push(Value::decode(&f).unwrap());
        }
        while let Some(e) = self.s.poll_event() {
            self.events.push(e);
        }
    }

    fn take_sent(&mut self) -> Vec<Value> {
        std::mem::take(&mut self.sent)
    }

    fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    fn add(&mut self, queue: &str, n: i64) -> OpId {
        let op = self
            .s
            .add(
                self.now,
                queue,
                JobSpec::new("job", Value::map([("n", Value::Int(n))])),
            )
            .unwrap();
        self.step();
        op
    }

    fn feed(&mut self, reply: &Value) {
        let mut out = Vec::new();
        write_frame(&mut out, |b| reply.encode(b)).unwrap();
        self.s.handle_input(self.now, &out);
        self.step();
    }

    fn feed_hex(&mut self, hex: &str) {
        self.s.handle_input(self.now, &unhex(hex));
        self.step();
    }

    fn advance(&mut self, d: Duration) {
        self.now += d;
        self.s.handle_timeout(self.now);
        self.step();
    }

    /// Answers a PUSHB/PUSH the way the server does, with ids `id-<reqId>-<i>`.
    fn answer_push(&mut self, req: &Value) {
        let req_id = req.get("reqId").unwrap().clone();
        let reply = match req.get("cmd").and_then(Value::as_str) {
            Some("PUSHB") => {
                let n = req.get("jobs").unwrap().as_array().unwrap().len();
                let ids = (0..n)
                    .map(|i| Value::Str(format!("id-{}-{i}", req_id.as_str().unwrap())))
                    .collect();
                Value::map([
                    ("ok", Value::Bool(true)),
                    ("ids", Value::Array(ids)),
                    ("reqId", req_id),
                ])
            }
            Some("PUSH") => Value::map([
                ("ok", Value::Bool(true)),
                ("id", Value::Str(format!("id-{}", req_id.as_str().unwrap()))),
                ("reqId", req_id),
            ]),
            other => panic!("not a push: {other:?}"),
        };
        self.feed(&reply);
    }

    /// Answers `req` with the server's error `msg`.
    fn answer_error(&mut self, req: &Value, msg: &str) {
        self.feed(&Value::map([
            ("ok", Value::Bool(false)),
            ("error", Value::from(msg)),
            ("reqId", req.get("reqId").unwrap().clone()),
        ]));
    }

    /// Answers the one Stats written since the last `take_sent` with a server up for
    /// `uptime_ms`.
    fn answer_uptime(&mut self, uptime_ms: i64) {
        let sent = self.take_sent();
        assert_eq!(sent.len(), 1, "{sent:?}");
        assert_eq!(cmd(&sent[0]), "Stats");
        let stats = [
            "waiting",
            "active",
            "delayed",
            "dlq",
            "completed",
            "failed",
            "pushPerSec",
            "pullPerSec",
        ]
        .into_iter()
        .map(|k| (k, Value::Int(0)))
        .chain([("uptime", Value::Int(uptime_ms))]);
        self.feed(&Value::map([
            ("ok", Value::Bool(true)),
            ("stats", Value::map(stats)),
            ("reqId", sent[0].get("reqId").unwrap().clone()),
        ]));
    }

    /// Answers a GetJob with a job whose id is `id`.
    fn answer_job(&mut self, req: &Value, id: &str) {
        self.feed(&Value::map([
            ("ok", Value::Bool(true)),
            ("job", Value::map([("id", Value::from(id))])),
            ("reqId", req.get("reqId").unwrap().clone()),
        ]));
    }

    fn done(&self, op: OpId) -> Option<&Result<Response, Error>> {
        self.events.iter().find_map(|e| match e {
            Event::Done { op: o, result } if *o == op => Some(result),
            _ => None,
        })
    }
}

/// The lines of a captured conversation (`vectors/*.jsonl`).
fn vector(jsonl: &str) -> Vec<serde_json::Value> {
    jsonl
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn cmd(v: &Value) -> &str {
    v.get("cmd").and_then(Value::as_str).unwrap()
}

/// Jobs in an add frame: a PUSH holds one, a PUSHB its `jobs`.
fn jobs_in(v: &Value) -> usize {
    if cmd(v) == "PUSH" {
        return 1;
    }
    v.get("jobs")
        .and_then(Value::as_array)
        .map_or(0, <[Value]>::len)
}

fn ok() -> SessionConfig {
    SessionConfig::default().ping_interval(None)
}

#[test]
fn sequential_adds_go_out_at_once_with_no_timer() {
    let mut h = Harness::connected(ok());
    for i in 0..5 {
        let op = h.add("q", i);
        let sent = h.take_sent();
        assert_eq!(sent.len(), 1, "one frame per add");
        // A batch of one is the PUSH it is: what batching off sends too.
        assert_eq!(cmd(&sent[0]), "PUSH");
        assert_eq!(sent[0].get("jobId"), None, "no custom id was given");
        // Only the command timeout is pending: no linger timer for an idle add.
        let t = h.s.poll_timeout().unwrap();
        assert!(
            t >= h.now + Duration::from_secs(29),
            "no linger timer armed"
        );
        h.answer_push(&sent[0]);
        assert!(matches!(h.done(op), Some(Ok(Response::Pushed(_)))));
    }
    let stats: Vec<_> = h.s.batch_stats().collect();
    assert_eq!(stats.len(), 1);
    assert_eq!(h.s.stats().flushes[0], 5, "five idle flushes");
    assert_eq!(h.s.stats().flushes[1..].iter().sum::<u64>(), 0);
}

/// The official client turned 25 concurrent adds into PUSHB(1) + PUSHB(24) (vector 04). Feed the
/// server's captured replies back: reqIds "1" and "2" line up.
#[test]
fn twenty_five_concurrent_adds_replay_vector_04() {
    let lines = vector(include_str!("vectors/04_add_concurrent.jsonl"));
    let replies: Vec<&str> = lines
        .iter()
        .filter(|l| l["dir"] == "s2c")
        .map(|l| l["hex"].as_str().unwrap())
        .collect();
    let mut h = Harness::connected(ok());
    let ops: Vec<OpId> = (0..25).map(|i| h.add("thumbnails", i)).collect();
    let sent = h.take_sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(
        cmd(&sent[0]),
        "PUSH",
        "the first add finds nothing in flight"
    );
    // The TS client sent it as a PUSHB of one; answer our PUSH with the id it got.
    let first = Value::decode(&unhex(replies[0])[4..]).unwrap();
    let id = first.get("ids").unwrap().as_array().unwrap()[0].clone();
    h.feed(&Value::map([
        ("ok", Value::Bool(true)),
        ("id", id),
        ("reqId", Value::from("1")),
    ]));
    let sent = h.take_sent();
    assert_eq!(
        sent.len(),
        1,
        "the 24 buffered adds leave in one PUSHB on completion"
    );
    assert_eq!(jobs_in(&sent[0]), 24);
    assert_eq!(sent[0].get("reqId"), Some(&Value::from("2")));
    h.feed_hex(replies[1]);
    let ids: Vec<String> = ops
        .iter()
        .map(|op| match h.done(*op) {
            Some(Ok(Response::Pushed(id))) => id.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(ids[0], "01a22bd0-1620-705f-a984-b42f5f85412a");
    assert_eq!(ids[1], "01a22bd0-1624-71c8-8cb2-436ccaa23b07");
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 25);
}

#[test]
fn linger_and_size_flush_while_a_batch_is_in_flight() {
    let mut h = Harness::connected(ok());
    h.add("q", 0);
    let first = h.take_sent();
    assert_eq!(first.len(), 1);
    // Buffered behind the in-flight batch; the linger timer is armed.
    h.add("q", 1);
    assert!(h.take_sent().is_empty());
    assert_eq!(h.s.poll_timeout(), Some(h.now + Duration::from_millis(5)));
    h.advance(Duration::from_millis(5));
    let sent = h.take_sent();
    assert_eq!(sent.len(), 1, "linger flush");
    assert_eq!(jobs_in(&sent[0]), 1);
    // 50 more: a size flush without waiting.
    for i in 0..50 {
        h.add("q", i);
    }
    let sent = h.take_sent();
    assert_eq!(sent.iter().map(jobs_in).collect::<Vec<_>>(), vec![50]);
}

/// The lone-add shortcut must not cost batching: adds made before the session is next polled
/// all leave together, the first one included (deciding in `add` would send it alone).
#[test]
fn a_wave_made_before_a_poll_leaves_in_one_pushb() {
    let mut h = Harness::connected(ok());
    let ops: Vec<OpId> = (0..10)
        .map(|i| {
            h.s.add(h.now, "q", JobSpec::new("j", Value::Int(i)))
                .unwrap()
        })
        .collect();
    assert_eq!(h.s.pending_adds().items, 10, "all ten wait for the poll");
    h.step();
    let sent = h.take_sent();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(cmd(&sent[0]), "PUSHB");
    assert_eq!(jobs_in(&sent[0]), 10);
    h.answer_push(&sent[0]);
    assert!(ops.iter().all(|op| matches!(h.done(*op), Some(Ok(_)))));
    // Waves of 100 leave as two PUSHB of max_batch (50), as before.
    for i in 0..100 {
        h.s.add(h.now, "q", JobSpec::new("j", Value::Int(i)))
            .unwrap();
    }
    h.step();
    let sent = h.take_sent();
    assert_eq!(sent.iter().map(jobs_in).collect::<Vec<_>>(), vec![50, 50]);
    assert!(sent.iter().all(|s| cmd(s) == "PUSHB"));
}

/// A lone add leaves as PUSH (with `jobId`, not PUSHB's `customId`) and holds its queue's
/// in-flight slot as a batch would: an add made while it is out is buffered and batched.
#[test]
fn a_lone_add_leaves_as_push_and_holds_the_slot() {
    let mut h = Harness::connected(ok());
    let job = JobSpec::new("j", Value::Nil).with_options(JobOptions::new().job_id("c1"));
    let first = h.s.add(h.now, "q", job).unwrap();
    h.step();
    let sent = h.take_sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(cmd(&sent[0]), "PUSH");
    assert_eq!(sent[0].get("jobId"), Some(&Value::from("c1")));
    assert_eq!(sent[0].get("customId"), None);
    // The slot is taken: these wait behind it (linger) instead of leaving at once.
    let job = JobSpec::new("j", Value::Nil).with_options(JobOptions::new().job_id("c2"));
    let second = h.s.add(h.now, "q", job).unwrap();
    let third = h.add("q", 3);
    assert!(h.take_sent().is_empty(), "buffered behind the PUSH");
    assert_eq!(h.s.pending_adds().items, 2);
    assert_eq!(h.s.poll_timeout(), Some(h.now + Duration::from_millis(5)));
    h.answer_push(&sent[0]);
    assert!(matches!(h.done(first), Some(Ok(Response::Pushed(_)))));
    // Its completion sends the two waiting as one PUSHB, custom ids as `customId`.
    let sent = h.take_sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(cmd(&sent[0]), "PUSHB");
    let items = sent[0].get("jobs").unwrap().as_array().unwrap();
    assert_eq!(items[0].get("customId"), Some(&Value::from("c2")));
    assert_eq!(items[0].get("jobId"), None);
    h.answer_push(&sent[0]);
    assert!(matches!(h.done(second), Some(Ok(_))));
    assert!(matches!(h.done(third), Some(Ok(_))));
    // Counted as the idle flushes they are.
    let stats: Vec<_> = h.s.batch_stats().collect();
    assert_eq!(stats[0].1.batches, 2);
    assert_eq!(stats[0].1.items_sent, 3);
    assert_eq!(h.s.stats().push_frames, 1);
    assert_eq!(h.s.stats().pushb_frames, 1);
}

/// An add not yet polled can be withdrawn as a buffered one can: nothing is sent, no outcome.
#[test]
fn a_held_add_can_be_cancelled() {
    let mut h = Harness::connected(ok());
    let op = h.s.add(h.now, "q", JobSpec::new("j", Value::Nil)).unwrap();
    assert!(h.s.cancel(op));
    assert!(!h.s.cancel(op), "only once");
    h.step();
    assert!(h.take_sent().is_empty());
    assert!(h.done(op).is_none());
    assert_eq!(h.s.stats().adds_cancelled, 1);
    assert_eq!(h.s.pending_adds(), PendingAdds::default());
    // The queue is idle again: the next add goes out alone at once.
    h.add("q", 1);
    let sent = h.take_sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(cmd(&sent[0]), "PUSH");
}

/// An add not polled within its command timeout fails as a buffered one does, never applied,
/// and its deadline is armed.
#[test]
fn a_held_add_expires_like_a_buffered_one() {
    let timeout = Duration::from_secs(2);
    let mut h = Harness::connected(ok().command_timeout(timeout));
    let op = h.s.add(h.now, "q", JobSpec::new("j", Value::Nil)).unwrap();
    assert_eq!(h.s.poll_timeout(), Some(h.now + timeout));
    h.now += timeout;
    h.s.handle_timeout(h.now);
    assert_eq!(h.s.pending_adds(), PendingAdds::default());
    h.step();
    assert!(h.take_sent().is_empty(), "an expired add is never written");
    assert_eq!(
        h.done(op),
        Some(&Err(Error::Timeout {
            maybe_applied: false
        }))
    );
    assert!(!h.s.cancel(op));
}

/// Closing with an add not yet polled sends it, flushed by the close, before reporting closed.
#[test]
fn close_sends_a_held_add() {
    let mut h = Harness::connected(ok());
    let op = h.s.add(h.now, "q", JobSpec::new("j", Value::Nil)).unwrap();
    h.s.close(h.now);
    h.step();
    let sent = h.take_sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(cmd(&sent[0]), "PUSH");
    assert!(!h.take_events().contains(&Event::Closed));
    h.answer_push(&sent[0]);
    assert!(matches!(h.done(op), Some(Ok(Response::Pushed(_)))));
    assert!(h.take_events().contains(&Event::Closed));
    assert_eq!(h.s.stats().flushes[4], 1, "a close flush");
}

#[test]
fn durable_adds_bypass_the_batcher_as_push() {
    let mut h = Harness::connected(ok());
    h.add("q", 0); // a batch in flight
    h.take_sent();
    let job = JobSpec::new("j", Value::Nil).with_options(JobOptions::new().durable(true));
    let op = h.s.add(h.now, "q", job).unwrap();
    h.step();
    let sent = h.take_sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(cmd(&sent[0]), "PUSH");
    assert_eq!(sent[0].get("durable"), Some(&Value::Bool(true)));
    h.answer_push(&sent[0]);
    assert!(matches!(h.done(op), Some(Ok(Response::Pushed(_)))));
    let st = h.s.stats();
    assert_eq!((st.adds, st.adds_direct, st.adds_ok), (2, 1, 1));
}

#[test]
fn batching_off_sends_each_add_as_its_own_push() {
    let mut h = Harness::connected(ok().without_batching());
    for i in 0..10 {
        h.add("q", i);
    }
    let sent = h.take_sent();
    assert_eq!(sent.len(), 10);
    assert!(sent.iter().all(|s| cmd(s) == "PUSH"));
    assert_eq!(h.s.stats().adds_direct, 10);
    assert_eq!(h.s.stats().batches_sent, 0, "no batcher");
}

#[test]
fn bad_input_fails_alone_before_anything_is_sent() {
    let mut h = Harness::connected(ok());
    let bad_queue = h.s.add(h.now, "bad queue", JobSpec::new("j", Value::Nil));
    assert!(matches!(bad_queue, Err(Error::Invalid(ref e)) if e.field == "queue"));
    let bad_opts = h.s.add(
        h.now,
        "q",
        JobSpec::new("j", Value::Nil).with_options(JobOptions::new().attempts(0)),
    );
    assert!(matches!(bad_opts, Err(Error::Invalid(ref e)) if e.field == "maxAttempts"));
    let big = Value::Str("x".repeat(11 * 1024 * 1024));
    assert!(matches!(
        h.s.add(h.now, "q", JobSpec::new("j", big)),
        Err(Error::Invalid(_))
    ));
    h.step();
    assert!(h.take_sent().is_empty());
}

#[test]
fn a_pushb_refused_for_one_job_fails_that_job_alone() {
    let mut h = Harness::connected(ok());
    h.add("q", 0);
    let first = h.take_sent();
    let ops: Vec<OpId> = (1..=3).map(|i| h.add("q", i)).collect();
    h.answer_push(&first[0]);
    let batch = h.take_sent();
    assert_eq!(jobs_in(&batch[0]), 3);
    let mut out = Vec::new();
    encode_error(
        batch[0].get("reqId").unwrap(),
        "jobs[1]: priority must be an integer",
        &mut out,
    );
    h.feed(&Value::decode(&out).unwrap());
    assert_eq!(
        h.done(ops[1]),
        Some(&Err(Error::Server("priority must be an integer".into())))
    );
    assert!(
        h.done(ops[0]).is_none() && h.done(ops[2]).is_none(),
        "neighbours still pending"
    );
    let again = h.take_sent();
    assert_eq!(again.len(), 1);
    assert_eq!(jobs_in(&again[0]), 2, "the two good jobs go again");
    h.answer_push(&again[0]);
    assert!(matches!(h.done(ops[0]), Some(Ok(_))));
    assert!(matches!(h.done(ops[2]), Some(Ok(_))));
}

#[test]
fn lost_connection_fails_plain_adds_and_resends_custom_ids() {
    let mut h = Harness::connected(ok());
    let plain = h.add("q", 0);
    let custom =
        h.s.add(
            h.now,
            "q",
            JobSpec::new("j", Value::Nil).with_options(JobOptions::new().job_id("c1")),
        )
        .unwrap();
    h.step();
    // First batch (plain) is out; the custom one waits behind it. Flush it by linger.
    h.advance(Duration::from_millis(5));
    assert_eq!(h.take_sent().len(), 2);
    h.s.handle_disconnected(h.now);
    h.step();
    assert_eq!(
        h.done(plain),
        Some(&Err(Error::ConnectionLost {
            maybe_applied: true
        }))
    );
    assert!(
        h.done(custom).is_none(),
        "an add with a custom id is re-sent, not failed"
    );
    // Reconnect after the backoff (100 ms + up to 30 % jitter).
    let at = h.s.poll_timeout().unwrap();
    assert!(at >= h.now + Duration::from_millis(100) && at <= h.now + Duration::from_millis(130));
    h.advance(at - h.now);
    assert!(h.take_events().contains(&Event::Connect));
    h.s.handle_connected(h.now);
    h.step();
    // It is looked up first: a job that landed, and finished meanwhile, frees its id, and
    // a blind replay would run it again.
    let sent = h.take_sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(cmd(&sent[0]), "GetJob");
    assert_eq!(sent[0].get("id"), Some(&Value::from("c1")));
    h.answer_error(&sent[0], "Job not found");
    // No job has the id, on the server that took the add (up since before it was written):
    // alone, it goes again as a PUSH, its custom id as `jobId`.
    h.answer_uptime(HOUR_MS);
    let sent = h.take_sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(cmd(&sent[0]), "PUSH");
    assert_eq!(sent[0].get("jobId"), Some(&Value::from("c1")));
    h.answer_push(&sent[0]);
    assert!(matches!(h.done(custom), Some(Ok(_))));
    assert_eq!(h.s.stats().items_resent, 1);
}

/// A server's uptime long past anything a test's connections do: it took the adds.
const HOUR_MS: i64 = 3_600_000;

/// Adds with custom ids `ids` made in one go, then flushed: the first leaves alone as a PUSH,
/// the rest as one PUSHB behind it.
fn written_custom_adds(h: &mut Harness, ids: &[&str], opts: JobOptions) -> Vec<OpId> {
    let ops = ids
        .iter()
        .map(|id| {
            let job = JobSpec::new("j", Value::Nil).with_options(opts.clone().job_id(*id));
            let op = h.s.add(h.now, "q", job).unwrap();
            h.step();
            op
        })
        .collect();
    h.advance(Duration::from_millis(5));
    ops
}

/// Drops the connection and reconnects after the backoff: what is sent first on the new one.
fn reconnect(h: &mut Harness) -> Vec<Value> {
    let connects = |h: &Harness| h.events.iter().filter(|e| **e == Event::Connect).count();
    let before = connects(h);
    h.s.handle_disconnected(h.now);
    h.step();
    let at = h.s.poll_timeout().unwrap();
    h.advance(at - h.now);
    assert_eq!(
        connects(h),
        before + 1,
        "asks to reconnect after the backoff"
    );
    h.s.handle_connected(h.now);
    h.step();
    h.take_sent()
}

#[test]
fn written_custom_id_adds_are_answered_by_their_lookup_or_go_again() {
    let mut h = Harness::connected(ok());
    let ops = written_custom_adds(&mut h, &["c0", "c1", "c2", "c3"], JobOptions::new());
    let sent = h.take_sent();
    assert_eq!(
        sent.iter().map(cmd).collect::<Vec<_>>(),
        ["PUSH", "PUSHB"],
        "{sent:?}"
    );
    let lookups = reconnect(&mut h);
    let looked_up: Vec<_> = lookups
        .iter()
        .map(|l| (cmd(l), l.get("id").cloned()))
        .collect();
    let want: Vec<_> = ["c0", "c1", "c2", "c3"]
        .iter()
        .map(|id| ("GetJob", Some(Value::from(*id))))
        .collect();
    assert_eq!(looked_up, want, "one lookup per add, in add order");
    // c0 and c2 landed (c2 may even have finished: a lookup finds that too); c1 did not; the
    // lookup of c3 is refused for another reason, so its add's fate stays unknown.
    h.answer_job(&lookups[0], "c0");
    h.answer_error(&lookups[1], "Job not found");
    h.answer_job(&lookups[2], "c2");
    h.answer_error(&lookups[3], "Rate limit exceeded");
    h.answer_uptime(HOUR_MS);
    assert_eq!(h.done(ops[0]), Some(&Ok(Response::Pushed("c0".into()))));
    assert_eq!(h.done(ops[2]), Some(&Ok(Response::Pushed("c2".into()))));
    let unknown = Err(Error::ConnectionLost {
        maybe_applied: true,
    });
    assert_eq!(h.done(ops[3]), Some(&unknown));
    assert!(h.done(ops[1]).is_none(), "c1 goes again");
    let again = h.take_sent();
    assert_eq!(again.len(), 1, "{again:?}");
    assert_eq!(cmd(&again[0]), "PUSH");
    assert_eq!(again[0].get("jobId"), Some(&Value::from("c1")));
    h.answer_push(&again[0]);
    assert!(matches!(h.done(ops[1]), Some(Ok(Response::Pushed(_)))));
    let stats = h.s.stats();
    assert_eq!((stats.adds_ok, stats.adds_failed), (3, 1));
    assert_eq!(stats.items_resent, 1, "only the add no job had went again");
}

/// Three `add_bulk`s of custom-id jobs, each written as its PUSHB, lost with the connection:
/// the lookups of the next one (each bulk's first job), in order, with the bulks' ops.
fn written_bulks(h: &mut Harness) -> (Vec<OpId>, Vec<Value>) {
    let ops = ["a", "b", "c"]
        .iter()
        .map(|p| {
            let jobs = (0..3)
                .map(|i| {
                    let opts = JobOptions::new().job_id(format!("{p}{i}"));
                    JobSpec::new("j", Value::Int(i)).with_options(opts)
                })
                .collect();
            let op = h.s.add_bulk(h.now, "q", jobs).unwrap();
            h.step();
            op
        })
        .collect();
    let sent = h.take_sent();
    assert_eq!(sent.iter().map(cmd).collect::<Vec<_>>(), ["PUSHB"; 3]);
    (ops, reconnect(h))
}

#[test]
fn a_written_bulk_is_looked_up_job_by_job_and_goes_again_only_if_it_did_not_land() {
    let mut h = Harness::connected(ok());
    let (ops, first) = written_bulks(&mut h);
    let ids = |v: &[Value]| v.iter().map(|l| l.get("id").cloned()).collect::<Vec<_>>();
    assert_eq!(
        ids(&first),
        ["a0", "b0", "c0"].map(|i| Some(Value::from(i))),
        "each bulk's first job, one lookup at a time per bulk"
    );
    // Bulk a landed: each of its jobs is found in turn.
    h.answer_job(&first[0], "a0");
    // Bulk b's first job is found but a later one is not: b0's id was taken before, and
    // nothing tells whether b landed.
    h.answer_job(&first[1], "b0");
    // Bulk c did not land (a PUSHB lands whole or not at all), on the server that took it.
    h.answer_error(&first[2], "Job not found");
    let next = h.take_sent();
    let asked: Vec<_> = next
        .iter()
        .map(|v| (cmd(v), v.get("id").cloned()))
        .collect();
    assert_eq!(
        asked,
        [
            ("GetJob", Some(Value::from("a1"))),
            ("GetJob", Some(Value::from("b1"))),
            ("Stats", None)
        ]
    );
    h.sent.push(next[2].clone());
    h.answer_uptime(HOUR_MS);
    h.answer_job(&next[0], "a1");
    h.answer_error(&next[1], "Job not found");
    let last = h.take_sent();
    assert_eq!(last.len(), 2, "{last:?}");
    assert_eq!(cmd(&last[0]), "PUSHB");
    assert_eq!(jobs_in(&last[0]), 3, "bulk c goes again whole");
    assert_eq!(
        (cmd(&last[1]), last[1].get("id")),
        ("GetJob", Some(&Value::from("a2")))
    );
    h.answer_job(&last[1], "a2");
    let ids_of = |r: Option<&Result<Response, Error>>| match r {
        Some(Ok(Response::PushedBatch(ids))) => ids.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(ids_of(h.done(ops[0])), ["a0", "a1", "a2"]);
    assert_eq!(
        h.done(ops[1]),
        Some(&Err(Error::ConnectionLost {
            maybe_applied: true
        }))
    );
    h.answer_push(&last[0]);
    assert_eq!(ids_of(h.done(ops[2])).len(), 3);
    let stats = h.s.stats();
    assert_eq!(
        (stats.adds_ok, stats.adds_failed, stats.items_resent),
        (6, 3, 3)
    );
}

#[test]
fn a_written_add_no_job_has_after_a_server_restart_is_left_maybe_applied() {
    let mut h = Harness::connected(ok());
    let ops = written_custom_adds(&mut h, &["c0"], JobOptions::new());
    assert_eq!(h.take_sent().len(), 1);
    let lookup = reconnect(&mut h);
    h.answer_error(&lookup[0], "Job not found");
    // Up for 1 ms: the server started after the add's connection came up, so it is not the
    // one that took the add, and it may have lost the job (memory mode) after running it.
    h.answer_uptime(1);
    assert!(h.take_sent().is_empty(), "not written again");
    assert_eq!(
        h.done(ops[0]),
        Some(&Err(Error::ConnectionLost {
            maybe_applied: true
        }))
    );
}

#[test]
fn a_written_add_whose_job_is_removed_when_finished_is_not_replayed() {
    let mut h = Harness::connected(ok());
    let removed = [
        JobOptions::new().remove_on_complete(true),
        JobOptions::new().remove_on_fail(true),
    ];
    let mut ops = Vec::new();
    for (i, opts) in removed.into_iter().enumerate() {
        ops.extend(written_custom_adds(&mut h, &[&format!("r{i}")], opts));
    }
    assert_eq!(h.take_sent().len(), 2);
    let sent = reconnect(&mut h);
    // Once its job finished and was removed, nothing would tell that it landed: its fate
    // stays unknown, and it is never written twice.
    assert!(sent.is_empty(), "{sent:?}");
    assert_eq!(h.s.stats().adds_failed, 2);
    for op in ops {
        assert_eq!(
            h.done(op),
            Some(&Err(Error::ConnectionLost {
                maybe_applied: true
            }))
        );
    }
}

#[test]
fn a_lookup_lost_with_its_connection_is_made_again_and_one_unanswered_times_out_as_maybe_applied() {
    let mut h = Harness::connected(ok());
    let ops = written_custom_adds(&mut h, &["c0"], JobOptions::new());
    assert_eq!(h.take_sent().len(), 1);
    let first = reconnect(&mut h);
    assert_eq!(first.len(), 1);
    assert_eq!(cmd(&first[0]), "GetJob");
    // Lost again before its answer: the lookup is a read, made again on the next connection.
    let second = reconnect(&mut h);
    assert_eq!(second.len(), 1);
    assert_eq!(cmd(&second[0]), "GetJob");
    assert!(h.done(ops[0]).is_none());
    // Never answered: the add that was written may have been applied.
    h.advance(Duration::from_secs(31));
    assert_eq!(
        h.done(ops[0]),
        Some(&Err(Error::Timeout {
            maybe_applied: true
        }))
    );
    assert_eq!(h.s.stats().adds_failed, 1);
}

#[test]
fn release_unwritten_gives_back_every_add_not_written_and_on_request_written_custom_ids() {
    let mut h = Harness::connected(ok());
    let first = h.add("q", 0);
    let custom =
        h.s.add(
            h.now,
            "q",
            JobSpec::new("j", Value::Nil).with_options(JobOptions::new().job_id("c1")),
        )
        .unwrap();
    h.step();
    h.advance(Duration::from_millis(5));
    // The first add is out as a PUSH, the custom one as a batch of one behind it.
    assert_eq!(h.take_sent().len(), 2);
    // More adds, buffered behind the in-flight slot.
    let buffered: Vec<OpId> = (1..=5).map(|n| h.add("q", n)).collect();
    h.s.handle_disconnected(h.now);
    // The written plain add failed as maybe applied; the custom one waits for a reconnect.
    assert_eq!(h.s.release_unwritten(h.now, Release::Unwritten), 5);
    h.step();
    assert_eq!(
        h.done(first),
        Some(&Err(Error::ConnectionLost {
            maybe_applied: true
        }))
    );
    let lost = Err(Error::ConnectionLost {
        maybe_applied: false,
    });
    for op in &buffered {
        assert_eq!(h.done(*op), Some(&lost), "given back as not applied");
    }
    assert!(h.done(custom).is_none(), "kept for the reconnect");
    assert_eq!(h.s.stats().adds_failed, 1, "given back, not failed");
    // Asked for, the written custom-id add is given back too, as maybe applied.
    assert_eq!(
        h.s.release_unwritten(h.now, Release::WrittenCustomIdsToo),
        1
    );
    h.step();
    assert_eq!(
        h.done(custom),
        Some(&Err(Error::ConnectionLost {
            maybe_applied: true
        }))
    );
    assert_eq!(h.s.stats().adds_cancelled, 6);
}

#[test]
fn settlements_are_handed_off_while_the_connection_is_down() {
    let mut h = Harness::connected(SessionConfig::default().worker(Some(WorkerConfig::new("w"))));
    h.s.hand_off_settlements(true);
    let pull = h.take_sent();
    let job = |id: &str| {
        Value::map([
            ("id", Value::from(id)),
            ("name", Value::from("n")),
            ("data", Value::Nil),
        ])
    };
    h.feed(&Value::map([
        ("ok", Value::Bool(true)),
        ("jobs", Value::Array(vec![job("j1"), job("j2"), job("j3")])),
        (
            "tokens",
            Value::Array(vec![
                Value::from("t1"),
                Value::from("t2"),
                Value::from("t3"),
            ]),
        ),
        ("reqId", pull[0].get("reqId").unwrap().clone()),
    ]));
    // j1's ACK is written and unanswered when the connection goes.
    h.s.complete_job(h.now, "j1", Value::from(1_i64)).unwrap();
    h.advance(Duration::from_millis(50));
    assert!(h.take_sent().iter().any(|s| cmd(s) == "ACKB"));
    h.take_events();
    h.s.handle_disconnected(h.now);
    // j2 completes and j3 fails while it is down.
    h.s.complete_job(h.now, "j2", Value::from(2_i64)).unwrap();
    h.s.fail_job(h.now, "j3", JobFailure::new("boom")).unwrap();
    h.advance(Duration::from_millis(50));
    let handed: Vec<Command> = h
        .take_events()
        .into_iter()
        .filter_map(|e| match e {
            Event::HandOff { cmd } => Some(*cmd),
            _ => None,
        })
        .collect();
    let acked: Vec<(String, String)> = handed
        .iter()
        .filter_map(|c| match c {
            Command::AckB { ids, tokens, .. } => Some(
                ids.iter()
                    .cloned()
                    .zip(tokens.clone().unwrap_or_default())
                    .collect::<Vec<_>>(),
            ),
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(
        acked,
        [("j1".into(), "t1".into()), ("j2".into(), "t2".into())]
    );
    assert!(handed.iter().any(|c| matches!(
        c,
        Command::Fail { id, token: Some(t), .. } if id == "j3" && t == "t3"
    )));
    assert!(h.take_sent().is_empty(), "nothing written while down");
    // Settled elsewhere: once connected again, no lock of theirs is renewed here.
    h.advance(Duration::from_secs(30));
    h.s.handle_connected(h.now);
    h.step();
    h.take_sent();
    h.advance(Duration::from_secs(10));
    assert!(h.take_sent().iter().all(|s| cmd(s) != "JobHeartbeatB"));
}

#[test]
fn unanswered_commands_time_out_and_nothing_hangs() {
    let config = SessionConfig::default().command_timeout(Duration::from_secs(2));
    let mut h = Harness::connected(config);
    let op = h.add("q", 0);
    h.take_sent();
    let queued: Vec<OpId> = (0..3).map(|i| h.add("q", i)).collect();
    h.advance(Duration::from_secs(2));
    assert_eq!(
        h.done(op),
        Some(&Err(Error::Timeout {
            maybe_applied: true
        }))
    );
    // The batch that went out after the first completed is now in flight; let it time out too.
    h.advance(Duration::from_secs(2));
    for q in queued {
        assert!(
            matches!(h.done(q), Some(Err(Error::Timeout { .. }))),
            "{q:?}"
        );
    }
}

#[test]
fn auth_goes_first_and_alone_then_the_rest() {
    let mut h = Harness::connected(ok().with_token("secret"));
    h.add("q", 0);
    h.add("q", 1);
    let sent = h.take_sent();
    assert_eq!(sent.len(), 1, "nothing but Auth before its reply");
    assert_eq!(cmd(&sent[0]), "Auth");
    assert_eq!(sent[0].get("token"), Some(&Value::from("secret")));
    h.feed(&Value::map([
        ("ok", Value::Bool(true)),
        ("id", Value::Undefined),
        ("reqId", sent[0].get("reqId").unwrap().clone()),
    ]));
    let sent = h.take_sent();
    // The first add was due alone (nothing in flight), so it is a PUSH; the second waits
    // behind it.
    assert_eq!(sent.iter().map(cmd).collect::<Vec<_>>(), ["PUSH"]);
}

#[test]
fn a_bad_token_fails_everything_waiting_instead_of_hanging() {
    let mut h = Harness::connected(ok().with_token("wrong"));
    let op = h.add("q", 0);
    let auth = h.take_sent();
    let mut out = Vec::new();
    encode_error(auth[0].get("reqId").unwrap(), "Invalid token", &mut out);
    h.feed(&Value::decode(&out).unwrap());
    assert_eq!(
        h.done(op),
        Some(&Err(Error::AuthFailed("Invalid token".into())))
    );
    assert!(h.take_events().contains(&Event::Disconnect));
}

#[test]
fn a_reply_nobody_asked_for_resets_the_connection() {
    let mut h = Harness::connected(ok());
    let op = h.add("q", 0);
    h.take_sent();
    h.feed(&Value::map([
        ("ok", Value::Bool(true)),
        ("reqId", Value::from("999")),
    ]));
    assert!(h.events.contains(&Event::Disconnect));
    assert!(
        matches!(h.done(op), Some(Err(Error::Protocol(_)))),
        "the add in flight gets a typed outcome"
    );
    // Garbage also resets, and never panics.
    let mut h = Harness::connected(ok());
    h.add("q", 0);
    h.s.handle_input(h.now, &[0, 0, 0, 2, 0xc1, 0xc1]);
    h.step();
    assert!(h.take_events().contains(&Event::Disconnect));
    let mut h = Harness::connected(ok());
    h.s.handle_input(h.now, &[0xff, 0xff, 0xff, 0xff]);
    h.step();
    assert!(h.take_events().contains(&Event::Disconnect));
}

#[test]
fn close_flushes_waits_and_reports_closed() {
    let mut h = Harness::connected(ok());
    let first = h.add("q", 0);
    let rest: Vec<OpId> = (1..=10).map(|i| h.add("q", i)).collect();
    let sent = h.take_sent();
    h.s.close(h.now);
    h.step();
    assert!(matches!(
        h.s.add(h.now, "q", JobSpec::new("j", Value::Nil)),
        Err(Error::Closed)
    ));
    // Close flushes the buffer at once (up to max_in_flight), without waiting for linger.
    let flushed = h.take_sent();
    assert_eq!(flushed.iter().map(jobs_in).sum::<usize>(), 10);
    assert!(!h.take_events().contains(&Event::Closed));
    for req in sent.iter().chain(&flushed) {
        h.answer_push(req);
    }
    assert!(matches!(h.done(first), Some(Ok(_))));
    assert!(rest.iter().all(|op| matches!(h.done(*op), Some(Ok(_)))));
    let events = h.take_events();
    assert!(events.contains(&Event::Closed));
    assert!(h.s.is_closed());
}

#[test]
fn cancel_before_send_withdraws_the_add() {
    let mut h = Harness::connected(ok());
    h.add("q", 0);
    let first = h.take_sent();
    let keep = h.add("q", 1);
    let gone = h.add("q", 2);
    assert!(h.s.cancel(gone));
    h.answer_push(&first[0]);
    let sent = h.take_sent();
    assert_eq!(jobs_in(&sent[0]), 1);
    h.answer_push(&sent[0]);
    assert!(h.done(keep).is_some());
    assert!(h.done(gone).is_none(), "a cancelled add gets no outcome");
    assert!(!h.s.cancel(keep), "too late once sent");
}

#[test]
fn worker_pulls_for_free_slots_and_batches_acks_replaying_vector_06() {
    let lines = vector(include_str!("vectors/06_worker_ack.jsonl"));
    // The server's first PULLB reply on the worker connection: 4 jobs with tokens.
    let pulled = lines
        .iter()
        .find(|l| l["dir"] == "s2c" && l["conn"] == 3 && l["decoded"]["jobs"].is_array())
        .unwrap();
    let mut reply = Value::decode(&unhex(pulled["hex"].as_str().unwrap())[4..]).unwrap();
    let worker = WorkerConfig::new("math")
        .concurrency(4)
        .poll_timeout(Duration::ZERO);
    let mut h = Harness::connected(
        SessionConfig::default()
            .worker(Some(worker))
            .batching(Some(BatchConfig::default())),
    );
    let sent = h.take_sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(cmd(&sent[0]), "PULLB");
    assert_eq!(sent[0].get("count"), Some(&Value::Int(4)));
    assert_eq!(sent[0].get("lockTtl"), Some(&Value::Int(30000)));
    // Give the captured reply our reqId.
    if let Value::Map(m) = &mut reply {
        for (k, v) in m.iter_mut() {
            if k.as_str() == Some("reqId") {
                *v = sent[0].get("reqId").unwrap().clone();
            }
        }
    }
    h.feed(&reply);
    let jobs: Vec<_> = h
        .take_events()
        .into_iter()
        .filter_map(|e| match e {
            Event::Job { job } => Some(job),
            _ => None,
        })
        .collect();
    assert_eq!(jobs.len(), 4);
    assert_eq!(h.s.jobs_held(), 4);
    assert!(h.take_sent().is_empty(), "no free slot: no pull");
    // Complete all four in one tick: the first ACK goes at once (idle), the rest batch up.
    for j in &jobs {
        let n = j
            .data
            .expanded()
            .unwrap()
            .get("n")
            .unwrap()
            .as_i64()
            .unwrap();
        h.s.complete_job(h.now, &j.id, Value::map([("doubled", Value::Int(n * 2))]))
            .unwrap();
    }
    h.step();
    let sent = h.take_sent();
    let acks: Vec<&Value> = sent.iter().filter(|s| cmd(s) == "ACKB").collect();
    assert_eq!(acks.len(), 1, "four completions in one tick make one ACKB");
    let ack = acks[0];
    assert_eq!(ack.get("ids").unwrap().as_array().unwrap().len(), 4);
    let tokens = ack.get("tokens").unwrap().as_array().unwrap();
    assert!(
        tokens
            .iter()
            .all(|t| t.as_str().is_some_and(|t| t.len() == 36)),
        "lock tokens sent"
    );
    assert!(
        sent.iter().any(|s| cmd(s) == "PULLB"),
        "slots are free again"
    );
    // The server reports one of them as already finalised.
    h.feed(&Value::map([
        ("ok", Value::Bool(true)),
        (
            "data",
            Value::map([
                ("ignoredIndices", Value::Array(vec![Value::Int(2)])),
                (
                    "ignoredIds",
                    Value::Array(vec![Value::from(jobs[2].id.as_str())]),
                ),
            ]),
        ),
        ("reqId", ack.get("reqId").unwrap().clone()),
    ]));
    let settled: Vec<(String, Result<bool, Error>)> = h
        .take_events()
        .into_iter()
        .filter_map(|e| match e {
            Event::JobSettled { id, result } => Some((id, result)),
            _ => None,
        })
        .collect();
    assert_eq!(settled.len(), 4);
    assert_eq!(settled[2], (jobs[2].id.clone(), Ok(false)));
    assert!(settled
        .iter()
        .enumerate()
        .all(|(i, (_, r))| i == 2 || *r == Ok(true)));
}

#[test]
fn a_failed_job_goes_out_as_fail_with_its_token() {
    let mut h = Harness::connected(SessionConfig::default().worker(Some(WorkerConfig::new("w"))));
    let pull = h.take_sent();
    assert_eq!(cmd(&pull[0]), "PULLB");
    let job = Value::map([
        ("id", Value::from("j1")),
        ("name", Value::from("n")),
        ("data", Value::Nil),
    ]);
    h.feed(&Value::map([
        ("ok", Value::Bool(true)),
        ("jobs", Value::Array(vec![job])),
        ("tokens", Value::Array(vec![Value::from("tok")])),
        ("reqId", pull[0].get("reqId").unwrap().clone()),
    ]));
    h.s.fail_job(h.now, "j1", JobFailure::new("boom").unrecoverable(true))
        .unwrap();
    h.step();
    let sent = h.take_sent();
    let fail = sent.iter().find(|s| cmd(s) == "FAIL").unwrap();
    assert_eq!(fail.get("token"), Some(&Value::from("tok")));
    assert_eq!(fail.get("unrecoverable"), Some(&Value::Bool(true)));
    assert_eq!(fail.get("error"), Some(&Value::from("boom")));
    assert!(
        h.s.complete_job(h.now, "j1", Value::Nil).is_err(),
        "not held any more"
    );
    let st = h.s.stats();
    assert_eq!(
        (st.jobs_received, st.jobs_failed, st.jobs_completed),
        (1, 1, 0)
    );
}

#[test]
fn lookups_are_typed_and_resent_after_a_reconnect() {
    let mut h = Harness::connected(ok());
    let op =
        h.s.request(h.now, Command::Count { queue: "q".into() })
            .unwrap();
    h.step();
    assert_eq!(h.take_sent().len(), 1);
    h.s.handle_disconnected(h.now);
    h.step();
    assert!(h.done(op).is_none(), "a lookup is re-sent, not failed");
    h.advance(Duration::from_millis(200));
    h.s.handle_connected(h.now);
    h.step();
    let sent = h.take_sent();
    assert_eq!(cmd(&sent[0]), "Count");
    h.feed(&Value::map([
        ("ok", Value::Bool(true)),
        ("count", Value::Int(7)),
        ("reqId", sent[0].get("reqId").unwrap().clone()),
    ]));
    assert_eq!(h.done(op), Some(&Ok(Response::Count(7))));
}

#[test]
fn many_adds_before_connecting_all_resolve_after_close() {
    let mut h = Harness::new(ok());
    let ops: Vec<OpId> = (0..5000)
        .map(|i| {
            h.s.add(h.now, "q", JobSpec::new("job", Value::Int(i)))
                .unwrap()
        })
        .collect();
    h.s.close(h.now);
    h.step();
    h.s.handle_connected(h.now);
    h.step();
    let mut rounds = 0;
    loop {
        let sent = h.take_sent();
        if sent.is_empty() {
            break;
        }
        for req in &sent {
            h.answer_push(req);
        }
        rounds += 1;
    }
    let resolved = ops.iter().filter(|op| h.done(**op).is_some()).count();
    assert_eq!(resolved, 5000, "after {rounds} rounds");
    assert!(h.events.contains(&Event::Closed));
}

/// Simulation finding K3: an add buffered behind batches that cannot be written waited one
/// command timeout per batch ahead of it. Its time in the buffer now counts.
#[test]
fn an_add_waits_at_most_one_timeout_to_be_written() {
    let config = SessionConfig::default()
        .command_timeout(Duration::from_secs(2))
        .batching(Some(BatchConfig::new().max_batch(1).max_in_flight(1)));
    // Never connected: nothing can be written.
    let mut h = Harness::new(config);
    h.s.handle_connect_failed(h.now);
    let ops: Vec<OpId> = (0..5).map(|i| h.add("q", i)).collect();
    h.advance(Duration::from_secs(2));
    for op in &ops {
        assert_eq!(
            h.done(*op),
            Some(&Err(Error::Timeout {
                maybe_applied: false
            })),
            "{op:?} resolved within one timeout"
        );
    }
}

/// Simulation finding K1: the server names one missing job in an ACKB error, but others may be
/// missing too; they are checked with GetState rather than assumed applied.
#[test]
fn acks_the_server_did_not_name_are_checked_not_assumed() {
    let mut h = Harness::connected(
        SessionConfig::default().worker(Some(WorkerConfig::new("w").concurrency(3))),
    );
    let pull = h.take_sent();
    let jobs: Vec<Value> = ["a", "b", "c"]
        .iter()
        .map(|id| Value::map([("id", Value::from(*id)), ("name", Value::from("n"))]))
        .collect();
    h.feed(&Value::map([
        ("ok", Value::Bool(true)),
        ("jobs", Value::Array(jobs)),
        (
            "tokens",
            Value::Array(vec!["t1".into(), "t2".into(), "t3".into()]),
        ),
        ("reqId", pull[0].get("reqId").unwrap().clone()),
    ]));
    for id in ["a", "b", "c"] {
        h.s.complete_job(h.now, id, Value::Nil).unwrap();
    }
    h.step();
    let sent = h.take_sent();
    let ack = sent.iter().find(|s| cmd(s) == "ACKB").unwrap();
    let mut out = Vec::new();
    encode_error(
        ack.get("reqId").unwrap(),
        "Job not found or not in processing state: a",
        &mut out,
    );
    h.feed(&Value::decode(&out).unwrap());
    let checks: Vec<Value> = h
        .take_sent()
        .into_iter()
        .filter(|s| cmd(s) == "GetState")
        .collect();
    assert_eq!(checks.len(), 2, "b and c are checked");
    for (check, state) in checks.iter().zip(["completed", "active"]) {
        h.feed(&Value::map([
            ("ok", Value::Bool(true)),
            ("id", check.get("id").unwrap().clone()),
            ("state", Value::from(state)),
            ("reqId", check.get("reqId").unwrap().clone()),
        ]));
    }
    let events = h.take_events();
    let settled_c = events.iter().find_map(|e| match e {
        Event::JobSettled { id, result } if id == "c" => Some(result.clone()),
        _ => None,
    });
    let settled: Vec<(String, bool)> = events
        .into_iter()
        .filter_map(|e| match e {
            Event::JobSettled { id, result } => Some((id, result == Ok(true))),
            _ => None,
        })
        .collect();
    assert_eq!(
        settled,
        [
            ("a".to_string(), false),
            ("b".to_string(), true),
            ("c".to_string(), false)
        ]
    );
    // c's ACK did not take effect: a server error that names its state.
    assert!(
        matches!(&settled_c, Some(Err(Error::Server(e))) if e.to_string().contains("state active")),
        "{settled_c:?}"
    );
    let st = h.s.stats();
    assert_eq!((st.jobs_received, st.jobs_completed), (3, 3));
    assert_eq!((st.ack_batches_sent, st.ackb_frames), (1, 1));
    assert_eq!((st.error_replies, st.ack_checks), (1, 2));
}

/// A long-poll that waited to be written still gets its whole poll time after the write.
#[test]
fn a_delayed_long_poll_keeps_its_whole_poll_time() {
    let mut worker = WorkerConfig::new("w");
    worker.poll_timeout = Duration::from_secs(5);
    let mut h = Harness::new(
        SessionConfig::default()
            .command_timeout(Duration::from_secs(2))
            .max_in_flight_commands(1)
            .worker(Some(worker)),
    );
    let count =
        h.s.request(h.now, Command::Count { queue: "q".into() })
            .unwrap();
    h.s.handle_connected(h.now);
    h.step();
    let first = h.take_sent();
    assert_eq!(
        first.iter().map(cmd).collect::<Vec<_>>(),
        ["Count"],
        "window of one"
    );
    h.now += Duration::from_millis(1500);
    h.feed(&Value::map([
        ("ok", Value::Bool(true)),
        ("count", Value::Int(0)),
        ("reqId", first[0].get("reqId").unwrap().clone()),
    ]));
    assert!(matches!(h.done(count), Some(Ok(Response::Count(0)))));
    let pull = h.take_sent();
    assert_eq!(
        pull.iter().map(cmd).collect::<Vec<_>>(),
        ["PULLB"],
        "written 1.5 s late"
    );
    // Written at 1.5 s: command timeout 2 s + poll 5 s = due at 8.5 s, not at 7 s.
    h.advance(Duration::from_millis(6900));
    assert_eq!(h.s.stats().timeouts, 0, "still inside its poll time");
    h.advance(Duration::from_millis(200));
    assert_eq!(h.s.stats().timeouts, 1, "then it times out");
}

/// A worker renews the locks of the jobs it holds, so a job that runs longer than its lock TTL
/// is not handed to another worker.
#[test]
fn a_worker_renews_the_locks_of_held_jobs() {
    let mut worker = WorkerConfig::new("w").concurrency(2);
    worker.heartbeat_interval = Some(Duration::from_secs(10));
    let mut h = Harness::connected(SessionConfig::default().worker(Some(worker)));
    let pull = h.take_sent();
    let jobs: Vec<Value> = ["b", "a"]
        .iter()
        .map(|id| Value::map([("id", Value::from(*id)), ("name", Value::from("n"))]))
        .collect();
    h.feed(&Value::map([
        ("ok", Value::Bool(true)),
        ("jobs", Value::Array(jobs)),
        ("tokens", Value::Array(vec!["tb".into(), "ta".into()])),
        ("reqId", pull[0].get("reqId").unwrap().clone()),
    ]));
    h.advance(Duration::from_millis(9_999));
    assert!(h.take_sent().is_empty(), "not yet due");
    h.advance(Duration::from_millis(1));
    let sent = h.take_sent();
    let hb = sent
        .iter()
        .find(|s| cmd(s) == "JobHeartbeatB")
        .expect("heartbeat");
    assert_eq!(
        hb.get("ids"),
        Some(&Value::Array(vec!["a".into(), "b".into()]))
    );
    assert_eq!(
        hb.get("tokens"),
        Some(&Value::Array(vec!["ta".into(), "tb".into()]))
    );
    assert_eq!(h.s.stats().heartbeats_sent, 1);
    // Disconnected while due: rescheduled, not spinning (the next deadline is in the future).
    h.s.complete_job(h.now, "a", Value::Nil).unwrap();
    h.s.handle_disconnected(h.now);
    h.advance(Duration::from_secs(10));
    assert!(h.s.poll_timeout().is_some_and(|t| t > h.now));
    // Nothing held: no heartbeat.
    let mut h2 = Harness::connected(SessionConfig::default().worker(Some(WorkerConfig::new("w"))));
    h2.take_sent();
    h2.advance(Duration::from_secs(30));
    assert!(h2.take_sent().iter().all(|s| cmd(s) != "JobHeartbeatB"));
}

/// Each job within the 10 MB data limit, but together past the 64 MiB frame limit: the bulk add
/// fails with a typed error naming the data, nothing is written, and the session goes on.
#[test]
fn a_request_past_the_frame_limit_fails_alone() {
    let mut h = Harness::connected(ok());
    let big = Value::Str("x".repeat(10 * 1024 * 1024 - 16));
    let jobs = (0..7).map(|_| JobSpec::new("big", big.clone())).collect();
    let bulk = h.s.add_bulk(h.now, "q", jobs).unwrap();
    h.step();
    assert!(h.take_sent().is_empty(), "nothing written");
    assert!(
        matches!(h.done(bulk), Some(Err(Error::Invalid(e))) if e.field == "data"),
        "{:?}",
        h.done(bulk)
    );
    h.add("q", 1);
    assert_eq!(h.take_sent().len(), 1, "the next add goes out as usual");
}

/// Eight concurrent valid adds of 8.4 MB each, every one accepted alone, would make one PUSHB of
/// 67,108,893 bytes — past the 64 MiB frame limit — and fail all eight with `Invalid(data)`.
/// Each PUSHB is capped at what a frame holds: the adds leave as two frames, each within the
/// limit, and all eight succeed.
#[test]
fn valid_adds_never_sink_together_in_a_pushb_past_the_frame_limit() {
    let mut h = Harness::connected(ok());
    let big = Value::Str("x".repeat(8_400_000));
    let job = JobSpec::new("big", big);
    assert!(job.validate().is_ok(), "each job is valid alone");
    assert!(
        8 * job.pushb_len() > autobatch_core::wire::MAX_FRAME,
        "together they overflow"
    );
    let ops: Vec<OpId> = (0..8)
        .map(|_| h.s.add(h.now, "q", job.clone()).unwrap())
        .collect();
    h.step();
    let mut pushb = 0;
    for _ in 0..20 {
        let sent = h.take_sent();
        if sent.is_empty() {
            if ops.iter().all(|&op| h.done(op).is_some()) {
                break;
            }
            h.advance(Duration::from_millis(5)); // linger
            continue;
        }
        for req in &sent {
            assert!(matches!(cmd(req), "PUSHB" | "PUSH"), "{req:?}");
            pushb += 1;
            h.answer_push(req);
        }
    }
    assert!(pushb >= 2, "the wave is split, not sent as one frame");
    for &len in &h.frame_lens {
        assert!(
            len <= autobatch_core::wire::MAX_FRAME,
            "a frame of {len} bytes was written"
        );
    }
    for op in ops {
        assert!(
            matches!(h.done(op), Some(Ok(Response::Pushed(_)))),
            "{:?}",
            h.done(op)
        );
    }
}

/// A job that would not fit in a frame even alone (here: 70 MB of tags, which no option limit
/// bounds) is refused at once, naming the data, and nothing is sent.
#[test]
fn a_job_too_large_for_any_frame_is_refused_before_sending() {
    let mut h = Harness::connected(ok());
    let tag = "t".repeat(1_000_000);
    let job = JobSpec::new("j", Value::Nil).with_options(JobOptions::new().tags(vec![tag; 70]));
    assert!(job.validate().is_ok());
    let err = h.s.add(h.now, "q", job).unwrap_err();
    assert!(
        matches!(&err, Error::Invalid(e) if e.field == "data"),
        "{err:?}"
    );
    h.step();
    assert!(h.take_sent().is_empty());
    h.add("q", 1);
    assert_eq!(h.take_sent().len(), 1, "the session goes on");
}

/// A FAIL can carry the error's stack; more than bunqueue keeps (100 lines) is
/// not sent, and an overlong line is cut at a character boundary.
#[test]
fn a_failed_job_carries_its_stack_bounded() {
    use autobatch_core::session::{MAX_STACK_LINES, MAX_STACK_LINE_BYTES};
    let mut h = Harness::connected(
        SessionConfig::default().worker(Some(WorkerConfig::new("w").concurrency(2))),
    );
    let pull = h.take_sent();
    let job = |id: &str| {
        Value::map([
            ("id", Value::from(id)),
            ("name", Value::from("n")),
            ("data", Value::Nil),
        ])
    };
    h.feed(&Value::map([
        ("ok", Value::Bool(true)),
        ("jobs", Value::Array(vec![job("j1"), job("j2")])),
        ("reqId", pull[0].get("reqId").unwrap().clone()),
    ]));
    let stack = vec!["parse failed".to_owned(), "caused by: bad digit".to_owned()];
    h.s.fail_job(
        h.now,
        "j1",
        JobFailure::new("parse failed").stack(stack.clone()),
    )
    .unwrap();
    let mut long = vec!["é".repeat(MAX_STACK_LINE_BYTES)];
    long.extend((0..200).map(|i| format!("at frame {i}")));
    h.s.fail_job(h.now, "j2", JobFailure::new("deep").stack(long))
        .unwrap();
    h.step();
    let sent = h.take_sent();
    let fails: Vec<&Value> = sent.iter().filter(|s| cmd(s) == "FAIL").collect();
    let lines = |v: &Value| -> Vec<String> {
        v.get("stack")
            .and_then(Value::as_array)
            .unwrap()
            .iter()
            .map(|l| l.as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(lines(fails[0]), stack);
    let deep = lines(fails[1]);
    assert_eq!(deep.len(), MAX_STACK_LINES);
    assert_eq!(deep[0], "é".repeat(MAX_STACK_LINE_BYTES / 2));
    assert_eq!(deep[1], "at frame 0");
}

/// Replay safety by type: across random cuts, no command that must not be applied twice is ever
/// written twice, whoever made it (a typed `request`, `request_raw`, the batcher), and every
/// operation still resolves exactly once.
mod replay_safety {
    use std::collections::HashMap;

    use proptest::prelude::*;

    use super::*;
    use autobatch_core::session::Replay;

    #[derive(Debug, Clone)]
    enum Action {
        /// A typed or raw request of kind `0..9`.
        Request(u8),
        /// A batched add, with a custom id or not.
        Add(bool),
        /// The server answers the oldest `n` requests still open.
        Answer(u8),
        /// The connection drops.
        Cut,
        /// Time passes.
        Advance(u16),
    }

    fn action() -> impl Strategy<Value = Action> {
        prop_oneof![
            3 => (0u8..9).prop_map(Action::Request),
            2 => any::<bool>().prop_map(Action::Add),
            2 => (0u8..4).prop_map(Action::Answer),
            1 => Just(Action::Cut),
            2 => (0u16..400).prop_map(Action::Advance),
        ]
    }

    struct Run {
        s: Session,
        now: Instant,
        connected: bool,
        frames: FrameDecoder,
        /// Requests written on this connection and not answered: (reqId, cmd, tags).
        open: Vec<(Value, String, Vec<String>)>,
        /// Times each tag was written.
        writes: HashMap<String, usize>,
        /// Tags that must never be written twice (the test's own list, not the crate's).
        once: Vec<String>,
        /// Outcomes per operation.
        done: HashMap<OpId, Vec<Result<Response, Error>>>,
        ops: Vec<OpId>,
        /// The adds among `ops`.
        adds: Vec<OpId>,
        /// Tags of the adds with a custom id: the ones that may be sent again.
        custom_adds: Vec<String>,
        closed: bool,
        serial: u64,
        /// What the session wrote and read, counted here to check its own counters.
        seen: Seen,
    }

    #[derive(Debug, Default)]
    struct Seen {
        frames_written: u64,
        bytes_written: u64,
        push_frames: u64,
        pushb_frames: u64,
        frames_fed: u64,
        bytes_fed: u64,
        connects: u64,
        cuts: u64,
    }

    /// Every `u<n>` tag string in a request.
    fn tags(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Str(s) if s.starts_with('u') && s[1..].parse::<u64>().is_ok() => {
                out.push(s.clone())
            }
            Value::Array(items) => items.iter().for_each(|i| tags(i, out)),
            Value::Map(kvs) => kvs.iter().for_each(|(_, v)| tags(v, out)),
            _ => {}
        }
    }

    impl Run {
        fn new() -> Run {
            let now = Instant::now();
            let s = Session::new(SessionConfig::default(), now).unwrap();
            let mut r = Run {
                s,
                now,
                connected: false,
                frames: FrameDecoder::new(),
                open: Vec::new(),
                writes: HashMap::new(),
                once: Vec::new(),
                done: HashMap::new(),
                ops: Vec::new(),
                adds: Vec::new(),
                custom_adds: Vec::new(),
                closed: false,
                serial: 0,
                seen: Seen::default(),
            };
            r.step();
            r
        }

        fn tag(&mut self) -> String {
            self.serial += 1;
            format!("u{}", self.serial)
        }

        /// The contract's round of polls, connecting when asked.
        fn step(&mut self) {
            loop {
                let mut out = Vec::new();
                self.s.poll_transmit(self.now, &mut out);
                self.seen.bytes_written += out.len() as u64;
                self.frames.extend(&out);
                while let Some(f) = self.frames.next_frame().unwrap() {
                    let v = Value::decode(&f).unwrap();
                    self.seen.frames_written += 1;
                    let mut t = Vec::new();
                    tags(&v, &mut t);
                    for tag in &t {
                        *self.writes.entry(tag.clone()).or_default() += 1;
                    }
                    let cmd = v.get("cmd").and_then(Value::as_str).unwrap().to_owned();
                    match cmd.as_str() {
                        "PUSH" => self.seen.push_frames += 1,
                        "PUSHB" => self.seen.pushb_frames += 1,
                        _ => {}
                    }
                    self.open.push((v.get("reqId").unwrap().clone(), cmd, t));
                }
                let mut connect = false;
                while let Some(e) = self.s.poll_event() {
                    match e {
                        Event::Connect => connect = true,
                        Event::Disconnect => {
                            self.connected = false;
                            self.open.clear();
                            self.frames = FrameDecoder::new();
                        }
                        Event::Done { op, result } => self.done.entry(op).or_default().push(result),
                        Event::Closed => self.closed = true,
                        _ => {}
                    }
                }
                if !connect {
                    break;
                }
                self.s.handle_connected(self.now);
                self.seen.connects += 1;
                self.connected = true;
            }
        }

        fn request(&mut self, kind: u8) {
            let t = self.tag();
            let (cmd, replay, once) = match kind {
                0 => (
                    Command::Fail {
                        id: t.clone(),
                        error: Some("boom".into()),
                        token: None,
                        unrecoverable: false,
                        stack: Vec::new(),
                        remove_on_fail: false,
                    },
                    None,
                    true,
                ),
                1 => (
                    Command::Ack {
                        id: t.clone(),
                        result: None,
                        token: None,
                    },
                    None,
                    true,
                ),
                2 => (
                    Command::AckB {
                        ids: vec![t.clone()],
                        results: None,
                        tokens: None,
                        remove_on_completes: Vec::new(),
                    },
                    None,
                    true,
                ),
                3 => (
                    Command::Push {
                        queue: "q".into(),
                        job: JobSpec::new(t.clone(), Value::Int(1)),
                    },
                    None,
                    true,
                ),
                4 => (
                    Command::Push {
                        queue: "q".into(),
                        job: JobSpec::new(t.clone(), Value::Int(1))
                            .with_options(JobOptions::new().job_id(format!("id-{t}"))),
                    },
                    None,
                    false,
                ),
                5 => (
                    Command::Other {
                        cmd: "Pause".into(),
                        body: Value::map([
                            ("cmd", Value::from("Pause")),
                            ("queue", Value::from(t.as_str())),
                        ]),
                    },
                    None,
                    true,
                ),
                6 => (Command::GetState { id: t.clone() }, None, false),
                // The caller of an untyped command decides.
                7 => (
                    Command::GetJob { id: t.clone() },
                    Some(Replay::NotSafe),
                    true,
                ),
                _ => (
                    Command::Other {
                        cmd: "GetJobs".into(),
                        body: Value::map([
                            ("cmd", Value::from("GetJobs")),
                            ("queue", Value::from(t.as_str())),
                        ]),
                    },
                    Some(Replay::Safe),
                    false,
                ),
            };
            let op = match replay {
                None => self.s.request(self.now, cmd),
                Some(r) => self.s.request_raw(self.now, cmd, r),
            };
            self.ops.push(op.unwrap());
            if once {
                self.once.push(t);
            }
        }

        fn add(&mut self, custom: bool) {
            let t = self.tag();
            let mut job = JobSpec::new(t.clone(), Value::Int(1));
            if custom {
                job = job.with_options(JobOptions::new().job_id(format!("id-{t}")));
                self.custom_adds.push(t);
            } else {
                self.once.push(t);
            }
            let op = self.s.add(self.now, "q", job).unwrap();
            self.ops.push(op);
            self.adds.push(op);
        }

        /// Answers the oldest `n` open requests: adds get ids, the rest a refusal.
        fn answer(&mut self, n: usize) {
            let n = n.min(self.open.len());
            let mut bytes = Vec::new();
            for (req_id, cmd, t) in self.open.drain(..n) {
                let reply = match cmd.as_str() {
                    "PUSH" => Value::map([
                        ("ok", Value::Bool(true)),
                        ("id", Value::from("1")),
                        ("reqId", req_id),
                    ]),
                    "PUSHB" => Value::map([
                        ("ok", Value::Bool(true)),
                        (
                            "ids",
                            Value::Array(t.iter().map(|_| Value::from("1")).collect()),
                        ),
                        ("reqId", req_id),
                    ]),
                    _ => Value::map([
                        ("ok", Value::Bool(false)),
                        ("error", Value::from("refused")),
                        ("reqId", req_id),
                    ]),
                };
                write_frame(&mut bytes, |b| reply.encode(b)).unwrap();
                self.seen.frames_fed += 1;
            }
            self.seen.bytes_fed += bytes.len() as u64;
            self.s.handle_input(self.now, &bytes);
        }

        fn apply(&mut self, a: &Action) {
            match *a {
                Action::Request(k) => self.request(k),
                Action::Add(custom) => self.add(custom),
                Action::Answer(n) => self.answer(n as usize),
                Action::Cut => {
                    if self.connected {
                        self.seen.cuts += 1;
                        self.s.handle_disconnected(self.now);
                        self.connected = false;
                        self.open.clear();
                        self.frames = FrameDecoder::new();
                    }
                }
                Action::Advance(ms) => {
                    self.now += Duration::from_millis(ms as u64);
                    self.s.handle_timeout(self.now);
                }
            }
            self.step();
        }

        /// Closes, answering everything, until the session has closed.
        fn finish(&mut self) {
            self.s.close(self.now);
            self.step();
            for _ in 0..10_000 {
                if self.closed {
                    return;
                }
                self.answer(usize::MAX);
                self.step();
                self.now += Duration::from_millis(250);
                self.s.handle_timeout(self.now);
                self.step();
            }
            panic!("the session did not close");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        fn no_unsafe_command_is_written_twice(actions in prop::collection::vec(action(), 1..80)) {
            let mut r = Run::new();
            for a in &actions {
                r.apply(a);
            }
            r.finish();
            for t in &r.once {
                let n = r.writes.get(t).copied().unwrap_or(0);
                prop_assert!(n <= 1, "{t} must not be replayed but was written {n} times");
            }
            for op in &r.ops {
                let outcomes = r.done.get(op).map_or(0, Vec::len);
                prop_assert_eq!(outcomes, 1, "op {:?} resolved {} times", op, outcomes);
            }
            r.check_stats()?;
        }
    }

    impl Run {
        /// The session's counters agree with what it wrote, read and resolved.
        fn check_stats(&self) -> Result<(), TestCaseError> {
            let st = self.s.stats();
            let seen = &self.seen;
            prop_assert_eq!(st.frames_sent, seen.frames_written);
            prop_assert_eq!(st.bytes_sent, seen.bytes_written);
            prop_assert_eq!(st.push_frames, seen.push_frames);
            prop_assert_eq!(st.pushb_frames, seen.pushb_frames);
            prop_assert_eq!(st.frames_received, seen.frames_fed);
            prop_assert_eq!(st.bytes_received, seen.bytes_fed);
            prop_assert_eq!(st.connects, seen.connects);
            prop_assert!(st.reconnects_scheduled >= seen.cuts);
            let ok = |op: &OpId| matches!(self.done.get(op).map(Vec::as_slice), Some([Ok(_)]));
            let adds_ok = self.adds.iter().filter(|op| ok(op)).count() as u64;
            prop_assert_eq!(st.adds, self.adds.len() as u64);
            prop_assert_eq!(st.adds_ok, adds_ok);
            prop_assert_eq!(st.adds_failed, self.adds.len() as u64 - adds_ok);
            prop_assert_eq!((st.adds_cancelled, st.adds_rejected), (0, 0));
            // Every write of a custom-id add after its first was a re-send.
            let rewrites: usize = self
                .custom_adds
                .iter()
                .map(|t| self.writes.get(t).map_or(0, |n| n.saturating_sub(1)))
                .sum();
            prop_assert!(st.items_resent >= rewrites as u64);
            prop_assert_eq!(
                st.batches_sent,
                st.flushes.iter().sum::<u64>(),
                "one flush per batch"
            );
            prop_assert_eq!(
                (
                    st.buffered_adds,
                    st.buffered_bytes,
                    st.parked_adds,
                    st.in_flight_commands
                ),
                (0, 0, 0, 0),
                "closed"
            );
            Ok(())
        }
    }

    /// The rule by hand: a FAIL written before the cut fails as maybe applied and is never
    /// written again; one never written goes out on the next connection; a lookup is re-sent.
    #[test]
    fn a_written_fail_is_not_replayed_an_unwritten_one_is_sent() {
        let mut r = Run::new();
        r.request(0); // u1: FAIL, written
        r.request(6); // u2: GetState, written
        r.step();
        assert_eq!(r.writes.get("u1"), Some(&1));
        // Keep the next one unwritten: the connection drops before the session can write it.
        r.s.handle_disconnected(r.now);
        r.connected = false;
        r.open.clear();
        r.request(0); // u3: FAIL, queued while disconnected
        r.step();
        let lost = r.done.get(&r.ops[0]).cloned().unwrap_or_default();
        assert!(
            matches!(
                lost.as_slice(),
                [Err(Error::ConnectionLost {
                    maybe_applied: true
                })]
            ),
            "{lost:?}"
        );
        r.now += Duration::from_secs(1);
        r.s.handle_timeout(r.now);
        r.step();
        assert!(r.connected);
        assert_eq!(r.writes.get("u1"), Some(&1), "a written FAIL was replayed");
        assert_eq!(r.writes.get("u2"), Some(&2), "a lookup is re-sent");
        assert_eq!(r.writes.get("u3"), Some(&1), "an unwritten FAIL is sent");
    }
}

/// 5,000 commands waiting to be written (no connection): `poll_timeout` names the earliest of
/// their deadlines (read from an index, see `session::queue`), and `handle_timeout` times out
/// exactly those due, as never written.
#[test]
fn five_thousand_queued_commands_time_out_in_deadline_order() {
    let t0 = Instant::now();
    let mut s = Session::new(SessionConfig::default().without_batching(), t0).unwrap();
    while s.poll_event().is_some() {}
    let timeout = s.config().command_timeout;
    let ops: Vec<OpId> = (0..5_000u64)
        .map(|i| {
            let at = t0 + Duration::from_millis(i);
            s.request(at, Command::GetState { id: format!("{i}") })
                .unwrap()
        })
        .collect();
    assert_eq!(s.poll_timeout(), Some(t0 + timeout));
    let now = t0 + timeout + Duration::from_millis(2_499);
    s.handle_timeout(now);
    let mut timed_out = Vec::new();
    while let Some(e) = s.poll_event() {
        if let Event::Done { op, result } = e {
            assert_eq!(
                result,
                Err(Error::Timeout {
                    maybe_applied: false
                })
            );
            timed_out.push(op);
        }
    }
    assert_eq!(timed_out, ops[..2_500].to_vec());
    assert_eq!(
        s.poll_timeout(),
        Some(t0 + timeout + Duration::from_millis(2_500))
    );
}

/// A full window is refilled when half of it is answered, in one write, not a frame per reply
/// (batching off, adds coming faster than their replies).
#[test]
fn a_full_window_refills_when_half_of_it_is_answered() {
    let mut h = Harness::connected(
        SessionConfig::default()
            .without_batching()
            .max_in_flight_commands(10),
    );
    for n in 0..30 {
        h.add("q", n);
    }
    let first = h.take_sent();
    assert_eq!(first.len(), 10, "the window's worth");
    for (k, req) in first.iter().take(4).enumerate() {
        h.answer_push(req);
        assert!(
            h.take_sent().is_empty(),
            "{} answered: still waiting",
            k + 1
        );
    }
    let lens_before = h.frame_lens.len();
    h.answer_push(&first[4]);
    let refill = h.take_sent();
    assert_eq!(
        refill.len(),
        5,
        "half the window answered: the freed half goes out"
    );
    assert!(refill.iter().all(|r| cmd(r) == "PUSH"));
    assert_eq!(h.frame_lens.len() - lens_before, 5);
    assert_eq!(h.s.in_flight(), 10);
    // Every add is still answered, in the end.
    let mut out: Vec<Value> = first[5..].iter().cloned().chain(refill).collect();
    while let Some(req) = out.pop() {
        h.answer_push(&req);
        out.extend(h.take_sent());
    }
    let done = h
        .take_events()
        .iter()
        .filter(|e| matches!(e, Event::Done { result: Ok(_), .. }))
        .count();
    assert_eq!(done, 30);
    assert_eq!(h.s.in_flight(), 0);
}

/// Slow commands holding most of a full window (waits, long polls) do not hold up the rest for
/// longer than `full_window_wait`: the freed slots are refilled when it has passed, and the
/// session asks for a timer for that moment.
#[test]
fn a_full_window_held_by_slow_commands_refills_after_full_window_wait() {
    let wait = Duration::from_millis(5);
    let mut h = Harness::connected(
        SessionConfig::default()
            .max_in_flight_commands(4)
            .full_window_wait(Some(wait))
            .ping_interval(None),
    );
    let ops: Vec<OpId> = (0..6)
        .map(|_| {
            let op =
                h.s.request(h.now, Command::Count { queue: "q".into() })
                    .unwrap();
            h.step();
            op
        })
        .collect();
    let sent = h.take_sent();
    assert_eq!(sent.len(), 4);
    let window_full_at = h.now;
    // One answer: three stay out, more than half the window.
    h.feed(&Value::map([
        ("ok", Value::Bool(true)),
        ("count", Value::Int(1)),
        ("reqId", sent[0].get("reqId").unwrap().clone()),
    ]));
    assert!(matches!(h.done(ops[0]), Some(Ok(Response::Count(1)))));
    assert!(h.take_sent().is_empty(), "waiting for half the window");
    assert_eq!(h.s.poll_timeout(), Some(window_full_at + wait));
    h.advance(wait - Duration::from_millis(1));
    assert!(h.take_sent().is_empty());
    h.advance(Duration::from_millis(1));
    assert_eq!(
        h.take_sent().iter().map(cmd).collect::<Vec<_>>(),
        ["Count"],
        "the freed slot is used once the wait is over"
    );
    assert_eq!(h.s.in_flight(), 4);
}

/// `full_window_wait(None)` refills a slot as soon as its reply comes, and a zero wait is
/// refused with the field's name.
#[test]
fn without_full_window_wait_each_freed_slot_is_refilled_at_once() {
    let mut h = Harness::connected(
        SessionConfig::default()
            .without_batching()
            .max_in_flight_commands(10)
            .full_window_wait(None),
    );
    for n in 0..12 {
        h.add("q", n);
    }
    let first = h.take_sent();
    assert_eq!(first.len(), 10);
    h.answer_push(&first[0]);
    assert_eq!(h.take_sent().len(), 1);
    let bad = SessionConfig::default().full_window_wait(Some(Duration::ZERO));
    let err = bad.validate().unwrap_err();
    assert!(err.to_string().contains("full_window_wait"), "{err}");
}

#[test]
fn the_session_reports_the_configuration_it_was_built_with() {
    let config = ok()
        .command_timeout(Duration::from_secs(7))
        .max_in_flight_commands(3)
        .seed(42);
    let h = Harness::new(config.clone());
    assert_eq!(h.s.config(), &config);
}

#[test]
fn a_closing_session_refuses_new_work_before_it_has_closed() {
    let mut h = Harness::connected(ok());
    let count =
        h.s.request(h.now, Command::Count { queue: "q".into() })
            .unwrap();
    h.step();
    let sent = h.take_sent();
    assert_eq!(sent.iter().map(cmd).collect::<Vec<_>>(), ["Count"]);
    h.s.close(h.now);
    h.step();
    assert!(!h.s.is_closed(), "the Count's reply is still awaited");
    let job = JobSpec::new("j", Value::Nil);
    assert!(matches!(h.s.add(h.now, "q", &job), Err(Error::Closed)));
    assert!(matches!(
        h.s.add_bulk(h.now, "q", vec![job]),
        Err(Error::Closed)
    ));
    assert!(matches!(
        h.s.request(h.now, Command::Count { queue: "q".into() }),
        Err(Error::Closed)
    ));
    assert!(h.take_sent().is_empty(), "nothing new goes out");
    h.feed(&Value::map([
        ("ok", Value::Bool(true)),
        ("count", Value::Int(0)),
        ("reqId", sent[0].get("reqId").unwrap().clone()),
    ]));
    assert!(matches!(h.done(count), Some(Ok(Response::Count(0)))));
    assert!(h.s.is_closed());
}

#[test]
fn a_long_poll_waiting_to_be_written_has_its_poll_time_on_top_of_the_timeout() {
    // Never connected: the pull waits in the send queue.
    let mut h = Harness::new(ok().command_timeout(Duration::from_secs(2)));
    let pull = Command::Pull(PullArgs {
        queue: "q".into(),
        timeout: Some(5_000),
        ..PullArgs::default()
    });
    let op = h.s.request(h.now, pull).unwrap();
    h.step();
    assert_eq!(h.s.poll_timeout(), Some(h.now + Duration::from_secs(7)));
    h.advance(Duration::from_millis(6_900));
    assert!(h.done(op).is_none(), "still inside its poll time");
    h.advance(Duration::from_millis(200));
    assert!(matches!(h.done(op), Some(Err(Error::Timeout { .. }))));
}

#[test]
fn bulk_adds_count_every_job_they_carry() {
    let mut h = Harness::connected(ok());
    let jobs = (0..3)
        .map(|i| JobSpec::new("j", Value::Int(i)))
        .collect::<Vec<_>>();
    h.s.add_bulk(h.now, "q", jobs.clone()).unwrap();
    assert_eq!(h.s.stats().adds, 3);
    h.s.add_bulk(h.now, "q", jobs).unwrap();
    assert_eq!(h.s.stats().adds, 6);
}

#[test]
fn a_written_request_waiting_to_be_sent_again_cannot_be_withdrawn() {
    let mut h = Harness::connected(ok());
    let count =
        h.s.request(h.now, Command::Count { queue: "q".into() })
            .unwrap();
    h.step();
    assert_eq!(h.take_sent().len(), 1);
    h.s.handle_disconnected(h.now);
    h.step();
    assert!(h.done(count).is_none(), "a lookup is sent again");
    assert!(
        !h.s.cancel(count),
        "it was written once and may have been applied"
    );
    let at = h.s.poll_timeout().unwrap();
    h.advance(at - h.now);
    assert!(h.take_events().contains(&Event::Connect));
    h.s.handle_connected(h.now);
    h.step();
    let sent = h.take_sent();
    assert_eq!(sent.iter().map(cmd).collect::<Vec<_>>(), ["Count"]);
    h.feed(&Value::map([
        ("ok", Value::Bool(true)),
        ("count", Value::Int(1)),
        ("reqId", sent[0].get("reqId").unwrap().clone()),
    ]));
    assert!(matches!(h.done(count), Some(Ok(Response::Count(1)))));
    assert_eq!(h.s.stats().adds_cancelled, 0);
}

/// The server's PULLB reply to `pull`, handing out `jobs` (id, lock token).
fn pulled(pull: &Value, jobs: &[(&str, &str)]) -> Value {
    let job = |id: &str| {
        Value::map([
            ("id", Value::from(id)),
            ("name", Value::from("n")),
            ("data", Value::Nil),
        ])
    };
    Value::map([
        ("ok", Value::Bool(true)),
        (
            "jobs",
            Value::Array(jobs.iter().map(|(id, _)| job(id)).collect()),
        ),
        (
            "tokens",
            Value::Array(jobs.iter().map(|(_, t)| Value::from(*t)).collect()),
        ),
        ("reqId", pull.get("reqId").unwrap().clone()),
    ])
}

#[test]
fn a_worker_names_its_held_jobs_and_their_tokens_and_lets_one_be_taken() {
    let worker = WorkerConfig::new("w")
        .concurrency(2)
        .poll_timeout(Duration::ZERO);
    let mut h = Harness::connected(ok().worker(Some(worker)));
    let pull = h.take_sent();
    assert_eq!(pull.iter().map(cmd).collect::<Vec<_>>(), ["PULLB"]);
    assert!(h.s.pull_in_flight());
    h.feed(&pulled(&pull[0], &[("j2", "t2"), ("j1", "t1")]));
    assert!(!h.s.pull_in_flight());
    assert_eq!(h.s.held_jobs(), ["j1", "j2"], "sorted");
    assert_eq!(h.s.job_token("j1"), Some("t1"));
    assert_eq!(h.s.job_token("j3"), None);
    assert_eq!(h.s.take_job("j1"), Ok(Some("t1".to_owned())));
    assert_eq!(h.s.held_jobs(), ["j2"]);
    assert_eq!(h.s.jobs_held(), 1);
    assert_eq!(h.s.job_token("j1"), None);
    assert!(h.s.take_job("j1").is_err(), "not held any more");
    h.step();
    let next = h.take_sent();
    assert_eq!(
        next.iter().map(cmd).collect::<Vec<_>>(),
        ["PULLB"],
        "its slot is free for the next pull"
    );
    assert_eq!(next[0].get("count"), Some(&Value::Int(1)));
}

#[test]
fn a_paused_worker_pulls_nothing_and_a_delayed_pull_waits_for_its_time() {
    let worker = WorkerConfig::new("w").poll_timeout(Duration::ZERO);
    let mut h = Harness::new(ok().worker(Some(worker)));
    assert!(!h.s.is_worker_paused());
    h.s.set_worker_paused(true);
    assert!(h.s.is_worker_paused());
    h.s.handle_connected(h.now);
    h.step();
    assert!(h.take_sent().is_empty(), "paused: no pull");
    h.s.delay_pulls_until(h.now + Duration::from_secs(1));
    h.s.set_worker_paused(false);
    assert!(!h.s.is_worker_paused());
    h.step();
    assert!(h.take_sent().is_empty(), "not before its time");
    h.advance(Duration::from_millis(999));
    assert!(h.take_sent().is_empty(), "still not");
    h.advance(Duration::from_millis(1));
    assert_eq!(h.take_sent().iter().map(cmd).collect::<Vec<_>>(), ["PULLB"]);
}

#[test]
fn a_session_without_a_worker_holds_no_jobs_and_settles_none() {
    let mut h = Harness::connected(ok());
    h.s.set_worker_paused(true);
    assert!(!h.s.is_worker_paused(), "nothing to pause");
    h.s.delay_pulls_until(h.now);
    assert!(!h.s.pull_in_flight());
    assert_eq!(h.s.jobs_held(), 0);
    assert!(h.s.held_jobs().is_empty());
    assert_eq!(h.s.job_token("j1"), None);
    assert_eq!(h.s.take_job("j1"), Err(Error::Closed));
    assert_eq!(
        h.s.complete_job(h.now, "j1", Value::Nil),
        Err(Error::Closed)
    );
    assert_eq!(
        h.s.fail_job(h.now, "j1", JobFailure::new("boom")),
        Err(Error::Closed)
    );
    h.step();
    assert!(h.take_sent().is_empty());
}

#[test]
fn a_bulk_add_counts_each_of_its_jobs_however_it_ends() {
    let three = || {
        (0..3)
            .map(|i| JobSpec::new("j", Value::Int(i)))
            .collect::<Vec<_>>()
    };
    // Refused by the server: three adds failed.
    let mut h = Harness::connected(ok());
    let op = h.s.add_bulk(h.now, "q", three()).unwrap();
    h.step();
    let sent = h.take_sent();
    assert_eq!(jobs_in(&sent[0]), 3);
    let mut out = Vec::new();
    encode_error(sent[0].get("reqId").unwrap(), "queue is paused", &mut out);
    h.feed(&Value::decode(&out).unwrap());
    assert!(matches!(h.done(op), Some(Err(Error::Server(_)))));
    let st = h.s.stats();
    assert_eq!((st.adds, st.adds_ok, st.adds_failed), (3, 0, 3));

    // Withdrawn before it was written: three adds cancelled.
    let mut h = Harness::new(ok());
    let op = h.s.add_bulk(h.now, "q", three()).unwrap();
    assert!(h.s.cancel(op));
    assert_eq!(h.s.stats().adds_cancelled, 3);

    // Given back unwritten: three adds given back, none failed.
    let mut h = Harness::new(ok());
    h.s.add_bulk(h.now, "q", three()).unwrap();
    assert_eq!(h.s.release_unwritten(h.now, Release::Unwritten), 3);
    let st = h.s.stats();
    assert_eq!((st.adds, st.adds_cancelled, st.adds_failed), (3, 3, 0));
}

#[test]
fn a_full_buffer_applies_the_overflow_policy_and_counts_it() {
    let config = |policy| {
        ok().batching(Some(
            BatchConfig::new()
                .max_batch(2)
                .max_in_flight(1)
                .max_pending_items(2)
                .overflow(policy),
        ))
    };
    let job = || JobSpec::new("j", Value::Nil);
    // A lone add holds the one slot; the next two fill the buffer.
    let full = |policy| {
        let mut h = Harness::connected(config(policy));
        let ops: Vec<OpId> = (0..3).map(|i| h.add("q", i)).collect();
        assert_eq!(h.take_sent().len(), 1);
        assert_eq!(h.s.pending_adds().items, 2);
        (h, ops)
    };

    let (mut h, _) = full(OverflowPolicy::Reject);
    assert_eq!(h.s.add(h.now, "q", job()), Err(Error::Overflow));
    assert_eq!((h.s.stats().adds_rejected, h.s.stats().adds_parked), (1, 0));

    let (mut h, _) = full(OverflowPolicy::Backpressure);
    h.s.add(h.now, "q", job()).unwrap();
    h.step();
    assert_eq!(h.s.pending_adds().parked, 1, "parked");
    assert_eq!(h.s.stats().parked_adds, 1);
    assert_eq!((h.s.stats().adds_rejected, h.s.stats().adds_parked), (0, 1));

    let (mut h, ops) = full(OverflowPolicy::DropOldest);
    h.s.add(h.now, "q", job()).unwrap();
    h.step();
    assert_eq!(
        h.done(ops[1]),
        Some(&Err(Error::Overflow)),
        "the oldest buffered"
    );
    assert_eq!((h.s.stats().adds_rejected, h.s.stats().adds_parked), (1, 0));
}

#[test]
fn a_quiet_connection_is_pinged_every_interval_and_a_busy_one_is_not() {
    let every = Duration::from_secs(10);
    let timeout = Duration::from_secs(30);
    let mut h = Harness::connected(ok().ping_interval(Some(every)).command_timeout(timeout));
    assert_eq!(h.s.poll_timeout(), Some(h.now + every));
    h.advance(every - Duration::from_millis(1));
    assert!(h.take_sent().is_empty());
    h.advance(Duration::from_millis(1));
    let ping = h.take_sent();
    assert_eq!(ping.iter().map(cmd).collect::<Vec<_>>(), ["Ping"]);
    assert_eq!(
        h.s.poll_timeout(),
        Some(h.now + timeout),
        "while it is out, only its reply is awaited"
    );
    h.feed(&Value::map([
        ("ok", Value::Bool(true)),
        ("data", Value::map([("pong", Value::Bool(true))])),
        ("reqId", ping[0].get("reqId").unwrap().clone()),
    ]));
    assert_eq!(h.s.poll_timeout(), Some(h.now + every));
    // An add written meanwhile puts the next ping an interval after its write.
    h.advance(Duration::from_secs(4));
    h.add("q", 0);
    let add = h.take_sent();
    assert_eq!(add.len(), 1);
    assert_eq!(h.s.poll_timeout(), Some(h.now + timeout), "the add's reply");
    h.advance(every);
    assert!(h.take_sent().is_empty(), "a command is out: no ping");
    h.answer_push(&add[0]);
    assert_eq!(
        h.s.poll_timeout(),
        Some(h.now + every),
        "rescheduled from then"
    );
    h.advance(every);
    assert_eq!(h.take_sent().iter().map(cmd).collect::<Vec<_>>(), ["Ping"]);
    assert_eq!(h.s.stats().timeouts, 0);
}

#[test]
fn acks_refused_for_another_jobs_lock_are_retried_with_backoff_until_the_limit() {
    let worker = |retries| {
        WorkerConfig::new("w")
            .concurrency(3)
            .ack_retries(retries)
            .ack_retry_base(Duration::from_millis(100))
    };
    let run = |retries| {
        let mut h = Harness::connected(ok().worker(Some(worker(retries))));
        let pull = h.take_sent();
        h.feed(&pulled(&pull[0], &[("a", "ta"), ("b", "tb"), ("c", "tc")]));
        for id in ["a", "b", "c"] {
            h.s.complete_job(h.now, id, Value::Nil).unwrap();
        }
        h.step();
        let acks = |h: &mut Harness| -> Vec<Value> {
            h.take_sent()
                .into_iter()
                .filter(|s| cmd(s) == "ACKB")
                .collect()
        };
        let ids = |ack: &Value| ack.get("ids").unwrap().clone();
        let refuse = |h: &mut Harness, ack: &Value, job: &str| {
            let mut out = Vec::new();
            let msg = format!("Invalid or expired lock token for job {job}");
            encode_error(ack.get("reqId").unwrap(), &msg, &mut out);
            h.feed(&Value::decode(&out).unwrap());
        };
        let first = acks(&mut h);
        assert_eq!(
            ids(&first[0]),
            Value::Array(vec!["a".into(), "b".into(), "c".into()])
        );
        // The lock problem is a's: b and c were not applied and go again after 100 ms.
        refuse(&mut h, &first[0], "a");
        h.advance(Duration::from_millis(99));
        assert!(acks(&mut h).is_empty());
        h.advance(Duration::from_millis(1));
        let second = acks(&mut h);
        assert_eq!(ids(&second[0]), Value::Array(vec!["b".into(), "c".into()]));
        assert_eq!(
            second[0].get("tokens"),
            Some(&Value::Array(vec!["tb".into(), "tc".into()]))
        );
        // Then b's: c goes a third time, after twice the wait, if the limit allows.
        refuse(&mut h, &second[0], "b");
        h.advance(Duration::from_millis(199));
        assert!(acks(&mut h).is_empty());
        h.advance(Duration::from_millis(1));
        let third = acks(&mut h);
        let settled: Vec<(String, Result<bool, Error>)> = h
            .take_events()
            .into_iter()
            .filter_map(|e| match e {
                Event::JobSettled { id, result } => Some((id, result)),
                _ => None,
            })
            .collect();
        (h, third, settled)
    };

    let (mut h, third, settled) = run(2);
    assert_eq!(third[0].get("ids"), Some(&Value::Array(vec!["c".into()])));
    assert_eq!(
        settled
            .iter()
            .map(|(id, _)| id.as_str())
            .collect::<Vec<_>>(),
        ["a", "b"]
    );
    h.feed(&Value::map([
        ("ok", Value::Bool(true)),
        ("reqId", third[0].get("reqId").unwrap().clone()),
    ]));
    assert!(h.take_events().contains(&Event::JobSettled {
        id: "c".into(),
        result: Ok(true)
    }));
    assert_eq!(h.s.stats().ack_retries, 3);

    let (h, third, settled) = run(1);
    assert!(third.is_empty(), "one retry only");
    assert_eq!(
        settled.last(),
        Some(&(
            "c".to_owned(),
            Err(Error::Server("ACK retries exhausted".into()))
        ))
    );
    assert_eq!(h.s.stats().ack_retries, 2);
}

#[test]
fn a_late_reply_is_ignored_and_repeated_timeouts_drop_the_connection() {
    let timeout = Duration::from_secs(2);
    let mut h = Harness::connected(ok().command_timeout(timeout).max_command_timeouts(2));
    let count = || Command::Count { queue: "q".into() };
    let first = h.s.request(h.now, count()).unwrap();
    h.step();
    let sent = h.take_sent();
    h.advance(timeout);
    assert!(matches!(h.done(first), Some(Err(Error::Timeout { .. }))));
    // Its reply comes after all: the latest reqId written, answered late, changes nothing.
    h.feed(&Value::map([
        ("ok", Value::Bool(true)),
        ("count", Value::Int(0)),
        ("reqId", sent[0].get("reqId").unwrap().clone()),
    ]));
    assert!(!h.take_events().contains(&Event::Disconnect));
    assert!(h.s.is_connected());
    // A second timeout in a row makes two: the connection is dropped and made again.
    let second = h.s.request(h.now, count()).unwrap();
    h.step();
    h.advance(timeout - Duration::from_millis(1));
    assert!(h.s.is_connected(), "one timeout is not enough");
    h.advance(Duration::from_millis(1));
    assert!(matches!(h.done(second), Some(Err(Error::Timeout { .. }))));
    assert!(h.take_events().contains(&Event::Disconnect));
    assert!(!h.s.is_connected());
    assert_eq!(h.s.stats().timeouts, 2);
}

#[test]
fn a_job_encoded_beforehand_is_added_like_any_other_and_its_queue_still_checked() {
    let mut h = Harness::connected(ok());
    let job = || EncodedJob::new(&JobSpec::new("j", Value::Int(7))).unwrap();
    let bad = h.s.add_encoded(h.now, "bad queue", job());
    assert!(matches!(bad, Err(Error::Invalid(ref e)) if e.field == "queue"));
    let op = h.s.add_encoded(h.now, "q", job()).unwrap();
    h.step();
    let sent = h.take_sent();
    assert_eq!(sent.iter().map(cmd).collect::<Vec<_>>(), ["PUSH"]);
    assert_eq!(sent[0].get("queue"), Some(&Value::from("q")));
    h.answer_push(&sent[0]);
    assert!(matches!(h.done(op), Some(Ok(Response::Pushed(_)))));
    // The same queue again, then a bad one: each name is checked.
    h.s.add_encoded(h.now, "q", job()).unwrap();
    let bad = h.s.add_encoded(h.now, "", job());
    assert!(matches!(bad, Err(Error::Invalid(ref e)) if e.field == "queue"));
    assert_eq!(h.s.stats().adds, 2);
}

#[test]
fn answering_one_command_keeps_the_deadlines_of_the_others() {
    let timeout = Duration::from_secs(2);
    let mut h = Harness::connected(ok().command_timeout(timeout));
    let t0 = h.now;
    let count = || Command::Count { queue: "q".into() };
    let first = h.s.request(h.now, count()).unwrap();
    h.step();
    h.now += Duration::from_millis(500);
    let second = h.s.request(h.now, count()).unwrap();
    h.step();
    let sent = h.take_sent();
    assert_eq!(sent.len(), 2);
    assert_eq!(h.s.poll_timeout(), Some(t0 + timeout), "the first one's");
    h.now = t0 + Duration::from_secs(1);
    h.feed(&Value::map([
        ("ok", Value::Bool(true)),
        ("count", Value::Int(0)),
        ("reqId", sent[0].get("reqId").unwrap().clone()),
    ]));
    assert!(matches!(h.done(first), Some(Ok(_))));
    let due = t0 + Duration::from_millis(500) + timeout;
    assert_eq!(h.s.poll_timeout(), Some(due), "now the second one's");
    h.advance(due - h.now);
    assert!(matches!(h.done(second), Some(Err(Error::Timeout { .. }))));
}

#[test]
fn a_reply_between_two_timeouts_starts_their_count_again() {
    let timeout = Duration::from_secs(2);
    let mut h = Harness::connected(ok().command_timeout(timeout).max_command_timeouts(2));
    let count = || Command::Count { queue: "q".into() };
    h.s.request(h.now, count()).unwrap();
    h.step();
    h.advance(timeout);
    assert_eq!(h.s.stats().timeouts, 1);
    let answered = h.s.request(h.now, count()).unwrap();
    h.step();
    let sent = h.take_sent();
    h.feed(&Value::map([
        ("ok", Value::Bool(true)),
        ("count", Value::Int(0)),
        ("reqId", sent.last().unwrap().get("reqId").unwrap().clone()),
    ]));
    assert!(matches!(h.done(answered), Some(Ok(_))));
    h.s.request(h.now, count()).unwrap();
    h.step();
    h.advance(timeout);
    assert_eq!(h.s.stats().timeouts, 2);
    assert!(h.s.is_connected(), "two timeouts, but not in a row");
    assert!(!h.take_events().contains(&Event::Disconnect));
}

#[test]
fn a_failed_connect_is_tried_again_after_a_growing_backoff_and_a_late_report_is_ignored() {
    let reconnect = ReconnectConfig::default().jitter(0.0);
    let mut h = Harness::new(ok().reconnect(reconnect));
    assert_eq!(
        h.s.poll_timeout(),
        None,
        "waiting for the driver to connect"
    );
    // 100 ms, then twice that for each failure in a row.
    for (n, wait) in [(1, 100), (2, 200), (3, 400)] {
        h.s.handle_connect_failed(h.now);
        h.step();
        let wait = Duration::from_millis(wait);
        assert_eq!(h.s.poll_timeout(), Some(h.now + wait), "attempt {n}");
        assert_eq!(h.s.stats().reconnects_scheduled, n);
        h.advance(wait);
        assert!(h.take_events().contains(&Event::Connect));
    }
    h.s.handle_connected(h.now);
    h.step();
    // A failure reported for an attempt that already succeeded changes nothing.
    h.s.handle_connect_failed(h.now);
    h.step();
    assert!(h.s.is_connected());
    assert_eq!(h.s.stats().reconnects_scheduled, 3);
}

#[test]
fn without_hand_off_a_written_ack_is_handed_to_no_other_broker() {
    let mut h = Harness::connected(ok().worker(Some(WorkerConfig::new("w"))));
    let pull = h.take_sent();
    h.feed(&pulled(&pull[0], &[("j1", "t1")]));
    h.s.complete_job(h.now, "j1", Value::Nil).unwrap();
    h.step();
    assert!(h.take_sent().iter().any(|s| cmd(s) == "ACKB"));
    h.take_events();
    h.s.handle_disconnected(h.now);
    h.advance(Duration::from_millis(50));
    assert!(!h
        .take_events()
        .iter()
        .any(|e| matches!(e, Event::HandOff { .. })));
}

#[test]
fn nothing_goes_out_before_auth_even_when_the_auth_cannot_be_written() {
    // A token past the frame limit: the Auth fails to encode and is dropped.
    let token = "t".repeat(65 * 1024 * 1024);
    let mut h = Harness::new(ok().with_token(token));
    h.s.request(h.now, Command::Count { queue: "q".into() })
        .unwrap();
    h.s.handle_connected(h.now);
    h.step();
    assert!(
        h.take_sent().is_empty(),
        "the Count waits for an Auth that succeeded"
    );
}

#[test]
fn bytes_sent_counts_what_poll_transmit_appended_only() {
    let mut h = Harness::connected(ok());
    h.s.request(h.now, Command::Count { queue: "q".into() })
        .unwrap();
    let mut out = vec![0u8; 1_000];
    assert!(h.s.poll_transmit(h.now, &mut out));
    assert_eq!(h.s.stats().bytes_sent, out.len() as u64 - 1_000);
}

/// The field a configuration is refused for, or `None` when it is valid.
fn refused_field(config: &SessionConfig) -> Option<&'static str> {
    match config.validate() {
        Ok(()) => None,
        Err(autobatch_core::session::ConfigError::Field { field, .. }) => Some(field),
        Err(e) => panic!("refused for its batching: {e}"),
    }
}

#[test]
fn a_reconnect_base_must_be_positive_and_at_most_the_cap() {
    let with = |base: u64, max: u64| {
        ok().reconnect(
            ReconnectConfig::default()
                .base(Duration::from_millis(base))
                .max(Duration::from_millis(max)),
        )
    };
    assert_eq!(refused_field(&with(0, 1_000)), Some("reconnect.base"));
    assert_eq!(refused_field(&with(200, 100)), Some("reconnect.base"));
    assert_eq!(refused_field(&with(100, 100)), None, "a fixed delay");
    assert_eq!(refused_field(&with(100, 101)), None);
    assert!(Session::new(with(0, 1_000), Instant::now()).is_err());
}

#[test]
fn a_worker_configuration_is_refused_field_by_field_at_its_edges() {
    let worker = |w: WorkerConfig| ok().worker(Some(w));
    let sec = Duration::from_secs;
    let ms = Duration::from_millis;
    // The limiter needs a positive count and a positive window, each on its own.
    let limited =
        |max: u32, window: Duration| worker(WorkerConfig::new("w").limiter(Some((max, window))));
    assert_eq!(refused_field(&limited(0, sec(1))), Some("worker.limiter"));
    assert_eq!(refused_field(&limited(5, sec(0))), Some("worker.limiter"));
    assert_eq!(refused_field(&limited(1, ms(1))), None);
    // A long poll of up to 60 s.
    let polling = |d: Duration| worker(WorkerConfig::new("w").poll_timeout(d));
    assert_eq!(refused_field(&polling(sec(60))), None);
    assert_eq!(
        refused_field(&polling(sec(60) + ms(1))),
        Some("worker.poll_timeout")
    );
    assert_eq!(refused_field(&polling(sec(0))), None);
    // Heartbeats: positive and shorter than the lock.
    let beating = |h: Duration| {
        worker(
            WorkerConfig::new("w")
                .lock_ttl(sec(30))
                .heartbeat_interval(Some(h)),
        )
    };
    assert_eq!(
        refused_field(&beating(sec(0))),
        Some("worker.heartbeat_interval")
    );
    assert_eq!(
        refused_field(&beating(sec(30))),
        Some("worker.heartbeat_interval")
    );
    assert_eq!(
        refused_field(&beating(sec(31))),
        Some("worker.heartbeat_interval")
    );
    assert_eq!(refused_field(&beating(sec(30) - ms(1))), None);
    let quiet = WorkerConfig::new("w")
        .lock_ttl(ms(1))
        .heartbeat_interval(None);
    assert_eq!(refused_field(&worker(quiet)), None, "no heartbeats");
    assert_eq!(
        refused_field(&worker(
            WorkerConfig::new("w").lock_ttl(Duration::from_micros(999))
        )),
        Some("worker.lock_ttl"),
        "sent as whole ms: under 1 ms is 0"
    );
    assert_eq!(
        refused_field(&worker(WorkerConfig::new("w").concurrency(0))),
        Some("worker.concurrency")
    );
    assert_eq!(
        refused_field(&worker(WorkerConfig::new("w").concurrency(1))),
        None
    );
}

#[test]
fn the_other_session_fields_are_refused_at_zero_only() {
    assert_eq!(
        refused_field(&ok().max_command_timeouts(0)),
        Some("max_command_timeouts")
    );
    assert_eq!(refused_field(&ok().max_command_timeouts(1)), None);
    assert_eq!(
        refused_field(&ok().max_in_flight_commands(0)),
        Some("max_in_flight_commands")
    );
    assert_eq!(refused_field(&ok().max_in_flight_commands(1)), None);
    assert_eq!(refused_field(&ok().with_token("t")), None);
    assert_eq!(ok().with_token("t").token.as_deref(), Some("t"));
    assert_eq!(ok().without_batching().batching, None);
}

/// SplitMix64 from `seed`: its `n`-th draw (1-based) as a uniform in `[0, 1)`.
fn splitmix64_unit(seed: u64, n: u32) -> f64 {
    let mut state = seed;
    let mut z = 0;
    for _ in 0..n {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
    }
    (z >> 11) as f64 / (1u64 << 53) as f64
}

#[test]
fn the_reconnect_jitter_is_drawn_from_the_seed_by_splitmix64() {
    // A fixed delay plus up to 100 % of it: each wait shows one draw, long enough (a
    // million seconds) that its nanoseconds show all but the last few bits of the draw.
    let base = Duration::from_secs(1_000_000);
    let reconnect = ReconnectConfig::default().base(base).max(base).jitter(1.0);
    for seed in [0, 0x5eed, u64::MAX] {
        let mut h = Harness::new(ok().reconnect(reconnect).seed(seed));
        let mut waits = Vec::new();
        for n in 1..=8 {
            h.s.handle_connect_failed(h.now);
            h.step();
            let wait = h.s.poll_timeout().unwrap() - h.now;
            assert_eq!(
                wait,
                reconnect.delay(n, splitmix64_unit(seed, n)),
                "seed {seed:#x}, attempt {n}"
            );
            waits.push(wait);
            h.advance(wait);
            assert!(h.take_events().contains(&Event::Connect));
        }
        waits.sort();
        waits.dedup();
        assert_eq!(waits.len(), 8, "every draw differs");
    }
}

#[test]
fn operation_ids_are_distinct_numbers() {
    let mut h = Harness::connected(ok());
    let a = h.add("q", 1);
    let b = h.add("q", 2);
    assert_ne!(a.get(), b.get());
    assert_ne!(a, b);
}

/// The ops of the `Done` events in `events`, in order, each checked to be a timeout.
fn timed_out(events: &[Event]) -> Vec<OpId> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Done { op, result } => {
                assert!(matches!(result, Err(Error::Timeout { .. })), "{result:?}");
                Some(*op)
            }
            _ => None,
        })
        .collect()
}

#[test]
fn written_commands_that_time_out_together_are_reported_in_deadline_order() {
    let pull = || {
        Command::Pull(PullArgs {
            queue: "q".into(),
            timeout: Some(5_000),
            ..PullArgs::default()
        })
    };
    let state = |id: &str| Command::GetState { id: id.into() };
    let mut h = Harness::connected(ok());
    // Written now: a lookup due in 30 s, a long poll due in 35 s, a lookup due in 30 s like
    // the first (a tie: the order written decides).
    let first = h.s.request(h.now, state("a")).unwrap();
    let long = h.s.request(h.now, pull()).unwrap();
    let tie = h.s.request(h.now, state("b")).unwrap();
    h.step();
    // Written 2 s later: a lookup due in 32 s, before the long poll.
    h.advance(Duration::from_secs(2));
    let later = h.s.request(h.now, state("c")).unwrap();
    h.step();
    assert_eq!(h.take_sent().len(), 4);
    h.take_events();
    h.now += Duration::from_secs(40);
    h.s.handle_timeout(h.now);
    h.step();
    assert_eq!(
        timed_out(&h.take_events()),
        vec![first, tie, later, long],
        "30 s, 30 s, 32 s, 35 s"
    );
}

#[test]
fn close_does_not_wait_for_a_pull_or_a_ping_still_out() {
    // A pull still out: closing the connection hands its jobs back to the server.
    let mut h = Harness::connected(ok().worker(Some(WorkerConfig::new("w"))));
    assert_eq!(h.take_sent().iter().map(cmd).collect::<Vec<_>>(), ["PULLB"]);
    assert!(h.s.pull_in_flight());
    h.s.close(h.now);
    h.step();
    assert_eq!(h.take_events(), [Event::Disconnect, Event::Closed]);
    assert!(h.s.is_closed());
    // A ping still out.
    let every = Duration::from_secs(10);
    let mut h = Harness::connected(ok().ping_interval(Some(every)));
    h.advance(every);
    assert_eq!(h.take_sent().iter().map(cmd).collect::<Vec<_>>(), ["Ping"]);
    h.take_events();
    h.s.close(h.now);
    h.step();
    assert_eq!(h.take_events(), [Event::Disconnect, Event::Closed]);
    // A lookup still out is waited for.
    let mut h = Harness::connected(ok());
    let op =
        h.s.request(h.now, Command::GetState { id: "7".into() })
            .unwrap();
    h.step();
    h.s.close(h.now);
    h.step();
    assert!(!h.take_events().contains(&Event::Closed));
    let sent = h.take_sent();
    h.feed(&Value::map([
        ("ok", Value::Bool(true)),
        ("state", Value::from("completed")),
        ("reqId", sent[0].get("reqId").unwrap().clone()),
    ]));
    assert!(matches!(h.done(op), Some(Ok(_))));
    assert!(h.take_events().contains(&Event::Closed));
}

#[test]
fn a_lost_connection_leaves_no_deadline_of_its_commands_behind() {
    // Replies due sooner than the reconnect: a deadline left behind would wake the driver
    // for nothing before it.
    let reconnect = ReconnectConfig::default().jitter(0.0);
    let timeout = Duration::from_millis(50);
    let mut h = Harness::connected(ok().reconnect(reconnect).command_timeout(timeout));
    let op = h.add("q", 1);
    assert_eq!(h.take_sent().len(), 1);
    assert_eq!(h.s.poll_timeout(), Some(h.now + timeout), "the add's reply");
    h.s.handle_disconnected(h.now);
    h.step();
    assert!(matches!(
        h.done(op),
        Some(Err(Error::ConnectionLost {
            maybe_applied: true
        }))
    ));
    assert_eq!(
        h.s.poll_timeout(),
        Some(h.now + Duration::from_millis(100)),
        "only the reconnect"
    );
    h.advance(Duration::from_millis(100));
    assert!(h.take_events().contains(&Event::Connect));
    h.s.handle_connected(h.now);
    h.step();
    assert!(h.s.is_connected());
    assert_eq!(h.s.poll_timeout(), None, "nothing left to wait for");
}

#[test]
fn a_pushb_is_replay_safe_only_when_every_job_has_a_custom_id() {
    use autobatch_core::session::Replay;
    let keyed = |id: &str| JobSpec::new("j", Value::Nil).with_options(JobOptions::new().job_id(id));
    let pushb = |jobs: Vec<JobSpec>| Command::PushB {
        queue: "q".into(),
        jobs,
    };
    assert_eq!(
        pushb(vec![keyed("a"), keyed("b")]).replay_safety(),
        Replay::Safe
    );
    assert_eq!(
        pushb(vec![keyed("a"), JobSpec::new("j", Value::Nil)]).replay_safety(),
        Replay::NotSafe
    );
    assert_eq!(
        pushb(vec![JobSpec::new("j", Value::Nil), keyed("b")]).replay_safety(),
        Replay::NotSafe
    );
    assert_eq!(Replay::Safe.and(Replay::Safe), Replay::Safe);
    assert_eq!(Replay::Safe.and(Replay::NotSafe), Replay::NotSafe);
    assert_eq!(Replay::NotSafe.and(Replay::Safe), Replay::NotSafe);
}

#[test]
fn a_lookup_not_yet_written_can_be_withdrawn_and_is_no_add() {
    let mut h = Harness::new(ok());
    let count =
        h.s.request(h.now, Command::Count { queue: "q".into() })
            .unwrap();
    let kept =
        h.s.request(h.now, Command::Count { queue: "r".into() })
            .unwrap();
    h.step();
    assert!(h.s.cancel(count));
    assert!(!h.s.cancel(count), "only once");
    h.s.handle_connected(h.now);
    h.step();
    let sent = h.take_sent();
    assert_eq!(sent.len(), 1, "only the other lookup is written");
    assert_eq!(sent[0].get("queue").and_then(Value::as_str), Some("r"));
    assert!(!h.s.cancel(kept), "too late once written");
    assert!(
        h.done(count).is_none(),
        "a withdrawn lookup gets no outcome"
    );
    assert_eq!(h.s.stats().adds_cancelled, 0, "a lookup is not an add");
}

#[test]
fn no_ping_is_queued_while_the_connection_is_down() {
    let every = Duration::from_secs(10);
    let reconnect = ReconnectConfig::default()
        .base(Duration::from_secs(20))
        .jitter(0.0);
    let mut h = Harness::connected(ok().ping_interval(Some(every)).reconnect(reconnect));
    h.s.handle_disconnected(h.now);
    h.step();
    // Down past the time the next ping was due.
    h.advance(Duration::from_secs(20));
    assert!(h.take_events().contains(&Event::Connect));
    h.s.handle_connected(h.now);
    h.step();
    assert!(
        h.take_sent().is_empty(),
        "nothing to send on the new connection"
    );
    assert_eq!(h.s.poll_timeout(), Some(h.now + every), "its first ping");
    h.advance(every);
    assert_eq!(h.take_sent().iter().map(cmd).collect::<Vec<_>>(), ["Ping"]);
}

#[test]
fn adds_alternating_between_queues_each_go_to_their_own_and_a_bad_name_is_refused_after_any() {
    let bad = |h: &mut Harness| {
        let r = h.s.add(h.now, "bad queue", JobSpec::new("j", Value::Nil));
        assert!(
            matches!(r, Err(Error::Invalid(ref e)) if e.field == "queue"),
            "{r:?}"
        );
    };
    for batching in [false, true] {
        let config = if batching {
            ok()
        } else {
            ok().without_batching()
        };
        let mut h = Harness::connected(config);
        bad(&mut h);
        for (i, queue) in ["a", "b", "a", "a", "b"].into_iter().enumerate() {
            h.add(queue, i as i64);
            let sent = h.take_sent();
            let queues: Vec<_> = sent
                .iter()
                .map(|s| s.get("queue").and_then(Value::as_str).unwrap())
                .collect();
            if batching && i > 1 {
                // Each queue has its first add out: the rest wait in its batcher.
                assert!(queues.is_empty(), "add {i}: {queues:?}");
            } else {
                assert_eq!(queues, [queue], "add {i}, batching {batching}");
            }
            bad(&mut h);
        }
        let st = h.s.stats();
        assert_eq!(st.adds, 5);
    }
}

#[test]
fn commands_never_written_in_time_are_counted_as_timeouts() {
    // Never connected: both wait in the send queue until their deadline.
    let timeout = Duration::from_secs(2);
    let mut h = Harness::new(ok().command_timeout(timeout));
    let ops: Vec<OpId> = ["a", "b"]
        .iter()
        .map(|id| {
            h.s.request(h.now, Command::GetState { id: (*id).into() })
                .unwrap()
        })
        .collect();
    h.step();
    h.advance(timeout);
    for op in ops {
        assert_eq!(
            h.done(op),
            Some(&Err(Error::Timeout {
                maybe_applied: false
            }))
        );
    }
    assert_eq!(h.s.stats().timeouts, 2);
}

#[test]
fn a_job_that_fills_a_pushb_frame_exactly_is_sent_and_one_byte_more_is_refused() {
    use autobatch_core::wire::{pushb_jobs_budget, MAX_FRAME};
    let budget = pushb_jobs_budget("q");
    // Tags of a megabyte each, the last one cut so the job's PUSHB share is `len` bytes.
    let job = |len: usize| {
        let build = |last: usize| {
            let mut tags = vec!["t".repeat(1_000_000); 60];
            tags.push("u".repeat(last));
            JobSpec::new("j", Value::Nil).with_options(JobOptions::new().tags(tags))
        };
        let guess = 1_000_000;
        let over = build(guess).pushb_len() as isize - len as isize;
        let exact = build((guess as isize - over) as usize);
        assert_eq!(exact.pushb_len(), len);
        exact
    };
    let mut h = Harness::connected(ok());
    let err = h.s.add(h.now, "q", job(budget + 1)).unwrap_err();
    assert!(
        matches!(&err, Error::Invalid(e) if e.field == "data"),
        "{err:?}"
    );
    let op = h.s.add(h.now, "q", job(budget)).unwrap();
    h.step();
    assert_eq!(h.take_sent().len(), 1, "it fits in a frame of its own");
    assert!(h.frame_lens.iter().all(|&n| n <= MAX_FRAME));
    assert!(h.done(op).is_none(), "waiting for its reply");
}

#[test]
fn an_add_larger_than_the_buffer_is_refused_even_when_nothing_waits() {
    let batching = BatchConfig::new().max_pending_bytes(1_000);
    let mut h = Harness::connected(ok().batching(Some(batching)));
    let big = JobSpec::new("j", Value::Str("x".repeat(2_000)));
    assert!(matches!(h.s.add(h.now, "q", big), Err(Error::Overflow)));
    h.step();
    assert!(h.take_sent().is_empty());
    let op = h.add("q", 1);
    assert_eq!(h.take_sent().len(), 1, "a small one still goes");
    assert!(h.done(op).is_none());
}

#[test]
fn release_unwritten_gives_back_a_held_add_as_cancelled_not_failed() {
    let mut h = Harness::connected(ok());
    let written = h.add("q", 0);
    assert_eq!(h.take_sent().len(), 1);
    h.s.handle_disconnected(h.now);
    h.step();
    assert!(matches!(h.done(written), Some(Err(_))));
    assert_eq!(h.s.stats().adds_failed, 1, "the written add");
    // Made and given back before any poll: still held, alone.
    let held = h.s.add(h.now, "q", JobSpec::new("j", Value::Nil)).unwrap();
    assert_eq!(h.s.release_unwritten(h.now, Release::Unwritten), 1);
    h.step();
    assert_eq!(
        h.done(held),
        Some(&Err(Error::ConnectionLost {
            maybe_applied: false
        }))
    );
    let st = h.s.stats();
    assert_eq!((st.adds, st.adds_cancelled, st.adds_failed), (2, 1, 1));
}

#[test]
fn a_held_add_withdrawn_or_timed_out_before_any_poll_lets_close_finish() {
    let timeout = Duration::from_secs(2);
    // Withdrawn.
    let mut h = Harness::connected(ok());
    let op = h.s.add(h.now, "q", JobSpec::new("j", Value::Nil)).unwrap();
    assert!(h.s.cancel(op));
    h.s.close(h.now);
    h.step();
    assert!(h.take_sent().is_empty());
    assert!(h.take_events().contains(&Event::Closed));
    // Timed out: several inputs may come before a round of polls.
    let mut h = Harness::connected(ok().command_timeout(timeout));
    let op = h.s.add(h.now, "q", JobSpec::new("j", Value::Nil)).unwrap();
    h.now += timeout;
    h.s.handle_timeout(h.now);
    h.s.close(h.now);
    h.step();
    assert!(h.take_sent().is_empty());
    assert_eq!(
        h.done(op),
        Some(&Err(Error::Timeout {
            maybe_applied: false
        }))
    );
    let st = h.s.stats();
    assert_eq!((st.timeouts, st.adds_failed), (1, 1));
    assert!(h.take_events().contains(&Event::Closed));
}

#[test]
fn a_buffered_add_that_times_out_is_counted_with_the_batch_ahead_of_it() {
    let timeout = Duration::from_secs(2);
    let batching = BatchConfig::new().max_in_flight(1);
    // Never connected: the first add's PUSH waits in the send queue, holding the queue's one
    // slot, and the second add waits in the buffer behind it.
    let mut h = Harness::new(ok().batching(Some(batching)).command_timeout(timeout));
    let queued = h.add("q", 1);
    let buffered = h.add("q", 2);
    assert_eq!(h.s.pending_adds().items, 1);
    h.advance(timeout);
    let not_applied = Err(Error::Timeout {
        maybe_applied: false,
    });
    assert_eq!(h.done(buffered), Some(&not_applied));
    assert_eq!(h.done(queued), Some(&not_applied));
    let st = h.s.stats();
    assert_eq!((st.timeouts, st.adds_failed), (2, 2));
}

#[test]
fn a_pushb_answered_with_too_few_ids_fails_each_of_its_adds_and_frees_its_slot() {
    let mut h = Harness::connected(ok());
    let ops: Vec<OpId> = (0..3)
        .map(|i| {
            h.s.add(h.now, "q", JobSpec::new("j", Value::Int(i)))
                .unwrap()
        })
        .collect();
    h.step();
    let sent = h.take_sent();
    assert_eq!(cmd(&sent[0]), "PUSHB");
    h.feed(&Value::map([
        ("ok", Value::Bool(true)),
        (
            "ids",
            Value::Array(vec![Value::from("a"), Value::from("b")]),
        ),
        ("reqId", sent[0].get("reqId").unwrap().clone()),
    ]));
    let why = "PUSHB of 3 jobs answered with 2 ids".to_owned();
    for op in &ops {
        assert_eq!(h.done(*op), Some(&Err(Error::Protocol(why.clone()))));
    }
    assert_eq!(h.s.stats().adds_ok, 0);
    // The batch's slot is free again: the next add leaves at once.
    h.add("q", 9);
    assert_eq!(h.take_sent().len(), 1);
}

/// Refuses `req` with `msg`, as the server does.
fn refuse(h: &mut Harness, req: &Value, msg: &str) {
    let mut out = Vec::new();
    encode_error(req.get("reqId").unwrap(), msg, &mut out);
    h.feed(&Value::decode(&out).unwrap());
}

#[test]
fn a_pushb_refusal_naming_no_job_of_it_fails_them_all_and_a_lone_rest_refused_fails_alone() {
    let mut h = Harness::connected(ok());
    let wave = |h: &mut Harness, n: i64| -> Vec<OpId> {
        let ops = (0..n)
            .map(|i| {
                h.s.add(h.now, "q", JobSpec::new("j", Value::Int(i)))
                    .unwrap()
            })
            .collect();
        h.step();
        ops
    };
    // An index past the batch names none of its jobs: every one fails, nothing goes again.
    let ops = wave(&mut h, 2);
    let batch = h.take_sent();
    assert_eq!(jobs_in(&batch[0]), 2);
    refuse(&mut h, &batch[0], "jobs[2]: priority must be an integer");
    for op in &ops {
        assert_eq!(
            h.done(*op),
            Some(&Err(Error::Server("priority must be an integer".into())))
        );
    }
    assert!(h.take_sent().is_empty());
    assert_eq!(h.s.stats().items_resent, 0);
    // One bad job of two: the good one goes again alone; refused in turn, it fails, and
    // nothing more is sent.
    let ops = wave(&mut h, 2);
    let batch = h.take_sent();
    refuse(&mut h, &batch[0], "jobs[0]: priority must be an integer");
    let again = h.take_sent();
    assert_eq!(again.iter().map(jobs_in).collect::<Vec<_>>(), [1]);
    refuse(&mut h, &again[0], "jobs[0]: delay must be positive");
    assert_eq!(
        h.done(ops[1]),
        Some(&Err(Error::Server("delay must be positive".into())))
    );
    assert!(h.take_sent().is_empty(), "no empty batch goes out");
    assert_eq!(h.s.stats().items_resent, 1);
    assert_eq!(h.s.stats().adds_failed, 4);
}

#[test]
fn a_written_bulk_add_is_looked_up_after_a_lost_connection_only_if_every_job_has_a_custom_id() {
    let keyed = |id: &str| JobSpec::new("j", Value::Nil).with_options(JobOptions::new().job_id(id));
    let reconnect = ReconnectConfig::default().jitter(0.0);
    let mut h = Harness::connected(ok().reconnect(reconnect));
    let safe =
        h.s.add_bulk(h.now, "q", vec![keyed("a"), keyed("b")])
            .unwrap();
    h.step();
    let mixed =
        h.s.add_bulk(h.now, "r", vec![keyed("c"), JobSpec::new("j", Value::Nil)])
            .unwrap();
    h.step();
    assert_eq!(
        h.take_sent().iter().map(jobs_in).collect::<Vec<_>>(),
        [2, 2]
    );
    h.s.handle_disconnected(h.now);
    h.step();
    assert_eq!(
        h.done(mixed),
        Some(&Err(Error::ConnectionLost {
            maybe_applied: true
        }))
    );
    assert!(h.done(safe).is_none(), "kept for the next connection");
    let st = h.s.stats();
    assert_eq!((st.items_resent, st.adds_failed), (0, 2));
    h.advance(Duration::from_millis(100));
    h.s.handle_connected(h.now);
    h.step();
    // Its jobs are looked up one after the other; both found, it is answered with their ids.
    for id in ["a", "b"] {
        let lookup = h.take_sent();
        assert_eq!(lookup.len(), 1);
        assert_eq!(lookup[0].get("id"), Some(&Value::from(id)));
        h.answer_job(&lookup[0], id);
    }
    assert!(h.take_sent().is_empty(), "nothing written again");
    let ids = |r: Option<&Result<Response, Error>>| match r {
        Some(Ok(Response::PushedBatch(ids))) => ids.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(ids(h.done(safe)), ["a", "b"]);
    assert_eq!(h.s.stats().adds_ok, 2, "each job of the bulk add");
}

#[test]
fn a_written_pushb_that_times_out_fails_each_of_its_adds_as_maybe_applied() {
    let timeout = Duration::from_secs(2);
    let mut h = Harness::connected(ok().command_timeout(timeout));
    let ops: Vec<OpId> = (0..2)
        .map(|i| {
            h.s.add(h.now, "q", JobSpec::new("j", Value::Int(i)))
                .unwrap()
        })
        .collect();
    h.step();
    assert_eq!(h.take_sent().iter().map(jobs_in).collect::<Vec<_>>(), [2]);
    h.advance(timeout);
    for op in &ops {
        assert_eq!(
            h.done(*op),
            Some(&Err(Error::Timeout {
                maybe_applied: true
            }))
        );
    }
    let st = h.s.stats();
    assert_eq!((st.timeouts, st.adds_failed), (1, 2));
}

#[test]
fn once_a_batch_is_answered_no_timer_is_left_for_its_adds() {
    let mut h = Harness::connected(ok());
    let ops: Vec<OpId> = (0..3)
        .map(|i| {
            h.s.add(h.now, "q", JobSpec::new("j", Value::Int(i)))
                .unwrap()
        })
        .collect();
    h.step();
    let sent = h.take_sent();
    assert_eq!(sent.iter().map(jobs_in).collect::<Vec<_>>(), [3]);
    h.answer_push(&sent[0]);
    assert!(ops.iter().all(|op| matches!(h.done(*op), Some(Ok(_)))));
    assert_eq!(h.s.poll_timeout(), None, "nothing waits on time");
}

#[test]
fn pending_adds_counts_held_and_buffered_adds_across_queues() {
    let mut h = Harness::connected(ok());
    let job = |n: i64| JobSpec::new("job", Value::map([("n", Value::Int(n))]));
    h.add("a", 0);
    assert_eq!(h.take_sent().len(), 1, "queue a's slot is taken");
    h.add("a", 1);
    assert!(h.take_sent().is_empty(), "buffered behind it");
    // Not polled yet: held, alone in queue b.
    h.s.add(h.now, "b", job(22)).unwrap();
    let pending = h.s.pending_adds();
    assert_eq!(pending.items, 2);
    assert_eq!(pending.bytes, job(1).pushb_len() + job(22).pushb_len());
    assert_eq!(pending.parked, 0);
}

#[test]
fn close_waits_for_a_held_job_and_the_reply_to_its_ackb() {
    let mut h = Harness::connected(ok().worker(Some(WorkerConfig::new("w"))));
    let pull = h.take_sent();
    h.feed(&pulled(&pull[0], &[("j1", "t1")]));
    h.s.close(h.now);
    h.step();
    assert!(!h.take_events().contains(&Event::Closed), "j1 is running");
    h.s.complete_job(h.now, "j1", Value::Nil).unwrap();
    h.step();
    let sent = h.take_sent();
    let ack = sent
        .iter()
        .find(|s| cmd(s) == "ACKB")
        .expect("flushed by close");
    assert!(
        !h.take_events().contains(&Event::Closed),
        "its reply is awaited"
    );
    h.feed(&Value::map([
        ("ok", Value::Bool(true)),
        ("reqId", ack.get("reqId").unwrap().clone()),
    ]));
    let events = h.take_events();
    assert!(events.contains(&Event::JobSettled {
        id: "j1".into(),
        result: Ok(true)
    }));
    assert!(events.contains(&Event::Closed));
}

#[test]
fn a_closing_worker_pulls_no_more_jobs_for_the_slots_it_frees() {
    let mut h = Harness::connected(ok().worker(Some(WorkerConfig::new("w"))));
    let pull = h.take_sent();
    h.feed(&pulled(&pull[0], &[("j1", "t1")]));
    assert!(h.take_sent().is_empty(), "its one slot is taken");
    h.s.close(h.now);
    h.step();
    h.s.complete_job(h.now, "j1", Value::Nil).unwrap();
    h.step();
    let sent = h.take_sent();
    assert_eq!(
        sent.iter().map(cmd).collect::<Vec<_>>(),
        ["ACKB"],
        "the ACK, and no pull for the slot it freed"
    );
    h.feed(&Value::map([
        ("ok", Value::Bool(true)),
        ("reqId", sent[0].get("reqId").unwrap().clone()),
    ]));
    assert!(h.take_events().contains(&Event::Closed));
    assert!(h.take_sent().is_empty());
}

#[test]
fn a_paused_worker_arms_no_timer_for_a_delayed_pull() {
    let mut h = Harness::new(ok().worker(Some(WorkerConfig::new("w"))));
    h.s.set_worker_paused(true);
    h.s.handle_connected(h.now);
    h.step();
    let at = h.now + Duration::from_secs(1);
    h.s.delay_pulls_until(at);
    assert_eq!(h.s.poll_timeout(), None, "paused: no pull to wait for");
    h.s.set_worker_paused(false);
    assert_eq!(h.s.poll_timeout(), Some(at), "resumed: the delayed pull");
}

/// The ids of the jobs each ACKB among `sent` completes.
fn acked(sent: &[Value]) -> Vec<Vec<&str>> {
    sent.iter()
        .filter(|s| cmd(s) == "ACKB")
        .map(|s| {
            s.get("ids")
                .and_then(Value::as_array)
                .unwrap()
                .iter()
                .map(|id| id.as_str().unwrap())
                .collect()
        })
        .collect()
}

#[test]
fn a_completion_counts_its_id_and_64_bytes_against_the_ack_buffer() {
    // "j1" and "j2" take 2 + 64 bytes each: one fits an ACK buffer of 66 bytes exactly.
    let linger = Duration::from_millis(50);
    let acks = BatchConfig::new()
        .max_batch(10)
        .linger(linger)
        .max_pending_bytes(66);
    let worker = WorkerConfig::new("w").concurrency(2).acks(acks);
    let mut h = Harness::connected(ok().worker(Some(worker)));
    let pull = h.take_sent();
    h.feed(&pulled(&pull[0], &[("j1", "t1"), ("j2", "t2")]));
    h.s.complete_job(h.now, "j1", Value::Nil).unwrap();
    h.step();
    assert_eq!(acked(&h.take_sent()), [["j1"]], "the first goes at once");
    h.s.complete_job(h.now, "j2", Value::Nil).unwrap();
    h.step();
    assert!(
        acked(&h.take_sent()).is_empty(),
        "the second fits the buffer and waits there behind the first"
    );
    h.advance(linger);
    assert_eq!(
        acked(&h.take_sent()),
        [["j2"]],
        "and leaves after the linger"
    );
}

#[test]
fn a_stack_line_cut_inside_a_character_ends_before_it() {
    use autobatch_core::session::MAX_STACK_LINE_BYTES;
    let mut h = Harness::connected(ok().worker(Some(WorkerConfig::new("w"))));
    let pull = h.take_sent();
    h.feed(&pulled(&pull[0], &[("j1", "t1")]));
    // One byte, then two-byte characters: the bound falls inside one of them.
    let line = format!("a{}", "é".repeat(MAX_STACK_LINE_BYTES));
    h.s.fail_job(h.now, "j1", JobFailure::new("boom").stack(vec![line]))
        .unwrap();
    h.step();
    let sent = h.take_sent();
    let fail = sent.iter().find(|s| cmd(s) == "FAIL").expect("the FAIL");
    let stack = fail.get("stack").and_then(Value::as_array).unwrap();
    let kept = stack[0].as_str().unwrap();
    assert_eq!(
        kept,
        format!("a{}", "é".repeat(MAX_STACK_LINE_BYTES / 2 - 1))
    );
    assert_eq!(kept.len(), MAX_STACK_LINE_BYTES - 1);
}

#[test]
fn close_sends_the_completions_waiting_in_the_ack_buffer_at_once() {
    let worker = WorkerConfig::new("w").concurrency(2);
    let mut h = Harness::connected(ok().worker(Some(worker)));
    let pull = h.take_sent();
    h.feed(&pulled(&pull[0], &[("j1", "t1"), ("j2", "t2")]));
    h.s.complete_job(h.now, "j1", Value::Nil).unwrap();
    h.step();
    let sent = h.take_sent();
    assert_eq!(acked(&sent), [["j1"]], "the first goes at once");
    h.s.complete_job(h.now, "j2", Value::Nil).unwrap();
    h.step();
    assert!(
        acked(&h.take_sent()).is_empty(),
        "the second lingers behind the first"
    );
    h.s.close(h.now);
    h.step();
    assert_eq!(
        acked(&h.take_sent()),
        [["j2"]],
        "closing with no job held sends it without waiting for the linger"
    );
}

/// The server's PULLB reply to `pull` with no job.
fn pulled_none(pull: &Value) -> Value {
    pulled(pull, &[])
}

#[test]
fn an_empty_non_blocking_poll_waits_before_polling_again() {
    let worker = WorkerConfig::new("w").poll_timeout(Duration::ZERO);
    let mut h = Harness::connected(ok().worker(Some(worker)));
    let pull = h.take_sent();
    h.feed(&pulled_none(&pull[0]));
    assert!(h.take_sent().is_empty(), "an idle worker does not spin");
    let idle = Duration::from_millis(50);
    assert_eq!(h.s.poll_timeout(), Some(h.now + idle));
    h.advance(idle);
    assert_eq!(h.take_sent().iter().map(cmd).collect::<Vec<_>>(), ["PULLB"]);
}

#[test]
fn an_empty_long_poll_polls_again_at_once() {
    let mut h = Harness::connected(ok().worker(Some(WorkerConfig::new("w"))));
    let pull = h.take_sent();
    h.feed(&pulled_none(&pull[0]));
    assert_eq!(
        h.take_sent().iter().map(cmd).collect::<Vec<_>>(),
        ["PULLB"],
        "the server waited its poll time already"
    );
}

#[test]
fn jobs_pulled_while_others_are_held_keep_the_heartbeat_on_its_schedule() {
    let worker = WorkerConfig::new("w")
        .concurrency(2)
        .heartbeat_interval(Some(Duration::from_secs(10)));
    let mut h = Harness::connected(ok().worker(Some(worker)));
    let first = h.take_sent();
    h.feed(&pulled(&first[0], &[("j1", "t1")]));
    let second = h.take_sent();
    assert_eq!(second.iter().map(cmd).collect::<Vec<_>>(), ["PULLB"]);
    h.advance(Duration::from_secs(4));
    h.feed(&pulled(&second[0], &[("j2", "t2")]));
    h.advance(Duration::from_secs(6));
    let sent = h.take_sent();
    let hb = sent
        .iter()
        .find(|s| cmd(s) == "JobHeartbeatB")
        .expect("due 10 s after the first job came");
    assert_eq!(
        hb.get("ids"),
        Some(&Value::Array(vec!["j1".into(), "j2".into()]))
    );
}

#[test]
fn a_refused_pull_is_tried_again_after_a_pause() {
    let mut h = Harness::connected(ok().worker(Some(WorkerConfig::new("w"))));
    let pull = h.take_sent();
    h.answer_error(&pull[0], "Queue not found");
    assert!(h.take_sent().is_empty(), "not at once");
    let pause = Duration::from_millis(500);
    assert_eq!(h.s.poll_timeout(), Some(h.now + pause));
    h.advance(pause);
    assert_eq!(h.take_sent().iter().map(cmd).collect::<Vec<_>>(), ["PULLB"]);
}

#[test]
fn a_fail_the_server_applied_settles_its_job_as_applied() {
    let mut h = Harness::connected(ok().worker(Some(WorkerConfig::new("w"))));
    let pull = h.take_sent();
    h.feed(&pulled(&pull[0], &[("j1", "t1")]));
    h.s.fail_job(h.now, "j1", JobFailure::new("boom")).unwrap();
    h.step();
    let sent = h.take_sent();
    let fail = sent.iter().find(|s| cmd(s) == "FAIL").expect("the FAIL");
    h.feed(&Value::map([
        ("ok", Value::Bool(true)),
        ("reqId", fail.get("reqId").unwrap().clone()),
    ]));
    assert!(h.take_events().contains(&Event::JobSettled {
        id: "j1".into(),
        result: Ok(true)
    }));
}

#[test]
fn an_ack_check_out_when_the_connection_is_lost_is_sent_again_on_the_next() {
    let worker = WorkerConfig::new("w").concurrency(2);
    let mut h = Harness::connected(ok().worker(Some(worker)));
    let pull = h.take_sent();
    h.feed(&pulled(&pull[0], &[("a", "t1"), ("b", "t2")]));
    for id in ["a", "b"] {
        h.s.complete_job(h.now, id, Value::Nil).unwrap();
    }
    h.step();
    let sent = h.take_sent();
    assert_eq!(acked(&sent), [["a", "b"]]);
    let ack = sent.iter().find(|s| cmd(s) == "ACKB").unwrap();
    h.answer_error(ack, "Job not found or not in processing state: a");
    let check = h
        .take_sent()
        .into_iter()
        .find(|s| cmd(s) == "GetState")
        .expect("b is checked");
    h.take_events();
    h.s.handle_disconnected(h.now);
    // Past the reconnect backoff, well within the command timeout.
    h.advance(Duration::from_secs(1));
    h.s.handle_connected(h.now);
    h.step();
    let again: Vec<Value> = h
        .take_sent()
        .into_iter()
        .filter(|s| cmd(s) == "GetState")
        .collect();
    assert_eq!(again.len(), 1, "a lookup is safe to send again");
    assert_eq!(again[0].get("id"), check.get("id"));
    assert!(
        !h.take_events()
            .iter()
            .any(|e| matches!(e, Event::JobSettled { id, .. } if id == "b")),
        "b waits for its check"
    );
}
