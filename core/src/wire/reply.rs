//! Replies, in both roles: a client decodes them, the broker encodes them.
//!
//! A reply is matched to its request by `reqId`, which comes back with its MessagePack type
//! unchanged. What a successful reply holds depends on the command, so a [`Reply`] is first read
//! generically and then turned into a typed [`Response`] with the [`CommandKind`] of the request
//! it answers. Event frames (`{type:"event"}`) carry no `reqId` and are not replies.

use super::codec::Encoder;
use super::command::{Command, CommandKind};
use super::error::ProtocolError;
use super::job::{id_text, Job};
use super::value::Value;

/// A frame from the server: a reply to a request, or an unsolicited event.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A reply (`ok` + `reqId`).
    Reply(Reply),
    /// An event frame (`{type:"event", event:{…}}`), sent after `SubscribeEvents`.
    Event(Value),
}

impl Incoming {
    /// Reads a decoded frame body.
    pub fn from_value(v: Value) -> Result<Incoming, ProtocolError> {
        if v.get("type").and_then(Value::as_str) == Some("event") {
            return Ok(Incoming::Event(v));
        }
        Reply::from_value(v).map(Incoming::Reply)
    }
}

/// A reply, read generically: `ok`, `reqId`, `error`, and the rest of the map.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// The request's `reqId`, as it was sent ([`Value::Undefined`] when the request had none).
    pub req_id: Value,
    /// `Err(message)` when `ok` is false.
    pub result: Result<(), String>,
    /// The whole reply map, for typed reading.
    pub body: Value,
}

impl Reply {
    /// Reads a reply map.
    pub fn from_value(v: Value) -> Result<Reply, ProtocolError> {
        let ok = v
            .get("ok")
            .and_then(Value::as_bool)
            .ok_or(ProtocolError::NotAReply)?;
        let req_id = v.get("reqId").cloned().unwrap_or(Value::Undefined);
        let result = if ok {
            Ok(())
        } else {
            Err(v
                .get("error")
                .and_then(Value::as_str)
                .unwrap_or("unknown error")
                .to_owned())
        };
        Ok(Reply {
            req_id,
            result,
            body: v,
        })
    }

    /// The typed content of a successful reply to a command of `kind`.
    pub fn response(&self, kind: CommandKind) -> Result<Response, ProtocolError> {
        Response::from_body(kind, &self.body)
    }
}

/// Per-state job counts of a queue (GetJobCounts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[allow(missing_docs)]
pub struct JobCounts {
    pub waiting: u64,
    pub prioritized: u64,
    pub delayed: u64,
    pub active: u64,
    pub completed: u64,
    pub failed: u64,
    pub waiting_children: u64,
    pub paused: u64,
}

impl JobCounts {
    const KEYS: [&'static str; 8] = [
        "waiting",
        "prioritized",
        "delayed",
        "active",
        "completed",
        "failed",
        "waiting-children",
        "paused",
    ];

    fn values(&self) -> [u64; 8] {
        [
            self.waiting,
            self.prioritized,
            self.delayed,
            self.active,
            self.completed,
            self.failed,
            self.waiting_children,
            self.paused,
        ]
    }
}

/// The typed content of a successful reply.
///
/// A single job is boxed ([`Pulled`](Self::Pulled), [`Job`](Self::Job)) so that the enum
/// stays a few words: every operation's outcome, an add's among them, travels as a
/// `Response` (through the session's events and the caller's reply channel), and an unboxed
/// job would make every one of them as large as the largest job.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Response {
    /// Hello.
    Hello {
        /// Always 3 for bunqueue 2.9.5.
        protocol_version: i64,
        /// Server name.
        server: String,
        /// Server version.
        version: String,
    },
    /// A reply with nothing in it (Auth, Subscribe, …).
    Done,
    /// Ping.
    Pong {
        /// Server time, epoch ms.
        time: f64,
    },
    /// PUSH: the job id (an existing one when the custom id was live).
    Pushed(String),
    /// PUSHB: one id per item, in item order.
    PushedBatch(Vec<String>),
    /// PULL: a job or none; a token when pulled with an owner.
    Pulled {
        /// The job.
        job: Option<Box<Job>>,
        /// Its lock token.
        token: Option<String>,
    },
    /// PULLB: jobs and their tokens (parallel; empty tokens without an owner).
    PulledBatch {
        /// The jobs.
        jobs: Vec<Job>,
        /// Lock tokens.
        tokens: Vec<String>,
    },
    /// ACK or FAIL: `applied: false` when the server had already finalised the job.
    Finalized {
        /// Whether this request changed the job.
        applied: bool,
    },
    /// ACKB: positions the server ignored because those jobs were already finalised.
    AckedBatch {
        /// 0-based positions in the request's `ids`.
        ignored_indices: Vec<usize>,
        /// The ids at those positions.
        ignored_ids: Vec<String>,
    },
    /// GetJob.
    Job(Box<Job>),
    /// GetState.
    State(String),
    /// GetResult: `None` when unset.
    Result(Option<Value>),
    /// Count.
    Count(u64),
    /// GetJobCounts.
    Counts(JobCounts),
    /// Any other command: the reply map as it came.
    Other(Value),
}

fn bad(field: &'static str, problem: &'static str) -> ProtocolError {
    ProtocolError::BadField { field, problem }
}

impl Response {
    /// Reads the body of a successful reply to a command of `kind`.
    pub fn from_body(kind: CommandKind, v: &Value) -> Result<Response, ProtocolError> {
        let data = v.get("data");
        Ok(match kind {
            CommandKind::Hello => Response::Hello {
                protocol_version: v
                    .get("protocolVersion")
                    .and_then(Value::as_i64)
                    .unwrap_or(0),
                server: v
                    .get("server")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .into(),
                version: v
                    .get("version")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .into(),
            },
            CommandKind::Auth => Response::Done,
            CommandKind::Ping => {
                let d = data.ok_or(bad("data", "missing"))?;
                if d.get("pong").and_then(Value::as_bool) != Some(true) {
                    return Err(bad("data.pong", "not true"));
                }
                Response::Pong {
                    time: d.get("time").and_then(Value::as_f64).unwrap_or(0.0),
                }
            }
            CommandKind::Push => Response::Pushed(
                v.get("id")
                    .and_then(id_text)
                    .ok_or(bad("id", "missing or not a string"))?,
            ),
            CommandKind::PushB => {
                let ids = v
                    .get("ids")
                    .and_then(Value::as_array)
                    .ok_or(bad("ids", "missing"))?;
                Response::PushedBatch(
                    ids.iter()
                        .map(|i| id_text(i).ok_or(bad("ids", "an id is not a string")))
                        .collect::<Result<_, _>>()?,
                )
            }
            CommandKind::Pull => {
                let job = match v.get("job") {
                    None | Some(Value::Nil) | Some(Value::Undefined) => None,
                    Some(j) => Some(Box::new(Job::from_value(j).ok_or(bad("job", "not a job"))?)),
                };
                Response::Pulled {
                    job,
                    token: v.get("token").and_then(Value::as_str).map(str::to_owned),
                }
            }
            CommandKind::PullB => {
                let jobs = v
                    .get("jobs")
                    .and_then(Value::as_array)
                    .ok_or(bad("jobs", "missing"))?;
                let jobs = jobs
                    .iter()
                    .map(|j| Job::from_value(j).ok_or(bad("jobs", "an entry is not a job")))
                    .collect::<Result<Vec<_>, _>>()?;
                let tokens = v
                    .get("tokens")
                    .and_then(Value::as_array)
                    .map(|t| {
                        t.iter()
                            .map(|t| t.as_str().unwrap_or_default().to_owned())
                            .collect()
                    })
                    .unwrap_or_default();
                Response::PulledBatch { jobs, tokens }
            }
            CommandKind::Ack | CommandKind::Fail => Response::Finalized {
                applied: data.and_then(|d| d.get("applied")).and_then(Value::as_bool)
                    != Some(false),
            },
            CommandKind::AckB => Response::AckedBatch {
                ignored_ids: data
                    .and_then(|d| d.get("ignoredIds"))
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(id_text).collect())
                    .unwrap_or_default(),
                ignored_indices: data
                    .and_then(|d| d.get("ignoredIndices"))
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(Value::as_i64)
                            .filter_map(|i| usize::try_from(i).ok())
                            .collect()
                    })
                    .unwrap_or_default(),
            },
            CommandKind::GetJob => Response::Job(Box::new(
                v.get("job")
                    .and_then(Job::from_value)
                    .ok_or(bad("job", "missing"))?,
            )),
            CommandKind::GetState => Response::State(
                v.get("state")
                    .and_then(Value::as_str)
                    .ok_or(bad("state", "missing"))?
                    .into(),
            ),
            CommandKind::GetResult => {
                Response::Result(v.get("result").filter(|r| !r.is_nullish()).cloned())
            }
            CommandKind::Count => Response::Count(
                v.get("count")
                    .and_then(Value::as_f64)
                    .ok_or(bad("count", "missing"))? as u64,
            ),
            CommandKind::GetJobCounts => {
                let c = v.get("counts").ok_or(bad("counts", "missing"))?;
                let n = |k: &str| c.get(k).and_then(Value::as_f64).unwrap_or(0.0) as u64;
                Response::Counts(JobCounts {
                    waiting: n("waiting"),
                    prioritized: n("prioritized"),
                    delayed: n("delayed"),
                    active: n("active"),
                    completed: n("completed"),
                    failed: n("failed"),
                    waiting_children: n("waiting-children"),
                    paused: n("paused"),
                })
            }
            CommandKind::Other => Response::Other(v.clone()),
        })
    }

    /// Appends a success reply map in the server role: see
    /// [`EncodeResponse::encode`](super::server::EncodeResponse::encode).
    pub(crate) fn encode_reply(&self, req_id: &Value, out: &mut Vec<u8>) {
        let mut e = Encoder::new(out);
        let undefined = Value::Undefined;
        match self {
            Response::Hello {
                protocol_version,
                server,
                version,
            } => {
                e.map(6)
                    .str("ok")
                    .bool(true)
                    .str("protocolVersion")
                    .int(*protocol_version)
                    .str("capabilities")
                    .array(2)
                    .str("pipelining")
                    .str("separate-job-name")
                    .kv_str("server", server)
                    .kv_str("version", version);
            }
            Response::Done | Response::Finalized { applied: true } => {
                e.map(3).str("ok").bool(true).str("id").value(&undefined);
            }
            Response::AckedBatch {
                ignored_indices,
                ignored_ids,
            } if ignored_indices.is_empty() && ignored_ids.is_empty() => {
                e.map(3).str("ok").bool(true).str("id").value(&undefined);
            }
            Response::Finalized { applied: false } => {
                e.map(3)
                    .str("ok")
                    .bool(true)
                    .str("data")
                    .map(2)
                    .str("applied")
                    .bool(false)
                    .kv_str("reason", "already-finalized");
            }
            Response::AckedBatch {
                ignored_indices,
                ignored_ids,
            } => {
                e.map(3)
                    .str("ok")
                    .bool(true)
                    .str("data")
                    .map(2)
                    .str("ignoredIndices")
                    .array(ignored_indices.len());
                for i in ignored_indices {
                    e.int(*i as i64);
                }
                e.str("ignoredIds").array(ignored_ids.len());
                for id in ignored_ids {
                    e.str(id);
                }
            }
            Response::Pong { time } => {
                e.map(3)
                    .str("ok")
                    .bool(true)
                    .str("data")
                    .map(2)
                    .str("pong")
                    .bool(true)
                    .str("time")
                    .f64(*time);
            }
            Response::Pushed(id) => {
                e.map(3).str("ok").bool(true).kv_str("id", id);
            }
            Response::PushedBatch(ids) => {
                e.map(3).str("ok").bool(true).str("ids").array(ids.len());
                for id in ids {
                    e.str(id);
                }
            }
            Response::Pulled { job, token } => {
                e.map(3 + usize::from(token.is_some()))
                    .str("ok")
                    .bool(true)
                    .str("job");
                match job {
                    Some(j) => {
                        e.value(&j.to_value());
                    }
                    None => {
                        e.nil();
                    }
                }
                if let Some(t) = token {
                    e.kv_str("token", t);
                }
            }
            Response::PulledBatch { jobs, tokens } => {
                e.map(4).str("ok").bool(true).str("jobs").array(jobs.len());
                for j in jobs {
                    e.value(&j.to_value());
                }
                e.str("tokens").array(tokens.len());
                for t in tokens {
                    e.str(t);
                }
            }
            Response::Job(j) => {
                e.map(3)
                    .str("ok")
                    .bool(true)
                    .str("job")
                    .value(&j.to_value());
            }
            Response::State(s) => {
                e.map(3).str("ok").bool(true).kv_str("state", s);
            }
            Response::Result(r) => {
                e.map(3)
                    .str("ok")
                    .bool(true)
                    .str("result")
                    .value(r.as_ref().unwrap_or(&undefined));
            }
            Response::Count(n) => {
                e.map(3).str("ok").bool(true).str("count").int(*n as i64);
            }
            Response::Counts(c) => {
                e.map(3).str("ok").bool(true).str("counts").map(8);
                for (k, n) in JobCounts::KEYS.iter().zip(c.values()) {
                    e.str(k).int(n as i64);
                }
            }
            Response::Other(body) => {
                // `body` holds the reply fields other than ok/reqId.
                let entries: Vec<&(Value, Value)> = match body {
                    Value::Map(m) => m
                        .iter()
                        .filter(|(k, _)| !matches!(k.as_str(), Some("ok" | "reqId")))
                        .collect(),
                    _ => Vec::new(),
                };
                e.map(entries.len() + 2).str("ok").bool(true);
                for (k, v) in entries {
                    e.value(k).value(v);
                }
            }
        }
        e.str("reqId").value(req_id);
    }
}

impl Response {
    /// The success reply to `request`: see
    /// [`EncodeResponse::encode_for`](super::server::EncodeResponse::encode_for).
    pub(crate) fn encode_reply_for(&self, request: &Command, req_id: &Value, out: &mut Vec<u8>) {
        let mut e = Encoder::new(out);
        match (self, request) {
            (Response::State(state), Command::GetState { id }) => {
                e.map(4)
                    .str("ok")
                    .bool(true)
                    .kv_str("id", id)
                    .kv_str("state", state);
            }
            (Response::Result(result), Command::GetResult { id }) => {
                e.map(4)
                    .str("ok")
                    .bool(true)
                    .kv_str("id", id)
                    .str("result")
                    .value(result.as_ref().unwrap_or(&Value::Undefined));
            }
            (Response::Pulled { job, token }, Command::Pull(args)) if args.owner.is_some() => {
                e.map(4).str("ok").bool(true).str("job");
                match job {
                    Some(j) => e.value(&j.to_value()),
                    None => e.nil(),
                };
                e.str("token");
                match token {
                    Some(t) => e.str(t),
                    None => e.nil(),
                };
            }
            (Response::PulledBatch { jobs, .. }, Command::PullB { args, .. })
                if args.owner.is_none() =>
            {
                e.map(3).str("ok").bool(true).str("jobs").array(jobs.len());
                for j in jobs {
                    e.value(&j.to_value());
                }
            }
            _ => return self.encode_reply(req_id, out),
        }
        e.str("reqId").value(req_id);
    }
}

/// Appends an error reply map `{ok:false, error, reqId}` (server role; re-exported as
/// [`server::encode_error`](super::server::encode_error)).
pub fn encode_error(req_id: &Value, message: &str, out: &mut Vec<u8>) {
    Encoder::new(out)
        .map(3)
        .str("ok")
        .bool(false)
        .kv_str("error", message)
        .str("reqId")
        .value(req_id);
}

impl Job {
    /// The job as a map, with the keys the official client reads (id, name, data, timestamps,
    /// attempts, maxAttempts, priority) and the GetJob extras when set.
    pub fn to_value(&self) -> Value {
        let mut m = vec![
            ("id", Value::from(self.id.as_str())),
            ("queue", Value::from(self.queue.as_str())),
            ("name", Value::from(self.name.as_str())),
            ("data", self.data.clone()),
            ("priority", super::value::js_number(self.priority)),
            ("attempts", Value::Int(self.attempts)),
            ("maxAttempts", Value::Int(self.max_attempts)),
            ("createdAt", Value::F64(self.created_at)),
            ("runAt", Value::F64(self.run_at)),
        ];
        if let Some(parent) = &self.parent_id {
            m.push(("parentId", Value::from(parent.as_str())));
        }
        if !self.children_ids.is_empty() {
            let ids = self.children_ids.iter().map(|id| Value::from(id.as_str()));
            m.push(("childrenIds", Value::Array(ids.collect())));
        }
        if let Some(progress) = &self.progress {
            m.push(("progress", progress.clone()));
        }
        if let Some(s) = &self.state {
            // bunqueue's record always has a `timeline`; its TS client reads it for a job
            // without `failedReason` and throws a TypeError when it is missing. autobatch keeps
            // no history: an empty one (the reason, when there is one, is in `failedReason`).
            m.push(("timeline", Value::Array(Vec::new())));
            m.push(("state", Value::from(s.as_str())));
            m.push((
                "returnvalue",
                self.returnvalue.clone().unwrap_or(Value::Undefined),
            ));
            m.push((
                "failedReason",
                self.failed_reason
                    .clone()
                    .map(Value::Str)
                    .unwrap_or(Value::Undefined),
            ));
        }
        Value::map(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::server::EncodeResponse;

    fn round_trip(r: &Response, kind: CommandKind) -> Response {
        let mut out = Vec::new();
        r.encode(&Value::from("9"), &mut out);
        let Incoming::Reply(reply) = Incoming::from_value(Value::decode(&out).unwrap()).unwrap()
        else {
            panic!("not a reply")
        };
        assert_eq!(reply.req_id, Value::from("9"));
        assert_eq!(reply.result, Ok(()));
        reply.response(kind).unwrap()
    }

    #[test]
    fn responses_round_trip() {
        let job = Job {
            id: "j1".into(),
            queue: "q".into(),
            name: "n".into(),
            data: Value::Int(1),
            priority: 2.0,
            attempts: 0,
            max_attempts: 3,
            created_at: 1.796e12,
            run_at: 1.796e12,
            ..Default::default()
        };
        let cases = [
            (Response::Pushed("a".into()), CommandKind::Push),
            (
                Response::PushedBatch(vec!["a".into(), "b".into()]),
                CommandKind::PushB,
            ),
            (
                Response::Pulled {
                    job: Some(Box::new(job.clone())),
                    token: Some("t".into()),
                },
                CommandKind::Pull,
            ),
            (
                Response::Pulled {
                    job: None,
                    token: None,
                },
                CommandKind::Pull,
            ),
            (
                Response::PulledBatch {
                    jobs: vec![job],
                    tokens: vec!["t".into()],
                },
                CommandKind::PullB,
            ),
            (Response::Finalized { applied: true }, CommandKind::Ack),
            (Response::Finalized { applied: false }, CommandKind::Fail),
            (
                Response::AckedBatch {
                    ignored_indices: vec![],
                    ignored_ids: vec![],
                },
                CommandKind::AckB,
            ),
            (
                Response::AckedBatch {
                    ignored_indices: vec![0, 2],
                    ignored_ids: vec!["a".into(), "c".into()],
                },
                CommandKind::AckB,
            ),
            (Response::State("waiting".into()), CommandKind::GetState),
            (Response::Count(4), CommandKind::Count),
            (
                Response::Counts(JobCounts {
                    waiting: 1,
                    completed: 2,
                    ..Default::default()
                }),
                CommandKind::GetJobCounts,
            ),
            (Response::Pong { time: 5.0 }, CommandKind::Ping),
            (
                Response::Result(Some(Value::Int(1))),
                CommandKind::GetResult,
            ),
        ];
        for (r, kind) in cases {
            assert_eq!(round_trip(&r, kind), r);
        }
    }

    #[test]
    fn error_replies_and_events() {
        let mut out = Vec::new();
        encode_error(&Value::Int(3), "Job not found", &mut out);
        let Incoming::Reply(r) = Incoming::from_value(Value::decode(&out).unwrap()).unwrap() else {
            panic!()
        };
        assert_eq!(r.req_id, Value::Int(3), "reqId keeps its type");
        assert_eq!(r.result, Err("Job not found".into()));
        let ev = Value::map([
            ("type", Value::from("event")),
            ("event", Value::map([("eventType", Value::from("pushed"))])),
        ]);
        assert!(matches!(Incoming::from_value(ev), Ok(Incoming::Event(_))));
        assert_eq!(
            Incoming::from_value(Value::Int(1)),
            Err(ProtocolError::NotAReply)
        );
    }
}
