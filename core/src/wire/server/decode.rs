//! Reading a request in the server role: each command's fields, a job's as the option table
//! declares them ([`options`](super::super::options)), and bunqueue's checks with its wording.

use super::super::error::ProtocolError;
use super::super::job::{
    check_ranges, id_text, range, validate_data, RangeInput, MAX_NAME_CHARS, MAX_SAFE_INTEGER,
};
use super::super::options::{opt_bool, opt_int, raw_backoff, read_options, string_list};
use super::super::push::Flavor;
use super::super::{Command, JobSpec, PullArgs, ValidationError, Value};
use crate::ops::read::{req_opt_i64, req_queue};

/// Reads a request map in the server role: see [`DecodeCommand::decode`](super::DecodeCommand::decode).
pub(super) fn decode_request(v: &Value) -> (Value, Result<Command, CommandError>) {
    if v.is_nullish() {
        // msgpackr yields null for `c0`; the server rejects that as a bad format.
        return (
            Value::Undefined,
            Err(CommandError::Protocol(ProtocolError::InvalidFormat)),
        );
    }
    let req_id = v.get("reqId").cloned().unwrap_or(Value::Undefined);
    let Some(cmd) = v.get("cmd").and_then(Value::as_str) else {
        // "Invalid command" echoes the reqId only when it is a string.
        let req_id = match req_id {
            Value::Str(_) => req_id,
            _ => Value::Undefined,
        };
        return (
            req_id,
            Err(CommandError::Protocol(ProtocolError::NotACommand)),
        );
    };
    (req_id, decode_command(cmd, v))
}

/// Why the broker refuses a request.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CommandError {
    /// Not a command at all, or an unknown one.
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    /// A field fails validation.
    #[error(transparent)]
    Invalid(#[from] ValidationError),
}

fn decode_command(cmd: &str, v: &Value) -> Result<Command, CommandError> {
    let text =
        |k: &'static str| -> Option<String> { v.get(k).and_then(Value::as_str).map(str::to_owned) };
    let id_field = || -> String { v.get("id").and_then(id_text).unwrap_or_default() };
    Ok(match cmd {
        "Hello" => Command::Hello,
        "Auth" => Command::Auth {
            token: text("token").unwrap_or_default(),
        },
        "Ping" => Command::Ping,
        "PUSH" => {
            let queue = req_queue(v)?;
            let job = decode_job(v, Flavor::Push)?;
            check_manager(v, &job)?;
            Command::Push { queue, job }
        }
        "PUSHB" => {
            let queue = req_queue(v)?;
            let jobs = match v.get("jobs") {
                Some(Value::Array(items)) => items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| decode_job(item, Flavor::PushB).map_err(|e| e.in_batch(i)))
                    .collect::<Result<Vec<_>, _>>()?,
                // The server's own message for a PUSHB without `jobs`.
                _ => {
                    return Err(ValidationError::new(
                        "jobs",
                        "undefined is not an object (evaluating 'job of jobs')",
                    )
                    .into())
                }
            };
            // The queue manager checks these for every job after the handler has checked
            // them all, and its errors carry no `jobs[i]:` prefix.
            if let Some(Value::Array(items)) = v.get("jobs") {
                for (item, job) in items.iter().zip(&jobs) {
                    check_manager(item, job)?;
                }
            }
            Command::PushB { queue, jobs }
        }
        "PULL" => Command::Pull(decode_pull(v)?),
        "PULLB" => {
            let args = decode_pull(v)?;
            // A missing count is accepted (the server then hands out nothing).
            let count = opt_int(v, "count")?;
            if let Some(c) = count {
                range("count", c, 1, MAX_PULL_COUNT)?;
            }
            Command::PullB {
                args,
                count: count.unwrap_or(0),
            }
        }
        "ACK" => Command::Ack {
            id: id_field(),
            result: v.get("result").filter(|r| !r.is_nullish()).cloned(),
            token: text("token").filter(|t| !t.is_empty()),
        },
        "ACKB" => {
            check_parallel_lengths(v)?;
            Command::AckB {
                // Keep every position (a non-id entry reads as ""), so that `tokens` and
                // `results` stay parallel to `ids`.
                ids: v
                    .get("ids")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().map(|x| id_text(x).unwrap_or_default()).collect())
                    .unwrap_or_default(),
                results: v
                    .get("results")
                    .and_then(Value::as_array)
                    .map(<[Value]>::to_vec),
                tokens: v.get("tokens").and_then(Value::as_array).map(|a| {
                    a.iter()
                        .map(|t| t.as_str().unwrap_or_default().to_owned())
                        .collect()
                }),
                // The TS worker sends `null` for "not set": only `true` removes.
                remove_on_completes: v
                    .get("removeOnCompletes")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().map(|r| r.as_bool() == Some(true)).collect())
                    .unwrap_or_default(),
            }
        }
        "FAIL" => Command::Fail {
            id: id_field(),
            error: text("error"),
            token: text("token").filter(|t| !t.is_empty()),
            unrecoverable: v
                .get("unrecoverable")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            stack: string_list(v.get("stack")),
            remove_on_fail: v.get("removeOnFail").and_then(Value::as_bool) == Some(true),
        },
        "GetJob" => Command::GetJob { id: id_field() },
        "GetState" => Command::GetState { id: id_field() },
        "GetResult" => Command::GetResult { id: id_field() },
        "Count" => Command::Count {
            queue: text("queue").unwrap_or_default(),
        },
        "GetJobCounts" => Command::GetJobCounts {
            queue: text("queue").unwrap_or_default(),
        },
        other => Command::Other {
            cmd: other.to_owned(),
            body: v.clone(),
        },
    })
}

/// The checks bunqueue's queue manager makes after the handler's (group size, repeat), on the
/// wire value of `groupMaxSize` (a fraction or a string is refused, not rounded).
fn check_manager(item: &Value, job: &JobSpec) -> Result<(), ValidationError> {
    match item.get("groupMaxSize") {
        None | Some(Value::Undefined) => {}
        Some(x @ (Value::Int(_) | Value::F64(_)))
            if x.as_f64()
                .is_some_and(|f| f.fract() == 0.0 && f > 0.0 && f <= MAX_SAFE_INTEGER as f64) => {}
        Some(_) => {
            return Err(ValidationError::new(
                "groupMaxSize",
                "group.maxSize must be a positive safe integer",
            ))
        }
    }
    job.opts.check_extras()
}

fn decode_job(v: &Value, flavor: Flavor) -> Result<JobSpec, ValidationError> {
    let (name, data) = name_and_data(v)?;
    validate_data(&data)?;
    let mut opts = read_options(v)?;
    // An empty custom id counts as absent; a numeric one is kept as its text.
    opts.job_id = v
        .get(flavor.custom_id_key())
        .and_then(id_text)
        .filter(|s| !s.is_empty());
    opts.remove_on_complete = opt_bool(v, "removeOnComplete");
    opts.remove_on_fail = opt_bool(v, "removeOnFail");
    // The ranges are checked on the wire values: a negative delay is refused as bunqueue
    // refuses it, not clamped into a Duration first. (They read as they did above.)
    check_ranges(&RangeInput {
        grouped: opts.group_id.is_some(),
        priority: opts.priority,
        delay: req_opt_i64(v, "delay")?,
        timeout: req_opt_i64(v, "timeout")?,
        attempts: opts.attempts,
        ttl: req_opt_i64(v, "ttl")?,
        backoff: raw_backoff(v, "backoff")?.map(|(field, d, _)| (field, d)),
        timestamp: opts.timestamp,
    })?;
    let chars = name.chars().count();
    if chars == 0 || chars > MAX_NAME_CHARS {
        return Err(bad_name());
    }
    Ok(JobSpec { name, data, opts })
}

fn bad_name() -> ValidationError {
    ValidationError::new(
        "name",
        "Job name must be a non-empty string of at most 256 characters",
    )
}

/// A job's name and data. With no `name` (the legacy envelope), a string `data.name` is moved
/// into the job's name, else it is `default`.
fn name_and_data(v: &Value) -> Result<(String, Value), ValidationError> {
    let mut data = v.get("data").cloned().unwrap_or(Value::Undefined);
    let name = match v.get("name") {
        None | Some(Value::Undefined) => {
            let legacy = match &mut data {
                Value::Map(entries) => {
                    let pos = entries.iter().position(|(k, v)| {
                        k.as_str() == Some("name") && matches!(v, Value::Str(_))
                    });
                    pos.map(|p| entries.remove(p).1)
                }
                _ => None,
            };
            match legacy {
                Some(Value::Str(s)) => s,
                _ => "default".to_owned(),
            }
        }
        Some(Value::Str(s)) => s.clone(),
        Some(_) => return Err(bad_name()),
    };
    Ok((name, data))
}

/// The largest PULLB `count`.
const MAX_PULL_COUNT: i64 = 1000;
/// The longest PULL/PULLB long-poll `timeout`, ms.
const MAX_PULL_TIMEOUT_MS: i64 = 60_000;

/// ACKB's optional arrays must be parallel to `ids` (bunqueue checks tokens, then results,
/// then removeOnCompletes).
fn check_parallel_lengths(v: &Value) -> Result<(), ValidationError> {
    let ids = v
        .get("ids")
        .and_then(Value::as_array)
        .map_or(0, <[Value]>::len);
    for (key, message) in [
        ("tokens", "ACKB tokens length must match ids length"),
        ("results", "ACKB results length must match ids length"),
        (
            "removeOnCompletes",
            "ACKB removeOnCompletes length must match ids length",
        ),
    ] {
        if let Some(a) = v.get(key).and_then(Value::as_array) {
            if a.len() != ids {
                return Err(ValidationError::new(key, message));
            }
        }
    }
    Ok(())
}

fn decode_pull(v: &Value) -> Result<PullArgs, ValidationError> {
    let timeout = req_opt_i64(v, "timeout")?;
    if let Some(t) = timeout {
        range("timeout", t, 0, MAX_PULL_TIMEOUT_MS)?;
    }
    Ok(PullArgs {
        queue: v
            .get("queue")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        timeout,
        owner: v.get("owner").and_then(Value::as_str).map(str::to_owned),
        lock_ttl: v.get("lockTtl").and_then(Value::as_f64).map(|f| f as i64),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::server::DecodeCommand;
    use crate::wire::{Backoff, ChildFailure, Debounce, Dedup, JobOptions, Repeat};
    use std::time::Duration;

    fn round_trip(cmd: &Command) -> Command {
        let mut out = Vec::new();
        cmd.encode(Some(&Value::from("7")), &mut out);
        let v = Value::decode(&out).unwrap();
        let (req_id, back) = Command::decode(&v);
        assert_eq!(req_id, Value::from("7"));
        back.unwrap()
    }

    #[test]
    fn custom_id_key_depends_on_the_command() {
        let job = JobSpec::new("j", Value::Int(1)).with_options(JobOptions::new().job_id("c1"));
        let mut out = Vec::new();
        Command::Push {
            queue: "q".into(),
            job: job.clone(),
        }
        .encode(None, &mut out);
        let v = Value::decode(&out).unwrap();
        assert_eq!(v.get("jobId"), Some(&Value::from("c1")));
        assert_eq!(v.get("customId"), None);
        out.clear();
        Command::PushB {
            queue: "q".into(),
            jobs: vec![job],
        }
        .encode(None, &mut out);
        let v = Value::decode(&out).unwrap();
        let item = &v.get("jobs").unwrap().as_array().unwrap()[0];
        assert_eq!(item.get("customId"), Some(&Value::from("c1")));
        assert_eq!(item.get("jobId"), None);
        assert_eq!(item.get("removeOnComplete"), Some(&Value::Bool(false)));
    }

    #[test]
    fn negative_spans_are_refused_as_the_server_refuses_them() {
        // Durations cannot be negative: the decoder checks the wire value before converting.
        for (key, message) in [
            ("delay", "delay must be at least 0"),
            ("timeout", "timeout must be at least 0"),
            ("ttl", "ttl must be at least 0"),
            ("backoff", "backoff must be at least 0"),
        ] {
            let v = Value::map([
                ("cmd", Value::from("PUSH")),
                ("queue", Value::from("q")),
                ("name", Value::from("n")),
                ("data", Value::Nil),
                (key, Value::Int(-1)),
            ]);
            assert_eq!(Command::decode(&v).1.unwrap_err().to_string(), message);
        }
        let v = Value::map([
            ("cmd", Value::from("PUSH")),
            ("queue", Value::from("q")),
            ("name", Value::from("n")),
            ("data", Value::Nil),
            ("delay", Value::F64(1500.7)),
        ]);
        let Ok(Command::Push { job, .. }) = Command::decode(&v).1 else {
            panic!("a PUSH")
        };
        assert_eq!(job.opts.delay, Some(Duration::from_millis(1500)));
    }

    #[test]
    fn every_command_round_trips() {
        let job = JobSpec::new("n", Value::map([("x", Value::Int(1))])).with_options(JobOptions {
            priority: Some(3),
            delay: Some(Duration::from_millis(8_640_000_000)),
            attempts: Some(2),
            backoff: Some(Backoff::Exponential(Duration::from_millis(100))),
            tags: vec!["t".into()],
            dedup: Some(Dedup::new().ttl(Duration::from_millis(5)).extend(true)),
            unique_key: Some("u".into()),
            remove_on_complete: Some(true),
            remove_on_fail: Some(false),
            durable: Some(true),
            group_max_size: Some(5),
            group_id: Some("g".into()),
            repeat: Some(Repeat::every(Duration::from_millis(250)).limit(3).tz("UTC")),
            debounce: Some(Debounce::new("d").ttl(Duration::from_millis(900))),
            stack_trace_limit: Some(4),
            keep_logs: Some(20),
            size_limit: Some(1024),
            on_failure: [ChildFailure::FailParent, ChildFailure::ContinueParent]
                .into_iter()
                .collect(),
            ..Default::default()
        });
        let pull = PullArgs {
            queue: "q".into(),
            timeout: Some(0),
            owner: Some("w".into()),
            lock_ttl: Some(30000),
        };
        for cmd in [
            Command::Ping,
            Command::Auth { token: "t".into() },
            Command::Push {
                queue: "q".into(),
                job: job.clone(),
            },
            Command::PushB {
                queue: "q".into(),
                jobs: vec![job.clone(), job],
            },
            Command::Pull(pull.clone()),
            Command::PullB {
                args: pull,
                count: 4,
            },
            Command::Ack {
                id: "a".into(),
                result: Some(Value::Int(1)),
                token: Some("t".into()),
            },
            Command::AckB {
                ids: vec!["a".into(), "b".into()],
                results: Some(vec![Value::Nil, Value::Int(2)]),
                tokens: Some(vec!["t1".into(), "t2".into()]),
                remove_on_completes: vec![true, false],
            },
            Command::Fail {
                id: "a".into(),
                error: Some("boom".into()),
                token: None,
                unrecoverable: true,
                stack: vec!["Error: boom".into(), "at f (x.ts:1:1)".into()],
                remove_on_fail: true,
            },
            Command::GetJob { id: "a".into() },
            Command::GetState { id: "a".into() },
            Command::Count { queue: "q".into() },
            Command::GetJobCounts { queue: "q".into() },
        ] {
            assert_eq!(round_trip(&cmd), cmd, "{}", cmd.name());
        }
    }

    #[test]
    fn server_side_validation_messages() {
        let req = |pairs: Vec<(&str, Value)>| {
            let v = Value::map(pairs);
            Command::decode(&v).1.unwrap_err().to_string()
        };
        assert_eq!(
            req(vec![
                ("cmd", "PUSH".into()),
                ("queue", "q".into()),
                ("delay", Value::BigInt(5))
            ]),
            "delay must be a number"
        );
        assert_eq!(
            req(vec![
                ("cmd", "PUSH".into()),
                ("queue", "q".into()),
                ("priority", Value::F64(1.5))
            ]),
            "priority must be an integer"
        );
        assert_eq!(req(vec![("reqId", "1".into())]), "Invalid command");
        // A nil body reads as an undecodable frame to the server [V `11`].
        assert_eq!(
            Command::decode(&Value::Nil).1.unwrap_err().to_string(),
            "Invalid command format"
        );
        // Validation the server does before touching the jobs [V `10`, `14`].
        let bad = |pairs: Vec<(&str, Value)>| {
            Command::decode(&Value::map(pairs))
                .1
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            bad(vec![
                ("cmd", "PUSHB".into()),
                ("queue", "bad queue!".into()),
                ("jobs", Value::Array(vec![]))
            ]),
            "Queue name contains invalid characters"
        );
        assert_eq!(
            bad(vec![
                ("cmd", "PULLB".into()),
                ("queue", "q".into()),
                ("count", Value::Int(0))
            ]),
            "count must be at least 1"
        );
        assert_eq!(
            bad(vec![
                ("cmd", "PULL".into()),
                ("queue", "q".into()),
                ("timeout", Value::Int(60_001))
            ]),
            "timeout must be at most 60000"
        );
        assert_eq!(
            bad(vec![
                ("cmd", "ACKB".into()),
                ("ids", Value::Array(vec!["a".into(), "b".into()])),
                ("tokens", Value::Array(vec!["t".into()])),
            ]),
            "ACKB tokens length must match ids length"
        );
        let v = Value::map([("cmd", Value::from("PUSHB")), ("queue", "q".into())]);
        assert!(Command::decode(&v).1.is_err());
    }

    #[test]
    fn pullb_without_count_round_trips() {
        // Found by the value_command fuzz target: a PULLB without `count` decodes to count 0,
        // which was re-encoded as `count: 0`, which the server (and our decoder) refuses.
        let v = Value::map([("cmd", Value::from("PULLB")), ("queue", "q".into())]);
        let cmd = Command::decode(&v).1.unwrap();
        assert!(matches!(cmd, Command::PullB { count: 0, .. }));
        assert_eq!(round_trip(&cmd), cmd);
    }

    #[test]
    fn legacy_envelope_moves_name_out_of_data() {
        let v = Value::map([
            ("cmd", Value::from("PUSH")),
            ("queue", "q".into()),
            (
                "data",
                Value::map([("name", Value::from("legacy")), ("x", Value::Int(1))]),
            ),
        ]);
        let Command::Push { job, .. } = Command::decode(&v).1.unwrap() else {
            panic!()
        };
        assert_eq!(job.name, "legacy");
        assert_eq!(job.data, Value::map([("x", Value::Int(1))]));
    }
}
