//! One job's own records: progress, logs, data, and its lock; and the moves a worker makes on a
//! job it holds (back to waiting, to delayed).
//!
//! bunqueue validates none of these fields itself (a missing `progress` is stored as `NaN`), so
//! [`Operation::validate`] here only refuses what could never mean anything: an empty job id, a
//! progress that is not a finite number, a negative duration.

use crate::session::Replay;
use crate::wire::server::CommandError;
use crate::wire::{ProtocolError, ValidationError, Value};

use super::read::{
    array, number, reply_array, reply_field, reply_opt_str, reply_u64, req_opt_i64, req_opt_str,
    req_str, req_strings, text,
};
use super::{Fields, Operation};

fn check_id(id: &str) -> Result<(), ValidationError> {
    if id.is_empty() {
        return Err(ValidationError::new("id", "id is required"));
    }
    Ok(())
}

fn check_ms(field: &'static str, ms: i64) -> Result<(), ValidationError> {
    if ms < 0 {
        return Err(ValidationError::new(
            field,
            format!("{field} must be a non-negative number of milliseconds"),
        ));
    }
    Ok(())
}

/// A number in a request, required (`<field> is required` otherwise).
fn req_number(v: &Value, field: &'static str) -> Result<f64, ValidationError> {
    v.get(field)
        .and_then(number)
        .ok_or_else(|| ValidationError::new(field, format!("{field} is required")))
}

fn ok_id(fields: &mut Fields) {
    fields.put("id", Value::Undefined);
}

fn data_map(fields: &mut Fields, entries: Vec<(&str, Value)>) {
    fields.put("data", Value::map(entries));
}

fn reply_data(reply: &Value) -> Result<&Value, ProtocolError> {
    reply_field(reply, "data")
}

// ---------------------------------------------------------------- progress

/// `Progress`: sets an **active** job's progress (bunqueue clamps it to 0..=100) and, when
/// given, its progress message; emits a `progress` event to the queue's subscribers.
///
/// The server refuses a job that is not active: `Job not found`, or
/// `Job is not active (current state: <state>)`. Setting the same progress twice is the same as
/// once, so it may be replayed.
///
/// ```
/// use autobatch_core::ops::{Operation, UpdateProgress};
/// use autobatch_core::wire::Value;
/// let op = UpdateProgress::new("42", 50.0).message("half way");
/// assert_eq!(op.to_body(), Value::map([
///     ("cmd", Value::from("Progress")), ("id", Value::from("42")),
///     ("progress", Value::Int(50)), ("message", Value::from("half way")),
/// ]));
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct UpdateProgress {
    /// Job id.
    pub id: String,
    /// Progress, 0 to 100 (the server clamps).
    pub progress: f64,
    /// Progress message; `None` keeps the previous one.
    pub message: Option<String>,
}

impl UpdateProgress {
    /// Sets job `id`'s progress.
    pub fn new(id: impl Into<String>, progress: f64) -> Self {
        UpdateProgress {
            id: id.into(),
            progress,
            message: None,
        }
    }

    /// With a progress message.
    pub fn message(mut self, message: impl Into<String>) -> Self {
        self.message = Some(message.into());
        self
    }
}

/// Progress sent as an integer when it is one (as msgpackr writes JS integers), a float
/// otherwise.
fn progress_value(p: f64) -> Value {
    if p.fract() == 0.0 && p.abs() < 2_147_483_648.0 {
        Value::from(p as i64)
    } else {
        Value::from(p)
    }
}

impl Operation for UpdateProgress {
    const NAME: &'static str = "Progress";
    type Output = ();

    const REPLAY: Replay = Replay::Safe;

    fn write_fields(&self, fields: &mut Fields) {
        fields
            .put("id", self.id.as_str())
            .put("progress", progress_value(self.progress))
            .put_opt("message", self.message.as_deref());
    }

    fn read_reply(_: &Value) -> Result<(), ProtocolError> {
        Ok(())
    }

    fn validate(&self) -> Result<(), ValidationError> {
        check_id(&self.id)?;
        if !self.progress.is_finite() {
            return Err(ValidationError::new(
                "progress",
                "progress must be a finite number",
            ));
        }
        Ok(())
    }
}
impl crate::wire::server::ServeOperation for UpdateProgress {
    fn read_request(request: &Value) -> Result<Self, CommandError> {
        Ok(UpdateProgress {
            id: req_str(request, "id")?,
            progress: req_number(request, "progress")?,
            message: req_opt_str(request, "message"),
        })
    }

    fn write_reply(_: &(), fields: &mut Fields) {
        ok_id(fields);
    }
}

/// An active job's progress, as [`GetProgress`] reads it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct JobProgress {
    /// 0 to 100.
    pub progress: f64,
    /// The last progress message, if any was set.
    pub message: Option<String>,
}

impl JobProgress {
    /// A progress record.
    pub fn new(progress: f64, message: Option<String>) -> Self {
        JobProgress { progress, message }
    }
}

/// `GetProgress`: an **active** job's progress and message (the server keeps them only while
/// the job is active: `Job is not active (current state: <state>)` otherwise).
///
/// ```
/// use autobatch_core::ops::{GetProgress, JobProgress, Operation};
/// use autobatch_core::wire::Value;
/// let reply = Value::map([("ok", Value::from(true)), ("progress", Value::Int(40))]);
/// assert_eq!(GetProgress::read_reply(&reply), Ok(JobProgress::new(40.0, None)));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GetProgress {
    /// Job id.
    pub id: String,
}

impl GetProgress {
    /// Asks about job `id`.
    pub fn new(id: impl Into<String>) -> Self {
        GetProgress { id: id.into() }
    }
}

impl Operation for GetProgress {
    const NAME: &'static str = "GetProgress";
    type Output = JobProgress;

    const REPLAY: Replay = Replay::Safe;

    fn write_fields(&self, fields: &mut Fields) {
        fields.put("id", self.id.as_str());
    }

    fn read_reply(reply: &Value) -> Result<JobProgress, ProtocolError> {
        // A progress never set is 0 on the server; `null`/absent reads the same.
        let progress = reply.get("progress").and_then(number).unwrap_or(0.0);
        Ok(JobProgress {
            progress,
            message: reply_opt_str(reply, "message"),
        })
    }

    fn validate(&self) -> Result<(), ValidationError> {
        check_id(&self.id)
    }
}
impl crate::wire::server::ServeOperation for GetProgress {
    fn read_request(request: &Value) -> Result<Self, CommandError> {
        Ok(GetProgress::new(req_str(request, "id")?))
    }

    fn write_reply(p: &JobProgress, fields: &mut Fields) {
        fields.put("progress", progress_value(p.progress)).put(
            "message",
            p.message.as_deref().map_or(Value::Undefined, Value::from),
        );
    }
}

// ---------------------------------------------------------------- logs

/// `AddLog`: appends a line to a job's log (any state; bunqueue keeps the last
/// `maxLogsPerJob`). `Job not found` for an unknown job. Not replayed: a second write would
/// add the line twice.
///
/// ```
/// use autobatch_core::ops::{AddLog, Operation};
/// use autobatch_core::wire::Value;
/// let op = AddLog::new("42", "fetched 10 rows");
/// assert_eq!(op.to_body(), Value::map([
///     ("cmd", Value::from("AddLog")), ("id", Value::from("42")), ("message", Value::from("fetched 10 rows")),
/// ]));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AddLog {
    /// Job id.
    pub id: String,
    /// The line.
    pub message: String,
    /// Level (`info` when absent, as the server stores it).
    pub level: Option<String>,
}

impl AddLog {
    /// Appends `message` to job `id`'s log.
    pub fn new(id: impl Into<String>, message: impl Into<String>) -> Self {
        AddLog {
            id: id.into(),
            message: message.into(),
            level: None,
        }
    }

    /// With a level (`info`, `warn`, `error`, …).
    pub fn level(mut self, level: impl Into<String>) -> Self {
        self.level = Some(level.into());
        self
    }
}

impl Operation for AddLog {
    const NAME: &'static str = "AddLog";
    type Output = ();

    const REPLAY: Replay = Replay::NotSafe;

    fn write_fields(&self, fields: &mut Fields) {
        fields
            .put("id", self.id.as_str())
            .put("message", self.message.as_str())
            .put_opt("level", self.level.as_deref());
    }

    fn read_reply(_: &Value) -> Result<(), ProtocolError> {
        Ok(())
    }

    fn validate(&self) -> Result<(), ValidationError> {
        check_id(&self.id)
    }
}
impl crate::wire::server::ServeOperation for AddLog {
    fn read_request(request: &Value) -> Result<Self, CommandError> {
        Ok(AddLog {
            id: req_str(request, "id")?,
            message: req_opt_str(request, "message").unwrap_or_default(),
            level: req_opt_str(request, "level"),
        })
    }

    fn write_reply(_: &(), fields: &mut Fields) {
        data_map(fields, vec![("added", Value::from(true))]);
    }
}

/// One line of a job's log.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct JobLog {
    /// When it was added, epoch ms.
    pub timestamp: f64,
    /// Level (`info` unless given).
    pub level: String,
    /// The line.
    pub message: String,
}

impl JobLog {
    /// A log line.
    pub fn new(timestamp: f64, level: impl Into<String>, message: impl Into<String>) -> Self {
        JobLog {
            timestamp,
            level: level.into(),
            message: message.into(),
        }
    }
}

/// A job's log lines (the requested slice) and how many it has in all.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct JobLogs {
    /// The lines, oldest first.
    pub logs: Vec<JobLog>,
    /// How many lines the job has, whatever the slice.
    pub count: u64,
}

impl JobLogs {
    /// A log listing.
    pub fn new(logs: Vec<JobLog>, count: u64) -> Self {
        JobLogs { logs, count }
    }
}

/// `GetLogs`: a job's log, all of it or lines `start..=end` (as JS `slice(start, end + 1)`).
/// An unknown job has an empty log (the server does not refuse it).
///
/// ```
/// use autobatch_core::ops::{GetLogs, Operation};
/// use autobatch_core::wire::Value;
/// let reply = Value::map([("ok", Value::from(true)), ("data", Value::map([
///     ("logs", Value::Array(vec![Value::map([
///         ("timestamp", Value::from(1.0)), ("level", Value::from("info")), ("message", Value::from("hi")),
///     ])])),
///     ("count", Value::Int(1)),
/// ]))]);
/// let logs = GetLogs::read_reply(&reply).unwrap();
/// assert_eq!((logs.count, logs.logs[0].message.as_str()), (1, "hi"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GetLogs {
    /// Job id.
    pub id: String,
    /// First line (0-based).
    pub start: Option<i64>,
    /// Last line, inclusive.
    pub end: Option<i64>,
}

impl GetLogs {
    /// Reads job `id`'s whole log.
    pub fn new(id: impl Into<String>) -> Self {
        GetLogs {
            id: id.into(),
            start: None,
            end: None,
        }
    }

    /// Only lines `start..=end`.
    pub fn range(mut self, start: i64, end: i64) -> Self {
        self.start = Some(start);
        self.end = Some(end);
        self
    }
}

impl Operation for GetLogs {
    const NAME: &'static str = "GetLogs";
    type Output = JobLogs;

    const REPLAY: Replay = Replay::Safe;

    fn write_fields(&self, fields: &mut Fields) {
        fields
            .put("id", self.id.as_str())
            .put_opt("start", self.start)
            .put_opt("end", self.end);
    }

    fn read_reply(reply: &Value) -> Result<JobLogs, ProtocolError> {
        let data = reply_data(reply)?;
        let logs = reply_array(data, "logs")?
            .iter()
            .map(|l| {
                Ok(JobLog {
                    timestamp: l.get("timestamp").and_then(number).unwrap_or(0.0),
                    level: reply_opt_str(l, "level").unwrap_or_else(|| "info".into()),
                    message: l.get("message").and_then(text).unwrap_or_default(),
                })
            })
            .collect::<Result<Vec<_>, ProtocolError>>()?;
        Ok(JobLogs {
            count: reply_u64(data, "count")?,
            logs,
        })
    }

    fn validate(&self) -> Result<(), ValidationError> {
        check_id(&self.id)
    }
}
impl crate::wire::server::ServeOperation for GetLogs {
    fn read_request(request: &Value) -> Result<Self, CommandError> {
        Ok(GetLogs {
            id: req_str(request, "id")?,
            start: req_opt_i64(request, "start")?,
            end: req_opt_i64(request, "end")?,
        })
    }

    fn write_reply(out: &JobLogs, fields: &mut Fields) {
        let logs = out.logs.iter().map(|l| {
            Value::map([
                ("timestamp", Value::from(l.timestamp)),
                ("level", Value::from(l.level.as_str())),
                ("message", Value::from(l.message.as_str())),
            ])
        });
        data_map(
            fields,
            vec![("logs", array(logs)), ("count", Value::from(out.count))],
        );
    }
}

/// `ClearLogs`: empties a job's log, or keeps only its last `keep_logs` lines. Idempotent, so
/// it may be replayed; an unknown job is not an error.
///
/// ```
/// use autobatch_core::ops::{ClearLogs, Operation};
/// assert_eq!(ClearLogs::new("42").keep_logs(10).keep_logs, Some(10));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClearLogs {
    /// Job id.
    pub id: String,
    /// Lines to keep (the newest); `None` or 0 clears all.
    pub keep_logs: Option<i64>,
}

impl ClearLogs {
    /// Clears job `id`'s log.
    pub fn new(id: impl Into<String>) -> Self {
        ClearLogs {
            id: id.into(),
            keep_logs: None,
        }
    }

    /// Keeps the newest `n` lines.
    pub fn keep_logs(mut self, n: i64) -> Self {
        self.keep_logs = Some(n);
        self
    }
}

impl Operation for ClearLogs {
    const NAME: &'static str = "ClearLogs";
    type Output = ();

    const REPLAY: Replay = Replay::Safe;

    fn write_fields(&self, fields: &mut Fields) {
        fields
            .put("id", self.id.as_str())
            .put_opt("keepLogs", self.keep_logs);
    }

    fn read_reply(_: &Value) -> Result<(), ProtocolError> {
        Ok(())
    }

    fn validate(&self) -> Result<(), ValidationError> {
        check_id(&self.id)
    }
}
impl crate::wire::server::ServeOperation for ClearLogs {
    fn read_request(request: &Value) -> Result<Self, CommandError> {
        Ok(ClearLogs {
            id: req_str(request, "id")?,
            keep_logs: req_opt_i64(request, "keepLogs")?,
        })
    }

    fn write_reply(_: &(), fields: &mut Fields) {
        ok_id(fields);
    }
}

// ---------------------------------------------------------------- data

/// `Update`: replaces a job's data (any state but finished). The server refuses an unknown or
/// finished job with `Job not found or cannot be updated`. Writing the same data twice is
/// writing it once, so it may be replayed.
///
/// ```
/// use autobatch_core::ops::{Operation, UpdateData};
/// use autobatch_core::wire::Value;
/// let op = UpdateData::new("42", Value::map([("step", Value::Int(2))]));
/// assert_eq!(UpdateData::NAME, "Update");
/// # let _ = op;
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct UpdateData {
    /// Job id.
    pub id: String,
    /// The new data.
    pub data: Value,
}

impl UpdateData {
    /// Replaces job `id`'s data with `data`.
    pub fn new(id: impl Into<String>, data: Value) -> Self {
        UpdateData {
            id: id.into(),
            data,
        }
    }
}

impl Operation for UpdateData {
    const NAME: &'static str = "Update";
    type Output = ();

    const REPLAY: Replay = Replay::Safe;

    fn write_fields(&self, fields: &mut Fields) {
        fields
            .put("id", self.id.as_str())
            .put("data", self.data.clone());
    }

    fn read_reply(_: &Value) -> Result<(), ProtocolError> {
        Ok(())
    }

    fn validate(&self) -> Result<(), ValidationError> {
        check_id(&self.id)
    }
}
impl crate::wire::server::ServeOperation for UpdateData {
    fn read_request(request: &Value) -> Result<Self, CommandError> {
        Ok(UpdateData {
            id: req_str(request, "id")?,
            data: request.get("data").cloned().unwrap_or(Value::Undefined),
        })
    }

    fn write_reply(_: &(), fields: &mut Fields) {
        ok_id(fields);
    }
}

// ---------------------------------------------------------------- locks

/// `ExtendLock`: extends the lock of a job a worker holds by `duration` ms from now. The token
/// is the one the pull handed out; the server refuses a wrong token or a job not locked with
/// `Lock not found or invalid token`. Extending twice by the same duration ends at about the
/// same time, so it may be replayed.
///
/// ```
/// use autobatch_core::ops::{ExtendLock, Operation};
/// let op = ExtendLock::new("42", 30_000).token("tok");
/// assert_eq!(op.token.as_deref(), Some("tok"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExtendLock {
    /// Job id.
    pub id: String,
    /// The lock token.
    pub token: Option<String>,
    /// New lock time to live, ms.
    pub duration: i64,
}

impl ExtendLock {
    /// Extends job `id`'s lock by `duration_ms`.
    pub fn new(id: impl Into<String>, duration_ms: i64) -> Self {
        ExtendLock {
            id: id.into(),
            token: None,
            duration: duration_ms,
        }
    }

    /// With the lock token.
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }
}

impl Operation for ExtendLock {
    const NAME: &'static str = "ExtendLock";
    type Output = ();

    const REPLAY: Replay = Replay::Safe;

    fn write_fields(&self, fields: &mut Fields) {
        fields
            .put("id", self.id.as_str())
            .put_opt("token", self.token.as_deref())
            .put("duration", self.duration);
    }

    fn read_reply(_: &Value) -> Result<(), ProtocolError> {
        Ok(())
    }

    fn validate(&self) -> Result<(), ValidationError> {
        check_id(&self.id)?;
        check_ms("duration", self.duration)
    }
}
impl crate::wire::server::ServeOperation for ExtendLock {
    fn read_request(request: &Value) -> Result<Self, CommandError> {
        Ok(ExtendLock {
            id: req_str(request, "id")?,
            token: req_opt_str(request, "token"),
            duration: req_number(request, "duration")? as i64,
        })
    }

    fn write_reply(_: &(), fields: &mut Fields) {
        ok_id(fields);
    }
}

/// `ExtendLocks`: [`ExtendLock`] for several jobs at once; yields how many locks were
/// extended (a wrong token or a lost lock is just not counted).
///
/// ```
/// use autobatch_core::ops::{ExtendLocks, Operation};
/// use autobatch_core::wire::Value;
/// let op = ExtendLocks::new(vec![("1".into(), Some("t1".into()), 30_000)]);
/// let reply = Value::map([("ok", Value::from(true)), ("count", Value::Int(1))]);
/// assert_eq!(ExtendLocks::read_reply(&reply), Ok(1));
/// # let _ = op;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExtendLocks {
    /// Job ids.
    pub ids: Vec<String>,
    /// Their tokens (`""` for none), one per id.
    pub tokens: Vec<String>,
    /// Their new time to live, ms, one per id.
    pub durations: Vec<i64>,
}

impl ExtendLocks {
    /// One `(id, token, duration_ms)` per job.
    pub fn new(locks: Vec<(String, Option<String>, i64)>) -> Self {
        let mut op = ExtendLocks {
            ids: Vec::with_capacity(locks.len()),
            tokens: Vec::with_capacity(locks.len()),
            durations: Vec::with_capacity(locks.len()),
        };
        for (id, token, d) in locks {
            op.ids.push(id);
            op.tokens.push(token.unwrap_or_default());
            op.durations.push(d);
        }
        op
    }
}

impl Operation for ExtendLocks {
    const NAME: &'static str = "ExtendLocks";
    type Output = u64;

    const REPLAY: Replay = Replay::Safe;

    fn write_fields(&self, fields: &mut Fields) {
        fields
            .put("ids", array(self.ids.iter().map(String::as_str)))
            .put("tokens", array(self.tokens.iter().map(String::as_str)))
            .put("durations", array(self.durations.iter().copied()));
    }

    fn read_reply(reply: &Value) -> Result<u64, ProtocolError> {
        reply_u64(reply, "count")
    }

    fn validate(&self) -> Result<(), ValidationError> {
        if self.tokens.len() != self.ids.len() || self.durations.len() != self.ids.len() {
            return Err(ValidationError::new(
                "ids",
                "ids, tokens and durations must have the same length",
            ));
        }
        for id in &self.ids {
            check_id(id)?;
        }
        for d in &self.durations {
            check_ms("durations", *d)?;
        }
        Ok(())
    }
}
impl crate::wire::server::ServeOperation for ExtendLocks {
    fn read_request(request: &Value) -> Result<Self, CommandError> {
        let durations = request
            .get("durations")
            .and_then(Value::as_array)
            .map(|a| a.iter().map(|d| number(d).unwrap_or(0.0) as i64).collect())
            .unwrap_or_default();
        Ok(ExtendLocks {
            ids: req_strings(request, "ids"),
            tokens: req_strings(request, "tokens"),
            durations,
        })
    }

    fn write_reply(count: &u64, fields: &mut Fields) {
        fields.put("count", *count);
    }
}

// ---------------------------------------------------------------- worker moves
