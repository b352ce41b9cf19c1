//! Golden tests for queue control operations on frames captured from bunqueue 2.9.5.

#[path = "support/ops_golden.rs"]
mod ops_golden;

use autobatch_core::ops;
use ops_golden::{check, commands, Reply};

const FILES: &[&str] = &["21_control.jsonl"];

#[test]
fn pause_resume_is_paused() {
    check::<ops::Pause>(FILES, Reply::Exact);
    check::<ops::Resume>(FILES, Reply::Exact);
    check::<ops::IsPaused>(FILES, Reply::Exact);
}

#[test]
fn every_captured_command_is_checked() {
    let checked = ["PUSHB", "Pause", "Resume", "IsPaused"];
    for cmd in commands(FILES) {
        assert!(
            checked.contains(&cmd.as_str()),
            "captured {cmd} is not checked here"
        );
    }
}
