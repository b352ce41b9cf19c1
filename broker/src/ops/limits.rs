//! Limits, served: only what this broker can answer truthfully.
//!
//! * Stall detection is enforced (see `State::check_stalled` and `State::expire_locks`), so its
//!   settings are served: `SetStallConfig` merges into a queue's settings as bunqueue's
//!   `setStallConfig` does, `GetStallConfig` answers them (bunqueue's defaults until set).
//! * A queue's rate limit and global concurrency limit are enforced by pulls
//!   (`crate::queue::limits`), so `RateLimit`, `RateLimitClear`, `SetConcurrency`,
//!   `ClearConcurrency` and `GetQueueLimits` are served. Their bodies are read here, not
//!   through the typed ops, because bunqueue keeps the numbers as JS numbers (`limit: 2.5`, a
//!   `"3"` coerced by `Number()`), which the typed requests round to integers.
//! * A group's counts are served (GetGroupJobsCount, GetGroupsJobsCount, GetGroupActiveCount):
//!   they only read what the broker keeps.
//! * Group controls (a group's concurrency, rate limit, pause, RateLimitGroup) are served in
//!   `crate::ops::groups`.

use autobatch_core::ops::{
    GetGroupActiveCount, GetGroupJobsCount, GetGroupsJobsCount, GetStallConfig, SetStallConfig,
    StallConfig,
};
use autobatch_core::wire::{Response, Value};

use crate::context::{Ctx, Served};

pub(crate) fn get_stall_config(cx: &Ctx<'_>, op: GetStallConfig) -> Served<StallConfig> {
    Ok(cx.state().stall_config(&op.queue))
}

pub(crate) fn set_stall_config(cx: &Ctx<'_>, op: SetStallConfig) -> Served<()> {
    cx.state().set_stall_config(&op.queue, &op.config);
    Ok(())
}

pub(crate) fn group_jobs_count(cx: &Ctx<'_>, op: GetGroupJobsCount) -> Served<u64> {
    Ok(cx.state().jobs().group_queued(&op.queue, &op.group_id))
}

pub(crate) fn groups_jobs_count(cx: &Ctx<'_>, op: GetGroupsJobsCount) -> Served<u64> {
    Ok(cx.state().jobs().groups_queued(&op.queue))
}

pub(crate) fn group_active_count(cx: &Ctx<'_>, op: GetGroupActiveCount) -> Served<u64> {
    Ok(cx.state().group_active_count(&op.queue, &op.group_id))
}

// The queue-wide limits read their raw body (see the module's note). bunqueue does not
// validate their queue name (see `queue_key`).

/// RateLimit: the limit is checked before the queue, as bunqueue's handler does.
pub(crate) fn rate_limit(cx: &Ctx<'_>, body: &Value) -> Served<Response> {
    let limit = limit(body)?;
    let queue = queue_key(body.get("queue"))?;
    let duration = to_finite_number(body.get("duration"));
    let ttl = to_finite_number(body.get("ttl"));
    cx.state()
        .set_rate_limit(&queue, limit, duration, ttl, cx.now);
    Ok(Response::Done)
}

pub(crate) fn rate_limit_clear(cx: &Ctx<'_>, body: &Value) -> Served<Response> {
    let queue = queue_key(body.get("queue"))?;
    cx.state().clear_rate_limit(&queue);
    Ok(Response::Done)
}

/// SetConcurrency: the limit is checked before the queue, as bunqueue's handler does.
pub(crate) fn set_concurrency(cx: &Ctx<'_>, body: &Value) -> Served<Response> {
    let limit = limit(body)?;
    let queue = queue_key(body.get("queue"))?;
    cx.state().set_concurrency(&queue, limit);
    Ok(Response::Done)
}

pub(crate) fn clear_concurrency(cx: &Ctx<'_>, body: &Value) -> Served<Response> {
    let queue = queue_key(body.get("queue"))?;
    cx.state().clear_concurrency(&queue);
    Ok(Response::Done)
}

pub(crate) fn get_queue_limits(cx: &Ctx<'_>, body: &Value) -> Served<Response> {
    let queue = queue_key(body.get("queue"))?;
    let max_jobs = max_jobs(body.get("maxJobs"));
    let limits = cx.state().queue_limits(&queue, max_jobs, cx.now);
    Ok(Response::Other(Value::map([(
        "data",
        Value::map([("limits", limits)]),
    )])))
}

/// The key the queue-wide limit commands use for `queue`, or bunqueue's error where its
/// queue hash throws on the value (a missing or null queue: JavaScriptCore's TypeError
/// text, which is what bunqueue answers). A name that is not a string (bunqueue keys its
/// maps by the value itself) gets a key no string name can take.
fn queue_key(v: Option<&Value>) -> Result<String, String> {
    match v {
        None | Some(Value::Undefined) => {
            Err("undefined is not an object (evaluating 'str.length')".into())
        }
        Some(Value::Nil) => Err("null is not an object (evaluating 'str.length')".into()),
        Some(Value::Str(s)) => Ok(s.clone()),
        Some(other) => Ok(format!("\0{other:?}")),
    }
}

/// The `limit` of RateLimit and SetConcurrency, refused as bunqueue refuses it.
fn limit(body: &Value) -> Result<f64, String> {
    to_finite_number(body.get("limit")).ok_or_else(|| "limit must be a finite number".to_owned())
}

/// JS `Number(v)` for the values a request carries, `None` where it is NaN or infinite.
fn js_number(v: &Value) -> Option<f64> {
    let n = match v {
        Value::Nil => 0.0,
        Value::Bool(b) => f64::from(u8::from(*b)),
        Value::Int(i) => *i as f64,
        Value::F64(f) => *f,
        Value::BigInt(i) => *i as f64,
        Value::Str(s) => {
            let s = s.trim();
            if s.is_empty() {
                0.0
            } else if s
                .bytes()
                .any(|b| b.is_ascii_alphabetic() && b != b'e' && b != b'E')
            {
                // Rust reads "inf" and "nan", JS does not; "Infinity" is not finite anyway.
                return None;
            } else {
                s.parse().ok()?
            }
        }
        // `Number([])` is 0 and `Number([x])` is `Number(String(x))`.
        Value::Array(a) if a.is_empty() => 0.0,
        Value::Array(a) if a.len() == 1 => match &a[0] {
            Value::Nil | Value::Undefined => 0.0,
            x @ (Value::Int(_) | Value::F64(_) | Value::Str(_)) => js_number(x)?,
            _ => return None,
        },
        _ => return None,
    };
    n.is_finite().then_some(n)
}

/// bunqueue's `toFiniteNumber`: absent (undefined or null) or not finite is `None`.
fn to_finite_number(v: Option<&Value>) -> Option<f64> {
    match v? {
        Value::Nil | Value::Undefined => None,
        v => js_number(v),
    }
}

/// GetQueueLimits' `maxJobs` as bunqueue's `consumed < maxJobs` reads it: absent
/// (undefined) is `None`; anything else compares as `Number()` would make it (`null` is 0,
/// a non-number NaN, which never compares).
fn max_jobs(v: Option<&Value>) -> Option<f64> {
    match v? {
        Value::Undefined => None,
        v => Some(js_number(v).unwrap_or(f64::NAN)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_coerce_as_js_does() {
        let n = |v: Value| to_finite_number(Some(&v));
        assert_eq!(n(Value::Int(3)), Some(3.0));
        assert_eq!(n(Value::F64(2.5)), Some(2.5));
        assert_eq!(n(Value::from(" 7 ")), Some(7.0));
        assert_eq!(n(Value::from("")), Some(0.0));
        assert_eq!(n(Value::from("1e3")), Some(1000.0));
        assert_eq!(n(Value::from("inf")), None);
        assert_eq!(n(Value::from("five")), None);
        assert_eq!(n(Value::from(true)), Some(1.0));
        assert_eq!(n(Value::Nil), None, "null is absent for toFiniteNumber");
        assert_eq!(n(Value::Array(vec![])), Some(0.0));
        assert_eq!(n(Value::Map(vec![])), None);
        assert_eq!(to_finite_number(None), None);
        assert_eq!(max_jobs(Some(&Value::Nil)), Some(0.0), "null compares as 0");
        assert_eq!(max_jobs(Some(&Value::Undefined)), None);
        assert!(max_jobs(Some(&Value::from("x"))).is_some_and(f64::is_nan));
    }

    #[test]
    fn queue_keys() {
        assert_eq!(queue_key(Some(&Value::from("q"))), Ok("q".to_owned()));
        assert!(queue_key(None).unwrap_err().starts_with("undefined is not"));
        assert!(queue_key(Some(&Value::Nil))
            .unwrap_err()
            .starts_with("null is not"));
        let five = queue_key(Some(&Value::Int(5))).expect("a key");
        assert_ne!(five, "5", "a number is not the string name");
    }
}
