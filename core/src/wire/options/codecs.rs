//! The codecs of a job's options: how each kind of option is written and how the server
//! role reads it, as bunqueue reads it.

use std::time::Duration;

use super::super::job::{from_millis, id_text, millis, Backoff, Debounce, Dedup, Repeat};
use super::super::{ChildFailure, ChildFailures, JobOptions, ValidationError, Value};
use super::codec::{Codec, One};
use super::sink::Sink;
use crate::ops::read::{req_opt_f64, req_opt_i64};

/// An integer the server refuses with a fraction (`maxAttempts`).
pub(in crate::wire) struct Int;

impl One for Int {
    type Value = i64;
    fn put<S: Sink>(s: &mut S, v: &i64) {
        s.int(*v);
    }
    fn take(
        item: &Value,
        key: &'static str,
        _: &JobOptions,
    ) -> Result<Option<i64>, ValidationError> {
        opt_int(item, key)
    }
}

/// An integer option: a number as [`req_opt_f64`] reads it, refused when it has a fraction.
pub(in crate::wire) fn opt_int(
    v: &Value,
    field: &'static str,
) -> Result<Option<i64>, ValidationError> {
    match req_opt_f64(v, field)? {
        None => Ok(None),
        Some(f) if f.fract() == 0.0 => Ok(Some(f as i64)),
        Some(_) => Err(ValidationError::new(
            field,
            format!("{field} must be an integer"),
        )),
    }
}

/// The priority: an [`Int`], read with bunqueue's group-priority wording when the job has a
/// `groupId`.
pub(in crate::wire) struct Priority;

impl One for Priority {
    type Value = i64;
    fn put<S: Sink>(s: &mut S, v: &i64) {
        s.int(*v);
    }
    fn take(
        item: &Value,
        key: &'static str,
        so_far: &JobOptions,
    ) -> Result<Option<i64>, ValidationError> {
        if so_far.group_id.is_none() {
            return opt_int(item, key);
        }
        let bad = |m: &str| ValidationError::new(key, m);
        match item.get(key) {
            None | Some(Value::Undefined) => Ok(None),
            Some(x) => match x.as_f64() {
                Some(f) if f.is_finite() && matches!(x, Value::Int(_) | Value::F64(_)) => {
                    if f.fract() == 0.0 {
                        Ok(Some(f as i64))
                    } else {
                        Err(bad("group.priority must be an integer"))
                    }
                }
                _ => Err(bad("group.priority must be a finite number")),
            },
        }
    }
}

/// A number the server stores without checking it (`keepLogs`, …): kept when numeric.
pub(in crate::wire) struct Count;

impl One for Count {
    type Value = i64;
    fn put<S: Sink>(s: &mut S, v: &i64) {
        s.int(*v);
    }
    fn take(
        item: &Value,
        key: &'static str,
        _: &JobOptions,
    ) -> Result<Option<i64>, ValidationError> {
        Ok(item.get(key).and_then(Value::as_f64).map(|f| f as i64))
    }
}

/// A time span, sent in whole milliseconds; the ranges are checked apart, on the wire value
/// (see `RangeInput`), so a negative one is refused rather than read as zero.
pub(in crate::wire) struct Millis;

impl One for Millis {
    type Value = Duration;
    fn put<S: Sink>(s: &mut S, v: &Duration) {
        s.int(millis(*v));
    }
    fn take(
        item: &Value,
        key: &'static str,
        _: &JobOptions,
    ) -> Result<Option<Duration>, ValidationError> {
        Ok(req_opt_i64(item, key)?.map(from_millis))
    }
}

/// A flag; the server coerces any value with `Boolean()`.
pub(in crate::wire) struct Flag;

impl One for Flag {
    type Value = bool;
    fn put<S: Sink>(s: &mut S, v: &bool) {
        s.bool(*v);
    }
    fn take(
        item: &Value,
        key: &'static str,
        _: &JobOptions,
    ) -> Result<Option<bool>, ValidationError> {
        Ok(opt_bool(item, key))
    }
}

/// The failure policies: a flag of its own each, `true` for those set, in
/// [`ChildFailure::ALL`]'s order; the row's key is the first of them. The server reads each
/// flag as a [`Flag`].
pub(in crate::wire) struct ChildFailureFlags;

impl Codec for ChildFailureFlags {
    type Field = ChildFailures;
    fn is_set(v: &ChildFailures) -> bool {
        !v.is_empty()
    }
    fn write<S: Sink>(s: &mut S, _key: &str, v: &ChildFailures) -> usize {
        let mut n = 0;
        for p in v.iter() {
            s.str(p.key()).bool(true);
            n += 1;
        }
        n
    }
    fn read(
        item: &Value,
        _key: &'static str,
        _: &JobOptions,
    ) -> Result<ChildFailures, ValidationError> {
        let mut set = ChildFailures::new();
        for p in ChildFailure::ALL {
            set.set(p, opt_bool(item, p.key()) == Some(true));
        }
        Ok(set)
    }
}

/// A value read as JavaScript's `Boolean()` reads it; absent when not sent.
pub(in crate::wire) fn opt_bool(v: &Value, field: &str) -> Option<bool> {
    match v.get(field) {
        None | Some(Value::Undefined) => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(Value::Nil) => Some(false),
        Some(Value::Int(i)) => Some(*i != 0),
        Some(Value::F64(f)) => Some(*f != 0.0 && !f.is_nan()),
        Some(Value::Str(s)) => Some(!s.is_empty()),
        Some(_) => Some(true),
    }
}

/// A string (`uniqueKey`); anything else reads as absent.
pub(in crate::wire) struct Text;

impl One for Text {
    type Value = String;
    fn put<S: Sink>(s: &mut S, v: &String) {
        s.str(v);
    }
    fn take(
        item: &Value,
        key: &'static str,
        _: &JobOptions,
    ) -> Result<Option<String>, ValidationError> {
        Ok(item.get(key).and_then(Value::as_str).map(str::to_owned))
    }
}

/// A job id: a string, or a number the server takes as its decimal text.
pub(in crate::wire) struct IdText;

impl One for IdText {
    type Value = String;
    fn put<S: Sink>(s: &mut S, v: &String) {
        s.str(v);
    }
    fn take(
        item: &Value,
        key: &'static str,
        _: &JobOptions,
    ) -> Result<Option<String>, ValidationError> {
        Ok(item.get(key).and_then(id_text))
    }
}

/// The group id: a string bunqueue checks before any other option.
pub(in crate::wire) struct GroupId;

impl One for GroupId {
    type Value = String;
    const READ_RANK: u8 = 3;
    fn put<S: Sink>(s: &mut S, v: &String) {
        s.str(v);
    }
    fn take(
        item: &Value,
        key: &'static str,
        _: &JobOptions,
    ) -> Result<Option<String>, ValidationError> {
        match item.get(key) {
            None | Some(Value::Undefined) => Ok(None),
            Some(Value::Str(g)) => {
                super::super::check_group_id(g)?;
                Ok(Some(g.clone()))
            }
            Some(_) => Err(ValidationError::new(key, "groupId must be a string")),
        }
    }
}

/// The creation time, epoch ms, sent as a float64.
pub(in crate::wire) struct Timestamp;

impl One for Timestamp {
    type Value = f64;
    fn put<S: Sink>(s: &mut S, v: &f64) {
        s.f64(*v);
    }
    fn take(
        item: &Value,
        key: &'static str,
        _: &JobOptions,
    ) -> Result<Option<f64>, ValidationError> {
        match item.get(key) {
            // bunqueue adds the timestamp to a number; a BigInt makes that throw.
            Some(Value::BigInt(_)) => Err(ValidationError::new(
                key,
                "Invalid mix of BigInt and other type in addition.",
            )),
            _ => req_opt_f64(item, key),
        }
    }
}

/// The backoff: a delay in ms, or a `{type, delay}` map.
pub(in crate::wire) struct BackoffCodec;

impl One for BackoffCodec {
    type Value = Backoff;
    const READ_RANK: u8 = 2;
    fn put<S: Sink>(s: &mut S, v: &Backoff) {
        let strategy = |s: &mut S, kind: &str, d: Duration| {
            s.map(2).kv_str("type", kind).str("delay").int(millis(d));
        };
        match *v {
            Backoff::Fixed(d) => strategy(s, "fixed", d),
            Backoff::Exponential(d) => strategy(s, "exponential", d),
            Backoff::Delay(d) => {
                s.int(millis(d));
            }
        }
    }
    fn take(
        item: &Value,
        key: &'static str,
        _: &JobOptions,
    ) -> Result<Option<Backoff>, ValidationError> {
        Ok(raw_backoff(item, key)?.map(|(_, d, make)| make(from_millis(d))))
    }
}

/// A backoff strategy's constructor, applied to its delay.
type MakeBackoff = fn(Duration) -> Backoff;

/// The backoff as sent: the field its delay is range-checked as (`backoff` or
/// `backoff.delay`), the delay in ms, and its strategy.
pub(in crate::wire) fn raw_backoff(
    item: &Value,
    key: &'static str,
) -> Result<Option<(&'static str, i64, MakeBackoff)>, ValidationError> {
    match item.get(key) {
        None | Some(Value::Undefined) | Some(Value::Nil) => Ok(None),
        Some(b @ Value::Map(_)) => {
            let delay = req_opt_i64(b, "delay")?.unwrap_or(0);
            let make: MakeBackoff = match b.get("type").and_then(Value::as_str) {
                Some("fixed") => Backoff::Fixed,
                Some("exponential") => Backoff::Exponential,
                _ => {
                    return Err(ValidationError::new(
                        key,
                        "backoff.type must be 'fixed' or 'exponential'",
                    ))
                }
            };
            Ok(Some(("backoff.delay", delay, make)))
        }
        Some(_) => Ok(req_opt_i64(item, key)?.map(|d| (key, d, Backoff::Delay as MakeBackoff))),
    }
}

/// The deduplication window of `uniqueKey`: a map of what is set.
pub(in crate::wire) struct DedupCodec;

impl One for DedupCodec {
    type Value = Dedup;
    const READ_RANK: u8 = 1;
    fn put<S: Sink>(s: &mut S, d: &Dedup) {
        let n = usize::from(d.ttl.is_some())
            + usize::from(d.extend.is_some())
            + usize::from(d.replace.is_some());
        s.map(n);
        if let Some(t) = d.ttl {
            s.str("ttl").int(millis(t));
        }
        if let Some(x) = d.extend {
            s.str("extend").bool(x);
        }
        if let Some(x) = d.replace {
            s.str("replace").bool(x);
        }
    }
    fn take(
        item: &Value,
        key: &'static str,
        _: &JobOptions,
    ) -> Result<Option<Dedup>, ValidationError> {
        match item.get(key) {
            Some(d @ Value::Map(_)) => Ok(Some(Dedup {
                ttl: req_opt_i64(d, "ttl")?.map(from_millis),
                extend: opt_bool(d, "extend"),
                replace: opt_bool(d, "replace"),
            })),
            _ => Ok(None),
        }
    }
}

/// The repeat definition, as the official client sends it.
pub(in crate::wire) struct RepeatCodec;

impl One for RepeatCodec {
    type Value = Repeat;
    fn put<S: Sink>(s: &mut S, r: &Repeat) {
        s.value(&r.to_value());
    }
    fn take(
        item: &Value,
        key: &'static str,
        _: &JobOptions,
    ) -> Result<Option<Repeat>, ValidationError> {
        match item.get(key) {
            None | Some(Value::Undefined) | Some(Value::Nil) | Some(Value::Bool(false)) => Ok(None),
            Some(r @ Value::Map(_)) => Ok(Some(Repeat::from_value(r)?)),
            // Any other truthy value has neither `every` nor `pattern`.
            Some(_) => Ok(Some(Repeat::default())),
        }
    }
}

/// A list of ids (`tags`, `dependsOn`, `childrenIds`), sent only when not empty.
pub(in crate::wire) struct List;

impl Codec for List {
    type Field = Vec<String>;
    fn is_set(v: &Vec<String>) -> bool {
        !v.is_empty()
    }
    fn write<S: Sink>(s: &mut S, key: &str, v: &Vec<String>) -> usize {
        s.str(key).array(v.len());
        for item in v {
            s.str(item);
        }
        1
    }
    fn read(
        item: &Value,
        key: &'static str,
        _: &JobOptions,
    ) -> Result<Vec<String>, ValidationError> {
        Ok(string_list(item.get(key)))
    }
}

/// A list of ids as text; entries that are not ids are left out.
pub(in crate::wire) fn string_list(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(id_text).collect())
        .unwrap_or_default()
}

/// The debounce key under its row's key, and its window, when set, as `debounceTtl`: the one
/// option that is two fields.
pub(in crate::wire) struct DebounceCodec;

/// The key of a debounce's window, beside its id's.
const DEBOUNCE_TTL: &str = "debounceTtl";

impl Codec for DebounceCodec {
    type Field = Option<Debounce>;
    fn is_set(v: &Option<Debounce>) -> bool {
        v.is_some()
    }
    fn write<S: Sink>(s: &mut S, key: &str, v: &Option<Debounce>) -> usize {
        let Some(d) = v else { return 0 };
        s.kv_str(key, &d.id);
        match d.ttl {
            Some(t) => {
                s.str(DEBOUNCE_TTL).int(millis(t));
                2
            }
            None => 1,
        }
    }
    fn read(
        item: &Value,
        key: &'static str,
        _: &JobOptions,
    ) -> Result<Option<Debounce>, ValidationError> {
        Ok(item.get(key).and_then(id_text).map(|id| Debounce {
            id,
            ttl: item
                .get(DEBOUNCE_TTL)
                .and_then(Value::as_f64)
                .map(|f| from_millis(f as i64)),
        }))
    }
}
