//! SQLite mode: recovery after a clean restart, and after SIGKILL of the real binary.

mod common;

use autobatch_broker::{BrokerConfig, EmbeddedBroker};
use autobatch_core::wire::Value;
use common::*;

#[test]
fn restart_recovers_jobs_and_requeues_active_ones() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.db");
    let cfg = || BrokerConfig::default().data_path(&path);
    let (waiting, active, done, delayed);
    {
        let b = EmbeddedBroker::start(cfg()).unwrap();
        let mut c = Raw::connect(b.addr());
        // Jobs added in the same millisecond go by id, as in bunqueue: "0-custom" sorts
        // before any UUIDv7 id ("01…"), so this one is pulled first whatever the clock.
        active = push(&mut c, "q", int(1), vec![("jobId", s("0-custom"))]);
        waiting = push(
            &mut c,
            "q",
            Value::Bin(vec![1, 2, 3]),
            vec![("durable", Value::Bool(true))],
        );
        done = push(&mut c, "q", int(3), vec![]);
        delayed = push(&mut c, "q", int(4), vec![("delay", int(3_600_000))]);
        let (id, _) = pull_owned(&mut c, "q").unwrap();
        assert_eq!(id, active);
        let r = c.call(
            "PULL",
            vec![("queue", s("q")), ("detach", Value::Bool(true))],
        );
        assert_eq!(r.get("job").unwrap().get("id"), Some(&s(&waiting)));
        let r = c.call(
            "PULL",
            vec![("queue", s("q")), ("detach", Value::Bool(true))],
        );
        assert_eq!(r.get("job").unwrap().get("id"), Some(&s(&done)));
        assert!(ok(
            &c.call("ACK", vec![("id", s(&done)), ("result", s("r"))])
        ));
        // `waiting` stays active (detached) across the stop; the stop commits everything.
        b.stop().unwrap();
    }
    let b = EmbeddedBroker::start(cfg()).unwrap();
    let mut c = Raw::connect(b.addr());
    assert_eq!(
        state(&mut c, &active),
        "waiting",
        "active jobs return to waiting"
    );
    assert_eq!(state(&mut c, &waiting), "waiting");
    assert_eq!(state(&mut c, &done), "completed");
    assert_eq!(state(&mut c, &delayed), "delayed");
    assert_eq!(
        c.call("GetResult", vec![("id", s(&done))]).get("result"),
        Some(&s("r"))
    );
    // The custom id is still live: re-adding it adds nothing.
    assert_eq!(
        push(&mut c, "q", int(9), vec![("jobId", s("0-custom"))]),
        "0-custom"
    );
    assert_eq!(
        c.call("Count", vec![("queue", s("q"))]).get("count"),
        Some(&int(3))
    );
    // FIFO order survives: the oldest job comes first, with its data.
    let r = c.call("PULLB", vec![("queue", s("q")), ("count", int(10))]);
    let jobs = r.get("jobs").unwrap().as_array().unwrap();
    assert_eq!(jobs[0].get("id"), Some(&s(&active)));
    assert_eq!(jobs[1].get("data"), Some(&Value::Bin(vec![1, 2, 3])));
}

#[test]
fn sigkill_keeps_every_acknowledged_durable_job() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crash.db");
    let n = 500;
    let mut broker = spawn_on(&path);
    let mut c = Raw::connect(broker.addr);
    // Durable pushes, each acknowledged before the next.
    for i in 0..n {
        push(
            &mut c,
            "crash",
            Value::map([("kind", s("durable")), ("i", int(i))]),
            vec![("durable", Value::Bool(true))],
        );
    }
    // Non-durable pushes, pipelined in PUSHB of 100; wait for every reply.
    let mut sent = Vec::new();
    for chunk in 0..n / 100 {
        let jobs = (0..100)
            .map(|k| {
                Value::map([
                    ("name", s("j")),
                    (
                        "data",
                        Value::map([("kind", s("buffered")), ("i", int(chunk * 100 + k))]),
                    ),
                ])
            })
            .collect();
        sent.push(c.send("PUSHB", vec![("queue", s("crash")), ("jobs", arr(jobs))]));
    }
    for _ in &sent {
        assert!(ok(&c.recv()));
    }
    broker.child.kill().unwrap(); // SIGKILL on unix
    broker.child.wait().unwrap();

    let mut broker = spawn_on(&path);
    let mut c = Raw::connect(broker.addr);
    let (mut durable, mut buffered) = (0, 0);
    loop {
        let r = c.call("PULLB", vec![("queue", s("crash")), ("count", int(1000))]);
        let jobs = r.get("jobs").unwrap().as_array().unwrap().to_vec();
        if jobs.is_empty() {
            break;
        }
        for j in jobs {
            match j
                .get("data")
                .unwrap()
                .expanded()
                .unwrap()
                .get("kind")
                .unwrap()
                .as_str()
                .unwrap()
            {
                "durable" => durable += 1,
                _ => buffered += 1,
            }
        }
    }
    println!(
        "crash test: durable kept {durable}/{n}; non-durable kept {buffered}/{n}, lost {}",
        n - buffered
    );
    assert_eq!(
        durable, n,
        "every acknowledged durable job survives SIGKILL"
    );
    broker.child.kill().unwrap();
    broker.child.wait().unwrap();
}

/// `Update` is written to the store: the new data of a waiting and of an active job are what
/// a restarted broker holds; a finished job is refused with bunqueue's text.
#[test]
fn updated_data_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.db");
    let cfg = || BrokerConfig::default().data_path(&path);
    let (waiting, active);
    {
        let b = EmbeddedBroker::start(cfg()).unwrap();
        let mut c = Raw::connect(b.addr());
        active = push(&mut c, "q", int(1), vec![]);
        waiting = push(&mut c, "q", int(2), vec![]);
        let done = push(&mut c, "q2", int(3), vec![]);
        let (id, _) = pull_owned(&mut c, "q").unwrap();
        assert_eq!(id, active);
        for (id, data) in [(&waiting, "w"), (&active, "a")] {
            let r = c.call("Update", vec![("id", s(id)), ("data", s(data))]);
            assert!(ok(&r), "{r:?}");
        }
        let (id, t) = pull_owned(&mut c, "q2").unwrap();
        assert_eq!(id, done);
        assert!(ok(&c.call("ACK", vec![("id", s(&done)), ("token", s(&t))])));
        let r = c.call("Update", vec![("id", s(&done)), ("data", s("late"))]);
        assert_eq!(
            r.get("error"),
            Some(&s("Job not found or cannot be updated"))
        );
        b.stop().unwrap();
    }
    let b = EmbeddedBroker::start(cfg()).unwrap();
    let mut c = Raw::connect(b.addr());
    for (id, data) in [(&waiting, "w"), (&active, "a")] {
        let r = c.call("GetJob", vec![("id", s(id))]);
        assert_eq!(
            r.get("job").and_then(|j| j.get("data")),
            Some(&s(data)),
            "{id}"
        );
    }
}

/// A priority a ChangePriority left with a fraction is kept as sent across a restart, and a
/// completed job still reads progress 100 (bunqueue's SQLite mode reads both from the row).
#[test]
fn a_fractional_priority_and_a_completed_progress_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.db");
    let cfg = || BrokerConfig::default().data_path(&path);
    let (fraction, done);
    {
        let b = EmbeddedBroker::start(cfg()).unwrap();
        let mut c = Raw::connect(b.addr());
        done = push(&mut c, "q2", int(1), vec![]);
        fraction = push(&mut c, "q", int(2), vec![]);
        let r = c.call(
            "ChangePriority",
            vec![("id", s(&fraction)), ("priority", Value::F64(1.5))],
        );
        assert!(ok(&r), "{r:?}");
        let (id, t) = pull_owned(&mut c, "q2").unwrap();
        assert_eq!(id, done);
        assert!(ok(&c.call("ACK", vec![("id", s(&done)), ("token", s(&t))])));
        b.stop().unwrap();
    }
    let b = EmbeddedBroker::start(cfg()).unwrap();
    let mut c = Raw::connect(b.addr());
    let job = |c: &mut Raw, id: &str, key: &str| {
        let r = c.call("GetJob", vec![("id", s(id))]);
        r.get("job").and_then(|j| j.get(key)).cloned()
    };
    assert_eq!(job(&mut c, &fraction, "priority"), Some(Value::F64(1.5)));
    assert_eq!(job(&mut c, &done, "progress"), Some(int(100)));
    let r = c.call(
        "ChangePriority",
        vec![("id", s(&fraction)), ("priority", Value::F64(f64::NAN))],
    );
    assert_eq!(r.get("error"), Some(&s("priority must be a finite number")));
}

/// A flow in SQLite mode: PUSHF replies after its rows commit, so a restart finds every job,
/// and its links: the parent still waits for its child, which releases it when it completes.
#[test]
fn a_flow_survives_a_restart_with_its_links() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("flows.db");
    let cfg = || BrokerConfig::default().data_path(&path);
    let flow = arr(vec![
        Value::map([
            ("id", s("kid")),
            ("queue", s("fk")),
            (
                "input",
                Value::map([
                    ("name", s("kid")),
                    ("parentId", s("top")),
                    (
                        "data",
                        Value::map([("__parentId", s("top")), ("__parentQueue", s("ft"))]),
                    ),
                ]),
            ),
        ]),
        Value::map([
            ("id", s("top")),
            ("queue", s("ft")),
            (
                "input",
                Value::map([
                    ("name", s("top")),
                    ("dependsOn", arr(vec![s("kid")])),
                    ("childrenIds", arr(vec![s("kid")])),
                    ("data", Value::map([("__childrenIds", arr(vec![s("kid")]))])),
                ]),
            ),
        ]),
    ]);
    {
        let b = EmbeddedBroker::start(cfg()).unwrap();
        let mut c = Raw::connect(b.addr());
        let r = c.call("PUSHF", vec![("jobs", flow)]);
        assert!(ok(&r), "{r:?}");
        let r = c.call("GetState", vec![("id", s("top"))]);
        assert_eq!(r.get("state"), Some(&s("waiting-children")));
        b.stop().unwrap();
    }
    let b = EmbeddedBroker::start(cfg()).unwrap();
    let mut c = Raw::connect(b.addr());
    for (id, want) in [("top", "waiting-children"), ("kid", "waiting")] {
        let r = c.call("GetState", vec![("id", s(id))]);
        assert_eq!(r.get("state"), Some(&s(want)), "{id}");
    }
    let r = c.call("GetJobCounts", vec![("queue", s("ft"))]);
    assert_eq!(
        r.get("counts").and_then(|c| c.get("waiting-children")),
        Some(&int(1))
    );
    let (id, token) = pull_owned(&mut c, "fk").expect("the child");
    assert_eq!(id, "kid");
    let r = c.call("ACK", vec![("id", s(&id)), ("token", s(&token))]);
    assert!(ok(&r), "{r:?}");
    let r = c.call("GetState", vec![("id", s("top"))]);
    assert_eq!(r.get("state"), Some(&s("waiting")));
    b.stop().unwrap();
}

/// The jobs a scheduler added survive a restart like any other job, and so does the
/// scheduler, with its executions and next run (as bunqueue's SQLite mode keeps them): it does
/// not fire again early. Seen through a second connection.
#[test]
fn scheduled_jobs_and_their_scheduler_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.db");
    let cfg = || BrokerConfig::default().data_path(&path);
    let counts = |c: &mut Raw| {
        let r = c.call("GetJobCounts", vec![("queue", s("q"))]);
        r.get("counts")
            .and_then(|x| x.get("waiting"))
            .and_then(Value::as_f64)
    };
    let cron = |c: &mut Raw| {
        let r = c.call("CronGet", vec![("name", s("every"))]);
        let cron = r.get("cron").cloned().unwrap_or(Value::Nil);
        let field = |k: &str| cron.get(k).and_then(Value::as_f64);
        (field("executions"), field("nextRun"))
    };
    let before = {
        let b = EmbeddedBroker::start(cfg()).unwrap();
        let mut c = Raw::connect(b.addr());
        // Runs once at once (`immediately`), then not for an hour.
        let r = c.call(
            "Cron",
            vec![
                ("name", s("every")),
                ("queue", s("q")),
                ("jobName", s("tick")),
                ("repeatEvery", int(3_600_000)),
                ("maxLimit", int(5)),
                ("immediately", Value::Bool(true)),
            ],
        );
        assert!(ok(&r), "{r:?}");
        let mut check = Raw::connect(b.addr());
        // Bounded so that a scheduler that never fires fails the test instead of hanging it.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while cron(&mut check).0 != Some(1.0) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(counts(&mut check), Some(1.0));
        let before = cron(&mut check);
        assert_eq!(before.0, Some(1.0));
        b.stop().unwrap();
        before
    };
    let b = EmbeddedBroker::start(cfg()).unwrap();
    let mut c = Raw::connect(b.addr());
    assert_eq!(counts(&mut c), Some(1.0));
    assert_eq!(cron(&mut c), before);
    let r = c.call("CronList", vec![]);
    assert_eq!(
        r.get("crons").and_then(Value::as_array).map(<[Value]>::len),
        Some(1)
    );
}

/// A job's add options are kept with it in SQLite mode: after a restart GetJob shows the same
/// `timeout`, `ttl`, `tags`, `customId`, `groupId`, `stallTimeout`, `stackTraceLimit`,
/// `keepLogs`, `sizeLimit`, failure flags and deduplication settings as before, and a
/// database written before the `options` column existed is opened (the column is added).
#[test]
fn add_options_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.db");
    let cfg = || BrokerConfig::default().data_path(&path);
    let keys = [
        "timeout",
        "ttl",
        "tags",
        "customId",
        "groupId",
        "stallTimeout",
        "stackTraceLimit",
        "keepLogs",
        "sizeLimit",
        "failParentOnFailure",
        "ignoreDependencyOnFailure",
        "uniqueKey",
        "backoff",
        "backoffConfig",
        "lifo",
    ];
    let pick = |job: &Value| -> Vec<(String, Value)> {
        keys.iter()
            .map(|k| {
                (
                    k.to_string(),
                    job.get(k).cloned().unwrap_or(Value::Undefined),
                )
            })
            .collect()
    };
    let before;
    {
        let b = EmbeddedBroker::start(cfg()).unwrap();
        let mut c = Raw::connect(b.addr());
        let r = c.call(
            "PUSH",
            vec![
                ("queue", s("q")),
                ("name", s("n")),
                ("data", int(1)),
                ("jobId", s("kept")),
                ("timeout", int(9000)),
                ("ttl", int(3_600_000)),
                ("tags", Value::Array(vec![s("a"), s("b")])),
                ("groupId", s("g")),
                ("stallTimeout", int(60_000)),
                ("stackTraceLimit", int(3)),
                ("keepLogs", int(5)),
                ("sizeLimit", int(1000)),
                ("failParentOnFailure", Value::Bool(true)),
                ("ignoreDependencyOnFailure", Value::Bool(true)),
                ("uniqueKey", s("u")),
                (
                    "backoff",
                    Value::map([("type", s("exponential")), ("delay", int(500))]),
                ),
                ("lifo", Value::Bool(true)),
            ],
        );
        assert!(ok(&r), "{r:?}");
        let job = c.call("GetJob", vec![("id", s("kept"))]);
        before = pick(job.get("job").unwrap());
        assert_eq!(before[0].1, int(9000), "{before:?}");
        assert_eq!(before[3].1, s("kept"));
        b.stop().unwrap();
    }
    let b = EmbeddedBroker::start(cfg()).unwrap();
    let mut c = Raw::connect(b.addr());
    let job = c.call("GetJob", vec![("id", s("kept"))]);
    assert_eq!(pick(job.get("job").unwrap()), before);
    b.stop().unwrap();

    // A database from before the `options` column: opened, its jobs read with no options.
    let old = dir.path().join("old.db");
    {
        let conn = rusqlite::Connection::open(&old).unwrap();
        conn.execute_batch(
            "CREATE TABLE jobs (id TEXT PRIMARY KEY, seq INTEGER NOT NULL, queue TEXT NOT NULL,
             name TEXT NOT NULL, data BLOB NOT NULL, state TEXT NOT NULL,
             priority INTEGER NOT NULL, attempts INTEGER NOT NULL, max_attempts INTEGER NOT NULL,
             backoff TEXT, created_at REAL NOT NULL, run_at REAL NOT NULL, lifo INTEGER NOT NULL,
             remove_on_complete INTEGER NOT NULL, remove_on_fail INTEGER NOT NULL,
             durable INTEGER NOT NULL, unique_key TEXT, result BLOB, failed_reason TEXT);
             INSERT INTO jobs VALUES ('old', 0, 'q', 'n', x'01', 'waiting', 0, 0, 3, NULL, 1.0,
             1.0, 0, 0, 0, 0, NULL, NULL, NULL);",
        )
        .unwrap();
    }
    let b = EmbeddedBroker::start(BrokerConfig::default().data_path(&old)).unwrap();
    let mut c = Raw::connect(b.addr());
    let job = c.call("GetJob", vec![("id", s("old"))]);
    let job = job.get("job").unwrap();
    assert_eq!(job.get("timeout"), Some(&Value::Nil));
    assert_eq!(job.get("tags"), Some(&Value::Array(vec![])));
    b.stop().unwrap();
}
