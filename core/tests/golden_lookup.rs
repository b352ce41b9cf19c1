//! Golden tests for lookups on frames captured from bunqueue 2.9.5.

#[path = "support/ops_golden.rs"]
mod ops_golden;

use autobatch_core::ops::{self, Operation};
use autobatch_core::wire::server::ServeOperation;
use autobatch_core::wire::Value;
use autobatch_core::{ServerError, ServerErrorKind};
use ops_golden::{check, commands, errors, load, Reply};

const FILES: &[&str] = &["22_lookup.jsonl"];

#[test]
fn jobs() {
    // Keys: our job record keeps the fields a client reads, not bunqueue's ~50 internal ones
    // (the reply's own keys, `jobs` / `job`, must match).
    check::<ops::GetJobs>(FILES, Reply::Keys);
    check::<ops::GetJobByCustomId>(FILES, Reply::Keys);
    let e = errors(FILES, "GetJobByCustomId");
    assert!(e.iter().any(|(_, m)| m == "Job not found"), "{e:?}");
    assert_eq!(
        ServerError::from("Job not found".to_owned()).kind(),
        ServerErrorKind::JobNotFound
    );
}

#[test]
fn get_jobs_reads_every_job_the_server_listed() {
    for ex in load("22_lookup.jsonl")
        .iter()
        .filter(|e| e.cmd() == "GetJobs")
    {
        let reply = ex.reply.as_ref().expect("reply");
        let n = reply
            .get("jobs")
            .and_then(Value::as_array)
            .map_or(0, <[Value]>::len);
        let jobs = ops::GetJobs::read_reply(reply).expect("read");
        assert_eq!(jobs.len(), n);
        assert!(jobs
            .iter()
            .all(|j| j.queue == "cap-lookup" && j.state.is_some()));
    }
}

#[test]
fn counts_limits_dedup() {
    // Exact: every value re-encodes as captured.
    check::<ops::GetCountsPerPriority>(FILES, Reply::Exact);
    check::<ops::GetQueueLimits>(FILES, Reply::Exact);
    check::<ops::GetDeduplicationJobId>(FILES, Reply::Exact);
    check::<ops::GetDeduplicationJobId>(&["21_control.jsonl"], Reply::Exact);
}

#[test]
fn queues_workers_stats_metrics() {
    check::<ops::ListQueues>(FILES, Reply::Exact);
    check::<ops::ListWorkers>(FILES, Reply::Exact);
    check::<ops::Stats>(FILES, Reply::Exact);
    check::<ops::Metrics>(FILES, Reply::Exact);
    check::<ops::StorageStatus>(FILES, Reply::Exact);
}

/// What bunqueue accepts silently and autobatch refuses locally (29_lax): an unknown state
/// name (the server answers with nothing) and a negative limit or offset (the server slices
/// from the end). The capture shows the server's `ok: true`; our validation refuses the same
/// request, naming the field.
#[test]
fn lax_requests_the_server_accepts_are_refused_locally() {
    let lax = load("29_lax.jsonl");
    let mut seen = 0;
    for ex in lax.iter().filter(|e| e.cmd() != "PUSHB") {
        let reply = ex.reply.as_ref().expect("reply");
        assert_eq!(
            reply.get("ok").and_then(Value::as_bool),
            Some(true),
            "{:?}",
            ex.request
        );
        let refused = match ex.cmd() {
            "GetJobs" => ops::GetJobs::read_request(&ex.request).map(|op| op.validate()),
            "Clean" => ops::Clean::read_request(&ex.request).map(|op| op.validate()),
            "PromoteJobs" => ops::PromoteJobs::read_request(&ex.request).map(|op| op.validate()),
            other => panic!("unexpected {other}"),
        };
        let field = match refused {
            Err(e) => e.to_string(),
            Ok(Err(e)) => e.field.to_owned(),
            Ok(Ok(())) => panic!("accepted {:?}", ex.request),
        };
        assert!(!field.is_empty());
        seen += 1;
    }
    assert_eq!(seen, 7);
}

#[test]
fn every_captured_command_is_checked() {
    // PUSHB sets the scene; the worker's own commands (registration, events, pulls) are
    // checked by their domains' goldens.
    let setup = [
        "PUSHB",
        "SubscribeEvents",
        "RegisterWorker",
        "UnregisterWorker",
        "PULL",
    ];
    let checked = [
        "GetJobs",
        "GetJobByCustomId",
        "GetCountsPerPriority",
        "GetQueueLimits",
        "GetDeduplicationJobId",
        "ListQueues",
        "ListWorkers",
        "Stats",
        "Metrics",
        "StorageStatus",
    ];
    for cmd in commands(FILES) {
        assert!(
            checked.contains(&cmd.as_str()) || setup.contains(&cmd.as_str()),
            "captured {cmd} is not checked here"
        );
    }
}
