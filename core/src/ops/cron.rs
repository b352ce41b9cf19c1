//! Job schedulers (`Cron*`): upsert, get, list and remove repeatable jobs. A scheduler's name
//! is global to the server; what bunqueue keeps of one is a [`CronInfo`].
//!
//! Each command's wire shape and bunqueue 2.9.5's behaviour: `docs/protocol/cron.md`.
//!
//! ```
//! use std::time::Duration;
//! use autobatch_core::ops::{CronList, CronUpsert, Operation};
//! use autobatch_core::wire::Value;
//! let op = CronUpsert::every("emails", "digest", Duration::from_secs(60)).job_name("send-digest");
//! assert!(op.validate().is_ok());
//! assert_eq!(op.to_body().get("repeatEvery"), Some(&Value::Int(60_000)));
//! let reply = Value::map([("ok", Value::from(true)), ("crons", Value::Array(vec![]))]);
//! assert_eq!(CronList::read_reply(&reply).unwrap(), vec![]);
//! ```

use std::time::Duration;

use crate::wire::{millis, Backoff, Dedup, ValidationError, Value, MAX_SAFE_INTEGER};

use super::decl::{fields, kinds, ms, op, options, record, span, wires, Wire, F64};
use super::read::{number, req_map, req_opt_str};
use super::Fields;

/// When a job scheduler runs: every N ms, or on a cron pattern (BullMQ's `RepeatOptions`
/// `every` / `pattern`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Schedule {
    /// Every this long (at least 1 ms).
    Every(Duration),
    /// On this cron pattern (5 or 6 fields, or a shortcut such as `@daily`), in UTC.
    Pattern(String),
}

impl Schedule {
    /// On the cron `pattern`.
    pub fn pattern(pattern: impl Into<String>) -> Self {
        Schedule::Pattern(pattern.into())
    }
}

record! {
    /// A scheduler as bunqueue reports it (`cron` in the replies of [`CronUpsert`] and
    /// [`CronGet`], each of `crons` in [`CronList`]'s).
    #[derive(Debug, Clone, PartialEq)]
    CronInfo {
        /// The scheduler's name (its id).
        name: String = "name" [required],
        /// Name of the jobs it adds.
        job_name: String = "jobName",
        /// Queue the jobs go to.
        queue: String = "queue",
        /// Cron pattern, if it runs on one.
        schedule: Option<String> = "schedule",
        /// Interval, if it runs every N ms.
        repeat_every: Option<Duration> = "repeatEvery",
        /// Next run, epoch ms.
        next_run: f64 = "nextRun" => F64,
        /// Runs so far.
        executions: u64 = "executions",
        /// Most runs in all (none when absent).
        max_limit: Option<u64> = "maxLimit",
        /// Time zone of the pattern.
        timezone: Option<String> = "timezone",
        /// Priority of the jobs it adds.
        priority: i64 = "priority",
    }
}

wires! {
    Backoff => Backoff: |v, k| match v.get(k) {
        Some(b @ Value::Map(_)) => {
            let d = span(b.get("delay").and_then(number).unwrap_or(0.0));
            match b.get("type").and_then(Value::as_str) {
                Some("fixed") => Some(Backoff::Fixed(d)),
                _ => Some(Backoff::Exponential(d)),
            }
        }
        Some(x) => x.as_f64().map(|f| Backoff::Delay(span(f))),
        None => None,
    }, |x| match *x {
        Backoff::Delay(d) => ms(d),
        Backoff::Fixed(d) => Value::map([("type", Value::from("fixed")), ("delay", ms(d))]),
        Backoff::Exponential(d) => {
            Value::map([("type", Value::from("exponential")), ("delay", ms(d))])
        }
    };
}

options! {
    /// Options of the jobs a scheduler adds (`jobOptions`: the subset bunqueue applies to them).
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    CronJobOptions {
        /// No options: the server's defaults.
        new();
        /// Attempts (`maxAttempts`).
        attempts: i64 = "maxAttempts",
        /// Backoff between attempts.
        backoff: Backoff = "backoff",
        /// Processing timeout.
        timeout: Duration = "timeout",
        /// Delay of each added job.
        delay: Duration = "delay",
        /// Stall timeout.
        stall_timeout: Duration = "stallTimeout",
        /// Remove each job when it completes.
        remove_on_complete: bool = "removeOnComplete",
        /// Remove each job when it fails for good.
        remove_on_fail: bool = "removeOnFail",
    }
}

fields! {
    /// Job options travel as one `jobOptions` object, left out when empty.
    Option<CronJobOptions>: |o, k, f| {
        let options = o.as_ref().filter(|o| **o != CronJobOptions::default());
        f.put_opt(k, options.map(CronJobOptions::to_value))
    }, |r, k| Ok(req_map(r, k).map(CronJobOptions::from_value));
    /// A deduplication window travels as one `dedup` object.
    Option<Dedup>: |d, k, f| f.put_opt(k, d.as_ref().map(|d| {
        let mut f = Fields::default();
        f.put_opt("ttl", d.ttl.map(ms)).put_opt("extend", d.extend).put_opt("replace", d.replace);
        f.into_value()
    })), |r, k| Ok(req_map(r, k).map(|d| Dedup {
        ttl: Duration::get(d, "ttl"),
        extend: bool::get(d, "extend"),
        replace: bool::get(d, "replace"),
    }));
}

/// bunqueue's `assertValidCronTiming`, on the wire value of `repeatEvery`.
fn check_timing(schedule: Option<&str>, every: Option<f64>) -> Result<(), ValidationError> {
    if let Some(e) = every {
        if e.fract() != 0.0 || !(1.0..=MAX_SAFE_INTEGER as f64).contains(&e) {
            return Err(not_every());
        }
    }
    if schedule.is_none_or(str::is_empty) && every.is_none() {
        return Err(ValidationError::new(
            "schedule",
            "Cron job must have either schedule or repeatEvery",
        ));
    }
    Ok(())
}

fn not_every() -> ValidationError {
    let message = "Cron repeatEvery must be a positive safe integer number of milliseconds";
    ValidationError::new("repeatEvery", message)
}

kinds! {
    /// The interval, checked with the schedule as bunqueue checks them.
    Every: Option<Duration> = |r, k| {
        let every = match r.get(k) {
            None | Some(Value::Undefined) | Some(Value::Nil) => None,
            Some(x) => Some(x.as_f64().ok_or_else(not_every)?),
        };
        check_timing(req_opt_str(r, "schedule").as_deref(), every)?;
        Ok(every.map(span))
    };
    /// A number the server takes as sent, ignored when not one.
    Lenient: Option<i64> = |r, k| Ok(i64::get(r, k));
    /// The jobs' name, written `default` when absent, as bunqueue's client writes it.
    JobName: Option<String> = |r, k| Ok(req_opt_str(r, k)),
        put |name, key, fields| { fields.put(key, name.as_deref().unwrap_or("default")); };
}

op! {
    /// `Cron`: creates or replaces the scheduler `name`, which adds a job named `job_name` with
    /// `data` to `queue` on the cron `schedule` or every `repeat_every` (at least one of them).
    CronUpsert as "Cron", Safe;
    /// Scheduler `name` adding to `queue` every `repeat_every`.
    every(queue: impl Into<String>, name: impl Into<String>, repeat_every: Duration => Some);
    fields {
        /// The scheduler's name (global to the server).
        name: String = "name",
        /// Name of the jobs (`default` when absent, as the TS client sends it).
        job_name: Option<String> = "jobName" => JobName,
        /// Queue the jobs go to.
        queue: String = "queue",
        /// Data of each job.
        data: Value = "data" | Value::map::<&str>([]),
        /// Cron pattern (5 or 6 fields, or a shortcut such as `@hourly`).
        schedule: Option<String> = "schedule",
        /// Interval.
        repeat_every: Option<Duration> = "repeatEvery" => Every,
        /// Priority of each job.
        priority: Option<i64> = "priority" => Lenient,
        /// IANA time zone of the pattern (UTC when absent).
        timezone: Option<String> = "timezone",
        /// Most runs in all (`0` or absent: no limit).
        max_limit: Option<i64> = "maxLimit" => Lenient,
        /// After a restart, skip the runs missed meanwhile (server default: yes).
        skip_missed_on_restart: Option<bool> = "skipMissedOnRestart",
        /// Run once at once, then on schedule.
        immediately: Option<bool> = "immediately",
        /// Skip a run when no worker is registered for the queue.
        skip_if_no_worker: Option<bool> = "skipIfNoWorker",
        /// Skip a run while the previous run's job is still pending (server default: yes).
        prevent_overlap: Option<bool> = "preventOverlap",
        /// Options of each job.
        job_options: Option<CronJobOptions> = "jobOptions",
        /// Deduplication key of each job.
        unique_key: Option<String> = "uniqueKey",
        /// Deduplication window for `unique_key`.
        dedup: Option<Dedup> = "dedup",
    }
    set {
        job_name: impl Into<String>, schedule: impl Into<String>, repeat_every: Duration,
        priority: i64, timezone: impl Into<String>, max_limit: i64, skip_missed_on_restart: bool,
        immediately: bool, skip_if_no_worker: bool, prevent_overlap: bool,
        job_options: CronJobOptions, data = Value,
    }
    reply: CronInfo = field("cron");
    validate: |op: &CronUpsert| {
        check_timing(op.schedule.as_deref(), op.repeat_every.map(|d| millis(d) as f64))
    };
}

impl CronUpsert {
    /// Scheduler `name` adding to `queue` on `schedule`.
    pub fn new(queue: impl Into<String>, name: impl Into<String>, schedule: Schedule) -> Self {
        match schedule {
            Schedule::Every(every) => CronUpsert::every(queue, name, every),
            Schedule::Pattern(pattern) => CronUpsert::pattern(queue, name, pattern),
        }
    }

    /// Scheduler `name` adding to `queue` on the cron `pattern`.
    pub fn pattern(
        queue: impl Into<String>,
        name: impl Into<String>,
        pattern: impl Into<String>,
    ) -> Self {
        let mut op = CronUpsert::every(queue, name, Duration::ZERO);
        (op.schedule, op.repeat_every) = (Some(pattern.into()), None);
        op
    }

    /// Sets [`unique_key`](Self::unique_key) and its window.
    pub fn dedup(mut self, key: impl Into<String>, dedup: Dedup) -> Self {
        self.unique_key = Some(key.into());
        self.dedup = Some(dedup);
        self
    }
}

op! {
    /// `CronGet`: one scheduler by name; bunqueue answers `Cron job not found` for a name it
    /// does not know. A read: replayed.
    CronGet, Safe, Eq;
    /// Asks for scheduler `name`.
    new(name: impl Into<String>);
    fields {
        /// The scheduler's name.
        name: String = "name",
    }
    reply: CronInfo = field("cron");
}

op! {
    /// `CronList`: every scheduler on the server, of every queue. A read: replayed.
    CronList, Safe, Eq, Default;
    /// Lists every scheduler.
    new();
    fields {}
    reply: Vec<CronInfo> = field("crons");
}

op! {
    /// `CronDelete`: removes scheduler `name` (jobs it already added stay); bunqueue answers
    /// `Cron job not found` for a name it does not know.
    CronDelete, NotSafe, Eq;
    /// Removes scheduler `name`.
    new(name: impl Into<String>);
    fields {
        /// The scheduler's name.
        name: String = "name",
    }
}
