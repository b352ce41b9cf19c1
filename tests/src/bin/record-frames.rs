//! A recording proxy for capturing golden vectors: it forwards bytes unchanged between clients
//! and a bunqueue server and writes one JSON line per complete frame, in the format of
//! `core/tests/vectors/README.md` (`dir`, `hex`, `decoded`, `notes`, `conn`, `seq`, `t_ms`).
//!
//! ```text
//! cargo run -p autobatch-tests --bin record-frames -- LISTEN_PORT UPSTREAM_PORT OUT.jsonl
//! ```
//!
//! Point the client (bunqueue's TS client, a raw script) at `127.0.0.1:LISTEN_PORT`; stop
//! with Ctrl-C or SIGTERM once the scenario is done. Bytes left over when a connection closes
//! are written as one line with `"incomplete": true`.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use autobatch_core::wire::Value;
use serde_json::{json, Map, Value as J};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

struct Log {
    out: Mutex<std::fs::File>,
    seq: AtomicU64,
    start: Instant,
}

impl Log {
    fn write(&self, conn: u64, dir: &str, frame: &[u8], incomplete: bool) {
        let mut line = Map::new();
        line.insert("dir".into(), json!(dir));
        line.insert("hex".into(), json!(hex(frame)));
        let mut notes = Vec::new();
        let decoded = if incomplete || frame.len() < 4 {
            J::Null
        } else {
            match Value::decode(&frame[4..]).and_then(|v| v.expanded()) {
                Ok(v) => to_json(&v, "$", &mut notes),
                Err(e) => {
                    line.insert("decode_error".into(), json!(e.to_string()));
                    J::Null
                }
            }
        };
        line.insert("decoded".into(), decoded);
        if !notes.is_empty() {
            line.insert("notes".into(), json!(notes));
        }
        if incomplete {
            line.insert("incomplete".into(), json!(true));
        }
        line.insert("conn".into(), json!(conn));
        // One lock for numbering and writing, so lines appear in `seq` order.
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        let seq = self.seq.fetch_add(1, Ordering::SeqCst) + 1;
        line.insert("seq".into(), json!(seq));
        let t = (self.start.elapsed().as_secs_f64() * 1e6).round() / 1e3;
        line.insert("t_ms".into(), json!(t));
        let _ = writeln!(out, "{}", J::Object(line));
        let _ = out.flush();
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The JSON form of a value, with the vectors' markers for what JSON cannot say.
fn to_json(v: &Value, path: &str, notes: &mut Vec<String>) -> J {
    match v {
        Value::Nil => J::Null,
        Value::Undefined => json!({"$undefined": true}),
        Value::Bool(b) => json!(b),
        Value::Int(i) => json!(i),
        Value::F64(f) => {
            if f.fract() == 0.0 && f.is_finite() {
                notes.push(format!("{path}: float64 with integer value {}", *f as i64));
                json!(*f as i64)
            } else {
                json!(f)
            }
        }
        Value::BigInt(i) => {
            notes.push(format!("{path}: 64-bit integer encoding {i}"));
            json!(i.to_string())
        }
        Value::Str(s) => json!(s),
        Value::Bin(b) => json!({"$bin": hex(b)}),
        Value::Ext(t, b) => json!({"$ext": t, "hex": hex(b)}),
        Value::Array(a) => J::Array(
            a.iter()
                .enumerate()
                .map(|(i, x)| to_json(x, &format!("{path}[{i}]"), notes))
                .collect(),
        ),
        Value::Map(m) => {
            let mut o = Map::new();
            for (k, x) in m {
                let key = k
                    .as_str()
                    .map(str::to_owned)
                    .unwrap_or_else(|| format!("{k:?}"));
                let p = format!("{path}.{key}");
                o.insert(key, to_json(x, &p, notes));
            }
            J::Object(o)
        }
        Value::Raw(r) => match r.decode() {
            Ok(x) => to_json(&x, path, notes),
            Err(_) => J::Null,
        },
        // `Value` is non-exhaustive within the crate's future; say so rather than guess.
        #[allow(unreachable_patterns)]
        other => json!(format!("{other:?}")),
    }
}

/// Copies `from` to `to`, logging each complete frame.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    log: Arc<Log>,
    conn: u64,
    dir: &'static str,
) {
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if to.write_all(&chunk[..n]).await.is_err() {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
        while buf.len() >= 4 {
            let len = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
            if buf.len() < 4 + len {
                break;
            }
            let frame: Vec<u8> = buf.drain(..4 + len).collect();
            log.write(conn, dir, &frame, false);
        }
    }
    if !buf.is_empty() {
        log.write(conn, dir, &buf, true);
    }
    let _ = to.shutdown().await;
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let [_, listen, upstream, out] = &args[..] else {
        eprintln!("usage: record-frames LISTEN_PORT UPSTREAM_PORT OUT.jsonl");
        std::process::exit(2);
    };
    let port = |s: &str| -> u16 {
        s.parse().unwrap_or_else(|_| {
            eprintln!("not a port: {s}");
            std::process::exit(2)
        })
    };
    let (listen, upstream) = (port(listen), port(upstream));
    let log = Arc::new(Log {
        out: Mutex::new(std::fs::File::create(out)?),
        seq: AtomicU64::new(0),
        start: Instant::now(),
    });
    let listener = TcpListener::bind(("127.0.0.1", listen)).await?;
    eprintln!("record-frames: 127.0.0.1:{listen} -> 127.0.0.1:{upstream}, writing {out}");
    let mut conns = 0u64;
    loop {
        let (client, _) = listener.accept().await?;
        conns += 1;
        let server = TcpStream::connect(("127.0.0.1", upstream)).await?;
        let (cr, cw) = client.into_split();
        let (sr, sw) = server.into_split();
        tokio::spawn(pump(cr, sw, log.clone(), conns, "c2s"));
        tokio::spawn(pump(sr, cw, log.clone(), conns, "s2c"));
    }
}
