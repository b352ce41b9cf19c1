//! The add options a job's record keeps besides [`JobRecord`](super::JobRecord)'s own fields,
//! as bunqueue's record shows them (GetJob's `timeout`, `tags`, `customId`, …), and how a
//! [`SqliteStore`](super::SqliteStore) keeps them (one MessagePack map, `options` column).

use std::time::Duration;

use autobatch_core::wire::{ChildFailure, ChildFailures, JobOptions, Value};

/// The add options of one job that its record shows as sent and that
/// [`JobRecord`](super::JobRecord)'s own fields do not hold. Unset ones are bunqueue's
/// defaults (`null`, `false`, `[]`).
///
/// ```
/// use autobatch_broker::store::AddOptions;
/// let mut o = AddOptions::default();
/// o.timeout = Some(9000.0);
/// o.tags = vec!["mail".into()];
/// let back = AddOptions::from_value(&o.to_value());
/// assert_eq!(back, o);
/// assert!(AddOptions::default().is_default());
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct AddOptions {
    /// `ttl`, ms.
    pub ttl: Option<f64>,
    /// `timeout`, ms.
    pub timeout: Option<f64>,
    /// `customId`: the custom id the job was added with.
    pub custom_id: Option<String>,
    /// `groupId`.
    pub group_id: Option<String>,
    /// `tags`.
    pub tags: Vec<String>,
    /// `stallTimeout`, ms.
    pub stall_timeout: Option<f64>,
    /// `stackTraceLimit` (bunqueue's default, 10, when unset).
    pub stack_trace_limit: Option<i64>,
    /// `keepLogs`.
    pub keep_logs: Option<i64>,
    /// `sizeLimit`.
    pub size_limit: Option<i64>,
    /// `failParentOnFailure`, `removeDependencyOnFailure`, `continueParentOnFailure`,
    /// `ignoreDependencyOnFailure`: a flag each.
    pub on_failure: ChildFailures,
    /// `deduplicationTtl`, ms.
    pub dedup_ttl: Option<f64>,
    /// `deduplicationExtend`.
    pub dedup_extend: bool,
    /// `deduplicationReplace`.
    pub dedup_replace: bool,
    /// `debounceId`.
    pub debounce_id: Option<String>,
    /// `debounceTtl`, ms.
    pub debounce_ttl: Option<f64>,
}

fn ms(d: Duration) -> f64 {
    d.as_millis() as f64
}

impl AddOptions {
    /// What a job added with `o` keeps.
    pub(crate) fn from_options(o: &JobOptions) -> AddOptions {
        AddOptions {
            ttl: o.ttl.map(ms),
            timeout: o.timeout.map(ms),
            custom_id: o.job_id.clone(),
            group_id: o.group_id.clone(),
            tags: o.tags.clone(),
            stall_timeout: o.stall_timeout.map(ms),
            stack_trace_limit: o.stack_trace_limit,
            keep_logs: o.keep_logs,
            size_limit: o.size_limit,
            on_failure: o.on_failure,
            dedup_ttl: o.dedup.as_ref().and_then(|d| d.ttl).map(ms),
            dedup_extend: o.dedup.as_ref().and_then(|d| d.extend).unwrap_or(false),
            dedup_replace: o.dedup.as_ref().and_then(|d| d.replace).unwrap_or(false),
            debounce_id: o.debounce.as_ref().map(|d| d.id.clone()),
            debounce_ttl: o.debounce.as_ref().and_then(|d| d.ttl).map(ms),
        }
    }

    /// Whether every option is unset (nothing to keep).
    pub fn is_default(&self) -> bool {
        *self == AddOptions::default()
    }

    /// The set options as a map keyed by bunqueue's names (what SQLite keeps).
    pub fn to_value(&self) -> Value {
        let mut m: Vec<(&str, Value)> = Vec::new();
        let num = |m: &mut Vec<(&str, Value)>, k, v: Option<f64>| {
            if let Some(v) = v {
                m.push((k, Value::F64(v)));
            }
        };
        let int = |m: &mut Vec<(&str, Value)>, k, v: Option<i64>| {
            if let Some(v) = v {
                m.push((k, Value::Int(v)));
            }
        };
        let text = |m: &mut Vec<(&str, Value)>, k, v: &Option<String>| {
            if let Some(v) = v {
                m.push((k, Value::from(v.as_str())));
            }
        };
        let flag = |m: &mut Vec<(&str, Value)>, k, v: bool| {
            if v {
                m.push((k, Value::Bool(true)));
            }
        };
        num(&mut m, "ttl", self.ttl);
        num(&mut m, "timeout", self.timeout);
        text(&mut m, "customId", &self.custom_id);
        text(&mut m, "groupId", &self.group_id);
        if !self.tags.is_empty() {
            let tags = self.tags.iter().map(|t| Value::from(t.as_str())).collect();
            m.push(("tags", Value::Array(tags)));
        }
        num(&mut m, "stallTimeout", self.stall_timeout);
        int(&mut m, "stackTraceLimit", self.stack_trace_limit);
        int(&mut m, "keepLogs", self.keep_logs);
        int(&mut m, "sizeLimit", self.size_limit);
        for p in ChildFailure::ALL {
            flag(&mut m, p.key(), self.on_failure.contains(p));
        }
        num(&mut m, "deduplicationTtl", self.dedup_ttl);
        flag(&mut m, "deduplicationExtend", self.dedup_extend);
        flag(&mut m, "deduplicationReplace", self.dedup_replace);
        text(&mut m, "debounceId", &self.debounce_id);
        num(&mut m, "debounceTtl", self.debounce_ttl);
        Value::map(m)
    }

    /// Reads [`to_value`](Self::to_value)'s map back; what is missing or of another type is
    /// unset.
    pub fn from_value(v: &Value) -> AddOptions {
        let num = |k| v.get(k).and_then(Value::as_f64);
        let int = |k| v.get(k).and_then(Value::as_i64);
        let text = |k| v.get(k).and_then(Value::as_str).map(str::to_owned);
        let flag = |k| v.get(k).and_then(Value::as_bool).unwrap_or(false);
        AddOptions {
            ttl: num("ttl"),
            timeout: num("timeout"),
            custom_id: text("customId"),
            group_id: text("groupId"),
            tags: v
                .get("tags")
                .and_then(Value::as_array)
                .unwrap_or_default()
                .iter()
                .filter_map(|t| t.as_str().map(str::to_owned))
                .collect(),
            stall_timeout: num("stallTimeout"),
            stack_trace_limit: int("stackTraceLimit"),
            keep_logs: int("keepLogs"),
            size_limit: int("sizeLimit"),
            on_failure: ChildFailure::ALL
                .into_iter()
                .filter(|p| flag(p.key()))
                .collect(),
            dedup_ttl: num("deduplicationTtl"),
            dedup_extend: flag("deduplicationExtend"),
            dedup_replace: flag("deduplicationReplace"),
            debounce_id: text("debounceId"),
            debounce_ttl: num("debounceTtl"),
        }
    }
}
