//! Queue control, served: pause, resume, is paused, drain, obliterate, remove (Cancel),
//! promote (one and many), change priority, change delay, move to delayed, move to wait
//! (retry), discard, the deduplication keys, retry completed (by id, count or completion
//! time), Clean (see `State::clean` for its one difference). Failed jobs are the DLQ
//! (`crate::queue::dlq`): MoveToWait runs one again from its first attempt, as RetryDlq does.

use autobatch_core::ops::{
    Cancel, ChangeDelay, ChangePriority, Clean, Discard, Drain, IsPaused, MoveToDelayed,
    MoveToWait, Obliterate, Pause, Promote, PromoteJobs, RemoveDeduplicationKey,
    RemoveJobDeduplicationKey, Resume, RetryCompleted,
};
use autobatch_core::wire::{Response, Value};

use super::answer;
use crate::context::{Conn, Shared};
use crate::queue::admin::{CleanState, MoveError};

/// Serves the control commands this broker implements.
pub(super) fn serve(
    shared: &Shared,
    _conn: &Conn,
    cmd: &str,
    body: &Value,
    now: f64,
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
            if shared.lock().promote_job(&op.id, now) {
                Ok(())
            } else {
                Err("Job not found or not delayed".into())
            }
        }),
        "PromoteJobs" => answer::<PromoteJobs>(body, |op| {
            Ok(shared.lock().promote_jobs(&op.queue, op.count, now))
        }),
        "ChangePriority" => answer::<ChangePriority>(body, |op| {
            if shared.lock().change_priority(&op.id, op.priority, op.lifo) {
                Ok(())
            } else {
                Err("Job not found or not in queue".into())
            }
        }),
        "ChangeDelay" => answer::<ChangeDelay>(body, |op| {
            // bunqueue takes the lock token here too (an active job moves to delayed).
            shared
                .lock()
                .delay_job(&op.id, op.delay, op.token.as_deref(), now)
                .map_err(|e| match e {
                    MoveError::Lock(e) => e.to_string(),
                    _ => "Job not found or cannot change delay".into(),
                })
        }),
        "MoveToDelayed" => answer::<MoveToDelayed>(body, |op| {
            shared
                .lock()
                .delay_job(&op.id, op.delay, op.token.as_deref(), now)
                .map_err(|e| match e {
                    MoveError::NotFound => "Job not found".into(),
                    MoveError::State(s) => format!("Job is not active (current state: {s})"),
                    MoveError::Lock(e) => e.to_string(),
                })
        }),
        "Discard" => answer::<Discard>(body, |op| {
            shared
                .lock()
                .discard(&op.id, op.token.as_deref(), now)
                .map_err(|e| match e {
                    MoveError::Lock(e) => e.to_string(),
                    _ => "Job not found".into(),
                })
        }),
        "MoveToWait" => answer::<MoveToWait>(body, |op| {
            shared
                .lock()
                .move_to_wait(&op.id, op.token.as_deref(), now)
                .map_err(|e| match e {
                    MoveError::NotFound => "Cannot move job from state 'unknown' to waiting".into(),
                    MoveError::State(s) => format!("Cannot move job from state '{s}' to waiting"),
                    MoveError::Lock(e) => e.to_string(),
                })
        }),
        "Clean" => answer::<Clean>(body, |op| {
            let state = CleanState::parse(op.state.as_ref().map(|s| s.as_str()));
            Ok(shared
                .lock()
                .clean(&op.queue, op.grace, state, op.limit, now))
        }),
        "RetryCompleted" => answer::<RetryCompleted>(body, |op| {
            Ok(shared.lock().retry_completed(
                &op.queue,
                op.id.as_deref(),
                op.count,
                op.timestamp,
                now,
            ))
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
