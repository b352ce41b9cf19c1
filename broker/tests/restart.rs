//! SQLite mode keeps a queue's settings across a restart, as bunqueue's SQLite mode does: one
//! test per kind of setting, each set through one broker, read back (and acted on) through a
//! fresh connection to a new broker on the same database file.

mod common;

use std::path::Path;

use autobatch_broker::{BrokerConfig, EmbeddedBroker};
use autobatch_core::wire::Value;
use common::*;

/// Runs `before` on a broker over `path`, stops it, then `after` on a new one with what
/// `before` returned.
fn across_restart<T>(
    path: &Path,
    before: impl FnOnce(&mut Raw) -> T,
    after: impl FnOnce(&mut Raw, T),
) {
    let cfg = || BrokerConfig::default().data_path(path);
    let kept = {
        let b = EmbeddedBroker::start(cfg()).expect("broker");
        let mut c = Raw::connect(b.addr());
        let kept = before(&mut c);
        b.stop().expect("stop");
        kept
    };
    let b = EmbeddedBroker::start(cfg()).expect("broker after the restart");
    let mut c = Raw::connect(b.addr());
    after(&mut c, kept);
    b.stop().expect("stop");
}

fn data<'a>(r: &'a Value, key: &str) -> &'a Value {
    r.get("data")
        .and_then(|d| d.get(key))
        .unwrap_or_else(|| panic!("no data.{key} in {r:?}"))
}

#[test]
fn stall_settings_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let config = |c: &mut Raw| {
        let r = c.call("GetStallConfig", vec![("queue", s("q"))]);
        r.get("config").cloned().expect("config")
    };
    across_restart(
        &dir.path().join("jobs.db"),
        |c| {
            let r = c.call(
                "SetStallConfig",
                vec![
                    ("queue", s("q")),
                    (
                        "config",
                        Value::map([("maxStalls", int(7)), ("gracePeriod", int(123))]),
                    ),
                ],
            );
            assert!(ok(&r), "{r:?}");
            config(c)
        },
        |c, set| {
            let got = config(c);
            assert_eq!(got.get("maxStalls").and_then(Value::as_f64), Some(7.0));
            assert_eq!(got, set);
        },
    );
}

#[test]
fn dlq_settings_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    across_restart(
        &dir.path().join("jobs.db"),
        |c| {
            let r = c.call(
                "SetDlqConfig",
                vec![
                    ("queue", s("q")),
                    (
                        "config",
                        Value::map([("maxEntries", int(2)), ("maxAge", Value::Nil)]),
                    ),
                ],
            );
            assert!(ok(&r), "{r:?}");
        },
        |c, ()| {
            let r = c.call("GetDlqConfig", vec![("queue", s("q"))]);
            let config = r.get("config").expect("config");
            assert_eq!(config.get("maxEntries").and_then(Value::as_f64), Some(2.0));
            assert_eq!(config.get("maxAge"), Some(&Value::Nil));
        },
    );
}

#[test]
fn queue_limits_survive_a_restart_and_hold_pulls_back() {
    let dir = tempfile::tempdir().unwrap();
    across_restart(
        &dir.path().join("jobs.db"),
        |c| {
            for (cmd, limit) in [("RateLimit", 5), ("SetConcurrency", 1)] {
                let r = c.call(cmd, vec![("queue", s("q")), ("limit", int(limit))]);
                assert!(ok(&r), "{r:?}");
            }
            let r = c.call("RateLimit", vec![("queue", s("gone")), ("limit", int(1))]);
            assert!(ok(&r), "{r:?}");
            let r = c.call("RateLimitClear", vec![("queue", s("gone"))]);
            assert!(ok(&r), "{r:?}");
            push(c, "q", int(1), vec![]);
            push(c, "q", int(2), vec![]);
        },
        |c, ()| {
            let limits = |c: &mut Raw, q: &str| {
                let r = c.call("GetQueueLimits", vec![("queue", s(q))]);
                data(&r, "limits").clone()
            };
            let l = limits(c, "q");
            let rate = l.get("rateLimit").expect("rateLimit");
            assert_eq!(rate.get("max").and_then(Value::as_f64), Some(5.0));
            assert_eq!(l.get("concurrencyLimit").and_then(Value::as_f64), Some(1.0));
            assert_eq!(limits(c, "gone").get("rateLimit"), Some(&Value::Nil));
            // The concurrency limit of 1 holds the second job back.
            let r = c.call("PULLB", vec![("queue", s("q")), ("count", int(5))]);
            let jobs = r.get("jobs").and_then(Value::as_array).expect("jobs");
            assert_eq!(jobs.len(), 1, "{r:?}");
        },
    );
}

#[test]
fn group_controls_survive_a_restart_and_hold_pulls_back() {
    let dir = tempfile::tempdir().unwrap();
    let group = |cmd: &str, g: &str, extra: Vec<(&'static str, Value)>| {
        let mut f = vec![("queue", s("q")), ("groupId", s(g))];
        f.extend(extra);
        (cmd.to_owned(), f)
    };
    across_restart(
        &dir.path().join("jobs.db"),
        |c| {
            for (cmd, f) in [
                group("PauseGroup", "a", vec![]),
                group("SetGroupConcurrency", "b", vec![("concurrency", int(3))]),
                group(
                    "SetGroupRateLimit",
                    "b",
                    vec![("max", int(4)), ("duration", int(60_000))],
                ),
            ] {
                let r = c.call(&cmd, f);
                assert!(ok(&r), "{cmd}: {r:?}");
            }
        },
        |c, ()| {
            let (cmd, f) = group("IsGroupPaused", "a", vec![]);
            assert_eq!(data(&c.call(&cmd, f), "paused"), &Value::Bool(true));
            let (cmd, f) = group("GetGroupConcurrency", "b", vec![]);
            assert_eq!(data(&c.call(&cmd, f), "concurrency").as_f64(), Some(3.0));
            let (cmd, f) = group("GetGroupRateLimit", "b", vec![]);
            let limit = data(&c.call(&cmd, f), "limit").clone();
            assert_eq!(limit.get("max").and_then(Value::as_f64), Some(4.0));
            // The paused group's job stays; the other one is handed out.
            push(c, "q", int(1), vec![("groupId", s("a"))]);
            push(c, "q", int(2), vec![("groupId", s("b"))]);
            let r = c.call("PULLB", vec![("queue", s("q")), ("count", int(5))]);
            let jobs = r.get("jobs").and_then(Value::as_array).expect("jobs");
            assert_eq!(jobs.len(), 1, "{r:?}");
            assert_eq!(jobs[0].get("data"), Some(&int(2)));
        },
    );
}

/// Grouped jobs are pulled after a restart as bunqueue's SQLite mode pulls them: within a
/// group by priority, lowest first, then in the order they were added (kept with the job);
/// the groups take turns in the order its recovery files them, by their first job in
/// priority order (highest first), then run time and id.
#[test]
fn grouped_jobs_keep_their_order_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    across_restart(
        &dir.path().join("jobs.db"),
        |c| {
            for (data, group, priority) in [
                (1, "a", 1),
                (2, "b", 2),
                (3, "c", 0),
                (4, "a", 0),
                (5, "b", 0),
                (6, "a", 1),
            ] {
                let extra = vec![("groupId", s(group)), ("priority", int(priority))];
                push(c, "q", int(data), extra);
            }
        },
        |c, ()| {
            let r = c.call("PULLB", vec![("queue", s("q")), ("count", int(10))]);
            let jobs = r.get("jobs").and_then(Value::as_array).expect("jobs");
            let got: Vec<i64> = jobs
                .iter()
                .filter_map(|j| j.get("data").and_then(Value::as_i64))
                .collect();
            // Turns b (its job of priority 2), a (1), c (0 and added first); in a, 4 before
            // 1 before 6.
            assert_eq!(got, [5, 4, 3, 2, 1, 6]);
        },
    );
}

#[test]
fn job_schedulers_survive_a_restart_with_their_executions() {
    let dir = tempfile::tempdir().unwrap();
    across_restart(
        &dir.path().join("jobs.db"),
        |c| {
            let r = c.call(
                "Cron",
                vec![
                    ("name", s("nightly")),
                    ("queue", s("q")),
                    ("jobName", s("report")),
                    ("schedule", s("30 2 * * *")),
                    ("timezone", s("Europe/Rome")),
                    ("data", Value::map([("k", s("v"))])),
                    ("maxLimit", int(10)),
                ],
            );
            assert!(ok(&r), "{r:?}");
            let r = c.call(
                "Cron",
                vec![
                    ("name", s("deleted")),
                    ("queue", s("q")),
                    ("repeatEvery", int(3_600_000)),
                ],
            );
            assert!(ok(&r), "{r:?}");
            let r = c.call("CronDelete", vec![("name", s("deleted"))]);
            assert!(ok(&r), "{r:?}");
            c.call("CronGet", vec![("name", s("nightly"))])
                .get("cron")
                .cloned()
        },
        |c, before| {
            let r = c.call("CronGet", vec![("name", s("nightly"))]);
            assert_eq!(r.get("cron").cloned(), before, "{r:?}");
            let r = c.call("CronGet", vec![("name", s("deleted"))]);
            assert_eq!(err(&r), "Cron job not found");
        },
    );
}

#[test]
fn job_groups_ttls_and_timeouts_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    across_restart(
        &dir.path().join("jobs.db"),
        |c| {
            let grouped = push(
                c,
                "q",
                int(1),
                vec![("groupId", s("g")), ("timeout", int(50))],
            );
            let expiring = push(c, "q", int(2), vec![("ttl", int(1))]);
            (grouped, expiring)
        },
        |c, (grouped, expiring)| {
            let r = c.call(
                "GetGroupJobsCount",
                vec![("queue", s("q")), ("groupId", s("g"))],
            );
            assert_eq!(data(&r, "count").as_f64(), Some(1.0), "the group is kept");
            // The ttl (1 ms) ran out during the restart: the pull drops that job unrun.
            let (id, _) = pull_owned(c, "q").expect("a job");
            assert_eq!(id, grouped);
            assert!(pull_owned(c, "q").is_none(), "the expired job was dropped");
            assert_eq!(state(c, &expiring), "unknown");
            // The timeout (50 ms) fails the running job (bounded wait, not a time threshold).
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
            while state(c, &grouped) == "active" && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            assert_ne!(state(c, &grouped), "active", "the kept timeout did not act");
        },
    );
}

#[test]
fn dlq_entries_keep_their_reasons_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let by_reason = |c: &mut Raw| {
        let r = c.call("GetDlqStats", vec![("queue", s("q"))]);
        data(&r, "stats")
            .get("byReason")
            .cloned()
            .expect("byReason")
    };
    across_restart(
        &dir.path().join("jobs.db"),
        |c| {
            let id = push(c, "q", int(1), vec![("maxAttempts", int(1))]);
            let (pulled, token) = pull_owned(c, "q").expect("a job");
            assert_eq!(pulled, id);
            let r = c.call(
                "FAIL",
                vec![("id", s(&id)), ("token", s(&token)), ("error", s("boom"))],
            );
            assert!(ok(&r), "{r:?}");
            by_reason(c)
        },
        |c, before| {
            let after = by_reason(c);
            assert_eq!(
                after.get("max_attempts_exceeded").and_then(Value::as_f64),
                Some(1.0)
            );
            assert_eq!(after, before);
        },
    );
}

#[test]
fn flow_links_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    across_restart(
        &dir.path().join("jobs.db"),
        |c| {
            let dep = push(c, "q", int(1), vec![("jobId", s("dep"))]);
            let waiter = push(c, "q", int(2), vec![("dependsOn", arr(vec![s(&dep)]))]);
            assert_eq!(state(c, &waiter), "waiting-children");
            waiter
        },
        |c, waiter| {
            // Still waiting for its dependency, which then releases it.
            assert_eq!(state(c, &waiter), "waiting-children");
            let (id, token) = pull_owned(c, "q").expect("the dependency");
            assert_eq!(id, "dep");
            let r = c.call("ACK", vec![("id", s(&id)), ("token", s(&token))]);
            assert!(ok(&r), "{r:?}");
            assert_eq!(state(c, &waiter), "waiting");
        },
    );
}

/// A job's failure history as GetJob and Dlq show it: its stack trace, timeline and DLQ
/// entries (the whole job and its failed attempts, time fields included).
fn failure_history(c: &mut Raw, id: &str) -> (Value, Value, Value) {
    let r = c.call("GetJob", vec![("id", s(id))]);
    let job = r
        .get("job")
        .cloned()
        .unwrap_or_else(|| panic!("no job in {r:?}"));
    let field = |k: &str| job.get(k).cloned().unwrap_or(Value::Nil);
    let dlq = c.call("Dlq", vec![("queue", s("q"))]);
    let entries = dlq
        .get("entries")
        .cloned()
        .unwrap_or_else(|| panic!("no DLQ entries in {dlq:?}"));
    let attempts = entries
        .as_array()
        .and_then(|e| e.first())
        .and_then(|e| e.get("attempts"))
        .and_then(Value::as_array)
        .map_or(0, <[Value]>::len);
    assert_eq!(attempts, 2, "both failed attempts in {entries:?}");
    (field("stacktrace"), field("timeline"), entries)
}

#[test]
fn failure_history_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    across_restart(
        &dir.path().join("jobs.db"),
        |c| {
            let id = push(
                c,
                "q",
                int(1),
                vec![("maxAttempts", int(2)), ("backoff", int(0))],
            );
            for (n, error) in ["first", "second"].into_iter().enumerate() {
                let (pulled, token) = pull_owned(c, "q").expect("a job");
                assert_eq!(pulled, id);
                let stack = arr(vec![
                    s(&format!("Error: {error}")),
                    s("    at work (w.js:1:1)"),
                ]);
                let r = c.call(
                    "FAIL",
                    vec![
                        ("id", s(&id)),
                        ("token", s(&token)),
                        ("error", s(error)),
                        ("stack", stack),
                    ],
                );
                assert!(ok(&r), "attempt {n}: {r:?}");
            }
            assert_eq!(state(c, &id), "failed");
            let history = failure_history(c, &id);
            assert_eq!(
                history.0,
                arr(vec![s("Error: second"), s("at work (w.js:1:1)")])
            );
            (id, history)
        },
        |c, (id, before)| {
            let after = failure_history(c, &id);
            assert_eq!(after.0, before.0, "stacktrace");
            assert_eq!(after.1, before.1, "timeline");
            assert_eq!(after.2, before.2, "DLQ entries with their attempts");
        },
    );
}
