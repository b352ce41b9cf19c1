//! A job's own records (progress, logs, lock) and its lock heartbeats, served.
//!
//! Progress and log lines live in memory only (a restart of a SQLite-backed broker loses them,
//! as it loses nothing else); `Update` (replacing a job's data) is written to the store as the
//! whole record, so it survives a restart.

use autobatch_core::ops::{
    AddLog, ClearLogs, ExtendLock, ExtendLocks, GetLogs, GetProgress, JobLog, JobLogs, JobProgress,
    UpdateData, UpdateProgress,
};
use autobatch_core::wire::{Response, Value};

use crate::context::{Ctx, Served};

pub(crate) fn update_progress(cx: &Ctx<'_>, op: UpdateProgress) -> Served<()> {
    cx.state()
        .set_progress(&op.id, op.progress, op.message, cx.now)
}

pub(crate) fn get_progress(cx: &Ctx<'_>, op: GetProgress) -> Served<JobProgress> {
    let (progress, message) = cx.state().progress(&op.id, cx.now)?;
    Ok(JobProgress::new(progress, message))
}

pub(crate) fn update_data(cx: &Ctx<'_>, op: UpdateData) -> Served<()> {
    if cx.state().jobs().update_data(&op.id, op.data) {
        Ok(())
    } else {
        Err("Job not found or cannot be updated".into())
    }
}

pub(crate) fn add_log(cx: &Ctx<'_>, op: AddLog) -> Served<()> {
    let level = op.level.unwrap_or_else(|| "info".into());
    if cx.state().add_log(&op.id, op.message, level, cx.now) {
        Ok(())
    } else {
        Err("Job not found".into())
    }
}

pub(crate) fn get_logs(cx: &Ctx<'_>, op: GetLogs) -> Served<JobLogs> {
    let state = cx.state();
    let all = state.logs(&op.id);
    let total = all.len();
    let lines: Vec<JobLog> = if op.start.is_none() && op.end.is_none() {
        all.iter().map(log_line).collect()
    } else {
        // JS `slice(start ?? 0, (end ?? total - 1) + 1)`, negative indices from the end.
        let idx = |i: i64| -> usize {
            if i < 0 {
                total.saturating_sub(i.unsigned_abs() as usize)
            } else {
                (i as usize).min(total)
            }
        };
        let from = idx(op.start.unwrap_or(0));
        let to = idx(op.end.unwrap_or(total as i64 - 1) + 1);
        all.get(from..to.max(from))
            .unwrap_or_default()
            .iter()
            .map(log_line)
            .collect()
    };
    Ok(JobLogs::new(lines, total as u64))
}

fn log_line((timestamp, level, message): &(f64, String, String)) -> JobLog {
    JobLog::new(*timestamp, level.as_str(), message.as_str())
}

pub(crate) fn clear_logs(cx: &Ctx<'_>, op: ClearLogs) -> Served<()> {
    cx.state().clear_logs(&op.id, op.keep_logs);
    Ok(())
}

pub(crate) fn extend_lock(cx: &Ctx<'_>, op: ExtendLock) -> Served<()> {
    if cx
        .state()
        .jobs()
        .extend_lock(&op.id, op.token.as_deref(), op.duration as f64, cx.now)
    {
        Ok(())
    } else {
        Err("Lock not found or invalid token".into())
    }
}

pub(crate) fn extend_locks(cx: &Ctx<'_>, op: ExtendLocks) -> Served<u64> {
    let mut state = cx.state();
    let mut count = 0u64;
    for (i, id) in op.ids.iter().enumerate() {
        let token = op.tokens.get(i).map(String::as_str);
        let duration = op.durations.get(i).copied().unwrap_or(0) as f64;
        count += u64::from(state.jobs().extend_lock(id, token, duration, cx.now));
    }
    Ok(count)
}

fn data(d: Value) -> Response {
    Response::Other(Value::map([("data", d)]))
}

/// JobHeartbeat, from the raw body (core has no typed op for it: autobatch's worker renews
/// its locks with JobHeartbeatB).
pub(crate) fn heartbeat(cx: &Ctx<'_>, body: &Value) -> Served<Response> {
    let text = |k: &str| body.get(k).and_then(Value::as_str);
    let id = text("id").unwrap_or_default();
    // bunqueue renews by `duration` only when a token comes with it.
    let duration = body.get("duration").and_then(Value::as_f64);
    if cx
        .state()
        .jobs()
        .heartbeat(id, text("token"), duration, cx.now)
    {
        Ok(data(Value::map([("ok", Value::Bool(true))])))
    } else {
        Err("Job not found or not active (or invalid token)".into())
    }
}

/// JobHeartbeatB, from the raw body: every listed job's lock renewed, the others counted out.
pub(crate) fn heartbeat_batch(cx: &Ctx<'_>, body: &Value) -> Served<Response> {
    let ids = body.get("ids").and_then(Value::as_array).unwrap_or(&[]);
    let tokens = body.get("tokens").and_then(Value::as_array);
    let mut state = cx.state();
    let mut count = 0i64;
    for (i, id) in ids.iter().enumerate() {
        let Some(id) = id.as_str() else { continue };
        let token = tokens.and_then(|t| t.get(i)).and_then(Value::as_str);
        count += i64::from(state.jobs().heartbeat(id, token, None, cx.now));
    }
    Ok(data(Value::map([
        ("ok", Value::Bool(true)),
        ("count", Value::Int(count)),
    ])))
}
