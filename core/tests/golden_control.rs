//! Golden tests for queue control operations on frames captured from bunqueue 2.9.5.

#[path = "support/ops_golden.rs"]
mod ops_golden;

use autobatch_core::ops::{self, Operation};
use autobatch_core::{ServerError, ServerErrorKind};
use ops_golden::{check, commands, errors, Reply};

const FILES: &[&str] = &["21_control.jsonl"];

#[test]
fn pause_resume_is_paused() {
    check::<ops::Pause>(FILES, Reply::Exact);
    check::<ops::Resume>(FILES, Reply::Exact);
    check::<ops::IsPaused>(FILES, Reply::Exact);
}

#[test]
fn drain_clean_obliterate() {
    check::<ops::Drain>(FILES, Reply::Exact);
    check::<ops::Clean>(FILES, Reply::Exact);
    check::<ops::Obliterate>(FILES, Reply::Exact);
}

#[test]
fn per_job_moves() {
    check::<ops::Cancel>(FILES, Reply::Exact);
    check::<ops::Discard>(FILES, Reply::Exact);
    check::<ops::Promote>(FILES, Reply::Exact);
    check::<ops::MoveToWait>(FILES, Reply::Exact);
    check::<ops::MoveToDelayed>(FILES, Reply::Exact);
    check::<ops::ChangePriority>(FILES, Reply::Exact);
    check::<ops::ChangeDelay>(FILES, Reply::Exact);
}

#[test]
fn batch_moves() {
    check::<ops::PromoteJobs>(FILES, Reply::Exact);
    check::<ops::RetryCompleted>(FILES, Reply::Exact);
}

#[test]
fn deduplication_keys() {
    check::<ops::RemoveDeduplicationKey>(FILES, Reply::Exact);
    check::<ops::RemoveJobDeduplicationKey>(FILES, Reply::Exact);
}

/// Each captured error reply of a job command is typed as what it is about: unknown jobs as
/// `JobNotFound` where bunqueue's text says so, lock problems as `LockToken`.
#[test]
fn error_replies_are_typed() {
    let expect = [
        (
            "Promote",
            "Job not found or not delayed",
            ServerErrorKind::JobNotFound,
        ),
        (
            "ChangePriority",
            "Job not found or not in queue",
            ServerErrorKind::JobNotFound,
        ),
        (
            "ChangeDelay",
            "Job not found or cannot change delay",
            ServerErrorKind::JobNotFound,
        ),
        (
            "Cancel",
            "Job not found or cannot be cancelled",
            ServerErrorKind::JobNotFound,
        ),
        (
            "MoveToDelayed",
            "Job not found",
            ServerErrorKind::JobNotFound,
        ),
        ("Discard", "Job not found", ServerErrorKind::JobNotFound),
    ];
    for (cmd, text, kind) in expect {
        let seen = errors(FILES, cmd);
        assert!(
            seen.iter().any(|(_, e)| e == text),
            "{cmd}: no {text:?} in {seen:?}"
        );
        assert_eq!(ServerError::from(text.to_owned()).kind(), kind, "{text}");
    }
    let lock = errors(FILES, "Discard");
    assert!(lock
        .iter()
        .any(|(_, e)| e.starts_with("Lock token required for job ")));
    assert!(lock
        .iter()
        .filter(|(_, e)| e.starts_with("Lock token"))
        .all(|(_, e)| ServerError::from(e.clone()).kind() == ServerErrorKind::LockToken));
    let wait = errors(FILES, "MoveToWait");
    assert!(wait
        .iter()
        .any(|(_, e)| e == "Cannot move job from state 'unknown' to waiting"));
    assert!(wait
        .iter()
        .any(|(_, e)| e == "Cannot move job from state 'completed' to waiting"));
}

/// What is never replayed: everything here that moves a job or removes jobs. What is: the
/// idempotent ones.
#[test]
fn replay_rules() {
    use autobatch_core::session::Replay;
    assert_eq!(ops::Drain::new("q").replay(), Replay::NotSafe);
    assert_eq!(
        ops::Clean::new("q", std::time::Duration::ZERO, 1).replay(),
        Replay::NotSafe
    );
    assert_eq!(ops::Obliterate::new("q").replay(), Replay::NotSafe);
    assert_eq!(ops::Cancel::new("j").replay(), Replay::NotSafe);
    assert_eq!(ops::Promote::new("j").replay(), Replay::NotSafe);
    assert_eq!(ops::PromoteJobs::new("q").replay(), Replay::NotSafe);
    assert_eq!(ops::MoveToWait::new("j").replay(), Replay::NotSafe);
    assert_eq!(
        ops::ChangeDelay::new("j", std::time::Duration::from_millis(1)).replay(),
        Replay::NotSafe
    );
    assert_eq!(
        ops::RemoveDeduplicationKey::new("q", "k").replay(),
        Replay::NotSafe
    );
    assert_eq!(ops::ChangePriority::new("j", 1.0).replay(), Replay::Safe);
    assert_eq!(
        ops::RemoveJobDeduplicationKey::new("j").replay(),
        Replay::Safe
    );
    assert_eq!(ops::Pause::new("q").replay(), Replay::Safe);
}

#[test]
fn every_captured_command_is_checked() {
    // PUSHB, PULL, ACK and GetState set the scene; they are checked by the hot-path goldens.
    let setup = ["PUSHB", "PULL", "ACK", "GetState"];
    let checked = [
        "Pause",
        "Resume",
        "IsPaused",
        "Drain",
        "Clean",
        "Obliterate",
        "Cancel",
        "Discard",
        "Promote",
        "MoveToWait",
        "MoveToDelayed",
        "ChangePriority",
        "ChangeDelay",
        "PromoteJobs",
        "RetryCompleted",
        "RemoveDeduplicationKey",
        "RemoveJobDeduplicationKey",
        // GetDeduplicationJobId is a lookup: checked in golden_lookup.rs on its own capture.
        "GetDeduplicationJobId",
    ];
    for cmd in commands(FILES) {
        assert!(
            checked.contains(&cmd.as_str()) || setup.contains(&cmd.as_str()),
            "captured {cmd} is not checked here"
        );
    }
}
