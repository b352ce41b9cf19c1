//! A queue's DLQ settings (SetDlqConfig, GetDlqConfig), kept and applied as bunqueue 2.9.5's
//! `DlqShard.setConfig` does: a patch merged into the queue's settings (bunqueue's defaults
//! until set), numbers floored, `maxEntries` at least 1, `maxAge: null` for entries kept until
//! removed.
//!
//! Applied: `maxEntries` (the oldest entries leave for good past it, at once when it is
//! lowered) and `maxAge` (an entry's `expiresAt`, what the `expired` filter and GetDlqStats'
//! `expired` read). `maxAge` is read when asked, so a change applies to the entries already in
//! the DLQ too, where bunqueue fixes each entry's expiry when it enters.
//!
//! Refused: `autoRetry: true`. The broker does not retry DLQ entries on its own, and accepting
//! the setting would lie; `autoRetryInterval` and `maxAutoRetries` are kept and reported (they
//! only act with `autoRetry`).

use std::collections::HashMap;
use std::time::Duration;

use autobatch_core::ops::DlqConfig;
use autobatch_core::wire::Value;

/// Every queue's DLQ settings that differ from bunqueue's defaults (memory: one entry per queue
/// configured).
#[derive(Debug, Default)]
pub(crate) struct DlqConfigs {
    queues: HashMap<String, DlqConfig>,
}

/// The refusal of `autoRetry: true`.
pub(crate) const AUTO_RETRY_REFUSED: &str =
    "autoRetry is not supported by autobatch-broker: it does not retry DLQ entries on its own";

impl DlqConfigs {
    /// The settings of `queue`.
    pub fn get(&self, queue: &str) -> DlqConfig {
        self.queues.get(queue).cloned().unwrap_or_default()
    }

    /// Merges `patch` (SetDlqConfig's `config`) into `queue`'s settings; the new settings.
    pub fn set(&mut self, queue: &str, patch: &Value) -> Result<DlqConfig, String> {
        let mut next = self.get(queue);
        let Value::Map(_) = patch else {
            // bunqueue reads `config.autoRetry` of what it was sent: a TypeError for
            // undefined or null, nothing changed for any other value.
            return match patch {
                Value::Undefined => {
                    Err("undefined is not an object (evaluating 'config.autoRetry')".into())
                }
                Value::Nil => Err("null is not an object (evaluating 'config.autoRetry')".into()),
                _ => {
                    self.queues.insert(queue.to_owned(), next.clone());
                    Ok(next)
                }
            };
        };
        if let Some(b) = patch.get("autoRetry").and_then(Value::as_bool) {
            if b {
                return Err(AUTO_RETRY_REFUSED.into());
            }
            next.auto_retry = b;
        }
        let number = |key: &str| finite(patch.get(key)).map(|n| n.floor().max(0.0));
        if let Some(n) = number("autoRetryInterval") {
            next.auto_retry_interval = Duration::from_millis(n as u64);
        }
        if let Some(n) = number("maxAutoRetries") {
            next.max_auto_retries = n as u64;
        }
        match patch.get("maxAge") {
            Some(Value::Nil) => next.max_age = None,
            v => {
                if let Some(n) = finite(v) {
                    next.max_age = Some(Duration::from_millis(n.floor().max(0.0) as u64));
                }
            }
        }
        if let Some(n) = number("maxEntries") {
            next.max_entries = n.max(1.0) as u64;
        }
        self.queues.insert(queue.to_owned(), next.clone());
        Ok(next)
    }

    /// Puts back settings kept across a restart.
    pub fn restore(&mut self, queue: &str, config: DlqConfig) {
        self.queues.insert(queue.to_owned(), config);
    }

    /// `queue`'s `maxAge`, ms (`None`: kept until removed).
    pub fn max_age(&self, queue: &str) -> Option<f64> {
        match self.queues.get(queue) {
            Some(c) => c.max_age.map(|d| d.as_millis() as f64),
            None => Some(DEFAULT_MAX_AGE),
        }
    }

    /// `queue`'s `maxEntries`.
    pub fn max_entries(&self, queue: &str) -> usize {
        self.queues
            .get(queue)
            .map_or(DEFAULT_MAX_ENTRIES, |c| c.max_entries as usize)
    }
}

/// bunqueue's default `maxAge`, ms (7 days).
const DEFAULT_MAX_AGE: f64 = 7.0 * 24.0 * 3_600_000.0;
/// bunqueue's default `maxEntries`, per queue.
pub(crate) const DEFAULT_MAX_ENTRIES: usize = 10_000;

/// bunqueue's `toFiniteNumber` as `sanitizeConfigNumbers` applies it: a number, or a string
/// `Number()` reads as one; anything else is dropped.
fn finite(v: Option<&Value>) -> Option<f64> {
    let n = match v? {
        Value::Int(i) => *i as f64,
        Value::F64(f) => *f,
        Value::Bool(b) => f64::from(u8::from(*b)),
        Value::Str(s) if s.trim().is_empty() => 0.0,
        Value::Str(s) => s.trim().parse().ok()?,
        _ => return None,
    };
    n.is_finite().then_some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn patch(entries: Vec<(&str, Value)>) -> Value {
        Value::map(entries)
    }

    #[test]
    fn patches_merge_as_bunqueue_merges_them() {
        let mut c = DlqConfigs::default();
        assert_eq!(c.get("q"), DlqConfig::default());
        let got = c
            .set(
                "q",
                &patch(vec![
                    ("maxEntries", Value::F64(0.5)),
                    ("maxAge", Value::from("1000.9")),
                    ("maxAutoRetries", Value::from("x")),
                ]),
            )
            .expect("set");
        assert_eq!(got.max_entries, 1, "at least 1");
        assert_eq!(got.max_age, Some(Duration::from_millis(1000)));
        assert_eq!(got.max_auto_retries, 3, "not a number: unchanged");
        assert_eq!(c.max_age("q"), Some(1000.0));
        c.set("q", &patch(vec![("maxAge", Value::Nil)]))
            .expect("set");
        assert_eq!(c.max_age("q"), None);
        assert_eq!(c.max_entries("q"), 1, "kept from the earlier patch");
        assert_eq!(
            c.set("q", &patch(vec![("autoRetry", Value::from(true))])),
            Err(AUTO_RETRY_REFUSED.to_owned())
        );
        assert!(c.set("q", &Value::Undefined).is_err());
        assert_eq!(c.max_entries("other"), DEFAULT_MAX_ENTRIES);
    }
}
