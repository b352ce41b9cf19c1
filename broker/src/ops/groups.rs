//! Group controls, served as bunqueue 2.9.5's `handleGroupCommand` serves them (the state is
//! `crate::queue::limits::groups`): PauseGroup, ResumeGroup, IsGroupPaused, RateLimitGroup,
//! SetGroupConcurrency, GetGroupConcurrency, RemoveGroupConcurrency, SetGroupRateLimit,
//! GetGroupRateLimit, RemoveGroupRateLimit and GetGroupRateLimitTtl.
//!
//! Each but the last is read and answered by its op in `autobatch_core::ops`, whose kinds check
//! the queue name first, then the group id, then the numbers, with bunqueue's messages.
//! GetGroupRateLimitTtl reads its raw body: bunqueue hands its `maxJobs` to the window as sent,
//! whatever it is, where the op keeps only a count.

use std::time::Duration;

use autobatch_core::ops::{
    GetGroupConcurrency, GetGroupRateLimit, GroupRateLimit, IsGroupPaused, PauseGroup,
    RateLimitGroup, RemoveGroupConcurrency, RemoveGroupRateLimit, ResumeGroup, SetGroupConcurrency,
    SetGroupRateLimit,
};
use autobatch_core::wire::{validate_queue_name, Response, Value};

use crate::context::{Ctx, Served};
use crate::queue::limits::groups::{group_id, GroupRate};

/// Whole milliseconds of a span the op read from a positive safe integer.
fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

pub(crate) fn pause(cx: &Ctx<'_>, op: PauseGroup) -> Served<bool> {
    let mut state = cx.state();
    let changed = state.groups().pause(&op.queue, &op.group_id);
    state.keep_group(&op.queue, &op.group_id);
    Ok(changed)
}

pub(crate) fn resume(cx: &Ctx<'_>, op: ResumeGroup) -> Served<bool> {
    let mut state = cx.state();
    let changed = state.groups().resume(&op.queue, &op.group_id);
    state.keep_group(&op.queue, &op.group_id);
    if changed {
        state.jobs().wake(&op.queue);
    }
    Ok(changed)
}

pub(crate) fn is_paused(cx: &Ctx<'_>, op: IsGroupPaused) -> Served<bool> {
    Ok(cx.state().groups().is_paused(&op.queue, &op.group_id))
}

pub(crate) fn rate_limit(cx: &Ctx<'_>, op: RateLimitGroup) -> Served<()> {
    let duration = ms(op.duration);
    cx.state()
        .groups()
        .rate_limit(&op.queue, &op.group_id, duration, cx.now);
    Ok(())
}

pub(crate) fn set_concurrency(cx: &Ctx<'_>, op: SetGroupConcurrency) -> Served<()> {
    let mut state = cx.state();
    state
        .groups()
        .set_concurrency(&op.queue, &op.group_id, op.concurrency);
    state.keep_group(&op.queue, &op.group_id);
    state.jobs().wake(&op.queue);
    Ok(())
}

pub(crate) fn get_concurrency(cx: &Ctx<'_>, op: GetGroupConcurrency) -> Served<Option<u64>> {
    Ok(cx.state().groups().concurrency(&op.queue, &op.group_id))
}

pub(crate) fn remove_concurrency(cx: &Ctx<'_>, op: RemoveGroupConcurrency) -> Served<bool> {
    let mut state = cx.state();
    let removed = state.groups().remove_concurrency(&op.queue, &op.group_id);
    state.keep_group(&op.queue, &op.group_id);
    state.jobs().wake(&op.queue);
    Ok(removed > 0)
}

pub(crate) fn set_rate_limit(cx: &Ctx<'_>, op: SetGroupRateLimit) -> Served<()> {
    let rate = GroupRate {
        max: op.limit.max,
        duration: ms(op.limit.duration),
    };
    let mut state = cx.state();
    state.groups().set_rate(&op.queue, &op.group_id, rate);
    state.keep_group(&op.queue, &op.group_id);
    state.jobs().wake(&op.queue);
    Ok(())
}

pub(crate) fn get_rate_limit(
    cx: &Ctx<'_>,
    op: GetGroupRateLimit,
) -> Served<Option<GroupRateLimit>> {
    let rate = cx.state().groups().rate(&op.queue, &op.group_id);
    Ok(rate.map(|r| GroupRateLimit::new(r.max, Duration::from_millis(r.duration))))
}

pub(crate) fn remove_rate_limit(cx: &Ctx<'_>, op: RemoveGroupRateLimit) -> Served<bool> {
    let mut state = cx.state();
    let removed = state.groups().remove_rate(&op.queue, &op.group_id);
    state.keep_group(&op.queue, &op.group_id);
    state.jobs().wake(&op.queue);
    Ok(removed > 0)
}

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
    let ttl = crate::events::js_number(ttl);
    Ok(Response::Other(Value::map([(
        "data",
        Value::map([("ttl", ttl)]),
    )])))
}
