//! Job schedulers (`Cron*`): upsert, get, list and remove repeatable jobs.
//!
//! A scheduler is a named server-side timer that adds a job to its queue on a cron pattern
//! or every N milliseconds (BullMQ's "job schedulers"). Names are global to the server, not
//! per queue. bunqueue stores, per scheduler, what [`CronInfo`] reports.
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

use crate::session::Replay;
use crate::wire::server::CommandError;
use crate::wire::{Backoff, Dedup, ProtocolError, ValidationError, Value, MAX_SAFE_INTEGER};

use super::decl::op;
use super::decl::setters;
use super::decl::{ms, span};
use super::dlq::{opt_f64, opt_u64};
use super::read::{reply_array, reply_field, reply_opt, reply_opt_str, req_opt_str};
use super::{Fields, Operation};

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

/// A scheduler as bunqueue reports it (`cron` in the replies of [`CronUpsert`] and
/// [`CronGet`], each of `crons` in [`CronList`]'s).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct CronInfo {
    /// The scheduler's name (its id).
    pub name: String,
    /// Name of the jobs it adds.
    pub job_name: String,
    /// Queue the jobs go to.
    pub queue: String,
    /// Cron pattern, if it runs on one.
    pub schedule: Option<String>,
    /// Interval, if it runs every N ms.
    pub repeat_every: Option<Duration>,
    /// Next run, epoch ms.
    pub next_run: f64,
    /// Runs so far.
    pub executions: u64,
    /// Most runs in all (none when absent).
    pub max_limit: Option<u64>,
    /// Time zone of the pattern.
    pub timezone: Option<String>,
    /// Priority of the jobs it adds.
    pub priority: i64,
}

impl CronInfo {
    fn from_value(v: &Value) -> Result<CronInfo, ProtocolError> {
        Ok(CronInfo {
            name: reply_opt_str(v, "name").ok_or(ProtocolError::BadField {
                field: "cron.name",
                problem: "missing",
            })?,
            job_name: reply_opt_str(v, "jobName").unwrap_or_default(),
            queue: reply_opt_str(v, "queue").unwrap_or_default(),
            schedule: reply_opt_str(v, "schedule"),
            repeat_every: opt_f64(v, "repeatEvery").map(span),
            next_run: opt_f64(v, "nextRun").unwrap_or(0.0),
            executions: opt_u64(v, "executions").unwrap_or(0),
            max_limit: opt_u64(v, "maxLimit"),
            timezone: reply_opt_str(v, "timezone"),
            priority: opt_f64(v, "priority").unwrap_or(0.0) as i64,
        })
    }

    fn to_value(&self) -> Value {
        let nullable = |s: &Option<String>| s.clone().map_or(Value::Nil, Value::Str);
        Value::map([
            ("name", Value::from(self.name.as_str())),
            ("jobName", Value::from(self.job_name.as_str())),
            ("queue", Value::from(self.queue.as_str())),
            ("schedule", nullable(&self.schedule)),
            ("repeatEvery", self.repeat_every.map_or(Value::Nil, ms)),
            ("nextRun", Value::F64(self.next_run)),
            ("executions", Value::from(self.executions)),
            ("maxLimit", self.max_limit.map_or(Value::Nil, Value::from)),
            ("timezone", nullable(&self.timezone)),
            ("priority", Value::Int(self.priority)),
        ])
    }
}

/// Options of the jobs a scheduler adds (`jobOptions`: the subset bunqueue applies to them).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct CronJobOptions {
    /// Attempts (`maxAttempts`).
    pub attempts: Option<i64>,
    /// Backoff between attempts.
    pub backoff: Option<Backoff>,
    /// Processing timeout.
    pub timeout: Option<Duration>,
    /// Delay of each added job.
    pub delay: Option<Duration>,
    /// Stall timeout.
    pub stall_timeout: Option<Duration>,
    /// Remove each job when it completes.
    pub remove_on_complete: Option<bool>,
    /// Remove each job when it fails for good.
    pub remove_on_fail: Option<bool>,
}

impl CronJobOptions {
    /// No options: the server's defaults.
    pub fn new() -> Self {
        Self::default()
    }

    fn is_empty(&self) -> bool {
        *self == CronJobOptions::default()
    }

    fn to_value(&self) -> Value {
        let backoff = |b: Backoff| match b {
            Backoff::Delay(d) => ms(d),
            Backoff::Fixed(d) => Value::map([("type", Value::from("fixed")), ("delay", ms(d))]),
            Backoff::Exponential(d) => {
                Value::map([("type", Value::from("exponential")), ("delay", ms(d))])
            }
        };
        let mut f = Fields::default();
        f.put_opt("maxAttempts", self.attempts)
            .put_opt("backoff", self.backoff.map(backoff))
            .put_opt("timeout", self.timeout.map(ms))
            .put_opt("delay", self.delay.map(ms))
            .put_opt("stallTimeout", self.stall_timeout.map(ms))
            .put_opt("removeOnComplete", self.remove_on_complete)
            .put_opt("removeOnFail", self.remove_on_fail);
        f.into_value()
    }

    fn from_value(v: &Value) -> CronJobOptions {
        let backoff = match v.get("backoff") {
            Some(b @ Value::Map(_)) => {
                let d = span(opt_f64(b, "delay").unwrap_or(0.0));
                match b.get("type").and_then(Value::as_str) {
                    Some("fixed") => Some(Backoff::Fixed(d)),
                    _ => Some(Backoff::Exponential(d)),
                }
            }
            Some(x) => x.as_f64().map(|f| Backoff::Delay(span(f))),
            None => None,
        };
        CronJobOptions {
            attempts: opt_f64(v, "maxAttempts").map(|f| f as i64),
            backoff,
            timeout: opt_f64(v, "timeout").map(span),
            delay: opt_f64(v, "delay").map(span),
            stall_timeout: opt_f64(v, "stallTimeout").map(span),
            remove_on_complete: reply_opt(v, "removeOnComplete").and_then(Value::as_bool),
            remove_on_fail: reply_opt(v, "removeOnFail").and_then(Value::as_bool),
        }
    }
}

setters! { CronJobOptions {
    attempts: i64, backoff: Backoff, timeout: Duration, delay: Duration, stall_timeout: Duration,
    remove_on_complete: bool, remove_on_fail: bool,
} }

/// `Cron`: creates or replaces the scheduler `name`, which adds a job named `job_name` with
/// `data` to `queue` on the cron `schedule` or every `repeat_every` (at least one of them).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct CronUpsert {
    /// The scheduler's name (global to the server).
    pub name: String,
    /// Queue the jobs go to.
    pub queue: String,
    /// Name of the jobs (`default` when absent, as the TS client sends it).
    pub job_name: Option<String>,
    /// Data of each job.
    pub data: Value,
    /// Cron pattern (5 or 6 fields, or a shortcut such as `@hourly`).
    pub schedule: Option<String>,
    /// Interval.
    pub repeat_every: Option<Duration>,
    /// Priority of each job.
    pub priority: Option<i64>,
    /// IANA time zone of the pattern (UTC when absent).
    pub timezone: Option<String>,
    /// Most runs in all (`0` or absent: no limit).
    pub max_limit: Option<i64>,
    /// After a restart, skip the runs missed meanwhile (server default: yes).
    pub skip_missed_on_restart: Option<bool>,
    /// Run once at once, then on schedule.
    pub immediately: Option<bool>,
    /// Skip a run when no worker is registered for the queue.
    pub skip_if_no_worker: Option<bool>,
    /// Skip a run while the previous run's job is still pending (server default: yes).
    pub prevent_overlap: Option<bool>,
    /// Options of each job.
    pub job_options: Option<CronJobOptions>,
    /// Deduplication key of each job.
    pub unique_key: Option<String>,
    /// Deduplication window for `unique_key`.
    pub dedup: Option<Dedup>,
}

impl CronUpsert {
    /// Scheduler `name` adding to `queue` on `schedule`.
    pub fn new(queue: impl Into<String>, name: impl Into<String>, schedule: Schedule) -> Self {
        let (schedule, repeat_every) = match schedule {
            Schedule::Every(every) => (None, Some(every)),
            Schedule::Pattern(p) => (Some(p), None),
        };
        CronUpsert {
            schedule,
            repeat_every,
            ..CronUpsert::blank(queue, name)
        }
    }

    fn blank(queue: impl Into<String>, name: impl Into<String>) -> Self {
        CronUpsert {
            name: name.into(),
            queue: queue.into(),
            job_name: None,
            data: Value::map::<&str>([]),
            schedule: None,
            repeat_every: None,
            priority: None,
            timezone: None,
            max_limit: None,
            skip_missed_on_restart: None,
            immediately: None,
            skip_if_no_worker: None,
            prevent_overlap: None,
            job_options: None,
            unique_key: None,
            dedup: None,
        }
    }

    /// Scheduler `name` adding to `queue` on the cron `pattern`.
    pub fn pattern(
        queue: impl Into<String>,
        name: impl Into<String>,
        pattern: impl Into<String>,
    ) -> Self {
        CronUpsert {
            schedule: Some(pattern.into()),
            ..CronUpsert::blank(queue, name)
        }
    }

    /// Scheduler `name` adding to `queue` every `every`.
    pub fn every(queue: impl Into<String>, name: impl Into<String>, every: Duration) -> Self {
        CronUpsert {
            repeat_every: Some(every),
            ..CronUpsert::blank(queue, name)
        }
    }

    /// Sets [`data`](Self::data).
    pub fn data(mut self, data: Value) -> Self {
        self.data = data;
        self
    }

    /// Sets [`unique_key`](Self::unique_key) and its window.
    pub fn dedup(mut self, key: impl Into<String>, dedup: Dedup) -> Self {
        self.unique_key = Some(key.into());
        self.dedup = Some(dedup);
        self
    }
}

setters! { CronUpsert {
    job_name: impl Into<String>, schedule: impl Into<String>, repeat_every: Duration,
    priority: i64, timezone: impl Into<String>, max_limit: i64, skip_missed_on_restart: bool,
    immediately: bool, skip_if_no_worker: bool, prevent_overlap: bool, job_options: CronJobOptions,
} }

fn dedup_value(d: &Dedup) -> Value {
    let mut f = Fields::default();
    f.put_opt("ttl", d.ttl.map(ms))
        .put_opt("extend", d.extend)
        .put_opt("replace", d.replace);
    f.into_value()
}

/// bunqueue's `assertValidCronTiming`, on the wire value of `repeatEvery`.
fn check_timing(schedule: Option<&str>, every: Option<f64>) -> Result<(), ValidationError> {
    if let Some(e) = every {
        if e.fract() != 0.0 || !(1.0..=MAX_SAFE_INTEGER as f64).contains(&e) {
            return Err(ValidationError::new(
                "repeatEvery",
                "Cron repeatEvery must be a positive safe integer number of milliseconds",
            ));
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

impl Operation for CronUpsert {
    const NAME: &'static str = "Cron";
    type Output = CronInfo;

    const REPLAY: Replay = Replay::Safe;

    fn write_fields(&self, fields: &mut Fields) {
        fields
            .put("name", self.name.as_str())
            .put("jobName", self.job_name.as_deref().unwrap_or("default"))
            .put("queue", self.queue.as_str())
            .put("data", self.data.clone())
            .put_opt("schedule", self.schedule.as_deref())
            .put_opt("repeatEvery", self.repeat_every.map(ms))
            .put_opt("priority", self.priority)
            .put_opt("timezone", self.timezone.as_deref())
            .put_opt("maxLimit", self.max_limit)
            .put_opt("skipMissedOnRestart", self.skip_missed_on_restart)
            .put_opt("immediately", self.immediately)
            .put_opt("skipIfNoWorker", self.skip_if_no_worker)
            .put_opt("preventOverlap", self.prevent_overlap)
            .put_opt(
                "jobOptions",
                self.job_options
                    .as_ref()
                    .filter(|o| !o.is_empty())
                    .map(CronJobOptions::to_value),
            )
            .put_opt("uniqueKey", self.unique_key.as_deref())
            .put_opt("dedup", self.dedup.as_ref().map(dedup_value));
    }

    fn read_reply(reply: &Value) -> Result<CronInfo, ProtocolError> {
        read_cron(reply)
    }

    fn validate(&self) -> Result<(), ValidationError> {
        check_timing(
            self.schedule.as_deref(),
            self.repeat_every.map(|d| crate::wire::millis(d) as f64),
        )
    }
}
impl crate::wire::server::ServeOperation for CronUpsert {
    fn read_request(request: &Value) -> Result<Self, CommandError> {
        let every = match request.get("repeatEvery") {
            None | Some(Value::Undefined) | Some(Value::Nil) => None,
            Some(x) => Some(x.as_f64().ok_or_else(|| {
                ValidationError::new(
                    "repeatEvery",
                    "Cron repeatEvery must be a positive safe integer number of milliseconds",
                )
            })?),
        };
        let schedule = req_opt_str(request, "schedule");
        check_timing(schedule.as_deref(), every)?;
        let flag = |k: &str| reply_opt(request, k).and_then(Value::as_bool);
        Ok(CronUpsert {
            name: req_opt_str(request, "name").unwrap_or_default(),
            queue: req_opt_str(request, "queue").unwrap_or_default(),
            job_name: req_opt_str(request, "jobName"),
            data: request.get("data").cloned().unwrap_or(Value::Undefined),
            schedule,
            repeat_every: every.map(span),
            priority: opt_f64(request, "priority").map(|f| f as i64),
            timezone: req_opt_str(request, "timezone"),
            max_limit: opt_f64(request, "maxLimit").map(|f| f as i64),
            skip_missed_on_restart: flag("skipMissedOnRestart"),
            immediately: flag("immediately"),
            skip_if_no_worker: flag("skipIfNoWorker"),
            prevent_overlap: flag("preventOverlap"),
            job_options: match request.get("jobOptions") {
                Some(o @ Value::Map(_)) => Some(CronJobOptions::from_value(o)),
                _ => None,
            },
            unique_key: req_opt_str(request, "uniqueKey"),
            dedup: match request.get("dedup") {
                Some(d @ Value::Map(_)) => Some(Dedup {
                    ttl: opt_f64(d, "ttl").map(span),
                    extend: reply_opt(d, "extend").and_then(Value::as_bool),
                    replace: reply_opt(d, "replace").and_then(Value::as_bool),
                }),
                _ => None,
            },
        })
    }

    fn write_reply(cron: &CronInfo, fields: &mut Fields) {
        write_cron(cron, fields);
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
    reply: CronInfo = with(read_cron, write_cron);
}

fn read_cron(reply: &Value) -> Result<CronInfo, ProtocolError> {
    CronInfo::from_value(reply_field(reply, "cron")?)
}

fn write_cron(cron: &CronInfo, fields: &mut Fields) {
    fields.put("cron", cron.to_value());
}

op! {
    /// `CronList`: every scheduler on the server, of every queue. A read: replayed.
    CronList, Safe, Eq, Default;
    /// Lists every scheduler.
    new();
    fields {}
    reply: Vec<CronInfo> = with(read_crons, write_crons);
}

fn read_crons(reply: &Value) -> Result<Vec<CronInfo>, ProtocolError> {
    reply_array(reply, "crons")?
        .iter()
        .map(CronInfo::from_value)
        .collect()
}

fn write_crons(crons: &[CronInfo], fields: &mut Fields) {
    fields.put(
        "crons",
        Value::Array(crons.iter().map(CronInfo::to_value).collect()),
    );
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
