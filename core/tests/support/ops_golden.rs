//! Golden checks for typed operations ([`autobatch_core::ops`]) on frames captured from the
//! real bunqueue 2.9.5 server (`tests/vectors/ops/*.jsonl`, made by `scripts/capture.sh`; see
//! `tests/vectors/ops/README.md`).
//!
//! Each domain's test file includes this module (`#[path = "support/ops_golden.rs"] mod
//! ops_golden;`) and calls [`check`] per operation: every captured request of that command is
//! read in the server role, re-encoded in the client role and compared with the capture; its
//! reply is read in the client role and re-encoded in the server role and compared with the
//! capture; error replies are compared with our local validation.
#![allow(dead_code)]

use std::collections::HashMap;
use std::fmt::Debug;

use autobatch_core::wire::server::ServeOperation;
use autobatch_core::wire::Value;
use serde_json::Value as J;

const OPS_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vectors/ops");

/// One request and its reply, paired by (conn, reqId).
#[derive(Debug, Clone)]
pub struct Exchange {
    /// The file it came from.
    pub file: String,
    /// The request map as decoded from the frame's bytes.
    pub request: Value,
    /// The reply map, if the capture holds it.
    pub reply: Option<Value>,
}

impl Exchange {
    /// The request's `cmd`.
    pub fn cmd(&self) -> &str {
        self.request
            .get("cmd")
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    /// `Some(error)` when the server refused the request.
    pub fn error(&self) -> Option<&str> {
        let reply = self.reply.as_ref()?;
        if reply.get("ok").and_then(Value::as_bool) == Some(false) {
            reply.get("error").and_then(Value::as_str)
        } else {
            None
        }
    }
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("hex"))
        .collect()
}

/// Every exchange in `file` (under `tests/vectors/ops`).
pub fn load(file: &str) -> Vec<Exchange> {
    let path = format!("{OPS_DIR}/{file}");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut requests: Vec<(u64, Value)> = Vec::new();
    let mut replies: HashMap<(u64, String), Value> = HashMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let j: J = serde_json::from_str(line).unwrap_or_else(|e| panic!("{path}: {e}"));
        if j.get("incomplete").is_some() {
            continue;
        }
        let conn = j["conn"].as_u64().expect("conn");
        let frame = unhex(j["hex"].as_str().expect("hex"));
        let Ok(v) = Value::decode(&frame[4..]).and_then(|v| v.expanded()) else {
            continue;
        };
        match j["dir"].as_str() {
            Some("c2s") => requests.push((conn, v)),
            Some("s2c") => {
                if let Some(id) = v.get("reqId").and_then(Value::as_str) {
                    replies.insert((conn, id.to_owned()), v);
                }
            }
            _ => {}
        }
    }
    requests
        .into_iter()
        .map(|(conn, request)| {
            let reply = request
                .get("reqId")
                .and_then(Value::as_str)
                .and_then(|id| replies.get(&(conn, id.to_owned())).cloned());
            Exchange {
                file: file.to_owned(),
                request,
                reply,
            }
        })
        .collect()
}

/// How closely a re-encoded reply must match the capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// Same keys and the same values (after dropping `reqId`).
    Exact,
    /// Same keys; values may differ (say why at the call site, e.g. a typed model that
    /// normalises a field).
    Keys,
}

fn entries(v: &Value, skip: &[&str]) -> Vec<(String, Value)> {
    match v {
        Value::Map(m) => m
            .iter()
            .filter_map(|(k, x)| {
                let k = k.as_str()?;
                (!skip.contains(&k)).then(|| (k.to_owned(), x.clone()))
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Compares two maps: keys must match, except keys whose value is `undefined` on either side
/// (msgpackr writes them, a Rust encoder leaves them out: the same to the peer).
fn compare(
    what: &str,
    ours: &Value,
    theirs: &Value,
    values: bool,
    skip: &[&str],
) -> Result<(), String> {
    let ours: HashMap<String, Value> = entries(ours, skip).into_iter().collect();
    let theirs: HashMap<String, Value> = entries(theirs, skip).into_iter().collect();
    for (k, v) in &theirs {
        match ours.get(k) {
            None if matches!(v, Value::Undefined) => {}
            None => return Err(format!("{what}: key `{k}` missing from ours")),
            Some(o) if values && o != v && !(o.is_nullish() && v.is_nullish()) => {
                return Err(format!(
                    "{what}: `{k}` is {o:?} in ours, {v:?} in the capture"
                ))
            }
            Some(_) => {}
        }
    }
    for (k, v) in &ours {
        if !theirs.contains_key(k) && !matches!(v, Value::Undefined) {
            return Err(format!("{what}: key `{k}` not in the capture"));
        }
    }
    Ok(())
}

/// Checks every captured `O::NAME` exchange in `files` and returns how many there were (it
/// fails if none: a check that sees no frame proves nothing).
///
/// * request: `read_request` accepts it (or refuses it with the server's own error text when
///   the server refused it too); `to_body` of what was read has the capture's keys and values;
///   `validate` agrees with `read_request`;
/// * reply (`ok: true`): `read_reply` reads it; `reply_body` of what was read has the capture's
///   keys (and values, with [`Reply::Exact`]).
pub fn check<O>(files: &[&str], reply: Reply) -> usize
where
    O: ServeOperation + Debug,
    O::Output: Debug,
{
    let mut seen = 0;
    let mut failures = Vec::new();
    for file in files {
        for ex in load(file).iter().filter(|e| e.cmd() == O::NAME) {
            seen += 1;
            if let Err(e) = check_one::<O>(ex, reply) {
                failures.push(format!(
                    "{file}: {e}\n  request: {:?}\n  reply: {:?}",
                    ex.request, ex.reply
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} golden failures:\n{}",
        O::NAME,
        failures.join("\n")
    );
    assert!(seen > 0, "no captured {} in {files:?}", O::NAME);
    seen
}

fn check_one<O>(ex: &Exchange, reply_mode: Reply) -> Result<(), String>
where
    O: ServeOperation + Debug,
    O::Output: Debug,
{
    let server_error = ex.error();
    let op = match O::read_request(&ex.request) {
        Ok(op) => op,
        Err(e) => {
            // Our server-role refusal must be the server's own.
            return match server_error {
                Some(theirs) if theirs == e.to_string() => Ok(()),
                Some(theirs) => Err(format!("we refuse with {e:?}, the server with {theirs:?}")),
                None => Err(format!("we refuse with {e:?}, the server accepted it")),
            };
        }
    };
    // Client-side validation agrees with the server-role reading.
    if let Err(e) = op.validate() {
        return Err(format!(
            "read_request accepted it but validate refuses: {e:?}"
        ));
    }
    compare("request", &op.to_body(), &ex.request, true, &["reqId"])?;
    let Some(reply) = &ex.reply else {
        return Ok(());
    };
    if server_error.is_some() {
        return Ok(());
    }
    let out = O::read_reply(reply).map_err(|e| format!("read_reply: {e}"))?;
    let ours = O::reply_body(&out);
    compare(
        "reply",
        &ours,
        reply,
        reply_mode == Reply::Exact,
        &["reqId"],
    )
}

/// Every `cmd` in `files`' requests, for asserting that a capture's commands are all covered.
pub fn commands(files: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = files
        .iter()
        .flat_map(|f| load(f))
        .map(|e| e.cmd().to_owned())
        .collect();
    v.sort();
    v.dedup();
    v
}

/// Exchanges for `cmd` whose reply is an error, as (request, error text): for checking a
/// command's error wording against the typed validation.
pub fn errors(files: &[&str], cmd: &str) -> Vec<(Value, String)> {
    files
        .iter()
        .flat_map(|f| load(f))
        .filter(|e| e.cmd() == cmd)
        .filter_map(|e| e.error().map(|s| (e.request.clone(), s.to_owned())))
        .collect()
}
