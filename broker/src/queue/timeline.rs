//! A job's history as bunqueue 2.9.5's record keeps it: its `timeline` steps, a DLQ entry's
//! failed `attempts`, and the stack trace a FAIL sent. Plain data, read by `view`.

use autobatch_core::wire::Value;

use crate::events::js_number;

/// Most timeline entries a job keeps (bunqueue's `MAX_TIMELINE_ENTRIES`).
const MAX_TIMELINE: usize = 20;
/// Stack-trace lines kept when the job does not say (bunqueue's default `stackTraceLimit`).
pub(crate) const DEFAULT_STACK_TRACE_LIMIT: i64 = 10;
/// Most stack lines a FAIL is read for (bunqueue's wire cap).
const MAX_STACK_LINES: usize = 100;

/// One step of a job's life, as bunqueue's `timeline` records it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Step {
    pub state: &'static str,
    pub at: f64,
    pub error: Option<Option<String>>,
    pub attempt: Option<i64>,
}

/// One failed attempt, as a DLQ entry's `attempts` history shows it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Attempt {
    pub attempt: i64,
    pub started_at: f64,
    pub failed_at: f64,
    pub reason: &'static str,
    pub error: Option<String>,
    pub duration: f64,
}

impl Attempt {
    /// bunqueue's attempt record.
    pub fn to_value(&self) -> Value {
        Value::map([
            ("attempt", Value::from(self.attempt)),
            ("startedAt", js_number(self.started_at)),
            ("failedAt", js_number(self.failed_at)),
            ("reason", Value::from(self.reason)),
            (
                "error",
                self.error.as_deref().map_or(Value::Undefined, Value::from),
            ),
            ("duration", js_number(self.duration)),
        ])
    }
}

/// Every state a timeline step names.
const STATES: [&str; 7] = [
    "waiting",
    "prioritized",
    "delayed",
    "waiting-children",
    "active",
    "completed",
    "failed",
];

impl Step {
    /// The step as SQLite mode keeps it (see `kept`): `hasError` tells an absent error from
    /// a null one.
    pub fn to_kept(&self) -> Value {
        Value::map([
            ("state", Value::from(self.state)),
            ("at", Value::F64(self.at)),
            ("hasError", Value::Bool(self.error.is_some())),
            (
                "error",
                self.error
                    .as_ref()
                    .and_then(Option::as_deref)
                    .map_or(Value::Nil, Value::from),
            ),
            ("attempt", self.attempt.map_or(Value::Nil, Value::from)),
        ])
    }

    /// Reads back [`to_kept`](Self::to_kept)'s form; `None` for a step it did not write.
    pub fn from_kept(v: &Value) -> Option<Step> {
        let stored = v.get("state")?.as_str()?;
        let state = STATES.iter().find(|s| **s == stored).copied()?;
        let error = v
            .get("hasError")
            .and_then(Value::as_bool)
            .unwrap_or(false)
            .then(|| v.get("error").and_then(Value::as_str).map(str::to_owned));
        Some(Step {
            state,
            at: v.get("at")?.as_f64()?,
            error,
            attempt: v.get("attempt").and_then(Value::as_i64),
        })
    }
}

impl Attempt {
    /// A stall (or an expired lock, `error` says which) noted against attempt `attempt` of a
    /// job made at `created_at`, as bunqueue notes it: from its creation, with no duration.
    pub fn stalled(attempt: i64, created_at: f64, now: f64, error: &str) -> Attempt {
        Attempt {
            attempt,
            started_at: created_at,
            failed_at: now,
            reason: "stalled",
            error: Some(error.to_owned()),
            duration: 0.0,
        }
    }

    /// Reads back [`to_value`](Self::to_value)'s form as SQLite mode keeps it, its reason one
    /// of `reasons` (`None` for an entry it did not write).
    pub fn from_kept(v: &Value, reasons: &[&'static str]) -> Option<Attempt> {
        let stored = v.get("reason")?.as_str()?;
        Some(Attempt {
            attempt: v.get("attempt")?.as_i64()?,
            started_at: v.get("startedAt")?.as_f64()?,
            failed_at: v.get("failedAt")?.as_f64()?,
            reason: reasons.iter().find(|r| **r == stored).copied()?,
            error: v.get("error").and_then(Value::as_str).map(str::to_owned),
            duration: v.get("duration")?.as_f64()?,
        })
    }
}

/// Appends a step to a timeline, up to [`MAX_TIMELINE`] steps.
pub(crate) fn note(timeline: &mut Vec<Step>, step: Step) {
    if timeline.len() < MAX_TIMELINE {
        timeline.push(step);
    }
}

/// FAIL's `stack` as bunqueue keeps it: the string lines of an array (at most 100 read),
/// trimmed, blank ones dropped, at most `limit`; `None` when nothing is left.
pub(crate) fn stacktrace(stack: Option<&Value>, limit: Option<i64>) -> Option<Vec<String>> {
    let lines = stack?.as_array()?;
    let limit = limit.unwrap_or(DEFAULT_STACK_TRACE_LIMIT).max(0) as usize;
    let out: Vec<String> = lines
        .iter()
        .filter_map(Value::as_str)
        .take(MAX_STACK_LINES)
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .take(limit)
        .map(str::to_owned)
        .collect();
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stack_is_trimmed_and_capped() {
        let stack = Value::Array(vec![
            Value::from("Error: boom"),
            Value::from("   at a (x.ts:1)  "),
            Value::from("  "),
            Value::Int(3),
            Value::from("at b (x.ts:2)"),
        ]);
        assert_eq!(
            stacktrace(Some(&stack), Some(2)).unwrap(),
            ["Error: boom", "at a (x.ts:1)"]
        );
        assert_eq!(stacktrace(Some(&stack), None).unwrap().len(), 3);
        assert_eq!(stacktrace(Some(&Value::from("Error")), None), None);
        assert_eq!(stacktrace(Some(&stack), Some(0)), None);
    }
}
