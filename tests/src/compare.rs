//! What the tests that compare two servers' answers share.

use serde_json::{json, Value as Json};

/// `v` with every number under one of `keys`, at any depth, replaced by `"#time"`: wall-clock
/// times and durations are compared as classes, since two servers' clocks differ (a key
/// whose value is not a number, null say, is compared as sent).
///
/// ```
/// use serde_json::json;
/// let v = json!({"id": "a", "createdAt": 1.7e12, "timeline": [{"timestamp": 5, "state": "waiting"}]});
/// assert_eq!(
///     autobatch_tests::compare::time_classes(v, &["createdAt", "timestamp"]),
///     json!({"id": "a", "createdAt": "#time", "timeline": [{"timestamp": "#time", "state": "waiting"}]})
/// );
/// ```
pub fn time_classes(v: Json, keys: &[&str]) -> Json {
    match v {
        Json::Object(m) => Json::Object(
            m.into_iter()
                .map(|(k, v)| {
                    if keys.contains(&k.as_str()) && v.is_number() {
                        (k, json!("#time"))
                    } else {
                        (k, time_classes(v, keys))
                    }
                })
                .collect(),
        ),
        Json::Array(a) => Json::Array(a.into_iter().map(|v| time_classes(v, keys)).collect()),
        other => other,
    }
}
