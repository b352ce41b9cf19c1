#![no_main]
//! See `src/session_checks.rs`: the same checks replay on stable in
//! `core/tests/fuzz_session_corpus.rs`.

#[path = "../src/session_checks.rs"]
mod session_checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| session_checks::batcher_ops(data));
