//! Job schedulers, served (see `crate::queue::cron` for what they do in this broker):
//! `Cron` (upsert), `CronGet`, `CronList` and `CronDelete`, with bunqueue 2.9.5's replies
//! (`cron` / `crons` as its `cronData`) and error texts.

use autobatch_core::ops::{CronDelete, CronGet, CronList, CronUpsert, Operation};
use autobatch_core::wire::server::ServeOperation;
use autobatch_core::wire::{Response, Value};

use crate::dispatch::{Conn, Shared};

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

/// Serves the scheduler commands.
pub(super) fn serve(
    shared: &Shared,
    _conn: &Conn,
    cmd: &str,
    body: &Value,
    now: f64,
) -> Option<Result<Response, String>> {
    Some(match cmd {
        CronUpsert::NAME => payload(body).and_then(|(job_name, data)| {
            // bunqueue reads the payload before it checks the timing.
            let mut op = CronUpsert::read_request(body).map_err(|e| e.to_string())?;
            op.job_name = Some(job_name);
            op.data = data;
            let cron = shared.lock().crons().upsert(op, now)?;
            Ok(reply("cron", cron))
        }),
        CronGet::NAME => {
            let name = CronGet::read_request(body)
                .map(|op| op.name)
                .unwrap_or_default();
            match shared.lock().crons().get(&name) {
                Some(c) => Ok(reply("cron", c.to_value())),
                None => Err("Cron job not found".into()),
            }
        }
        CronList::NAME => {
            let list = shared
                .lock()
                .crons()
                .list()
                .iter()
                .map(|c| c.to_value())
                .collect();
            Ok(reply("crons", Value::Array(list)))
        }
        CronDelete::NAME => {
            let name = CronDelete::read_request(body)
                .map(|op| op.name)
                .unwrap_or_default();
            if shared.lock().crons().remove(&name) {
                Ok(Response::Done)
            } else {
                Err("Cron job not found".into())
            }
        }
        _ => return None,
    })
}
