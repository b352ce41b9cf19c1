//! Typed requests, in both roles: a client encodes them, the broker decodes them.
//!
//! The traps of the protocol reference are handled here once: PUSH carries the custom id as
//! `jobId` but PUSHB items as `customId`; `name` is always sent; ids travel as strings; integers
//! outside the int32/uint32 range go out as float64; `undefined` reads as absent.

use super::codec::Encoder;
use super::error::ProtocolError;
use super::job::{
    check_group_id, check_ranges, from_millis, millis, validate_data, Backoff, Debounce, Dedup,
    JobOptions, JobSpec, RangeInput, Repeat, ValidationError,
};

/// A backoff strategy's constructor, applied once its delay passed the range checks.
type MakeBackoff = fn(std::time::Duration) -> Backoff;
use super::value::Value;
use crate::ops::read::{req_opt_f64, req_opt_i64, req_queue};

/// One request to the server.
// A command lives for one encode or one dispatch, never in bulk, so boxing the large PUSH variant
// would cost an allocation for nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Command {
    /// Informative handshake (optional; the server ignores what it is sent).
    Hello,
    /// Authenticate this connection.
    Auth {
        /// The token.
        token: String,
    },
    /// Liveness check.
    Ping,
    /// Add one job (used for durable adds).
    Push {
        /// Queue name.
        queue: String,
        /// The job.
        job: JobSpec,
    },
    /// Add many jobs to one queue.
    PushB {
        /// Queue name.
        queue: String,
        /// The jobs, in order; the reply's ids follow this order.
        jobs: Vec<JobSpec>,
    },
    /// Take one job.
    Pull(PullArgs),
    /// Take up to `count` jobs.
    PullB {
        /// Common pull arguments.
        args: PullArgs,
        /// 1..1000. `0` stands for an absent `count` (the server then hands out nothing) and
        /// is encoded by leaving the field out, since the server refuses an explicit 0.
        count: i64,
    },
    /// Complete one job.
    Ack {
        /// Job id.
        id: String,
        /// Return value.
        result: Option<Value>,
        /// Lock token from the pull.
        token: Option<String>,
    },
    /// Complete many jobs.
    AckB {
        /// Job ids.
        ids: Vec<String>,
        /// Results, parallel to `ids`.
        results: Option<Vec<Value>>,
        /// Lock tokens, parallel to `ids` (`""` = none).
        tokens: Option<Vec<String>>,
        /// `removeOnCompletes`, parallel to `ids`: remove the job once completed instead of
        /// keeping it (the TS worker's `removeOnComplete` option). Empty: not sent.
        remove_on_completes: Vec<bool>,
    },
    /// Fail one job.
    Fail {
        /// Job id.
        id: String,
        /// Error message.
        error: Option<String>,
        /// Lock token from the pull.
        token: Option<String>,
        /// Do not retry.
        unrecoverable: bool,
        /// Stack trace lines, as the official Worker sends them (empty = not sent).
        stack: Vec<String>,
        /// `removeOnFail`: remove the job if this failure is final (the TS worker's option).
        remove_on_fail: bool,
    },
    /// Look up a job.
    GetJob {
        /// Job id.
        id: String,
    },
    /// Look up a job's state.
    GetState {
        /// Job id.
        id: String,
    },
    /// A completed job's result.
    GetResult {
        /// Job id.
        id: String,
    },
    /// Jobs still to run in a queue (waiting + prioritized + delayed).
    Count {
        /// Queue name.
        queue: String,
    },
    /// Per-state counts of a queue.
    GetJobCounts {
        /// Queue name.
        queue: String,
    },
    /// Any other command, kept whole (the official Worker's housekeeping, for example).
    Other {
        /// The `cmd` string.
        cmd: String,
        /// The whole request map.
        body: Value,
    },
}

/// Arguments shared by PULL and PULLB.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PullArgs {
    /// Queue name.
    pub queue: String,
    /// Long-poll timeout, ms (0..60000).
    pub timeout: Option<i64>,
    /// Owner: with one, the server hands out lock tokens and ties the jobs to the connection.
    pub owner: Option<String>,
    /// Lock time to live, ms.
    pub lock_ttl: Option<i64>,
}

/// The kind of a command: what the reply to it should contain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
#[non_exhaustive]
pub enum CommandKind {
    Hello,
    Auth,
    Ping,
    Push,
    PushB,
    Pull,
    PullB,
    Ack,
    AckB,
    Fail,
    GetJob,
    GetState,
    GetResult,
    Count,
    GetJobCounts,
    Other,
}

impl CommandKind {
    /// The wire name (`cmd`) of the commands of this kind; `None` for [`Other`](Self::Other),
    /// whose commands carry their own.
    ///
    /// ```
    /// use autobatch_core::wire::CommandKind;
    /// assert_eq!(CommandKind::PushB.name(), Some("PUSHB"));
    /// assert_eq!(CommandKind::Other.name(), None);
    /// ```
    pub fn name(self) -> Option<&'static str> {
        Some(match self {
            CommandKind::Hello => "Hello",
            CommandKind::Auth => "Auth",
            CommandKind::Ping => "Ping",
            CommandKind::Push => "PUSH",
            CommandKind::PushB => "PUSHB",
            CommandKind::Pull => "PULL",
            CommandKind::PullB => "PULLB",
            CommandKind::Ack => "ACK",
            CommandKind::AckB => "ACKB",
            CommandKind::Fail => "FAIL",
            CommandKind::GetJob => "GetJob",
            CommandKind::GetState => "GetState",
            CommandKind::GetResult => "GetResult",
            CommandKind::Count => "Count",
            CommandKind::GetJobCounts => "GetJobCounts",
            CommandKind::Other => return None,
        })
    }
}

impl Command {
    /// A command the typed API lacks, from its whole request map: its name is the map's `cmd`,
    /// so the name is written once. A `reqId` in `body` is replaced by the session's own.
    ///
    /// # Errors
    ///
    /// [`ValidationError`] on `cmd` when `body` is not a map or has no string `cmd`: such a
    /// request names no command, and nothing is sent.
    ///
    /// ```
    /// use autobatch_core::wire::{Command, Value};
    /// let pause = Command::raw(Value::map([("cmd", Value::from("Pause")), ("queue", Value::from("q"))]));
    /// assert_eq!(pause.unwrap().name(), "Pause");
    /// assert_eq!(Command::raw(Value::map([("queue", Value::from("q"))])).unwrap_err().field, "cmd");
    /// ```
    pub fn raw(body: Value) -> Result<Command, ValidationError> {
        let cmd = body
            .get("cmd")
            .and_then(Value::as_str)
            .ok_or_else(|| ValidationError::new("cmd", "cmd must be a string in a request map"))?
            .to_owned();
        Ok(Command::Other { cmd, body })
    }

    /// The wire name (`cmd`): its kind's, or an [`Other`](Self::Other) command's own.
    pub fn name(&self) -> &str {
        match self {
            Command::Other { cmd, .. } => cmd,
            known => known.kind().name().unwrap_or_default(),
        }
    }

    /// The kind, to decode the reply with.
    pub fn kind(&self) -> CommandKind {
        match self {
            Command::Hello => CommandKind::Hello,
            Command::Auth { .. } => CommandKind::Auth,
            Command::Ping => CommandKind::Ping,
            Command::Push { .. } => CommandKind::Push,
            Command::PushB { .. } => CommandKind::PushB,
            Command::Pull(_) => CommandKind::Pull,
            Command::PullB { .. } => CommandKind::PullB,
            Command::Ack { .. } => CommandKind::Ack,
            Command::AckB { .. } => CommandKind::AckB,
            Command::Fail { .. } => CommandKind::Fail,
            Command::GetJob { .. } => CommandKind::GetJob,
            Command::GetState { .. } => CommandKind::GetState,
            Command::GetResult { .. } => CommandKind::GetResult,
            Command::Count { .. } => CommandKind::Count,
            Command::GetJobCounts { .. } => CommandKind::GetJobCounts,
            Command::Other { .. } => CommandKind::Other,
        }
    }

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

    /// Reads a request map in the server role: see
    /// [`DecodeCommand::decode`](super::server::DecodeCommand::decode).
    pub(crate) fn decode_request(v: &Value) -> (Value, Result<Command, CommandError>) {
        if v.is_nullish() {
            // msgpackr yields null for `c0`; the server rejects that as a bad format.
            return (
                Value::Undefined,
                Err(CommandError::Protocol(ProtocolError::InvalidFormat)),
            );
        }
        let req_id = v.get("reqId").cloned().unwrap_or(Value::Undefined);
        let Some(cmd) = v.get("cmd").and_then(Value::as_str) else {
            // "Invalid command" echoes the reqId only when it is a string.
            let req_id = match req_id {
                Value::Str(_) => req_id,
                _ => Value::Undefined,
            };
            return (
                req_id,
                Err(CommandError::Protocol(ProtocolError::NotACommand)),
            );
        };
        (req_id, decode_command(cmd, v))
    }
}

/// Why the broker refuses a request.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CommandError {
    /// Not a command at all, or an unknown one.
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    /// A field fails validation.
    #[error(transparent)]
    Invalid(#[from] ValidationError),
}

fn decode_command(cmd: &str, v: &Value) -> Result<Command, CommandError> {
    let text =
        |k: &'static str| -> Option<String> { v.get(k).and_then(Value::as_str).map(str::to_owned) };
    let id_field = || -> String {
        v.get("id")
            .and_then(super::job::id_text)
            .unwrap_or_default()
    };
    Ok(match cmd {
        "Hello" => Command::Hello,
        "Auth" => Command::Auth {
            token: text("token").unwrap_or_default(),
        },
        "Ping" => Command::Ping,
        "PUSH" => {
            let queue = req_queue(v)?;
            let job = decode_job(v, Flavor::Push)?;
            check_manager(v, &job)?;
            Command::Push { queue, job }
        }
        "PUSHB" => {
            let queue = req_queue(v)?;
            let jobs = match v.get("jobs") {
                Some(Value::Array(items)) => items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| decode_job(item, Flavor::PushB).map_err(|e| e.in_batch(i)))
                    .collect::<Result<Vec<_>, _>>()?,
                // The server's own message for a PUSHB without `jobs`.
                _ => {
                    return Err(ValidationError::new(
                        "jobs",
                        "undefined is not an object (evaluating 'job of jobs')",
                    )
                    .into())
                }
            };
            // The queue manager checks these for every job after the handler has checked
            // them all, and its errors carry no `jobs[i]:` prefix.
            if let Some(Value::Array(items)) = v.get("jobs") {
                for (item, job) in items.iter().zip(&jobs) {
                    check_manager(item, job)?;
                }
            }
            Command::PushB { queue, jobs }
        }
        "PULL" => Command::Pull(decode_pull(v)?),
        "PULLB" => {
            let args = decode_pull(v)?;
            // A missing count is accepted (the server then hands out nothing).
            let count = opt_int(v, "count")?;
            if let Some(c) = count {
                super::job::range("count", c, 1, MAX_PULL_COUNT)?;
            }
            Command::PullB {
                args,
                count: count.unwrap_or(0),
            }
        }
        "ACK" => Command::Ack {
            id: id_field(),
            result: v.get("result").filter(|r| !r.is_nullish()).cloned(),
            token: text("token").filter(|t| !t.is_empty()),
        },
        "ACKB" => {
            check_parallel_lengths(v)?;
            Command::AckB {
                // Keep every position (a non-id entry reads as ""), so that `tokens` and
                // `results` stay parallel to `ids`.
                ids: v
                    .get("ids")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .map(|x| super::job::id_text(x).unwrap_or_default())
                            .collect()
                    })
                    .unwrap_or_default(),
                results: v
                    .get("results")
                    .and_then(Value::as_array)
                    .map(<[Value]>::to_vec),
                tokens: v.get("tokens").and_then(Value::as_array).map(|a| {
                    a.iter()
                        .map(|t| t.as_str().unwrap_or_default().to_owned())
                        .collect()
                }),
                // The TS worker sends `null` for "not set": only `true` removes.
                remove_on_completes: v
                    .get("removeOnCompletes")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().map(|r| r.as_bool() == Some(true)).collect())
                    .unwrap_or_default(),
            }
        }
        "FAIL" => Command::Fail {
            id: id_field(),
            error: text("error"),
            token: text("token").filter(|t| !t.is_empty()),
            unrecoverable: v
                .get("unrecoverable")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            stack: string_list(v.get("stack")),
            remove_on_fail: v.get("removeOnFail").and_then(Value::as_bool) == Some(true),
        },
        "GetJob" => Command::GetJob { id: id_field() },
        "GetState" => Command::GetState { id: id_field() },
        "GetResult" => Command::GetResult { id: id_field() },
        "Count" => Command::Count {
            queue: text("queue").unwrap_or_default(),
        },
        "GetJobCounts" => Command::GetJobCounts {
            queue: text("queue").unwrap_or_default(),
        },
        other => Command::Other {
            cmd: other.to_owned(),
            body: v.clone(),
        },
    })
}

fn string_list(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(super::job::id_text).collect())
        .unwrap_or_default()
}

/// Which of the two add commands a job is written into: they name the custom id and send the
/// remove flags differently.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Flavor {
    Push,
    PushB,
}

impl Flavor {
    pub(super) fn custom_id_key(self) -> &'static str {
        match self {
            Flavor::Push => "jobId",
            Flavor::PushB => "customId",
        }
    }

    /// How many remove flags a job with these settings writes.
    pub(super) fn remove_flag_count(
        self,
        on_complete: Option<bool>,
        on_fail: Option<bool>,
    ) -> usize {
        match self {
            Flavor::PushB => 2,
            Flavor::Push => usize::from(on_complete.is_some()) + usize::from(on_fail.is_some()),
        }
    }
}

/// One job as PUSH and PUSHB write it: a [`JobSpec`] as it stands, or an
/// [`EncodedJob`](super::EncodedJob) whose fields were written when it was added.
pub(super) trait PushItem {
    /// How many fields it writes into `flavor`'s command.
    fn field_count(&self, flavor: Flavor) -> usize;
    /// Writes those fields (no map header).
    fn write_fields(&self, e: &mut Encoder<'_>, flavor: Flavor);
}

impl PushItem for JobSpec {
    fn field_count(&self, flavor: Flavor) -> usize {
        job_field_count(self, flavor)
    }

    fn write_fields(&self, e: &mut Encoder<'_>, flavor: Flavor) {
        write_job_fields(e, self, flavor);
    }
}

/// A PUSH map: `cmd`, `queue`, the job's fields and `extra` more the caller writes after.
pub(super) fn write_push(e: &mut Encoder<'_>, queue: &str, job: &impl PushItem, extra: usize) {
    e.map(2 + job.field_count(Flavor::Push) + extra)
        .kv_str("cmd", "PUSH")
        .kv_str("queue", queue);
    job.write_fields(e, Flavor::Push);
}

/// A PUSHB map: `cmd`, `queue`, the jobs and `extra` more the caller writes after.
pub(super) fn write_pushb<J: PushItem>(e: &mut Encoder<'_>, queue: &str, jobs: &[J], extra: usize) {
    e.map(3 + extra)
        .kv_str("cmd", "PUSHB")
        .kv_str("queue", queue)
        .str("jobs")
        .array(jobs.len());
    for job in jobs {
        e.map(job.field_count(Flavor::PushB));
        job.write_fields(e, Flavor::PushB);
    }
}

fn job_field_count(job: &JobSpec, flavor: Flavor) -> usize {
    let o = &job.opts;
    flavor.remove_flag_count(o.remove_on_complete, o.remove_on_fail)
        + usize::from(o.job_id.is_some())
        + job_common_field_count(o)
}

/// The fields a job writes whichever command carries it: all but the custom id and the
/// remove flags.
pub(super) fn job_common_field_count(o: &JobOptions) -> usize {
    2 + [
        o.priority.is_some(),
        o.delay.is_some(),
        o.attempts.is_some(),
        o.backoff.is_some(),
        o.timeout.is_some(),
        o.ttl.is_some(),
        !o.tags.is_empty(),
        o.group_id.is_some(),
        !o.depends_on.is_empty(),
        o.unique_key.is_some(),
        o.dedup.is_some(),
        o.lifo.is_some(),
        o.stall_timeout.is_some(),
        o.timestamp.is_some(),
        o.durable.is_some(),
    ]
    .iter()
    .filter(|b| **b)
    .count()
        + extra_field_count(o)
}

/// The options most jobs leave out, counted apart so that a job without any pays one branch.
fn extra_field_count(o: &JobOptions) -> usize {
    if !has_extras(o) {
        return 0;
    }
    [
        o.group_max_size.is_some(),
        o.repeat.is_some(),
        o.debounce.is_some(),
        o.debounce.as_ref().is_some_and(|d| d.ttl.is_some()),
        o.parent_id.is_some(),
        !o.children_ids.is_empty(),
        o.stack_trace_limit.is_some(),
        o.keep_logs.is_some(),
        o.size_limit.is_some(),
        o.fail_parent_on_failure.is_some(),
        o.remove_dependency_on_failure.is_some(),
        o.continue_parent_on_failure.is_some(),
        o.ignore_dependency_on_failure.is_some(),
    ]
    .iter()
    .filter(|b| **b)
    .count()
}

fn has_extras(o: &JobOptions) -> bool {
    o.group_max_size.is_some()
        || o.repeat.is_some()
        || o.debounce.is_some()
        || o.parent_id.is_some()
        || !o.children_ids.is_empty()
        || o.stack_trace_limit.is_some()
        || o.keep_logs.is_some()
        || o.size_limit.is_some()
        || o.fail_parent_on_failure.is_some()
        || o.remove_dependency_on_failure.is_some()
        || o.continue_parent_on_failure.is_some()
        || o.ignore_dependency_on_failure.is_some()
}

/// Flags of the `*OnFailure` family, with their wire keys.
fn failure_flags(o: &JobOptions) -> [(&'static str, Option<bool>); 4] {
    [
        ("failParentOnFailure", o.fail_parent_on_failure),
        ("removeDependencyOnFailure", o.remove_dependency_on_failure),
        ("continueParentOnFailure", o.continue_parent_on_failure),
        ("ignoreDependencyOnFailure", o.ignore_dependency_on_failure),
    ]
}

/// Numeric options of the rarely used kind, with their wire keys.
fn extra_ints(o: &JobOptions) -> [(&'static str, Option<i64>); 4] {
    [
        ("groupMaxSize", o.group_max_size),
        ("stackTraceLimit", o.stack_trace_limit),
        ("keepLogs", o.keep_logs),
        ("sizeLimit", o.size_limit),
    ]
}

fn write_extra_fields(e: &mut Encoder<'_>, o: &JobOptions) {
    if !has_extras(o) {
        return;
    }
    for (k, v) in extra_ints(o) {
        if let Some(v) = v {
            e.str(k).int(v);
        }
    }
    for (k, v) in failure_flags(o) {
        if let Some(v) = v {
            e.str(k).bool(v);
        }
    }
    if let Some(d) = &o.debounce {
        e.kv_str("debounceId", &d.id);
        if let Some(t) = d.ttl {
            e.str("debounceTtl").int(millis(t));
        }
    }
    if let Some(r) = &o.repeat {
        e.str("repeat").value(&r.to_value());
    }
    if let Some(p) = &o.parent_id {
        e.kv_str("parentId", p);
    }
    if !o.children_ids.is_empty() {
        e.str("childrenIds").array(o.children_ids.len());
        for id in &o.children_ids {
            e.str(id);
        }
    }
}

fn extra_fields_len(o: &JobOptions) -> usize {
    use super::size::{int_len, str_len, value_len};
    if !has_extras(o) {
        return 0;
    }
    let mut n = 0;
    for (k, v) in extra_ints(o) {
        if let Some(v) = v {
            n += str_len(k.len()) + int_len(v);
        }
    }
    for (k, v) in failure_flags(o) {
        if v.is_some() {
            n += str_len(k.len()) + 1;
        }
    }
    if let Some(d) = &o.debounce {
        n += str_len("debounceId".len()) + str_len(d.id.len());
        if let Some(t) = d.ttl {
            n += str_len("debounceTtl".len()) + int_len(millis(t));
        }
    }
    if let Some(r) = &o.repeat {
        n += str_len("repeat".len()) + value_len(&r.to_value());
    }
    if let Some(p) = &o.parent_id {
        n += str_len("parentId".len()) + str_len(p.len());
    }
    if !o.children_ids.is_empty() {
        n += str_len("childrenIds".len())
            + super::size::array_header_len(o.children_ids.len())
            + o.children_ids
                .iter()
                .map(|s| str_len(s.len()))
                .sum::<usize>();
    }
    n
}

fn write_job_fields(e: &mut Encoder<'_>, job: &JobSpec, flavor: Flavor) {
    write_job_head(e, job);
    if let Some(id) = &job.opts.job_id {
        e.kv_str(flavor.custom_id_key(), id);
    }
    write_job_tail(e, &job.opts);
    write_remove_flags(
        e,
        job.opts.remove_on_complete,
        job.opts.remove_on_fail,
        flavor,
    );
}

/// The `name` and `data` keys of every job, pre-encoded (fixstr).
pub(super) const NAME_KEY: &[u8] = b"\xa4name";
pub(super) const DATA_KEY: &[u8] = b"\xa4data";

/// The fields a job writes before its custom id, which PUSH and PUSHB name differently: name,
/// data and the scheduling options.
pub(super) fn write_job_head(e: &mut Encoder<'_>, job: &JobSpec) {
    e.raw(NAME_KEY)
        .str(&job.name)
        .raw(DATA_KEY)
        .value(&job.data);
    write_job_schedule(e, &job.opts);
}

/// The scheduling options, which follow the name and the data.
pub(super) fn write_job_schedule(e: &mut Encoder<'_>, o: &JobOptions) {
    let int = |e: &mut Encoder<'_>, k: &str, v: Option<i64>| {
        if let Some(v) = v {
            e.str(k).int(v);
        }
    };
    int(e, "priority", o.priority);
    int(e, "delay", o.delay.map(millis));
    int(e, "maxAttempts", o.attempts);
    if let Some(b) = o.backoff {
        e.str("backoff");
        match b {
            Backoff::Delay(d) => {
                e.int(millis(d));
            }
            Backoff::Fixed(d) => {
                e.map(2).kv_str("type", "fixed").str("delay").int(millis(d));
            }
            Backoff::Exponential(d) => {
                e.map(2)
                    .kv_str("type", "exponential")
                    .str("delay")
                    .int(millis(d));
            }
        }
    }
    int(e, "timeout", o.timeout.map(millis));
    int(e, "ttl", o.ttl.map(millis));
}

/// The fields a job writes after its custom id and before the remove flags, whose presence
/// PUSH and PUSHB decide differently.
pub(super) fn write_job_tail(e: &mut Encoder<'_>, o: &JobOptions) {
    let int = |e: &mut Encoder<'_>, k: &str, v: Option<i64>| {
        if let Some(v) = v {
            e.str(k).int(v);
        }
    };
    let list = |e: &mut Encoder<'_>, k: &str, items: &[String]| {
        if !items.is_empty() {
            e.str(k).array(items.len());
            for s in items {
                e.str(s);
            }
        }
    };
    list(e, "tags", &o.tags);
    if let Some(g) = &o.group_id {
        e.kv_str("groupId", g);
    }
    list(e, "dependsOn", &o.depends_on);
    if let Some(k) = &o.unique_key {
        e.kv_str("uniqueKey", k);
    }
    if let Some(d) = &o.dedup {
        let n = usize::from(d.ttl.is_some())
            + usize::from(d.extend.is_some())
            + usize::from(d.replace.is_some());
        e.str("dedup").map(n);
        int(e, "ttl", d.ttl.map(millis));
        if let Some(x) = d.extend {
            e.str("extend").bool(x);
        }
        if let Some(x) = d.replace {
            e.str("replace").bool(x);
        }
    }
    if let Some(l) = o.lifo {
        e.str("lifo").bool(l);
    }
    int(e, "stallTimeout", o.stall_timeout.map(millis));
    if let Some(ts) = o.timestamp {
        e.str("timestamp").f64(ts);
    }
    if let Some(d) = o.durable {
        e.str("durable").bool(d);
    }
    write_extra_fields(e, o);
}

/// The remove flags, last: PUSHB items always carry both (as the official client sends
/// them), PUSH only those that are set.
/// `removeOnComplete: false, removeOnFail: false` as MessagePack: two fixstr keys, each
/// followed by its boolean (at the two offsets below).
const PUSHB_REMOVE_FLAGS: &[u8; 32] = b"\xb0removeOnComplete\xc2\xacremoveOnFail\xc2";
const REMOVE_ON_COMPLETE_AT: usize = 17;
const REMOVE_ON_FAIL_AT: usize = 31;

fn bool_byte(b: bool) -> u8 {
    if b {
        0xc3
    } else {
        0xc2
    }
}

pub(super) fn write_remove_flags(
    e: &mut Encoder<'_>,
    on_complete: Option<bool>,
    on_fail: Option<bool>,
    flavor: Flavor,
) {
    match flavor {
        Flavor::PushB => {
            // Every PUSHB item carries both: written as one pre-encoded run, its two
            // booleans filled in, rather than as four values.
            let mut flags = *PUSHB_REMOVE_FLAGS;
            flags[REMOVE_ON_COMPLETE_AT] = bool_byte(on_complete.unwrap_or(false));
            flags[REMOVE_ON_FAIL_AT] = bool_byte(on_fail.unwrap_or(false));
            e.raw(&flags);
        }
        Flavor::Push => {
            if let Some(r) = on_complete {
                e.str("removeOnComplete").bool(r);
            }
            if let Some(r) = on_fail {
                e.str("removeOnFail").bool(r);
            }
        }
    }
}

// Here rather than in `job`, beside the encoder it mirrors, so that `job` does not depend
// on `command`.
impl JobSpec {
    /// The exact number of bytes this job takes as one item of a PUSHB: its name, its data and
    /// every option the encoder writes, keys and MessagePack headers included.
    ///
    /// The producer declares this to its batcher, whose batches are capped at
    /// [`pushb_jobs_budget`], so a PUSHB of valid jobs never
    /// exceeds the frame limit. Computed without encoding (a walk over the data, like
    /// [`validate`](Self::validate)).
    ///
    /// ```
    /// use autobatch_core::wire::{Command, JobOptions, JobSpec, Value};
    /// let job = JobSpec::new("email", Value::from("a@b")).with_options(JobOptions::new().priority(3));
    /// let mut alone = Vec::new();
    /// Command::PushB { queue: "q".into(), jobs: vec![] }.encode(None, &mut alone);
    /// let mut with_job = Vec::new();
    /// Command::PushB { queue: "q".into(), jobs: vec![job.clone()] }.encode(None, &mut with_job);
    /// assert_eq!(with_job.len() - alone.len(), job.pushb_len());
    /// ```
    pub fn pushb_len(&self) -> usize {
        pushb_item_len(self)
    }
}

/// The exact length of `job` encoded as one PUSHB item, as [`write_job_fields`] writes it with
/// its map header: name, data and every option key and value.
pub(crate) fn pushb_item_len(job: &JobSpec) -> usize {
    pushb_item_len_with(job, super::size::value_len(&job.data))
}

/// [`pushb_item_len`] for a job whose data is known to encode in `data_len` bytes (learnt
/// when it was validated: the data is not walked again).
fn pushb_item_len_with(job: &JobSpec, data_len: usize) -> usize {
    use super::size::{array_header_len, int_len, map_header_len, str_len};
    let o = &job.opts;
    let key = str_len;
    let kv_str = |k: &str, v: &str| key(k.len()) + str_len(v.len());
    let int = |k: &str, v: Option<i64>| v.map_or(0, |v| key(k.len()) + int_len(v));
    let list = |k: &str, items: &[String]| {
        if items.is_empty() {
            0
        } else {
            key(k.len())
                + array_header_len(items.len())
                + items.iter().map(|s| str_len(s.len())).sum::<usize>()
        }
    };
    let flag = |k: &str, v: Option<bool>| v.map_or(0, |_| key(k.len()) + 1);
    let mut n = map_header_len(job_field_count(job, Flavor::PushB))
        + kv_str("name", &job.name)
        + key("data".len())
        + data_len
        + int("priority", o.priority)
        + int("delay", o.delay.map(millis))
        + int("maxAttempts", o.attempts)
        + int("timeout", o.timeout.map(millis))
        + int("ttl", o.ttl.map(millis))
        + o.job_id.as_deref().map_or(0, |id| kv_str("customId", id))
        + list("tags", &o.tags)
        + o.group_id.as_deref().map_or(0, |g| kv_str("groupId", g))
        + list("dependsOn", &o.depends_on)
        + o.unique_key.as_deref().map_or(0, |k| kv_str("uniqueKey", k))
        + flag("lifo", o.lifo)
        + int("stallTimeout", o.stall_timeout.map(millis))
        + o.timestamp.map_or(0, |_| key("timestamp".len()) + 9)
        + flag("durable", o.durable)
        // PUSHB items always carry both remove flags.
        + key("removeOnComplete".len())
        + 1
        + key("removeOnFail".len())
        + 1
        + extra_fields_len(o);
    if let Some(b) = o.backoff {
        n += key("backoff".len())
            + match b {
                Backoff::Delay(d) => int_len(millis(d)),
                Backoff::Fixed(d) => {
                    1 + kv_str("type", "fixed") + key("delay".len()) + int_len(millis(d))
                }
                Backoff::Exponential(d) => {
                    1 + kv_str("type", "exponential") + key("delay".len()) + int_len(millis(d))
                }
            };
    }
    if let Some(d) = &o.dedup {
        let entries = usize::from(d.ttl.is_some())
            + usize::from(d.extend.is_some())
            + usize::from(d.replace.is_some());
        n += key("dedup".len())
            + map_header_len(entries)
            + int("ttl", d.ttl.map(millis))
            + flag("extend", d.extend)
            + flag("replace", d.replace);
    }
    n
}

/// Longest reqId the bound of [`pushb_jobs_budget`] allows for: a string of 10 characters, as
/// long as any `u32` in decimal (the session's reqIds).
const REQ_ID_MAX_CHARS: usize = 10;

/// An upper bound on everything a PUSHB to `queue` holds besides its items: the map header,
/// `cmd`, `queue`, `reqId` (a string of up to 10 characters) and the `jobs` array header.
fn pushb_envelope_max_len(queue: &str) -> usize {
    use super::size::{array_header_len, map_header_len, str_len};
    map_header_len(4)
        + str_len("cmd".len())
        + str_len("PUSHB".len())
        + str_len("queue".len())
        + str_len(queue.len())
        + str_len("reqId".len())
        + str_len(REQ_ID_MAX_CHARS)
        + str_len("jobs".len())
        + array_header_len(usize::MAX)
}

/// The most bytes of items — the sum of [`JobSpec::pushb_len`] over its jobs — that one PUSHB
/// to `queue` may carry and still fit in one frame ([`MAX_FRAME`](super::MAX_FRAME)), whatever
/// the number of jobs and for any reqId of up to 10 characters.
///
/// The producer caps every batch at this, so a batch of valid jobs never overflows a frame.
///
/// ```
/// use autobatch_core::wire::{pushb_jobs_budget, write_frame, Command, JobSpec, Value, MAX_FRAME};
/// let budget = pushb_jobs_budget("emails");
/// assert!(budget < MAX_FRAME && budget > MAX_FRAME - 100);
/// // Jobs that fill the budget exactly still make a frame.
/// let job = |n| JobSpec::new("j", Value::Str("x".repeat(n)));
/// let first = job(budget / 2);
/// let rest = budget - first.pushb_len();
/// let second = job(rest - (job(rest).pushb_len() - rest));
/// assert_eq!(first.pushb_len() + second.pushb_len(), budget);
/// let cmd = Command::PushB { queue: "emails".into(), jobs: vec![first, second] };
/// let mut out = Vec::new();
/// write_frame(&mut out, |b| cmd.encode(Some(&Value::from("4294967295")), b)).unwrap();
/// ```
pub fn pushb_jobs_budget(queue: &str) -> usize {
    super::MAX_FRAME.saturating_sub(pushb_envelope_max_len(queue))
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

/// An integer option: a number as [`req_opt_f64`] reads it, refused when it has a fraction.
fn opt_int(v: &Value, field: &'static str) -> Result<Option<i64>, ValidationError> {
    match req_opt_f64(v, field)? {
        None => Ok(None),
        Some(f) if f.fract() == 0.0 => Ok(Some(f as i64)),
        Some(_) => Err(ValidationError::new(
            field,
            format!("{field} must be an integer"),
        )),
    }
}

/// The checks bunqueue's queue manager makes after the handler's (group size, repeat), on the
/// wire value of `groupMaxSize` (a fraction or a string is refused, not rounded).
fn check_manager(item: &Value, job: &JobSpec) -> Result<(), ValidationError> {
    match item.get("groupMaxSize") {
        None | Some(Value::Undefined) => {}
        Some(x @ (Value::Int(_) | Value::F64(_)))
            if x.as_f64().is_some_and(|f| {
                f.fract() == 0.0 && f > 0.0 && f <= super::job::MAX_SAFE_INTEGER as f64
            }) => {}
        Some(_) => {
            return Err(ValidationError::new(
                "groupMaxSize",
                "group.maxSize must be a positive safe integer",
            ))
        }
    }
    job.opts.check_extras()
}

/// A number the server stores without checking it (`keepLogs`, …): kept when numeric.
fn opt_count(v: &Value, field: &str) -> Option<i64> {
    v.get(field).and_then(Value::as_f64).map(|f| f as i64)
}

/// A job's priority when it has a `groupId`: bunqueue's `validateGroupPriority` wording.
fn group_priority(v: &Value) -> Result<Option<i64>, ValidationError> {
    let bad = |m: &str| ValidationError::new("priority", m);
    match v.get("priority") {
        None | Some(Value::Undefined) => Ok(None),
        Some(x) => match x.as_f64() {
            Some(f) if f.is_finite() && matches!(x, Value::Int(_) | Value::F64(_)) => {
                if f.fract() == 0.0 {
                    Ok(Some(f as i64))
                } else {
                    Err(bad("group.priority must be an integer"))
                }
            }
            _ => Err(bad("group.priority must be a finite number")),
        },
    }
}

fn opt_bool(v: &Value, field: &str) -> Option<bool> {
    match v.get(field) {
        None | Some(Value::Undefined) => None,
        // The server coerces with Boolean(): any value is accepted.
        Some(Value::Bool(b)) => Some(*b),
        Some(Value::Nil) => Some(false),
        Some(Value::Int(i)) => Some(*i != 0),
        Some(Value::F64(f)) => Some(*f != 0.0 && !f.is_nan()),
        Some(Value::Str(s)) => Some(!s.is_empty()),
        Some(_) => Some(true),
    }
}

fn decode_job(v: &Value, flavor: Flavor) -> Result<JobSpec, ValidationError> {
    let mut data = v.get("data").cloned().unwrap_or(Value::Undefined);
    let name = match v.get("name") {
        None | Some(Value::Undefined) => {
            // Legacy envelope: with no `name`, a string `data.name` is moved into the job name.
            let legacy = match &mut data {
                Value::Map(entries) => {
                    let pos = entries.iter().position(|(k, v)| {
                        k.as_str() == Some("name") && matches!(v, Value::Str(_))
                    });
                    pos.map(|p| entries.remove(p).1)
                }
                _ => None,
            };
            match legacy {
                Some(Value::Str(s)) => s,
                _ => "default".to_owned(),
            }
        }
        Some(Value::Str(s)) => s.clone(),
        Some(_) => {
            return Err(ValidationError::new(
                "name",
                "Job name must be a non-empty string of at most 256 characters",
            ))
        }
    };
    validate_data(&data)?;
    let group_id = match v.get("groupId") {
        None | Some(Value::Undefined) => None,
        Some(Value::Str(g)) => {
            check_group_id(g)?;
            Some(g.clone())
        }
        Some(_) => return Err(ValidationError::new("groupId", "groupId must be a string")),
    };
    let backoff = match v.get("backoff") {
        None | Some(Value::Undefined) | Some(Value::Nil) => None,
        Some(b @ Value::Map(_)) => {
            let delay = req_opt_i64(b, "delay")?.unwrap_or(0);
            match b.get("type").and_then(Value::as_str) {
                Some("fixed") => Some(("backoff.delay", delay, Backoff::Fixed as MakeBackoff)),
                Some("exponential") => {
                    Some(("backoff.delay", delay, Backoff::Exponential as MakeBackoff))
                }
                _ => {
                    return Err(ValidationError::new(
                        "backoff",
                        "backoff.type must be 'fixed' or 'exponential'",
                    ))
                }
            }
        }
        Some(_) => {
            req_opt_i64(v, "backoff")?.map(|d| ("backoff", d, Backoff::Delay as MakeBackoff))
        }
    };
    let custom_id_key = if flavor == Flavor::Push {
        "jobId"
    } else {
        "customId"
    };
    let dedup = match v.get("dedup") {
        Some(d @ Value::Map(_)) => Some(Dedup {
            ttl: req_opt_i64(d, "ttl")?.map(from_millis),
            extend: opt_bool(d, "extend"),
            replace: opt_bool(d, "replace"),
        }),
        _ => None,
    };
    let priority = if group_id.is_some() {
        group_priority(v)?
    } else {
        opt_int(v, "priority")?
    };
    let delay = req_opt_i64(v, "delay")?;
    let attempts = opt_int(v, "maxAttempts")?;
    let timeout = req_opt_i64(v, "timeout")?;
    let ttl = req_opt_i64(v, "ttl")?;
    let opts = JobOptions {
        priority,
        delay: delay.map(from_millis),
        attempts,
        backoff: backoff.map(|(_, d, make)| make(from_millis(d))),
        timeout: timeout.map(from_millis),
        ttl: ttl.map(from_millis),
        // An empty custom id counts as absent; a numeric one is kept as its text.
        job_id: v
            .get(custom_id_key)
            .and_then(super::job::id_text)
            .filter(|s| !s.is_empty()),
        unique_key: v
            .get("uniqueKey")
            .and_then(Value::as_str)
            .map(str::to_owned),
        dedup,
        depends_on: string_list(v.get("dependsOn")),
        tags: string_list(v.get("tags")),
        group_id,
        lifo: opt_bool(v, "lifo"),
        stall_timeout: req_opt_i64(v, "stallTimeout")?.map(from_millis),
        timestamp: match v.get("timestamp") {
            Some(Value::BigInt(_)) => {
                return Err(ValidationError::new(
                    "timestamp",
                    "Invalid mix of BigInt and other type in addition.",
                ))
            }
            _ => req_opt_f64(v, "timestamp")?,
        },
        remove_on_complete: opt_bool(v, "removeOnComplete"),
        remove_on_fail: opt_bool(v, "removeOnFail"),
        durable: opt_bool(v, "durable"),
        // Checked with the queue manager's checks (`check_manager`), after every item's own.
        group_max_size: v
            .get("groupMaxSize")
            .and_then(Value::as_f64)
            .map(|f| f as i64),
        repeat: match v.get("repeat") {
            None | Some(Value::Undefined) | Some(Value::Nil) | Some(Value::Bool(false)) => None,
            Some(r @ Value::Map(_)) => Some(Repeat::from_value(r)?),
            // Any other truthy value has neither `every` nor `pattern`.
            Some(_) => Some(Repeat::default()),
        },
        debounce: v
            .get("debounceId")
            .and_then(super::job::id_text)
            .map(|id| Debounce {
                id,
                ttl: v
                    .get("debounceTtl")
                    .and_then(Value::as_f64)
                    .map(|f| from_millis(f as i64)),
            }),
        parent_id: v.get("parentId").and_then(super::job::id_text),
        children_ids: string_list(v.get("childrenIds")),
        stack_trace_limit: opt_count(v, "stackTraceLimit"),
        keep_logs: opt_count(v, "keepLogs"),
        size_limit: opt_count(v, "sizeLimit"),
        fail_parent_on_failure: opt_bool(v, "failParentOnFailure"),
        remove_dependency_on_failure: opt_bool(v, "removeDependencyOnFailure"),
        continue_parent_on_failure: opt_bool(v, "continueParentOnFailure"),
        ignore_dependency_on_failure: opt_bool(v, "ignoreDependencyOnFailure"),
    };
    // The ranges are checked on the wire values: a negative delay is refused as bunqueue
    // refuses it, not clamped into a Duration first.
    check_ranges(&RangeInput {
        grouped: opts.group_id.is_some(),
        priority,
        delay,
        timeout,
        attempts,
        ttl,
        backoff: backoff.map(|(field, d, _)| (field, d)),
        timestamp: opts.timestamp,
    })?;
    let job = JobSpec { name, data, opts };
    let chars = job.name.chars().count();
    if chars == 0 || chars > super::job::MAX_NAME_CHARS {
        return Err(ValidationError::new(
            "name",
            "Job name must be a non-empty string of at most 256 characters",
        ));
    }
    Ok(job)
}

/// The largest PULLB `count`.
const MAX_PULL_COUNT: i64 = 1000;
/// The longest PULL/PULLB long-poll `timeout`, ms.
const MAX_PULL_TIMEOUT_MS: i64 = 60_000;

/// ACKB's optional arrays must be parallel to `ids` (bunqueue checks tokens, then results,
/// then removeOnCompletes).
fn check_parallel_lengths(v: &Value) -> Result<(), ValidationError> {
    let ids = v
        .get("ids")
        .and_then(Value::as_array)
        .map_or(0, <[Value]>::len);
    for (key, message) in [
        ("tokens", "ACKB tokens length must match ids length"),
        ("results", "ACKB results length must match ids length"),
        (
            "removeOnCompletes",
            "ACKB removeOnCompletes length must match ids length",
        ),
    ] {
        if let Some(a) = v.get(key).and_then(Value::as_array) {
            if a.len() != ids {
                return Err(ValidationError::new(key, message));
            }
        }
    }
    Ok(())
}

fn decode_pull(v: &Value) -> Result<PullArgs, ValidationError> {
    let timeout = req_opt_i64(v, "timeout")?;
    if let Some(t) = timeout {
        super::job::range("timeout", t, 0, MAX_PULL_TIMEOUT_MS)?;
    }
    Ok(PullArgs {
        queue: v
            .get("queue")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        timeout,
        owner: v.get("owner").and_then(Value::as_str).map(str::to_owned),
        lock_ttl: v.get("lockTtl").and_then(Value::as_f64).map(|f| f as i64),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::server::DecodeCommand;
    use std::time::Duration;

    fn round_trip(cmd: &Command) -> Command {
        let mut out = Vec::new();
        cmd.encode(Some(&Value::from("7")), &mut out);
        let v = Value::decode(&out).unwrap();
        let (req_id, back) = Command::decode(&v);
        assert_eq!(req_id, Value::from("7"));
        back.unwrap()
    }

    #[test]
    fn pre_encoded_keys_are_what_the_encoder_writes() {
        for (complete, fail) in [(false, false), (true, false), (false, true), (true, true)] {
            let (mut fast, mut slow) = (Vec::new(), Vec::new());
            write_remove_flags(
                &mut Encoder::new(&mut fast),
                Some(complete),
                Some(fail),
                Flavor::PushB,
            );
            Encoder::new(&mut slow)
                .str("removeOnComplete")
                .bool(complete)
                .str("removeOnFail")
                .bool(fail);
            assert_eq!(
                fast, slow,
                "removeOnComplete {complete}, removeOnFail {fail}"
            );
        }
        let mut none = Vec::new();
        write_remove_flags(&mut Encoder::new(&mut none), None, None, Flavor::PushB);
        assert_eq!(
            &none[..],
            &PUSHB_REMOVE_FLAGS[..],
            "unset flags are sent as false"
        );
        for (key, text) in [(NAME_KEY, "name"), (DATA_KEY, "data")] {
            let mut slow = Vec::new();
            Encoder::new(&mut slow).str(text);
            assert_eq!(key, &slow[..]);
        }
    }

    #[test]
    fn custom_id_key_depends_on_the_command() {
        let job = JobSpec::new("j", Value::Int(1)).with_options(JobOptions::new().job_id("c1"));
        let mut out = Vec::new();
        Command::Push {
            queue: "q".into(),
            job: job.clone(),
        }
        .encode(None, &mut out);
        let v = Value::decode(&out).unwrap();
        assert_eq!(v.get("jobId"), Some(&Value::from("c1")));
        assert_eq!(v.get("customId"), None);
        out.clear();
        Command::PushB {
            queue: "q".into(),
            jobs: vec![job],
        }
        .encode(None, &mut out);
        let v = Value::decode(&out).unwrap();
        let item = &v.get("jobs").unwrap().as_array().unwrap()[0];
        assert_eq!(item.get("customId"), Some(&Value::from("c1")));
        assert_eq!(item.get("jobId"), None);
        assert_eq!(item.get("removeOnComplete"), Some(&Value::Bool(false)));
    }

    #[test]
    fn negative_spans_are_refused_as_the_server_refuses_them() {
        // Durations cannot be negative: the decoder checks the wire value before converting.
        for (key, message) in [
            ("delay", "delay must be at least 0"),
            ("timeout", "timeout must be at least 0"),
            ("ttl", "ttl must be at least 0"),
            ("backoff", "backoff must be at least 0"),
        ] {
            let v = Value::map([
                ("cmd", Value::from("PUSH")),
                ("queue", Value::from("q")),
                ("name", Value::from("n")),
                ("data", Value::Nil),
                (key, Value::Int(-1)),
            ]);
            assert_eq!(Command::decode(&v).1.unwrap_err().to_string(), message);
        }
        let v = Value::map([
            ("cmd", Value::from("PUSH")),
            ("queue", Value::from("q")),
            ("name", Value::from("n")),
            ("data", Value::Nil),
            ("delay", Value::F64(1500.7)),
        ]);
        let Ok(Command::Push { job, .. }) = Command::decode(&v).1 else {
            panic!("a PUSH")
        };
        assert_eq!(job.opts.delay, Some(Duration::from_millis(1500)));
    }

    #[test]
    fn every_command_round_trips() {
        let job = JobSpec::new("n", Value::map([("x", Value::Int(1))])).with_options(JobOptions {
            priority: Some(3),
            delay: Some(Duration::from_millis(8_640_000_000)),
            attempts: Some(2),
            backoff: Some(Backoff::Exponential(Duration::from_millis(100))),
            tags: vec!["t".into()],
            dedup: Some(Dedup::new().ttl(Duration::from_millis(5)).extend(true)),
            unique_key: Some("u".into()),
            remove_on_complete: Some(true),
            remove_on_fail: Some(false),
            durable: Some(true),
            group_max_size: Some(5),
            group_id: Some("g".into()),
            repeat: Some(Repeat::every(Duration::from_millis(250)).limit(3).tz("UTC")),
            debounce: Some(Debounce::new("d").ttl(Duration::from_millis(900))),
            stack_trace_limit: Some(4),
            keep_logs: Some(20),
            size_limit: Some(1024),
            fail_parent_on_failure: Some(true),
            remove_dependency_on_failure: Some(false),
            continue_parent_on_failure: Some(true),
            ignore_dependency_on_failure: Some(false),
            ..Default::default()
        });
        let pull = PullArgs {
            queue: "q".into(),
            timeout: Some(0),
            owner: Some("w".into()),
            lock_ttl: Some(30000),
        };
        for cmd in [
            Command::Ping,
            Command::Auth { token: "t".into() },
            Command::Push {
                queue: "q".into(),
                job: job.clone(),
            },
            Command::PushB {
                queue: "q".into(),
                jobs: vec![job.clone(), job],
            },
            Command::Pull(pull.clone()),
            Command::PullB {
                args: pull,
                count: 4,
            },
            Command::Ack {
                id: "a".into(),
                result: Some(Value::Int(1)),
                token: Some("t".into()),
            },
            Command::AckB {
                ids: vec!["a".into(), "b".into()],
                results: Some(vec![Value::Nil, Value::Int(2)]),
                tokens: Some(vec!["t1".into(), "t2".into()]),
                remove_on_completes: vec![true, false],
            },
            Command::Fail {
                id: "a".into(),
                error: Some("boom".into()),
                token: None,
                unrecoverable: true,
                stack: vec!["Error: boom".into(), "at f (x.ts:1:1)".into()],
                remove_on_fail: true,
            },
            Command::GetJob { id: "a".into() },
            Command::GetState { id: "a".into() },
            Command::Count { queue: "q".into() },
            Command::GetJobCounts { queue: "q".into() },
        ] {
            assert_eq!(round_trip(&cmd), cmd, "{}", cmd.name());
        }
    }

    #[test]
    fn server_side_validation_messages() {
        let req = |pairs: Vec<(&str, Value)>| {
            let v = Value::map(pairs);
            Command::decode(&v).1.unwrap_err().to_string()
        };
        assert_eq!(
            req(vec![
                ("cmd", "PUSH".into()),
                ("queue", "q".into()),
                ("delay", Value::BigInt(5))
            ]),
            "delay must be a number"
        );
        assert_eq!(
            req(vec![
                ("cmd", "PUSH".into()),
                ("queue", "q".into()),
                ("priority", Value::F64(1.5))
            ]),
            "priority must be an integer"
        );
        assert_eq!(req(vec![("reqId", "1".into())]), "Invalid command");
        // A nil body reads as an undecodable frame to the server [V `11`].
        assert_eq!(
            Command::decode(&Value::Nil).1.unwrap_err().to_string(),
            "Invalid command format"
        );
        // Validation the server does before touching the jobs [V `10`, `14`].
        let bad = |pairs: Vec<(&str, Value)>| {
            Command::decode(&Value::map(pairs))
                .1
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            bad(vec![
                ("cmd", "PUSHB".into()),
                ("queue", "bad queue!".into()),
                ("jobs", Value::Array(vec![]))
            ]),
            "Queue name contains invalid characters"
        );
        assert_eq!(
            bad(vec![
                ("cmd", "PULLB".into()),
                ("queue", "q".into()),
                ("count", Value::Int(0))
            ]),
            "count must be at least 1"
        );
        assert_eq!(
            bad(vec![
                ("cmd", "PULL".into()),
                ("queue", "q".into()),
                ("timeout", Value::Int(60_001))
            ]),
            "timeout must be at most 60000"
        );
        assert_eq!(
            bad(vec![
                ("cmd", "ACKB".into()),
                ("ids", Value::Array(vec!["a".into(), "b".into()])),
                ("tokens", Value::Array(vec!["t".into()])),
            ]),
            "ACKB tokens length must match ids length"
        );
        let v = Value::map([("cmd", Value::from("PUSHB")), ("queue", "q".into())]);
        assert!(Command::decode(&v).1.is_err());
    }

    #[test]
    fn pullb_without_count_round_trips() {
        // Found by the value_command fuzz target: a PULLB without `count` decodes to count 0,
        // which was re-encoded as `count: 0`, which the server (and our decoder) refuses.
        let v = Value::map([("cmd", Value::from("PULLB")), ("queue", "q".into())]);
        let cmd = Command::decode(&v).1.unwrap();
        assert!(matches!(cmd, Command::PullB { count: 0, .. }));
        assert_eq!(round_trip(&cmd), cmd);
    }

    #[test]
    fn legacy_envelope_moves_name_out_of_data() {
        let v = Value::map([
            ("cmd", Value::from("PUSH")),
            ("queue", "q".into()),
            (
                "data",
                Value::map([("name", Value::from("legacy")), ("x", Value::Int(1))]),
            ),
        ]);
        let Command::Push { job, .. } = Command::decode(&v).1.unwrap() else {
            panic!()
        };
        assert_eq!(job.name, "legacy");
        assert_eq!(job.data, Value::map([("x", Value::Int(1))]));
    }
}

/// The byte sizes the producer relies on: a job's computed PUSHB length is its real encoding,
/// and the budget leaves room for any envelope.
#[cfg(test)]
mod size_tests {
    use super::*;
    use crate::wire::{pushb_jobs_budget, Dedup, MAX_FRAME};
    use proptest::prelude::*;

    /// Lengths on both sides of every header boundary (fix, 8, 16, 32 bits).
    fn len() -> impl Strategy<Value = usize> {
        prop_oneof![
            4 => 0usize..40,
            1 => 250usize..260,
            1 => 65_530usize..65_540,
            1 => Just(70_000usize),
        ]
    }

    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            4 => "[a-z0-9é€😀]{0,40}",
            1 => len().prop_map(|n| "y".repeat(n)),
        ]
    }

    fn int() -> impl Strategy<Value = i64> {
        prop_oneof![
            3 => -300i64..70_000,
            1 => any::<i64>(),
            1 => prop::sample::select(vec![
                i64::MIN, -(1 << 31) - 1, -(1 << 31), -32769, -32768, -129, -128, -33, -32, -1,
                0, 127, 128, 255, 256, 65535, 65536, (1 << 32) - 1, 1 << 32, i64::MAX,
            ]),
        ]
    }

    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Nil),
            Just(Value::Undefined),
            any::<bool>().prop_map(Value::Bool),
            int().prop_map(Value::Int),
            any::<f64>().prop_map(Value::F64),
            any::<i64>().prop_map(|i| Value::BigInt(i as i128)),
            text().prop_map(Value::Str),
            len().prop_map(|n| Value::Bin(vec![7; n])),
            (any::<i8>(), len()).prop_map(|(t, n)| Value::Ext(t, vec![1; n])),
        ];
        leaf.prop_recursive(3, 64, 20, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..20).prop_map(Value::Array),
                prop::collection::vec((text().prop_map(Value::Str), inner), 0..20)
                    .prop_map(Value::Map),
            ]
        })
    }

    fn span(i: i64) -> std::time::Duration {
        std::time::Duration::from_millis(i.unsigned_abs())
    }

    fn backoff() -> impl Strategy<Value = Backoff> {
        prop_oneof![
            int().prop_map(|i| Backoff::Delay(span(i))),
            int().prop_map(|i| Backoff::Fixed(span(i))),
            int().prop_map(|i| Backoff::Exponential(span(i))),
        ]
    }

    fn options() -> impl Strategy<Value = JobOptions> {
        let ints = prop::array::uniform7(prop::option::of(int()));
        let texts = prop::array::uniform3(prop::option::of(text()));
        let bools = prop::array::uniform7(prop::option::of(any::<bool>()));
        let lists = (
            prop::collection::vec(text(), 0..20),
            prop::collection::vec(text(), 0..20),
        );
        (
            ints,
            texts,
            bools,
            lists,
            prop::option::of(backoff()),
            prop::option::of(any::<f64>()),
            extras(),
        )
            .prop_map(|(i, t, b, (tags, deps), backoff, timestamp, x)| {
                x.merge(JobOptions {
                    priority: i[0],
                    delay: i[1].map(span),
                    attempts: i[2],
                    backoff,
                    timeout: i[3].map(span),
                    ttl: i[4].map(span),
                    job_id: t[0].clone(),
                    unique_key: t[1].clone(),
                    dedup: (i[5].is_some() || b[5].is_some() || b[6].is_some()).then_some(Dedup {
                        ttl: i[5].map(span),
                        extend: b[5],
                        replace: b[6],
                    }),
                    depends_on: deps,
                    tags,
                    group_id: t[2].clone(),
                    lifo: b[0],
                    stall_timeout: i[6].map(span),
                    timestamp,
                    remove_on_complete: b[1],
                    remove_on_fail: b[2],
                    durable: b[3],
                    ..JobOptions::default()
                })
            })
    }

    /// The rarely used options, each present or not.
    #[derive(Debug, Clone)]
    struct Extras(JobOptions);

    impl Extras {
        fn merge(self, o: JobOptions) -> JobOptions {
            JobOptions {
                group_max_size: self.0.group_max_size,
                repeat: self.0.repeat,
                debounce: self.0.debounce,
                parent_id: self.0.parent_id,
                children_ids: self.0.children_ids,
                stack_trace_limit: self.0.stack_trace_limit,
                keep_logs: self.0.keep_logs,
                size_limit: self.0.size_limit,
                fail_parent_on_failure: self.0.fail_parent_on_failure,
                remove_dependency_on_failure: self.0.remove_dependency_on_failure,
                continue_parent_on_failure: self.0.continue_parent_on_failure,
                ignore_dependency_on_failure: self.0.ignore_dependency_on_failure,
                ..o
            }
        }
    }

    fn extras() -> impl Strategy<Value = Extras> {
        let ints = prop::array::uniform8(prop::option::of(int()));
        let texts = prop::array::uniform4(prop::option::of(text()));
        let bools = prop::array::uniform5(prop::option::of(any::<bool>()));
        (ints, texts, bools, any::<bool>()).prop_map(|(i, t, b, with_repeat)| {
            let repeat = with_repeat.then(|| Repeat {
                every: i[4].map(span),
                pattern: t[2].clone(),
                limit: i[5],
                start_date: i[6],
                tz: t[3].clone(),
                immediately: b[4],
                offset: i[7],
                ..Repeat::default()
            });
            Extras(JobOptions {
                group_max_size: i[0],
                repeat,
                debounce: t[0].clone().map(|id| Debounce {
                    id,
                    ttl: i[1].map(span),
                }),
                parent_id: t[1].clone(),
                children_ids: t[1].iter().cloned().collect(),
                stack_trace_limit: i[1],
                keep_logs: i[2],
                size_limit: i[3],
                fail_parent_on_failure: b[0],
                remove_dependency_on_failure: b[1],
                continue_parent_on_failure: b[2],
                ignore_dependency_on_failure: b[3],
                ..JobOptions::default()
            })
        })
    }

    fn job() -> impl Strategy<Value = JobSpec> {
        (text(), value(), options()).prop_map(|(name, data, opts)| JobSpec { name, data, opts })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        /// Whatever the jobs, the queue and the reqId: the computed item lengths plus the
        /// envelope bound are never below the real PUSHB, and each item length is exact.
        #[test]
        fn pushb_len_is_the_real_encoded_size(
            jobs in prop::collection::vec(job(), 0..6),
            queue in "[a-zA-Z0-9_.:-]{1,256}",
            req in any::<u32>(),
        ) {
            let req = Value::Str(req.to_string());
            let encode = |jobs: Vec<JobSpec>| {
                let mut out = Vec::new();
                Command::PushB { queue: queue.clone(), jobs }.encode(Some(&req), &mut out);
                out.len()
            };
            let items: usize = jobs.iter().map(JobSpec::pushb_len).sum();
            let real = encode(jobs.clone());
            // The bound the producer relies on.
            prop_assert!(real <= MAX_FRAME - pushb_jobs_budget(&queue) + items,
                "PUSHB of {} bytes above its bound", real);
            // Exactness, item by item: adding a job adds exactly its length (plus the growth of
            // the array header, which the envelope bound covers).
            let header = |n: usize| crate::wire::size::array_header_len(n);
            let empty = encode(Vec::new()) - header(0);
            prop_assert_eq!(real, empty + header(jobs.len()) + items);
        }

        /// The one walk validation makes gives the same verdict as the three it replaced
        /// (BigInt search, size estimate, exact count) and the data's exact length, so the
        /// session sizes a validated job without walking its data again.
        #[test]
        fn validation_sizes_the_data_it_checks(
            data in prop_oneof![
                value(),
                value().prop_map(|v| Value::Raw(crate::wire::RawValue::from_bytes(&v.to_bytes()).unwrap())),
                value().prop_map(|v| Value::map([("raw", Value::Raw(crate::wire::RawValue::from_bytes(&v.to_bytes()).unwrap())), ("v", v)])),
            ],
        ) {
            use crate::wire::job::approx_value_size;
            use crate::wire::{MAX_DATA_JSON_LEN, ValidationError};
            let old = if data.contains_bigint() {
                Err(ValidationError::new("data", "Job data must be JSON serializable"))
            } else if approx_value_size(&data) * 6 > MAX_DATA_JSON_LEN
                && data.json_len(MAX_DATA_JSON_LEN) > MAX_DATA_JSON_LEN
            {
                Err(ValidationError::new("data", "Job data too large (max 10MB)"))
            } else {
                Ok(())
            };
            let job = JobSpec::new("j", data.clone());
            let sized = job.validate_sized();
            prop_assert_eq!(sized.clone().map(|_| ()), old);
            if let Ok(len) = sized {
                prop_assert_eq!(len, crate::wire::size::value_len(&data));
                prop_assert_eq!(super::pushb_item_len_with(&job, len), job.pushb_len());
            }
        }

        /// The session's encoders of encoded jobs write exactly what the commands write for
        /// the jobs they came from, and size them as the jobs do.
        #[test]
        fn encoded_jobs_write_what_the_commands_write(
            jobs in prop::collection::vec(job(), 0..4),
            queue in "[a-z]{1,12}",
            req in 0u32..,
        ) {
            use crate::wire::encoded::{encode_push, encode_pushb};
            use crate::wire::EncodedJob;
            let req = req.to_string();
            let via = |cmd: Command| {
                let mut out = Vec::new();
                cmd.encode(Some(&Value::from(req.as_str())), &mut out);
                out
            };
            // Only valid jobs can be encoded; the rest are refused as validation refuses them.
            let mut valid = Vec::new();
            let mut encoded = Vec::new();
            for job in jobs {
                match EncodedJob::new(&job) {
                    Ok(e) => {
                        prop_assert_eq!(e.pushb_len(), job.pushb_len());
                        prop_assert_eq!(e.has_custom_id(), job.opts.job_id.is_some());
                        prop_assert_eq!(e.is_durable(), job.opts.is_durable());
                        valid.push(job);
                        encoded.push(e);
                    }
                    Err(e) => prop_assert_eq!(Err(e), job.validate()),
                }
            }
            let mut out = Vec::new();
            encode_pushb(&queue, &encoded, &req, &mut out);
            prop_assert_eq!(&out, &via(Command::PushB { queue: queue.clone(), jobs: valid.clone() }));
            for (job, e) in valid.into_iter().zip(&encoded) {
                out.clear();
                encode_push(&queue, e, &req, &mut out);
                prop_assert_eq!(&out, &via(Command::Push { queue: queue.clone(), job }));
            }
        }
    }

    #[test]
    fn budget_leaves_room_for_the_longest_queue_and_req_id() {
        let queue = "q".repeat(256);
        let budget = pushb_jobs_budget(&queue);
        // One job filling the budget exactly, sent with the longest reqId: it fits.
        let mut data_len = budget - JobSpec::new("j", Value::Str(String::new())).pushb_len();
        let job = loop {
            let job = JobSpec::new("j", Value::Str("x".repeat(data_len)));
            if job.pushb_len() <= budget {
                break job;
            }
            data_len -= 1;
        };
        assert!(budget - job.pushb_len() < 4, "job fills the budget");
        let mut out = Vec::new();
        Command::PushB {
            queue,
            jobs: vec![job],
        }
        .encode(Some(&Value::from("4294967295")), &mut out);
        assert!(out.len() <= MAX_FRAME, "{} > {MAX_FRAME}", out.len());
    }
}
