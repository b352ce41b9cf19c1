//! UpdateParent and MoveToWaitingChildren, served (see `crate::queue::flow::relink`). Both
//! read their raw body: bunqueue takes a job id as a string or a number.

use autobatch_core::wire::{Response, Value};

use crate::context::{Ctx, Served};

/// bunqueue's `jobId()`: a string as it is, a number as its text.
fn job_id(v: Option<&Value>) -> String {
    match v {
        Some(Value::Str(s)) => s.clone(),
        Some(Value::Int(i)) => i.to_string(),
        Some(Value::F64(f)) => crate::events::js_number(*f)
            .as_i64()
            .map_or_else(|| f.to_string(), |i| i.to_string()),
        Some(Value::Nil) => "null".into(),
        _ => "undefined".into(),
    }
}

pub(crate) fn update_parent(cx: &Ctx<'_>, body: &Value) -> Served<Response> {
    let child = job_id(body.get("childId"));
    let parent = job_id(body.get("parentId"));
    cx.state().update_parent(&child, &parent)?;
    Ok(Response::Done)
}

pub(crate) fn move_to_waiting_children(cx: &Ctx<'_>, body: &Value) -> Served<Response> {
    let id = job_id(body.get("id"));
    let token = body.get("token").and_then(Value::as_str);
    let moved = cx
        .state()
        .move_to_waiting_children(&id, token)
        .map_err(|e| e.to_string())?;
    if !moved {
        return Err("Job is not active".into());
    }
    Ok(Response::Other(Value::map([(
        "data",
        Value::map([("moved", Value::from(true))]),
    )])))
}
