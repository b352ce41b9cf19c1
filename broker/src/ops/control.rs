//! Queue control, served: pause, resume, is paused, drain, obliterate, remove (Cancel),
//! promote (one and many), change priority, the deduplication keys. The rest of the control
//! commands (Clean, Discard, MoveToWait, MoveToDelayed, ChangeDelay, RetryCompleted) are
//! refused as not supported: the broker keeps neither finish times nor a dead-letter queue to
//! answer them as bunqueue does.

use autobatch_core::ops::{
    Cancel, ChangePriority, Drain, IsPaused, Obliterate, Pause, Promote, PromoteJobs,
    RemoveDeduplicationKey, RemoveJobDeduplicationKey, Resume,
};
use autobatch_core::wire::{Response, Value};

use super::answer;
use crate::dispatch::{Conn, Shared};

/// Serves the control commands this broker implements.
pub(super) fn serve(
    shared: &Shared,
    _conn: &Conn,
    cmd: &str,
    body: &Value,
    _now: f64,
) -> Option<Result<Response, String>> {
    Some(match cmd {
        "Pause" => answer::<Pause>(body, |op| {
            shared.lock().pause(&op.queue);
            Ok(())
        }),
        "Resume" => answer::<Resume>(body, |op| {
            shared.lock().resume(&op.queue);
            Ok(())
        }),
        "IsPaused" => answer::<IsPaused>(body, |op| Ok(shared.lock().is_paused(&op.queue))),
        "Drain" => answer::<Drain>(body, |op| Ok(shared.lock().drain(&op.queue))),
        "Obliterate" => answer::<Obliterate>(body, |op| {
            shared.lock().obliterate(&op.queue);
            Ok(())
        }),
        "Cancel" => answer::<Cancel>(body, |op| {
            if shared.lock().cancel(&op.id) {
                Ok(())
            } else {
                Err("Job not found or cannot be cancelled".into())
            }
        }),
        "Promote" => answer::<Promote>(body, |op| {
            if shared.lock().promote_job(&op.id) {
                Ok(())
            } else {
                Err("Job not found or not delayed".into())
            }
        }),
        "PromoteJobs" => answer::<PromoteJobs>(body, |op| {
            Ok(shared.lock().promote_jobs(&op.queue, op.count))
        }),
        "ChangePriority" => answer::<ChangePriority>(body, |op| {
            if shared.lock().change_priority(&op.id, op.priority, op.lifo) {
                Ok(())
            } else {
                Err("Job not found or not in queue".into())
            }
        }),
        "RemoveDeduplicationKey" => answer::<RemoveDeduplicationKey>(body, |op| {
            Ok(shared
                .lock()
                .remove_deduplication_key(&op.queue, &op.deduplication_id))
        }),
        "RemoveJobDeduplicationKey" => answer::<RemoveJobDeduplicationKey>(body, |op| {
            Ok(shared.lock().remove_job_deduplication_key(&op.id))
        }),
        _ => return None,
    })
}
