//! Replays the committed fuzz corpora (`fuzz/corpus/frame_decoder`, `fuzz/corpus/value_command`)
//! on stable, with the very checks the fuzz targets run: `fuzz/src/checks.rs` is included here
//! by path, as it is by the targets. Then checks that decoding allocates no more than the input
//! length allows.

#[path = "../../fuzz/src/checks.rs"]
mod checks;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use autobatch_core::wire::{FrameDecoder, Value};

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
