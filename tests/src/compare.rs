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

/// `v` with the progress of every completed job as a class (`"#completed"`), for comparing the
/// broker on SQLite with bunqueue in memory: bunqueue's SQLite mode reads a completed job's
/// progress from its row (100), its memory mode keeps the last one reported, and the broker
/// follows each mode (checked against bunqueue in each mode by the differential test's
/// `progress_like_bunqueue_in_each_mode`). A completed job is a record in state `completed` or
/// with a completion time, or a TS client `Job` finished without a failure.
///
/// ```
/// use serde_json::json;
/// let v = json!([{"state": "completed", "progress": 100}, {"state": "active", "progress": 40}]);
/// assert_eq!(
///     autobatch_tests::compare::completed_progress_class(v),
///     json!([{"state": "completed", "progress": "#completed"}, {"state": "active", "progress": 40}])
/// );
/// ```
pub fn completed_progress_class(v: Json) -> Json {
    match v {
        Json::Object(mut m) => {
            let is = |k: &str, x: Json| m.get(k) == Some(&x);
            let completed = is("state", json!("completed"))
                || is("completedAt", json!("#time"))
                || is("finishedOn", json!("#time")) && is("failedReason", json!("#undefined"));
            if completed && m.contains_key("progress") {
                m.insert("progress".into(), json!("#completed"));
            }
            Json::Object(
                m.into_iter()
                    .map(|(k, v)| (k, completed_progress_class(v)))
                    .collect(),
            )
        }
        Json::Array(a) => Json::Array(a.into_iter().map(completed_progress_class).collect()),
        other => other,
    }
}
