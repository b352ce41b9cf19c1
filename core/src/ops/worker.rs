//! Worker registration, so the server lists the worker (`ListWorkers`, dashboards): register,
//! heartbeat, unregister. The server validates none of these fields.
//!
//! Each command's wire shape and bunqueue 2.9.5's behaviour: `docs/protocol/worker.md`.
//!
//! ```
//! use autobatch_core::ops::{Operation, RegisterWorker, WorkerHeartbeat};
//! let op = RegisterWorker::new("emails-worker", vec!["emails".into()], 10).worker_id("w-1");
//! assert_eq!(op.to_body().get("workerId").and_then(|v| v.as_str()), Some("w-1"));
//! assert_eq!(WorkerHeartbeat::NAME, "Heartbeat");
//! ```

use crate::wire::{ValidationError, Value};

use super::decl::kind::Required;
use super::decl::{js_number, kinds, op, put_data, record, Record, Undef, F64};
use super::read::{reply_field, req_opt_i64};
use super::Fields;

record! {
    /// What the server knows of a registered worker, as [`RegisterWorker`] answers.
    #[derive(Debug, Clone, PartialEq)]
    WorkerInfo {
        /// The worker's id.
        worker_id: String = "workerId" [required],
        /// Its name.
        name: String = "name",
        /// The queues it works.
        queues: Vec<String> = "queues",
        /// Its concurrency.
        concurrency: i64 = "concurrency",
        /// Host name it gave.
        hostname: Option<String> = "hostname" => Undef<String>,
        /// Process id it gave.
        pid: Option<i64> = "pid" => Undef<i64>,
        /// `active`, or `stale` when not seen for a while.
        status: String = "status" | "active".into(),
        /// When it registered, epoch ms.
        registered_at: f64 = "registeredAt" => F64,
        /// When it was last seen, epoch ms.
        last_seen: f64 = "lastSeen" => F64,
        /// Jobs it holds, per its last heartbeat.
        active_jobs: i64 = "activeJobs",
        /// Jobs it completed, per its last heartbeat.
        processed_jobs: i64 = "processedJobs",
        /// Jobs it failed, per its last heartbeat.
        failed_jobs: i64 = "failedJobs",
    }
    /// A record for worker `worker_id` named `name`, everything else empty.
    new(worker_id: impl Into<String>, name: impl Into<String>);
}

kinds! {
    /// A concurrency the server takes as sent, 1 when absent.
    OrOne: i64 = |r, k| Ok(req_opt_i64(r, k)?.unwrap_or(1));
    /// An epoch-ms time, written as msgpackr writes a JS number (a float64 beyond 32 bits).
    JsTime: Option<i64> = |r, k| req_opt_i64(r, k),
        put |time, key, fields| { fields.put_opt(key, time.map(|t| js_number(t as f64))); };
}

op! {
    /// `RegisterWorker`: tells the server a worker runs, so `ListWorkers` lists it. Registering
    /// the same `worker_id` again refreshes the record, so it may be replayed.
    RegisterWorker, Safe, Eq;
    /// Registers a worker `name` on `queues` with `concurrency`.
    new(name: impl Into<String>, queues: Vec<String>, concurrency: i64);
    fields {
        /// Worker name (bunqueue's worker uses the queue name).
        name: String = "name",
        /// Queues it works.
        queues: Vec<String> = "queues",
        /// Its concurrency.
        concurrency: i64 = "concurrency" => OrOne,
        /// A unique id; the server makes one when absent.
        worker_id: Option<String> = "workerId",
        /// Host name.
        hostname: Option<String> = "hostname",
        /// Process id.
        pid: Option<i64> = "pid",
        /// When it started, epoch ms.
        started_at: Option<i64> = "startedAt" => JsTime,
    }
    set { worker_id: impl Into<String>, hostname: impl Into<String>, pid: i64, started_at: i64 }
    reply: WorkerInfo = with(|r| WorkerInfo::read(reply_field(r, "data")?), write_worker);
    validate: |op: &RegisterWorker| if op.name.is_empty() {
        Err(ValidationError::new("name", "name is required"))
    } else {
        Ok(())
    };
}

fn write_worker(w: &WorkerInfo, fields: &mut Fields) {
    let mut data = w.encode();
    if let Value::Map(m) = &mut data {
        m.push((Value::from("currentJob"), Value::Nil));
    }
    fields.put("data", data);
}

op! {
    /// `Heartbeat`: a registered worker is alive, with its counters (what `ListWorkers` shows).
    /// Replayed: the counters are absolute.
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
    /// `UnregisterWorker`: the worker stops; `ListWorkers` stops listing it. Replayed: a
    /// refused replay (`Worker not found`) has the same outcome.
    UnregisterWorker, Safe, Eq;
    /// Unregisters worker `worker_id`.
    new(worker_id: impl Into<String>);
    fields {
        /// The worker's id.
        worker_id: String = "workerId" => Required,
    }
    reply: () = with(|_| Ok(()), |_: &(), f: &mut Fields| put_data(f, "removed", true));
}
