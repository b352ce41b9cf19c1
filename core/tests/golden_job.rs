//! Golden tests for a job's own records (progress, logs, data, locks, worker moves) and worker
//! registration, on frames captured from bunqueue 2.9.5 (`40_job`: the Queue's methods and raw
//! frames; `41_worker`: the official Worker).

#[path = "support/ops_golden.rs"]
mod ops_golden;

use autobatch_core::ops;
use autobatch_core::wire::server::DecodeCommand;
use autobatch_core::wire::{Command, Value};
use ops_golden::{check, commands, load, Reply};

const FILES: &[&str] = &["40_job.jsonl", "41_worker.jsonl", "42_worker_remove.jsonl"];

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

/// The official Worker's `removeOnComplete` / `removeOnFail` options (`42_worker_remove`): its
/// ACKB carries `removeOnCompletes`, its final FAIL `removeOnFail`. Each is read in the server
/// role with the flag, and re-encoded in the client role to the captured request (all but
/// `reqId` and the stack's text, which are not ours to reproduce).
#[test]
fn worker_level_removal() {
    let mut seen = (0, 0);
    for ex in load("42_worker_remove.jsonl") {
        let (_, decoded) = Command::decode(&ex.request);
        let cmd = decoded.unwrap_or_else(|e| panic!("{}: {e:?}", ex.cmd()));
        match &cmd {
            Command::AckB {
                ids,
                remove_on_completes,
                ..
            } => {
                assert_eq!(remove_on_completes, &vec![true; ids.len()]);
                seen.0 += 1;
            }
            Command::Fail { remove_on_fail, .. } => {
                assert!(remove_on_fail);
                seen.1 += 1;
            }
            _ => continue,
        }
        let mut out = Vec::new();
        cmd.encode(ex.request.get("reqId"), &mut out);
        let again = Value::decode(&out)
            .and_then(|v| v.expanded())
            .expect("decodes");
        for key in [
            "cmd",
            "ids",
            "tokens",
            "removeOnCompletes",
            "id",
            "token",
            "removeOnFail",
        ] {
            assert_eq!(again.get(key), ex.request.get(key), "{}: {key}", ex.cmd());
        }
    }
    assert_eq!(seen, (1, 1), "one ACKB and one FAIL captured");
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
        // Read-backs of the removal capture.
        "GetState",
    ];
    for cmd in commands(FILES) {
        assert!(
            checked.contains(&cmd.as_str()),
            "captured {cmd} is not checked here"
        );
    }
}
