//! A job as bunqueue 2.9.5 shows it: its whole record (every add option, the run's times, the
//! timeline, the stack trace), in bunqueue's key order, built in one place for every reply that
//! carries a job record (GetJob, GetJobs, PULL, PULLB, PUSHF, Dlq).

use std::time::Duration;

use autobatch_core::wire::{Backoff, ChildFailure, Value};

use super::progress::JobExtras;
use super::Entry;
use crate::events::js_number;
use crate::store::{AddOptions, Stage};

use super::timeline::{Step, DEFAULT_STACK_TRACE_LIMIT};

fn ms(d: Duration) -> f64 {
    d.as_millis() as f64
}

fn opt_num(v: Option<f64>) -> Value {
    v.map_or(Value::Nil, js_number)
}

fn opt_int(v: Option<i64>) -> Value {
    v.map_or(Value::Nil, Value::from)
}

fn opt_str(v: Option<&str>) -> Value {
    v.map_or(Value::Nil, Value::from)
}

fn strings(v: &[String]) -> Value {
    Value::Array(v.iter().map(|s| Value::from(s.as_str())).collect())
}

/// The progress a record shows: the last a worker reported (0 until one does). bunqueue's
/// SQLite mode (`stored`) reads a completed job from its row, which its completion writes with
/// progress 100, whatever the worker reported.
fn shown_progress(e: &Entry, extras: Option<&JobExtras>, stored: bool) -> f64 {
    if stored && e.rec.state == Stage::Completed {
        return 100.0;
    }
    extras.map_or(0.0, |x| x.progress)
}

/// The job's whole record, bunqueue's 47 keys in its order; `stored`: in SQLite mode.
pub(super) fn record(
    e: &Entry,
    extras: Option<&JobExtras>,
    stored: bool,
) -> Vec<(&'static str, Value)> {
    let r = &e.rec;
    let run = &e.run;
    let default = AddOptions::default();
    let o = r.options.as_deref().unwrap_or(&default);
    let (backoff, backoff_config) = backoff_fields(r.backoff);
    let (parent, children) = match &e.flow {
        Some(l) => (l.parent.as_deref(), l.children.as_slice()),
        None => (None, &[][..]),
    };
    let policy = |p: ChildFailure| (p.key(), Value::from(o.on_failure.contains(p)));
    let last_heartbeat = if run.last_heartbeat > 0.0 {
        run.last_heartbeat
    } else {
        r.created_at
    };
    vec![
        ("id", Value::from(r.id.as_str())),
        ("queue", Value::from(r.queue.as_str())),
        ("name", Value::from(r.name.as_str())),
        ("data", r.data.clone()),
        ("createdAt", js_number(r.created_at)),
        ("runAt", js_number(r.run_at)),
        ("startedAt", opt_num(run.shown_started)),
        ("completedAt", opt_num(run.shown_completed)),
        ("attempts", Value::from(r.attempts)),
        ("backoff", backoff),
        ("backoffConfig", backoff_config),
        ("dependsOn", strings(&run.shown_depends)),
        ("childrenIds", strings(children)),
        ("childrenCompleted", Value::from(0i64)),
        ("tags", strings(&o.tags)),
        ("progress", js_number(shown_progress(e, extras, stored))),
        (
            "progressMessage",
            opt_str(extras.and_then(|x| x.message.as_deref())),
        ),
        (
            "stacktrace",
            run.stacktrace.as_deref().map_or(Value::Nil, strings),
        ),
        ("repeat", Value::Nil),
        ("durable", Value::from(r.durable)),
        ("lastHeartbeat", js_number(last_heartbeat)),
        ("stallCount", Value::from(run.stall_count as i64)),
        ("priority", js_number(r.priority)),
        ("lifo", Value::from(r.lifo)),
        ("maxAttempts", Value::from(r.max_attempts)),
        ("removeOnComplete", Value::from(r.remove_on_complete)),
        ("removeOnFail", Value::from(r.remove_on_fail)),
        ("ttl", opt_num(o.ttl)),
        ("timeout", opt_num(o.timeout)),
        ("uniqueKey", opt_str(r.unique_key.as_deref())),
        ("customId", opt_str(o.custom_id.as_deref())),
        ("parentId", opt_str(parent)),
        ("groupId", opt_str(o.group_id.as_deref())),
        ("stallTimeout", opt_num(o.stall_timeout)),
        (
            "stackTraceLimit",
            Value::from(o.stack_trace_limit.unwrap_or(DEFAULT_STACK_TRACE_LIMIT)),
        ),
        ("keepLogs", opt_int(o.keep_logs)),
        ("sizeLimit", opt_int(o.size_limit)),
        policy(ChildFailure::FailParent),
        policy(ChildFailure::RemoveDependency),
        policy(ChildFailure::ContinueParent),
        policy(ChildFailure::Ignore),
        ("deduplicationTtl", opt_num(o.dedup_ttl)),
        ("deduplicationExtend", Value::from(o.dedup_extend)),
        ("deduplicationReplace", Value::from(o.dedup_replace)),
        ("debounceId", opt_str(o.debounce_id.as_deref())),
        ("debounceTtl", opt_num(o.debounce_ttl)),
        ("timeline", timeline(&run.timeline)),
    ]
}

/// `backoff` (the delay, ms; bunqueue's 1000 when unset) and `backoffConfig` (the strategy's
/// map, for a fixed or exponential one).
fn backoff_fields(backoff: Option<Backoff>) -> (Value, Value) {
    let config = |kind: &str, d: Duration| {
        Value::map([("type", Value::from(kind)), ("delay", js_number(ms(d)))])
    };
    match backoff {
        None => (Value::from(1000i64), Value::Nil),
        Some(Backoff::Fixed(d)) => (js_number(ms(d)), config("fixed", d)),
        Some(Backoff::Exponential(d)) => (js_number(ms(d)), config("exponential", d)),
        Some(b) => (js_number(ms(b.delay())), Value::Nil),
    }
}

/// The job's timeline: each state it entered, when, and the error or attempt that came with it.
fn timeline(steps: &[Step]) -> Value {
    let step = |s: &Step| {
        let mut m = vec![
            ("state", Value::from(s.state)),
            ("timestamp", js_number(s.at)),
        ];
        if let Some(err) = &s.error {
            m.push((
                "error",
                err.as_deref().map_or(Value::Undefined, Value::from),
            ));
        }
        if let Some(a) = s.attempt {
            m.push(("attempt", Value::from(a)));
        }
        Value::map(m)
    };
    Value::Array(steps.iter().map(step).collect())
}

/// What a finished run left on the job's record: `returnvalue` and `failedReason`, each
/// `undefined` while there is none.
pub(super) fn outcome(e: &Entry) -> [(&'static str, Value); 2] {
    [
        (
            "returnvalue",
            e.rec.result.clone().unwrap_or(Value::Undefined),
        ),
        (
            "failedReason",
            e.rec
                .failed_reason
                .as_deref()
                .map_or(Value::Undefined, Value::from),
        ),
    ]
}
