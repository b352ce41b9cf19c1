//! Queue control, served: pause, resume, is paused, drain, obliterate, remove (Cancel),
//! promote (one and many), change priority, change delay, move to delayed, move to wait
//! (retry), discard, the deduplication keys, retry completed (by id, count or completion
//! time), Clean (see `State::clean` for its one difference). Failed jobs are the DLQ
//! (`crate::queue::dlq`): MoveToWait runs one again from its first attempt, as RetryDlq does.

use autobatch_core::ops::{
    Cancel, ChangeDelay, ChangePriority, Clean, Discard, Drain, MoveToDelayed, MoveToWait,
    Obliterate, Pause, Promote, PromoteJobs, RemoveDeduplicationKey, RemoveJobDeduplicationKey,
    Resume, RetryCompleted,
};

use crate::context::{Ctx, Served};
use crate::queue::{CleanState, MoveError};

pub(crate) fn pause(cx: &Ctx<'_>, op: Pause) -> Served<()> {
    cx.state().pause(&op.queue);
    Ok(())
}

pub(crate) fn resume(cx: &Ctx<'_>, op: Resume) -> Served<()> {
    cx.state().resume(&op.queue);
    Ok(())
}

pub(crate) fn drain(cx: &Ctx<'_>, op: Drain) -> Served<u64> {
    Ok(cx.state().drain(&op.queue))
}

pub(crate) fn obliterate(cx: &Ctx<'_>, op: Obliterate) -> Served<()> {
    cx.state().obliterate(&op.queue);
    Ok(())
}

pub(crate) fn cancel(cx: &Ctx<'_>, op: Cancel) -> Served<()> {
    if cx.state().cancel(&op.id) {
        Ok(())
    } else {
        Err("Job not found or cannot be cancelled".into())
    }
}

pub(crate) fn promote(cx: &Ctx<'_>, op: Promote) -> Served<()> {
    if cx.state().jobs().promote_job(&op.id, cx.now) {
        Ok(())
    } else {
        Err("Job not found or not delayed".into())
    }
}

pub(crate) fn promote_jobs(cx: &Ctx<'_>, op: PromoteJobs) -> Served<u64> {
    Ok(cx.state().jobs().promote_jobs(&op.queue, op.count, cx.now))
}

/// ChangePriority keeps a fraction as sent, as bunqueue does. A priority that is not a finite
/// number is refused: bunqueue takes it, and its queue's order then breaks (every comparison
/// with NaN is false).
pub(crate) fn change_priority(cx: &Ctx<'_>, op: ChangePriority) -> Served<()> {
    if !op.priority.is_finite() {
        return Err("priority must be a finite number".into());
    }
    if cx
        .state()
        .jobs()
        .change_priority(&op.id, op.priority, op.lifo)
    {
        Ok(())
    } else {
        Err("Job not found or not in queue".into())
    }
}

pub(crate) fn change_delay(cx: &Ctx<'_>, op: ChangeDelay) -> Served<()> {
    // bunqueue takes the lock token here too (an active job moves to delayed).
    cx.state()
        .delay_job(&op.id, op.delay, op.token.as_deref(), cx.now)
        .map_err(|e| match e {
            MoveError::Lock(e) => e.to_string(),
            _ => "Job not found or cannot change delay".into(),
        })
}

pub(crate) fn move_to_delayed(cx: &Ctx<'_>, op: MoveToDelayed) -> Served<()> {
    cx.state()
        .delay_job(
            &op.id,
            i64::try_from(op.delay).unwrap_or(i64::MAX),
            op.token.as_deref(),
            cx.now,
        )
        .map_err(|e| match e {
            MoveError::NotFound => "Job not found".into(),
            MoveError::State(s) => format!("Job is not active (current state: {s})"),
            MoveError::Lock(e) => e.to_string(),
        })
}

pub(crate) fn discard(cx: &Ctx<'_>, op: Discard) -> Served<()> {
    cx.state()
        .discard(&op.id, op.token.as_deref(), cx.now)
        .map_err(|e| match e {
            MoveError::Lock(e) => e.to_string(),
            _ => "Job not found".into(),
        })
}

pub(crate) fn move_to_wait(cx: &Ctx<'_>, op: MoveToWait) -> Served<()> {
    cx.state()
        .move_to_wait(&op.id, op.token.as_deref(), cx.now)
        .map_err(|e| match e {
            MoveError::NotFound => "Cannot move job from state 'unknown' to waiting".into(),
            MoveError::State(s) => format!("Cannot move job from state '{s}' to waiting"),
            MoveError::Lock(e) => e.to_string(),
        })
}

pub(crate) fn clean(cx: &Ctx<'_>, op: Clean) -> Served<Vec<String>> {
    let state = CleanState::parse(op.state.as_ref().map(|s| s.as_str()));
    Ok(cx
        .state()
        .clean(&op.queue, op.grace, state, op.limit, cx.now))
}

pub(crate) fn retry_completed(cx: &Ctx<'_>, op: RetryCompleted) -> Served<u64> {
    Ok(cx.state().jobs().retry_completed(
        &op.queue,
        op.id.as_deref(),
        op.count,
        op.timestamp,
        cx.now,
    ))
}

pub(crate) fn remove_deduplication_key(cx: &Ctx<'_>, op: RemoveDeduplicationKey) -> Served<u64> {
    Ok(cx
        .state()
        .remove_deduplication_key(&op.queue, &op.deduplication_id))
}

pub(crate) fn remove_job_deduplication_key(
    cx: &Ctx<'_>,
    op: RemoveJobDeduplicationKey,
) -> Served<bool> {
    Ok(cx.state().remove_job_deduplication_key(&op.id))
}
