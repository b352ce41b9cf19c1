//! Golden tests: every frame captured between real bunqueue 2.9.5 peers (`tests/vectors/*.jsonl`,
//! see `tests/vectors/README.md`) goes through our framing, our MessagePack model, our typed
//! commands and replies, and back out through our encoders.
//!
//! * framing: every frame, fed in random chunks, and every connection's byte stream;
//! * values: each decoded [`Value`] equals the capture's JSON, honouring its markers and notes;
//! * commands: typed decoding, the server's verdict (our validation errors read exactly as
//!   bunqueue's), re-encoding, and for the official client's frames the same keys and values;
//! * replies: typed decoding by (conn, reqId) pairing, and our broker-side encoding has the shape
//!   of bunqueue's.
//!
//! The deliberate differences from the server are listed in [`KNOWN_DIFFERENCES`] and
//! [`SERVER_SIDE_ERRORS`], each with its reason.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use autobatch_core::wire::server::{encode_error, CommandError, DecodeCommand, EncodeResponse};
use autobatch_core::wire::{
    write_frame, Backoff, Command, CommandKind, DecodeError, FrameDecoder, FrameError, Incoming,
    ProtocolError, Reply, Response, Value, MAX_FRAME,
};
use serde_json::Value as J;

const VECTOR_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vectors");

/// Who produced the c2s frames of each file (vectors README table): `O` = the official TS
/// client, `R` = the raw Python client. A file in the directory that is missing here fails the
/// tests, so a new capture cannot go unchecked.
const FILES: &[(&str, Source)] = &[
    ("01_handshake.jsonl", Source::Official),
    ("01b_hello_raw.jsonl", Source::Raw),
    ("02_add_single.jsonl", Source::Official),
    ("03_add_options.jsonl", Source::Official),
    ("04_add_concurrent.jsonl", Source::Official),
    ("05_add_bulk.jsonl", Source::Official),
    ("06_worker_ack.jsonl", Source::Official),
    ("07_worker_fail.jsonl", Source::Official),
    ("08_ping.jsonl", Source::Official),
    ("09_auth.jsonl", Source::Official),
    ("10_errors_client.jsonl", Source::Official),
    ("11_raw_errors.jsonl", Source::Raw),
    ("12_pipelining_client.jsonl", Source::Official),
    ("12b_semaphore_raw.jsonl", Source::Raw),
    ("13_pushb_partial.jsonl", Source::Raw),
    ("14_ack_outcomes.jsonl", Source::Raw),
    ("15_sqlite_durable.jsonl", Source::Official),
    ("16_rate_limit_idle.jsonl", Source::Raw),
    ("17_oversized_data.jsonl", Source::Raw),
    ("18_events_raw.jsonl", Source::Raw),
    ("19_late_outcomes.jsonl", Source::Raw),
    ("20_pool_startup.jsonl", Source::Official),
];

/// Errors the server raises from its state (locks, auth, rate limits, lookups, groups), or for
/// commands our decoder keeps generic: [`Command::decode`] accepts these requests by design and
/// the broker answers them. Matched as prefixes.
const SERVER_SIDE_ERRORS: &[(&str, &str)] = &[
    ("Job not found", "lookup in the server's state"),
    ("Lock token required for job ", "lock state"),
    ("Invalid or expired lock token for job ", "lock state"),
    ("Invalid token", "auth configuration"),
    ("Not authenticated", "per-connection auth state"),
    ("Rate limit exceeded", "per-connection rate limiter"),
    ("Group ", "group size is admission state, not validation"),
    (
        "Unknown command: ",
        "unknown commands decode as Command::Other so the broker decides what it serves",
    ),
];

/// Requests where our typed decoding deliberately differs from the server's verdict, by reqId
/// (file, conn, reqId as JSON). Empty: every verdict the decoder can give matches the server.
const KNOWN_DIFFERENCES: &[(&str, u64, &str, &str)] = &[];

#[derive(Clone, Copy, PartialEq, Debug)]
enum Source {
    Official,
    Raw,
}

#[derive(Debug, Clone)]
struct Line {
    file: String,
    dir: String,
    bytes: Vec<u8>,
    decoded: J,
    notes: HashMap<String, String>,
    decode_error: Option<String>,
    incomplete: bool,
    truncated: bool,
    frame_len: Option<usize>,
    conn: u64,
    seq: u64,
}

impl Line {
    fn complete(&self) -> bool {
        !self.incomplete && !self.truncated
    }
    fn body(&self) -> &[u8] {
        &self.bytes[4..]
    }
    fn at(&self) -> String {
        format!("{} conn {} seq {}", self.file, self.conn, self.seq)
    }
}

fn unhex(s: &str) -> Vec<u8> {
    assert_eq!(s.len() & 1, 0, "odd hex length");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

fn source_of(file: &str) -> Source {
    FILES
        .iter()
        .find(|(f, _)| *f == file)
        .map(|(_, s)| *s)
        .unwrap_or_else(|| panic!("vector file {file} is not covered by the golden tests"))
}

/// Every vector file, in name order, parsed.
fn load() -> Vec<(String, Vec<Line>)> {
    let mut names: Vec<String> = std::fs::read_dir(VECTOR_DIR)
        .expect("vector dir")
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".jsonl"))
        .collect();
    names.sort();
    let mut out = Vec::new();
    for name in names {
        source_of(&name); // fails on an uncovered file
        let lines = parse_file(&name);
        out.push((name, lines));
    }
    out
}

/// One vector file (a path under the vector directory), parsed.
fn parse_file(name: &str) -> Vec<Line> {
    let text = std::fs::read_to_string(format!("{VECTOR_DIR}/{name}")).unwrap();
    let lines = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let j: J = serde_json::from_str(l).expect("jsonl");
            let notes = j
                .get("notes")
                .and_then(J::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(J::as_str)
                        .filter(|n| n.starts_with('$'))
                        .filter_map(|n| n.split_once(": "))
                        .map(|(p, d)| (p.to_owned(), d.to_owned()))
                        .collect()
                })
                .unwrap_or_default();
            Line {
                file: name.to_owned(),
                dir: j["dir"].as_str().unwrap().to_owned(),
                bytes: unhex(j["hex"].as_str().unwrap()),
                decoded: j["decoded"].clone(),
                notes,
                decode_error: j.get("decode_error").and_then(J::as_str).map(str::to_owned),
                incomplete: j.get("incomplete").and_then(J::as_bool).unwrap_or(false),
                truncated: j.get("hex_truncated").and_then(J::as_bool).unwrap_or(false),
                frame_len: j.get("frame_len").and_then(J::as_u64).map(|n| n as usize),
                conn: j["conn"].as_u64().unwrap(),
                seq: j["seq"].as_u64().unwrap(),
            }
        })
        .collect::<Vec<_>>();
    assert!(!lines.is_empty(), "{name} is empty");
    lines
}

/// A small deterministic PRNG for chunk sizes (no timing, no external state).
struct XorShift(u64);
impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[derive(Debug, PartialEq)]
enum Out {
    Frame(Vec<u8>),
    Empty,
}

/// Feeds `bytes` in random-sized chunks and drains the decoder after each one.
fn feed_chunked(bytes: &[u8], rng: &mut XorShift, max_chunk: usize) -> (Vec<Out>, FrameDecoder) {
    let mut d = FrameDecoder::new();
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < bytes.len() {
        let n = 1 + rng.below(max_chunk);
        let end = (pos + n).min(bytes.len());
        d.extend(&bytes[pos..end]);
        pos = end;
        loop {
            match d.next_frame() {
                Ok(Some(f)) => out.push(Out::Frame(f.to_vec())),
                Ok(None) => break,
                Err(FrameError::Empty) => out.push(Out::Empty),
                Err(e) => panic!("unexpected frame error {e}"),
            }
        }
    }
    (out, d)
}

fn expected_out(line: &Line) -> Out {
    if line.body().is_empty() {
        Out::Empty
    } else {
        Out::Frame(line.body().to_vec())
    }
}

// ---------------------------------------------------------------------------------------------
// JSON `decoded` → expected Value

/// Checks a decoded [`Value`] against the capture's JSON, honouring the markers and the notes.
fn check_json(j: &J, v: &Value, path: &str, notes: &HashMap<String, String>) -> Result<(), String> {
    if let Value::Raw(raw) = v {
        // A payload kept encoded: its tree must match just the same.
        let tree = raw
            .decode()
            .map_err(|e| format!("{path}: raw payload: {e}"))?;
        return check_json(j, &tree, path, notes);
    }
    let fail = |what: &str| Err(format!("{path}: {what}: json {j} vs {v:?}"));
    if let Some(note) = notes.get(path) {
        if note.contains("uint64") || note.contains("int64") {
            let want = j.as_i64().map(i128::from).or(j.as_u64().map(i128::from));
            return match (v, want) {
                (Value::BigInt(i), Some(w)) if *i == w => Ok(()),
                _ => fail("expected a BigInt (note: 64-bit int)"),
            };
        }
        if note.contains("float64") || note.contains("float32") {
            return match (v, j.as_f64()) {
                (Value::F64(f), Some(w)) if *f == w => Ok(()),
                _ => fail("expected an F64 (note: float)"),
            };
        }
        // Other notes (ext type 0, bin, trailing bytes) are expressed by the markers.
    }
    match j {
        J::Null => matches!(v, Value::Nil)
            .then_some(())
            .ok_or(())
            .or_else(|_| fail("nil")),
        J::Bool(b) => (v == &Value::Bool(*b))
            .then_some(())
            .ok_or(())
            .or_else(|_| fail("bool")),
        J::Number(n) => {
            let ok = if let Some(i) = n.as_i64() {
                v == &Value::Int(i)
            } else if let Some(u) = n.as_u64() {
                v == &Value::Int(u as i64)
            } else {
                // Non-integral (an integral float always carries a note).
                matches!(v, Value::F64(f) if *f == n.as_f64().unwrap())
            };
            ok.then_some(()).ok_or(()).or_else(|_| fail("number"))
        }
        J::String(s) => (v.as_str() == Some(s.as_str()))
            .then_some(())
            .ok_or(())
            .or_else(|_| fail("string")),
        J::Array(items) => {
            let Value::Array(vs) = v else {
                return fail("array");
            };
            if vs.len() != items.len() {
                return fail("array length");
            }
            for (i, (ji, vi)) in items.iter().zip(vs).enumerate() {
                check_json(ji, vi, &format!("{path}[{i}]"), notes)?;
            }
            Ok(())
        }
        J::Object(o) => {
            if o.get("$undefined") == Some(&J::Bool(true)) {
                return (v == &Value::Undefined)
                    .then_some(())
                    .ok_or(())
                    .or_else(|_| fail("undefined"));
            }
            if let Some(h) = o.get("$bin").and_then(J::as_str) {
                return (v == &Value::Bin(unhex(h)))
                    .then_some(())
                    .ok_or(())
                    .or_else(|_| fail("bin"));
            }
            assert!(
                !o.keys().any(|k| k.starts_with('$')),
                "{path}: unhandled marker {j}"
            );
            let Value::Map(entries) = v else {
                return fail("map");
            };
            if entries.len() != o.len() {
                return fail("map size");
            }
            let mut seen = BTreeSet::new();
            for (k, vv) in entries {
                let Some(k) = k.as_str() else {
                    return fail("non-string key");
                };
                if !seen.insert(k) {
                    return fail("duplicate key");
                }
                let Some(jv) = o.get(k) else {
                    return fail(&format!("key {k} not in json"));
                };
                check_json(jv, vv, &format!("{path}.{k}"), notes)?;
            }
            Ok(())
        }
    }
}

/// A JSON value (of a capture, without notes) as a plain Value, for reqIds and pairing.
fn json_to_value(j: &J) -> Value {
    match j {
        J::Null => Value::Nil,
        J::Bool(b) => Value::Bool(*b),
        J::Number(n) => n
            .as_i64()
            .map(Value::Int)
            .unwrap_or_else(|| Value::F64(n.as_f64().unwrap())),
        J::String(s) => Value::Str(s.clone()),
        J::Array(a) => Value::Array(a.iter().map(json_to_value).collect()),
        J::Object(o) if o.contains_key("$undefined") => Value::Undefined,
        J::Object(o) => Value::map(o.iter().map(|(k, v)| (k.clone(), json_to_value(v)))),
    }
}

// ---------------------------------------------------------------------------------------------
// Normalisation for shape comparisons

/// A canonical form: maps as sorted key → value, `undefined`-valued keys dropped (when asked).
#[derive(Debug, PartialEq)]
enum Norm {
    Leaf(Value),
    Array(Vec<Norm>),
    Map(BTreeMap<String, Norm>),
}

fn norm(v: &Value, drop_undefined: bool) -> Norm {
    match v {
        Value::Array(a) => Norm::Array(a.iter().map(|x| norm(x, drop_undefined)).collect()),
        Value::Map(m) => Norm::Map(
            m.iter()
                .filter(|(_, v)| !(drop_undefined && *v == Value::Undefined))
                .map(|(k, v)| (format!("{k:?}"), norm(v, drop_undefined)))
                .collect(),
        ),
        other => Norm::Leaf(other.clone()),
    }
}

fn keys(v: &Value) -> BTreeSet<String> {
    match v {
        Value::Map(m) => m
            .iter()
            .map(|(k, _)| k.as_str().unwrap_or("<non-string>").to_owned())
            .collect(),
        _ => BTreeSet::new(),
    }
}

// ---------------------------------------------------------------------------------------------
// Request/reply pairing

/// One c2s frame and the s2c reply that answers it (same conn, same reqId, later seq).
struct Exchange<'a> {
    req: &'a Line,
    /// The request body decoded (None: undecodable, empty, incomplete or truncated).
    value: Option<Value>,
    /// The reqId the reply must carry.
    req_id: Value,
    reply: Option<(&'a Line, Value)>,
}

fn decode_line(l: &Line) -> Option<Value> {
    if !l.complete() {
        return None;
    }
    Value::decode(l.body()).ok()
}

fn exchanges(lines: &[Line]) -> Vec<Exchange<'_>> {
    let replies: Vec<(&Line, Value)> = lines
        .iter()
        .filter(|l| l.dir == "s2c")
        .map(|l| (l, decode_line(l).unwrap_or_else(|| panic!("{}", l.at()))))
        .filter(|(_, v)| v.get("type").and_then(Value::as_str) != Some("event"))
        .collect();
    let mut used = vec![false; replies.len()];
    let mut out = Vec::new();
    let mut reqs: Vec<&Line> = lines.iter().filter(|l| l.dir == "c2s").collect();
    reqs.sort_by_key(|l| l.seq);
    for req in reqs {
        let value = decode_line(req);
        let req_id = match &value {
            Some(v) => Command::decode(v).0,
            None if req.truncated => req
                .decoded
                .get("reqId")
                .map(json_to_value)
                .unwrap_or(Value::Undefined),
            None => Value::Undefined,
        };
        let found = replies.iter().enumerate().position(|(i, (l, v))| {
            !used[i]
                && l.conn == req.conn
                && l.seq > req.seq
                && v.get("reqId").unwrap_or(&Value::Undefined) == &req_id
        });
        let reply = found.map(|i| {
            used[i] = true;
            (replies[i].0, replies[i].1.clone())
        });
        out.push(Exchange {
            req,
            value,
            req_id,
            reply,
        });
    }
    out
}

fn reply_error(v: &Value) -> Option<&str> {
    (v.get("ok") == Some(&Value::Bool(false)))
        .then(|| v.get("error").and_then(Value::as_str).unwrap())
}

// ---------------------------------------------------------------------------------------------
// Tests

#[test]
fn every_file_is_covered() {
    let files = load();
    let present: BTreeSet<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    for (f, _) in FILES {
        assert!(
            present.contains(f),
            "{f} is listed but missing from {VECTOR_DIR}"
        );
    }
    assert_eq!(present.len(), FILES.len());
    let frames: usize = files.iter().map(|(_, l)| l.len()).sum();
    assert_eq!(frames, 526, "the README counts 526 captured frames");
}

#[test]
fn every_frame_decodes_to_the_captured_value() {
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    let (mut values, mut errors, mut partial, mut truncated) = (0, 0, 0, 0);
    for (_, lines) in load() {
        for l in &lines {
            let at = l.at();
            if l.incomplete {
                // Bytes left at close: a partial frame, which must wait for more bytes; or the
                // oversized header of `11`, which must be refused at once.
                let mut d = FrameDecoder::new();
                d.extend(&l.bytes);
                if l.bytes.len() >= 4
                    && u32::from_be_bytes(l.bytes[..4].try_into().unwrap()) as usize > MAX_FRAME
                {
                    let err = d.next_frame().unwrap_err();
                    assert!(err.is_fatal(), "{at}");
                    assert_eq!(
                        err.to_string(),
                        "Frame too large: 67108865 bytes exceeds maximum 67108864"
                    );
                } else {
                    assert_eq!(d.next_frame(), Ok(None), "{at}: needs more bytes");
                    assert_eq!(d.buffered(), l.bytes.len(), "{at}");
                }
                partial += 1;
                continue;
            }
            let header = u32::from_be_bytes(l.bytes[..4].try_into().unwrap()) as usize;
            if l.truncated {
                // Only the first 256 bytes were kept: the header must announce the full length,
                // and the prefix alone is an incomplete frame.
                assert_eq!(Some(header + 4), l.frame_len, "{at}");
                assert_eq!(l.bytes.len(), 256, "{at}");
                let mut d = FrameDecoder::new();
                d.extend(&l.bytes);
                assert_eq!(d.next_frame(), Ok(None), "{at}");
                truncated += 1;
                continue;
            }
            assert_eq!(header, l.bytes.len() - 4, "{at}: header");
            for max_chunk in [1, 3, 17, 4096] {
                let (got, d) = feed_chunked(&l.bytes, &mut rng, max_chunk);
                assert_eq!(got, vec![expected_out(l)], "{at}");
                assert_eq!(d.buffered(), 0, "{at}");
            }
            let decoded = Value::decode(l.body());
            let trailing = l.notes.get("$").filter(|n| n.contains("trailing bytes"));
            if let Some(kind) = &l.decode_error {
                let err = decoded.expect_err(&at);
                match kind.as_str() {
                    k if k.starts_with("0xc1") => {
                        assert!(matches!(err, DecodeError::ReservedByte { .. }), "{at}")
                    }
                    "truncated" => assert!(matches!(err, DecodeError::Truncated { .. }), "{at}"),
                    other => panic!("{at}: unknown decode_error {other}"),
                }
                errors += 1;
            } else if let Some(note) = trailing {
                let extra: usize = note.split(' ').next().unwrap().parse().unwrap();
                assert_eq!(decoded, Err(DecodeError::TrailingBytes { extra }), "{at}");
                let body = l.body();
                let first = Value::decode(&body[..body.len() - extra]).unwrap();
                check_json(&l.decoded, &first, "$", &l.notes)
                    .unwrap_or_else(|e| panic!("{at}: {e}"));
                errors += 1;
            } else {
                let v = decoded.unwrap_or_else(|e| panic!("{at}: {e}"));
                check_json(&l.decoded, &v, "$", &l.notes).unwrap_or_else(|e| panic!("{at}: {e}"));
                values += 1;
            }
        }
    }
    assert_eq!((errors, partial, truncated), (4, 2, 2));
    assert_eq!(values, 526 - 4 - 2 - 2);
}

#[test]
fn connection_streams_reassemble_in_any_chunking() {
    let mut rng = XorShift(0x0123_4567_89ab_cdef);
    let mut everything = Vec::new();
    let mut everything_expected = Vec::new();
    for (name, lines) in load() {
        let mut streams: BTreeMap<(u64, String), Vec<&Line>> = BTreeMap::new();
        for l in &lines {
            streams.entry((l.conn, l.dir.clone())).or_default().push(l);
        }
        for ((conn, dir), mut ls) in streams {
            ls.sort_by_key(|l| l.seq);
            let mut bytes = Vec::new();
            let mut expected = Vec::new();
            let mut tail: Option<&Line> = None;
            for l in ls {
                if l.complete() {
                    bytes.extend_from_slice(&l.bytes);
                    expected.push(expected_out(l));
                } else if l.incomplete {
                    // Bytes left at close can only end their stream.
                    assert!(tail.is_none(), "{name} conn {conn}: two partial frames");
                    tail = Some(l);
                }
                // The two 10 MiB frames kept truncated are left out of the stream; the test
                // `oversized_frames_rebuild_from_their_prefix_and_are_refused` rebuilds them.
            }
            everything.extend_from_slice(&bytes);
            everything_expected.extend(expected.iter().map(|o| match o {
                Out::Frame(f) => Out::Frame(f.clone()),
                Out::Empty => Out::Empty,
            }));
            let fatal_tail = tail.is_some_and(|t| {
                u32::from_be_bytes(t.bytes[..4].try_into().unwrap()) as usize > MAX_FRAME
            });
            if let Some(t) = tail.filter(|_| !fatal_tail) {
                bytes.extend_from_slice(&t.bytes);
            }
            for max_chunk in [1, 7, 64, 1500, 1 << 20] {
                let (got, mut d) = feed_chunked(&bytes, &mut rng, max_chunk);
                assert_eq!(got, expected, "{name} conn {conn} {dir} chunk {max_chunk}");
                let left = tail.filter(|_| !fatal_tail).map_or(0, |t| t.bytes.len());
                assert_eq!(d.buffered(), left, "{name} conn {conn} {dir}");
                if let Some(t) = tail.filter(|_| fatal_tail) {
                    d.extend(&t.bytes);
                    assert!(d.next_frame().unwrap_err().is_fatal());
                }
            }
        }
    }
    // And every file's frames back to back, as one long connection.
    for max_chunk in [5, 333, 65536] {
        let (got, d) = feed_chunked(&everything, &mut rng, max_chunk);
        assert_eq!(got.len(), everything_expected.len());
        assert!(
            got == everything_expected,
            "concatenated stream, chunk {max_chunk}"
        );
        assert_eq!(d.buffered(), 0);
    }
}

/// Checks the typed command against the captured request's key facts.
fn check_command_facts(cmd: &Command, v: &Value, at: &str) {
    let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    let len = |k: &str| v.get(k).and_then(Value::as_array).map(<[Value]>::len);
    let num = |k: &str| v.get(k).and_then(Value::as_i64);
    let id_text = |x: &Value| match x {
        Value::Str(s) => Some(s.clone()),
        Value::Int(i) => Some(i.to_string()),
        _ => None,
    };
    assert_eq!(
        Some(cmd.name()),
        v.get("cmd").and_then(Value::as_str),
        "{at}"
    );
    match cmd {
        Command::PushB { queue, jobs } => {
            assert_eq!(Some(queue.clone()), s("queue"), "{at}");
            let items = v.get("jobs").and_then(Value::as_array).unwrap();
            assert_eq!(jobs.len(), items.len(), "{at}: PUSHB item count");
            for (job, item) in jobs.iter().zip(items) {
                // PUSHB reads `customId`; a `jobId` in an item is ignored, as by the server.
                let custom = item
                    .get("customId")
                    .and_then(id_text)
                    .filter(|s| !s.is_empty());
                assert_eq!(job.opts.job_id, custom, "{at}: customId → opts.job_id");
                check_job_facts(job, item, at);
            }
        }
        Command::Push { queue, job } => {
            assert_eq!(Some(queue.clone()), s("queue"), "{at}");
            let custom = v.get("jobId").and_then(id_text).filter(|s| !s.is_empty());
            assert_eq!(job.opts.job_id, custom, "{at}: jobId → opts.job_id");
            check_job_facts(job, v, at);
        }
        Command::Pull(args) | Command::PullB { args, .. } => {
            assert_eq!(Some(args.queue.clone()), s("queue"), "{at}");
            assert_eq!(args.owner, s("owner"), "{at}");
            assert_eq!(args.timeout, num("timeout"), "{at}");
            assert_eq!(args.lock_ttl, num("lockTtl"), "{at}");
            if let Command::PullB { count, .. } = cmd {
                assert_eq!(Some(*count), num("count").or(Some(0)), "{at}");
            }
        }
        Command::Ack { id, result, token } => {
            assert_eq!(Some(id.clone()), v.get("id").and_then(id_text), "{at}");
            assert_eq!(token.clone(), s("token").filter(|t| !t.is_empty()), "{at}");
            assert_eq!(
                result.as_ref(),
                v.get("result").filter(|r| !r.is_nullish()),
                "{at}"
            );
        }
        Command::AckB {
            ids,
            results,
            tokens,
            remove_on_completes,
        } => {
            assert_eq!(Some(ids.len()), len("ids"), "{at}: ACKB ids");
            assert_eq!(
                remove_on_completes.len(),
                len("removeOnCompletes").unwrap_or(0),
                "{at}: ACKB removeOnCompletes"
            );
            assert_eq!(
                tokens.as_ref().map(Vec::len),
                len("tokens"),
                "{at}: ACKB tokens"
            );
            assert_eq!(
                results.as_ref().map(Vec::len),
                len("results"),
                "{at}: ACKB results"
            );
            if let Some(t) = tokens {
                assert_eq!(ids.len(), t.len(), "{at}");
            }
        }
        Command::Fail {
            id,
            error,
            token,
            unrecoverable,
            stack,
            remove_on_fail,
        } => {
            assert_eq!(Some(id.clone()), v.get("id").and_then(id_text), "{at}");
            assert_eq!(
                *remove_on_fail,
                v.get("removeOnFail") == Some(&Value::Bool(true)),
                "{at}"
            );
            assert_eq!(error.clone(), s("error"), "{at}");
            assert_eq!(token.clone(), s("token"), "{at}");
            assert_eq!(
                *unrecoverable,
                v.get("unrecoverable") == Some(&Value::Bool(true)),
                "{at}"
            );
            assert_eq!(stack.len(), len("stack").unwrap_or(0), "{at}");
        }
        Command::GetJob { id } | Command::GetState { id } | Command::GetResult { id } => {
            assert_eq!(Some(id.clone()), v.get("id").and_then(id_text), "{at}");
        }
        Command::Count { queue } | Command::GetJobCounts { queue } => {
            assert_eq!(Some(queue.clone()), s("queue"), "{at}");
        }
        Command::Auth { token } => assert_eq!(Some(token.clone()), s("token"), "{at}"),
        Command::Hello | Command::Ping => {}
        Command::Other { cmd, body } => {
            assert_eq!(Some(cmd.clone()), s("cmd"), "{at}");
            assert_eq!(body, v, "{at}: Other keeps the whole request");
        }
        other => panic!("{at}: a command the vectors do not cover: {other:?}"),
    }
}

fn check_job_facts(job: &autobatch_core::wire::JobSpec, item: &Value, at: &str) {
    // Without a string name: the default or the legacy envelope (unit-tested in wire).
    if let Some(Value::Str(n)) = item.get("name") {
        assert_eq!(&job.name, n, "{at}");
    }
    let opt = |k: &str| item.get(k).and_then(Value::as_f64).map(|f| f as i64);
    // Time spans are Durations; the wire carries whole ms (a negative one was refused).
    let ms = |d: Option<std::time::Duration>| d.map(|d| d.as_millis() as i64);
    assert_eq!(job.opts.priority, opt("priority"), "{at}: priority");
    assert_eq!(ms(job.opts.delay), opt("delay"), "{at}: delay");
    assert_eq!(job.opts.attempts, opt("maxAttempts"), "{at}: maxAttempts");
    assert_eq!(ms(job.opts.timeout), opt("timeout"), "{at}: timeout");
    assert_eq!(ms(job.opts.ttl), opt("ttl"), "{at}: ttl");
    match (job.opts.backoff, item.get("backoff")) {
        (None, None) => {}
        (Some(Backoff::Delay(d)), Some(b)) => assert_eq!(ms(Some(d)), b.as_i64(), "{at}"),
        (Some(Backoff::Exponential(d)), Some(b)) | (Some(Backoff::Fixed(d)), Some(b)) => {
            assert_eq!(ms(Some(d)), b.get("delay").and_then(Value::as_i64), "{at}")
        }
        other => panic!("{at}: backoff {other:?}"),
    }
    if item.get("name").is_some() {
        assert_eq!(
            &job.data,
            item.get("data").unwrap_or(&Value::Undefined),
            "{at}: data"
        );
    }
}

#[test]
fn commands_decode_and_match_the_servers_verdicts() {
    let mut verdicts = 0;
    let mut validated = BTreeSet::new();
    for (_, lines) in load() {
        for x in exchanges(&lines) {
            let at = x.req.at();
            let Some(v) = &x.value else {
                // Undecodable, empty, incomplete or truncated: check the server's frame-level
                // answer where there is one.
                if let Some((_, r)) = &x.reply {
                    if x.req.complete() {
                        // msgpackr reads a lone `c1` as a value (not an error), so that body
                        // gets "Invalid command"; we report DecodeError::ReservedByte and the
                        // broker must map a body of exactly [0xc1] to "Invalid command".
                        let want = if x.req.body() == [0xc1] {
                            "Invalid command"
                        } else {
                            "Invalid command format"
                        };
                        assert_eq!(reply_error(r), Some(want), "{at}");
                        assert_eq!(r.get("reqId"), Some(&Value::Undefined), "{at}");
                    }
                }
                continue;
            };
            let (req_id, decoded) = Command::decode(v);
            if let Ok(cmd) = &decoded {
                check_command_facts(cmd, v, &at);
            }
            let Some((_, reply)) = &x.reply else {
                continue;
            };
            assert_eq!(reply.get("reqId"), Some(&req_id), "{at}: reqId echo");
            let known = KNOWN_DIFFERENCES.iter().any(|(f, c, rid, _)| {
                *f == x.req.file
                    && *c == x.req.conn
                    && json_to_value(&serde_json::from_str(rid).unwrap()) == req_id
            });
            match (reply_error(reply), &decoded) {
                (None, Ok(_)) => {}
                (None, Err(e)) if !known => panic!("{at}: the server accepted what we refuse: {e}"),
                (Some(server), Err(ours)) if !known => {
                    assert_eq!(ours.to_string(), server, "{at}: error text");
                    if let CommandError::Invalid(e) = ours {
                        validated.insert(e.field);
                    }
                }
                (Some(server), Ok(cmd)) if !known => {
                    let why = SERVER_SIDE_ERRORS
                        .iter()
                        .find(|(p, _)| server.starts_with(p));
                    assert!(
                        why.is_some(),
                        "{at}: the server refused {} with {server:?}, our decoder accepts it",
                        cmd.name()
                    );
                }
                _ => {}
            }
            if let (Some(_), Err(CommandError::Protocol(ProtocolError::NotACommand))) =
                (reply_error(reply), &decoded)
            {
                assert_eq!(reply_error(reply), Some("Invalid command"), "{at}");
            }
            verdicts += 1;
        }
    }
    assert!(verdicts > 200, "{verdicts}");
    // The validation our decoder does was exercised against the server's own words.
    for field in [
        "queue",
        "priority",
        "maxAttempts",
        "backoff",
        "delay",
        "name",
        "data",
        "timestamp",
        "tokens",
        "results",
        "count",
        "timeout",
        "jobs",
    ] {
        assert!(
            validated.contains(field),
            "no server verdict checked for {field}: {validated:?}"
        );
    }
}

#[test]
fn oversized_frames_rebuild_from_their_prefix_and_are_refused() {
    // `17` kept only 256 bytes of its two 10 MiB frames. Their content is known (a string of
    // 10 485 760 'x'), so rebuild them with our encoder, check length and prefix against the
    // capture, then decode them in the broker role.
    let files = load();
    let (_, lines) = files.iter().find(|(n, _)| n.starts_with("17_")).unwrap();
    let mut checked = 0;
    for x in exchanges(lines).iter().filter(|x| x.req.truncated) {
        let blob = Value::Str("x".repeat(10_485_760));
        let expand = |j: &J| -> Value {
            fn go(j: &J, blob: &Value) -> Value {
                match j {
                    J::String(s) if s.starts_with("<string of 10485760 chars") => blob.clone(),
                    J::Array(a) => Value::Array(a.iter().map(|x| go(x, blob)).collect()),
                    J::Object(o) => {
                        // The raw client writes keys in its own order; keep the capture's.
                        Value::map(o.iter().map(|(k, v)| (k.clone(), go(v, blob))))
                    }
                    other => json_to_value(other),
                }
            }
            go(j, &blob)
        };
        let mut v = expand(&x.req.decoded);
        // serde_json sorts keys; restore the wire order seen in the prefix.
        reorder_like_prefix(&mut v, x.req.body());
        let mut frame = Vec::new();
        write_frame(&mut frame, |b| v.encode(b)).unwrap();
        assert_eq!(Some(frame.len()), x.req.frame_len, "{}", x.req.at());
        assert_eq!(&frame[..256], &x.req.bytes[..], "{}", x.req.at());
        let mut d = FrameDecoder::new();
        d.extend(&frame);
        let body = d.next_frame().unwrap().unwrap();
        let (req_id, res) = Command::decode(&Value::decode(&body).unwrap());
        let (_, reply) = x.reply.as_ref().unwrap();
        assert_eq!(reply.get("reqId"), Some(&req_id));
        assert_eq!(res.unwrap_err().to_string(), reply_error(reply).unwrap());
        checked += 1;
    }
    assert_eq!(checked, 2);
}

/// Reorders map keys (recursively) to the order in which they appear in `prefix`.
fn reorder_like_prefix(v: &mut Value, prefix: &[u8]) {
    fn find(h: &[u8], n: &[u8]) -> usize {
        h.windows(n.len())
            .position(|w| w == n)
            .unwrap_or(usize::MAX)
    }
    if let Value::Map(m) = v {
        m.sort_by_key(|(k, _)| {
            let mut key = Vec::new();
            k.encode(&mut key);
            find(prefix, &key)
        });
        for (_, x) in m.iter_mut() {
            reorder_like_prefix(x, prefix);
        }
    } else if let Value::Array(a) = v {
        for x in a {
            reorder_like_prefix(x, prefix);
        }
    }
}

#[test]
fn replies_decode_to_typed_responses() {
    let mut seen: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut bump = |k: &'static str| *seen.entry(k).or_default() += 1;
    for (name, lines) in load() {
        // Every s2c frame is a reply or an event.
        for l in lines.iter().filter(|l| l.dir == "s2c") {
            let v = Value::decode(l.body()).unwrap();
            match Incoming::from_value(v.clone()).unwrap_or_else(|e| panic!("{}: {e}", l.at())) {
                Incoming::Event(e) => {
                    assert_eq!(v.get("type"), Some(&Value::from("event")));
                    let ev = e.get("event").unwrap();
                    assert!(ev.get("eventType").and_then(Value::as_str).is_some());
                    assert!(matches!(ev.get("timestamp"), Some(Value::F64(_))));
                    bump("event");
                }
                Incoming::Reply(r) => {
                    assert_eq!(&r.req_id, v.get("reqId").unwrap(), "{}", l.at());
                    if let Some(e) = reply_error(&v) {
                        assert_eq!(r.result, Err(e.to_owned()));
                        bump("error");
                    }
                }
            }
        }
        for x in exchanges(&lines) {
            let (Some(req), Some((rl, reply))) = (&x.value, &x.reply) else {
                continue;
            };
            let Ok(cmd) = Command::decode(req).1 else {
                continue;
            };
            let at = rl.at();
            let Ok(Incoming::Reply(r)) = Incoming::from_value(reply.clone()) else {
                panic!("{at}: not a reply")
            };
            assert_eq!(r.req_id, x.req_id, "{at}");
            if r.result.is_err() {
                continue;
            }
            let resp = r
                .response(cmd.kind())
                .unwrap_or_else(|e| panic!("{at}: {} reply: {e}", cmd.name()));
            check_response(&name, &cmd, &resp, reply, &at, &mut bump);
        }
    }
    for k in [
        "PushedBatch",
        "Pushed",
        "Pulled",
        "PulledBatch",
        "Counts",
        "Count",
        "State",
        "Pong",
        "Hello",
        "AckedBatch",
        "AckedBatch.ignored",
        "Finalized",
        "Finalized.late",
        "Job",
        "Result",
        "Done",
        "Other",
        "event",
        "error",
    ] {
        assert!(
            seen.get(k).copied().unwrap_or(0) > 0,
            "no {k} checked: {seen:?}"
        );
    }
}

fn check_response(
    file: &str,
    cmd: &Command,
    resp: &Response,
    reply: &Value,
    at: &str,
    bump: &mut impl FnMut(&'static str),
) {
    let data = reply.get("data");
    let arr = |k: &str| reply.get(k).and_then(Value::as_array).unwrap();
    let id_of = |j: &Value| match j.get("id") {
        Some(Value::Str(s)) => s.clone(),
        Some(Value::Int(i)) => i.to_string(),
        other => panic!("{at}: id {other:?}"),
    };
    match (cmd, resp) {
        (Command::PushB { jobs, .. }, Response::PushedBatch(ids)) => {
            assert_eq!(ids.len(), jobs.len(), "{at}: one id per PUSHB item");
            let want: Vec<String> = arr("ids")
                .iter()
                .map(|i| i.as_str().unwrap().to_owned())
                .collect();
            assert_eq!(ids, &want, "{at}");
            bump("PushedBatch");
        }
        (Command::Push { .. }, Response::Pushed(id)) => {
            assert_eq!(id, &id_of(reply), "{at}");
            bump("Pushed");
        }
        (Command::Pull(args), Response::Pulled { job, token }) => {
            match reply.get("job") {
                Some(Value::Nil) => assert!(job.is_none(), "{at}"),
                Some(j) => {
                    let job = job.as_ref().unwrap();
                    assert_eq!(job.id, id_of(j), "{at}");
                    assert_eq!(
                        Some(job.name.as_str()),
                        j.get("name").and_then(Value::as_str)
                    );
                    assert_eq!(Some(&job.data), j.get("data"));
                }
                None => panic!("{at}: no job key"),
            }
            assert_eq!(
                token.as_deref(),
                reply.get("token").and_then(Value::as_str),
                "{at}"
            );
            assert_eq!(
                args.owner.is_some(),
                reply.get("token").is_some(),
                "{at}: token key iff owner"
            );
            bump("Pulled");
        }
        (Command::PullB { args, count }, Response::PulledBatch { jobs, tokens }) => {
            let want: Vec<String> = arr("jobs").iter().map(id_of).collect();
            let got: Vec<String> = jobs.iter().map(|j| j.id.clone()).collect();
            assert_eq!(got, want, "{at}");
            assert!(jobs.len() <= *count as usize, "{at}");
            if args.owner.is_some() {
                assert_eq!(tokens.len(), jobs.len(), "{at}: a token per job");
            } else {
                assert!(tokens.is_empty() && reply.get("tokens").is_none(), "{at}");
            }
            bump("PulledBatch");
        }
        (Command::GetJobCounts { .. }, Response::Counts(c)) => {
            let counts = reply.get("counts").unwrap();
            let n = |k: &str| counts.get(k).and_then(Value::as_i64).unwrap() as u64;
            assert_eq!(
                [
                    c.waiting,
                    c.prioritized,
                    c.delayed,
                    c.active,
                    c.completed,
                    c.failed,
                    c.waiting_children,
                    c.paused
                ],
                [
                    n("waiting"),
                    n("prioritized"),
                    n("delayed"),
                    n("active"),
                    n("completed"),
                    n("failed"),
                    n("waiting-children"),
                    n("paused")
                ],
                "{at}"
            );
            bump("Counts");
        }
        (Command::Count { .. }, Response::Count(n)) => {
            assert_eq!(
                Some(*n as i64),
                reply.get("count").and_then(Value::as_i64),
                "{at}"
            );
            bump("Count");
        }
        (Command::GetState { .. }, Response::State(s)) => {
            assert_eq!(
                Some(s.as_str()),
                reply.get("state").and_then(Value::as_str),
                "{at}"
            );
            bump("State");
        }
        (Command::Ping, Response::Pong { time }) => {
            assert_eq!(Some(&Value::F64(*time)), data.unwrap().get("time"), "{at}");
            bump("Pong");
        }
        (
            Command::Hello,
            Response::Hello {
                protocol_version,
                server,
                version,
            },
        ) => {
            assert_eq!(
                (*protocol_version, server.as_str(), version.as_str()),
                (3, "bunqueue", "2.9.5")
            );
            bump("Hello");
        }
        (
            Command::AckB { ids, .. },
            Response::AckedBatch {
                ignored_indices,
                ignored_ids,
            },
        ) => {
            match data {
                Some(d) => {
                    let idx: Vec<usize> = d
                        .get("ignoredIndices")
                        .unwrap()
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|i| i.as_i64().unwrap() as usize)
                        .collect();
                    assert_eq!(ignored_indices, &idx, "{at}");
                    for (i, id) in ignored_indices.iter().zip(ignored_ids) {
                        assert_eq!(&ids[*i], id, "{at}: ignoredIds parallel to ignoredIndices");
                    }
                    if file.starts_with("19_") {
                        assert_eq!(ignored_indices, &[0, 1, 2], "{at}");
                    }
                    bump("AckedBatch.ignored");
                }
                None => assert!(ignored_indices.is_empty() && ignored_ids.is_empty()),
            }
            bump("AckedBatch");
        }
        (Command::Ack { .. } | Command::Fail { .. }, Response::Finalized { applied }) => {
            let late = data.and_then(|d| d.get("applied")) == Some(&Value::Bool(false));
            assert_eq!(*applied, !late, "{at}");
            if late {
                assert!(file.starts_with("19_"), "{at}");
                bump("Finalized.late");
            }
            bump("Finalized");
        }
        (Command::GetJob { id }, Response::Job(job)) => {
            assert_eq!(&job.id, id, "{at}");
            let j = reply.get("job").unwrap();
            assert_eq!(
                job.state.as_ref().map(|s| s.as_str()),
                j.get("state").and_then(Value::as_str)
            );
            assert!(
                matches!(j.get("createdAt"), Some(Value::F64(_))),
                "{at}: float64 timestamps"
            );
            bump("Job");
        }
        (Command::GetResult { .. }, Response::Result(r)) => {
            assert_eq!(
                r.as_ref(),
                reply.get("result").filter(|r| !r.is_nullish()),
                "{at}"
            );
            bump("Result");
        }
        (Command::Auth { .. }, Response::Done) => bump("Done"),
        (Command::Other { .. }, Response::Other(v)) => {
            assert_eq!(v, reply, "{at}");
            bump("Other");
        }
        (c, r) => panic!("{at}: {} answered by {r:?}", c.name()),
    }
}

#[test]
fn reencoded_commands_round_trip_and_match_the_official_client() {
    let mut compared: BTreeSet<String> = BTreeSet::new();
    let mut round_trips = 0;
    for (name, lines) in load() {
        let official = source_of(&name) == Source::Official;
        for l in lines.iter().filter(|l| l.dir == "c2s") {
            let Some(v) = decode_line(l) else { continue };
            let (req_id, Ok(cmd)) = Command::decode(&v) else {
                continue;
            };
            let at = l.at();
            let mut out = Vec::new();
            let rid = (req_id != Value::Undefined).then_some(&req_id);
            cmd.encode(rid, &mut out);
            let ours = Value::decode(&out).unwrap_or_else(|e| panic!("{at}: {e}"));
            let (back_id, back) = Command::decode(&ours);
            assert_eq!(back_id, req_id, "{at}");
            assert_eq!(
                back.map(pushb_flags_default),
                Ok(pushb_flags_default(cmd.clone())),
                "{at}: round trip"
            );
            round_trips += 1;
            if let Command::Other { .. } = cmd {
                // Kept whole: the re-encoding is the same request (key order aside).
                assert_eq!(norm(&ours, false), norm(&v, false), "{at}: Other");
                continue;
            }
            if official {
                // Same keys, same values, as the official client; `undefined`-valued keys it
                // leaves in (dedup.extend, …) count as absent.
                assert_eq!(
                    norm(&ours, true),
                    norm(&v, true),
                    "{at}: {} vs the official client",
                    cmd.name()
                );
                compared.insert(cmd.name().to_owned());
            }
        }
    }
    assert!(round_trips > 200, "{round_trips}");
    for c in [
        "PUSH",
        "PUSHB",
        "PULL",
        "PULLB",
        "ACKB",
        "FAIL",
        "GetJob",
        "GetState",
        "Count",
        "GetJobCounts",
        "Ping",
        "Hello",
        "Auth",
        "ACK",
    ] {
        assert!(
            compared.contains(c),
            "{c} not compared with the official client: {compared:?}"
        );
    }
}

/// Known difference: like the official client, our PUSHB items always carry
/// `removeOnComplete`/`removeOnFail` (`false` when unset, the server's default), so an item
/// that had neither decodes back with `Some(false)`.
fn pushb_flags_default(cmd: Command) -> Command {
    match cmd {
        Command::PushB { queue, mut jobs } => {
            for j in &mut jobs {
                j.opts.remove_on_complete.get_or_insert(false);
                j.opts.remove_on_fail.get_or_insert(false);
            }
            Command::PushB { queue, jobs }
        }
        other => other,
    }
}

#[test]
fn encoded_replies_have_the_servers_shape() {
    let mut compared: BTreeSet<String> = BTreeSet::new();
    for (_, lines) in load() {
        for x in exchanges(&lines) {
            let Some((rl, reply)) = &x.reply else {
                continue;
            };
            let at = rl.at();
            let mut out = Vec::new();
            if let Some(msg) = reply_error(reply) {
                encode_error(&x.req_id, msg, &mut out);
                let ours = Value::decode(&out).unwrap();
                assert_eq!(norm(&ours, false), norm(reply, false), "{at}: error reply");
                compared.insert("error".into());
                continue;
            }
            let Some(req) = &x.value else { continue };
            let Ok(cmd) = Command::decode(req).1 else {
                continue;
            };
            let Incoming::Reply(r) = Incoming::from_value(reply.clone()).unwrap() else {
                unreachable!()
            };
            let resp = r.response(cmd.kind()).unwrap();
            resp.encode_for(&cmd, &x.req_id, &mut out);
            let ours = Value::decode(&out).unwrap();
            let name = cmd.name().to_owned();
            assert_eq!(keys(&ours), keys(reply), "{at}: {name} reply keys");
            if let (Some(a), Some(b)) = (ours.get("data"), reply.get("data")) {
                assert_eq!(keys(a), keys(b), "{at}: {name} reply data keys");
            }
            let whole_value = match &cmd {
                // The typed reply carries everything the server sent.
                Command::PushB { .. }
                | Command::Ack { .. }
                | Command::AckB { .. }
                | Command::Fail { .. }
                | Command::GetState { .. }
                | Command::Count { .. }
                | Command::GetJobCounts { .. }
                | Command::Auth { .. }
                | Command::Hello
                | Command::GetResult { .. }
                | Command::Other { .. } => true,
                // A numeric custom id comes back as a number; we always answer with text.
                Command::Push { .. } => reply.get("id").and_then(Value::as_str).is_some(),
                // Ping's time is a float64 in both; Pull/PullB/GetJob send a reduced job map
                // (the keys the official client reads), so only the top-level shape is compared.
                Command::Ping => {
                    assert!(matches!(
                        ours.get("data").unwrap().get("time"),
                        Some(Value::F64(_))
                    ));
                    true
                }
                _ => false,
            };
            if whole_value {
                assert_eq!(norm(&ours, false), norm(reply, false), "{at}: {name} reply");
            }
            compared.insert(name);
        }
    }
    for c in [
        "PUSH",
        "PUSHB",
        "ACK",
        "ACKB",
        "FAIL",
        "Ping",
        "GetState",
        "Count",
        "GetJobCounts",
        "Auth",
        "error",
        "Hello",
        "PULL",
        "PULLB",
        "GetJob",
        "GetResult",
    ] {
        assert!(
            compared.contains(c),
            "{c} reply shape not compared: {compared:?}"
        );
    }
}

#[test]
fn ackb_outcomes_encode_in_both_forms() {
    // The two ACKB success forms of `14` and `19`, encoded from scratch.
    let mut out = Vec::new();
    Response::AckedBatch {
        ignored_indices: vec![],
        ignored_ids: vec![],
    }
    .encode(&Value::from("r"), &mut out);
    let plain = Value::decode(&out).unwrap();
    assert_eq!(plain.get("id"), Some(&Value::Undefined));
    out.clear();
    Response::AckedBatch {
        ignored_indices: vec![1],
        ignored_ids: vec!["b".into()],
    }
    .encode(&Value::from("r"), &mut out);
    let v = Value::decode(&out).unwrap();
    assert_eq!(keys(&v), ["data", "ok", "reqId"].map(String::from).into());
    let _ = Reply::from_value(v)
        .unwrap()
        .response(CommandKind::AckB)
        .unwrap();
}

/// GetResult against bunqueue 2.9.5 (`ops/52_result.jsonl`): the request as the hot-path
/// encoder writes it, and every answer — a completed job's object or scalar result, and
/// `result: undefined` for a job that completed without one, a waiting job and an unknown id,
/// which all read as no result — read by the client and written back by the server role.
#[test]
fn get_result_reads_and_writes_every_answer() {
    let lines = parse_file("ops/52_result.jsonl");
    let mut results = Vec::new();
    for x in exchanges(&lines) {
        let Some(req) = &x.value else { continue };
        let (req_id, Ok(cmd @ Command::GetResult { .. })) = Command::decode(req) else {
            continue;
        };
        let at = x.req.at();
        let mut ours = Vec::new();
        cmd.encode(Some(&req_id), &mut ours);
        assert_eq!(
            norm(&Value::decode(&ours).unwrap(), false),
            norm(req, false),
            "{at}"
        );
        let (_, reply) = x.reply.as_ref().expect("answered");
        let Incoming::Reply(r) = Incoming::from_value(reply.clone()).unwrap() else {
            unreachable!()
        };
        let Response::Result(result) = r.response(CommandKind::GetResult).unwrap() else {
            panic!("{at}: not a result")
        };
        let mut written = Vec::new();
        Response::Result(result.clone()).encode_for(&cmd, &req_id, &mut written);
        assert_eq!(
            norm(&Value::decode(&written).unwrap(), false),
            norm(reply, false),
            "{at}"
        );
        results.push(result);
    }
    let object = Value::map([
        ("sent", Value::Int(3)),
        (
            "to",
            Value::Array(vec![Value::from("a@x"), Value::from("b@x")]),
        ),
    ]);
    assert_eq!(
        results,
        [Some(object), Some(Value::Int(42)), None, None, None],
        "object, scalar, completed without result, waiting, unknown id"
    );
}
