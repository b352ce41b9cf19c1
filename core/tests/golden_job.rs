//! Golden tests for a job's own records (progress, logs, data, locks, worker moves) and worker
//! registration, on frames captured from bunqueue 2.9.5 (`40_job`: the Queue's methods and raw
//! frames; `41_worker`: the official Worker).

#[path = "support/ops_golden.rs"]
mod ops_golden;

use autobatch_core::ops;
use ops_golden::{check, commands, Reply};

const FILES: &[&str] = &["40_job.jsonl", "41_worker.jsonl"];

#[test]
fn progress() {
    check::<ops::UpdateProgress>(FILES, Reply::Exact);
    check::<ops::GetProgress>(FILES, Reply::Exact);
}

#[test]
fn logs() {
    check::<ops::AddLog>(FILES, Reply::Exact);
    check::<ops::GetLogs>(FILES, Reply::Exact);
    check::<ops::ClearLogs>(FILES, Reply::Exact);
}

#[test]
fn data_and_locks() {
    check::<ops::UpdateData>(FILES, Reply::Exact);
    check::<ops::ExtendLock>(FILES, Reply::Exact);
    check::<ops::ExtendLocks>(FILES, Reply::Exact);
}

#[test]
fn worker_moves() {
    check::<ops::MoveToDelayed>(FILES, Reply::Exact);
    check::<ops::MoveToWait>(FILES, Reply::Exact);
}

#[test]
fn worker_registration() {
    // The registration record carries the server's clock and host (`registeredAt`,
    // `hostname`, `pid`): same keys, values read back as they were written.
    check::<ops::RegisterWorker>(FILES, Reply::Keys);
    check::<ops::WorkerHeartbeat>(FILES, Reply::Exact);
    check::<ops::UnregisterWorker>(FILES, Reply::Exact);
}

#[test]
fn every_captured_command_is_checked() {
    let checked = [
        "Progress",
        "GetProgress",
        "AddLog",
        "GetLogs",
        "ClearLogs",
        "Update",
        "ExtendLock",
        "ExtendLocks",
        "MoveToDelayed",
        "MoveToWait",
        "RegisterWorker",
        "Heartbeat",
        "UnregisterWorker",
        // The hot path and the subscription, typed and checked elsewhere (wire goldens,
        // the events domain).
        "PUSHB",
        "PULL",
        "ACKB",
        "FAIL",
        "SubscribeEvents",
    ];
    for cmd in commands(FILES) {
        assert!(
            checked.contains(&cmd.as_str()),
            "captured {cmd} is not checked here"
        );
    }
}
