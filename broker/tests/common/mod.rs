//! A raw-frame client for the broker tests, built on `autobatch_core::wire` over a std socket.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use autobatch_core::wire::{write_frame, FrameDecoder, Value};

/// One connection speaking raw frames.
pub struct Raw {
    pub s: TcpStream,
    dec: FrameDecoder,
    next: u64,
}

impl Raw {
    pub fn connect(addr: SocketAddr) -> Raw {
        let s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s.set_nodelay(true).unwrap();
        Raw {
            s,
            dec: FrameDecoder::new(),
            next: 0,
        }
    }

    /// Writes raw bytes.
    pub fn send_bytes(&mut self, bytes: &[u8]) {
        self.s.write_all(bytes).expect("write");
    }

    /// Writes one frame holding `body` bytes.
    pub fn send_body(&mut self, body: &[u8]) {
        let mut out = Vec::new();
        write_frame(&mut out, |b| b.extend_from_slice(body)).unwrap();
        self.send_bytes(&out);
    }

    /// Writes one frame holding `v`.
    pub fn send_value(&mut self, v: &Value) {
        self.send_body(&v.to_bytes());
    }

    /// Sends a command map (pairs plus a fresh string reqId) and returns the reqId.
    pub fn send(&mut self, cmd: &str, pairs: Vec<(&str, Value)>) -> String {
        self.next += 1;
        let id = self.next.to_string();
        let mut entries = vec![
            ("cmd", Value::from(cmd)),
            ("reqId", Value::from(id.as_str())),
        ];
        entries.extend(pairs);
        self.send_value(&Value::map(entries));
        id
    }

    /// The next frame, decoded. Panics on timeout or EOF.
    pub fn recv(&mut self) -> Value {
        self.try_recv().expect("a reply frame")
    }

    /// The next frame, or `None` at EOF.
    pub fn try_recv(&mut self) -> Option<Value> {
        let mut buf = [0u8; 64 * 1024];
        loop {
            if let Some(f) = self
                .dec
                .next_frame()
                .expect("well-formed frames from the broker")
            {
                return Some(Value::decode(&f).expect("a MessagePack value"));
            }
            let n = self.s.read(&mut buf).expect("read");
            if n == 0 {
                return None;
            }
            self.dec.extend(&buf[..n]);
        }
    }

    /// Sends a command and waits for its reply (replies to other requests are not expected).
    pub fn call(&mut self, cmd: &str, pairs: Vec<(&str, Value)>) -> Value {
        let id = self.send(cmd, pairs);
        let r = self.recv();
        assert_eq!(r.get("reqId"), Some(&Value::from(id.as_str())), "{r:?}");
        r
    }

    /// Whether the broker closed the connection (EOF) before sending anything more.
    pub fn at_eof(&mut self) -> bool {
        self.try_recv().is_none()
    }
}

pub fn ok(r: &Value) -> bool {
    r.get("ok") == Some(&Value::Bool(true))
}

pub fn err(r: &Value) -> &str {
    assert_eq!(
        r.get("ok"),
        Some(&Value::Bool(false)),
        "expected an error: {r:?}"
    );
    r.get("error").and_then(Value::as_str).unwrap_or_default()
}

pub fn s(v: &str) -> Value {
    Value::from(v)
}

pub fn int(i: i64) -> Value {
    Value::Int(i)
}

pub fn arr(items: Vec<Value>) -> Value {
    Value::Array(items)
}

/// PUSH one job; returns its id.
pub fn push(c: &mut Raw, queue: &str, data: Value, extra: Vec<(&str, Value)>) -> String {
    let mut pairs = vec![("queue", s(queue)), ("name", s("job")), ("data", data)];
    pairs.extend(extra);
    let r = c.call("PUSH", pairs);
    assert!(ok(&r), "{r:?}");
    r.get("id").and_then(Value::as_str).unwrap().to_owned()
}

/// PULL with an owner; returns (id, token) or None.
pub fn pull_owned(c: &mut Raw, queue: &str) -> Option<(String, String)> {
    let r = c.call("PULL", vec![("queue", s(queue)), ("owner", s("w1"))]);
    assert!(ok(&r), "{r:?}");
    let job = r.get("job")?;
    if job.is_nullish() {
        return None;
    }
    Some((
        job.get("id")?.as_str()?.to_owned(),
        r.get("token")?.as_str()?.to_owned(),
    ))
}

pub fn state(c: &mut Raw, id: &str) -> String {
    let r = c.call("GetState", vec![("id", s(id))]);
    r.get("state").and_then(Value::as_str).unwrap().to_owned()
}

/// The real `autobatch-broker` binary, running until dropped.
pub struct Spawned {
    pub child: Child,
    pub addr: SocketAddr,
}

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The env vars the binary reads, removed so the caller's environment cannot leak in.
pub const ENV: [&str; 12] = [
    "LOG_LEVEL",
    "HOST",
    "TCP_PORT",
    "DATA_PATH",
    "AUTH_TOKENS",
    "TCP_IDLE_TIMEOUT_MS",
    "AUTOBATCH_MAX_CONNECTIONS",
    "AUTOBATCH_PARTIAL_FRAME_BUDGET",
    "AUTOBATCH_MAX_HANDLERS_PER_CONNECTION",
    "AUTOBATCH_MAX_UNAUTHENTICATED_FRAME",
    "TLS_CERT_FILE",
    "TLS_KEY_FILE",
];

/// A command for the binary, with none of the env vars it reads.
pub fn broker_command() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_autobatch-broker"));
    for v in ENV {
        cmd.env_remove(v);
    }
    cmd
}

/// Starts `cmd` and reads the address from its first line.
pub fn spawn(mut cmd: Command) -> Spawned {
    let mut child = cmd.stdout(Stdio::piped()).spawn().expect("spawn broker");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("the address line, got {line:?}"))
        .parse()
        .unwrap();
    Spawned { child, addr }
}

/// The binary on a free port with its SQLite database at `path`.
pub fn spawn_on(path: &std::path::Path) -> Spawned {
    let mut cmd = broker_command();
    cmd.args(["--port", "0", "--data-path"]).arg(path);
    spawn(cmd)
}
