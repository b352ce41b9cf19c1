//! The `autobatch-broker` binary: SIGTERM is a clean stop, errors name the path
//! and the cause, limits come from flags and bunqueue's env vars.

mod common;

use std::process::Command;
use std::time::Duration;

use autobatch_core::wire::{write_frame, Value};
use common::*;

/// A Ping padded with `pad` bytes of binary, so its frame is about that large.
fn padded_ping(req_id: &str, pad: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let v = Value::map([
        ("cmd", s("Ping")),
        ("reqId", s(req_id)),
        ("pad", Value::Bin(vec![7; pad])),
    ]);
    write_frame(&mut out, |b| b.extend_from_slice(&v.to_bytes())).unwrap();
    out
}

#[test]
fn sigterm_stops_cleanly_and_keeps_every_acknowledged_job() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("term.db");
    let mut broker = spawn_on(&path);
    let mut c = Raw::connect(broker.addr);
    // 5,000 non-durable jobs as 50 pipelined PUSHB; every one acknowledged.
    let n = 5000;
    for chunk in 0..n / 100 {
        let jobs = (0..100)
            .map(|k| Value::map([("name", s("j")), ("data", int(chunk * 100 + k))]))
            .collect();
        c.send("PUSHB", vec![("queue", s("term")), ("jobs", arr(jobs))]);
    }
    for _ in 0..n / 100 {
        assert!(ok(&c.recv()));
    }
    let killed = Command::new("kill")
        .args(["-TERM", &broker.child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = broker.child.wait().unwrap();
    assert!(status.success(), "SIGTERM is a clean stop: {status:?}");
    assert!(c.at_eof(), "the connection was closed");

    let broker = spawn_on(&path);
    let mut c = Raw::connect(broker.addr);
    assert_eq!(
        c.call("Count", vec![("queue", s("term"))]).get("count"),
        Some(&int(n)),
        "every acknowledged job is back"
    );
}

#[test]
fn data_path_errors_name_the_path_and_exit_with_1() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    // A path under a regular file, and a directory.
    for path in [file.join("x.db"), dir.path().to_path_buf()] {
        let out = broker_command()
            .args(["--port", "0", "--data-path"])
            .arg(&path)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains(&format!(
                "cannot open the SQLite database at {}",
                path.display()
            )),
            "{stderr}"
        );
        assert!(!stderr.contains("kind:"), "Display, not Debug: {stderr}");
    }
}

#[test]
fn env_vars_and_flags_configure_the_binary() {
    let mut cmd = broker_command();
    cmd.env("TCP_PORT", "0")
        .env("HOST", "127.0.0.1")
        .env("AUTH_TOKENS", "alpha,beta")
        .env("AUTOBATCH_MAX_CONNECTIONS", "1")
        .args(["--max-unauthenticated-frame", "1000"]);
    let broker = spawn(cmd);
    let mut c = Raw::connect(broker.addr);
    // The cap from the flag: 2000 bytes before Auth is refused.
    c.send_bytes(&padded_ping("x", 2000));
    assert!(err(&c.recv()).starts_with("Frame too large: "));
    assert!(c.at_eof());
    drop(c);
    // The refused connection is counted out once the broker has finished closing it.
    let mut c = loop {
        let mut c = Raw::connect(broker.addr);
        let id = c.send("Auth", vec![("token", s("beta"))]);
        let r = c.recv();
        if r.get("reqId") == Some(&s(&id)) {
            assert!(ok(&r), "{r:?}");
            break c;
        }
        assert_eq!(err(&r), "Too many connections");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(ok(&c.call("Ping", vec![])));
    // Only one connection at a time.
    let mut refused = Raw::connect(broker.addr);
    assert_eq!(
        err(&refused.try_recv().expect("an error frame")),
        "Too many connections"
    );
}

/// What the binary wrote to stderr from start to kill, with `cmd`'s settings.
fn stderr_of(mut cmd: Command) -> String {
    use std::io::Read;
    cmd.args(["--port", "0"])
        .stderr(std::process::Stdio::piped());
    let mut broker = spawn(cmd);
    // Served before it is stopped: the startup lines are all written by then.
    assert!(ok(&Raw::connect(broker.addr).call("Ping", vec![])));
    broker.child.kill().unwrap();
    broker.child.wait().unwrap();
    let mut err = String::new();
    broker
        .child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    err
}

/// Logs go to stderr at the level of `--log-level` or bunqueue's `LOG_LEVEL` (any case),
/// info by default; a level it does not know is refused at startup.
#[test]
fn log_level_comes_from_the_flag_or_log_level() {
    let started = "autobatch-broker listening";
    assert!(stderr_of(broker_command()).contains(started));
    let mut quiet = broker_command();
    quiet.env("LOG_LEVEL", "WARN");
    assert!(!stderr_of(quiet).contains(started));
    let mut flag = broker_command();
    flag.env("LOG_LEVEL", "error")
        .args(["--log-level", "debug"]);
    assert!(stderr_of(flag).contains(started), "the flag wins");

    let out = broker_command()
        .env("LOG_LEVEL", "chatty")
        .args(["--port", "0"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("log-level") && stderr.contains("chatty"),
        "{stderr}"
    );
}
