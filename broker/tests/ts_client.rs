//! bunqueue's own TypeScript client (Queue, Worker, QueueEvents and FlowProducer, run with bun)
//! against the broker: every job lands exactly once, with its data, and every completion is
//! seen by a QueueEvents listener, in memory and in SQLite mode.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use autobatch_broker::{BrokerConfig, EmbeddedBroker};
use autobatch_tests::TsPeer;
use serde_json::json;

fn round_trip(config: BrokerConfig, queue: &str) {
    let broker = EmbeddedBroker::start(config).unwrap();
    // bunqueue's QueueEvents, subscribed before the first add, exits after 640 completions.
    let listener = TsPeer::new("events_ts_listen.ts")
        .target(broker.addr())
        .options(&json!({"queue": queue, "count": 640}))
        .spawn()
        .expect("events_ts_listen.ts started");
    let subscribed = Instant::now() + Duration::from_secs(60);
    while !listener.stdout_so_far().contains("\"ready\"") {
        assert!(
            Instant::now() < subscribed,
            "the TS QueueEvents never subscribed:\n{}",
            listener.stdout_so_far()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let produced = TsPeer::new("produce.ts")
        .target(broker.addr())
        .options(&json!({
            "queue": queue,
            "tag": "ts",
            "steps": [
                {"kind": "seq", "n": 20},
                {"kind": "waves", "n": 300, "wave": 50},
                {"kind": "bulk", "n": 300, "batch": 100},
                {"kind": "durable", "n": 20},
            ],
        }))
        .run_json()
        .expect("produce.ts ran");
    let ids: Vec<String> = produced["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    let n = ids.len();
    assert_eq!(n, 640);
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), n, "one id per add");

    let consumed = TsPeer::new("consume.ts")
        .target(broker.addr())
        .options(&json!({"queue": queue, "count": n, "concurrency": 8, "settleMs": 300}))
        .run_json()
        .expect("consume.ts ran");
    assert_eq!(consumed["timed_out"], json!(false));
    let mut seen: HashMap<String, i64> = HashMap::new();
    for p in consumed["processed"].as_array().unwrap() {
        let id = p["id"].as_str().unwrap().to_owned();
        let i = p["data"]["i"].as_i64().unwrap();
        assert_eq!(p["data"]["tag"], json!("ts"));
        assert_eq!(ids[i as usize], id, "job {i} has its own data");
        assert!(seen.insert(id, i).is_none(), "delivered once");
    }
    assert_eq!(seen.len(), n, "every job processed");
    let counts = &consumed["counts"];
    assert_eq!(counts["completed"], json!(n), "{counts}");
    assert_eq!(counts["waiting"], json!(0), "{counts}");
    assert_eq!(counts["active"], json!(0), "{counts}");
    let events = listener
        .wait()
        .and_then(|out| out.success())
        .and_then(|out| out.json_lines())
        .expect("events_ts_listen.ts ran");
    let mut completed: Vec<String> = events
        .iter()
        .filter(|e| e["event"] == json!("completed"))
        .map(|e| e["jobId"].as_str().unwrap().to_owned())
        .collect();
    completed.sort();
    assert_eq!(
        completed, unique,
        "one completed event per job, seen by the TS QueueEvents"
    );
    broker.stop().unwrap();
}

#[test]
fn official_ts_client_memory() {
    round_trip(BrokerConfig::default(), "ts-memory");
}

#[test]
fn official_ts_client_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    round_trip(
        BrokerConfig::default().data_path(dir.path().join("ts.db")),
        "ts-sqlite",
    );
}

/// bunqueue's own FlowProducer and Worker (tests/peers/flow_ts_producer.ts) against the broker:
/// every job of every flow processed once, children before their parents, a chain in order,
/// parents reading their children's values and an ignored child's failure, and the queues'
/// counts at the end.
fn ts_flows(config: BrokerConfig, top: &str, parts: &str) {
    let broker = EmbeddedBroker::start(config).unwrap();
    let trees = 10;
    let out = TsPeer::new("flow_ts_producer.ts")
        .target(broker.addr())
        .options(&json!({"top": top, "parts": parts, "trees": trees}))
        .run_json()
        .expect("flow_ts_producer.ts ran");
    let processed = out["processed"].as_array().unwrap();
    let mut seq: HashMap<String, i64> = HashMap::new();
    for p in processed {
        let id = p["id"].as_str().unwrap().to_owned();
        assert!(
            seq.insert(id.clone(), p["seq"].as_i64().unwrap()).is_none(),
            "{id} processed once"
        );
    }
    // 4 jobs a tree, 3 chain steps, 3 in the policy flow.
    assert_eq!(seq.len(), trees * 4 + 6, "every job processed");
    let at = |id: &serde_json::Value| seq[id.as_str().unwrap()];
    let find = |id: &serde_json::Value| {
        processed
            .iter()
            .find(|p| p["id"] == *id)
            .expect("processed")
    };
    for t in out["trees"].as_array().unwrap() {
        assert!(at(&t["a1"]) < at(&t["a"]), "a1 before a: {t}");
        assert!(
            at(&t["a"]) < at(&t["id"]) && at(&t["b"]) < at(&t["id"]),
            "{t}"
        );
        let values = &find(&t["id"])["values"];
        let key = |leg: &str| format!("{parts}:{}", t[leg].as_str().unwrap());
        assert_eq!(
            values,
            &json!({ key("a"): {"leg": "a"}, key("b"): {"leg": "b"} }),
            "the parent reads its children's values"
        );
    }
    let chain = out["chain"].as_array().unwrap();
    assert_eq!(chain.len(), 3);
    assert!(at(&chain[0]) < at(&chain[1]) && at(&chain[1]) < at(&chain[2]));
    let policy = &out["policy"];
    let merge = find(&policy["id"]);
    assert!(at(&policy["bad"]) < at(&policy["id"]) && at(&policy["ok"]) < at(&policy["id"]));
    let bad_key = format!("{parts}:{}", policy["bad"].as_str().unwrap());
    assert_eq!(merge["ignored"], json!({ bad_key: "boom" }));
    let ok_key = format!("{parts}:{}", policy["ok"].as_str().unwrap());
    assert_eq!(merge["values"], json!({ ok_key: {"leg": "ok"} }));
    assert_eq!(out["failed"], json!([policy["bad"]]));
    let counts = &out["counts"];
    let expect = |c: &serde_json::Value, completed: usize, failed: usize| {
        assert_eq!(c["completed"], json!(completed), "{c}");
        assert_eq!(c["failed"], json!(failed), "{c}");
        for k in ["waiting", "active", "delayed", "waiting-children"] {
            assert_eq!(c[k], json!(0), "{k}: {c}");
        }
    };
    expect(&counts["top"], trees + 1, 0);
    expect(&counts["parts"], trees * 3 + 3 + 1, 1);
    broker.stop().unwrap();
}

#[test]
fn official_ts_flows_memory() {
    ts_flows(BrokerConfig::default(), "tsf-top", "tsf-parts");
}

#[test]
fn official_ts_flows_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    ts_flows(
        BrokerConfig::default().data_path(dir.path().join("flows.db")),
        "tsf-top-sql",
        "tsf-parts-sql",
    );
}
