//! The checks run by the fuzz targets, shared with the stable replay test
//! `core/tests/fuzz_corpus.rs`: both include this file with `#[path]`, so the corpus is replayed
//! on stable with exactly the code the fuzzer ran (no extra crate, no feature in the core crate).
//!
//! Every function panics on a violated property, which libFuzzer reports as a crash.

#![allow(dead_code)]

use autobatch_core::wire::server::{encode_error, DecodeCommand, EncodeResponse};
use autobatch_core::wire::{Command, CommandKind, FrameDecoder, FrameError, Incoming, Value};

/// Every kind a reply can be read as.
pub const KINDS: [CommandKind; 16] = [
    CommandKind::Hello,
    CommandKind::Auth,
    CommandKind::Ping,
    CommandKind::Push,
    CommandKind::PushB,
    CommandKind::Pull,
    CommandKind::PullB,
    CommandKind::Ack,
    CommandKind::AckB,
    CommandKind::Fail,
    CommandKind::GetJob,
    CommandKind::GetState,
    CommandKind::GetResult,
    CommandKind::Count,
    CommandKind::GetJobCounts,
    CommandKind::Other,
];

#[derive(Debug, PartialEq)]
enum Out {
    Frame(Vec<u8>),
    Empty,
    TooLarge,
}

/// Drains `d` after a feed. Returns false once the stream failed for good.
fn drain(d: &mut FrameDecoder, out: &mut Vec<Out>) -> bool {
    loop {
        match d.next_frame() {
            Ok(Some(f)) => out.push(Out::Frame(f.to_vec())),
            Ok(None) => return true,
            Err(FrameError::Empty) => out.push(Out::Empty),
            Err(e @ FrameError::TooLarge { .. }) => {
                assert!(e.is_fatal());
                out.push(Out::TooLarge);
                // A failed stream stays failed, whatever comes next.
                d.extend(&[0, 0, 0, 1, 0xc0]);
                assert!(matches!(d.next_frame(), Err(FrameError::TooLarge { .. })));
                return false;
            }
            // A kind a newer core may add: treat it like the fatal one.
            Err(e) => {
                assert!(
                    e.is_fatal(),
                    "a non-fatal frame error this check does not know: {e}"
                );
                out.push(Out::TooLarge);
                return false;
            }
        }
    }
}

/// `frame_decoder`: byte 0 seeds the chunking, the rest is a byte stream. Fed in chunks it
/// must give exactly the frames it gives when fed at once; every frame body then goes through
/// [`Value::decode`] (and, when it decodes, a value round trip).
pub fn frame_decoder(data: &[u8]) {
    let Some((&seed, stream)) = data.split_first() else {
        return;
    };
    let mut whole = Vec::new();
    let mut d = FrameDecoder::new();
    d.extend(stream);
    drain(&mut d, &mut whole);
    assert!(d.buffered() <= stream.len());

    let mut chunked = Vec::new();
    let mut d = FrameDecoder::new();
    let mut rng = u64::from(seed) | 0x1_0000;
    let max = 1 + (seed as usize % 64);
    let mut pos = 0;
    let mut fed = 0;
    while pos < stream.len() {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let n = 1 + (rng as usize % max);
        let end = (pos + n).min(stream.len());
        d.extend(&stream[pos..end]);
        fed += end - pos;
        pos = end;
        assert!(d.buffered() <= fed);
        if !drain(&mut d, &mut chunked) {
            break;
        }
    }
    assert_eq!(whole, chunked, "chunking changed the frames");
    for out in &whole {
        if let Out::Frame(body) = out {
            assert!(!body.is_empty() && body.len() <= autobatch_core::wire::MAX_FRAME);
            if let Ok(v) = Value::decode(body) {
                value_round_trip(&v);
            }
        }
    }
}

/// `value_command`: the input is one frame body.
pub fn value_command(data: &[u8]) {
    let Ok(v) = Value::decode(data) else {
        return;
    };
    let nan = has_nan(&v);
    if !nan {
        value_round_trip(&v);
    }

    // Broker role: the typed command, and its re-encoding reads back the same.
    let (req_id, decoded) = Command::decode(&v);
    if let Ok(cmd) = &decoded {
        let _ = (cmd.name(), cmd.kind());
        let mut out = Vec::new();
        let rid = (req_id != Value::Undefined).then_some(&req_id);
        cmd.encode(rid, &mut out);
        let again = Value::decode(&out).expect("our command encoding decodes");
        let (rid2, back) = Command::decode(&again);
        if !nan {
            assert_eq!(rid2, req_id, "reqId round trip");
            let back = back.expect("our command encoding is accepted");
            assert_eq!(
                normalize(back),
                normalize(cmd.clone()),
                "command round trip"
            );
        }
    } else if let Err(e) = &decoded {
        let mut out = Vec::new();
        encode_error(&req_id, &e.to_string(), &mut out);
        Value::decode(&out).expect("error reply decodes");
    }

    // Client role: the same bytes as a reply, read as every kind; each typed response must
    // encode (broker role) into a reply that reads back as the same kind.
    if let Ok(Incoming::Reply(r)) = Incoming::from_value(v.clone()) {
        for kind in KINDS {
            let Ok(resp) = r.response(kind) else { continue };
            let mut out = Vec::new();
            resp.encode(&r.req_id, &mut out);
            let again = Value::decode(&out).expect("our reply encoding decodes");
            let Ok(Incoming::Reply(r2)) = Incoming::from_value(again) else {
                panic!("our reply encoding is not a reply")
            };
            assert!(r2.result.is_ok());
            r2.response(kind).expect("our reply encoding reads back");
        }
    }
}

/// Encoding a decoded value and decoding it again gives the same value.
pub fn value_round_trip(v: &Value) {
    if has_nan(v) {
        return;
    }
    let bytes = v.to_bytes();
    let back = Value::decode(&bytes).expect("our encoding decodes");
    assert_eq!(&back, v, "value round trip");
}

pub fn has_nan(v: &Value) -> bool {
    match v {
        Value::F64(f) => f.is_nan(),
        Value::Array(a) => a.iter().any(has_nan),
        Value::Map(m) => m.iter().any(|(k, v)| has_nan(k) || has_nan(v)),
        _ => false,
    }
}

/// The two deliberate asymmetries of the typed model: PUSHB items always carry both remove
/// flags (false when unset), and a kept-whole command's `reqId` is re-emitted at the end.
fn normalize(cmd: Command) -> Command {
    match cmd {
        Command::PushB { queue, mut jobs } => {
            for j in &mut jobs {
                j.opts.remove_on_complete.get_or_insert(false);
                j.opts.remove_on_fail.get_or_insert(false);
            }
            Command::PushB { queue, jobs }
        }
        Command::Other { cmd, body } => Command::Other {
            cmd,
            body: match body {
                Value::Map(m) => Value::Map(
                    m.into_iter()
                        .filter(|(k, _)| k.as_str() != Some("reqId"))
                        .collect(),
                ),
                other => other,
            },
        },
        other => other,
    }
}
