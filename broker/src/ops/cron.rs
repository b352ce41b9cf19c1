//! Job schedulers, served (see `crate::queue::cron` for what they do in this broker):
//! `Cron` (upsert), `CronGet`, `CronList` and `CronDelete`, with bunqueue 2.9.5's replies
//! (`cron` / `crons` as its `cronData`) and error texts.

use autobatch_core::ops::{CronDelete, CronGet, CronList, CronUpsert};
use autobatch_core::wire::{Response, Value};

use crate::context::{Ctx, Served};

fn reply(key: &'static str, v: Value) -> Response {
    Response::Other(Value::map([("ok", Value::from(true)), (key, v)]))
}

/// The name and data of the jobs, as bunqueue's `normalizeLegacyJobPayload`: `jobName` when
/// sent (any value but a non-empty string of at most 256 UTF-16 units refused, null too);
/// without it, a data map's string `name` is the job name and the rest its data (the
/// pre-2.8.56 envelope); otherwise `default`.
fn payload(body: &Value) -> Result<(String, Value), String> {
    let data = body.get("data").cloned().unwrap_or(Value::Undefined);
    let name = match body.get("jobName") {
        // A payload kept encoded is decoded only here, for the rare request without jobName.
        None | Some(Value::Undefined) => match &data.expanded().unwrap_or(Value::Undefined) {
            Value::Map(m) => match m.iter().find(|(k, _)| k.as_str() == Some("name")) {
                Some((_, Value::Str(n))) => {
                    let n = n.clone();
                    let rest = m
                        .iter()
                        .filter(|(k, _)| k.as_str() != Some("name"))
                        .cloned()
                        .collect();
                    check_job_name(&n)?;
                    return Ok((n, Value::Map(rest)));
                }
                _ => "default".to_owned(),
            },
            _ => "default".to_owned(),
        },
        Some(Value::Str(n)) => n.clone(),
        Some(_) => return Err(BAD_JOB_NAME.into()),
    };
    check_job_name(&name)?;
    Ok((name, data))
}

/// bunqueue's `validateJobName` text.
const BAD_JOB_NAME: &str = "Job name must be a non-empty string of at most 256 characters";

fn check_job_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.encode_utf16().count() > 256 {
        return Err(BAD_JOB_NAME.into());
    }
    Ok(())
}

/// Cron (an upsert). bunqueue reads the job's name and data before it checks the timing, so
/// a request wrong in both is refused for its name.
pub(crate) fn upsert(cx: &Ctx<'_>, body: &Value, request: Served<CronUpsert>) -> Served<Response> {
    let (job_name, data) = payload(body)?;
    let mut op = request?;
    op.job_name = Some(job_name);
    op.data = data;
    let name = op.name.clone();
    let mut state = cx.state();
    let cron = state.crons().upsert(op, cx.now)?;
    state.keep_cron(&name);
    Ok(reply("cron", cron))
}

pub(crate) fn get(cx: &Ctx<'_>, op: CronGet) -> Served<Response> {
    match cx.state().crons().get(&op.name) {
        Some(c) => Ok(reply("cron", c.to_value())),
        None => Err("Cron job not found".into()),
    }
}

pub(crate) fn list(cx: &Ctx<'_>, _: CronList) -> Served<Response> {
    let list = cx
        .state()
        .crons()
        .list()
        .iter()
        .map(|c| c.to_value())
        .collect();
    Ok(reply("crons", Value::Array(list)))
}

pub(crate) fn delete(cx: &Ctx<'_>, op: CronDelete) -> Served<Response> {
    let mut state = cx.state();
    if state.crons().remove(&op.name) {
        state.keep_cron(&op.name);
        Ok(Response::Done)
    } else {
        Err("Cron job not found".into())
    }
}
