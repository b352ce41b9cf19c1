//! Golden tests for the job options beyond the hot path, on PUSH and PUSHB frames the TS
//! client of bunqueue 2.9.5 sent with every option it knows
//! (`tests/vectors/ops/30_add_all_options.jsonl`), and the server's refusals.
//!
//! For every captured PUSH / PUSHB: what the server accepted, the server-role decoder accepts,
//! local validation accepts, and the client-role encoding of what was read is the captured
//! request, key for key and value for value; what the server refused, the decoder refuses
//! with the server's own text (except a cron pattern, which only the server parses).

#[path = "support/ops_golden.rs"]
mod ops_golden;

use std::collections::HashMap;

use autobatch_core::wire::server::DecodeCommand;
use autobatch_core::wire::{ChildFailure, Command, Value};
use ops_golden::{commands, load};

const FILE: &str = "30_add_all_options.jsonl";

/// Errors only the server can give: it parses cron patterns, and checks that dependencies
/// exist.
fn server_only(error: &str) -> bool {
    error.starts_with("Invalid repeat pattern") || error.contains("Dependency job not found")
}

/// Whether an entry says what its absence says to the server: `undefined` (msgpackr writes
/// it, we leave it out), and a failure policy's `false` (bunqueue reads each policy flag as
/// `?? false`, domain/job/create.js; we send the policies a job carries, and only those).
fn says_nothing(key: &Value, v: &Value) -> bool {
    let policy = || {
        ChildFailure::ALL
            .iter()
            .any(|p| key.as_str() == Some(p.key()))
    };
    matches!(v, Value::Undefined) || (*v == Value::Bool(false) && policy())
}

/// Deep equality that ignores the order of map keys and entries that say nothing
/// ([`says_nothing`]).
fn same(a: &Value, b: &Value) -> Result<(), String> {
    match (a, b) {
        (Value::Map(x), Value::Map(y)) => {
            let defined = |m: &[(Value, Value)]| -> HashMap<String, Value> {
                m.iter()
                    .filter(|(k, v)| !says_nothing(k, v))
                    .filter_map(|(k, v)| Some((k.as_str()?.to_owned(), v.clone())))
                    .collect()
            };
            let (x, y) = (defined(x), defined(y));
            for (k, v) in &y {
                let ours = x.get(k).ok_or(format!("`{k}` missing from ours"))?;
                same(ours, v).map_err(|e| format!("{k}.{e}"))?;
            }
            if let Some(k) = x.keys().find(|k| !y.contains_key(*k)) {
                return Err(format!("`{k}` not in the capture"));
            }
            Ok(())
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .try_for_each(|(i, (a, b))| same(a, b).map_err(|e| format!("[{i}]{e}"))),
        _ if a == b => Ok(()),
        _ => Err(format!(": {a:?} in ours, {b:?} in the capture")),
    }
}

fn without_req_id(v: &Value) -> Value {
    match v {
        Value::Map(m) => Value::Map(
            m.iter()
                .filter(|(k, _)| k.as_str() != Some("reqId"))
                .cloned()
                .collect(),
        ),
        other => other.clone(),
    }
}

#[test]
fn every_option_round_trips_and_every_refusal_matches() {
    let mut accepted = 0;
    let mut refused = 0;
    let mut failures = Vec::new();
    for ex in load(FILE)
        .iter()
        .filter(|e| matches!(e.cmd(), "PUSH" | "PUSHB"))
    {
        let (_, decoded) = Command::decode(&ex.request);
        match (ex.error(), decoded) {
            (Some(theirs), Err(ours)) if ours.to_string() == theirs => refused += 1,
            (Some(theirs), Ok(_)) if server_only(theirs) => refused += 1,
            (Some(theirs), other) => {
                failures.push(format!("server: {theirs:?}, ours: {other:?}"));
            }
            (None, Err(e)) => failures.push(format!("we refuse {e}, the server accepted")),
            (None, Ok(cmd)) => {
                let jobs = match &cmd {
                    Command::Push { job, .. } => vec![job.clone()],
                    Command::PushB { jobs, .. } => jobs.clone(),
                    _ => unreachable!(),
                };
                for job in &jobs {
                    if let Err(e) = job.validate() {
                        failures.push(format!("validate refuses an accepted job: {e}"));
                    }
                }
                let mut out = Vec::new();
                cmd.encode(None, &mut out);
                let ours = Value::decode(&out).expect("our encoding decodes");
                if let Err(e) = same(&ours, &without_req_id(&ex.request)) {
                    failures.push(format!("{}: {e}", ex.cmd()));
                }
                accepted += 1;
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // base + 2 durable PUSH, 2 PUSHB (batched add, addBulk); 14 refusals.
    assert!(accepted >= 5, "{accepted} accepted adds");
    assert_eq!(refused, 14);
}

#[test]
fn options_read_back_typed() {
    // The batched add of the repeating set, read in the server role: typed, not raw.
    let ex = load(FILE)
        .into_iter()
        .find(|e| e.cmd() == "PUSH" && e.request.get("repeat").is_some() && e.error().is_none())
        .expect("a PUSH with repeat");
    let (_, cmd) = Command::decode(&ex.request);
    let Ok(Command::Push { job, .. }) = cmd else {
        panic!("not a PUSH")
    };
    let o = &job.opts;
    assert_eq!(o.group_id.as_deref(), Some("g1"));
    assert_eq!(o.group_max_size, Some(100));
    assert_eq!(o.priority, Some(5));
    let repeat = o.repeat.as_ref().expect("repeat");
    assert_eq!(repeat.every, Some(std::time::Duration::from_secs(3600)));
    assert_eq!(repeat.limit, Some(3));
    let debounce = o.debounce.as_ref().expect("debounce");
    assert_eq!(
        (debounce.id.as_str(), debounce.ttl),
        ("deb-1", Some(std::time::Duration::from_millis(1500)))
    );
    assert_eq!(
        (o.keep_logs, o.stack_trace_limit, o.size_limit),
        (Some(25), Some(4), Some(4096))
    );
    // The TS client sent `continueParentOnFailure: false`: not a policy the job carries.
    let policies: Vec<ChildFailure> = o.on_failure.iter().collect();
    use ChildFailure::*;
    assert_eq!(policies, [FailParent, RemoveDependency, Ignore]);
}

#[test]
fn every_captured_command_is_checked() {
    for cmd in commands(&[FILE]) {
        assert!(
            matches!(cmd.as_str(), "PUSH" | "PUSHB" | "GetJob"),
            "captured {cmd} is not checked here"
        );
    }
}
