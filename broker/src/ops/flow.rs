//! Flows, served: PUSHF (checked whole by `flow_plan`, then added at once), WaitJob,
//! GetChildrenValues, GetFailedChildrenValues, GetIgnoredChildrenFailures,
//! RemoveChildDependency, RemoveUnprocessedChildren. (A PUSH with `parent: {id, queue}` links
//! itself to its parent in `dispatch`.) MoveToWaitingChildren and UpdateParent stay refused
//! as not supported. PUSHF and WaitJob wait (a commit, a job's completion) before they
//! answer; the others answer at once.

use std::collections::HashMap;
use std::time::Duration;

use autobatch_core::ops::{
    GetChildrenValues, GetFailedChildrenValues, GetIgnoredChildrenFailures, WaitJob, WaitOutcome,
};
use autobatch_core::wire::{Response, Value};

use super::flow_plan::plan;
use crate::clock::now_ms;
use crate::context::{Ctx, Served};

/// A parent's children's values or failures, by child key.
type ChildValues = Vec<(String, Value)>;

pub(crate) fn children_values(cx: &Ctx<'_>, op: GetChildrenValues) -> Served<ChildValues> {
    Ok(cx.state().jobs().children_values(&op.id))
}

pub(crate) fn failed_children_values(
    cx: &Ctx<'_>,
    op: GetFailedChildrenValues,
) -> Served<ChildValues> {
    Ok(cx.state().jobs().children_failures(&op.id, false))
}

pub(crate) fn ignored_children_failures(
    cx: &Ctx<'_>,
    op: GetIgnoredChildrenFailures,
) -> Served<ChildValues> {
    Ok(cx.state().jobs().children_failures(&op.id, true))
}

/// RemoveChildDependency, from the raw body (core has no typed op: the autobatch client does
/// not send it), read as bunqueue reads it (`jobId(command.id)`).
pub(crate) fn remove_child_dependency(cx: &Ctx<'_>, body: &Value) -> Served<Response> {
    let id = body
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or("undefined");
    cx.state()
        .remove_child_dependency(id, cx.now)
        .map(|removed| Response::Other(Value::map([("removed", Value::from(removed))])))
}

/// RemoveUnprocessedChildren, from the raw body (no typed op in core either).
pub(crate) fn remove_unprocessed_children(cx: &Ctx<'_>, body: &Value) -> Served<Response> {
    let id = body.get("id").and_then(Value::as_str).unwrap_or_default();
    cx.state().remove_unprocessed_children(id);
    Ok(Response::Done)
}

/// PUSHF, as bunqueue 2.9.5's `pushFlowBatch`: the whole flow checked first (its shape,
/// then no id taken, then the groups' `maxSize`), then every job added at once under the
/// state's lock, so no worker sees a child before its parent's links. With SQLite the reply
/// waits for the flow's rows to commit (bunqueue writes a flow durably before publishing
/// it); a failed commit takes the flow back.
pub(crate) async fn push_flow(cx: &Ctx<'_>, body: &Value) -> Served<Response> {
    let planned = plan(body)?;
    let (snapshots, ids, waiter) = {
        let mut state = cx.state();
        if let Some(p) = planned.iter().find(|p| state.id_taken(&p.id)) {
            return Err(format!("Flow job {} already exists", p.id));
        }
        // A group's maxSize counts the flow's own queued jobs (not those that will wait for
        // their children), as bunqueue's `assertGroupCapacity`.
        let mut counts: HashMap<(&str, &str), u64> = HashMap::new();
        for p in &planned {
            let Some(group) = p.spec.opts.group_id.as_deref() else {
                continue;
            };
            if state.jobs().must_wait(&p.spec.opts.depends_on) {
                continue;
            }
            let current = counts
                .entry((p.queue.as_str(), group))
                .or_insert_with(|| state.jobs().group_queued(&p.queue, group));
            if let Some(max) = p.group_max_size {
                if *current >= max.max(0) as u64 {
                    return Err(format!(
                        "Group {group} has reached its maximum size of {max}"
                    ));
                }
            }
            *current += 1;
        }
        let now = now_ms();
        let before = state.jobs().recorded();
        let ids: Vec<String> = planned
            .into_iter()
            .map(|p| {
                let id = state.push(&p.queue, p.spec, now);
                state.jobs().show_custom_id(&id, p.custom_id);
                id
            })
            .collect();
        let snapshots: Vec<Value> = ids.iter().filter_map(|id| state.snapshot(id)).collect();
        let covering = state.jobs().recorded() - before;
        (snapshots, ids, state.jobs().sync(covering))
    };
    if let Some(w) = waiter {
        if let Err(e) = w.wait().await {
            cx.state().withdraw(&ids);
            return Err(format!("Durable write failed, jobs not added: {e}"));
        }
    }
    Ok(Response::Other(Value::map([(
        "data",
        Value::map([("jobs", Value::Array(snapshots))]),
    )])))
}

/// bunqueue's WaitJob without a timeout.
const DEFAULT_WAIT_JOB: Duration = Duration::from_millis(30_000);

/// WaitJob, as bunqueue 2.9.5: `Job not found` for an unknown id, at once for a completed job,
/// else held until the job completes (a failure does not end the wait) or the timeout passes
/// (`completed: false`). Like a long-poll pull, it holds one of the connection's request
/// slots and nothing else.
pub(crate) async fn wait_job(cx: &Ctx<'_>, op: WaitJob) -> Served<WaitOutcome> {
    let shared = cx.shared;
    let timeout = op.timeout.unwrap_or(DEFAULT_WAIT_JOB);
    let outcome = {
        let notify = shared.lock().job_waiter(&op.id);
        let notified = notify.notified();
        tokio::pin!(notified);
        // Enabled before the check: a completion after it wakes this wait.
        notified.as_mut().enable();
        let first = shared.lock().jobs().completion(&op.id);
        let mut stop = shared.stop.clone();
        match first {
            None => Err("Job not found".to_owned()),
            Some(Some(result)) => Ok(WaitOutcome::Completed(result)),
            Some(None) => tokio::select! {
                // Completed (a job removed on completion is gone by now: no result).
                _ = &mut notified => Ok(WaitOutcome::Completed(
                    shared.lock().jobs().completion(&op.id).flatten().unwrap_or(Value::Undefined),
                )),
                _ = tokio::time::sleep(timeout) => Ok(WaitOutcome::TimedOut),
                _ = stop.wait_for(|s| *s) => Ok(WaitOutcome::TimedOut),
            },
        }
    };
    shared.lock().forget_waiter(&op.id);
    outcome
}
