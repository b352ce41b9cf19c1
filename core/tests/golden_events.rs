//! Golden tests for queue events on frames captured from bunqueue 2.9.5: SubscribeEvents and
//! UnsubscribeEvents (with the server's refusals), and every event frame the server pushed
//! while the official TS client added, processed, failed and removed jobs, typed.

#[path = "support/ops_golden.rs"]
mod ops_golden;

use autobatch_core::session::{QueueEvent, SubscribeEvents, UnsubscribeEvents};
use autobatch_core::wire::Value;
use ops_golden::{check, commands, Reply};

const FILES: &[&str] = &["51_events.jsonl"];

#[test]
fn subscribe_and_unsubscribe() {
    // Two refusals (bad and missing queue name: our validation gives the server's text),
    // two acceptances (the TS QueueEvents's and a raw one).
    assert_eq!(check::<SubscribeEvents>(FILES, Reply::Exact), 5);
    assert_eq!(check::<UnsubscribeEvents>(FILES, Reply::Exact), 2);
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

/// `(conn, frame)` of every event frame in the capture, in order.
fn event_frames() -> Vec<(u64, Value)> {
    let path = format!(
        "{}/tests/vectors/ops/{}",
        env!("CARGO_MANIFEST_DIR"),
        FILES[0]
    );
    let text = std::fs::read_to_string(&path).expect("capture");
    text.lines()
        .filter_map(|l| {
            let j: serde_json::Value = serde_json::from_str(l).expect("json line");
            (j["dir"] == "s2c").then_some(())?;
            let frame = unhex(j["hex"].as_str()?);
            let v = Value::decode(&frame[4..]).ok()?;
            (v.get("type").and_then(Value::as_str) == Some("event"))
                .then(|| (j["conn"].as_u64().unwrap_or(0), v))
        })
        .collect()
}

#[test]
fn every_event_frame_is_typed() {
    let frames = event_frames();
    assert!(!frames.is_empty());
    for (_, f) in &frames {
        let e = QueueEvent::from_frame(f);
        assert!(!matches!(e, QueueEvent::Other { .. }), "untyped: {f:?}");
        assert!(e.job_id().is_some(), "{e:?}");
    }
}

#[test]
fn the_subscriber_sees_a_jobs_life_in_order() {
    let frames = event_frames();
    let first_conn = frames[0].0;
    let events: Vec<QueueEvent> = frames
        .iter()
        .filter(|(c, _)| *c == first_conn)
        .map(|(_, f)| QueueEvent::from_frame(f))
        .collect();
    let names: Vec<&str> = events.iter().map(QueueEvent::name).collect();
    assert_eq!(
        names,
        [
            "waiting",
            "waiting",
            "active",
            "progress",
            "completed",
            "active",
            "progress",
            "failed",
            "waiting",
            "removed"
        ]
    );
    let ok = events[0].job_id().expect("id").to_owned();
    match &events[4] {
        QueueEvent::Completed {
            job_id,
            return_value,
            timestamp,
        } => {
            assert_eq!(job_id, &ok);
            assert_eq!(return_value, &Value::map([("done", Value::from(true))]));
            assert!(*timestamp > 1.0e12);
        }
        other => panic!("{other:?}"),
    }
    assert!(
        matches!(&events[3], QueueEvent::Progress { progress, .. } if progress.as_f64() == Some(50.0))
    );
    assert!(matches!(&events[7], QueueEvent::Failed { reason, .. } if reason == "boom"));
    assert!(matches!(&events[9], QueueEvent::Removed { prev, .. } if prev == "waiting"));
}

#[test]
fn every_captured_command_is_checked() {
    let checked = ["SubscribeEvents", "UnsubscribeEvents"];
    // What the TS Queue and Worker send to cause the events: other domains' commands.
    let others = [
        "PUSHB",
        "PULL",
        "ACKB",
        "FAIL",
        "Progress",
        "Cancel",
        "RegisterWorker",
        "UnregisterWorker",
    ];
    for cmd in commands(FILES) {
        assert!(
            checked.contains(&cmd.as_str()) || others.contains(&cmd.as_str()),
            "captured {cmd} is not checked here"
        );
    }
}

#[test]
fn an_untyped_event_still_names_its_job_and_its_type() {
    let event = Value::map([
        ("eventType", Value::from("new-thing")),
        ("queue", Value::from("q")),
        ("jobId", Value::from("7")),
    ]);
    let e = QueueEvent::from_frame(&autobatch_core::session::event_frame(event));
    assert!(matches!(e, QueueEvent::Other { .. }), "{e:?}");
    assert_eq!((e.name(), e.job_id()), ("new-thing", Some("7")));
    let jobless = QueueEvent::from_frame(&Value::map([("eventType", Value::from("gone"))]));
    assert_eq!((jobless.name(), jobless.job_id()), ("gone", None));
    assert_eq!(QueueEvent::Gap.job_id(), None);
}
