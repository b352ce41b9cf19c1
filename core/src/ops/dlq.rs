//! The dead-letter queue: list, stats, retry, purge, remove, and its configuration. The server
//! validates no queue name here (an unknown queue has an empty DLQ), so neither does the client.
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

use crate::wire::{Job, Value};

use super::decl::{fields, kinds, ms, op, options, read, record, span, wires, Record, F64};
use super::read::{array, number, reply_opt, req_map, req_opt_i64, req_opt_str, text};
use super::Fields;

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

/// Every reason bunqueue knows and its wire name, in bunqueue's order (that of its stats map).
const REASONS: [(FailureReason, &str); 7] = [
    (FailureReason::ExplicitFail, "explicit_fail"),
    (FailureReason::MaxAttemptsExceeded, "max_attempts_exceeded"),
    (FailureReason::Timeout, "timeout"),
    (FailureReason::Stalled, "stalled"),
    (FailureReason::TtlExpired, "ttl_expired"),
    (FailureReason::WorkerLost, "worker_lost"),
    (FailureReason::Unknown, "unknown"),
];

impl FailureReason {
    /// The wire name.
    pub fn as_str(&self) -> &str {
        match self {
            FailureReason::Other(s) => s,
            known => REASONS
                .iter()
                .find(|(r, _)| r == known)
                .map_or("unknown", |(_, s)| s),
        }
    }
}

impl From<&str> for FailureReason {
    fn from(s: &str) -> Self {
        let known = REASONS.iter().find(|(_, name)| *name == s);
        known.map_or_else(|| FailureReason::Other(s.to_owned()), |(r, _)| r.clone())
    }
}

impl std::fmt::Display for FailureReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

options! {
    /// Which DLQ entries a [`Dlq`] listing or a [`RetryDlq`] takes (all when empty).
    #[derive(Debug, Clone, PartialEq, Default)]
    DlqFilter {
        /// No filter: every entry.
        new();
        /// Only entries that failed for this reason.
        reason: FailureReason = "reason",
        /// Only entries that entered the DLQ at or before this time, epoch ms.
        older_than: f64 = "olderThan" => F64,
        /// Only entries that entered the DLQ at or after this time, epoch ms.
        newer_than: f64 = "newerThan" => F64,
        /// Only entries due for an automatic retry.
        retriable: bool = "retriable",
        /// Only expired entries.
        expired: bool = "expired",
        // The TS client sends the caller's object as is; this is the order of its docs.
        /// At most this many.
        limit: u64 = "limit",
        /// Skip this many (after filtering).
        offset: u64 = "offset",
    }
}

/// Counts per reason, in bunqueue's order of reasons.
struct Reasons;

/// An optional span where `null` means "never" (kept forever) and absent means the default.
struct Nullable;

wires! {
    FailureReason => FailureReason: |v, k| {
        reply_opt(v, k).and_then(Value::as_str).map(FailureReason::from)
    }, |x| Value::from(x.as_str());
    BTreeMap<String, u64> => BTreeMap<String, u64>: |v, k| Some(counts(v.get(k))),
        |x| count_map(x.iter().map(|(k, v)| (k.as_str(), *v)));
    Reasons => BTreeMap<String, u64>: |v, k| Some(counts(v.get(k))), |x| reason_map(x);
    Nullable => Option<Duration>: |v, k| match v.get(k) {
        Some(Value::Nil) => Some(None),
        Some(x) => number(x).map(|f| Some(span(f))),
        None => None,
    }, |x| x.map_or(Value::Nil, ms);
}

record! {
    /// One failed attempt of a DLQ entry.
    #[derive(Debug, Clone, PartialEq)]
    DlqAttempt {
        /// Attempt number.
        attempt: u64 = "attempt",
        /// When it started, epoch ms.
        started_at: f64 = "startedAt" => F64,
        /// When it failed, epoch ms.
        failed_at: f64 = "failedAt" => F64,
        /// Why.
        reason: FailureReason = "reason" | FailureReason::Unknown,
        /// The error message, if any.
        error: Option<String> = "error",
        /// How long it ran, ms.
        duration: f64 = "duration" => F64,
    }
}

record! {
    /// One DLQ entry: the job and its failure history.
    #[derive(Debug, Clone, PartialEq)]
    DlqEntry {
        /// The job (as autobatch models it; its payload as sent).
        job: Job = "job" [required],
        /// When it entered the DLQ, epoch ms.
        entered_at: f64 = "enteredAt" => F64,
        /// Why it failed for good.
        reason: FailureReason = "reason" | FailureReason::Unknown,
        /// The last error message, if any.
        error: Option<String> = "error",
        /// Every failed attempt.
        attempts: Vec<DlqAttempt> = "attempts",
        /// Automatic retries so far.
        retry_count: u64 = "retryCount",
        /// Last automatic retry, epoch ms.
        last_retry_at: Option<f64> = "lastRetryAt" => Option<F64>,
        /// Next automatic retry, epoch ms.
        next_retry_at: Option<f64> = "nextRetryAt" => Option<F64>,
        /// When the entry expires, epoch ms (never when absent).
        expires_at: Option<f64> = "expiresAt" => Option<F64>,
    }
}

fields! {
    /// A filter travels as one `filter` object; a request without a map there has none.
    Option<DlqFilter>: |d, k, f| f.put_opt(k, d.as_ref().map(DlqFilter::to_value)),
        |r, k| Ok(req_map(r, k).map(DlqFilter::from_value));
}

kinds! {
    /// A count the server takes as sent, negatives as 0.
    Clamped: Option<u64> = |r, k| Ok(req_opt_i64(r, k)?.map(|n| n.max(0) as u64));
    /// An optional id the server ignores when empty.
    NonEmpty: Option<String> = |r, k| Ok(req_opt_str(r, k).filter(|s| !s.is_empty()));
    /// An id the server takes as sent (absent: empty), left out when empty.
    OmitEmpty: String = |r, k| Ok(req_opt_str(r, k).unwrap_or_default()),
        put |id, key, fields| if !id.is_empty() {
            fields.put(key, id.as_str());
        };
}

op! {
    /// `Dlq`: the entries of a queue's dead-letter queue, oldest first, optionally filtered
    /// ([`DlqFilter`]) or capped (`count`).
    Dlq, Safe;
    queue (unchecked);
    fields {
        /// Which entries.
        filter: Option<DlqFilter> = "filter",
        /// At most this many entries.
        count: Option<u64> = "count" => Clamped,
    }
    set { count: u64, filter: DlqFilter }
    reply: Vec<DlqEntry> = with(|r| read(r, "entries"), write_entries);
}

fn write_entries(entries: &[DlqEntry], fields: &mut Fields) {
    let jobs = entries.iter().map(|e| e.job.to_value());
    fields
        .put("jobs", Value::Array(jobs.collect()))
        .put("entries", array(entries.iter().map(DlqEntry::encode)));
}

record! {
    /// What [`GetDlqStats`] reports.
    #[derive(Debug, Clone, PartialEq, Default)]
    DlqStats {
        /// Entries in all.
        total: u64 = "total" [required],
        /// Entries per failure reason (every reason bunqueue knows, zeros included).
        by_reason: BTreeMap<String, u64> = "byReason" => Reasons,
        /// Entries per queue.
        by_queue: BTreeMap<String, u64> = "byQueue",
        /// Entries due for an automatic retry.
        pending_retry: u64 = "pendingRetry",
        /// Expired entries not yet purged.
        expired: u64 = "expired",
        /// Oldest entry's arrival, epoch ms.
        oldest_entry: Option<f64> = "oldestEntry" => Option<F64>,
        /// Newest entry's arrival, epoch ms.
        newest_entry: Option<f64> = "newestEntry" => Option<F64>,
    }
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

fn count_map<'a>(counts: impl IntoIterator<Item = (&'a str, u64)>) -> Value {
    Value::map(counts.into_iter().map(|(k, v)| (k, Value::from(v))))
}

/// The reasons in bunqueue's order, then any other.
fn reason_map(m: &BTreeMap<String, u64>) -> Value {
    let known = REASONS.iter().filter_map(|(_, k)| Some((*k, *m.get(*k)?)));
    let others = m.iter().map(|(k, v)| (k.as_str(), *v));
    count_map(known.chain(others.filter(|(k, _)| !REASONS.iter().any(|(_, r)| r == k))))
}

op! {
    /// `GetDlqStats`: counts of a queue's DLQ by reason, pending retries, expired entries, and
    /// the oldest and newest arrival. A read: replayed.
    GetDlqStats, Safe, Eq;
    queue (unchecked);
    reply: DlqStats = data("stats");
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

record! {
    /// A queue's DLQ settings, as [`GetDlqConfig`] reports them.
    #[derive(Debug, Clone, PartialEq, Eq)]
    DlqConfig (Default) {
        /// Retry entries automatically.
        auto_retry: bool = "autoRetry" | false,
        /// Time between automatic retries.
        auto_retry_interval: Duration = "autoRetryInterval" | Duration::from_secs(3600),
        /// Most automatic retries per entry.
        max_auto_retries: u64 = "maxAutoRetries" | 3,
        /// How long an entry is kept (forever when `None`).
        max_age: Option<Duration> = "maxAge" => Nullable | Some(Duration::from_secs(7 * 24 * 3600)),
        /// Most entries kept per queue.
        max_entries: u64 = "maxEntries" | 10_000,
    }
}

op! {
    /// `GetDlqConfig`: a queue's DLQ settings (bunqueue's defaults for a queue never
    /// configured). A read: replayed.
    GetDlqConfig, Safe, Eq;
    queue (unchecked);
    reply: DlqConfig = field("config");
}

options! {
    /// The DLQ settings to change with [`SetDlqConfig`]; the others keep their value.
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    DlqConfigUpdate for DlqConfig {
        /// Changes nothing.
        new();
        /// Sets [`DlqConfig::auto_retry`].
        auto_retry: bool = "autoRetry",
        /// Sets [`DlqConfig::auto_retry_interval`].
        auto_retry_interval: Duration = "autoRetryInterval",
        /// Sets [`DlqConfig::max_auto_retries`].
        max_auto_retries: u64 = "maxAutoRetries",
        /// Sets [`DlqConfig::max_age`] (`Some(None)`: kept forever, sent as `null`).
        max_age: Option<Duration> = "maxAge" => Nullable,
        /// Sets [`DlqConfig::max_entries`].
        max_entries: u64 = "maxEntries",
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
