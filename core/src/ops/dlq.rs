//! The dead-letter queue: list, stats, retry, purge, remove, and its configuration.
//!
//! A job lands in its queue's DLQ when it fails for good (attempts exhausted, unrecoverable,
//! stalled too often, TTL expired…). None of these commands validates the queue name on the
//! server (an unknown queue has an empty DLQ), so none does here either.
//!
//! Each command's wire shape and bunqueue 2.9.5's behaviour: `docs/protocol/dlq.md`.
//!
//! ```
//! use autobatch_core::ops::{DlqConfig, DlqFilter, FailureReason, GetDlqConfig, Operation, RetryDlq};
//! use autobatch_core::wire::Value;
//! let filter = DlqFilter::new().reason(FailureReason::Stalled).limit(10);
//! assert!(RetryDlq::filtered("emails", filter).to_body().get("filter").is_some());
//! let reply = Value::map([("ok", Value::from(true)), ("config", Value::map([("autoRetry", Value::from(false))]))]);
//! assert_eq!(GetDlqConfig::read_reply(&reply).unwrap(), DlqConfig::default());
//! ```

use std::collections::BTreeMap;
use std::time::Duration;

use crate::wire::{Job, ProtocolError, ValidationError, Value};

use super::decl::{op, put_data, reply_data, setters, Field, Kind};
use super::read::{
    array, number, reply_array, reply_field, reply_opt, reply_u64, req_opt_i64, req_opt_str, text,
};
use super::Fields;

/// An optional number of milliseconds in a reply or config map.
pub(super) fn opt_f64(v: &Value, field: &str) -> Option<f64> {
    reply_opt(v, field).and_then(number)
}

/// An optional count in a reply or config map (negatives read as absent).
pub(super) fn opt_u64(v: &Value, field: &str) -> Option<u64> {
    opt_f64(v, field).and_then(|f| (f >= 0.0).then_some(f as u64))
}

/// A span of milliseconds as the wire carries it.
pub(super) fn ms(d: Duration) -> Value {
    Value::Int(crate::wire::millis(d))
}

/// A wire span (ms) as a [`Duration`] (negatives read as zero).
pub(super) fn span(f: f64) -> Duration {
    Duration::from_millis(if f > 0.0 { f as u64 } else { 0 })
}

/// An epoch-ms timestamp that may be `null`.
fn opt_time(v: Option<f64>) -> Value {
    v.map_or(Value::Nil, Value::F64)
}

/// Why a job failed for good, as bunqueue records it in the DLQ.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum FailureReason {
    /// `explicit_fail`: the worker failed it as unrecoverable.
    ExplicitFail,
    /// `max_attempts_exceeded`.
    MaxAttemptsExceeded,
    /// `timeout`: it ran longer than its `timeout`.
    Timeout,
    /// `stalled`: its worker stopped renewing it too often.
    Stalled,
    /// `ttl_expired`.
    TtlExpired,
    /// `worker_lost`.
    WorkerLost,
    /// `unknown`.
    Unknown,
    /// A reason this version does not know, as sent.
    Other(String),
}

impl FailureReason {
    /// The wire name.
    pub fn as_str(&self) -> &str {
        match self {
            FailureReason::ExplicitFail => "explicit_fail",
            FailureReason::MaxAttemptsExceeded => "max_attempts_exceeded",
            FailureReason::Timeout => "timeout",
            FailureReason::Stalled => "stalled",
            FailureReason::TtlExpired => "ttl_expired",
            FailureReason::WorkerLost => "worker_lost",
            FailureReason::Unknown => "unknown",
            FailureReason::Other(s) => s,
        }
    }
}

impl From<&str> for FailureReason {
    fn from(s: &str) -> Self {
        match s {
            "explicit_fail" => FailureReason::ExplicitFail,
            "max_attempts_exceeded" => FailureReason::MaxAttemptsExceeded,
            "timeout" => FailureReason::Timeout,
            "stalled" => FailureReason::Stalled,
            "ttl_expired" => FailureReason::TtlExpired,
            "worker_lost" => FailureReason::WorkerLost,
            "unknown" => FailureReason::Unknown,
            other => FailureReason::Other(other.to_owned()),
        }
    }
}

impl std::fmt::Display for FailureReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which DLQ entries a [`Dlq`] listing or a [`RetryDlq`] takes (all when empty).
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct DlqFilter {
    /// Only entries that failed for this reason.
    pub reason: Option<FailureReason>,
    /// Only entries that entered the DLQ at or before this time, epoch ms.
    pub older_than: Option<f64>,
    /// Only entries that entered the DLQ at or after this time, epoch ms.
    pub newer_than: Option<f64>,
    /// Only entries due for an automatic retry.
    pub retriable: Option<bool>,
    /// Only expired entries.
    pub expired: Option<bool>,
    /// Skip this many (after filtering).
    pub offset: Option<u64>,
    /// At most this many.
    pub limit: Option<u64>,
}

impl DlqFilter {
    /// No filter: every entry.
    pub fn new() -> Self {
        Self::default()
    }

    fn to_value(&self) -> Value {
        let mut f = Fields::default();
        f.put_opt("reason", self.reason.as_ref().map(|r| r.as_str()))
            .put_opt("olderThan", self.older_than)
            .put_opt("newerThan", self.newer_than)
            .put_opt("retriable", self.retriable)
            .put_opt("expired", self.expired)
            // The TS client sends the caller's object as is; this is the order of its docs.
            .put_opt("limit", self.limit)
            .put_opt("offset", self.offset);
        f.into_value()
    }

    fn from_value(v: &Value) -> DlqFilter {
        DlqFilter {
            reason: reply_opt(v, "reason")
                .and_then(Value::as_str)
                .map(FailureReason::from),
            older_than: opt_f64(v, "olderThan"),
            newer_than: opt_f64(v, "newerThan"),
            retriable: reply_opt(v, "retriable").and_then(Value::as_bool),
            expired: reply_opt(v, "expired").and_then(Value::as_bool),
            offset: opt_u64(v, "offset"),
            limit: opt_u64(v, "limit"),
        }
    }

    fn read(request: &Value) -> Option<DlqFilter> {
        match request.get("filter") {
            Some(f @ Value::Map(_)) => Some(DlqFilter::from_value(f)),
            _ => None,
        }
    }
}

setters! { DlqFilter {
    reason: FailureReason, older_than: f64, newer_than: f64, retriable: bool, expired: bool,
    offset: u64, limit: u64,
} }

/// One failed attempt of a DLQ entry.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct DlqAttempt {
    /// Attempt number.
    pub attempt: u64,
    /// When it started, epoch ms.
    pub started_at: f64,
    /// When it failed, epoch ms.
    pub failed_at: f64,
    /// Why.
    pub reason: FailureReason,
    /// The error message, if any.
    pub error: Option<String>,
    /// How long it ran, ms.
    pub duration: f64,
}

impl DlqAttempt {
    fn from_value(v: &Value) -> DlqAttempt {
        DlqAttempt {
            attempt: opt_u64(v, "attempt").unwrap_or(0),
            started_at: opt_f64(v, "startedAt").unwrap_or(0.0),
            failed_at: opt_f64(v, "failedAt").unwrap_or(0.0),
            reason: reply_opt(v, "reason")
                .and_then(Value::as_str)
                .map_or(FailureReason::Unknown, FailureReason::from),
            error: reply_opt(v, "error").and_then(text),
            duration: opt_f64(v, "duration").unwrap_or(0.0),
        }
    }

    fn to_value(&self) -> Value {
        Value::map([
            ("attempt", Value::from(self.attempt)),
            ("startedAt", Value::F64(self.started_at)),
            ("failedAt", Value::F64(self.failed_at)),
            ("reason", Value::from(self.reason.as_str())),
            ("error", self.error.clone().map_or(Value::Nil, Value::Str)),
            ("duration", Value::F64(self.duration)),
        ])
    }
}

/// One DLQ entry: the job and its failure history.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct DlqEntry {
    /// The job (as autobatch models it; its payload as sent).
    pub job: Job,
    /// When it entered the DLQ, epoch ms.
    pub entered_at: f64,
    /// Why it failed for good.
    pub reason: FailureReason,
    /// The last error message, if any.
    pub error: Option<String>,
    /// Every failed attempt.
    pub attempts: Vec<DlqAttempt>,
    /// Automatic retries so far.
    pub retry_count: u64,
    /// Last automatic retry, epoch ms.
    pub last_retry_at: Option<f64>,
    /// Next automatic retry, epoch ms.
    pub next_retry_at: Option<f64>,
    /// When the entry expires, epoch ms (never when absent).
    pub expires_at: Option<f64>,
}

impl DlqEntry {
    fn from_value(v: &Value) -> Option<DlqEntry> {
        Some(DlqEntry {
            job: Job::from_value(v.get("job")?)?,
            entered_at: opt_f64(v, "enteredAt").unwrap_or(0.0),
            reason: reply_opt(v, "reason")
                .and_then(Value::as_str)
                .map_or(FailureReason::Unknown, FailureReason::from),
            error: reply_opt(v, "error").and_then(text),
            attempts: reply_opt(v, "attempts")
                .and_then(Value::as_array)
                .map(|a| a.iter().map(DlqAttempt::from_value).collect())
                .unwrap_or_default(),
            retry_count: opt_u64(v, "retryCount").unwrap_or(0),
            last_retry_at: opt_f64(v, "lastRetryAt"),
            next_retry_at: opt_f64(v, "nextRetryAt"),
            expires_at: opt_f64(v, "expiresAt"),
        })
    }

    fn to_value(&self) -> Value {
        Value::map([
            ("job", self.job.to_value()),
            ("enteredAt", Value::F64(self.entered_at)),
            ("reason", Value::from(self.reason.as_str())),
            ("error", self.error.clone().map_or(Value::Nil, Value::Str)),
            (
                "attempts",
                Value::Array(self.attempts.iter().map(DlqAttempt::to_value).collect()),
            ),
            ("retryCount", Value::from(self.retry_count)),
            ("lastRetryAt", opt_time(self.last_retry_at)),
            ("nextRetryAt", opt_time(self.next_retry_at)),
            ("expiresAt", opt_time(self.expires_at)),
        ])
    }
}

/// A filter travels as one `filter` object; a request without a map there has none.
impl Field for Option<DlqFilter> {
    fn put(&self, key: &'static str, fields: &mut Fields) {
        fields.put_opt(key, self.as_ref().map(DlqFilter::to_value));
    }
    fn take(request: &Value, _: &'static str) -> Result<Self, ValidationError> {
        Ok(DlqFilter::read(request))
    }
}

/// A count the server takes as sent, negatives as 0.
struct Clamped;

impl Kind for Clamped {
    type T = Option<u64>;
    fn take(request: &Value, key: &'static str) -> Result<Option<u64>, ValidationError> {
        Ok(req_opt_i64(request, key)?.map(|n| n.max(0) as u64))
    }
}

/// An optional id the server ignores when empty.
struct NonEmpty;

impl Kind for NonEmpty {
    type T = Option<String>;
    fn take(request: &Value, key: &'static str) -> Result<Option<String>, ValidationError> {
        Ok(req_opt_str(request, key).filter(|s| !s.is_empty()))
    }
}

op! {
    /// `Dlq`: the entries of a queue's dead-letter queue, oldest first, optionally filtered
    /// ([`DlqFilter`]) or capped (`count`).
    Dlq, Safe;
    /// Every entry of `queue`'s DLQ.
    new(queue: impl Into<String>);
    fields {
        /// Queue name.
        queue: String = "queue",
        /// Which entries.
        filter: Option<DlqFilter> = "filter",
        /// At most this many entries.
        count: Option<u64> = "count" => Clamped,
    }
    set { count: u64, filter: DlqFilter }
    reply: Vec<DlqEntry> = with(read_entries, write_entries);
}

fn read_entries(reply: &Value) -> Result<Vec<DlqEntry>, ProtocolError> {
    let bad = || ProtocolError::BadField {
        field: "entries",
        problem: "an entry has no job with an id",
    };
    let entries = reply_array(reply, "entries")?.iter();
    entries
        .map(|e| DlqEntry::from_value(e).ok_or_else(bad))
        .collect()
}

fn write_entries(entries: &[DlqEntry], fields: &mut Fields) {
    let jobs = entries.iter().map(|e| e.job.to_value());
    fields
        .put("jobs", Value::Array(jobs.collect()))
        .put("entries", array(entries.iter().map(DlqEntry::to_value)));
}

/// What [`GetDlqStats`] reports.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct DlqStats {
    /// Entries in all.
    pub total: u64,
    /// Entries per failure reason (every reason bunqueue knows, zeros included).
    pub by_reason: BTreeMap<String, u64>,
    /// Entries per queue.
    pub by_queue: BTreeMap<String, u64>,
    /// Entries due for an automatic retry.
    pub pending_retry: u64,
    /// Expired entries not yet purged.
    pub expired: u64,
    /// Oldest entry's arrival, epoch ms.
    pub oldest_entry: Option<f64>,
    /// Newest entry's arrival, epoch ms.
    pub newest_entry: Option<f64>,
}

fn counts(v: Option<&Value>) -> BTreeMap<String, u64> {
    match v {
        Some(Value::Map(m)) => m
            .iter()
            .filter_map(|(k, v)| Some((text(k)?, number(v).map_or(0, |f| f.max(0.0) as u64))))
            .collect(),
        _ => BTreeMap::new(),
    }
}

fn count_map(m: &BTreeMap<String, u64>) -> Value {
    Value::Map(
        m.iter()
            .map(|(k, v)| (Value::from(k.as_str()), Value::from(*v)))
            .collect(),
    )
}

/// The reasons in bunqueue's order (that of its stats map), then any other.
fn reason_map(m: &BTreeMap<String, u64>) -> Value {
    const ORDER: [&str; 7] = [
        "explicit_fail",
        "max_attempts_exceeded",
        "timeout",
        "stalled",
        "ttl_expired",
        "worker_lost",
        "unknown",
    ];
    let known = ORDER
        .iter()
        .filter_map(|k| m.get(*k).map(|v| (Value::from(*k), Value::from(*v))));
    let others = m
        .iter()
        .filter(|(k, _)| !ORDER.contains(&k.as_str()))
        .map(|(k, v)| (Value::from(k.as_str()), Value::from(*v)));
    Value::Map(known.chain(others).collect())
}

op! {
    /// `GetDlqStats`: counts of a queue's DLQ by reason, pending retries, expired entries, and
    /// the oldest and newest arrival. A read: replayed.
    GetDlqStats, Safe, Eq;
    queue (unchecked);
    reply: DlqStats = with(read_stats, write_stats);
}

fn read_stats(reply: &Value) -> Result<DlqStats, ProtocolError> {
    let d = reply_data(reply)?;
    let s = reply_field(&d, "stats")?;
    Ok(DlqStats {
        total: reply_u64(s, "total")?,
        by_reason: counts(s.get("byReason")),
        by_queue: counts(s.get("byQueue")),
        pending_retry: opt_u64(s, "pendingRetry").unwrap_or(0),
        expired: opt_u64(s, "expired").unwrap_or(0),
        oldest_entry: opt_f64(s, "oldestEntry"),
        newest_entry: opt_f64(s, "newestEntry"),
    })
}

fn write_stats(s: &DlqStats, fields: &mut Fields) {
    let stats = Value::map([
        ("total", Value::from(s.total)),
        ("byReason", reason_map(&s.by_reason)),
        ("byQueue", count_map(&s.by_queue)),
        ("pendingRetry", Value::from(s.pending_retry)),
        ("expired", Value::from(s.expired)),
        ("oldestEntry", opt_time(s.oldest_entry)),
        ("newestEntry", opt_time(s.newest_entry)),
    ]);
    put_data(fields, "stats", stats);
}

op! {
    /// `RetryDlq`: moves DLQ entries back to their queue, as new waiting jobs: one job, the first
    /// `count`, those a [`DlqFilter`] selects, or all. Answers how many were retried.
    RetryDlq, NotSafe;
    /// Retries every entry of `queue`'s DLQ.
    all(queue: impl Into<String>);
    fields {
        /// Queue name.
        queue: String = "queue",
        /// Only this job.
        job_id: Option<String> = "jobId" => NonEmpty,
        /// Only the entries this selects (takes precedence over `job_id` and `count`).
        filter: Option<DlqFilter> = "filter",
        /// Only the first this many entries.
        count: Option<u64> = "count" => Clamped,
    }
    reply: u64 = field("count");
}

impl RetryDlq {
    /// Retries the entry of job `id`.
    pub fn job(queue: impl Into<String>, id: impl Into<String>) -> Self {
        RetryDlq {
            job_id: Some(id.into()),
            ..RetryDlq::all(queue)
        }
    }

    /// Retries the first `count` entries.
    pub fn first(queue: impl Into<String>, count: u64) -> Self {
        RetryDlq {
            count: Some(count),
            ..RetryDlq::all(queue)
        }
    }

    /// Retries the entries `filter` selects.
    pub fn filtered(queue: impl Into<String>, filter: DlqFilter) -> Self {
        RetryDlq {
            filter: Some(filter),
            ..RetryDlq::all(queue)
        }
    }
}

op! {
    /// `PurgeDlq`: removes every entry of a queue's DLQ for good; answers how many.
    PurgeDlq, NotSafe, Eq;
    queue (unchecked);
    reply: u64 = field("count");
}

/// An id the server takes as sent (absent: empty), left out when empty.
struct OmitEmpty;

impl Kind for OmitEmpty {
    type T = String;
    fn take(request: &Value, key: &'static str) -> Result<String, ValidationError> {
        Ok(req_opt_str(request, key).unwrap_or_default())
    }
    fn put(id: &String, key: &'static str, fields: &mut Fields) {
        if !id.is_empty() {
            fields.put(key, id.as_str());
        }
    }
}

op! {
    /// `RemoveDlqJob`: removes one job's DLQ entry for good, without retrying it; answers
    /// whether there was one.
    RemoveDlqJob, NotSafe, Eq;
    /// Removes job `id` from `queue`'s DLQ.
    new(queue: impl Into<String>, job_id: impl Into<String>);
    fields {
        /// Queue name.
        queue: String = "queue",
        /// The job's id.
        job_id: String = "jobId" => OmitEmpty,
    }
    reply: bool = data("removed");
}

/// A queue's DLQ settings, as [`GetDlqConfig`] reports them.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DlqConfig {
    /// Retry entries automatically.
    pub auto_retry: bool,
    /// Time between automatic retries.
    pub auto_retry_interval: Duration,
    /// Most automatic retries per entry.
    pub max_auto_retries: u64,
    /// How long an entry is kept (forever when `None`).
    pub max_age: Option<Duration>,
    /// Most entries kept per queue.
    pub max_entries: u64,
}

impl Default for DlqConfig {
    fn default() -> Self {
        DlqConfig {
            auto_retry: false,
            auto_retry_interval: Duration::from_secs(3600),
            max_auto_retries: 3,
            max_age: Some(Duration::from_secs(7 * 24 * 3600)),
            max_entries: 10_000,
        }
    }
}

impl DlqConfig {
    fn from_value(v: &Value) -> DlqConfig {
        let d = DlqConfig::default();
        DlqConfig {
            auto_retry: reply_opt(v, "autoRetry")
                .and_then(Value::as_bool)
                .unwrap_or(d.auto_retry),
            auto_retry_interval: opt_f64(v, "autoRetryInterval")
                .map_or(d.auto_retry_interval, span),
            max_auto_retries: opt_u64(v, "maxAutoRetries").unwrap_or(d.max_auto_retries),
            // `null` means "kept forever"; absent means the default.
            max_age: match v.get("maxAge") {
                Some(Value::Nil) => None,
                Some(x) => number(x).map(span).or(d.max_age),
                None => d.max_age,
            },
            max_entries: opt_u64(v, "maxEntries").unwrap_or(d.max_entries),
        }
    }

    fn to_value(&self) -> Value {
        Value::map([
            ("autoRetry", Value::from(self.auto_retry)),
            ("autoRetryInterval", ms(self.auto_retry_interval)),
            ("maxAutoRetries", Value::from(self.max_auto_retries)),
            ("maxAge", self.max_age.map_or(Value::Nil, ms)),
            ("maxEntries", Value::from(self.max_entries)),
        ])
    }
}

op! {
    /// `GetDlqConfig`: a queue's DLQ settings (bunqueue's defaults for a queue never
    /// configured). A read: replayed.
    GetDlqConfig, Safe, Eq;
    queue (unchecked);
    reply: DlqConfig = with(read_config, write_config);
}

fn read_config(reply: &Value) -> Result<DlqConfig, ProtocolError> {
    Ok(DlqConfig::from_value(reply_field(reply, "config")?))
}

fn write_config(config: &DlqConfig, fields: &mut Fields) {
    fields.put("config", config.to_value());
}

/// The DLQ settings to change with [`SetDlqConfig`]; the others keep their value.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct DlqConfigUpdate {
    /// Sets [`DlqConfig::auto_retry`].
    pub auto_retry: Option<bool>,
    /// Sets [`DlqConfig::auto_retry_interval`].
    pub auto_retry_interval: Option<Duration>,
    /// Sets [`DlqConfig::max_auto_retries`].
    pub max_auto_retries: Option<u64>,
    /// Sets [`DlqConfig::max_age`] (`Some(None)`: kept forever, sent as `null`).
    pub max_age: Option<Option<Duration>>,
    /// Sets [`DlqConfig::max_entries`].
    pub max_entries: Option<u64>,
}

impl DlqConfigUpdate {
    /// Changes nothing.
    pub fn new() -> Self {
        Self::default()
    }

    fn to_value(&self) -> Value {
        let mut f = Fields::default();
        f.put_opt("autoRetry", self.auto_retry)
            .put_opt("autoRetryInterval", self.auto_retry_interval.map(ms))
            .put_opt("maxAutoRetries", self.max_auto_retries)
            .put_opt("maxAge", self.max_age.map(|a| a.map_or(Value::Nil, ms)))
            .put_opt("maxEntries", self.max_entries);
        f.into_value()
    }

    fn from_value(v: &Value) -> DlqConfigUpdate {
        DlqConfigUpdate {
            auto_retry: v.get("autoRetry").and_then(Value::as_bool),
            auto_retry_interval: opt_f64(v, "autoRetryInterval").map(span),
            max_auto_retries: opt_u64(v, "maxAutoRetries"),
            max_age: match v.get("maxAge") {
                Some(Value::Nil) => Some(None),
                Some(x) => number(x).map(|f| Some(span(f))),
                None => None,
            },
            max_entries: opt_u64(v, "maxEntries"),
        }
    }

    /// `config` with this update applied.
    pub fn apply(&self, mut config: DlqConfig) -> DlqConfig {
        config.auto_retry = self.auto_retry.unwrap_or(config.auto_retry);
        config.auto_retry_interval = self
            .auto_retry_interval
            .unwrap_or(config.auto_retry_interval);
        config.max_auto_retries = self.max_auto_retries.unwrap_or(config.max_auto_retries);
        config.max_age = self.max_age.unwrap_or(config.max_age);
        config.max_entries = self.max_entries.unwrap_or(config.max_entries);
        config
    }
}

setters! { DlqConfigUpdate {
    auto_retry: bool, auto_retry_interval: Duration, max_auto_retries: u64,
    max_age: Option<Duration>, max_entries: u64,
} }

/// A settings update travels as one `config` object (absent: changes nothing).
impl Field for DlqConfigUpdate {
    fn put(&self, key: &'static str, fields: &mut Fields) {
        fields.put(key, self.to_value());
    }
    fn take(request: &Value, key: &'static str) -> Result<Self, ValidationError> {
        Ok(request.get(key).map(Self::from_value).unwrap_or_default())
    }
}

op! {
    /// `SetDlqConfig`: changes some of a queue's DLQ settings. Setting the same values twice
    /// is setting them once: replayed.
    SetDlqConfig, Safe, Eq;
    /// Applies `config` to `queue`.
    new(queue: impl Into<String>, config: DlqConfigUpdate);
    fields {
        /// Queue name.
        queue: String = "queue",
        /// What to change.
        config: DlqConfigUpdate = "config",
    }
}
