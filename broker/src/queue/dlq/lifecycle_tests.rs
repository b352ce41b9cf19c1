//! Failed jobs through the queue state: into the DLQ, listed, retried, dropped, bounded.

use crate::queue::dlq::Filter;
use crate::queue::dlq_config::DEFAULT_MAX_ENTRIES as DLQ_MAX_ENTRIES;
use crate::queue::Failure;
use crate::queue::{PullSpec, State};
use crate::store::MemoryStore;
use autobatch_core::wire::{JobOptions, JobSpec, Value};

fn state() -> State {
    State::new(Box::new(MemoryStore::new()), 0.0).expect("memory store")
}

fn fail_one(s: &mut State, now: f64) -> String {
    let o = JobOptions::new().attempts(1);
    let id = s.push("q", JobSpec::new("j", Value::Nil).with_options(o), now);
    let spec = PullSpec {
        queue: "q",
        count: 1,
        locked: false,
        lock_ttl: 0,
        tie_to: None,
    };
    let got = s.pull(&spec, now).remove(0).id;
    assert_eq!(got, id);
    s.fail(&id, None, Failure::new(Some(format!("boom {now}"))), now)
        .expect("active");
    id
}

/// Failed jobs are the DLQ, in failure order, with bunqueue's reasons; RetryDlq runs them
/// again from their first attempt, RemoveDlqJob and PurgeDlq drop them.
#[test]
fn failed_jobs_are_the_dlq() {
    let mut s = state();
    let a = fail_one(&mut s, 1.0);
    let b = s.push("q", JobSpec::new("j", Value::Nil), 2.0);
    s.discard(&b, None, 3.0).unwrap();
    let c = fail_one(&mut s, 4.0);
    let listed: Vec<_> = s.dlq_entries("q", None, None, 5.0);
    let got: Vec<_> = listed
        .iter()
        .map(|e| {
            (
                e.job.get("id").and_then(Value::as_str).unwrap().to_owned(),
                e.reason,
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (a.clone(), "max_attempts_exceeded"),
            (b.clone(), "unknown"),
            (c.clone(), "max_attempts_exceeded")
        ]
    );
    assert_eq!(listed[0].error.as_deref(), Some("boom 1"));
    let only_unknown = Filter {
        reason: Some("unknown".into()),
        ..Filter::default()
    };
    assert_eq!(s.dlq_entries("q", None, Some(&only_unknown), 5.0).len(), 1);
    let (total, by, ..) = s.dlq_stats("q", 5.0);
    assert_eq!((total, by[1], by[6]), (3, 2, 1));

    assert_eq!(s.retry_dlq("q", None, Some(1), None, 6.0), 1);
    assert_eq!(s.jobs.get_state(&a, 6.0), "waiting");
    assert_eq!(s.get_job_wire(&a, 6.0).unwrap().attempts, 0);
    assert!(s.remove_dlq_job("q", &b));
    assert!(!s.remove_dlq_job("q", &b));
    assert_eq!(s.purge_dlq("q", 7.0), 1);
    assert_eq!(s.jobs.get_state(&c, 7.0), "unknown");
    assert_eq!(s.jobs.counts("q", 7.0).failed, 0);
}

/// Past bunqueue's `maxEntries` the oldest entry leaves for good: the DLQ stays bounded.
#[test]
fn the_dlq_is_bounded() {
    let mut s = state();
    let first = fail_one(&mut s, 0.0);
    for i in 1..=DLQ_MAX_ENTRIES {
        fail_one(&mut s, i as f64);
    }
    assert_eq!(s.jobs.counts("q", 1e9).failed, DLQ_MAX_ENTRIES as u64);
    assert_eq!(s.jobs.get_state(&first, 1e9), "unknown");
    assert_eq!(s.dlq_entries("q", None, None, 1e9).len(), DLQ_MAX_ENTRIES);
}
