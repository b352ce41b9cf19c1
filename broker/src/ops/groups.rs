//! Group controls, served as bunqueue 2.9.5's `handleGroupCommand` serves them (the state is
//! `crate::queue::limits::groups`): PauseGroup, ResumeGroup, IsGroupPaused, RateLimitGroup,
//! SetGroupConcurrency, GetGroupConcurrency, RemoveGroupConcurrency, SetGroupRateLimit,
//! GetGroupRateLimit, RemoveGroupRateLimit and GetGroupRateLimitTtl.
//!
//! Each reads its raw body: the queue name is checked first, then the group id, then the
//! numbers, with bunqueue's messages.

use autobatch_core::wire::{validate_queue_name, Response, Value};

use crate::context::{Ctx, Served};
use crate::queue::limits::groups::{group_id, positive_safe_integer, GroupRate};

/// The queue and group of a group command, checked as bunqueue checks them.
fn target(body: &Value) -> Served<(String, String)> {
    let queue = match body.get("queue") {
        Some(Value::Str(s)) => s.clone(),
        None | Some(Value::Undefined | Value::Nil) => String::new(),
        Some(_) => return Err("Queue name contains invalid characters".into()),
    };
    validate_queue_name(&queue).map_err(|e| e.message)?;
    Ok((queue, group_id(body.get("groupId"))?))
}

/// `{ok: true, data: {<key>: <value>}}`.
fn data(key: &str, value: Value) -> Response {
    Response::Other(Value::map([("data", Value::map([(key, value)]))]))
}

fn opt_int(v: Option<u64>) -> Value {
    v.map_or(Value::Nil, |n| Value::Int(n as i64))
}

pub(crate) fn pause(cx: &Ctx<'_>, body: &Value) -> Served<Response> {
    let (queue, group) = target(body)?;
    let mut state = cx.state();
    let changed = state.groups().pause(&queue, &group);
    state.keep_group(&queue, &group);
    Ok(data("changed", Value::from(changed)))
}

pub(crate) fn resume(cx: &Ctx<'_>, body: &Value) -> Served<Response> {
    let (queue, group) = target(body)?;
    let mut state = cx.state();
    let changed = state.groups().resume(&queue, &group);
    state.keep_group(&queue, &group);
    if changed {
        state.wake(&queue);
    }
    Ok(data("changed", Value::from(changed)))
}

pub(crate) fn is_paused(cx: &Ctx<'_>, body: &Value) -> Served<Response> {
    let (queue, group) = target(body)?;
    let paused = cx.state().groups().is_paused(&queue, &group);
    Ok(data("paused", Value::from(paused)))
}

pub(crate) fn rate_limit(cx: &Ctx<'_>, body: &Value) -> Served<Response> {
    let (queue, group) = target(body)?;
    let duration = positive_safe_integer(body.get("duration"), "duration")?;
    cx.state()
        .groups()
        .rate_limit(&queue, &group, duration, cx.now);
    Ok(Response::Done)
}

pub(crate) fn set_concurrency(cx: &Ctx<'_>, body: &Value) -> Served<Response> {
    let (queue, group) = target(body)?;
    let concurrency = positive_safe_integer(body.get("concurrency"), "concurrency")?;
    let mut state = cx.state();
    state.groups().set_concurrency(&queue, &group, concurrency);
    state.keep_group(&queue, &group);
    state.wake(&queue);
    Ok(Response::Done)
}

pub(crate) fn get_concurrency(cx: &Ctx<'_>, body: &Value) -> Served<Response> {
    let (queue, group) = target(body)?;
    let concurrency = cx.state().groups().concurrency(&queue, &group);
    Ok(data("concurrency", opt_int(concurrency)))
}

pub(crate) fn remove_concurrency(cx: &Ctx<'_>, body: &Value) -> Served<Response> {
    let (queue, group) = target(body)?;
    let mut state = cx.state();
    let removed = state.groups().remove_concurrency(&queue, &group);
    state.keep_group(&queue, &group);
    state.wake(&queue);
    Ok(data("removed", Value::Int(removed as i64)))
}

pub(crate) fn set_rate_limit(cx: &Ctx<'_>, body: &Value) -> Served<Response> {
    let (queue, group) = target(body)?;
    let max = positive_safe_integer(body.get("max"), "max")?;
    let duration = positive_safe_integer(body.get("duration"), "duration")?;
    let mut state = cx.state();
    state
        .groups()
        .set_rate(&queue, &group, GroupRate { max, duration });
    state.keep_group(&queue, &group);
    state.wake(&queue);
    Ok(Response::Done)
}

pub(crate) fn get_rate_limit(cx: &Ctx<'_>, body: &Value) -> Served<Response> {
    let (queue, group) = target(body)?;
    let rate = cx.state().groups().rate(&queue, &group);
    Ok(data("limit", rate.map_or(Value::Nil, GroupRate::to_value)))
}

pub(crate) fn remove_rate_limit(cx: &Ctx<'_>, body: &Value) -> Served<Response> {
    let (queue, group) = target(body)?;
    let mut state = cx.state();
    let removed = state.groups().remove_rate(&queue, &group);
    state.keep_group(&queue, &group);
    state.wake(&queue);
    Ok(data("removed", Value::Int(removed as i64)))
}

pub(crate) fn rate_limit_ttl(cx: &Ctx<'_>, body: &Value) -> Served<Response> {
    let (queue, group) = target(body)?;
    let max_jobs = match body.get("maxJobs") {
        None | Some(Value::Undefined) => None,
        Some(v) => Some(v.as_f64().unwrap_or(f64::NAN)),
    };
    let ttl = cx
        .state()
        .groups()
        .rate_ttl(&queue, &group, max_jobs, cx.now);
    Ok(data("ttl", crate::events::js_number(ttl)))
}
