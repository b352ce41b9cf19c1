//! Lookups, served: GetJobs, GetJobByCustomId, GetCountsPerPriority, GetDeduplicationJobId,
//! ListQueues (GetQueueLimits is in `limits`). The others (workers, stats, metrics, storage
//! status) are refused as not supported: the broker keeps no worker details or throughput
//! figures.

use autobatch_core::ops::{
    GetCountsPerPriority, GetDeduplicationJobId, GetJobByCustomId, GetJobs, ListQueues,
    PriorityCounts,
};
use autobatch_core::wire::{Response, Value};

use super::answer;
use crate::context::{Conn, Shared};

/// bunqueue's page size when a GetJobs has no `limit`.
const DEFAULT_LIMIT: u64 = 100;

/// Serves the lookups this broker implements.
pub(super) fn serve(
    shared: &Shared,
    _conn: &Conn,
    cmd: &str,
    body: &Value,
    now: f64,
) -> Option<Result<Response, String>> {
    Some(match cmd {
        "GetJobs" => answer::<GetJobs>(body, |op| {
            let offset = usize::try_from(op.offset.unwrap_or(0)).unwrap_or(usize::MAX);
            let limit = usize::try_from(op.limit.unwrap_or(DEFAULT_LIMIT)).unwrap_or(usize::MAX);
            Ok(shared.lock().list_jobs(
                &op.queue,
                &op.states,
                offset,
                limit,
                op.asc.unwrap_or(true),
                now,
            ))
        }),
        // A custom id is the job's id in this broker (as in bunqueue, where `jobId` becomes
        // the id).
        "GetJobByCustomId" => answer::<GetJobByCustomId>(body, |op| {
            let mut state = shared.lock();
            let mut job = state
                .get_job(&op.custom_id, now)
                .ok_or_else(|| "Job not found".to_owned())?;
            // bunqueue's reply carries no state here (only `_state`).
            job.state = None;
            Ok(job)
        }),
        "GetCountsPerPriority" => answer::<GetCountsPerPriority>(body, |op| {
            let counts = shared.lock().counts_per_priority(&op.queue);
            Ok(PriorityCounts::new(op.queue, counts))
        }),
        "GetDeduplicationJobId" => answer::<GetDeduplicationJobId>(body, |op| {
            Ok(shared
                .lock()
                .deduplication_holder(&op.queue, &op.deduplication_id))
        }),
        "ListQueues" => answer::<ListQueues>(body, |_| Ok(shared.lock().queue_names())),
        _ => return None,
    })
}
