//! Replays the committed fuzz corpora (`fuzz/corpus/frame_decoder`, `fuzz/corpus/value_command`)
//! on stable, with the very checks the fuzz targets run: `fuzz/src/checks.rs` is included here
//! by path, as it is by the targets. Then checks that decoding allocates no more than the input
//! length allows.

#[path = "../../fuzz/src/checks.rs"]
mod checks;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use autobatch_core::wire::{
    DecodeError, Encoder, FrameDecoder, Value, DECODE_BUDGET_FACTOR, DECODE_BUDGET_FLOOR, MAX_FRAME,
};

const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fuzz/corpus");

fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = format!("{CORPUS}/{target}");
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().into_string().unwrap(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    files.sort();
    assert!(
        files.len() >= 100,
        "{dir} holds only {} inputs",
        files.len()
    );
    files
}

#[test]
fn frame_decoder_corpus_replays() {
    for (name, data) in corpus("frame_decoder") {
        let r = std::panic::catch_unwind(|| checks::frame_decoder(&data));
        assert!(r.is_ok(), "frame_decoder/{name}");
    }
}

#[test]
fn value_command_corpus_replays() {
    for (name, data) in corpus("value_command") {
        let r = std::panic::catch_unwind(|| checks::value_command(&data));
        assert!(r.is_ok(), "value_command/{name}");
    }
}

#[test]
fn corpora_cross_replay() {
    // Each target's inputs are valid inputs of the other too.
    for (_, data) in corpus("frame_decoder") {
        checks::value_command(&data);
    }
    for (_, data) in corpus("value_command") {
        checks::frame_decoder(&data);
    }
}

// ---------------------------------------------------------------------------------------------
// Allocation bound

/// Counts the bytes live on the current thread while armed (tests run on several threads).
struct Counting;

thread_local! {
    static ARMED: Cell<bool> = const { Cell::new(false) };
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn track(delta: isize) {
    let _ = ARMED.try_with(|armed| {
        if armed.get() {
            LIVE.with(|l| {
                let now = l.get() + delta;
                l.set(now);
                PEAK.with(|p| p.set(p.get().max(now)));
            });
        }
    });
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        track(layout.size() as isize);
        System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        track(layout.size() as isize);
        System.alloc_zeroed(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        track(-(layout.size() as isize));
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // A realloc may copy: count the new block before the old one goes.
        track(new_size as isize);
        track(-(layout.size() as isize));
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The peak of bytes live at once while `f` runs, above what was live before.
fn peak_of<T>(f: impl FnOnce() -> T) -> usize {
    LIVE.with(|l| l.set(0));
    PEAK.with(|p| p.set(0));
    ARMED.with(|a| a.set(true));
    let out = f();
    drop(out);
    ARMED.with(|a| a.set(false));
    PEAK.with(|p| p.get()).max(0) as usize
}

/// The bound, per input byte. Derivation, with `S = size_of::<Value>()`:
/// * every decoded value takes at least one input byte, so a frame of `n` bytes holds at most
///   `n` values, and the decoder reserves at most `n` value slots ahead in total (one shared
///   budget, whatever the headers announce): `S·n`;
/// * a container holding more than its reservation grows by doubling: its capacity stays under
///   twice its real length, plus the block being copied during a grow: `3·S·n` at most;
/// * strings, bins and exts copy their own bytes once; invalid UTF-8 becomes U+FFFD (3 bytes
///   for 1), and the lossy conversion may hold a copy while converting: `4·n`;
/// * the frame decoder's buffer holds what was fed, grown by doubling: `3·n` at most.
fn bound(n: usize) -> usize {
    let s = std::mem::size_of::<Value>();
    (4 * s + 4 + 3) * n + 4096
}

#[test]
fn decoding_allocates_within_a_constant_factor_of_the_input() {
    let mut inputs: Vec<(String, Vec<u8>)> = corpus("value_command");
    inputs.extend(corpus("frame_decoder"));
    // The nested array32 headers that each announce "as many elements as bytes left": before
    // the shared reservation budget this reserved ~S·n bytes at every level (50·S·n here).
    let levels = 50;
    let len = levels * 5 + 20_000;
    let mut body = Vec::new();
    for i in 0..levels {
        body.push(0xdd);
        body.extend_from_slice(&((len - (i + 1) * 5) as u32).to_be_bytes());
    }
    body.resize(len, 0);
    inputs.push(("nested-lying-array32".into(), body));
    // A long flat array and a map of many small entries: the honest worst cases.
    let mut flat = vec![0xdd, 0, 0, 0x27, 0x10];
    flat.resize(5 + 10_000, 0xc0);
    inputs.push(("flat-10000-nils".into(), flat));
    let mut map = vec![0xdf, 0, 0, 0x13, 0x88];
    for _ in 0..5000 {
        map.extend_from_slice(&[0x00, 0xc0]);
    }
    inputs.push(("map-5000".into(), map));

    let mut worst = (0.0f64, String::new());
    for (name, data) in &inputs {
        let n = data.len().max(1);
        let peak = peak_of(|| Value::decode(data));
        assert!(
            peak <= bound(n),
            "{name}: Value::decode of {n} bytes peaked at {peak} bytes"
        );
        let ratio = peak as f64 / n as f64;
        if ratio > worst.0 {
            worst = (ratio, name.clone());
        }
        // The same bytes as a stream through the frame decoder, each frame decoded.
        let peak = peak_of(|| {
            let mut d = FrameDecoder::new();
            d.extend(data);
            let mut values = Vec::new();
            while let Ok(Some(f)) = d.next_frame() {
                values.push(Value::decode(&f));
            }
            values
        });
        assert!(
            peak <= bound(n),
            "{name}: frames of {n} bytes peaked at {peak} bytes"
        );
        let ratio = peak as f64 / n as f64;
        if ratio > worst.0 {
            worst = (ratio, name.clone());
        }
    }
    eprintln!(
        "worst peak: {:.1} bytes per input byte ({}), bound {} + 4096",
        worst.0,
        worst.1,
        bound(1) - 4096
    );
}

/// Frames of the largest size the protocol allows, shaped to cost the most memory per byte.
/// Before the byte budget, the first of them took 2.1 GiB to decode (32 bytes of tree for each
/// nil); now every one stays within `DECODE_BUDGET_FACTOR × n + DECODE_BUDGET_FLOOR`, failing
/// with `TooExpensive` where the tree would not fit, or decoding in full where payloads stay
/// encoded.
///
/// Unoptimised builds use 16 MiB frames to keep the suite quick; `cargo test --release -p
/// autobatch-core --test fuzz_corpus hostile -- --nocapture` runs the full 64 MiB and prints
/// each peak.
#[test]
fn hostile_frames_of_64_mib_stay_within_the_byte_budget() {
    let n = if cfg!(debug_assertions) {
        MAX_FRAME / 4
    } else {
        MAX_FRAME
    };
    let fill = |mut body: Vec<u8>, byte: &[u8]| {
        while body.len() + byte.len() <= n {
            body.extend_from_slice(byte);
        }
        body
    };
    let array32 = |prefix: &mut Vec<u8>, count: usize| {
        prefix.push(0xdd);
        prefix.extend_from_slice(&(count as u32).to_be_bytes());
    };
    let mut shapes: Vec<(&str, Vec<u8>, bool)> = Vec::new();

    // An array32 of nils: one value per byte.
    let mut b = Vec::new();
    array32(&mut b, n - 5);
    shapes.push(("array of nils", fill(b, &[0xc0]), false));

    // A map32 of empty keys to nils: two values per two bytes.
    // (One 3-byte entry first, so that the 2-byte entries fill the frame exactly.)
    let mut b = vec![0xdf];
    b.extend_from_slice(&((1 + (n - 8) / 2) as u32).to_be_bytes());
    b.extend_from_slice(&[0xa1, b'a', 0xc0]);
    shapes.push(("map of empty keys", fill(b, &[0xa0, 0xc0]), false));

    // A request that looks valid, its jobs array full of nils.
    let mut b = Vec::new();
    Encoder::new(&mut b)
        .map(2)
        .kv_str("cmd", "PUSHB")
        .str("jobs");
    let count = n - b.len() - 5;
    array32(&mut b, count);
    shapes.push(("PUSHB of nils", fill(b, &[0xc0]), false));

    // Deep nesting: MAX_DEPTH - 1 arrays, each announcing as many elements as bytes remain.
    let mut b = Vec::new();
    for i in 0..200 {
        array32(&mut b, n - (i + 1) * 5);
    }
    shapes.push(("nested lying arrays", fill(b, &[0x00]), false));

    // A PUSH whose data is a dense array: a payload, kept encoded, so it decodes in full.
    let mut b = Vec::new();
    Encoder::new(&mut b)
        .map(3)
        .kv_str("cmd", "PUSH")
        .kv_str("queue", "q")
        .str("data");
    let count = n - b.len() - 5;
    array32(&mut b, count);
    shapes.push(("PUSH with a dense data array", fill(b, &[0x00]), true));

    // A reply whose top-level data (its envelope, decoded as a tree) is a dense array.
    let mut b = Vec::new();
    Encoder::new(&mut b).map(2).str("ok").bool(true).str("data");
    let count = n - b.len() - 5;
    array32(&mut b, count);
    shapes.push(("reply with a dense envelope", fill(b, &[0xc0]), false));

    for (name, body, decodes) in shapes {
        assert_eq!(body.len(), n, "{name}: a frame of exactly {n} bytes");
        let mut outcome = None;
        let peak = peak_of(|| {
            outcome = Some(Value::decode(&body).map(|_| ()));
        });
        let budget = DECODE_BUDGET_FACTOR * n + DECODE_BUDGET_FLOOR;
        eprintln!(
            "{name}: {n} bytes, peak {peak} bytes ({:.2}x), {:?}",
            peak as f64 / n as f64,
            outcome
        );
        assert!(peak <= budget, "{name}: peaked at {peak} > {budget}");
        match outcome {
            Some(Ok(())) => assert!(decodes, "{name}: decoded"),
            Some(Err(DecodeError::TooExpensive { frame_len })) => {
                assert!(!decodes, "{name}: refused");
                assert_eq!(frame_len, n);
            }
            other => panic!("{name}: {other:?}"),
        }
    }
}
