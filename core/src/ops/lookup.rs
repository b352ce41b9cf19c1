//! Read-only lookups (each replayed after a lost connection): jobs by state or custom id,
//! counts per priority, queue limits, deduplication keys, queues, workers, stats and metrics.
//!
//! Each command's wire shape and bunqueue 2.9.5's behaviour: `docs/protocol/lookup.md`.
//!
//! ```
//! use autobatch_core::ops::{GetJobs, Operation, Stats};
//! use autobatch_core::wire::{JobState, Value};
//! let op = GetJobs::new("emails").state(JobState::Delayed).limit(5);
//! assert_eq!(op.to_body().get("state"), Some(&Value::from("delayed")));
//! assert_eq!(GetJobs::new("emails").state(JobState::from("wating")).validate().unwrap_err().field, "state");
//! let reply = Value::map([("ok", Value::from(true)), ("stats", Value::map([("waiting", Value::Int(2))]))]);
//! assert_eq!(Stats::read_reply(&reply).unwrap().waiting, 2);
//! ```

use crate::wire::server::CommandError;
use crate::wire::{validate_queue_name, Job, JobState, ProtocolError, ValidationError, Value};

use super::decl::kind::{Queue, Required};
use super::decl::{fields, js_number, op, record, reply_data, wires};
use super::decl::{Count, Field, Record, Wire};
use super::read::{array, bad, number, reply_field, reply_opt, req_queue, text};
use super::Fields;

/// The state names bunqueue's job listings (GetJobs) and Clean understand: the seven of
/// [`JobState`] and `paused` (the ready jobs of a paused queue).
const LISTABLE: &str = "waiting, prioritized, delayed, active, completed, failed, \
                        waiting-children, paused";

/// Refuses a state name bunqueue does not know (the server answers nothing for one, which
/// hides a typo).
pub(super) fn validate_state(field: &'static str, state: &JobState) -> Result<(), ValidationError> {
    let state = state.as_str();
    if LISTABLE.split(", ").any(|s| s == state) {
        return Ok(());
    }
    let message = format!("{field} must be one of {LISTABLE}; got '{state}'");
    Err(ValidationError::new(field, message))
}

fields! {
    /// States travel as one name, several as an array, none as no key (every state).
    Vec<JobState>: |states, k, f| match states.as_slice() {
        [] => {}
        [one] => {
            f.put(k, one.as_str());
        }
        many => {
            f.put(k, array(many.iter().map(JobState::as_str)));
        }
    }, |r, k| Ok(match r.get(k) {
        Some(Value::Array(a)) => a.iter().filter_map(text).map(JobState::from).collect(),
        Some(v) => text(v).map(JobState::from).into_iter().collect(),
        None => Vec::new(),
    });
}

op! {
    /// `GetJobs`: a queue's jobs, optionally only those in some states, oldest first (or newest
    /// first with [`asc(false)`](Self::asc)), a page at a time.
    GetJobs, Safe, Eq;
    queue;
    fields {
        /// Only jobs in these states; every state when empty.
        states: Vec<JobState> = "state",
        /// Jobs to skip (server default 0).
        offset: Option<u64> = "offset",
        /// Most jobs to return (server default 100).
        limit: Option<u64> = "limit",
        /// Oldest first (`true`, the server's default) or newest first.
        asc: Option<bool> = "asc",
    }
    set { offset: u64, limit: u64, asc: bool }
    reply: Vec<Job> = field("jobs");
    validate: |op: &GetJobs| op.states.iter().try_for_each(|s| validate_state("state", s));
}

impl GetJobs {
    /// Adds `state` to the states asked for.
    pub fn state(mut self, state: JobState) -> Self {
        self.states.push(state);
        self
    }

    /// Asks for jobs in any of `states` (replacing earlier ones).
    pub fn states(mut self, states: impl IntoIterator<Item = JobState>) -> Self {
        self.states = states.into_iter().collect();
        self
    }
}

op! {
    /// `GetJobByCustomId`: the job added with this custom id (the `jobId` option), in any queue.
    /// Refused with `Job not found` when there is none.
    GetJobByCustomId, Safe, Eq;
    /// Looks up `custom_id`.
    new(custom_id: impl Into<String>);
    fields {
        /// The custom id.
        custom_id: String = "customId" => Required,
    }
    reply: Job = field("job");
}

op! {
    /// `GetCountsPerPriority`: how many ready jobs a queue holds at each priority.
    GetCountsPerPriority, Safe, Eq;
    queue;
    reply: PriorityCounts = flat;
}

wires! {
    /// Counts per priority: a map whose keys are the priorities as JS writes an object key
    /// (`5`, `1.5`: a priority set with ChangePriority may hold a fraction), every one
    /// required to read; read lowest priority first.
    Vec<(f64, u64)> => Vec<(f64, u64)>: |v, k| Self::read(v, k).ok(),
        |x| Value::map(x.iter().map(|(p, n)| (js_key(*p), Value::from(*n)))),
        strict |r, k| {
            let Value::Map(m) = reply_field(r, k)? else {
                return Err(bad(k, "not a map"));
            };
            let priority = |p: &Value| {
                text(p).and_then(|s| s.parse::<f64>().ok()).filter(|p| p.is_finite())
            };
            let entry = |(p, n): &(Value, Value)| -> Result<(f64, u64), ProtocolError> {
                let p = priority(p).ok_or(bad(k, "a key is not a priority"))?;
                Ok((p, number(n).ok_or(bad(k, "a count is not a number"))?.max(0.0) as u64))
            };
            let mut counts = m.iter().map(entry).collect::<Result<Vec<_>, _>>()?;
            counts.sort_by(|a, b| a.0.total_cmp(&b.0));
            Ok(counts)
        };
}

/// A priority as JS's `String(number)` writes it for the integers and plain fractions a
/// priority holds (`2`, `1.5`, `-0.25`).
fn js_key(p: f64) -> String {
    if p.fract() == 0.0 && p.abs() < 9_007_199_254_740_992.0 {
        format!("{}", p as i64)
    } else {
        format!("{p}")
    }
}

record! {
    /// The reply to [`GetCountsPerPriority`].
    #[derive(Debug, Clone, Default, PartialEq)]
    PriorityCounts {
        /// The queue asked about.
        queue: String = "queue",
        /// Each priority with its number of jobs, lowest priority first; priorities with no
        /// job are absent.
        counts: Vec<(f64, u64)> = "counts" [required],
    }
    /// Counts for `queue`.
    new(queue: impl Into<String>, counts: Vec<(f64, u64)>);
}

op! {
    /// `GetQueueLimits`: a queue's rate limit and remaining wait, its global concurrency limit
    /// and whether it is reached (the TS client's `getRateLimitTtl(maxJobs)`, `isMaxed()`).
    GetQueueLimits, Safe, Eq;
    queue;
    fields {
        /// Jobs about to be taken, for the token-bucket wait (`maxJobs`).
        max_jobs: Option<u64> = "maxJobs",
    }
    set { max_jobs: u64 }
    reply: QueueLimits = data("limits");
}

record! {
    /// A queue's rate limit: at most `max` jobs per `duration` ms.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    QueueRateLimit {
        /// Jobs per window.
        max: u64 = "max",
        /// Window, ms.
        duration: u64 = "duration",
    }
    /// `max` jobs per `duration` ms.
    new(max: u64, duration: u64);
}

record! {
    /// The reply to [`GetQueueLimits`].
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    QueueLimits (Default) {
        /// The rate limit, if one is set.
        rate_limit: Option<QueueRateLimit> = "rateLimit",
        /// Ms until jobs may be taken again under the rate limit: `-2` when there is no rate
        /// limit (Redis's convention for "no key", which BullMQ keeps), `0` when not limited now.
        rate_limit_ttl: i64 = "rateLimitTtl" | -2,
        /// The global concurrency limit, if one is set.
        concurrency_limit: Option<u64> = "concurrencyLimit" => Option<Count>,
        /// Whether every global concurrency slot is taken.
        maxed: bool = "maxed",
    }
}

op! {
    /// `GetDeduplicationJobId`: the id of the job that holds a deduplication key in a queue, or
    /// `None` when no job holds it.
    GetDeduplicationJobId, Safe, Eq;
    /// Asks who holds `deduplication_id` in `queue`.
    new(queue: impl Into<String>, deduplication_id: impl Into<String>);
    fields {
        /// Queue name.
        queue: String = "queue" => Queue,
        /// The deduplication key (the `deduplication.id` job option).
        deduplication_id: String = "deduplicationId",
    }
    reply: Option<String> = data("jobId");
}

op! {
    /// `ListQueues`: the names of every queue the server knows.
    ListQueues, Safe, Eq, Default;
    /// Lists every queue.
    new();
    fields {}
    reply: Vec<String> = field("queues");
}

op! {
    /// `ListWorkers`: every worker registered with the server (`RegisterWorker`, which the
    /// official Worker sends on start) and totals over them.
    ListWorkers, Safe, Eq, Default;
    /// Lists every worker.
    new();
    fields {}
    reply: WorkerList = data;
}

record! {
    /// One registered worker, as [`ListWorkers`] reports it.
    #[derive(Debug, Clone, Default, PartialEq)]
    ListedWorker {
        /// Worker id.
        id: String = "id" [required],
        /// Worker name.
        name: String = "name",
        /// Queues it takes jobs from.
        queues: Vec<String> = "queues",
        /// Jobs it runs at once.
        concurrency: u64 = "concurrency",
        /// Host it runs on, as it said.
        hostname: Option<String> = "hostname",
        /// Process id, as it said.
        pid: Option<i64> = "pid",
        /// `active`, or `stale` when not seen for the server's worker timeout (30 s by default).
        status: String = "status",
        /// Registration time, epoch ms.
        registered_at: f64 = "registeredAt",
        /// Last heartbeat, epoch ms.
        last_seen: f64 = "lastSeen",
        /// Jobs it holds now.
        active_jobs: u64 = "activeJobs",
        /// Jobs it completed.
        processed_jobs: u64 = "processedJobs",
        /// Jobs it failed.
        failed_jobs: u64 = "failedJobs",
        /// The job it is running, if it said.
        current_job: Option<String> = "currentJob",
        /// Ms since registration.
        uptime: f64 = "uptime",
    }
}

record! {
    /// Totals over the registered workers.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    WorkerTotals {
        /// Registered workers.
        total: u64 = "total",
        /// Of which active (not stale).
        active: u64 = "active",
        /// Jobs completed by workers since the server started.
        total_processed: u64 = "totalProcessed",
        /// Jobs failed by workers since the server started.
        total_failed: u64 = "totalFailed",
        /// Jobs held by workers now.
        active_jobs: u64 = "activeJobs",
        /// Sum of the active workers' concurrency.
        concurrency_slots: u64 = "concurrencySlots",
    }
}

record! {
    /// The reply to [`ListWorkers`].
    #[derive(Debug, Clone, Default, PartialEq)]
    WorkerList {
        /// Every registered worker.
        workers: Vec<ListedWorker> = "workers" [required],
        /// Totals.
        stats: WorkerTotals = "stats",
    }
}

op! {
    /// `Stats`: server-wide job totals and throughput.
    Stats, Safe, Eq, Default;
    /// Asks for the server's stats.
    new();
    fields {}
    reply: ServerStats = field("stats");
}

record! {
    /// The reply to [`Stats`]: every queue together.
    #[derive(Debug, Clone, Copy, Default, PartialEq)]
    ServerStats {
        /// Jobs ready to run.
        waiting: u64 = "waiting",
        /// Jobs held by workers.
        active: u64 = "active",
        /// Delayed jobs.
        delayed: u64 = "delayed",
        /// Jobs in the dead-letter queues.
        dlq: u64 = "dlq",
        /// Completed jobs kept.
        completed: u64 = "completed",
        /// Jobs failed since the server started.
        failed: u64 = "failed",
        /// Ms since the server started.
        uptime: f64 = "uptime",
        /// Recent pushes per second.
        push_per_sec: f64 = "pushPerSec",
        /// Recent pulls per second.
        pull_per_sec: f64 = "pullPerSec",
    }
}

/// Which finished jobs a queue's [`Metrics`] count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MetricsType {
    /// Completed jobs.
    Completed,
    /// Failed jobs.
    Failed,
}

impl MetricsType {
    /// The name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            MetricsType::Completed => "completed",
            MetricsType::Failed => "failed",
        }
    }
}

fields! {
    /// The per-queue form travels as `queue` and `type`; the server-wide one as neither.
    Option<(String, MetricsType)>: |form, _, f| if let Some((queue, kind)) = form {
        f.put("queue", queue.as_str()).put("type", kind.as_str());
    }, |r, _| {
        // bunqueue picks the form by `queue !== undefined || type !== undefined`.
        let absent = |k: &str| matches!(r.get(k), None | Some(Value::Undefined));
        if absent("queue") && absent("type") {
            return Ok(None);
        }
        if r.get("queue").and_then(Value::as_str).is_none() {
            return Err(ValidationError::new("queue", "Metrics queue is required"));
        }
        let queue = req_queue(r)?;
        let kind = match r.get("type").and_then(Value::as_str) {
            Some("completed") => MetricsType::Completed,
            Some("failed") => MetricsType::Failed,
            _ => {
                let message = "Metrics type must be 'completed' or 'failed'";
                return Err(ValidationError::new("type", message));
            }
        };
        Ok(Some((queue, kind)))
    };
}

op! {
    /// `Metrics`: server-wide totals ([`Metrics::server`]), or one queue's per-minute counts of
    /// completed or failed jobs ([`Metrics::queue`], the TS client's `getMetrics`).
    Metrics, Safe, Eq;
    /// Server-wide totals.
    server();
    fields {
        /// The queue and the kind of jobs, for the per-queue form; `None` for the server-wide one.
        queue: Option<(String, MetricsType)> = "queue",
        /// First data point (server default 0).
        start: Option<i64> = "start",
        /// Last data point, `-1` for the last one there is (server default -1).
        end: Option<i64> = "end",
    }
    reply: MetricsReply = with(read_metrics, write_metrics);
    validate: |op: &Metrics| op.queue.as_ref().map_or(Ok(()), |(q, _)| validate_queue_name(q));
    // The range is read before the form, as bunqueue reads it.
    request: |r: &Value| -> Result<Metrics, CommandError> {
        let (start, end) = (Field::take(r, "start")?, Field::take(r, "end")?);
        Ok(Metrics { queue: Field::take(r, "queue")?, start, end })
    };
}

impl Metrics {
    /// `queue`'s per-minute counts of `kind` jobs.
    pub fn queue(queue: impl Into<String>, kind: MetricsType) -> Self {
        Metrics {
            queue: Some((queue.into(), kind)),
            ..Metrics::server()
        }
    }

    /// Only the data points `start..=end` (`end` -1: to the last).
    pub fn range(mut self, start: i64, end: i64) -> Self {
        self.start = Some(start);
        self.end = Some(end);
        self
    }
}

record! {
    /// Server-wide totals, the reply to [`Metrics::server`].
    #[derive(Debug, Clone, Copy, Default, PartialEq)]
    ServerMetrics {
        /// Jobs pushed since start.
        total_pushed: u64 = "totalPushed",
        /// Jobs pulled since start.
        total_pulled: u64 = "totalPulled",
        /// Jobs completed since start.
        total_completed: u64 = "totalCompleted",
        /// Jobs failed since start.
        total_failed: u64 = "totalFailed",
        /// Mean of the push and pull latencies, ms.
        avg_latency_ms: f64 = "avgLatencyMs",
        /// Mean ack latency, ms.
        avg_processing_ms: f64 = "avgProcessingMs",
        /// Server heap in use, MiB.
        memory_usage_mb: f64 = "memoryUsageMb",
        /// Always 0 in 2.9.5.
        sqlite_size_mb: f64 = "sqliteSizeMb",
        /// Always 0 in 2.9.5.
        active_connections: u64 = "activeConnections",
    }
}

/// One queue's metrics, the reply to [`Metrics::queue`].
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct QueueMetrics {
    /// Jobs of that kind counted so far.
    pub count: u64,
    /// Time of the previous data point, epoch ms (0 when none).
    pub prev_ts: f64,
    /// The count at the previous data point.
    pub prev_count: u64,
    /// Jobs per minute, newest first, the range asked for.
    pub data: Vec<f64>,
    /// Data points returned (`data.len()` as the server counts it).
    pub points: u64,
}

/// The reply to [`Metrics`]: which one depends on the form asked for.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum MetricsReply {
    /// To [`Metrics::server`].
    Server(ServerMetrics),
    /// To [`Metrics::queue`].
    Queue(QueueMetrics),
}

fn read_metrics(reply: &Value) -> Result<MetricsReply, ProtocolError> {
    if let Some(m) = reply_opt(reply, "metrics") {
        return Ok(MetricsReply::Server(
            ServerMetrics::decode(m).unwrap_or_default(),
        ));
    }
    let d = reply_data(reply)?;
    let meta = d.get("meta").unwrap_or(&Value::Nil);
    let count = |v: &Value, k| Count::get(v, k).unwrap_or_default();
    let data = reply_data(&d)?;
    let data = data.as_array().ok_or(bad("data", "not an array"))?.iter();
    Ok(MetricsReply::Queue(QueueMetrics {
        count: count(meta, "count"),
        prev_ts: f64::get(meta, "prevTS").unwrap_or_default(),
        prev_count: count(meta, "prevCount"),
        data: data
            .map(|x| number(x).ok_or(bad("data", "an entry is not a number")))
            .collect::<Result<_, _>>()?,
        points: count(&d, "count"),
    }))
}

fn write_metrics(reply: &MetricsReply, fields: &mut Fields) {
    let q = match reply {
        MetricsReply::Server(m) => {
            fields.put("metrics", m.encode());
            return;
        }
        MetricsReply::Queue(q) => q,
    };
    let (count, prev) = (Value::from(q.count), Value::from(q.prev_count));
    let meta = [
        ("count", count),
        ("prevTS", js_number(q.prev_ts)),
        ("prevCount", prev),
    ];
    let data = array(q.data.iter().copied().map(js_number));
    let d = [
        ("meta", Value::map(meta)),
        ("data", data),
        ("count", Value::from(q.points)),
    ];
    fields.put("data", Value::map(d));
}

op! {
    /// `StorageStatus`: whether the server's storage is healthy (a full disk stops durable
    /// writes).
    StorageStatus, Safe, Eq, Default;
    /// Asks for the storage health.
    new();
    fields {}
    reply: StorageHealth = data;
}

record! {
    /// The reply to [`StorageStatus`].
    #[derive(Debug, Clone, Default, PartialEq)]
    StorageHealth {
        /// The disk is full: durable writes fail.
        disk_full: bool = "diskFull" [required],
        /// The last storage error, if any.
        error: Option<String> = "error",
        /// Since when the storage is unhealthy, epoch ms.
        since: Option<f64> = "since",
    }
}
