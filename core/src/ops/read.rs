//! Small readers for the fields of request and reply maps, shared by every operation.
//!
//! Reply readers (`reply_*`) fail with [`ProtocolError::BadField`]: a reply that lacks what its
//! command promises is the server's fault. Request readers (`req_*`) fail with bunqueue's own
//! validation message, as [`ValidationError`]: a bad request is the client's fault. Both are
//! named by what they give: `req_str` a required field, `req_opt_str` an optional one,
//! `req_str_or_empty` the server's default in place of anything else.
//!
//! Numbers are read as JS reads them: any integer or float form, since msgpackr sends
//! integers outside the int32/uint32 range (timestamps, large counts) as float64.

use crate::wire::{ProtocolError, ValidationError, Value};

/// A reply that lacks what its command promises: `field` and what is wrong with it.
pub fn bad(field: &'static str, problem: &'static str) -> ProtocolError {
    ProtocolError::BadField { field, problem }
}

/// A reply field that must be present.
/// Errors: `BadField { field, problem: "missing" }`.
pub fn reply_field<'a>(v: &'a Value, field: &'static str) -> Result<&'a Value, ProtocolError> {
    match v.get(field) {
        None | Some(Value::Undefined) => Err(bad(field, "missing")),
        Some(x) => Ok(x),
    }
}

/// A reply field that may be absent, `null` or `undefined`.
pub fn reply_opt<'a>(v: &'a Value, field: &str) -> Option<&'a Value> {
    v.get(field).filter(|x| !x.is_nullish())
}

/// A required boolean reply field.
/// Errors: Missing or not a boolean.
pub fn reply_bool(v: &Value, field: &'static str) -> Result<bool, ProtocolError> {
    reply_field(v, field)?
        .as_bool()
        .ok_or(bad(field, "not a boolean"))
}

/// A required numeric reply field, as an integer (floats are truncated, as JS code indexing
/// with them would).
/// Errors: Missing or not a number.
pub fn reply_i64(v: &Value, field: &'static str) -> Result<i64, ProtocolError> {
    let x = reply_field(v, field)?;
    number(x)
        .map(|f| f as i64)
        .ok_or(bad(field, "not a number"))
}

/// A required non-negative count.
/// Errors: Missing, not a number, or negative.
pub fn reply_u64(v: &Value, field: &'static str) -> Result<u64, ProtocolError> {
    let n = reply_i64(v, field)?;
    u64::try_from(n).map_err(|_| bad(field, "negative"))
}

/// A required string reply field (ids given as numbers are accepted, in decimal).
/// Errors: Missing or not a string.
pub fn reply_str(v: &Value, field: &'static str) -> Result<String, ProtocolError> {
    text(reply_field(v, field)?).ok_or(bad(field, "not a string"))
}

/// An optional string reply field.
pub fn reply_opt_str(v: &Value, field: &str) -> Option<String> {
    reply_opt(v, field).and_then(text)
}

/// A required array reply field.
/// Errors: Missing or not an array.
pub fn reply_array<'a>(v: &'a Value, field: &'static str) -> Result<&'a [Value], ProtocolError> {
    reply_field(v, field)?
        .as_array()
        .ok_or(bad(field, "not an array"))
}

/// A required array of strings.
/// Errors: Missing, not an array, or an entry that is not a string.
pub fn reply_strings(v: &Value, field: &'static str) -> Result<Vec<String>, ProtocolError> {
    reply_array(v, field)?
        .iter()
        .map(|x| text(x).ok_or(bad(field, "an entry is not a string")))
        .collect()
}

/// A number in any of its wire forms.
pub fn number(v: &Value) -> Option<f64> {
    v.as_f64()
}

/// Text: a string as it is, a number (an id the server allows as a number) in decimal.
pub fn text(v: &Value) -> Option<String> {
    match v {
        Value::Str(s) => Some(s.clone()),
        Value::Int(i) => Some(i.to_string()),
        Value::F64(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Some((*f as i64).to_string()),
        Value::F64(f) => Some(f.to_string()),
        _ => None,
    }
}

/// A request's string field, required and non-empty (`<field> is required` otherwise, the
/// wording of bunqueue's handlers).
/// Errors: Absent, empty or not text.
pub fn req_str(v: &Value, field: &'static str) -> Result<String, ValidationError> {
    match v.get(field).and_then(text) {
        Some(s) if !s.is_empty() => Ok(s),
        _ => Err(ValidationError::new(field, format!("{field} is required"))),
    }
}

/// A request's optional string field.
pub fn req_opt_str(v: &Value, field: &str) -> Option<String> {
    v.get(field).filter(|x| !x.is_nullish()).and_then(text)
}

/// A request's string field as the server takes it (anything but a string: empty).
pub fn req_str_or_empty(v: &Value, field: &str) -> String {
    v.get(field)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// A request's queue name, validated as bunqueue validates queue names.
/// Errors: bunqueue's message for an empty, long or badly formed name.
pub fn req_queue(v: &Value) -> Result<String, ValidationError> {
    let queue = req_str_or_empty(v, "queue");
    crate::wire::validate_queue_name(&queue)?;
    Ok(queue)
}

/// A request's optional number, read as the server reads it: absent, `undefined` or `null` is
/// none; anything else must be a finite number.
/// Errors: `<field> must be a number` when present and not a finite number (a string, a
/// BigInt, NaN, ±Infinity).
pub fn req_opt_f64(v: &Value, field: &'static str) -> Result<Option<f64>, ValidationError> {
    match v.get(field) {
        None | Some(Value::Nil) | Some(Value::Undefined) => Ok(None),
        Some(x) => match number(x) {
            Some(f) if f.is_finite() => Ok(Some(f)),
            _ => Err(ValidationError::new(
                field,
                format!("{field} must be a number"),
            )),
        },
    }
}

/// A request's optional number, as an integer (as [`req_opt_f64`], a fraction rounded toward
/// zero: the server range-checks these without requiring integers).
pub fn req_opt_i64(v: &Value, field: &'static str) -> Result<Option<i64>, ValidationError> {
    Ok(req_opt_f64(v, field)?.map(|f| f as i64))
}

/// A request's optional object (anything but a map: none).
pub fn req_map<'a>(v: &'a Value, field: &str) -> Option<&'a Value> {
    v.get(field).filter(|m| matches!(m, Value::Map(_)))
}

/// A list of values as a [`Value::Array`].
pub fn array<T: Into<Value>>(items: impl IntoIterator<Item = T>) -> Value {
    Value::Array(items.into_iter().map(Into::into).collect())
}
