//! Jobs as they travel: the job a producer adds ([`JobSpec`] with [`JobOptions`]), its
//! validation against bunqueue's limits, and the job record a worker pulls ([`Job`]).

use std::time::Duration;

use super::child_failure::{ChildFailure, ChildFailures};
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

/// Debouncing: of the jobs added with the same `id` within `ttl`, only the last one is kept
/// (`debounceId` / `debounceTtl` on the wire).
///
/// ```
/// use std::time::Duration;
/// use autobatch_core::wire::{Debounce, JobOptions};
/// let opts = JobOptions::new().debounce(Debounce::new("search:alice").ttl(Duration::from_secs(2)));
/// assert_eq!(opts.debounce.unwrap().id, "search:alice");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Debounce {
    /// The debounce key.
    pub id: String,
    /// The window (sent as whole milliseconds); the server's default when absent.
    pub ttl: Option<Duration>,
}

impl Debounce {
    /// Debounces on `id`, with the server's default window.
    pub fn new(id: impl Into<String>) -> Self {
        Debounce {
            id: id.into(),
            ttl: None,
        }
    }

    /// Sets [`ttl`](Self::ttl).
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }
}

/// A repeating job (BullMQ's `repeat` option): when the job completes, the server schedules
/// its successor, every `every` or on the cron `pattern` (exactly one of the two).
///
/// For schedules that live on their own, independent of one job, prefer a job scheduler
/// ([`ops::CronUpsert`](crate::ops::CronUpsert)).
///
/// ```
/// use std::time::Duration;
/// use autobatch_core::wire::{JobOptions, Repeat};
/// let every = JobOptions::new().repeat(Repeat::every(Duration::from_secs(60)).limit(10));
/// assert!(every.validate().is_ok());
/// let cron = JobOptions::new().repeat(Repeat::pattern("0 * * * *").tz("Europe/Rome"));
/// assert!(cron.validate().is_ok());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Repeat {
    /// Interval between runs (sent as whole milliseconds; must be positive).
    pub every: Option<Duration>,
    /// Cron pattern (5 or 6 fields, or a shortcut such as `@hourly`).
    pub pattern: Option<String>,
    /// Most runs in all.
    pub limit: Option<i64>,
    /// Runs made so far (the server counts from 0 when absent).
    pub count: Option<i64>,
    /// First run not before this time, epoch ms.
    pub start_date: Option<i64>,
    /// No run after this time, epoch ms.
    pub end_date: Option<i64>,
    /// IANA time zone of the pattern.
    pub tz: Option<String>,
    /// Run once at once, then on schedule.
    pub immediately: Option<bool>,
    /// Time of the previous run, epoch ms (the next is computed from it).
    pub prev_millis: Option<i64>,
    /// Shift of every run, ms.
    pub offset: Option<i64>,
    /// Custom id of the repeated jobs (the job's own `job_id` is refused with `repeat`).
    pub job_id: Option<String>,
}

impl Repeat {
    /// Repeats every `every`.
    pub fn every(every: Duration) -> Self {
        Repeat {
            every: Some(every),
            ..Repeat::default()
        }
    }

    /// Repeats on the cron `pattern`.
    pub fn pattern(pattern: impl Into<String>) -> Self {
        Repeat {
            pattern: Some(pattern.into()),
            ..Repeat::default()
        }
    }

    /// Sets [`limit`](Self::limit).
    pub fn limit(mut self, limit: i64) -> Self {
        self.limit = Some(limit);
        self
    }

    /// Sets [`start_date`](Self::start_date), epoch ms.
    pub fn start_date(mut self, ms: i64) -> Self {
        self.start_date = Some(ms);
        self
    }

    /// Sets [`end_date`](Self::end_date), epoch ms.
    pub fn end_date(mut self, ms: i64) -> Self {
        self.end_date = Some(ms);
        self
    }

    /// Sets [`tz`](Self::tz).
    pub fn tz(mut self, tz: impl Into<String>) -> Self {
        self.tz = Some(tz.into());
        self
    }

    /// Sets [`immediately`](Self::immediately).
    pub fn immediately(mut self, immediately: bool) -> Self {
        self.immediately = Some(immediately);
        self
    }

    /// Sets [`offset`](Self::offset), ms.
    pub fn offset(mut self, offset: i64) -> Self {
        self.offset = Some(offset);
        self
    }

    /// Sets [`job_id`](Self::job_id).
    pub fn job_id(mut self, id: impl Into<String>) -> Self {
        self.job_id = Some(id.into());
        self
    }

    /// The `repeat` map as the official client sends it (absent keys left out).
    pub fn to_value(&self) -> Value {
        let mut m: Vec<(Value, Value)> = Vec::new();
        let mut put = |k: &str, v: Value| m.push((Value::from(k), v));
        if let Some(e) = self.every {
            put("every", Value::Int(millis(e)));
        }
        if let Some(p) = &self.pattern {
            put("pattern", Value::from(p.as_str()));
        }
        for (k, v) in [
            ("limit", self.limit),
            ("count", self.count),
            ("startDate", self.start_date),
            ("endDate", self.end_date),
        ] {
            if let Some(v) = v {
                put(k, Value::Int(v));
            }
        }
        if let Some(tz) = &self.tz {
            put("tz", Value::from(tz.as_str()));
        }
        if let Some(i) = self.immediately {
            put("immediately", Value::Bool(i));
        }
        for (k, v) in [("prevMillis", self.prev_millis), ("offset", self.offset)] {
            if let Some(v) = v {
                put(k, Value::Int(v));
            }
        }
        if let Some(id) = &self.job_id {
            put("jobId", Value::from(id.as_str()));
        }
        Value::Map(m)
    }

    /// Reads a `repeat` map in the server role, refusing what bunqueue refuses with its
    /// wording (`repeat.every must be a positive finite number`, …).
    pub fn from_value(v: &Value) -> Result<Repeat, ValidationError> {
        let num = |k: &'static str,
                   field: &'static str,
                   msg: &str|
         -> Result<Option<f64>, ValidationError> {
            match v.get(k) {
                None | Some(Value::Undefined) => Ok(None),
                Some(x) => match x.as_f64() {
                    Some(f) if f.is_finite() => Ok(Some(f)),
                    _ => Err(ValidationError::new(field, msg.to_owned())),
                },
            }
        };
        let date = |k: &'static str| {
            num(
                k,
                "repeat",
                &format!("repeat.{k} must be a finite timestamp"),
            )
            .map(|o| o.map(|f| f as i64))
        };
        let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
        let every = num(
            "every",
            "repeat",
            "repeat.every must be a positive finite number",
        )?;
        if every.is_some_and(|e| e <= 0.0) {
            return Err(ValidationError::new(
                "repeat",
                "repeat.every must be a positive finite number",
            ));
        }
        let r = Repeat {
            every: every.map(|e| from_millis(e as i64)),
            pattern: text("pattern"),
            limit: v.get("limit").and_then(Value::as_f64).map(|f| f as i64),
            count: v.get("count").and_then(Value::as_f64).map(|f| f as i64),
            start_date: date("startDate")?,
            end_date: date("endDate")?,
            tz: text("tz"),
            immediately: v.get("immediately").and_then(Value::as_bool),
            prev_millis: date("prevMillis")?,
            offset: date("offset")?,
            job_id: v.get("jobId").and_then(id_text),
        };
        // An every that rounds down to 0 ms was positive on the wire: keep it at 1 ms so
        // that re-encoding does not turn an accepted request into a refused one.
        Ok(Repeat {
            every: r.every.map(|d| d.max(Duration::from_millis(1))),
            ..r
        })
    }

    /// bunqueue's checks of a repeat definition (`validateRepeatJobInput`), in its order.
    fn validate(&self, opts: &JobOptions) -> Result<(), ValidationError> {
        let has_every = self.every.is_some();
        let has_pattern = self
            .pattern
            .as_deref()
            .is_some_and(|p| !p.trim().is_empty());
        if has_every == has_pattern {
            return Err(ValidationError::new(
                "repeat",
                "repeat requires exactly one of every or pattern",
            ));
        }
        if self.every.is_some_and(|e| millis(e) <= 0) {
            return Err(ValidationError::new(
                "repeat",
                "repeat.every must be a positive finite number",
            ));
        }
        // The cron pattern itself is checked by the server (its parser and time zones).
        if opts.job_id.as_deref().is_some_and(|id| !id.is_empty()) {
            return Err(ValidationError::new(
                "jobId",
                "repeat jobs cannot use JobOptions.jobId; use repeat.jobId instead",
            ));
        }
        if opts.parent_id.as_deref().is_some_and(|id| !id.is_empty()) || !opts.depends_on.is_empty()
        {
            return Err(ValidationError::new(
                "repeat",
                "repeat jobs cannot participate in parent or dependency relationships",
            ));
        }
        Ok(())
    }
}

/// Largest group priority (`group.priority` when a job has a `groupId`).
pub const MAX_GROUP_PRIORITY: i64 = 2_097_151;
/// Largest safe integer in JS (`Number.MAX_SAFE_INTEGER`).
pub const MAX_SAFE_INTEGER: i64 = 9_007_199_254_740_991;

/// bunqueue's `validateGroupId` for a present group id.
pub(crate) fn check_group_id(group: &str) -> Result<(), ValidationError> {
    if group.is_empty() {
        return Err(ValidationError::new(
            "groupId",
            "groupId must be a non-empty string",
        ));
    }
    // JS measures in UTF-16 code units.
    if group.encode_utf16().count() > MAX_NAME_CHARS {
        return Err(ValidationError::new(
            "groupId",
            "groupId must be at most 256 characters",
        ));
    }
    if group.contains('\0') {
        return Err(ValidationError::new(
            "groupId",
            "groupId must not contain NUL characters",
        ));
    }
    Ok(())
}

/// bunqueue's `validatePositiveSafeInteger`.
pub(crate) fn check_positive_safe(
    field: &'static str,
    name: &str,
    v: i64,
) -> Result<(), ValidationError> {
    if v <= 0 || v > MAX_SAFE_INTEGER {
        return Err(ValidationError::new(
            field,
            format!("{name} must be a positive safe integer"),
        ));
    }
    Ok(())
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
    /// Most jobs the group may hold (`groupMaxSize`; a positive integer): an add beyond it
    /// fails with `Group <id> has reached its maximum size of <n>`.
    pub group_max_size: Option<i64>,
    /// Repeat the job when it completes (see [`Repeat`]).
    pub repeat: Option<Repeat>,
    /// Keep only the last of the jobs added with the same key within a window.
    pub debounce: Option<Debounce>,
    /// Parent job id (`parentId`): the job is a child of that job, which must exist. (The TS
    /// client's `parent: {id, queue}` also adds `__parentId` / `__parentQueue` to the data;
    /// add them to the data yourself where a consumer reads them.)
    pub parent_id: Option<String>,
    /// Ids of this job's children (`childrenIds`, as bunqueue-client sends it; the TS client
    /// builds children with flows instead).
    pub children_ids: Vec<String>,
    /// Stack-trace lines kept per failure (server default 10).
    pub stack_trace_limit: Option<i64>,
    /// Log lines kept for the job.
    pub keep_logs: Option<i64>,
    /// Largest result size, bytes.
    pub size_limit: Option<i64>,
    /// What this child's failure for good does to its parent: the policies it carries, each
    /// a flag of its own on the wire (`failParentOnFailure`, …). Set one with
    /// [`on_failure`](Self::on_failure).
    pub on_failure: ChildFailures,
}

impl JobOptions {
    /// No options: the server's defaults.
    pub fn new() -> Self {
        Self::default()
    }

    crate::setters! {
        /// Sets [`priority`](Self::priority).
        priority: impl Into<i64>,
        /// Sets [`delay`](Self::delay).
        delay: impl Into<Duration>,
        /// Sets [`attempts`](Self::attempts).
        attempts: impl Into<i64>,
        /// Sets [`backoff`](Self::backoff).
        backoff: impl Into<Backoff>,
        /// Sets [`timeout`](Self::timeout).
        timeout: impl Into<Duration>,
        /// Sets [`ttl`](Self::ttl).
        ttl: impl Into<Duration>,
        /// Sets [`stall_timeout`](Self::stall_timeout).
        stall_timeout: impl Into<Duration>,
        /// Sets [`dedup`](Self::dedup), the window of [`unique_key`](Self::unique_key).
        dedup: impl Into<Dedup>,
        /// Sets [`timestamp`](Self::timestamp), epoch ms.
        timestamp: impl Into<f64>,
        /// Sets the custom [`job_id`](Self::job_id).
        job_id: impl Into<String>,
        /// Sets [`unique_key`](Self::unique_key).
        unique_key: impl Into<String>,
        /// Sets [`group_id`](Self::group_id).
        group_id: impl Into<String>,
        /// Sets [`lifo`](Self::lifo).
        lifo: impl Into<bool>,
        /// Sets [`remove_on_complete`](Self::remove_on_complete).
        remove_on_complete: impl Into<bool>,
        /// Sets [`remove_on_fail`](Self::remove_on_fail).
        remove_on_fail: impl Into<bool>,
        /// Sets [`durable`](Self::durable).
        durable: impl Into<bool>,
        /// Sets [`group_max_size`](Self::group_max_size).
        group_max_size: impl Into<i64>,
        /// Sets [`repeat`](Self::repeat).
        repeat: impl Into<Repeat>,
        /// Sets [`debounce`](Self::debounce).
        debounce: impl Into<Debounce>,
        /// Sets [`parent_id`](Self::parent_id).
        parent_id: impl Into<String>,
        /// Sets [`stack_trace_limit`](Self::stack_trace_limit).
        stack_trace_limit: impl Into<i64>,
        /// Sets [`keep_logs`](Self::keep_logs).
        keep_logs: impl Into<i64>,
        /// Sets [`size_limit`](Self::size_limit), bytes.
        size_limit: impl Into<i64>,
    }

    /// Adds `policy` to [`on_failure`](Self::on_failure): what this child's failure for good
    /// does to its parent. bunqueue keeps each policy as a flag of its own, so a job may carry
    /// several; the first in [`ChildFailure::ALL`]'s order acts.
    pub fn on_failure(mut self, policy: ChildFailure) -> Self {
        self.on_failure = self.on_failure.with(policy);
        self
    }

    /// Sets [`tags`](Self::tags).
    pub fn tags<S: Into<String>>(mut self, tags: impl IntoIterator<Item = S>) -> Self {
        self.tags = tags.into_iter().map(Into::into).collect();
        self
    }

    /// Sets [`children_ids`](Self::children_ids).
    pub fn children_ids<S: Into<String>>(mut self, ids: impl IntoIterator<Item = S>) -> Self {
        self.children_ids = ids.into_iter().map(Into::into).collect();
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

    /// Checks every option as bunqueue checks it, in its order (group id, ranges, group size,
    /// repeat); the first problem wins.
    pub fn validate(&self) -> Result<(), ValidationError> {
        if let Some(g) = &self.group_id {
            check_group_id(g)?;
        }
        check_ranges(&RangeInput {
            grouped: self.group_id.is_some(),
            priority: self.priority,
            delay: self.delay.map(millis),
            timeout: self.timeout.map(millis),
            attempts: self.attempts,
            ttl: self.ttl.map(millis),
            backoff: self.backoff.map(|b| (b.field(), millis(b.delay()))),
            timestamp: self.timestamp,
        })?;
        self.check_extras()
    }

    /// The checks bunqueue makes after the ranges (in the queue manager): group size, repeat.
    pub(crate) fn check_extras(&self) -> Result<(), ValidationError> {
        if let Some(n) = self.group_max_size {
            check_positive_safe("groupMaxSize", "group.maxSize", n)?;
        }
        if let Some(r) = &self.repeat {
            r.validate(self)?;
        }
        Ok(())
    }
}

/// The range-checked options as the wire carries them (ms), before they become [`Duration`]s:
/// the broker-side decoder sees negatives a `Duration` cannot hold and must answer them as
/// bunqueue does.
pub(crate) struct RangeInput {
    /// A `groupId` is set: the priority is a group priority (0..=2097151).
    pub grouped: bool,
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
        if o.grouped {
            if !(0..=MAX_GROUP_PRIORITY).contains(&p) {
                return Err(ValidationError::new(
                    "priority",
                    format!("group.priority must be between 0 and {MAX_GROUP_PRIORITY}"),
                ));
            }
        } else {
            range("priority", p, -MAX_PRIORITY, MAX_PRIORITY)?;
        }
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
    if let Some((field, d)) = o.backoff {
        range(field, d, 0, MAX_TIMEOUT_MS)?;
    }
    if let Some(t) = o.ttl {
        range("ttl", t, 0, MAX_DELAY_MS)?;
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
        self.validate_sized().map(|_| ())
    }

    /// [`validate`](Self::validate), returning the data's exact encoded length, learnt on the
    /// same walk (the session needs it to size the job in a PUSHB).
    pub(crate) fn validate_sized(&self) -> Result<usize, ValidationError> {
        check_job_name(&self.name)?;
        let len = validate_data_sized(&self.data)?;
        self.opts.validate()?;
        Ok(len)
    }
}

/// Checks a job's name: 1..=256 characters.
pub(crate) fn check_job_name(name: &str) -> Result<(), ValidationError> {
    let chars = name.chars().count();
    if chars == 0 || chars > MAX_NAME_CHARS {
        return Err(ValidationError::new(
            "name",
            "Job name must be a non-empty string of at most 256 characters",
        ));
    }
    Ok(())
}

/// Checks job data: JSON-serialisable (no BigInt) and at most 10 MiB once stringified.
pub fn validate_data(data: &Value) -> Result<(), ValidationError> {
    validate_data_sized(data).map(|_| ())
}

/// [`validate_data`], returning the data's exact encoded length (`value_len`).
fn validate_data_sized(data: &Value) -> Result<usize, ValidationError> {
    let mut walk = DataWalk::default();
    walk.visit(data);
    if walk.bigint {
        return Err(ValidationError::new(
            "data",
            "Job data must be JSON serializable",
        ));
    }
    // Cheap bound first: JSON is at most ~6 chars a MessagePack byte (a control character
    // escapes to \u00XX); only data near the limit pays for the exact count.
    if walk.approx * 6 > MAX_DATA_JSON_LEN && data.json_len(MAX_DATA_JSON_LEN) > MAX_DATA_JSON_LEN {
        return Err(ValidationError::new(
            "data",
            "Job data too large (max 10MB)",
        ));
    }
    Ok(walk.len)
}

/// What validating and sizing job data need, learnt in one walk instead of three (BigInt
/// search, size estimate, exact length): each added job is walked once.
#[derive(Debug, Default)]
struct DataWalk {
    /// The size estimate (`approx_value_size`, kept for tests).
    approx: usize,
    /// The exact encoded length (`size::value_len`).
    len: usize,
    /// [`Value::contains_bigint`].
    bigint: bool,
}

impl DataWalk {
    fn visit(&mut self, v: &Value) {
        use super::size::{array_header_len, int_len, map_header_len, str_len, value_len};
        let (approx, len) = match v {
            Value::Nil | Value::Bool(_) => (1, 1),
            Value::Undefined => (3, 3),
            Value::Int(i) => (9, int_len(*i)),
            Value::F64(_) => (9, 9),
            Value::BigInt(_) => {
                self.bigint = true;
                (9, 9)
            }
            Value::Str(s) => (s.len() + 5, str_len(s.len())),
            Value::Raw(raw) => {
                self.bigint |= v.contains_bigint();
                (raw.as_bytes().len(), raw.as_bytes().len())
            }
            Value::Bin(b) | Value::Ext(_, b) => (b.len() + 6, value_len(v)),
            Value::Array(items) => {
                for item in items {
                    self.visit(item);
                }
                (5, array_header_len(items.len()))
            }
            Value::Map(entries) => {
                for (k, v) in entries {
                    self.visit(k);
                    self.visit(v);
                }
                (5, map_header_len(entries.len()))
            }
        };
        self.approx += approx;
        self.len += len;
    }
}

/// An upper-ish estimate of a value's MessagePack size, without encoding it: the walk's
/// `approx`, kept apart so tests can check the walk against it.
#[cfg(test)]
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
    /// Priority: a number, which ChangePriority may have given a fraction.
    pub priority: f64,
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
    /// The parent job's id (`parentId`): set on a flow's children.
    pub parent_id: Option<String>,
    /// The children's ids (`childrenIds`): set on a flow's parents, in the order added.
    pub children_ids: Vec<String>,
    /// The last progress reported (`progress`: a number or any value a worker sent), when the
    /// server includes it (GetJob does; 0 until a worker reports).
    pub progress: Option<Value>,
}

impl Job {
    /// A job record with these identifiers and data, and everything else zero or absent (the
    /// struct is `#[non_exhaustive]`: set the other public fields after).
    ///
    /// ```
    /// use autobatch_core::wire::{Job, JobState, Value};
    /// let mut job = Job::new("id-1", "emails", "send", Value::from("a@b"));
    /// job.state = Some(JobState::Waiting);
    /// assert_eq!(job.priority, 0.0);
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
            priority: num("priority").unwrap_or(0.0),
            attempts: num("attempts").unwrap_or(0.0) as i64,
            max_attempts: num("maxAttempts").unwrap_or(0.0) as i64,
            created_at: num("createdAt").unwrap_or(0.0),
            run_at: num("runAt").unwrap_or(0.0),
            state: text("state").map(JobState::from),
            returnvalue: v.get("returnvalue").filter(|r| !r.is_nullish()).cloned(),
            failed_reason: text("failedReason"),
            parent_id: v.get("parentId").and_then(id_text),
            children_ids: match v.get("childrenIds") {
                Some(Value::Array(ids)) => ids.iter().filter_map(id_text).collect(),
                _ => Vec::new(),
            },
            progress: v.get("progress").filter(|p| !p.is_nullish()).cloned(),
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
