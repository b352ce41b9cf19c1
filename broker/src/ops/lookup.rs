//! Lookups, served: GetJobs, GetJobByCustomId, GetCountsPerPriority, GetDeduplicationJobId,
//! ListQueues (GetQueueLimits is in `limits`, ListWorkers in `worker`). Stats, metrics and
//! storage status are refused as not supported: the broker keeps no throughput figures.

use autobatch_core::ops::{
    GetCountsPerPriority, GetDeduplicationJobId, GetJobByCustomId, GetJobs, ListQueues,
    PriorityCounts,
};
use autobatch_core::wire::{Response, Value};

use crate::context::{Ctx, Served};

/// bunqueue's page size when a GetJobs has no `limit`.
const DEFAULT_LIMIT: u64 = 100;

/// GetJobs: bunqueue's listing, each job's whole record with its state.
pub(crate) fn get_jobs(cx: &Ctx<'_>, op: GetJobs) -> Served<Response> {
    let offset = usize::try_from(op.offset.unwrap_or(0)).unwrap_or(usize::MAX);
    let limit = usize::try_from(op.limit.unwrap_or(DEFAULT_LIMIT)).unwrap_or(usize::MAX);
    let jobs = cx.state().list_jobs(
        &op.queue,
        &op.states,
        offset,
        limit,
        op.asc.unwrap_or(true),
        cx.now,
    );
    Ok(Response::Other(Value::map([("jobs", Value::Array(jobs))])))
}

/// A custom id is the job's id in this broker (as in bunqueue, where `jobId` becomes the id).
pub(crate) fn get_job_by_custom_id(cx: &Ctx<'_>, op: GetJobByCustomId) -> Served<Response> {
    let job = cx
        .state()
        .get_job(&op.custom_id, cx.now)
        .ok_or_else(|| "Job not found".to_owned())?;
    // bunqueue's reply carries no state here.
    let job = match job {
        Value::Map(m) => Value::Map(
            m.into_iter()
                .filter(|(k, _)| k.as_str() != Some("state"))
                .collect(),
        ),
        other => other,
    };
    Ok(Response::Other(Value::map([("job", job)])))
}

/// GetCountsPerPriority: waiting and delayed jobs by priority, a fraction kept as bunqueue
/// keeps it.
pub(crate) fn get_counts_per_priority(
    cx: &Ctx<'_>,
    op: GetCountsPerPriority,
) -> Served<PriorityCounts> {
    let counts = cx.state().jobs().counts_per_priority(&op.queue);
    Ok(PriorityCounts::new(op.queue, counts))
}

pub(crate) fn get_deduplication_job_id(
    cx: &Ctx<'_>,
    op: GetDeduplicationJobId,
) -> Served<Option<String>> {
    Ok(cx
        .state()
        .deduplication_holder(&op.queue, &op.deduplication_id))
}

pub(crate) fn list_queues(cx: &Ctx<'_>, _: ListQueues) -> Served<Vec<String>> {
    Ok(cx.state().jobs().queue_names())
}
