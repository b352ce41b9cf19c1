//! A job's own records (progress, logs, lock) and the worker's moves on it, served.
//!
//! Progress and log lines live in memory only (a restart of a SQLite-backed broker loses them,
//! as it loses nothing else); `Update` (replacing a job's data) is written to the store as the
//! whole record, so it survives a restart.

use autobatch_core::ops::{
    AddLog, ClearLogs, ExtendLock, ExtendLocks, GetLogs, GetProgress, JobLog, JobLogs, JobProgress,
    MoveToDelayed, UpdateData, UpdateProgress,
};
use autobatch_core::wire::{Response, Value};

use super::answer;
use crate::context::{Conn, Shared};

/// Serves the job-record commands this broker implements.
pub(super) fn serve(
    shared: &Shared,
    _conn: &Conn,
    cmd: &str,
    body: &Value,
    now: f64,
) -> Option<Result<Response, String>> {
    Some(match cmd {
        "Progress" => answer::<UpdateProgress>(body, |op| {
            shared
                .lock()
                .set_progress(&op.id, op.progress, op.message, now)
        }),
        "GetProgress" => answer::<GetProgress>(body, |op| {
            let (progress, message) = shared.lock().progress(&op.id, now)?;
            Ok(JobProgress::new(progress, message))
        }),
        "Update" => answer::<UpdateData>(body, |op| {
            if shared.lock().update_data(&op.id, op.data) {
                Ok(())
            } else {
                Err("Job not found or cannot be updated".into())
            }
        }),
        "AddLog" => answer::<AddLog>(body, |op| {
            let level = op.level.unwrap_or_else(|| "info".into());
            if shared.lock().add_log(&op.id, op.message, level, now) {
                Ok(())
            } else {
                Err("Job not found".into())
            }
        }),
        "GetLogs" => answer::<GetLogs>(body, |op| {
            let state = shared.lock();
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
        }),
        "ClearLogs" => answer::<ClearLogs>(body, |op| {
            shared.lock().clear_logs(&op.id, op.keep_logs);
            Ok(())
        }),
        "ExtendLock" => answer::<ExtendLock>(body, |op| {
            if shared
                .lock()
                .extend_lock(&op.id, op.token.as_deref(), op.duration as f64, now)
            {
                Ok(())
            } else {
                Err("Lock not found or invalid token".into())
            }
        }),
        "ExtendLocks" => answer::<ExtendLocks>(body, |op| {
            let mut state = shared.lock();
            let mut count = 0u64;
            for (i, id) in op.ids.iter().enumerate() {
                let token = op.tokens.get(i).map(String::as_str);
                let duration = op.durations.get(i).copied().unwrap_or(0) as f64;
                count += u64::from(state.extend_lock(id, token, duration, now));
            }
            Ok(count)
        }),
        "MoveToDelayed" => answer::<MoveToDelayed>(body, |op| {
            shared
                .lock()
                .move_to_delayed(&op.id, op.token.as_deref(), op.delay as f64, now)
        }),
        _ => return None,
    })
}

fn log_line((timestamp, level, message): &(f64, String, String)) -> JobLog {
    JobLog::new(*timestamp, level.as_str(), message.as_str())
}
