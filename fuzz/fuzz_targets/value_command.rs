#![no_main]
//! Arbitrary bytes as one frame body: Value::decode, Command::decode, Incoming::from_value and
//! Reply::response for every CommandKind, and encode/decode round trips. The checks live in
//! `src/checks.rs`, shared with `core/tests/fuzz_corpus.rs`.

#[path = "../src/checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::value_command(data));
