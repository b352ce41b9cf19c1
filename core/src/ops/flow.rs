//! Flows: parents and children added together (`PUSHF`), children's values and failures,
//! waiting for a job to finish (`WaitJob`).
//!
//! Each command's wire shape and bunqueue 2.9.5's behaviour: `docs/protocol/flow.md`.
//!
//! ```
//! use std::time::Duration;
//! use autobatch_core::ops::{FlowJob, Operation, PushFlow, WaitJob};
//! use autobatch_core::wire::Value;
//! let data = Value::map([("n", Value::from(2_i64))]);
//! let parent = FlowJob::new("p1", "reports", "merge", data.clone())
//!     .depends_on(vec!["c1".into()])
//!     .children(vec!["c1".into()]);
//! let child = FlowJob::new("c1", "parts", "part", data).parent("p1");
//! let op = PushFlow::new(vec![child, parent]);
//! assert!(op.validate().is_ok());
//! assert!(WaitJob::new("j1").timeout(Duration::from_secs(601)).validate().is_err());
//! ```

use std::time::Duration;

use crate::wire::{
    validate_queue_name, Backoff, Job, JobOptions, ProtocolError, ValidationError, Value,
};

use super::decl::kind::Required;
use super::decl::{fields, kinds, ms, op, put, put_data, read, setters, wires, Wire};
use super::read::{
    array, bad, reply_bool, reply_field, reply_opt, req_opt_f64, req_str, req_str_or_empty, text,
};
use super::Fields;

/// Most jobs in one flow (bunqueue's `MAX_FLOW_JOBS`).
pub const MAX_FLOW_JOBS: usize = 10_000;

/// Longest `WaitJob` wait the server accepts (10 minutes).
pub const MAX_WAIT_JOB: Duration = Duration::from_millis(600_000);

pub use crate::wire::ChildFailure;

/// One job of a [`PushFlow`], with its place in the graph already decided.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct FlowJob {
    /// The job's id, chosen by the client (bunqueue's client uses a UUIDv7).
    pub id: String,
    /// Queue name.
    pub queue: String,
    /// Job name.
    pub name: String,
    /// Job data: a map (bunqueue refuses anything else in a flow).
    pub data: Value,
    /// Options; `job_id` is sent as `customId`; `ttl`, `unique_key`, `dedup` and `depends_on`
    /// are not allowed in a flow.
    pub opts: JobOptions,
    /// The parent this job reports to, if any.
    pub parent_id: Option<String>,
    /// Jobs that must finish before this one runs.
    pub depends_on: Vec<String>,
    /// This job's children (whose values it may read).
    pub children_ids: Vec<String>,
    /// What a failure of this job does to its parent: in a flow, bunqueue allows one policy
    /// per job, and only on a job that has a parent.
    pub on_failure: Option<ChildFailure>,
}

impl FlowJob {
    /// A job with no links and default options.
    pub fn new(
        id: impl Into<String>,
        queue: impl Into<String>,
        name: impl Into<String>,
        data: Value,
    ) -> Self {
        FlowJob {
            id: id.into(),
            queue: queue.into(),
            name: name.into(),
            data,
            opts: JobOptions::new(),
            parent_id: None,
            depends_on: Vec::new(),
            children_ids: Vec::new(),
            on_failure: None,
        }
    }

    /// The `input` map, with every key bunqueue's TS client writes, in its order (absent ones
    /// as `undefined`), so a flow reads the same on the wire whichever client added it.
    fn input(&self) -> Value {
        let o = &self.opts;
        let opt = |v: Option<Value>| v.unwrap_or(Value::Undefined);
        let ids = |v: &[String]| opt((!v.is_empty()).then(|| array(v.iter().map(String::as_str))));
        let policy =
            |p: ChildFailure| opt((self.on_failure == Some(p)).then_some(Value::from(true)));
        let mut f = Fields::default();
        f.put("name", self.name.as_str())
            .put("data", self.data.clone())
            .put("priority", opt(o.priority.map(Value::from)))
            .put("delay", opt(o.delay.map(ms)))
            .put("maxAttempts", opt(o.attempts.map(Value::from)))
            .put("backoff", opt(o.backoff.as_ref().map(Backoff::put)))
            .put("timeout", opt(o.timeout.map(ms)))
            .put("customId", opt(o.job_id.as_deref().map(Value::from)))
            .put("dependsOn", ids(&self.depends_on))
            .put("childrenIds", ids(&self.children_ids))
            .put("parentId", opt(self.parent_id.as_deref().map(Value::from)))
            .put("lifo", opt(o.lifo.map(Value::from)))
            .put("removeOnComplete", o.remove_on_complete.unwrap_or(false))
            .put("removeOnFail", o.remove_on_fail.unwrap_or(false))
            .put("durable", opt(o.durable.map(Value::from)))
            .put("stallTimeout", opt(o.stall_timeout.map(ms)))
            .put("stackTraceLimit", Value::Undefined)
            .put("keepLogs", Value::Undefined)
            .put("sizeLimit", Value::Undefined);
        use ChildFailure::*;
        for p in [FailParent, RemoveDependency, ContinueParent, Ignore] {
            f.put(p.key(), policy(p));
        }
        f.put("timestamp", opt(o.timestamp.map(Value::F64)))
            .put("groupId", opt(o.group_id.as_deref().map(Value::from)))
            .put("groupMaxSize", Value::Undefined);
        if !o.tags.is_empty() {
            f.put("tags", ids(&o.tags));
        }
        f.into_value()
    }

    fn from_request(v: &Value) -> Result<FlowJob, ValidationError> {
        let input = v
            .get("input")
            .ok_or_else(|| ValidationError::new("jobs", "flow job input is required"))?;
        let strings = |k| Vec::<String>::get(input, k).unwrap_or_default();
        let mut opts = JobOptions::new();
        opts.priority = i64::get(input, "priority");
        opts.delay = Duration::get(input, "delay");
        opts.attempts = i64::get(input, "maxAttempts");
        opts.backoff = Backoff::get(input, "backoff");
        opts.timeout = Duration::get(input, "timeout");
        opts.job_id = String::get(input, "customId");
        opts.lifo = bool::get(input, "lifo");
        opts.remove_on_complete = bool::get(input, "removeOnComplete");
        opts.remove_on_fail = bool::get(input, "removeOnFail");
        opts.durable = bool::get(input, "durable");
        opts.stall_timeout = Duration::get(input, "stallTimeout");
        opts.timestamp = f64::get(input, "timestamp");
        opts.group_id = String::get(input, "groupId");
        opts.tags = strings("tags");
        Ok(FlowJob {
            id: req_str(v, "id")?,
            queue: req_str_or_empty(v, "queue"),
            name: req_str_or_empty(input, "name"),
            data: input.get("data").cloned().unwrap_or(Value::Undefined),
            opts,
            parent_id: String::get(input, "parentId"),
            depends_on: strings("dependsOn"),
            children_ids: strings("childrenIds"),
            on_failure: ChildFailure::ALL
                .into_iter()
                .find(|p| bool::get(input, p.key()) == Some(true)),
        })
    }

    /// bunqueue's own checks (`flowValidation.js`, `flowPlan.js`), with its messages.
    fn validate(&self) -> Result<(), ValidationError> {
        let ensure = |ok: bool, field: &'static str, message: &str| {
            ok.then_some(())
                .ok_or_else(|| ValidationError::new(field, message))
        };
        let id_ok = !self.id.is_empty() && !self.id.contains(':');
        let id_rule = "flow jobId must be non-empty and cannot contain a colon";
        ensure(id_ok, "id", id_rule)?;
        validate_queue_name(&self.queue)?;
        let name_ok = !self.name.is_empty() && self.name.chars().count() <= 256;
        let name_rule = "flow job name must be a non-empty string of at most 256 characters";
        ensure(name_ok, "name", name_rule)?;
        let data_rule = "flow job data must be an object";
        ensure(is_map(&self.data), "data", data_rule)?;
        let o = &self.opts;
        // The PUSHF input has no ttl; refusing beats dropping it silently.
        let atomic = "is not supported inside an atomic flow";
        ensure(o.ttl.is_none(), "ttl", &format!("ttl {atomic}"))?;
        let dedup_ok = o.unique_key.is_none() && o.dedup.is_none();
        ensure(dedup_ok, "dedup", &format!("deduplication {atomic}"))?;
        let owns = "FlowProducer owns dependencies; set FlowJob::depends_on instead";
        ensure(o.depends_on.is_empty(), "depends_on", owns)?;
        let one_policy = "a flow job has one failure policy; set FlowJob::on_failure instead";
        ensure(o.on_failure.is_empty(), "on_failure", one_policy)?;
        let priority_ok = o
            .priority
            .is_none_or(|p| (-1_000_000..=1_000_000).contains(&p));
        let priority_rule = "priority must be between -1000000 and 1000000";
        ensure(priority_ok, "priority", priority_rule)?;
        let attempts_ok = o.attempts.is_none_or(|a| (1..=1000).contains(&a));
        ensure(
            attempts_ok,
            "attempts",
            "attempts must be between 1 and 1000",
        )?;
        let policy_ok = self.on_failure.is_none() || self.parent_id.is_some();
        let policy_rule = "a flow failure policy requires a parent";
        ensure(policy_ok, "on_failure", policy_rule)
    }
}

setters! { FlowJob {
    options(opts) = JobOptions, parent(parent_id): impl Into<String>, depends_on = Vec<String>,
    children(children_ids) = Vec<String>, on_failure: ChildFailure,
} }

/// Whether `v` is a map, decoded or still encoded (payloads arrive as [`Value::Raw`]).
fn is_map(v: &Value) -> bool {
    match v {
        Value::Map(_) => true,
        // fixmap, map16, map32
        Value::Raw(r) => matches!(r.as_bytes().first(), Some(0x80..=0x8f | 0xde | 0xdf)),
        _ => false,
    }
}

fields! {
    /// A flow's jobs travel as an array of `{id, queue, input}`, which bunqueue requires.
    Vec<FlowJob>: |jobs, k, f| {
        let job = |j: &FlowJob| {
            let (id, queue) = (Value::from(j.id.as_str()), Value::from(j.queue.as_str()));
            Value::map([("id", id), ("queue", queue), ("input", j.input())])
        };
        f.put(k, array(jobs.iter().map(job)))
    }, |r, k| {
        let not_array = || ValidationError::new(k, "flow jobs must be an array");
        let jobs = r.get(k).and_then(Value::as_array).ok_or_else(not_array)?;
        jobs.iter().map(FlowJob::from_request).collect()
    };
}

op! {
    /// `PUSHF`: adds a whole flow graph in one command, all of it or nothing. The reply holds a
    /// snapshot of every job committed, in request order.
    PushFlow as "PUSHF", NotSafe;
    /// A flow of `jobs`.
    new(jobs: Vec<FlowJob>);
    fields {
        /// Every job of the graph, children before their parents (as bunqueue's client orders
        /// them; the server accepts any order).
        jobs: Vec<FlowJob> = "jobs",
    }
    reply: Vec<Job> = with(read_flow, write_flow);
    validate: |op: &PushFlow| {
        if op.jobs.len() > MAX_FLOW_JOBS {
            let message = format!("flow exceeds the {MAX_FLOW_JOBS} job limit");
            return Err(ValidationError::new("jobs", message));
        }
        let mut seen = std::collections::HashSet::new();
        op.jobs.iter().try_for_each(|job| {
            job.validate()?;
            if seen.insert(job.id.as_str()) {
                Ok(())
            } else {
                Err(ValidationError::new("id", format!("duplicate flow job id: {}", job.id)))
            }
        })
    };
}

fn read_flow(reply: &Value) -> Result<Vec<Job>, ProtocolError> {
    let bad = |problem| bad("data.jobs", problem);
    let jobs = reply_field(reply, "data")?
        .get("jobs")
        .and_then(Value::as_array);
    let jobs = jobs.ok_or(bad("missing"))?.iter();
    jobs.map(|j| Job::from_value(j).ok_or(bad("a job without an id")))
        .collect()
}

fn write_flow(jobs: &[Job], fields: &mut Fields) {
    let snapshot = |j: &Job| {
        Value::map([
            ("id", Value::from(j.id.as_str())),
            ("queue", Value::from(j.queue.as_str())),
            ("name", Value::from(j.name.as_str())),
            ("data", j.data.clone()),
        ])
    };
    put_data(fields, "jobs", array(jobs.iter().map(snapshot)));
}

wires! {
    /// The values of a parent's children: a map read in order as `(key, value)` pairs (absent:
    /// none).
    Vec<(String, Value)> => Vec<(String, Value)>: |v, k| Some(match reply_opt(v, k) {
        Some(Value::Map(m)) => m.iter().filter_map(|(n, x)| Some((text(n)?, x.clone()))).collect(),
        _ => Vec::new(),
    }), |x| Value::map(x.iter().map(|(k, v)| (k.as_str(), v.clone())));
}

op! {
    /// `GetChildrenValues`: the return values of a parent's completed children, keyed
    /// `"<queue>:<childId>"`, in the parent's `childrenIds` order. A read: replayed.
    GetChildrenValues, Safe, Eq;
    id;
    reply: Vec<(String, Value)> = with(
        |r: &Value| read(reply_opt(r, "data").unwrap_or(&Value::Nil), "values"),
        |v: &Vec<(String, Value)>, f: &mut Fields| put_data(f, "values", put(v))
    );
}

op! {
    /// `GetFailedChildrenValues`: the error texts of a parent's children that failed for good
    /// with [`ChildFailure::ContinueParent`] or [`ChildFailure::FailParent`]. A read: replayed.
    GetFailedChildrenValues, Safe, Eq;
    id;
    reply: Vec<(String, Value)> = field("values");
}

op! {
    /// `GetIgnoredChildrenFailures`: the failures of a parent's children that had
    /// [`ChildFailure::Ignore`] set, keyed by child. A read: replayed.
    GetIgnoredChildrenFailures, Safe, Eq;
    id;
    reply: Vec<(String, Value)> = field("values");
}

/// How a [`WaitJob`] ended.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum WaitOutcome {
    /// The job completed; its return value ([`Value::Undefined`] or `Nil` when there is none
    /// or it was not kept).
    Completed(Value),
    /// The wait timed out before the job completed (it may still be waiting, running, or
    /// have failed: `WaitJob` waits for completion only).
    TimedOut,
}

kinds! {
    /// A wait of at most [`MAX_WAIT_JOB`], validated with bunqueue's messages.
    WaitTimeout: Option<Duration> = |r, k| {
        let Some(ms) = req_opt_f64(r, k)? else {
            return Ok(None);
        };
        let refuse = |message| Err(ValidationError::new(k, message));
        if ms < 0.0 {
            return refuse("timeout must be at least 0");
        }
        if ms > 600_000.0 {
            return refuse("timeout must be at most 600000");
        }
        Ok(Some(Duration::from_millis(ms as u64)))
    }, check |timeout, k| match timeout {
        Some(t) if *t > MAX_WAIT_JOB => Err(ValidationError::new(k, "timeout must be at most 600000")),
        _ => Ok(()),
    };
}

op! {
    /// `WaitJob`: holds the reply until the job completes or `timeout` passes (server default
    /// 30 s, at most [`MAX_WAIT_JOB`]). A read: replayed.
    WaitJob, Safe, Eq;
    id;
    fields {
        /// How long the server waits (its default when absent: 30 s).
        timeout: Option<Duration> = "timeout" => WaitTimeout,
    }
    set { timeout: Duration }
    reply: WaitOutcome = with(read_wait, write_wait);
}

fn read_wait(reply: &Value) -> Result<WaitOutcome, ProtocolError> {
    Ok(if reply_bool(reply, "completed")? {
        WaitOutcome::Completed(reply.get("result").cloned().unwrap_or(Value::Undefined))
    } else {
        WaitOutcome::TimedOut
    })
}

fn write_wait(outcome: &WaitOutcome, fields: &mut Fields) {
    match outcome {
        WaitOutcome::Completed(v) => {
            fields.put("completed", true).put("result", v.clone());
        }
        WaitOutcome::TimedOut => {
            fields.put("completed", false);
        }
    }
}
