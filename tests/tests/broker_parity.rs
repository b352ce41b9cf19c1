//! Commands the broker serves beyond its random differential programs (group controls, server
//! figures, DLQ settings, flow moves), each run as one fixed script against the real bunqueue
//! 2.9.5 and the embedded broker, and every reply compared.
//!
//! A script is a list of raw commands ([`RawClient::command`]: hand-written maps) on a queue
//! of its own; `"$q"` in a field stands for that queue. Replies are compared whole, less
//! `reqId`, except where a step says how it is read ([`Read`]): the jobs a pull hands out as
//! the set of their `data.n` (bunqueue's group scheduler and the broker order jobs of different
//! groups differently), time-dependent figures as a class.

use autobatch_driver::Value;
use autobatch_tests::{RawClient, Target};
use serde_json::{json, Value as Json};

/// How a step's reply is compared.
#[derive(Clone, Copy)]
enum Read {
    /// The whole reply, less `reqId`, a job id at its top level read as `#id`.
    Whole,
    /// The `data.n` of the jobs pulled (PULL's `job`, PULLB's `jobs`), sorted.
    PulledSet,
    /// `ok`, and the number under `data.<key>` as a class: `-2`, `0`, `positive` (a time
    /// left, which follows the clock).
    Ttl(&'static str),
    /// The reply's shape: every number read as `"number"`, every string as `"string"` (server
    /// totals, which the other tests sharing the server move too).
    Shape,
    /// The whole reply with the values of these keys, anywhere, read as `"#"` (timestamps).
    Scrub(&'static [&'static str]),
}

/// One step: a command, its fields, how its reply is read.
struct Step(&'static str, Json, Read);

fn whole(cmd: &'static str, fields: Json) -> Step {
    Step(cmd, fields, Read::Whole)
}

/// `fields` with `"$q"` replaced by `queue` and `"$last"` by `last` (the id of the job last
/// pushed or pulled on this side), as the command's fields.
fn fields(queue: &str, last: &str, ids: &[String], fields: &Json) -> Vec<(String, Value)> {
    let sub_ids = |s: &str| -> Option<String> {
        let n: usize = s.strip_prefix('$')?.parse().ok()?;
        ids.get(n).cloned()
    };
    fn sub(queue: &str, last: &str, ids: &dyn Fn(&str) -> Option<String>, v: &Json) -> Json {
        match v {
            Json::String(s) if s == "$q" => Json::String(queue.to_owned()),
            Json::String(s) if s == "$last" => Json::String(last.to_owned()),
            Json::String(s) if ids(s).is_some() => Json::String(ids(s).unwrap_or_default()),
            Json::Array(a) => Json::Array(a.iter().map(|v| sub(queue, last, ids, v)).collect()),
            Json::Object(m) => Json::Object(
                m.iter()
                    .map(|(k, v)| (k.clone(), sub(queue, last, ids, v)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
    let Json::Object(m) = sub(queue, last, &sub_ids, fields) else {
        panic!("fields are a map");
    };
    m.into_iter()
        .map(|(k, v)| (k, Value::from_serialize(&v).expect("a wire value")))
        .collect()
}

/// The id of the job a reply names: a PUSH's `id`, a PULL's `job.id`.
fn job_id(reply: &Result<Value, String>) -> Option<String> {
    let v = reply.as_ref().ok()?;
    let id = v
        .get("id")
        .or_else(|| v.get("job").and_then(|j| j.get("id")))?;
    id.as_str().map(str::to_owned)
}

fn shape(v: Json) -> Json {
    match v {
        Json::Number(_) => json!("number"),
        Json::String(_) => json!("string"),
        Json::Array(a) => Json::Array(a.into_iter().map(shape).collect()),
        Json::Object(m) => Json::Object(m.into_iter().map(|(k, v)| (k, shape(v))).collect()),
        other => other,
    }
}

fn scrub(v: Json, keys: &[&str]) -> Json {
    match v {
        Json::Array(a) => Json::Array(a.into_iter().map(|v| scrub(v, keys)).collect()),
        Json::Object(m) => Json::Object(
            m.into_iter()
                .map(|(k, v)| {
                    let v = if keys.contains(&k.as_str()) {
                        json!("#")
                    } else {
                        scrub(v, keys)
                    };
                    (k, v)
                })
                .collect(),
        ),
        other => other,
    }
}

fn read(reply: Result<Value, String>, how: Read) -> Json {
    let reply = match reply {
        Ok(v) => v
            .expanded()
            .expect("expanded")
            .deserialize::<Json>()
            .expect("json"),
        Err(e) => return json!({ "transport": e }),
    };
    let mut reply = reply;
    if let Json::Object(m) = &mut reply {
        m.remove("reqId");
        // Each server's own job id.
        if let Some(id) = m.get_mut("id").filter(|id| id.is_string()) {
            *id = json!("#id");
        }
    }
    match how {
        Read::Whole => reply,
        Read::Shape => shape(reply),
        Read::Scrub(keys) => scrub(reply, keys),
        Read::PulledSet => {
            let jobs: Vec<Json> = match (reply.get("jobs"), reply.get("job")) {
                (Some(Json::Array(a)), _) => a.clone(),
                (_, Some(j)) if !j.is_null() => vec![j.clone()],
                _ => Vec::new(),
            };
            let mut ns: Vec<i64> = jobs
                .iter()
                .map(|j| j["data"]["n"].as_i64().expect("data.n"))
                .collect();
            ns.sort_unstable();
            json!({ "ok": reply.get("ok"), "error": reply.get("error"), "n": ns })
        }
        Read::Ttl(key) => {
            let class = match reply
                .get("data")
                .and_then(|d| d.get(key))
                .and_then(Json::as_f64)
            {
                Some(t) if t > 0.0 => json!("positive"),
                Some(t) => json!(t),
                None => Json::Null,
            };
            json!({ "ok": reply.get("ok"), "error": reply.get("error"), key: class })
        }
    }
}

/// `v` with each pushed job's id, inside any string (error texts name them), read as `$<n>`,
/// its place in the script's pushes.
fn unname(v: Json, ids: &[String]) -> Json {
    match v {
        Json::String(mut s) => {
            for (n, id) in ids.iter().enumerate() {
                s = s.replace(id.as_str(), &format!("${n}"));
            }
            Json::String(s)
        }
        Json::Array(a) => Json::Array(a.into_iter().map(|v| unname(v, ids)).collect()),
        Json::Object(m) => Json::Object(m.into_iter().map(|(k, v)| (k, unname(v, ids))).collect()),
        other => other,
    }
}

/// Runs `script` on `target`, on a queue of its own; the replies, read. `"$<n>"` in a field
/// stands for the id of the script's n-th PUSH on that side.
fn run(target: Target, name: &str, script: &[Step]) -> Vec<Json> {
    let queue = format!("parity-{name}-{}", std::process::id());
    let mut raw = RawClient::connect(target.shared(), None).expect("connect");
    let mut last = String::new();
    let mut ids: Vec<String> = Vec::new();
    script
        .iter()
        .map(|Step(cmd, f, how)| {
            let f = fields(&queue, &last, &ids, f);
            let f: Vec<(&str, Value)> = f.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
            let reply = raw.command(cmd, &f);
            if let Some(id) = job_id(&reply) {
                if *cmd == "PUSH" {
                    ids.push(id.clone());
                }
                last = id;
            }
            unname(read(reply, *how), &ids)
        })
        .collect()
}

/// Runs `script` on both servers and fails on the first reply that differs.
fn same_on_both(name: &str, script: &[Step]) {
    let bunqueue = run(Target::Bunqueue, name, script);
    let broker = run(Target::Broker, name, script);
    if std::env::var_os("PARITY_TRACE").is_some() {
        for (step, reply) in script.iter().zip(&bunqueue) {
            eprintln!("{name}: {} {} -> {reply}", step.0, step.1);
        }
    }
    for (i, (b, a)) in bunqueue.iter().zip(&broker).enumerate() {
        assert_eq!(
            a, b,
            "{name}: step {i} ({} {}) differs: broker (left) vs bunqueue (right)",
            script[i].0, script[i].1
        );
    }
}

/// A PUSH of a job with `data.n = n` in `group`.
fn push(n: i64, group: &str) -> Step {
    whole(
        "PUSH",
        json!({ "queue": "$q", "name": "j", "data": { "n": n }, "groupId": group }),
    )
}

fn pull_all(group: Json) -> Step {
    let mut f = json!({ "queue": "$q", "count": 20 });
    if !group.is_null() {
        f["group"] = group;
    }
    Step("PULLB", f, Read::PulledSet)
}

fn group_cmd(cmd: &'static str, group: &str, extra: Json) -> Step {
    let mut f = json!({ "queue": "$q", "groupId": group });
    if let (Json::Object(m), Json::Object(x)) = (&mut f, extra) {
        m.extend(x);
    }
    whole(cmd, f)
}

/// PauseGroup, ResumeGroup, IsGroupPaused: a paused group's jobs are passed over by pulls and
/// handed out once it resumes.
#[test]
fn paused_groups_like_bunqueue() {
    let none = json!({});
    same_on_both(
        "pause",
        &[
            push(1, "a"),
            push(2, "b"),
            push(3, "a"),
            group_cmd("PauseGroup", "a", none.clone()),
            group_cmd("PauseGroup", "a", none.clone()),
            group_cmd("IsGroupPaused", "a", none.clone()),
            group_cmd("IsGroupPaused", "b", none.clone()),
            pull_all(Json::Null),
            group_cmd("ResumeGroup", "a", none.clone()),
            group_cmd("ResumeGroup", "a", none.clone()),
            group_cmd("IsGroupPaused", "a", none.clone()),
            pull_all(Json::Null),
            // Refusals, in bunqueue's order: queue, group id.
            whole("PauseGroup", json!({ "queue": "bad name", "groupId": "a" })),
            whole("PauseGroup", json!({ "queue": "$q" })),
            whole("PauseGroup", json!({ "queue": "$q", "groupId": "" })),
            whole("PauseGroup", json!({ "queue": "$q", "groupId": 5 })),
            whole("IsGroupPaused", json!({ "groupId": "a" })),
        ],
    );
}

/// SetGroupConcurrency and its reads; a pull that sends `group.concurrency` is bounded by the
/// group's override.
#[test]
fn group_concurrency_like_bunqueue() {
    let none = json!({});
    same_on_both(
        "concurrency",
        &[
            group_cmd("GetGroupConcurrency", "c", none.clone()),
            group_cmd("SetGroupConcurrency", "c", json!({ "concurrency": 0 })),
            group_cmd("SetGroupConcurrency", "c", json!({ "concurrency": 1.5 })),
            group_cmd("SetGroupConcurrency", "c", json!({ "concurrency": "2" })),
            group_cmd("SetGroupConcurrency", "c", json!({})),
            group_cmd("SetGroupConcurrency", "c", json!({ "concurrency": 1 })),
            group_cmd("GetGroupConcurrency", "c", none.clone()),
            push(1, "c"),
            push(2, "c"),
            push(3, "c"),
            push(4, "d"),
            push(5, "d"),
            push(6, "d"),
            pull_all(json!({ "concurrency": 2 })),
            group_cmd("GetGroupActiveCount", "c", none.clone()),
            group_cmd("GetGroupActiveCount", "d", none.clone()),
            pull_all(json!({ "concurrency": 2 })),
            group_cmd("RemoveGroupConcurrency", "c", none.clone()),
            group_cmd("RemoveGroupConcurrency", "c", none.clone()),
            group_cmd("GetGroupConcurrency", "c", none.clone()),
            // Without a default in the pull, a group's concurrency does not bound it.
            group_cmd("SetGroupConcurrency", "c", json!({ "concurrency": 1 })),
            pull_all(Json::Null),
            pull_all(json!({ "concurrency": "x" })),
            pull_all(json!({ "limit": { "max": 1 } })),
            pull_all(json!(3)),
        ],
    );
}

/// SetGroupRateLimit, GetGroupRateLimit, GetGroupRateLimitTtl, RemoveGroupRateLimit, and a
/// pull that sends `group.limit` meeting the group's override.
#[test]
fn group_rate_limits_like_bunqueue() {
    let none = json!({});
    let hour = 3_600_000;
    let limit = json!({ "limit": { "max": 5, "duration": hour } });
    same_on_both(
        "rate",
        &[
            group_cmd("GetGroupRateLimit", "r", none.clone()),
            Step(
                "GetGroupRateLimitTtl",
                json!({ "queue": "$q", "groupId": "r" }),
                Read::Ttl("ttl"),
            ),
            group_cmd("SetGroupRateLimit", "r", json!({ "max": 2 })),
            group_cmd(
                "SetGroupRateLimit",
                "r",
                json!({ "max": 0, "duration": 10 }),
            ),
            group_cmd(
                "SetGroupRateLimit",
                "r",
                json!({ "max": 2, "duration": hour }),
            ),
            group_cmd("GetGroupRateLimit", "r", none.clone()),
            push(1, "r"),
            push(2, "r"),
            push(3, "r"),
            push(4, "s"),
            pull_all(limit.clone()),
            Step(
                "GetGroupRateLimitTtl",
                json!({ "queue": "$q", "groupId": "r" }),
                Read::Ttl("ttl"),
            ),
            Step(
                "GetGroupRateLimitTtl",
                json!({ "queue": "$q", "groupId": "r", "maxJobs": 3 }),
                Read::Ttl("ttl"),
            ),
            pull_all(limit.clone()),
            group_cmd("RemoveGroupRateLimit", "r", none.clone()),
            group_cmd("RemoveGroupRateLimit", "r", none.clone()),
            group_cmd("GetGroupRateLimit", "r", none.clone()),
            Step(
                "GetGroupRateLimitTtl",
                json!({ "queue": "$q", "groupId": "r" }),
                Read::Ttl("ttl"),
            ),
            pull_all(limit),
        ],
    );
}

/// RateLimitGroup holds a group back for its duration, whatever the pull sends.
#[test]
fn rate_limit_group_like_bunqueue() {
    same_on_both(
        "manual",
        &[
            group_cmd("RateLimitGroup", "m", json!({ "duration": 0 })),
            group_cmd("RateLimitGroup", "m", json!({ "duration": 3_600_000 })),
            push(1, "m"),
            push(2, "o"),
            pull_all(Json::Null),
            Step(
                "GetGroupRateLimitTtl",
                json!({ "queue": "$q", "groupId": "m" }),
                Read::Ttl("ttl"),
            ),
            pull_all(Json::Null),
        ],
    );
}

/// Stats, Metrics (both forms), Prometheus, StorageStatus, CompactMemory, TrimEvents and the
/// webhook reads: the server-wide figures by shape (other tests move them), a queue's own
/// figures whole.
#[test]
fn server_figures_like_bunqueue() {
    let job = |n: i64| json!({ "queue": "$q", "name": "j", "data": { "n": n }, "maxAttempts": 1 });
    let pull = || whole("PULL", json!({ "queue": "$q" }));
    let ts: &'static [&'static str] = &[
        "prevTS",
        "timestamp",
        "createdAt",
        "runAt",
        "startedAt",
        "id",
    ];
    same_on_both(
        "figures",
        &[
            Step("Stats", json!({}), Read::Shape),
            Step("Metrics", json!({}), Read::Shape),
            whole("Metrics", json!({ "queue": "$q", "type": "completed" })),
            whole("Metrics", json!({ "queue": "$q" })),
            whole("Metrics", json!({ "type": "failed" })),
            whole("Metrics", json!({ "queue": "bad name", "type": "failed" })),
            whole("PUSH", job(1)),
            Step("PULL", json!({ "queue": "$q" }), Read::PulledSet),
            whole("ACK", json!({ "id": "$last" })),
            whole("PUSH", job(2)),
            Step("PULL", json!({ "queue": "$q" }), Read::PulledSet),
            whole("FAIL", json!({ "id": "$last", "error": "boom" })),
            Step(
                "Metrics",
                json!({ "queue": "$q", "type": "completed" }),
                Read::Scrub(ts),
            ),
            Step(
                "Metrics",
                json!({ "queue": "$q", "type": "failed" }),
                Read::Scrub(ts),
            ),
            Step(
                "Metrics",
                json!({ "queue": "$q", "type": "failed", "start": 1 }),
                Read::Scrub(ts),
            ),
            Step("Stats", json!({}), Read::Shape),
            Step("Metrics", json!({}), Read::Shape),
            whole("StorageStatus", json!({})),
            whole("CompactMemory", json!({})),
            whole("ListWebhooks", json!({})),
            whole("RemoveWebhook", json!({ "webhookId": "nope" })),
            whole(
                "SetWebhookEnabled",
                json!({ "id": "nope", "enabled": true }),
            ),
            whole("TrimEvents", json!({ "queue": "$q", "maxLength": 100 })),
            whole("TrimEvents", json!({ "queue": "$q" })),
            whole("TrimEvents", json!({ "maxLength": 1 })),
            whole("TrimEvents", json!({ "queue": "$q", "maxLength": 0 })),
            whole("TrimEvents", json!({ "queue": "$q", "maxLength": 0 })),
            pull(),
        ],
    );
}

/// Prometheus answers bunqueue's text exposition: its server-wide metric names are there.
#[test]
fn prometheus_names_like_bunqueue() {
    for target in [Target::Bunqueue, Target::Broker] {
        let mut raw = RawClient::connect(target.shared(), None).expect("connect");
        let reply = raw.command("Prometheus", &[]).expect("Prometheus");
        let text = reply
            .get("data")
            .and_then(|d| d.get("metrics"))
            .and_then(Value::as_str)
            .expect("data.metrics")
            .to_owned();
        for name in [
            "bunqueue_jobs_waiting ",
            "bunqueue_jobs_active ",
            "bunqueue_jobs_pushed_total ",
            "bunqueue_jobs_failed_total ",
            "# TYPE bunqueue_uptime_seconds gauge",
        ] {
            assert!(text.contains(name), "{target:?}: no {name:?} in {text}");
        }
    }
}

/// SetDlqConfig merges into GetDlqConfig's settings as bunqueue does; a lower `maxEntries`
/// evicts the oldest entries and `maxAge: null` leaves entries without an expiry.
/// `autoRetry: true` is refused by the broker (an intended difference: it does not retry DLQ
/// entries on its own), so it is not in the script.
#[test]
fn dlq_config_like_bunqueue() {
    let job = |n: i64| json!({ "queue": "$q", "name": "j", "data": { "n": n }, "maxAttempts": 1 });
    let fail = || whole("FAIL", json!({ "id": "$last", "error": "boom" }));
    let pull = || Step("PULL", json!({ "queue": "$q" }), Read::PulledSet);
    let entry_times: &'static [&'static str] = &[
        "enteredAt",
        "expiresAt",
        "timestamp",
        "createdAt",
        "runAt",
        "startedAt",
        "id",
        "oldestEntry",
        "newestEntry",
    ];
    same_on_both(
        "dlq-config",
        &[
            whole("GetDlqConfig", json!({ "queue": "$q" })),
            whole(
                "SetDlqConfig",
                json!({ "queue": "$q", "config": { "maxEntries": 2, "maxAutoRetries": "5" } }),
            ),
            whole("GetDlqConfig", json!({ "queue": "$q" })),
            whole(
                "SetDlqConfig",
                json!({ "queue": "$q", "config": { "maxAge": 1000.7, "autoRetryInterval": -5, "autoRetry": false } }),
            ),
            whole("GetDlqConfig", json!({ "queue": "$q" })),
            whole(
                "SetDlqConfig",
                json!({ "queue": "$q", "config": { "maxEntries": 0, "maxAge": "x" } }),
            ),
            whole("GetDlqConfig", json!({ "queue": "$q" })),
            whole("SetDlqConfig", json!({ "queue": "$q" })),
            whole("SetDlqConfig", json!({ "queue": "$q", "config": 5 })),
            whole(
                "SetDlqConfig",
                json!({ "queue": "$q", "config": { "maxEntries": 3, "maxAge": null } }),
            ),
            whole("GetDlqConfig", json!({ "queue": "$q" })),
            whole("PUSH", job(1)),
            pull(),
            fail(),
            whole("PUSH", job(2)),
            pull(),
            fail(),
            whole("PUSH", job(3)),
            pull(),
            fail(),
            Step(
                "GetDlqStats",
                json!({ "queue": "$q" }),
                Read::Scrub(entry_times),
            ),
            whole(
                "SetDlqConfig",
                json!({ "queue": "$q", "config": { "maxEntries": 2 } }),
            ),
            Step(
                "GetDlqStats",
                json!({ "queue": "$q" }),
                Read::Scrub(&["oldestEntry", "newestEntry"]),
            ),
            whole("GetJobCounts", json!({ "queue": "$q" })),
        ],
    );
}

/// Cron patterns with an IANA time zone: the next run on the zone's wall clock, an unknown
/// zone refused with Bun's text, an empty one read as none, names in any case.
#[test]
fn cron_time_zones_like_bunqueue() {
    let cron = |name: &str, tz: Json| {
        let mut f = json!({
            "queue": "$q",
            "name": format!("parity-tz-{name}-{}", std::process::id()),
            "schedule": "30 9 * * *",
        });
        if !tz.is_null() {
            f["timezone"] = tz;
        }
        whole("Cron", f)
    };
    let delete = |name: &str| {
        whole(
            "CronDelete",
            json!({ "name": format!("parity-tz-{name}-{}", std::process::id()) }),
        )
    };
    same_on_both(
        "cron-tz",
        &[
            cron("rome", json!("Europe/Rome")),
            cron("ny", json!("America/New_York")),
            cron("kolkata", json!("Asia/Kolkata")),
            cron("lower", json!("utc")),
            cron("empty", json!("")),
            cron("none", Json::Null),
            cron("bad", json!("Nowhere/Bad")),
            cron("offset", json!("+02:00")),
            whole(
                "Cron",
                json!({
                    "queue": "$q",
                    "name": format!("parity-tz-secs-{}", std::process::id()),
                    "schedule": "15 30 9 * * *",
                    "timezone": "Australia/Sydney",
                }),
            ),
            delete("rome"),
            delete("ny"),
            delete("kolkata"),
            delete("lower"),
            delete("empty"),
            delete("none"),
            delete("secs"),
        ],
    );
}

/// UpdateParent links a job to a waiting parent, which then waits for it; its refusals, in
/// bunqueue's order and words.
#[test]
fn update_parent_like_bunqueue() {
    let job = |n: i64| json!({ "queue": "$q", "name": "j", "data": { "n": n } });
    let state = |id: &str| whole("GetState", json!({ "id": id }));
    let link = |child: &str, parent: &str| {
        whole(
            "UpdateParent",
            json!({ "childId": child, "parentId": parent }),
        )
    };
    same_on_both(
        "update-parent",
        &[
            whole("PUSH", job(1)),
            whole("PUSH", job(2)),
            link("$1", "$1"),
            link("nope", "$0"),
            link("$1", "nope"),
            link("$1", "$0"),
            state("$0"),
            whole("GetJobCounts", json!({ "queue": "$q" })),
            link("$1", "$0"),
            Step("PULL", json!({ "queue": "$q" }), Read::PulledSet),
            whole("ACK", json!({ "id": "$last" })),
            state("$0"),
            whole("PUSH", job(3)),
            link("$2", "$1"),
            whole("PUSH", job(4)),
            link("$3", "$0"),
            link("$3", "$2"),
            state("$0"),
            whole("GetJobCounts", json!({ "queue": "$q" })),
        ],
    );
}

/// MoveToWaitingChildren takes an active job to `waiting-children`; a job that is not active
/// is refused.
#[test]
fn move_to_waiting_children_like_bunqueue() {
    same_on_both(
        "waiting-children",
        &[
            whole(
                "PUSH",
                json!({ "queue": "$q", "name": "j", "data": { "n": 1 } }),
            ),
            whole("MoveToWaitingChildren", json!({ "id": "$0" })),
            Step("PULL", json!({ "queue": "$q" }), Read::PulledSet),
            whole("MoveToWaitingChildren", json!({ "id": "$0" })),
            whole("GetState", json!({ "id": "$0" })),
            whole("GetJobCounts", json!({ "queue": "$q" })),
            whole("MoveToWaitingChildren", json!({ "id": "$0" })),
            whole("MoveToWaitingChildren", json!({ "id": "nope" })),
            Step("PULL", json!({ "queue": "$q" }), Read::PulledSet),
        ],
    );
}
