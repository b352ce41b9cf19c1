//! Golden tests for the dead-letter queue operations on frames captured from bunqueue 2.9.5
//! (`31_dlq.jsonl`).

#[path = "support/ops_golden.rs"]
mod ops_golden;

use autobatch_core::ops;
use ops_golden::{check, commands, Reply};

const FILES: &[&str] = &["31_dlq.jsonl"];

#[test]
fn list_and_stats() {
    // Keys only: a DLQ entry's job is read as autobatch's `Job`, which keeps the fields it
    // models, not every field of bunqueue's record.
    check::<ops::Dlq>(FILES, Reply::Keys);
    check::<ops::GetDlqStats>(FILES, Reply::Exact);
}

#[test]
fn retry_purge_remove() {
    check::<ops::RetryDlq>(FILES, Reply::Exact);
    check::<ops::PurgeDlq>(FILES, Reply::Exact);
    check::<ops::RemoveDlqJob>(FILES, Reply::Exact);
}

#[test]
fn config() {
    check::<ops::GetDlqConfig>(FILES, Reply::Exact);
    check::<ops::SetDlqConfig>(FILES, Reply::Exact);
}

#[test]
fn every_captured_command_is_checked() {
    let checked = [
        "Dlq",
        "GetDlqStats",
        "RetryDlq",
        "PurgeDlq",
        "RemoveDlqJob",
        "GetDlqConfig",
        "SetDlqConfig",
        // The capture's own set-up (adding jobs, a Worker failing them): checked elsewhere.
        "PUSHB",
        "PUSH",
        "PULLB",
        "PULL",
        "FAIL",
        "ACK",
        "ACKB",
        "Hello",
        "Ping",
        "RegisterWorker",
        "UnregisterWorker",
        "Heartbeat",
        "JobHeartbeatB",
        "JobHeartbeat",
        "SubscribeEvents",
        "UnsubscribeEvents",
    ];
    for cmd in commands(FILES) {
        assert!(
            checked.contains(&cmd.as_str()),
            "captured {cmd} is not checked here"
        );
    }
}
