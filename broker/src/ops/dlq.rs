//! The dead-letter queue, served (see `crate::queue::dlq` for what it is in this broker).
//!
//! Listing (`Dlq`, with bunqueue's filter), `GetDlqStats`, `RetryDlq`, `PurgeDlq` and
//! `RemoveDlqJob` are served, and a queue's settings: `SetDlqConfig` and `GetDlqConfig` (see
//! `crate::queue::dlq_config`: `autoRetry: true` is refused, the broker never retries entries
//! on its own).

use autobatch_core::ops::{
    Dlq, DlqConfig, DlqFilter, DlqStats, GetDlqConfig, GetDlqStats, PurgeDlq, RemoveDlqJob,
    RetryDlq,
};
use autobatch_core::wire::{Response, Value};

use crate::context::{Ctx, Served};
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

pub(crate) fn get_config(cx: &Ctx<'_>, op: GetDlqConfig) -> Served<DlqConfig> {
    Ok(cx.state().dlq_config(&op.queue))
}

/// SetDlqConfig, from its raw body rather than through its op: bunqueue reads `config`
/// leniently (numbers in strings, fields it does not know ignored, a TypeError for an
/// undefined or null `config`), which the op's `DlqConfigUpdate` does not model, and it does
/// not check the queue name.
pub(crate) fn set_config(cx: &Ctx<'_>, body: &Value) -> Served<Response> {
    let queue = body.get("queue").and_then(Value::as_str).unwrap_or("");
    let patch = body.get("config").unwrap_or(&Value::Undefined);
    cx.state().set_dlq_config(queue, patch)?;
    Ok(Response::Done)
}

/// The listing, with the reply written from the broker's own records of the entries.
pub(crate) fn list(cx: &Ctx<'_>, op: Dlq) -> Served<Response> {
    let f = op.filter.as_ref().map(filter);
    let entries = cx
        .state()
        .dlq_entries(&op.queue, op.count, f.as_ref(), cx.now);
    let jobs = entries.iter().map(|e| e.job.clone()).collect();
    let entries = entries.iter().map(|e| e.to_value()).collect();
    Ok(Response::Other(Value::map([
        ("ok", Value::from(true)),
        ("jobs", Value::Array(jobs)),
        ("entries", Value::Array(entries)),
    ])))
}

pub(crate) fn stats(cx: &Ctx<'_>, op: GetDlqStats) -> Served<DlqStats> {
    let (total, by, expired, oldest, newest) = cx.state().dlq_stats(&op.queue, cx.now);
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
}

pub(crate) fn retry(cx: &Ctx<'_>, op: RetryDlq) -> Served<u64> {
    let f = op.filter.as_ref().map(filter);
    Ok(cx.state().retry_dlq(
        &op.queue,
        op.job_id.as_deref(),
        op.count,
        f.as_ref(),
        cx.now,
    ))
}

pub(crate) fn purge(cx: &Ctx<'_>, op: PurgeDlq) -> Served<u64> {
    Ok(cx.state().purge_dlq(&op.queue, cx.now))
}

pub(crate) fn remove_job(cx: &Ctx<'_>, op: RemoveDlqJob) -> Served<bool> {
    Ok(cx.state().remove_dlq_job(&op.queue, &op.job_id))
}
