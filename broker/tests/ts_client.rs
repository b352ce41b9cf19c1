//! bunqueue's own TypeScript client (Queue and Worker, run with bun) against the broker: every
//! job lands exactly once, with its data, in memory and in SQLite mode.

use std::collections::HashMap;

use autobatch_broker::{BrokerConfig, EmbeddedBroker};
use autobatch_tests::TsPeer;
use serde_json::json;

fn round_trip(config: BrokerConfig, queue: &str) {
    let broker = EmbeddedBroker::start(config).unwrap();
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
