//! The pre-2.8.56 job envelope, as bunqueue 2.9.5's `normalizeLegacyJobPayload` reads it on
//! every add path: a job sent without `name` whose `data` is a map with a string `name` is named
//! by it, and that key leaves its data (`{data: {name: "a", k: 1}}` → name `a`, data `{k: 1}`).
//! The published SDKs still send jobs this way.
//!
//! The broker keeps payloads encoded, so the core's decoding (which unpacks a decoded map) sees
//! only the bytes: the envelope is unpacked here, from the request as sent. A payload is decoded
//! only for a job sent without a name.

use autobatch_core::wire::{JobSpec, RawValue, Value};

/// bunqueue's `validateJobName` text.
pub(crate) const BAD_JOB_NAME: &str =
    "Job name must be a non-empty string of at most 256 characters";

/// A job name bunqueue accepts: 1 to 256 UTF-16 units.
pub(crate) fn check_job_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.encode_utf16().count() > 256 {
        return Err(BAD_JOB_NAME.into());
    }
    Ok(())
}

/// The name and data a job sent as `item` (a PUSH body, a PUSHB item, a flow job's input) is
/// added with, `data` being its payload as decoded so far (encoded or not): `None` when the
/// item names the job itself or its data carries no string `name`, so nothing changes.
pub(crate) fn legacy(item: &Value, data: &Value) -> Result<Option<(String, Value)>, String> {
    if !item
        .get("name")
        .is_none_or(|n| matches!(n, Value::Undefined))
    {
        return Ok(None);
    }
    let (decoded, encoded) = match data {
        Value::Raw(raw) => match raw.decode() {
            Ok(v) => (v, true),
            Err(_) => return Ok(None),
        },
        Value::Map(_) => (data.clone(), false),
        _ => return Ok(None),
    };
    let Value::Map(entries) = decoded else {
        return Ok(None);
    };
    let Some(Value::Str(name)) = entries
        .iter()
        .find(|(k, _)| k.as_str() == Some("name"))
        .map(|(_, v)| v)
    else {
        return Ok(None);
    };
    check_job_name(name)?;
    let name = name.clone();
    let rest = Value::Map(
        entries
            .into_iter()
            .filter(|(k, _)| k.as_str() != Some("name"))
            .collect(),
    );
    let rest = if encoded {
        match RawValue::from_bytes(&rest.to_bytes()) {
            Ok(raw) => Value::Raw(raw),
            Err(_) => rest,
        }
    } else {
        rest
    };
    Ok(Some((name, rest)))
}

/// Applies [`legacy`] to a decoded job.
fn unpack(job: &mut JobSpec, item: &Value) -> Result<(), String> {
    if let Some((name, data)) = legacy(item, &job.data)? {
        job.name = name;
        job.data = data;
    }
    Ok(())
}

/// PUSH: the job of request `body`.
pub(crate) fn push(job: &mut JobSpec, body: &Value) -> Result<(), String> {
    unpack(job, body)
}

/// PUSHB: each job of request `body` (`jobs[i]: <error>` for a bad name, as bunqueue words it).
pub(crate) fn push_batch(jobs: &mut [JobSpec], body: &Value) -> Result<(), String> {
    let items = body.get("jobs").and_then(Value::as_array).unwrap_or(&[]);
    for (i, (job, item)) in jobs.iter_mut().zip(items).enumerate() {
        unpack(job, item).map_err(|e| format!("jobs[{i}]: {e}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(v: Value) -> Value {
        Value::Raw(RawValue::from_bytes(&v.to_bytes()).unwrap())
    }

    #[test]
    fn an_encoded_envelope_is_unpacked() {
        let data = encoded(Value::map([
            ("name", Value::from("a")),
            ("k", Value::Int(1)),
        ]));
        let body = Value::map([("queue", Value::from("q")), ("data", data.clone())]);
        let mut job = JobSpec::new("default", data);
        push(&mut job, &body).unwrap();
        assert_eq!(job.name, "a");
        assert_eq!(
            job.data.expanded().unwrap(),
            Value::map([("k", Value::Int(1))])
        );
        assert!(matches!(job.data, Value::Raw(_)), "kept encoded");
    }

    #[test]
    fn a_named_job_keeps_its_data() {
        let data = encoded(Value::map([("name", Value::from("a"))]));
        let body = Value::map([("name", Value::from("n")), ("data", data.clone())]);
        let mut job = JobSpec::new("n", data.clone());
        push(&mut job, &body).unwrap();
        assert_eq!((job.name.as_str(), &job.data), ("n", &data));
    }

    #[test]
    fn a_non_string_name_in_data_is_data() {
        let data = encoded(Value::map([("name", Value::Int(3))]));
        let body = Value::map([("data", data.clone())]);
        let mut job = JobSpec::new("default", data.clone());
        push(&mut job, &body).unwrap();
        assert_eq!((job.name.as_str(), &job.data), ("default", &data));
    }

    #[test]
    fn a_bad_legacy_name_is_refused_with_its_index() {
        let good = encoded(Value::map([("name", Value::from("ok"))]));
        let bad = encoded(Value::map([("name", Value::from(""))]));
        let body = Value::map([(
            "jobs",
            Value::Array(vec![
                Value::map([("data", good.clone())]),
                Value::map([("data", bad.clone())]),
            ]),
        )]);
        let mut jobs = vec![JobSpec::new("default", good), JobSpec::new("default", bad)];
        let e = push_batch(&mut jobs, &body).unwrap_err();
        assert_eq!(e, format!("jobs[1]: {BAD_JOB_NAME}"));
    }
}
