//! The dead-letter queue, served (see `crate::queue::dlq` for what it is in this broker).
//!
//! Listing (`Dlq`, with bunqueue's filter), `GetDlqStats`, `RetryDlq`, `PurgeDlq` and
//! `RemoveDlqJob` are served. The broker keeps bunqueue's default DLQ settings and never
//! retries entries automatically: `GetDlqConfig` answers those defaults and `SetDlqConfig` is
//! refused (accepting a setting the broker does not apply would lie).

use autobatch_core::ops::{
    DlqConfig, DlqFilter, DlqStats, GetDlqConfig, GetDlqStats, Operation, PurgeDlq, RemoveDlqJob,
    RetryDlq,
};
use autobatch_core::wire::{Response, Value};

use super::answer;
use crate::dispatch::{Conn, Shared};
use crate::queue::dlq::{Filter, REASONS};

fn filter(f: &DlqFilter) -> Filter {
    Filter {
        reason: f.reason.as_ref().map(|r| r.as_str().to_owned()),
        older_than: f.older_than,
        newer_than: f.newer_than,
        retriable: f.retriable == Some(true),
        expired: f.expired == Some(true),
        offset: f.offset,
        limit: f.limit,
    }
}

/// Serves the DLQ commands this broker implements.
pub(super) fn serve(
    shared: &Shared,
    _conn: &Conn,
    cmd: &str,
    body: &Value,
    now: f64,
) -> Option<Result<Response, String>> {
    Some(match cmd {
        GetDlqConfig::NAME => answer::<GetDlqConfig>(body, |_| Ok(DlqConfig::default())),
        "Dlq" => {
            let op = match <autobatch_core::ops::Dlq as autobatch_core::wire::server::ServeOperation>::read_request(body) {
                Ok(op) => op,
                Err(e) => return Some(Err(e.to_string())),
            };
            let f = op.filter.as_ref().map(filter);
            let entries = shared
                .lock()
                .dlq_entries(&op.queue, op.count, f.as_ref(), now);
            let jobs = entries.iter().map(|e| e.job.clone()).collect();
            let entries = entries.iter().map(|e| e.to_value()).collect();
            Ok(Response::Other(Value::map([
                ("ok", Value::from(true)),
                ("jobs", Value::Array(jobs)),
                ("entries", Value::Array(entries)),
            ])))
        }
        GetDlqStats::NAME => answer::<GetDlqStats>(body, |op| {
            let (total, by, expired, oldest, newest) = shared.lock().dlq_stats(&op.queue, now);
            let mut s = DlqStats::default();
            s.total = total;
            for (r, n) in REASONS.iter().zip(by) {
                s.by_reason.insert((*r).to_owned(), n);
            }
            s.by_queue.insert(op.queue.clone(), total);
            s.expired = expired;
            s.oldest_entry = oldest;
            s.newest_entry = newest;
            Ok(s)
        }),
        RetryDlq::NAME => answer::<RetryDlq>(body, |op| {
            let f = op.filter.as_ref().map(filter);
            Ok(shared
                .lock()
                .retry_dlq(&op.queue, op.job_id.as_deref(), op.count, f.as_ref(), now))
        }),
        PurgeDlq::NAME => {
            answer::<PurgeDlq>(body, |op| Ok(shared.lock().purge_dlq(&op.queue, now)))
        }
        RemoveDlqJob::NAME => answer::<RemoveDlqJob>(body, |op| {
            Ok(shared.lock().remove_dlq_job(&op.queue, &op.job_id))
        }),
        _ => return None,
    })
}
