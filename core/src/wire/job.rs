//! Jobs as they travel: the job a producer adds ([`JobSpec`] with [`JobOptions`]), its
//! validation against bunqueue's limits, and the job record a worker pulls ([`Job`]).

use std::time::Duration;

use super::value::Value;

/// A time span as the wire carries it: whole milliseconds (sub-millisecond parts are dropped),
/// saturating at `i64::MAX`.
pub(crate) fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// A wire time span (ms) as a [`Duration`]; the server treats a negative one as zero.
pub(crate) fn from_millis(ms: i64) -> Duration {
    Duration::from_millis(ms.max(0) as u64)
}

/// Longest queue or job name bunqueue accepts, in characters.
pub const MAX_NAME_CHARS: usize = 256;
/// Largest job data bunqueue accepts: `JSON.stringify(data).length` in UTF-16 code units.
pub const MAX_DATA_JSON_LEN: usize = 10 * 1024 * 1024;
/// Largest `delay` and `ttl`: 365 days in milliseconds.
pub const MAX_DELAY_MS: i64 = 31_536_000_000;
/// Largest `timeout` and backoff delay: one day in milliseconds.
pub const MAX_TIMEOUT_MS: i64 = 86_400_000;
/// Largest absolute `priority`.
pub const MAX_PRIORITY: i64 = 1_000_000;
/// Largest `maxAttempts`.
pub const MAX_ATTEMPTS: i64 = 1000;

/// A job or batch that bunqueue would refuse, caught before anything is sent.
///
/// The message is the server's own wording, so an error reads the same whether it was caught
/// here or by the server; [`field`](Self::field) names the offending field for programs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
#[non_exhaustive]
pub struct ValidationError {
    /// The wire name of the offending field (`queue`, `name`, `data`, `priority`, …).
    pub field: &'static str,
    /// What is wrong, in bunqueue's words.
    pub message: String,
}

impl ValidationError {
    /// An error about `field`, worded as bunqueue words it.
    ///
    /// ```
    /// use autobatch_core::wire::ValidationError;
    /// let e = ValidationError::new("data", "Job data must be JSON serializable");
    /// assert_eq!(e.to_string(), "Job data must be JSON serializable");
    /// ```
    pub fn new(field: &'static str, message: impl Into<String>) -> Self {
        ValidationError {
            field,
            message: message.into(),
        }
    }

    /// Prefixes the message with the item's index, as bunqueue does for PUSHB (`jobs[3]: …`).
    pub fn in_batch(mut self, index: usize) -> Self {
        self.message = format!("jobs[{index}]: {}", self.message);
        self
    }
}

/// Checks a queue name: 1..256 characters of `[a-zA-Z0-9_\-.:]`.
///
/// ```
/// use autobatch_core::wire::validate_queue_name;
/// assert!(validate_queue_name("emails").is_ok());
/// assert_eq!(validate_queue_name("bad name").unwrap_err().message,
///            "Queue name contains invalid characters");
/// ```
pub fn validate_queue_name(queue: &str) -> Result<(), ValidationError> {
    if queue.is_empty() {
        return Err(ValidationError::new("queue", "Queue name is required"));
    }
    if queue.chars().count() > MAX_NAME_CHARS {
        return Err(ValidationError::new(
            "queue",
            "Queue name too long (max 256 characters)",
        ));
    }
    let ok = queue
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'));
    if !ok {
        return Err(ValidationError::new(
            "queue",
            "Queue name contains invalid characters",
        ));
    }
    Ok(())
}

/// Retry backoff: a plain base delay, or a typed strategy. Delays travel as whole
/// milliseconds (at most one day).
///
/// ```
/// use std::time::Duration;
/// use autobatch_core::wire::Backoff;
/// let b = Backoff::Exponential(Duration::from_secs(1));
/// assert_eq!(b.delay(), Duration::from_millis(1000));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Backoff {
    /// A base delay (the server doubles it per attempt, with jitter).
    Delay(Duration),
    /// The same delay before every retry.
    Fixed(Duration),
    /// `delay · 2^attempts`, with jitter.
    Exponential(Duration),
}

impl Backoff {
    /// The base delay, whatever the strategy.
    pub fn delay(&self) -> Duration {
        match *self {
            Backoff::Delay(d) | Backoff::Fixed(d) | Backoff::Exponential(d) => d,
        }
    }

    /// The wire field range checks name for this strategy.
    fn field(&self) -> &'static str {
        match self {
            Backoff::Delay(_) => "backoff",
            _ => "backoff.delay",
        }
    }
}

/// Deduplication window for `unique_key`.
///
/// ```
/// use std::time::Duration;
/// use autobatch_core::wire::{Dedup, JobOptions};
/// let opts = JobOptions::new()
///     .unique_key("order-42")
///     .dedup(Dedup::new().ttl(Duration::from_secs(60)).extend(true));
/// assert_eq!(opts.dedup.unwrap().ttl, Some(Duration::from_secs(60)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Dedup {
    /// How long the key stays reserved (sent as whole milliseconds).
    pub ttl: Option<Duration>,
    /// Extend the window on a duplicate.
    pub extend: Option<bool>,
    /// Replace the existing job's data on a duplicate.
    pub replace: Option<bool>,
}

impl Dedup {
    /// No settings: the server's defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets [`ttl`](Self::ttl).
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// Sets [`extend`](Self::extend).
    pub fn extend(mut self, extend: bool) -> Self {
        self.extend = Some(extend);
        self
    }

    /// Sets [`replace`](Self::replace).
    pub fn replace(mut self, replace: bool) -> Self {
        self.replace = Some(replace);
        self
    }
}

/// Options of one job (protocol reference §7). Every field is optional; `None` leaves the
/// server's default. Time spans are [`Duration`]s, sent as whole milliseconds. Build with the
/// chained setters (the struct is `#[non_exhaustive]`: new options may come):
///
/// ```
/// use std::time::Duration;
/// use autobatch_core::wire::{Backoff, JobOptions};
/// let opts = JobOptions::new()
///     .priority(5)
///     .attempts(3)
///     .delay(Duration::from_secs(10))
///     .backoff(Backoff::Exponential(Duration::from_secs(1)))
///     .job_id("order-42")
///     .tags(["welcome", "email"])
///     .durable(true);
/// assert!(opts.validate().is_ok());
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct JobOptions {
    /// Priority, ±1 000 000; higher runs first.
    pub priority: Option<i64>,
    /// Delay before the job may run (at most 365 days).
    pub delay: Option<Duration>,
    /// Attempts before the job fails for good (`maxAttempts`, 1..1000).
    pub attempts: Option<i64>,
    /// Backoff between attempts.
    pub backoff: Option<Backoff>,
    /// Processing timeout (at most one day).
    pub timeout: Option<Duration>,
    /// Time to live (at most 365 days).
    pub ttl: Option<Duration>,
    /// Custom job id: becomes the job id and makes re-adding idempotent while the job lives
    /// (`jobId` in PUSH, `customId` in PUSHB).
    pub job_id: Option<String>,
    /// Deduplication key.
    pub unique_key: Option<String>,
    /// Deduplication window for [`unique_key`](Self::unique_key).
    pub dedup: Option<Dedup>,
    /// Ids that must complete first.
    pub depends_on: Vec<String>,
    /// Free-form tags.
    pub tags: Vec<String>,
    /// Group id.
    pub group_id: Option<String>,
    /// Last in, first out.
    pub lifo: Option<bool>,
    /// Stall timeout.
    pub stall_timeout: Option<Duration>,
    /// Creation timestamp, epoch ms (sent as float64).
    pub timestamp: Option<f64>,
    /// Remove the job when it completes.
    pub remove_on_complete: Option<bool>,
    /// Remove the job when it fails for good.
    pub remove_on_fail: Option<bool>,
    /// Commit to storage before the reply; bypasses the client batcher.
    pub durable: Option<bool>,
}

macro_rules! setter {
    ($(#[$doc:meta] $name:ident : $ty:ty),* $(,)?) => {$(
        #[$doc]
        pub fn $name(mut self, v: impl Into<$ty>) -> Self {
            self.$name = Some(v.into());
            self
        }
    )*};
}

impl JobOptions {
    /// No options: the server's defaults.
    pub fn new() -> Self {
        Self::default()
    }

    setter! {
        /// Sets [`priority`](Self::priority).
        priority: i64,
        /// Sets [`delay`](Self::delay).
        delay: Duration,
        /// Sets [`attempts`](Self::attempts).
        attempts: i64,
        /// Sets [`backoff`](Self::backoff).
        backoff: Backoff,
        /// Sets [`timeout`](Self::timeout).
        timeout: Duration,
        /// Sets [`ttl`](Self::ttl).
        ttl: Duration,
        /// Sets [`stall_timeout`](Self::stall_timeout).
        stall_timeout: Duration,
        /// Sets [`dedup`](Self::dedup), the window of [`unique_key`](Self::unique_key).
        dedup: Dedup,
        /// Sets [`timestamp`](Self::timestamp), epoch ms.
        timestamp: f64,
        /// Sets the custom [`job_id`](Self::job_id).
        job_id: String,
        /// Sets [`unique_key`](Self::unique_key).
        unique_key: String,
        /// Sets [`group_id`](Self::group_id).
        group_id: String,
        /// Sets [`lifo`](Self::lifo).
        lifo: bool,
        /// Sets [`remove_on_complete`](Self::remove_on_complete).
        remove_on_complete: bool,
        /// Sets [`remove_on_fail`](Self::remove_on_fail).
        remove_on_fail: bool,
        /// Sets [`durable`](Self::durable).
        durable: bool,
    }

    /// Sets [`tags`](Self::tags).
    pub fn tags<S: Into<String>>(mut self, tags: impl IntoIterator<Item = S>) -> Self {
        self.tags = tags.into_iter().map(Into::into).collect();
        self
    }

    /// Sets [`depends_on`](Self::depends_on): ids that must complete first.
    pub fn depends_on<S: Into<String>>(mut self, ids: impl IntoIterator<Item = S>) -> Self {
        self.depends_on = ids.into_iter().map(Into::into).collect();
        self
    }

    /// Whether this job must bypass the batcher and commit before its reply.
    pub fn is_durable(&self) -> bool {
        self.durable == Some(true)
    }

    /// Checks every option against bunqueue's ranges; the first problem wins.
    pub fn validate(&self) -> Result<(), ValidationError> {
        check_ranges(&RangeInput {
            priority: self.priority,
            delay: self.delay.map(millis),
            timeout: self.timeout.map(millis),
            attempts: self.attempts,
            ttl: self.ttl.map(millis),
            backoff: self.backoff.map(|b| (b.field(), millis(b.delay()))),
            timestamp: self.timestamp,
        })
    }
}

/// The range-checked options as the wire carries them (ms), before they become [`Duration`]s:
/// the broker-side decoder sees negatives a `Duration` cannot hold and must answer them as
/// bunqueue does.
pub(crate) struct RangeInput {
    pub priority: Option<i64>,
    pub delay: Option<i64>,
    pub timeout: Option<i64>,
    pub attempts: Option<i64>,
    pub ttl: Option<i64>,
    pub backoff: Option<(&'static str, i64)>,
    pub timestamp: Option<f64>,
}

/// bunqueue's range checks, in its order; the first problem wins.
pub(crate) fn check_ranges(o: &RangeInput) -> Result<(), ValidationError> {
    if let Some(p) = o.priority {
        range("priority", p, -MAX_PRIORITY, MAX_PRIORITY)?;
    }
    if let Some(d) = o.delay {
        range("delay", d, 0, MAX_DELAY_MS)?;
    }
    if let Some(t) = o.timeout {
        range("timeout", t, 0, MAX_TIMEOUT_MS)?;
    }
    if let Some(a) = o.attempts {
        range("maxAttempts", a, 1, MAX_ATTEMPTS)?;
    }
    if let Some(t) = o.ttl {
        range("ttl", t, 0, MAX_DELAY_MS)?;
    }
    if let Some((field, d)) = o.backoff {
        range(field, d, 0, MAX_TIMEOUT_MS)?;
    }
    if let Some(ts) = o.timestamp {
        if !ts.is_finite() {
            return Err(ValidationError::new(
                "timestamp",
                "timestamp must be a number",
            ));
        }
    }
    Ok(())
}

pub(crate) fn range(
    field: &'static str,
    v: i64,
    min: i64,
    max: i64,
) -> Result<(), ValidationError> {
    if v < min {
        return Err(ValidationError::new(
            field,
            format!("{field} must be at least {min}"),
        ));
    }
    if v > max {
        return Err(ValidationError::new(
            field,
            format!("{field} must be at most {max}"),
        ));
    }
    Ok(())
}

/// One job to add: its name, its data and its options.
#[derive(Debug, Clone, PartialEq)]
pub struct JobSpec {
    /// Job name, 1..256 characters. Always sent (see the legacy-envelope quirk, §6.1).
    pub name: String,
    /// The payload.
    pub data: Value,
    /// Options.
    pub opts: JobOptions,
}

impl JobSpec {
    /// A job with default options.
    pub fn new(name: impl Into<String>, data: Value) -> Self {
        JobSpec {
            name: name.into(),
            data,
            opts: JobOptions::default(),
        }
    }

    /// Sets the options.
    pub fn with_options(mut self, opts: JobOptions) -> Self {
        self.opts = opts;
        self
    }

    /// Checks the job as the server will: name, data size and serialisability, options.
    pub fn validate(&self) -> Result<(), ValidationError> {
        let chars = self.name.chars().count();
        if chars == 0 || chars > MAX_NAME_CHARS {
            return Err(ValidationError::new(
                "name",
                "Job name must be a non-empty string of at most 256 characters",
            ));
        }
        validate_data(&self.data)?;
        self.opts.validate()
    }
}

/// Checks job data: JSON-serialisable (no BigInt) and at most 10 MiB once stringified.
pub fn validate_data(data: &Value) -> Result<(), ValidationError> {
    if data.contains_bigint() {
        return Err(ValidationError::new(
            "data",
            "Job data must be JSON serializable",
        ));
    }
    // Cheap bound first: JSON is at most ~6 chars a MessagePack byte (a control character
    // escapes to \u00XX); only data near the limit pays for the exact count.
    if approx_value_size(data) * 6 > MAX_DATA_JSON_LEN
        && data.json_len(MAX_DATA_JSON_LEN) > MAX_DATA_JSON_LEN
    {
        return Err(ValidationError::new(
            "data",
            "Job data too large (max 10MB)",
        ));
    }
    Ok(())
}

/// An upper-ish estimate of a value's MessagePack size, without encoding it.
pub(crate) fn approx_value_size(v: &Value) -> usize {
    match v {
        Value::Nil | Value::Bool(_) => 1,
        Value::Undefined => 3,
        Value::Int(_) | Value::F64(_) | Value::BigInt(_) => 9,
        Value::Str(s) => s.len() + 5,
        Value::Raw(raw) => raw.as_bytes().len(),
        Value::Bin(b) | Value::Ext(_, b) => b.len() + 6,
        Value::Array(a) => 5 + a.iter().map(approx_value_size).sum::<usize>(),
        Value::Map(m) => {
            5 + m
                .iter()
                .map(|(k, v)| approx_value_size(k) + approx_value_size(v))
                .sum::<usize>()
        }
    }
}

/// A job as the server hands it to a worker (PULL/PULLB) or returns it (GetJob).
///
/// Read leniently, as the protocol reference advises: numbers from ints or floats, `undefined`
/// as absent, unknown keys ignored.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct Job {
    /// Job id (server ids are UUIDv7 text; a numeric id is turned into its decimal text).
    pub id: String,
    /// Queue name.
    pub queue: String,
    /// Job name.
    pub name: String,
    /// Payload.
    pub data: Value,
    /// Priority.
    pub priority: i64,
    /// Attempts made so far.
    pub attempts: i64,
    /// Attempts allowed.
    pub max_attempts: i64,
    /// Creation time, epoch ms.
    pub created_at: f64,
    /// Earliest run time, epoch ms.
    pub run_at: f64,
    /// Present on GetJob replies: the job's state.
    pub state: Option<JobState>,
    /// Present on GetJob replies for completed jobs.
    pub returnvalue: Option<Value>,
    /// Present on GetJob replies for failed jobs.
    pub failed_reason: Option<String>,
}

impl Job {
    /// A job record with these identifiers and data, and everything else zero or absent (the
    /// struct is `#[non_exhaustive]`: set the other public fields after).
    ///
    /// ```
    /// use autobatch_core::wire::{Job, JobState, Value};
    /// let mut job = Job::new("id-1", "emails", "send", Value::from("a@b"));
    /// job.state = Some(JobState::Waiting);
    /// assert_eq!(job.priority, 0);
    /// ```
    pub fn new(
        id: impl Into<String>,
        queue: impl Into<String>,
        name: impl Into<String>,
        data: Value,
    ) -> Job {
        Job {
            id: id.into(),
            queue: queue.into(),
            name: name.into(),
            data,
            ..Job::default()
        }
    }

    /// Reads a job map leniently. Fails only when there is no usable `id`.
    pub fn from_value(v: &Value) -> Option<Job> {
        let id = id_text(v.get("id")?)?;
        let num = |k: &str| v.get(k).and_then(Value::as_f64);
        let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
        Some(Job {
            id,
            queue: text("queue").unwrap_or_default(),
            name: text("name").unwrap_or_default(),
            data: v.get("data").cloned().unwrap_or(Value::Undefined),
            priority: num("priority").unwrap_or(0.0) as i64,
            attempts: num("attempts").unwrap_or(0.0) as i64,
            max_attempts: num("maxAttempts").unwrap_or(0.0) as i64,
            created_at: num("createdAt").unwrap_or(0.0),
            run_at: num("runAt").unwrap_or(0.0),
            state: text("state").map(JobState::from),
            returnvalue: v.get("returnvalue").filter(|r| !r.is_nullish()).cloned(),
            failed_reason: text("failedReason"),
        })
    }
}

/// A job's state, as GetState and GetJob report it.
///
/// A state this version does not know (a newer server's) is kept as
/// [`Unknown`](Self::Unknown) with its name; so is the server's own `"unknown"`, its answer for
/// an id it does not know.
///
/// ```
/// use autobatch_core::wire::JobState;
/// assert_eq!(JobState::from("waiting-children"), JobState::WaitingChildren);
/// assert_eq!(JobState::Completed.as_str(), "completed");
/// assert_eq!(JobState::from("paused"), JobState::Unknown("paused".into()));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum JobState {
    /// `waiting`: ready to run.
    Waiting,
    /// `prioritized`: ready to run, ordered by priority.
    Prioritized,
    /// `delayed`: waiting for its delay or a retry backoff.
    Delayed,
    /// `active`: a worker holds it.
    Active,
    /// `completed`.
    Completed,
    /// `failed`: failed for good.
    Failed,
    /// `waiting-children`: waiting for the jobs it depends on.
    WaitingChildren,
    /// Any other state name, as sent (`unknown` for an id the server does not know).
    Unknown(String),
}

impl JobState {
    /// The state's name on the wire.
    pub fn as_str(&self) -> &str {
        match self {
            JobState::Waiting => "waiting",
            JobState::Prioritized => "prioritized",
            JobState::Delayed => "delayed",
            JobState::Active => "active",
            JobState::Completed => "completed",
            JobState::Failed => "failed",
            JobState::WaitingChildren => "waiting-children",
            JobState::Unknown(s) => s,
        }
    }
}

impl From<&str> for JobState {
    fn from(s: &str) -> Self {
        match s {
            "waiting" => JobState::Waiting,
            "prioritized" => JobState::Prioritized,
            "delayed" => JobState::Delayed,
            "active" => JobState::Active,
            "completed" => JobState::Completed,
            "failed" => JobState::Failed,
            "waiting-children" => JobState::WaitingChildren,
            other => JobState::Unknown(other.to_owned()),
        }
    }
}

impl From<String> for JobState {
    fn from(s: String) -> Self {
        match JobState::from(s.as_str()) {
            JobState::Unknown(_) => JobState::Unknown(s),
            known => known,
        }
    }
}

impl std::fmt::Display for JobState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An id as text: strings as they are, numbers (which the server allows) in decimal.
pub(crate) fn id_text(v: &Value) -> Option<String> {
    match v {
        Value::Str(s) => Some(s.clone()),
        Value::Int(i) => Some(i.to_string()),
        Value::F64(f) => Some(f.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_match_the_server() {
        let bad = |o: JobOptions| o.validate().unwrap_err().message;
        assert_eq!(
            bad(JobOptions::new().attempts(0)),
            "maxAttempts must be at least 1"
        );
        assert_eq!(
            bad(JobOptions::new().delay(Duration::from_millis(MAX_DELAY_MS as u64 + 1))),
            "delay must be at most 31536000000"
        );
        assert_eq!(
            bad(JobOptions::new().priority(1_000_001)),
            "priority must be at most 1000000"
        );
        let e = JobOptions::new()
            .priority(2_000_000)
            .validate()
            .unwrap_err()
            .in_batch(1);
        assert_eq!(e.to_string(), "jobs[1]: priority must be at most 1000000");
        assert_eq!(e.field, "priority");
    }

    #[test]
    fn names_and_data() {
        assert_eq!(
            JobSpec::new("", Value::Nil).validate().unwrap_err().field,
            "name"
        );
        assert!(JobSpec::new("x".repeat(256), Value::Nil).validate().is_ok());
        assert!(JobSpec::new("x".repeat(257), Value::Nil)
            .validate()
            .is_err());
        let big = Value::Str("a".repeat(MAX_DATA_JSON_LEN));
        assert_eq!(
            JobSpec::new("j", big).validate().unwrap_err().message,
            "Job data too large (max 10MB)"
        );
        let fits = Value::Str("a".repeat(MAX_DATA_JSON_LEN - 2));
        assert!(JobSpec::new("j", fits).validate().is_ok());
        let bigint = Value::map([("n", Value::BigInt(1))]);
        assert_eq!(
            JobSpec::new("j", bigint).validate().unwrap_err().message,
            "Job data must be JSON serializable"
        );
    }

    #[test]
    fn queue_names() {
        assert!(validate_queue_name("a-b_c.d:e").is_ok());
        assert_eq!(
            validate_queue_name("").unwrap_err().message,
            "Queue name is required"
        );
        assert!(validate_queue_name(&"q".repeat(257)).is_err());
        assert!(validate_queue_name("é").is_err());
    }
}
