//! Encoding a [`Command`] in the client role: one MessagePack map per request.

use super::codec::Encoder;
use super::push::{write_push, write_pushb};
use super::{Command, PullArgs, Value};

impl Command {
    /// Appends the MessagePack map of this command (no frame header) to `out`.
    ///
    /// ```
    /// use autobatch_core::wire::{Command, Value};
    /// let mut out = Vec::new();
    /// Command::Ping.encode(Some(&Value::from("1")), &mut out);
    /// assert_eq!(Value::decode(&out).unwrap(),
    ///            Value::map([("cmd", Value::from("Ping")), ("reqId", Value::from("1"))]));
    /// ```
    pub fn encode(&self, req_id: Option<&Value>, out: &mut Vec<u8>) {
        let mut e = Encoder::new(out);
        let extra = usize::from(req_id.is_some());
        match self {
            Command::Hello => {
                e.map(3 + extra)
                    .kv_str("cmd", "Hello")
                    .str("protocolVersion")
                    .int(3)
                    .str("capabilities")
                    .array(2)
                    .str("pipelining")
                    .str("separate-job-name");
            }
            Command::Auth { token } => {
                e.map(2 + extra)
                    .kv_str("cmd", "Auth")
                    .kv_str("token", token);
            }
            Command::Ping => {
                e.map(1 + extra).kv_str("cmd", "Ping");
            }
            Command::Push { queue, job } => write_push(&mut e, queue, job, extra),
            Command::PushB { queue, jobs } => write_pushb(&mut e, queue, jobs, extra),
            Command::Pull(args) => {
                e.map(1 + pull_field_count(args) + extra)
                    .kv_str("cmd", "PULL");
                write_pull_fields(&mut e, args);
            }
            Command::PullB { args, count } => {
                let has_count = *count != 0;
                e.map(1 + usize::from(has_count) + pull_field_count(args) + extra)
                    .kv_str("cmd", "PULLB");
                if has_count {
                    e.str("count").int(*count);
                }
                write_pull_fields(&mut e, args);
            }
            Command::Ack { id, result, token } => {
                let n = 2 + usize::from(result.is_some()) + usize::from(token.is_some());
                e.map(n + extra).kv_str("cmd", "ACK").kv_str("id", id);
                if let Some(r) = result {
                    e.str("result").value(r);
                }
                if let Some(t) = token {
                    e.kv_str("token", t);
                }
            }
            Command::AckB {
                ids,
                results,
                tokens,
                remove_on_completes,
            } => {
                let n = 2
                    + usize::from(results.is_some())
                    + usize::from(tokens.is_some())
                    + usize::from(!remove_on_completes.is_empty());
                e.map(n + extra)
                    .kv_str("cmd", "ACKB")
                    .str("ids")
                    .array(ids.len());
                for id in ids {
                    e.str(id);
                }
                if let Some(results) = results {
                    e.str("results").array(results.len());
                    for r in results {
                        e.value(r);
                    }
                }
                if let Some(tokens) = tokens {
                    e.str("tokens").array(tokens.len());
                    for t in tokens {
                        e.str(t);
                    }
                }
                if !remove_on_completes.is_empty() {
                    e.str("removeOnCompletes").array(remove_on_completes.len());
                    for r in remove_on_completes {
                        e.bool(*r);
                    }
                }
            }
            Command::Fail {
                id,
                error,
                token,
                unrecoverable,
                stack,
                remove_on_fail,
            } => {
                let n = 2
                    + usize::from(error.is_some())
                    + usize::from(!stack.is_empty())
                    + usize::from(token.is_some())
                    + usize::from(*unrecoverable)
                    + usize::from(*remove_on_fail);
                e.map(n + extra).kv_str("cmd", "FAIL").kv_str("id", id);
                if let Some(err) = error {
                    e.kv_str("error", err);
                }
                if !stack.is_empty() {
                    e.str("stack").array(stack.len());
                    for line in stack {
                        e.str(line);
                    }
                }
                if let Some(t) = token {
                    e.kv_str("token", t);
                }
                if *unrecoverable {
                    e.str("unrecoverable").bool(true);
                }
                if *remove_on_fail {
                    e.str("removeOnFail").bool(true);
                }
            }
            Command::GetJob { id } => {
                e.map(2 + extra).kv_str("cmd", "GetJob").kv_str("id", id);
            }
            Command::GetState { id } => {
                e.map(2 + extra).kv_str("cmd", "GetState").kv_str("id", id);
            }
            Command::GetResult { id } => {
                e.map(2 + extra).kv_str("cmd", "GetResult").kv_str("id", id);
            }
            Command::Count { queue } => {
                e.map(2 + extra)
                    .kv_str("cmd", "Count")
                    .kv_str("queue", queue);
            }
            Command::GetJobCounts { queue } => {
                e.map(2 + extra)
                    .kv_str("cmd", "GetJobCounts")
                    .kv_str("queue", queue);
            }
            Command::Other { body, .. } => {
                // The body is the whole request map; replace any reqId it holds with ours.
                let entries: Vec<&(Value, Value)> = match body {
                    Value::Map(m) => m
                        .iter()
                        .filter(|(k, _)| k.as_str() != Some("reqId"))
                        .collect(),
                    _ => Vec::new(),
                };
                e.map(entries.len() + extra);
                for (k, v) in entries {
                    e.value(k).value(v);
                }
            }
        }
        if let Some(id) = req_id {
            e.str("reqId").value(id);
        }
    }
}

fn pull_field_count(a: &PullArgs) -> usize {
    1 + usize::from(a.timeout.is_some())
        + usize::from(a.owner.is_some())
        + usize::from(a.lock_ttl.is_some())
}

fn write_pull_fields(e: &mut Encoder<'_>, a: &PullArgs) {
    e.kv_str("queue", &a.queue);
    if let Some(t) = a.timeout {
        e.str("timeout").int(t);
    }
    if let Some(o) = &a.owner {
        e.kv_str("owner", o);
    }
    if let Some(l) = a.lock_ttl {
        e.str("lockTtl").int(l);
    }
}
