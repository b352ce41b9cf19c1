//! Every option a job carries on the wire, declared once.
//!
//! The table at the end of this file ([`job_options!`]) lists each [`JobOptions`] field with
//! its wire key and its [`Codec`], in the order a job's map carries them. Everything else
//! comes from it:
//!
//! * what PUSH and PUSHB write ([`write_schedule`], [`write_tail`]), each writer returning how
//!   many fields it wrote, so that the map header and [`EncodedJob`](super::EncodedJob)'s
//!   field count need no second list;
//! * what that costs in bytes: the same writers into a [`Measure`] instead of an
//!   [`Encoder`], so a size can never disagree with the bytes;
//! * how the server role reads a job's map back ([`read_options`]).
//!
//! Adding an option is a field on [`JobOptions`] with its setter and one row in the table
//! (docs/protocol/README.md walks through one). The custom id and the remove flags are not
//! rows: PUSH and PUSHB name and send them differently (see `push.rs`).

use std::time::Duration;

use super::codec::Encoder;
use super::job::{from_millis, id_text, millis, Backoff, Debounce, Dedup, Repeat};
use super::size::{array_header_len, int_len, map_header_len, str_len, value_len};
use super::{JobOptions, ValidationError, Value};
use crate::ops::read::{req_opt_f64, req_opt_i64};

/// Where a job's fields are written: an [`Encoder`], or a [`Measure`] of what an encoder would
/// write. The writers below are generic over it, so the bytes and their size come from the
/// same code.
pub(super) trait Sink {
    /// A string.
    fn str(&mut self, s: &str) -> &mut Self;
    /// An integer, as [`Encoder::int`] writes it.
    fn int(&mut self, i: i64) -> &mut Self;
    /// A float64.
    fn f64(&mut self, f: f64) -> &mut Self;
    /// A boolean.
    fn bool(&mut self, b: bool) -> &mut Self;
    /// A map header of `n` entries.
    fn map(&mut self, n: usize) -> &mut Self;
    /// An array header of `n` elements.
    fn array(&mut self, n: usize) -> &mut Self;
    /// A whole value.
    fn value(&mut self, v: &Value) -> &mut Self;
    /// Bytes already encoded.
    fn raw(&mut self, bytes: &[u8]) -> &mut Self;

    /// A key and its string value.
    fn kv_str(&mut self, key: &str, value: &str) -> &mut Self {
        self.str(key).str(value)
    }
}

impl Sink for Encoder<'_> {
    fn str(&mut self, s: &str) -> &mut Self {
        Encoder::str(self, s)
    }
    fn int(&mut self, i: i64) -> &mut Self {
        Encoder::int(self, i)
    }
    fn f64(&mut self, f: f64) -> &mut Self {
        Encoder::f64(self, f)
    }
    fn bool(&mut self, b: bool) -> &mut Self {
        Encoder::bool(self, b)
    }
    fn map(&mut self, n: usize) -> &mut Self {
        Encoder::map(self, n)
    }
    fn array(&mut self, n: usize) -> &mut Self {
        Encoder::array(self, n)
    }
    fn value(&mut self, v: &Value) -> &mut Self {
        Encoder::value(self, v)
    }
    fn raw(&mut self, bytes: &[u8]) -> &mut Self {
        Encoder::raw(self, bytes)
    }
}

/// Counts the bytes an [`Encoder`] would write, without writing them.
#[derive(Debug, Default)]
pub(super) struct Measure(pub(super) usize);

impl Sink for Measure {
    fn str(&mut self, s: &str) -> &mut Self {
        self.0 += str_len(s.len());
        self
    }
    fn int(&mut self, i: i64) -> &mut Self {
        self.0 += int_len(i);
        self
    }
    fn f64(&mut self, _: f64) -> &mut Self {
        self.0 += 9;
        self
    }
    fn bool(&mut self, _: bool) -> &mut Self {
        self.0 += 1;
        self
    }
    fn map(&mut self, n: usize) -> &mut Self {
        self.0 += map_header_len(n);
        self
    }
    fn array(&mut self, n: usize) -> &mut Self {
        self.0 += array_header_len(n);
        self
    }
    fn value(&mut self, v: &Value) -> &mut Self {
        self.0 += value_len(v);
        self
    }
    fn raw(&mut self, bytes: &[u8]) -> &mut Self {
        self.0 += bytes.len();
        self
    }
}

/// Writes nothing: for counting the fields a writer writes, from what it returns.
#[derive(Debug, Default)]
pub(super) struct Discard;

impl Sink for Discard {
    fn str(&mut self, _: &str) -> &mut Self {
        self
    }
    fn int(&mut self, _: i64) -> &mut Self {
        self
    }
    fn f64(&mut self, _: f64) -> &mut Self {
        self
    }
    fn bool(&mut self, _: bool) -> &mut Self {
        self
    }
    fn map(&mut self, _: usize) -> &mut Self {
        self
    }
    fn array(&mut self, _: usize) -> &mut Self {
        self
    }
    fn value(&mut self, _: &Value) -> &mut Self {
        self
    }
    fn raw(&mut self, _: &[u8]) -> &mut Self {
        self
    }
}

/// How one kind of option travels: when it is sent, what it writes, how the server reads it.
pub(super) trait Codec {
    /// The [`JobOptions`] field's type.
    type Field;

    /// Read before the options of a lower rank, as bunqueue checks them: the group first
    /// (it decides how the priority reads), then the backoff and dedup maps.
    const READ_RANK: u8 = 0;

    /// Whether the option is sent at all.
    fn is_set(v: &Self::Field) -> bool;

    /// Writes the option, which [`is_set`](Self::is_set), under `key`; returns how many fields
    /// that is.
    fn write<S: Sink>(s: &mut S, key: &str, v: &Self::Field) -> usize;

    /// Reads the option from a job's map in the server role, as bunqueue reads it. `so_far`
    /// holds the options of a higher [`READ_RANK`](Self::READ_RANK).
    fn read(
        item: &Value,
        key: &'static str,
        so_far: &JobOptions,
    ) -> Result<Self::Field, ValidationError>;
}

/// An integer the server refuses with a fraction (`maxAttempts`).
pub(super) struct Int;

impl Codec for Int {
    type Field = Option<i64>;
    fn is_set(v: &Option<i64>) -> bool {
        v.is_some()
    }
    fn write<S: Sink>(s: &mut S, key: &str, v: &Option<i64>) -> usize {
        let Some(v) = v else { return 0 };
        s.str(key).int(*v);
        1
    }
    fn read(
        item: &Value,
        key: &'static str,
        _: &JobOptions,
    ) -> Result<Option<i64>, ValidationError> {
        opt_int(item, key)
    }
}

/// An integer option: a number as [`req_opt_f64`] reads it, refused when it has a fraction.
pub(super) fn opt_int(v: &Value, field: &'static str) -> Result<Option<i64>, ValidationError> {
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
pub(super) struct Priority;

impl Codec for Priority {
    type Field = Option<i64>;
    fn is_set(v: &Option<i64>) -> bool {
        v.is_some()
    }
    fn write<S: Sink>(s: &mut S, key: &str, v: &Option<i64>) -> usize {
        Int::write(s, key, v)
    }
    fn read(
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
pub(super) struct Count;

impl Codec for Count {
    type Field = Option<i64>;
    fn is_set(v: &Option<i64>) -> bool {
        v.is_some()
    }
    fn write<S: Sink>(s: &mut S, key: &str, v: &Option<i64>) -> usize {
        Int::write(s, key, v)
    }
    fn read(
        item: &Value,
        key: &'static str,
        _: &JobOptions,
    ) -> Result<Option<i64>, ValidationError> {
        Ok(item.get(key).and_then(Value::as_f64).map(|f| f as i64))
    }
}

/// A time span, sent in whole milliseconds; the ranges are checked apart, on the wire value
/// (see `RangeInput`), so a negative one is refused rather than read as zero.
pub(super) struct Millis;

impl Codec for Millis {
    type Field = Option<Duration>;
    fn is_set(v: &Option<Duration>) -> bool {
        v.is_some()
    }
    fn write<S: Sink>(s: &mut S, key: &str, v: &Option<Duration>) -> usize {
        let Some(v) = v else { return 0 };
        s.str(key).int(millis(*v));
        1
    }
    fn read(
        item: &Value,
        key: &'static str,
        _: &JobOptions,
    ) -> Result<Option<Duration>, ValidationError> {
        Ok(req_opt_i64(item, key)?.map(from_millis))
    }
}

/// A flag; the server coerces any value with `Boolean()`.
pub(super) struct Flag;

impl Codec for Flag {
    type Field = Option<bool>;
    fn is_set(v: &Option<bool>) -> bool {
        v.is_some()
    }
    fn write<S: Sink>(s: &mut S, key: &str, v: &Option<bool>) -> usize {
        let Some(v) = v else { return 0 };
        s.str(key).bool(*v);
        1
    }
    fn read(
        item: &Value,
        key: &'static str,
        _: &JobOptions,
    ) -> Result<Option<bool>, ValidationError> {
        Ok(opt_bool(item, key))
    }
}

/// A value read as JavaScript's `Boolean()` reads it; absent when not sent.
pub(super) fn opt_bool(v: &Value, field: &str) -> Option<bool> {
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
pub(super) struct Text;

impl Codec for Text {
    type Field = Option<String>;
    fn is_set(v: &Option<String>) -> bool {
        v.is_some()
    }
    fn write<S: Sink>(s: &mut S, key: &str, v: &Option<String>) -> usize {
        let Some(v) = v else { return 0 };
        s.kv_str(key, v);
        1
    }
    fn read(
        item: &Value,
        key: &'static str,
        _: &JobOptions,
    ) -> Result<Option<String>, ValidationError> {
        Ok(item.get(key).and_then(Value::as_str).map(str::to_owned))
    }
}

/// A job id: a string, or a number the server takes as its decimal text.
pub(super) struct IdText;

impl Codec for IdText {
    type Field = Option<String>;
    fn is_set(v: &Option<String>) -> bool {
        v.is_some()
    }
    fn write<S: Sink>(s: &mut S, key: &str, v: &Option<String>) -> usize {
        Text::write(s, key, v)
    }
    fn read(
        item: &Value,
        key: &'static str,
        _: &JobOptions,
    ) -> Result<Option<String>, ValidationError> {
        Ok(item.get(key).and_then(id_text))
    }
}

/// The group id: a string bunqueue checks before any other option.
pub(super) struct GroupId;

impl Codec for GroupId {
    type Field = Option<String>;
    const READ_RANK: u8 = 3;
    fn is_set(v: &Option<String>) -> bool {
        v.is_some()
    }
    fn write<S: Sink>(s: &mut S, key: &str, v: &Option<String>) -> usize {
        Text::write(s, key, v)
    }
    fn read(
        item: &Value,
        key: &'static str,
        _: &JobOptions,
    ) -> Result<Option<String>, ValidationError> {
        match item.get(key) {
            None | Some(Value::Undefined) => Ok(None),
            Some(Value::Str(g)) => {
                super::check_group_id(g)?;
                Ok(Some(g.clone()))
            }
            Some(_) => Err(ValidationError::new(key, "groupId must be a string")),
        }
    }
}

/// A list of ids (`tags`, `dependsOn`, `childrenIds`), sent only when not empty.
pub(super) struct List;

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
pub(super) fn string_list(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(id_text).collect())
        .unwrap_or_default()
}

/// The creation time, epoch ms, sent as a float64.
pub(super) struct Timestamp;

impl Codec for Timestamp {
    type Field = Option<f64>;
    fn is_set(v: &Option<f64>) -> bool {
        v.is_some()
    }
    fn write<S: Sink>(s: &mut S, key: &str, v: &Option<f64>) -> usize {
        let Some(v) = v else { return 0 };
        s.str(key).f64(*v);
        1
    }
    fn read(
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
pub(super) struct BackoffCodec;

impl Codec for BackoffCodec {
    type Field = Option<Backoff>;
    const READ_RANK: u8 = 2;
    fn is_set(v: &Option<Backoff>) -> bool {
        v.is_some()
    }
    fn write<S: Sink>(s: &mut S, key: &str, v: &Option<Backoff>) -> usize {
        let Some(b) = v else { return 0 };
        s.str(key);
        match b {
            Backoff::Fixed(d) => {
                s.map(2)
                    .kv_str("type", "fixed")
                    .str("delay")
                    .int(millis(*d));
            }
            Backoff::Exponential(d) => {
                s.map(2)
                    .kv_str("type", "exponential")
                    .str("delay")
                    .int(millis(*d));
            }
            Backoff::Delay(d) => {
                s.int(millis(*d));
            }
        }
        1
    }
    fn read(
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
pub(super) fn raw_backoff(
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
pub(super) struct DedupCodec;

impl Codec for DedupCodec {
    type Field = Option<Dedup>;
    const READ_RANK: u8 = 1;
    fn is_set(v: &Option<Dedup>) -> bool {
        v.is_some()
    }
    fn write<S: Sink>(s: &mut S, key: &str, v: &Option<Dedup>) -> usize {
        let Some(d) = v else { return 0 };
        let n = usize::from(d.ttl.is_some())
            + usize::from(d.extend.is_some())
            + usize::from(d.replace.is_some());
        s.str(key).map(n);
        if let Some(t) = d.ttl {
            s.str("ttl").int(millis(t));
        }
        if let Some(x) = d.extend {
            s.str("extend").bool(x);
        }
        if let Some(x) = d.replace {
            s.str("replace").bool(x);
        }
        1
    }
    fn read(
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
pub(super) struct RepeatCodec;

impl Codec for RepeatCodec {
    type Field = Option<Repeat>;
    fn is_set(v: &Option<Repeat>) -> bool {
        v.is_some()
    }
    fn write<S: Sink>(s: &mut S, key: &str, v: &Option<Repeat>) -> usize {
        let Some(r) = v else { return 0 };
        s.str(key).value(&r.to_value());
        1
    }
    fn read(
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

/// The debounce key under its row's key, and its window, when set, as `debounceTtl`.
pub(super) struct DebounceCodec;

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

/// Declares the table: each row `field: "key" => Codec`, in wire order, in three groups. The
/// schedule goes before the custom id, the rest after it; the rare ones, which most jobs
/// leave out, are checked together so that a job without any pays one test.
macro_rules! job_options {
    (
        schedule { $($s:ident: $sk:literal => $sc:ty,)* }
        common { $($c:ident: $ck:literal => $cc:ty,)* }
        rare { $($r:ident: $rk:literal => $rc:ty,)* }
    ) => {
        /// Writes the options a job's map carries before its custom id; returns how many
        /// fields.
        pub(super) fn write_schedule<S: Sink>(s: &mut S, o: &JobOptions) -> usize {
            0 $(+ if <$sc>::is_set(&o.$s) { <$sc>::write(s, $sk, &o.$s) } else { 0 })*
        }

        /// Writes the options a job's map carries after its custom id and before its
        /// remove flags; returns how many fields.
        pub(super) fn write_tail<S: Sink>(s: &mut S, o: &JobOptions) -> usize {
            let n = 0 $(+ if <$cc>::is_set(&o.$c) { <$cc>::write(s, $ck, &o.$c) } else { 0 })*;
            if !($(<$rc>::is_set(&o.$r))||*) {
                return n;
            }
            n $(+ if <$rc>::is_set(&o.$r) { <$rc>::write(s, $rk, &o.$r) } else { 0 })*
        }

        /// Reads every option of the table from a job's map, in the server role: by
        /// [`Codec::READ_RANK`], then in the table's order, so the first error is the one
        /// bunqueue reports first.
        pub(super) fn read_options(item: &Value) -> Result<JobOptions, ValidationError> {
            let mut o = JobOptions::default();
            for rank in (0..=3u8).rev() {
                $(if <$sc>::READ_RANK == rank {
                    o.$s = <$sc>::read(item, $sk, &o)?;
                })*
                $(if <$cc>::READ_RANK == rank {
                    o.$c = <$cc>::read(item, $ck, &o)?;
                })*
                $(if <$rc>::READ_RANK == rank {
                    o.$r = <$rc>::read(item, $rk, &o)?;
                })*
            }
            Ok(o)
        }

        /// Every key of the table, in wire order.
        #[cfg(test)]
        pub(super) const KEYS: &[&str] = &[$($sk,)* $($ck,)* $($rk,)*];
    };
}

job_options! {
    schedule {
        priority: "priority" => Priority,
        delay: "delay" => Millis,
        attempts: "maxAttempts" => Int,
        backoff: "backoff" => BackoffCodec,
        timeout: "timeout" => Millis,
        ttl: "ttl" => Millis,
    }
    common {
        tags: "tags" => List,
        group_id: "groupId" => GroupId,
        depends_on: "dependsOn" => List,
        unique_key: "uniqueKey" => Text,
        dedup: "dedup" => DedupCodec,
        lifo: "lifo" => Flag,
        stall_timeout: "stallTimeout" => Millis,
        timestamp: "timestamp" => Timestamp,
        durable: "durable" => Flag,
    }
    rare {
        group_max_size: "groupMaxSize" => Count,
        stack_trace_limit: "stackTraceLimit" => Count,
        keep_logs: "keepLogs" => Count,
        size_limit: "sizeLimit" => Count,
        fail_parent_on_failure: "failParentOnFailure" => Flag,
        remove_dependency_on_failure: "removeDependencyOnFailure" => Flag,
        continue_parent_on_failure: "continueParentOnFailure" => Flag,
        ignore_dependency_on_failure: "ignoreDependencyOnFailure" => Flag,
        debounce: "debounceId" => DebounceCodec,
        repeat: "repeat" => RepeatCodec,
        parent_id: "parentId" => IdText,
        children_ids: "childrenIds" => List,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::KEYS;
    use crate::wire::{Backoff, Command, Debounce, Dedup, JobOptions, JobSpec, Repeat, Value};

    /// A job with every option of the table set (the failure flags to distinct values).
    fn every_option() -> JobOptions {
        JobOptions::new()
            .priority(3)
            .delay(Duration::from_secs(1))
            .attempts(2)
            .backoff(Backoff::Fixed(Duration::from_millis(50)))
            .timeout(Duration::from_secs(5))
            .ttl(Duration::from_secs(60))
            .tags(["a", "b"])
            .group_id("g")
            .depends_on(["d1"])
            .unique_key("u")
            .dedup(Dedup::new().ttl(Duration::from_secs(9)))
            .lifo(true)
            .stall_timeout(Duration::from_secs(7))
            .timestamp(1.7e12)
            .durable(false)
            .group_max_size(4)
            .stack_trace_limit(5)
            .keep_logs(6)
            .size_limit(7)
            .fail_parent_on_failure(true)
            .remove_dependency_on_failure(false)
            .continue_parent_on_failure(true)
            .ignore_dependency_on_failure(false)
            .debounce(Debounce::new("k").ttl(Duration::from_secs(2)))
            .repeat(Repeat::every(Duration::from_secs(30)))
            .parent_id("p")
            .children_ids(["c1", "c2"])
    }

    /// Unset options are not sent at all: not as empty lists, nor as defaults.
    #[test]
    fn a_job_without_options_writes_none() {
        let mut out = Vec::new();
        let n = super::write_schedule(&mut crate::wire::Encoder::new(&mut out), &JobOptions::new())
            + super::write_tail(&mut crate::wire::Encoder::new(&mut out), &JobOptions::new());
        assert_eq!((n, out.len()), (0, 0));
    }

    #[test]
    fn the_table_names_each_key_once() {
        let mut keys = KEYS.to_vec();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), KEYS.len(), "{KEYS:?}");
    }

    /// A PUSH carries the table's keys in the table's order, after the name and the data,
    /// and the server role reads every option back as it was.
    #[test]
    fn every_option_is_written_in_table_order_and_read_back() {
        let job = JobSpec::new("n", Value::Int(1)).with_options(every_option());
        let cmd = Command::Push {
            queue: "q".into(),
            job: job.clone(),
        };
        let mut out = Vec::new();
        cmd.encode(None, &mut out);
        let v = Value::decode(&out).unwrap();
        let Value::Map(entries) = &v else {
            panic!("a map: {v:?}")
        };
        let written: Vec<&str> = entries.iter().filter_map(|(k, _)| k.as_str()).collect();
        let mut expected = vec!["cmd", "queue", "name", "data"];
        expected.extend(KEYS);
        // The debounce's window travels beside its id.
        let at = expected.iter().position(|k| *k == "debounceId").unwrap();
        expected.insert(at + 1, "debounceTtl");
        assert_eq!(written, expected);
        // Read by the table alone: bunqueue would refuse a repeat job with a parent, which
        // is beside the point here.
        assert_eq!(super::read_options(&v), Ok(job.opts));
    }
}
