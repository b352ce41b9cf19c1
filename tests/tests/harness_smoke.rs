//! Smoke tests of the harness against the real bunqueue 2.9.5 server and its official TS
//! client. They need `scripts/bunqueue.sh install`; without it they fail (never skip) with the
//! command to run.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use autobatch_tests::msgpack::{read_frame, str_map_frame, top_level_map, Scalar, Writer};
use autobatch_tests::{ping_addr, BunqueueInstall, BunqueueServer, CountingProxy, ServerOptions};
use autobatch_tests::{FrameCounts, TsPeer};
use serde_json::{json, Value};

const IO_TIMEOUT: Duration = Duration::from_secs(10);

fn start(opts: ServerOptions) -> BunqueueServer {
    BunqueueServer::start(opts).unwrap_or_else(|e| panic!("{e}"))
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect_timeout(&addr, IO_TIMEOUT).expect("connect");
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    s.set_nodelay(true).unwrap();
    s
}

/// Read one reply and return its top-level fields.
fn reply(s: &mut TcpStream) -> BTreeMap<String, Scalar> {
    let payload = read_frame(s).expect("read reply frame");
    top_level_map(&payload)
        .unwrap_or_else(|| panic!("reply is not a map: {payload:02x?}"))
        .into_iter()
        .collect()
}

fn pushb_frame(queue: &str, n: u32, req_id: &str) -> Vec<u8> {
    let mut w = Writer::new();
    w.map(4).str("cmd").str("PUSHB").str("queue").str(queue);
    w.str("jobs").array(n);
    for i in 0..n {
        w.map(2)
            .str("name")
            .str("raw")
            .str("data")
            .map(1)
            .str("i")
            .uint(u64::from(i));
    }
    w.str("reqId").str(req_id);
    w.to_frame()
}

/// Poll the proxy until `cond` holds (frames are counted on the proxy thread).
fn wait_counts(proxy: &CountingProxy, cond: impl Fn(&FrameCounts) -> bool) -> FrameCounts {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let c = proxy.snapshot();
        if cond(&c) || Instant::now() >= deadline {
            return c;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn produce(addr: SocketAddr, opts: Value) -> Value {
    TsPeer::new("produce.ts")
        .target(addr)
        .options(&opts)
        .timeout(Duration::from_secs(60))
        .run_json()
        .unwrap_or_else(|e| panic!("{e}"))
}

fn consume(addr: SocketAddr, opts: Value) -> Value {
    TsPeer::new("consume.ts")
        .target(addr)
        .options(&opts)
        .timeout(Duration::from_secs(60))
        .run_json()
        .unwrap_or_else(|e| panic!("{e}"))
}

fn ids_of(produced: &Value) -> Vec<String> {
    produced["ids"]
        .as_array()
        .expect("ids array")
        .iter()
        .map(|v| v.as_str().expect("string id").to_owned())
        .collect()
}

/// Every produced id consumed exactly once, with the data produced for it and the result the
/// processor derived from it; the server has nothing left waiting or active.
fn assert_consumed_exactly_once(produced: &Value, consumed: &Value) {
    let ids = ids_of(produced);
    let data = produced["data"].as_array().expect("data array");
    let processed = consumed["processed"].as_array().expect("processed array");
    assert_eq!(consumed["timed_out"], json!(false), "consumer timed out");
    let mut seen: BTreeMap<String, &Value> = BTreeMap::new();
    for p in processed {
        let id = p["id"].as_str().expect("id").to_owned();
        assert!(
            seen.insert(id.clone(), p).is_none(),
            "job {id} processed twice"
        );
    }
    let produced_set: BTreeSet<&String> = ids.iter().collect();
    let consumed_set: BTreeSet<&String> = seen.keys().collect();
    assert_eq!(produced_set.len(), ids.len(), "duplicate ids from add()");
    let missing: Vec<_> = produced_set.difference(&consumed_set).collect();
    let extra: Vec<_> = consumed_set.difference(&produced_set).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "{} produced jobs never consumed (first: {:?}); {} consumed jobs never produced (first: {:?})",
        missing.len(),
        missing.iter().take(3).collect::<Vec<_>>(),
        extra.len(),
        extra.iter().take(3).collect::<Vec<_>>()
    );
    for (i, id) in ids.iter().enumerate() {
        let p = seen[id];
        assert_eq!(p["data"], data[i], "data of job {id}");
        assert_eq!(p["result"]["doubled"], json!(i * 2), "result of job {id}");
    }
    let counts = &consumed["counts"];
    assert_eq!(counts["waiting"], json!(0), "counts: {counts}");
    assert_eq!(counts["active"], json!(0), "counts: {counts}");
    assert_eq!(counts["failed"], json!(0), "counts: {counts}");
    assert_eq!(counts["completed"], json!(ids.len()), "counts: {counts}");
}

#[test]
fn install_is_present_and_pinned() {
    let install = BunqueueInstall::locate().unwrap_or_else(|e| panic!("{e}"));
    let out = std::process::Command::new(&install.bun)
        .arg("--version")
        .output()
        .expect("run bun --version");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "1.4.5");
}

#[test]
fn missing_install_names_the_install_command() {
    let dir = tempfile::tempdir().unwrap();
    let err = BunqueueInstall::locate_in(dir.path()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    let msg = err.to_string();
    assert!(msg.contains("scripts/bunqueue.sh install"), "{msg}");
    assert!(msg.contains("bun@1.4.5 bunqueue@2.9.5"), "{msg}");
}

#[test]
fn ping_and_pushb_through_counting_proxy() {
    let server = start(ServerOptions::default());
    let proxy = CountingProxy::start(server.addr());
    assert_ne!(proxy.addr(), server.addr());

    let mut s = connect(proxy.addr());
    // Three pipelined Pings and a PUSHB of 3 jobs in one write.
    let mut burst = Vec::new();
    for id in ["1", "2", "3"] {
        burst.extend(str_map_frame(&[("cmd", "Ping"), ("reqId", id)]));
    }
    burst.extend(pushb_frame("smoke-proxy", 3, "4"));
    s.write_all(&burst).unwrap();
    let mut by_req = BTreeMap::new();
    for _ in 0..4 {
        let r = reply(&mut s);
        assert_eq!(r.get("ok"), Some(&Scalar::Bool(true)), "{r:?}");
        let Some(Scalar::Str(id)) = r.get("reqId") else {
            panic!("no reqId: {r:?}")
        };
        by_req.insert(id.clone(), r);
    }
    assert_eq!(by_req.len(), 4);
    assert_eq!(by_req["1"].get("data"), Some(&Scalar::Map(2)));
    assert_eq!(by_req["4"].get("ids"), Some(&Scalar::Array(3)));

    let c = proxy.snapshot();
    assert_eq!(c.connections, 1);
    assert_eq!(c.c2s_frames, 4);
    assert_eq!(c.s2c_frames, 4);
    assert_eq!(c.cmd("Ping"), 3);
    assert_eq!(c.cmd("PUSHB"), 1);
    assert_eq!(c.by_cmd.len(), 2, "{:?}", c.by_cmd);
    assert_eq!(c.pushb_items, vec![3]);
    assert!(c.ackb_items.is_empty());
    assert_eq!(c.c2s_bytes, burst.len() as u64);

    // Garbage is forwarded unchanged and counted as unparsed; the server still answers.
    s.write_all(&[0, 0, 0, 1, 0x2a]).unwrap();
    let r = reply(&mut s);
    assert_eq!(r.get("ok"), Some(&Scalar::Bool(false)), "{r:?}");
    assert_eq!(
        r.get("error"),
        Some(&Scalar::Str("Invalid command".into())),
        "{r:?}"
    );
    assert_eq!(proxy.snapshot().cmd("<unparsed>"), 1);

    proxy.reset();
    assert_eq!(proxy.snapshot(), FrameCounts::default());

    // A frame split over several writes is counted once, when complete.
    let ping = str_map_frame(&[("cmd", "Ping"), ("reqId", "5")]);
    for part in ping.chunks(3) {
        s.write_all(part).unwrap();
        s.flush().unwrap();
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(reply(&mut s).get("reqId"), Some(&Scalar::Str("5".into())));
    let c = proxy.snapshot();
    assert_eq!((c.c2s_frames, c.s2c_frames, c.cmd("Ping")), (1, 1, 1));

    // cut_all resets the open connection; new connections still go through.
    proxy.cut_all();
    let mut buf = [0u8; 1];
    match s.read(&mut buf) {
        Ok(0) => {}
        Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
        other => panic!("expected the cut connection to close, got {other:?}"),
    }
    ping_addr(proxy.addr(), None, IO_TIMEOUT).expect("ping through proxy after cut_all");
    let c = wait_counts(&proxy, |c| c.s2c_frames == 2);
    assert_eq!(c.connections, 1, "connections since reset");
    assert_eq!(c.cmd("Ping"), 2);
    assert_eq!(c.s2c_frames, 2);
}

#[test]
fn produce_then_consume_every_job_exactly_once() {
    let server = start(ServerOptions::default());
    let proxy = CountingProxy::start(server.addr());
    let queue = "smoke-exactly-once";

    let produced = produce(
        proxy.addr(),
        json!({
            "queue": queue,
            "autoBatch": true,
            "steps": [
                {"kind": "seq", "n": 20},
                {"kind": "waves", "n": 60, "wave": 10},
                {"kind": "bulk", "n": 40, "batch": 20},
                {"kind": "durable", "n": 5},
            ]
        }),
    );
    let ids = ids_of(&produced);
    assert_eq!(ids.len(), 125);
    let c = wait_counts(&proxy, |c| c.pushb_total() == 120);
    // Everything but durable adds travels as PUSHB (even sequential ones: one item each).
    assert_eq!(c.pushb_total(), 120, "{c:?}");
    assert_eq!(c.cmd("PUSH"), 5, "durable adds are single PUSHes: {c:?}");
    // Sequential adds: 20 PUSHB of 1; addBulk: 2 PUSHB of 20.
    assert!(
        c.pushb_items.iter().filter(|&&n| n == 1).count() >= 20,
        "{c:?}"
    );
    assert_eq!(
        c.pushb_items.iter().filter(|&&n| n == 20).count(),
        2,
        "{c:?}"
    );
    // Waves of 10 were coalesced: fewer PUSHB than adds.
    assert!(c.cmd("PUSHB") < 20 + 60 + 2, "{c:?}");

    proxy.reset();
    let consumed = consume(
        proxy.addr(),
        json!({"queue": queue, "count": 125, "concurrency": 4, "settleMs": 200}),
    );
    assert_consumed_exactly_once(&produced, &consumed);
    let c = wait_counts(&proxy, |c| c.ackb_total() >= 125);
    assert_eq!(
        c.ackb_total(),
        125,
        "every completion acked once via ACKB: {c:?}"
    );
    assert_eq!(
        c.cmd("ACK"),
        0,
        "the official Worker never sends ACK: {c:?}"
    );
    assert!(c.cmd("PULLB") + c.cmd("PULL") > 0, "{c:?}");
}

#[test]
fn autobatch_off_sends_one_push_per_add() {
    let server = start(ServerOptions::default());
    let proxy = CountingProxy::start(server.addr());
    let produced = produce(
        proxy.addr(),
        json!({"queue": "smoke-off", "autoBatch": false,
               "steps": [{"kind": "waves", "n": 30, "wave": 10}]}),
    );
    assert_eq!(ids_of(&produced).len(), 30);
    let c = wait_counts(&proxy, |c| c.cmd("PUSH") == 30);
    assert_eq!(c.cmd("PUSH"), 30, "{c:?}");
    assert_eq!(c.cmd("PUSHB"), 0, "{c:?}");
    let consumed = consume(
        server.addr(),
        json!({"queue": "smoke-off", "count": 30, "concurrency": 8}),
    );
    assert_consumed_exactly_once(&produced, &consumed);
}

#[test]
fn sqlite_stop_and_kill_restart_keep_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("bunqueue.db");
    let mut server = start(ServerOptions::sqlite(&db));
    let port = server.port();
    let first_pid = server.pid().expect("running");
    let queue = "smoke-sqlite";

    // Graceful stop: buffered (non-durable) and durable jobs survive.
    let batch1 = produce(
        server.addr(),
        json!({"queue": queue, "steps": [
            {"kind": "bulk", "n": 10, "batch": 10},
            {"kind": "durable", "n": 3},
        ]}),
    );
    assert!(db.exists(), "SQLite file created");
    let status = server.stop().unwrap().expect("was running");
    assert!(server.pid().is_none());
    assert!(
        ping_addr(server.addr(), None, Duration::from_millis(500)).is_err(),
        "stopped server still answers (status {status})"
    );
    server.restart().unwrap();
    assert_eq!(server.port(), port, "restart keeps the port");
    assert_ne!(server.pid(), Some(first_pid));
    let consumed = consume(
        server.addr(),
        json!({"queue": queue, "count": 13, "concurrency": 2}),
    );
    assert_consumed_exactly_once(&batch1, &consumed);

    // Crash: SIGKILL right after durable adds; they were admitted to SQLite before add()
    // resolved, so they survive.
    let batch2 = produce(
        server.addr(),
        json!({"queue": "smoke-sqlite-2", "steps": [{"kind": "durable", "n": 5}]}),
    );
    server.kill().unwrap().expect("was running");
    server.restart().unwrap();
    let consumed = consume(
        server.addr(),
        json!({"queue": "smoke-sqlite-2", "count": 5, "concurrency": 1}),
    );
    assert_consumed_exactly_once(&batch2, &consumed);
    assert!(
        server
            .log()
            .matches("==== autobatch-tests: start #")
            .count()
            == 3,
        "{}",
        server.log()
    );
}

#[test]
fn suspend_stalls_the_server_and_resume_recovers() {
    let server = start(ServerOptions::default());
    ping_addr(server.addr(), None, IO_TIMEOUT).unwrap();
    server.suspend().unwrap();
    let err = ping_addr(server.addr(), None, Duration::from_millis(300))
        .expect_err("a stopped server must not answer");
    assert!(
        matches!(err.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
        "{err:?}"
    );
    server.resume().unwrap();
    ping_addr(server.addr(), None, IO_TIMEOUT).expect("ping after resume");
}

#[test]
fn auth_mode_requires_the_token() {
    let server = start(ServerOptions {
        auth_tokens: Some("s3cret,other".into()),
        ..ServerOptions::default()
    });
    let mut s = connect(server.addr());
    s.write_all(&str_map_frame(&[("cmd", "Ping"), ("reqId", "1")]))
        .unwrap();
    let r = reply(&mut s);
    assert_eq!(r.get("ok"), Some(&Scalar::Bool(false)), "{r:?}");
    assert_eq!(
        r.get("error"),
        Some(&Scalar::Str("Not authenticated".into()))
    );
    ping_addr(server.addr(), Some("other"), IO_TIMEOUT).expect("second token works");
    assert!(ping_addr(server.addr(), Some("wrong"), IO_TIMEOUT).is_err());
    // The official client authenticates with its token too.
    let produced = TsPeer::new("produce.ts")
        .target(server.addr())
        .options(&json!({"queue": "smoke-auth", "token": "s3cret",
                          "steps": [{"kind": "seq", "n": 3}]}))
        .run_json()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ids_of(&produced).len(), 3);
}

#[test]
fn server_killed_from_outside_is_reported() {
    let mut server = start(ServerOptions::default());
    let pid = server.pid().unwrap();
    // SAFETY: plain kill(2) on our own child.
    assert_eq!(unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) }, 0);
    let deadline = Instant::now() + Duration::from_secs(5);
    while server.is_running() {
        assert!(Instant::now() < deadline, "server survived SIGKILL");
        std::thread::sleep(Duration::from_millis(10));
    }
    server.restart().expect("restart after an outside kill");
    ping_addr(server.addr(), None, IO_TIMEOUT).unwrap();
}
