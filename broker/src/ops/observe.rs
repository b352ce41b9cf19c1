//! Server figures and housekeeping, served as bunqueue 2.9.5 serves them: Stats, Metrics (both
//! forms), Prometheus, StorageStatus, CompactMemory, TrimEvents, and the webhook commands that
//! read or change registered webhooks (ListWebhooks, RemoveWebhook, SetWebhookEnabled).
//!
//! * Stats and Metrics count what the broker does (`crate::queue::totals`). Metrics'
//!   `avgLatencyMs`, `avgProcessingMs` and `memoryUsageMb` are 0: the broker keeps no latency
//!   samples and no heap figure (bunqueue's come from its JS runtime); `sqliteSizeMb` and
//!   `activeConnections` are 0 in bunqueue too.
//! * The broker registers no webhooks (AddWebhook is refused: it would call out over HTTP), so
//!   ListWebhooks lists none and RemoveWebhook and SetWebhookEnabled find none, as bunqueue
//!   answers for an id it does not know.
//! * StorageStatus reports a healthy store: a store write that fails stops the broker rather
//!   than degrading it.
//! * CompactMemory has nothing to do: the broker frees what it stops needing as it goes.
//! * TrimEvents trims the count of events each queue emitted (up to 10 000 per queue), which
//!   is all bunqueue's journal keeps in memory mode (`crate::events`).

use autobatch_core::ops::{Metrics, MetricsType, ServerStats, Stats};
use autobatch_core::wire::{validate_queue_name, Response, Value};

use crate::context::{Ctx, Served};
use crate::events::js_number;

/// `{ok: true, data: <value>}`.
fn data(value: Value) -> Response {
    Response::Other(Value::map([("data", value)]))
}

pub(crate) fn stats(cx: &Ctx<'_>, _op: Stats) -> Served<ServerStats> {
    Ok(cx.state().stats(cx.now))
}

pub(crate) fn metrics(cx: &Ctx<'_>, op: Metrics) -> Served<Response> {
    let Some((queue, kind)) = op.queue else {
        let mut state = cx.state();
        let t = state.totals();
        let zero = || Value::Int(0);
        let metrics = Value::map([
            ("totalPushed", Value::from(t.pushed)),
            ("totalPulled", Value::from(t.pulled)),
            ("totalCompleted", Value::from(t.completed)),
            ("totalFailed", Value::from(t.failed)),
            ("avgLatencyMs", zero()),
            ("avgProcessingMs", zero()),
            ("memoryUsageMb", zero()),
            ("sqliteSizeMb", zero()),
            ("activeConnections", zero()),
        ]);
        return Ok(Response::Other(Value::map([("metrics", metrics)])));
    };
    let start = op.start.unwrap_or(0);
    let end = op.end.unwrap_or(-1);
    if start < 0 {
        return Err("start must be a non-negative safe integer".into());
    }
    if end != -1 && end < 0 {
        return Err("end must be a non-negative safe integer".into());
    }
    let failed = matches!(kind, MetricsType::Failed);
    let mut state = cx.state();
    let (meta, full) = match state.totals().series(&queue, failed) {
        Some(s) => ((s.total, s.prev_ts, s.prev_count), s.data()),
        None => ((0, 0.0, 0), Vec::new()),
    };
    let count = full.len() as i64;
    let end = if end == -1 { count } else { count.min(end + 1) };
    let slice: Vec<Value> = if start >= end {
        Vec::new()
    } else {
        full[start as usize..end as usize]
            .iter()
            .map(|n| Value::from(*n))
            .collect()
    };
    Ok(data(Value::map([
        (
            "meta",
            Value::map([
                ("count", Value::from(meta.0)),
                ("prevTS", js_number(meta.1)),
                ("prevCount", Value::from(meta.2)),
            ]),
        ),
        ("data", Value::Array(slice)),
        ("count", Value::from(count as u64)),
    ])))
}

pub(crate) fn prometheus(cx: &Ctx<'_>, _body: &Value) -> Served<Response> {
    let text = cx.state().prometheus(cx.now);
    Ok(data(Value::map([("metrics", Value::from(text))])))
}

pub(crate) fn storage_status(_cx: &Ctx<'_>, _body: &Value) -> Served<Response> {
    Ok(data(Value::map([
        ("diskFull", Value::from(false)),
        ("error", Value::Nil),
        ("since", Value::Nil),
    ])))
}

pub(crate) fn compact_memory(_cx: &Ctx<'_>, _body: &Value) -> Served<Response> {
    Ok(Response::Done)
}

pub(crate) fn trim_events(cx: &Ctx<'_>, body: &Value) -> Served<Response> {
    let queue = match body.get("queue") {
        Some(Value::Str(s)) => s.as_str(),
        _ => "",
    };
    validate_queue_name(queue).map_err(|e| e.message)?;
    let max_length = match body.get("maxLength") {
        Some(Value::Int(n)) if *n >= 0 => Some(*n),
        Some(Value::F64(f)) if f.fract() == 0.0 && *f >= 0.0 && *f < 9_007_199_254_740_992.0 => {
            Some(*f as i64)
        }
        _ => None,
    };
    let Some(max_length) = max_length else {
        return Err("maxLength must be a non-negative safe integer".into());
    };
    let removed = cx.state().events.trim(queue, max_length as u64);
    Ok(data(Value::map([("removed", Value::from(removed))])))
}

pub(crate) fn list_webhooks(_cx: &Ctx<'_>, _body: &Value) -> Served<Response> {
    Ok(data(Value::map([
        ("webhooks", Value::Array(Vec::new())),
        (
            "stats",
            Value::map([("total", Value::Int(0)), ("enabled", Value::Int(0))]),
        ),
    ])))
}

pub(crate) fn remove_webhook(_cx: &Ctx<'_>, _body: &Value) -> Served<Response> {
    Err("Webhook not found".into())
}

pub(crate) fn set_webhook_enabled(_cx: &Ctx<'_>, _body: &Value) -> Served<Response> {
    Err("Webhook not found".into())
}
