//! Jobs as they travel: the job a producer adds ([`JobSpec`] with [`JobOptions`]), its
//! validation against bunqueue's limits, and the job record a worker pulls ([`Job`]).

use super::value::Value;

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
pub struct ValidationError {
    /// The wire name of the offending field (`queue`, `name`, `data`, `priority`, …).
    pub field: &'static str,
    /// What is wrong, in bunqueue's words.
    pub message: String,
}

impl ValidationError {
    fn new(field: &'static str, message: impl Into<String>) -> Self {
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

/// Retry backoff: a plain base delay, or a typed strategy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Backoff {
    /// A base delay in ms (the server doubles it per attempt, with jitter).
    Delay(i64),
    /// The same delay before every retry.
    Fixed(i64),
    /// `delay · 2^attempts`, with jitter.
    Exponential(i64),
}

impl Backoff {
    fn delay(&self) -> i64 {
        match *self {
            Backoff::Delay(d) | Backoff::Fixed(d) | Backoff::Exponential(d) => d,
        }
    }
}

/// Deduplication window for `unique_key`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Dedup {
    /// How long the key stays reserved, ms.
    pub ttl: Option<i64>,
    /// Extend the window on a duplicate.
    pub extend: Option<bool>,
    /// Replace the existing job's data on a duplicate.
    pub replace: Option<bool>,
}

/// Options of one job (protocol reference §7). Every field is optional; `None` leaves the
/// server's default. Build with the chained setters:
///
/// ```
/// use autobatch_core::wire::{Backoff, JobOptions};
/// let opts = JobOptions::new()
///     .priority(5)
///     .attempts(3)
///     .backoff(Backoff::Exponential(1000))
///     .job_id("order-42")
///     .durable(true);
/// assert!(opts.validate().is_ok());
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
pub struct JobOptions {
    /// Priority, ±1 000 000; higher runs first.
    pub priority: Option<i64>,
    /// Delay before the job may run, ms (at most 365 days).
    pub delay: Option<i64>,
    /// Attempts before the job fails for good (`maxAttempts`, 1..1000).
    pub attempts: Option<i64>,
    /// Backoff between attempts.
    pub backoff: Option<Backoff>,
    /// Processing timeout, ms (at most one day).
    pub timeout: Option<i64>,
    /// Time to live, ms (at most 365 days).
    pub ttl: Option<i64>,
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
    /// Stall timeout, ms.
    pub stall_timeout: Option<i64>,
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
        /// Sets [`delay`](Self::delay) in ms.
        delay: i64,
        /// Sets [`attempts`](Self::attempts).
        attempts: i64,
        /// Sets [`backoff`](Self::backoff).
        backoff: Backoff,
        /// Sets [`timeout`](Self::timeout) in ms.
        timeout: i64,
        /// Sets [`ttl`](Self::ttl) in ms.
        ttl: i64,
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

    /// Whether this job must bypass the batcher and commit before its reply.
    pub fn is_durable(&self) -> bool {
        self.durable == Some(true)
    }

    /// Checks every option against bunqueue's ranges; the first problem wins.
    pub fn validate(&self) -> Result<(), ValidationError> {
        if let Some(p) = self.priority {
            range("priority", p, -MAX_PRIORITY, MAX_PRIORITY)?;
        }
        if let Some(d) = self.delay {
            range("delay", d, 0, MAX_DELAY_MS)?;
        }
        if let Some(t) = self.timeout {
            range("timeout", t, 0, MAX_TIMEOUT_MS)?;
        }
        if let Some(a) = self.attempts {
            range("maxAttempts", a, 1, MAX_ATTEMPTS)?;
        }
        if let Some(t) = self.ttl {
            range("ttl", t, 0, MAX_DELAY_MS)?;
        }
        if let Some(b) = self.backoff {
            let field = match b {
                Backoff::Delay(_) => "backoff",
                _ => "backoff.delay",
            };
            range(field, b.delay(), 0, MAX_TIMEOUT_MS)?;
        }
        if let Some(ts) = self.timestamp {
            if !ts.is_finite() {
                return Err(ValidationError::new(
                    "timestamp",
                    "timestamp must be a number",
                ));
            }
        }
        Ok(())
    }
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

    /// The exact number of bytes this job takes as one item of a PUSHB: its name, its data and
    /// every option the encoder writes, keys and MessagePack headers included.
    ///
    /// The producer declares this to its batcher, whose batches are capped at
    /// [`pushb_jobs_budget`](super::pushb_jobs_budget), so a PUSHB of valid jobs never
    /// exceeds the frame limit. Computed without encoding (a walk over the data, like
    /// [`validate`](Self::validate)).
    ///
    /// ```
    /// use autobatch_core::wire::{Command, JobOptions, JobSpec, Value};
    /// let job = JobSpec::new("email", Value::from("a@b")).with_options(JobOptions::new().priority(3));
    /// let mut alone = Vec::new();
    /// Command::PushB { queue: "q".into(), jobs: vec![] }.encode(None, &mut alone);
    /// let mut with_job = Vec::new();
    /// Command::PushB { queue: "q".into(), jobs: vec![job.clone()] }.encode(None, &mut with_job);
    /// assert_eq!(with_job.len() - alone.len(), job.pushb_len());
    /// ```
    pub fn pushb_len(&self) -> usize {
        super::command::pushb_item_len(self)
    }

    /// The encoded size in bytes as a PUSHB item: now exact, see [`pushb_len`](Self::pushb_len).
    #[deprecated(note = "use `pushb_len`, which is exact (it used to leave out options and keys)")]
    pub fn approx_size(&self) -> usize {
        self.pushb_len()
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
    /// Present on GetJob replies: the state name.
    pub state: Option<String>,
    /// Present on GetJob replies for completed jobs.
    pub returnvalue: Option<Value>,
    /// Present on GetJob replies for failed jobs.
    pub failed_reason: Option<String>,
}

impl Job {
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
            state: text("state"),
            returnvalue: v.get("returnvalue").filter(|r| !r.is_nullish()).cloned(),
            failed_reason: text("failedReason"),
        })
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
            bad(JobOptions::new().delay(MAX_DELAY_MS + 1)),
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
