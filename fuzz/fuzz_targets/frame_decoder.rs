#![no_main]
//! Arbitrary bytes in arbitrary chunks through the FrameDecoder, then every frame through
//! Value::decode. The checks live in `src/checks.rs`, shared with `core/tests/fuzz_corpus.rs`.

#[path = "../src/checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::frame_decoder(data));
