//! One job's own records: progress, logs, data, and its lock. bunqueue validates none of these
//! fields; the client refuses only an empty job id, a non-finite progress, a negative duration.
//!
//! Each command's wire shape and bunqueue 2.9.5's behaviour: `docs/protocol/job.md`.
//!
//! ```
//! use autobatch_core::ops::{GetProgress, JobProgress, Operation, UpdateProgress};
//! use autobatch_core::wire::Value;
//! let op = UpdateProgress::new("42", 50.0).message("half way");
//! assert_eq!(op.to_body().get("progress"), Some(&Value::Int(50)));
//! assert!(UpdateProgress::new("42", f64::NAN).validate().is_err());
//! let reply = Value::map([("ok", Value::from(true)), ("progress", Value::Int(40))]);
//! assert_eq!(GetProgress::read_reply(&reply), Ok(JobProgress::new(40.0, None)));
//! ```

use std::time::Duration;

use super::decl::kind::Required;
use super::decl::{fields, kinds, op, put_data, record, reply_data, wires, Kind, Record};
use super::decl::{Undef, F64};
use super::read::{number, reply_array, reply_opt};
use super::Fields;
use crate::wire::{millis, ProtocolError, ValidationError, Value};

/// A progress as msgpackr writes a JS number: an integer when it is one.
fn progress_value(p: f64) -> Value {
    if p.fract() == 0.0 && p.abs() < 2_147_483_648.0 {
        Value::from(p as i64)
    } else {
        Value::from(p)
    }
}

kinds! {
    /// A number the request must carry (`<key> is required`), finite for the client.
    Finite: f64 = |r, k| {
        let required = || ValidationError::new(k, format!("{k} is required"));
        r.get(k).and_then(number).ok_or_else(required)
    }, check |v, k| if v.is_finite() {
        Ok(())
    } else {
        Err(ValidationError::new(k, format!("{k} must be a finite number")))
    };
    /// A required lock time in ms: read as [`Finite`], never negative for the client.
    Millis: i64 = |r, k| Finite::take(r, k).map(|f| f as i64), check |ms, k| if *ms < 0 {
        Err(ValidationError::new(k, format!("{k} must be a non-negative number of milliseconds")))
    } else {
        Ok(())
    };
}

fields! {
    /// A progress travels as a JS number.
    f64: |p, k, f| f.put(k, progress_value(*p)), |r, k| Finite::take(r, k);
    /// Arbitrary data travels as it is (`undefined` when absent).
    Value: |v, k, f| f.put(k, v.clone()), |r, k| Ok(r.get(k).cloned().unwrap_or(Value::Undefined));
}

/// A progress in a reply: a progress never set is 0 on the server; `null`/absent reads the same.
struct Progress;

wires! {
    Progress => f64: |v, k| reply_opt(v, k).and_then(number), |x| progress_value(*x);
}

op! {
    /// `Progress`: sets an **active** job's progress (bunqueue clamps it to 0..=100) and, when
    /// given, its progress message; emits a `progress` event to the queue's subscribers.
    UpdateProgress as "Progress", Safe;
    /// Sets job `id`'s progress to `progress`.
    new(id: impl Into<String>, progress: f64);
    fields {
        /// Job id.
        id: String = "id" => Required,
        /// 0 to 100.
        progress: f64 = "progress" => Finite,
        /// A progress message.
        message: Option<String> = "message",
    }
    set { message: impl Into<String> }
}

record! {
    /// An active job's progress, as [`GetProgress`] reads it.
    #[derive(Debug, Clone, PartialEq)]
    JobProgress {
        /// 0 to 100.
        progress: f64 = "progress" => Progress,
        /// The last progress message, if any was set.
        message: Option<String> = "message" => Undef<String>,
    }
    /// A progress record.
    new(progress: f64, message: Option<String>);
}

op! {
    /// `GetProgress`: an **active** job's progress and message (the server keeps them only while
    /// the job is active: `Job is not active (current state: <state>)` otherwise).
    GetProgress, Safe, Eq;
    id;
    reply: JobProgress = flat;
}

op! {
    /// `AddLog`: appends a line to a job's log (any state). Not replayed: a second write would
    /// add the line twice.
    AddLog, NotSafe, Eq;
    /// Appends `message` to job `id`'s log.
    new(id: impl Into<String>, message: impl Into<String>);
    fields {
        /// Job id.
        id: String = "id" => Required,
        /// The line.
        message: String = "message",
        /// Its level (`info` when absent).
        level: Option<String> = "level",
    }
    set { level: impl Into<String> }
    reply: () = with(|_| Ok(()), |_: &(), f: &mut Fields| put_data(f, "added", true));
}

record! {
    /// One line of a job's log.
    #[derive(Debug, Clone, PartialEq)]
    JobLog {
        /// When it was added, epoch ms.
        timestamp: f64 = "timestamp" => F64,
        /// Level (`info` unless given).
        level: String = "level" | "info".into(),
        /// The line.
        message: String = "message",
    }
    /// A log line.
    new(timestamp: f64, level: impl Into<String>, message: impl Into<String>);
}

record! {
    /// A job's log lines (the requested slice) and how many it has in all.
    #[derive(Debug, Clone, PartialEq, Default)]
    JobLogs {
        /// The lines, oldest first.
        logs: Vec<JobLog> = "logs",
        /// How many lines the job has, whatever the slice.
        count: u64 = "count" [required],
    }
    /// A log listing.
    new(logs: Vec<JobLog>, count: u64);
}

impl JobLogs {
    /// Reads the `data` of a reply: the lines (one that is not a line is left out) and the
    /// count, both required.
    fn read_data(reply: &Value) -> Result<JobLogs, ProtocolError> {
        let data = reply_data(reply)?;
        reply_array(&data, "logs")?;
        JobLogs::read(&data)
    }
}

op! {
    /// `GetLogs`: a job's log, all of it or lines `start..=end` (as JS `slice(start, end + 1)`).
    /// An unknown job has an empty log (the server does not refuse it).
    GetLogs, Safe, Eq;
    id;
    fields {
        /// First line.
        start: Option<i64> = "start",
        /// Last line.
        end: Option<i64> = "end",
    }
    reply: JobLogs = with(JobLogs::read_data, |l: &JobLogs, f: &mut Fields| {
        f.put("data", l.encode());
    });
}

impl GetLogs {
    /// Only lines `start..=end`.
    pub fn range(mut self, start: i64, end: i64) -> Self {
        self.start = Some(start);
        self.end = Some(end);
        self
    }
}

op! {
    /// `ClearLogs`: empties a job's log, or keeps only its last `keep_logs` lines. Idempotent, so
    /// it may be replayed; an unknown job is not an error.
    ClearLogs, Safe, Eq;
    id;
    fields {
        /// Lines to keep, the newest.
        keep_logs: Option<i64> = "keepLogs",
    }
    set { keep_logs: i64 }
}

op! {
    /// `Update`: replaces a job's data (any state but finished). Writing the same data twice is
    /// writing it once, so it may be replayed.
    UpdateData as "Update", Safe;
    /// Replaces job `id`'s data with `data`.
    new(id: impl Into<String>, data: Value);
    fields {
        /// Job id.
        id: String = "id" => Required,
        /// The new data.
        data: Value = "data",
    }
}

op! {
    /// `ExtendLock`: extends the lock of a job a worker holds (with the pull's token) by
    /// `duration` from now. Replayed: extending twice ends at about the same time.
    ExtendLock, Safe, Eq;
    /// Extends job `id`'s lock by `duration`.
    new(id: impl Into<String>, duration: Duration => millis);
    fields {
        /// Job id.
        id: String = "id" => Required,
        /// The lock token.
        token: Option<String> = "token",
        /// New lock time to live, ms.
        duration: i64 = "duration" => Millis,
    }
    set { token: impl Into<String> }
}

op! {
    /// `ExtendLocks`: [`ExtendLock`] for several jobs at once; yields how many locks were
    /// extended (a wrong token or a lost lock is just not counted).
    ExtendLocks, Safe, Eq;
    fields {
        /// Job ids.
        ids: Vec<String> = "ids",
        /// Their lock tokens (empty when none), in the same order.
        tokens: Vec<String> = "tokens",
        /// Their new lock times to live, ms, in the same order.
        durations: Vec<i64> = "durations",
    }
    reply: u64 = field("count");
    validate: |op: &ExtendLocks| {
        if op.tokens.len() != op.ids.len() || op.durations.len() != op.ids.len() {
            let message = "ids, tokens and durations must have the same length";
            return Err(ValidationError::new("ids", message));
        }
        op.ids.iter().try_for_each(|id| Required::check(id, "id"))?;
        op.durations.iter().try_for_each(|d| Millis::check(d, "durations"))
    };
}

impl ExtendLocks {
    /// Extends each `(id, token, duration)`.
    pub fn new(locks: Vec<(String, Option<String>, Duration)>) -> Self {
        let mut op = ExtendLocks {
            ids: Vec::with_capacity(locks.len()),
            tokens: Vec::with_capacity(locks.len()),
            durations: Vec::with_capacity(locks.len()),
        };
        for (id, token, d) in locks {
            op.ids.push(id);
            op.tokens.push(token.unwrap_or_default());
            op.durations.push(millis(d));
        }
        op
    }
}
