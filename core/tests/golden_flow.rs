//! Golden tests for flow operations on frames captured from bunqueue 2.9.5: PUSHF as the
//! official FlowProducer sends it (trees, chains, failure policies, a taken id),
//! children's values and failures, WaitJob with its timeout limits.

#[path = "support/ops_golden.rs"]
mod ops_golden;

use autobatch_core::ops::{self, Operation};
use autobatch_core::wire::server::ServeOperation;
use autobatch_core::wire::Value;
use ops_golden::{check, commands, load, Reply};

const FILES: &[&str] = &["50_flow.jsonl"];

#[test]
fn push_flow() {
    // Keys: the reply holds whole job snapshots, which the typed Job keeps in part.
    assert_eq!(check::<ops::PushFlow>(FILES, Reply::Keys), 3);
}

#[test]
fn children_values_and_failures() {
    check::<ops::GetChildrenValues>(FILES, Reply::Exact);
    check::<ops::GetFailedChildrenValues>(FILES, Reply::Exact);
    check::<ops::GetIgnoredChildrenFailures>(FILES, Reply::Exact);
}

#[test]
fn wait_job() {
    assert_eq!(check::<ops::WaitJob>(FILES, Reply::Exact), 5);
}

/// Our encoding of a TS flow job is the TS client's, key for key: the captured PUSHF
/// requests re-encode to the same bytes' values (the check above), and the job ids planned by
/// the client come back in the reply, in order.
#[test]
fn push_flow_reply_lists_the_planned_jobs() {
    for ex in load(FILES[0]).iter().filter(|e| e.cmd() == "PUSHF") {
        let op = ops::PushFlow::read_request(&ex.request).expect("readable");
        let Some(reply) = &ex.reply else { continue };
        if ex.error().is_some() {
            continue;
        }
        let jobs = ops::PushFlow::read_reply(reply).expect("reply");
        let planned: Vec<&str> = op.jobs.iter().map(|j| j.id.as_str()).collect();
        let committed: Vec<&str> = jobs.iter().map(|j| j.id.as_str()).collect();
        assert_eq!(planned, committed);
        assert!(jobs
            .iter()
            .all(|j| matches!(j.data, Value::Map(_) | Value::Raw(_))));
    }
}

#[test]
fn every_captured_command_is_checked() {
    let checked = [
        "PUSHF",
        "GetChildrenValues",
        "GetFailedChildrenValues",
        "GetIgnoredChildrenFailures",
        "WaitJob",
    ];
    // The TS Queue and Worker the capture drives: the hot path and the worker domain.
    let others = [
        "PUSHB",
        "PULL",
        "ACKB",
        "FAIL",
        "RegisterWorker",
        "UnregisterWorker",
        "SubscribeEvents",
    ];
    for cmd in commands(FILES) {
        assert!(
            checked.contains(&cmd.as_str()) || others.contains(&cmd.as_str()),
            "captured {cmd} is not checked here"
        );
    }
}
