//! A job's extras as SQLite mode keeps them across a restart (see `crate::queue::kept`):
//! read from its entry, and put back, its flow links with them.

use autobatch_core::ops::ChildFailure;
use autobatch_core::wire::Value;

use super::{update_op, Jobs, RunInfo};
use crate::queue::dlq::REASONS;
use crate::queue::flow::{Links, Waits};
use crate::queue::timeline::{self, Attempt, Step};
use crate::store::Stage;

impl Jobs {
    /// Job `id`'s extras as a restart keeps them (see the module docs), `None` without any.
    pub fn job_extras(&self, id: &str) -> Option<Value> {
        let e = self.map.get(id)?;
        let r = &e.run;
        let links = e.flow.as_deref();
        let has_links = links.is_some_and(|l| !l.is_empty() || l.policy.is_some());
        if r.timeout.is_none()
            && r.ttl.is_none()
            && r.stall_timeout.is_none()
            && r.group.is_none()
            && r.dlq.is_none()
            && r.stacktrace.is_none()
            && r.attempt_log.is_empty()
            && !has_links
        {
            return None;
        }
        let num = |v: Option<f64>| v.map_or(Value::Nil, Value::F64);
        let ids = |v: &[String]| Value::Array(v.iter().map(|s| Value::from(s.as_str())).collect());
        let strings =
            |v: &[String]| Value::Array(v.iter().map(|s| Value::from(s.as_str())).collect());
        // A failed job's timeline is final, so it is kept; another job's would be stale by
        // its next step, and writing it at every step would double the store's writes.
        let timeline = (e.rec.state == Stage::Failed)
            .then(|| Value::Array(r.timeline.iter().map(timeline::Step::to_kept).collect()));
        Some(Value::map([
            ("timeout", num(r.timeout)),
            ("ttl", num(r.ttl)),
            ("stallTimeout", num(r.stall_timeout)),
            ("group", r.group.as_deref().map_or(Value::Nil, Value::from)),
            (
                "dlq",
                r.dlq.as_ref().map_or(Value::Nil, |(reason, error)| {
                    Value::map([
                        ("reason", Value::from(*reason)),
                        ("error", error.as_deref().map_or(Value::Nil, Value::from)),
                    ])
                }),
            ),
            (
                "stacktrace",
                r.stacktrace.as_deref().map_or(Value::Nil, strings),
            ),
            (
                "attempts",
                Value::Array(r.attempt_log.iter().map(|a| a.to_value()).collect()),
            ),
            ("timeline", timeline.unwrap_or(Value::Nil)),
            ("startedAt", num(r.shown_started)),
            ("finishedAt", num(r.finished.map(|(at, _)| at))),
            ("lastHeartbeat", Value::F64(r.last_heartbeat)),
            (
                "links",
                links.filter(|_| has_links).map_or(Value::Nil, |l| {
                    Value::map([
                        (
                            "parent",
                            l.parent.as_deref().map_or(Value::Nil, Value::from),
                        ),
                        ("children", ids(&l.children)),
                        ("dependsOn", ids(&l.depends_on)),
                        (
                            "policy",
                            l.policy.map_or(Value::Nil, |p| Value::from(policy_name(p))),
                        ),
                    ])
                }),
            ),
        ]))
    }

    /// Puts back job `id`'s extras (`v`, as [`job_extras`](Self::job_extras) wrote them); a
    /// job that waited for children not completed yet waits again. False for an unknown job.
    pub fn restore_job(&mut self, id: &str, v: &Value, waits: &mut Waits) -> bool {
        let Some(e) = self.map.get_mut(id) else {
            return false;
        };
        restore_run(&mut e.run, e.rec.state == Stage::Failed, v);
        if let Some(l) = v.get("links").filter(|l| !l.is_nullish()) {
            self.restore_links(id, l, waits);
        }
        true
    }

    /// Puts back job `id`'s flow links (`l`, as [`job_extras`](Self::job_extras) wrote them).
    fn restore_links(&mut self, id: &str, l: &Value, waits: &mut Waits) {
        let list = |k: &str| -> Vec<String> {
            l.get(k)
                .and_then(Value::as_array)
                .unwrap_or_default()
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        };
        let policy = match l.get("policy").and_then(Value::as_str) {
            Some("failParentOnFailure") => Some(ChildFailure::FailParent),
            Some("ignoreDependencyOnFailure") => Some(ChildFailure::Ignore),
            Some("continueParentOnFailure") => Some(ChildFailure::ContinueParent),
            Some("removeDependencyOnFailure") => Some(ChildFailure::RemoveDependency),
            _ => None,
        };
        let depends_on = self.unresolved(&list("dependsOn"));
        let links = Links {
            parent: l.get("parent").and_then(Value::as_str).map(str::to_owned),
            children: list("children"),
            depends_on: depends_on.clone(),
            policy,
            ..Links::default()
        };
        let Some(e) = self.map.get_mut(id) else {
            return;
        };
        let (queue, state) = (e.rec.queue.clone(), e.rec.state);
        e.flow = Some(Box::new(links));
        // Recovered as waiting (see `State::new`): it waits for its children again.
        if state == Stage::Waiting && !depends_on.is_empty() {
            self.unready(id);
            let Some(e) = self.map.get_mut(id) else {
                return;
            };
            e.rec.state = Stage::WaitingChildren;
            let op = update_op(&e.rec);
            self.park(id, &queue, &depends_on, waits);
            self.record(op);
        }
    }
}

/// Puts back what a restart keeps of a job's run (`v`, as `job_extras` wrote it): its
/// settings, DLQ reason, stack trace and attempts, and for a job that `failed` for good its
/// timeline and times.
fn restore_run(run: &mut RunInfo, failed: bool, v: &Value) {
    let num = |k: &str| v.get(k).and_then(Value::as_f64);
    run.timeout = num("timeout");
    run.ttl = num("ttl");
    run.stall_timeout = num("stallTimeout");
    run.group = v.get("group").and_then(Value::as_str).map(str::to_owned);
    if let (Some(d), true) = (v.get("dlq"), failed) {
        let stored = d.get("reason").and_then(Value::as_str).unwrap_or("unknown");
        let reason = REASONS
            .iter()
            .find(|r| **r == stored)
            .copied()
            .unwrap_or("unknown");
        let error = d.get("error").and_then(Value::as_str).map(str::to_owned);
        if let Some(dlq) = &mut run.dlq {
            *dlq = (reason, error.or(dlq.1.take()));
        } else {
            run.dlq = Some((reason, error));
        }
    }
    run.stacktrace = v.get("stacktrace").and_then(Value::as_array).map(|lines| {
        lines
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect()
    });
    let items = |k: &str| v.get(k).and_then(Value::as_array).unwrap_or_default();
    run.attempt_log = items("attempts")
        .iter()
        .filter_map(|a| Attempt::from_kept(a, &REASONS))
        .collect();
    if failed && !items("timeline").is_empty() {
        run.timeline = items("timeline")
            .iter()
            .filter_map(Step::from_kept)
            .collect();
        run.shown_started = num("startedAt");
        if let (Some(at), Some((_, seq))) = (num("finishedAt"), run.finished) {
            run.finished = Some((at, seq));
        }
        if let Some(at) = num("lastHeartbeat") {
            run.last_heartbeat = at;
        }
    }
}

/// The option that sets `p`, as a job's extras name it.
fn policy_name(p: ChildFailure) -> &'static str {
    match p {
        ChildFailure::FailParent => "failParentOnFailure",
        ChildFailure::Ignore => "ignoreDependencyOnFailure",
        ChildFailure::ContinueParent => "continueParentOnFailure",
        ChildFailure::RemoveDependency => "removeDependencyOnFailure",
        _ => "unknown",
    }
}
