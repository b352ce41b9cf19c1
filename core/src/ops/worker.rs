//! Worker registration, so the server lists the worker (`ListWorkers`, dashboards): register,
//! heartbeat, unregister.
//!
//! bunqueue's own Worker registers on start, sends a `Heartbeat` with its counters every
//! `heartbeatInterval`, and unregisters on close; a worker not seen for 30 s is listed as
//! `stale`. None of these fields is validated by the server.
//!
//! Each command's wire shape and bunqueue 2.9.5's behaviour: `docs/protocol/worker.md`.
//!
//! ```
//! use autobatch_core::ops::{Operation, RegisterWorker, WorkerHeartbeat};
//! let op = RegisterWorker::new("emails-worker", vec!["emails".into()], 10).worker_id("w-1");
//! assert_eq!(op.to_body().get("workerId").and_then(|v| v.as_str()), Some("w-1"));
//! assert_eq!(WorkerHeartbeat::NAME, "Heartbeat");
//! ```

use crate::session::Replay;
use crate::wire::server::CommandError;
use crate::wire::{ProtocolError, ValidationError, Value};

use super::decl::kind::Required;
use super::decl::setters;
use super::decl::{op, put_data};
use super::read::{
    array, number, reply_field, reply_opt_str, reply_str, req_opt_i64, req_opt_str, req_strings,
    text,
};
use super::{Fields, Operation};

/// What the server knows of a registered worker, as [`RegisterWorker`] answers.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct WorkerInfo {
    /// The worker's id.
    pub worker_id: String,
    /// Its name.
    pub name: String,
    /// The queues it works.
    pub queues: Vec<String>,
    /// Its concurrency.
    pub concurrency: i64,
    /// Host name it gave.
    pub hostname: Option<String>,
    /// Process id it gave.
    pub pid: Option<i64>,
    /// `active`, or `stale` when not seen for a while.
    pub status: String,
    /// When it registered, epoch ms.
    pub registered_at: f64,
    /// When it was last seen, epoch ms.
    pub last_seen: f64,
    /// Jobs it holds, per its last heartbeat.
    pub active_jobs: i64,
    /// Jobs it completed, per its last heartbeat.
    pub processed_jobs: i64,
    /// Jobs it failed, per its last heartbeat.
    pub failed_jobs: i64,
}

impl WorkerInfo {
    /// A record for worker `worker_id` named `name`, everything else empty.
    pub fn new(worker_id: impl Into<String>, name: impl Into<String>) -> Self {
        WorkerInfo {
            worker_id: worker_id.into(),
            name: name.into(),
            queues: Vec::new(),
            concurrency: 0,
            hostname: None,
            pid: None,
            status: "active".into(),
            registered_at: 0.0,
            last_seen: 0.0,
            active_jobs: 0,
            processed_jobs: 0,
            failed_jobs: 0,
        }
    }
}

/// An integer as msgpackr writes a JS number: an integer within the 32-bit range, a float64
/// beyond it (epoch milliseconds are).
fn js_number(n: i64) -> Value {
    if (-(1i64 << 31)..(1i64 << 32)).contains(&n) {
        Value::from(n)
    } else {
        Value::F64(n as f64)
    }
}

fn int(v: &Value, field: &str) -> i64 {
    v.get(field).and_then(number).unwrap_or(0.0) as i64
}

/// `RegisterWorker`: tells the server a worker runs, so `ListWorkers` lists it. Registering
/// the same `worker_id` again refreshes the record, so it may be replayed (the driver
/// registers again after a reconnect anyway).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RegisterWorker {
    /// Worker name (bunqueue's worker uses the queue name).
    pub name: String,
    /// Queues it works.
    pub queues: Vec<String>,
    /// Its concurrency.
    pub concurrency: i64,
    /// A unique id; the server makes one when absent.
    pub worker_id: Option<String>,
    /// Host name.
    pub hostname: Option<String>,
    /// Process id.
    pub pid: Option<i64>,
    /// When it started, epoch ms.
    pub started_at: Option<i64>,
}

impl RegisterWorker {
    /// Registers a worker `name` on `queues` with `concurrency`.
    pub fn new(name: impl Into<String>, queues: Vec<String>, concurrency: i64) -> Self {
        RegisterWorker {
            name: name.into(),
            queues,
            concurrency,
            worker_id: None,
            hostname: None,
            pid: None,
            started_at: None,
        }
    }
}

setters! { RegisterWorker {
    worker_id: impl Into<String>, hostname: impl Into<String>, pid: i64, started_at: i64,
} }

impl Operation for RegisterWorker {
    const NAME: &'static str = "RegisterWorker";
    type Output = WorkerInfo;

    const REPLAY: Replay = Replay::Safe;

    fn write_fields(&self, fields: &mut Fields) {
        fields
            .put("name", self.name.as_str())
            .put("queues", array(self.queues.iter().map(String::as_str)))
            .put("concurrency", self.concurrency)
            .put_opt("workerId", self.worker_id.as_deref())
            .put_opt("hostname", self.hostname.as_deref())
            .put_opt("pid", self.pid)
            .put_opt("startedAt", self.started_at.map(js_number));
    }

    fn read_reply(reply: &Value) -> Result<WorkerInfo, ProtocolError> {
        let d = reply_field(reply, "data")?;
        Ok(WorkerInfo {
            worker_id: reply_str(d, "workerId")?,
            name: reply_opt_str(d, "name").unwrap_or_default(),
            queues: d
                .get("queues")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(text).collect())
                .unwrap_or_default(),
            concurrency: int(d, "concurrency"),
            hostname: reply_opt_str(d, "hostname"),
            pid: d.get("pid").and_then(number).map(|p| p as i64),
            status: reply_opt_str(d, "status").unwrap_or_else(|| "active".into()),
            registered_at: d.get("registeredAt").and_then(number).unwrap_or(0.0),
            last_seen: d.get("lastSeen").and_then(number).unwrap_or(0.0),
            active_jobs: int(d, "activeJobs"),
            processed_jobs: int(d, "processedJobs"),
            failed_jobs: int(d, "failedJobs"),
        })
    }

    fn validate(&self) -> Result<(), ValidationError> {
        if self.name.is_empty() {
            return Err(ValidationError::new("name", "name is required"));
        }
        Ok(())
    }
}
impl crate::wire::server::ServeOperation for RegisterWorker {
    fn read_request(request: &Value) -> Result<Self, CommandError> {
        Ok(RegisterWorker {
            name: req_opt_str(request, "name").unwrap_or_default(),
            queues: req_strings(request, "queues"),
            concurrency: req_opt_i64(request, "concurrency")?.unwrap_or(1),
            worker_id: req_opt_str(request, "workerId"),
            hostname: req_opt_str(request, "hostname"),
            pid: req_opt_i64(request, "pid")?,
            started_at: req_opt_i64(request, "startedAt")?,
        })
    }

    fn write_reply(w: &WorkerInfo, fields: &mut Fields) {
        let opt = |s: &Option<String>| s.as_deref().map_or(Value::Undefined, Value::from);
        fields.put(
            "data",
            Value::map([
                ("workerId", Value::from(w.worker_id.as_str())),
                ("name", Value::from(w.name.as_str())),
                ("queues", array(w.queues.iter().map(String::as_str))),
                ("concurrency", Value::from(w.concurrency)),
                ("hostname", opt(&w.hostname)),
                ("pid", w.pid.map_or(Value::Undefined, Value::from)),
                ("status", Value::from(w.status.as_str())),
                ("registeredAt", Value::from(w.registered_at)),
                ("lastSeen", Value::from(w.last_seen)),
                ("activeJobs", Value::from(w.active_jobs)),
                ("processedJobs", Value::from(w.processed_jobs)),
                ("failedJobs", Value::from(w.failed_jobs)),
                ("currentJob", Value::Nil),
            ]),
        );
    }
}

op! {
    /// `Heartbeat`: a registered worker is alive, with its counters (what `ListWorkers` shows).
    /// `Worker not found` when the id is not registered. It may be replayed: the counters are
    /// absolute.
    WorkerHeartbeat as "Heartbeat", Safe, Eq;
    /// A heartbeat of worker `id`, without counters.
    new(id: impl Into<String>);
    fields {
        /// The worker's id.
        id: String = "id" => Required,
        /// Jobs held now.
        active_jobs: Option<i64> = "activeJobs",
        /// Jobs completed so far.
        processed: Option<i64> = "processed",
        /// Jobs failed so far.
        failed: Option<i64> = "failed",
    }
    reply: () = with(|_| Ok(()), |_: &(), f: &mut Fields| put_data(f, "ok", true));
}

impl WorkerHeartbeat {
    /// With the worker's counters.
    pub fn counters(mut self, active_jobs: i64, processed: i64, failed: i64) -> Self {
        self.active_jobs = Some(active_jobs);
        self.processed = Some(processed);
        self.failed = Some(failed);
        self
    }
}

op! {
    /// `UnregisterWorker`: the worker stops; `ListWorkers` no longer lists it. `Worker not found`
    /// when the id is not registered (so a replay after a lost reply may be refused: it is marked
    /// safe all the same, the outcome being the same).
    UnregisterWorker, Safe, Eq;
    /// Unregisters worker `worker_id`.
    new(worker_id: impl Into<String>);
    fields {
        /// The worker's id.
        worker_id: String = "workerId" => Required,
    }
    reply: () = with(|_| Ok(()), |_: &(), f: &mut Fields| put_data(f, "removed", true));
}
