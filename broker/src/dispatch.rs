//! Command handling: one request frame in, one reply frame out.
//!
//! Order of checks, as bunqueue 2.9.5: undecodable body → `Invalid command format`; not a map
//! with a string `cmd` → `Invalid command`; not authenticated → `Not authenticated`; then the
//! command's own validation and effect. Nothing here panics on client data.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use autobatch_core::wire::server::{encode_error, DecodeCommand, EncodeResponse};
use autobatch_core::wire::{
    validate_queue_name, Command, DecodeError, JobSpec, PullArgs, Response, Value,
};

use crate::auth::token_matches;
use crate::clock::now_ms;
use crate::context::{Conn, Ctx, Shared};
use crate::queue::jobs::Jobs;
use crate::queue::limits::groups::PullGroup;
use crate::queue::{Failure, FinishError, PullSpec, Pulled, State, DEFAULT_LOCK_TTL};
use crate::routes;
use crate::store::SyncWaiter;

/// Longest long-poll, ms.
const MAX_PULL_TIMEOUT: i64 = 60_000;
/// Most jobs in one PULLB.
const MAX_PULL_COUNT: i64 = 1000;
/// Uncommitted store ops past which non-durable pushes wait for a commit (bounds the write
/// buffer when producers outrun the disk).
const MAX_BACKLOG: usize = 50_000;

/// Frame bodies above this many bytes are decoded on the blocking pool, not on a runtime
/// worker: a 64 MiB body of tiny values takes seconds to decode (and to drop), and a few of them
/// inline would stall every other connection for that long.
pub(crate) const LARGE_FRAME: usize = 64 * 1024;

/// How many large frames may be decoded at once: half the cores (at least one), so that a
/// flood of huge frames leaves the other half to the runtime, and bounds the memory their
/// decoded values take.
pub(crate) fn max_large_decodes() -> usize {
    std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1))
}

/// One reply frame (header included).
fn frame(body: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut out = Vec::new();
    if autobatch_core::wire::write_frame(&mut out, body).is_err() {
        // Only a reply above 64 MiB gets here (a huge PULLB): say so instead.
        out.clear();
        let _ = autobatch_core::wire::write_frame(&mut out, |b| {
            encode_error(&Value::Undefined, "Reply too large", b)
        });
    }
    out
}

/// An error reply frame.
pub(crate) fn error_frame(req_id: &Value, msg: &str) -> Vec<u8> {
    frame(|b| encode_error(req_id, msg, b))
}

fn ok_frame(req_id: &Value, r: &Response) -> Vec<u8> {
    frame(|b| r.encode(req_id, b))
}

fn other(entries: Vec<(&str, Value)>) -> Response {
    Response::Other(Value::map(entries))
}

/// Handles one frame body and returns the reply frame. A large body is decoded, and its value
/// dropped, on the blocking pool (at most [`max_large_decodes`] at once).
pub(crate) async fn handle(shared: &Shared, conn: &Conn, body: Vec<u8>) -> Vec<u8> {
    if body.len() <= LARGE_FRAME {
        return match Value::decode(&body) {
            Ok(v) => handle_value(shared, conn, &v).await,
            Err(e) => decode_error_frame(&e),
        };
    }
    let decoded = {
        // Closed never: the semaphore lives as long as `shared`.
        let Ok(_permit) = shared.large_decodes.acquire().await else {
            return error_frame(&Value::Undefined, "Internal server error");
        };
        tokio::task::spawn_blocking(move || Value::decode(&body)).await
    };
    let v = match decoded {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => return decode_error_frame(&e),
        Err(_) => return error_frame(&Value::Undefined, "Internal server error"),
    };
    let reply = handle_value(shared, conn, &v).await;
    // Dropping millions of values is as slow as decoding them: not on a worker either.
    drop(tokio::task::spawn_blocking(move || drop(v)));
    reply
}

/// The reply to a body that did not decode: bunqueue's "Invalid command format", except for a
/// frame refused because its tree would not fit the decode budget, which says so.
fn decode_error_frame(e: &DecodeError) -> Vec<u8> {
    match e {
        DecodeError::TooExpensive { .. } => error_frame(&Value::Undefined, &e.to_string()),
        _ => error_frame(&Value::Undefined, "Invalid command format"),
    }
}

/// Handles one decoded request.
async fn handle_value(shared: &Shared, conn: &Conn, v: &Value) -> Vec<u8> {
    let Some(cmd) = v.get("cmd").and_then(Value::as_str) else {
        // "Invalid command", or "Invalid command format" for a nil body.
        let (req_id, result) = Command::decode(v);
        let msg = result
            .err()
            .map_or("Invalid command".into(), |e| e.to_string());
        return error_frame(&req_id, &msg);
    };
    let req_id = v.get("reqId").cloned().unwrap_or(Value::Undefined);
    let tokens = &shared.config.auth_tokens;
    if cmd == "Auth" {
        let token = v.get("token").and_then(Value::as_str).unwrap_or_default();
        if token_matches(tokens, token) {
            conn.authed.store(true, Ordering::Release);
            return ok_frame(&req_id, &Response::Done);
        }
        return error_frame(&req_id, "Invalid token");
    }
    if !tokens.is_empty() && !conn.authed.load(Ordering::Acquire) {
        return error_frame(&req_id, "Not authenticated");
    }
    // bunqueue checks the queue name before anything else in the queue commands.
    if matches!(cmd, "PUSH" | "PUSHB" | "PULL" | "PULLB") {
        let queue = v.get("queue").and_then(Value::as_str).unwrap_or_default();
        if let Err(e) = validate_queue_name(queue) {
            return error_frame(&req_id, &e.message);
        }
    }
    let command = match Command::decode(v).1 {
        Ok(c) => c,
        Err(e) => return error_frame(&req_id, &e.to_string()),
    };
    match run(shared, conn, command, v).await {
        Ok(r) => ok_frame(&req_id, &r),
        Err(msg) => error_frame(&req_id, &msg),
    }
}

async fn run(shared: &Shared, conn: &Conn, cmd: Command, raw: &Value) -> Result<Response, String> {
    let now = now_ms();
    match cmd {
        Command::Hello => Ok(Response::Hello {
            protocol_version: 3,
            server: "bunqueue".into(),
            version: "2.9.5".into(),
        }),
        Command::Ping => Ok(Response::Pong { time: now }),
        Command::Auth { .. } => Ok(Response::Done), // handled before dispatch
        Command::Push { queue, mut job } => {
            crate::envelope::push(&mut job, raw)?;
            let ids = push(shared, &queue, vec![job], false).await?;
            Ok(Response::Pushed(ids.into_iter().next().unwrap_or_default()))
        }
        Command::PushB { queue, mut jobs } => {
            crate::envelope::push_batch(&mut jobs, raw)?;
            let ids = push(shared, &queue, jobs, true).await?;
            Ok(Response::PushedBatch(ids))
        }
        Command::Pull(args) => pull(shared, conn, args, None, raw).await,
        Command::PullB { args, count } => {
            let count = pull_count(count, raw)?;
            pull(shared, conn, args, Some(count), raw).await
        }
        Command::Ack { id, result, token } => ack(shared, &id, token.as_deref(), result, raw, now),
        Command::AckB {
            ids,
            results,
            tokens,
            ..
        } => ack_batch(shared, ids, results, tokens, raw, now),
        Command::Fail {
            id,
            error,
            token,
            unrecoverable,
            ..
        } => {
            let remove = raw.get("removeOnFail").and_then(Value::as_bool);
            let how = Failure::new(error)
                .unrecoverable(unrecoverable)
                .remove(remove);
            fail(shared, &id, token.as_deref(), how, raw, now)
        }
        Command::GetJob { id } => shared
            .lock()
            .get_job(&id, now)
            .map(|job| other(vec![("job", job)]))
            .ok_or_else(|| "Job not found".to_owned()),
        Command::GetState { id } => {
            let state = shared.lock().jobs().get_state(&id, now);
            let echoed = raw.get("id").cloned().unwrap_or(Value::Undefined);
            Ok(other(vec![("id", echoed), ("state", Value::from(state))]))
        }
        Command::GetResult { id } => {
            let result = shared
                .lock()
                .jobs()
                .get_result(&id)
                .unwrap_or(Value::Undefined);
            let echoed = raw.get("id").cloned().unwrap_or(Value::Undefined);
            Ok(other(vec![("id", echoed), ("result", result)]))
        }
        Command::Count { queue } => Ok(Response::Count(shared.lock().jobs().count(&queue, now))),
        Command::GetJobCounts { queue } => {
            Ok(Response::Counts(shared.lock().jobs().counts(&queue, now)))
        }
        // Everything else is routed by name (never the commands above).
        Command::Other { cmd, body } => {
            let cx = Ctx { shared, conn, now };
            routes::serve(&cx, &cmd, &body).await
        }
        // A command a newer core decodes that this broker does not serve yet.
        other => Err(routes::not_supported(other.name())),
    }
}

/// ACK: the job completes, removed when the request says so.
fn ack(
    shared: &Shared,
    id: &str,
    token: Option<&str>,
    result: Option<Value>,
    raw: &Value,
    now: f64,
) -> Result<Response, String> {
    let remove = raw.get("removeOnComplete").and_then(Value::as_bool) == Some(true);
    shared
        .lock()
        .ack(id, token, result, remove, now)
        .map_err(|e| e.to_string())?;
    Ok(Response::Finalized { applied: true })
}

/// PULLB's `count`: none returns no jobs, as bunqueue; one given must be in range.
fn pull_count(count: i64, raw: &Value) -> Result<usize, String> {
    if raw.get("count").is_none_or(Value::is_nullish) {
        return Ok(0);
    }
    range("count", count, 1, MAX_PULL_COUNT)?;
    Ok(count as usize)
}

/// FAIL: the job fails (or waits for its retry), and an applied failure keeps its stack.
fn fail(
    shared: &Shared,
    id: &str,
    token: Option<&str>,
    how: Failure,
    raw: &Value,
    now: f64,
) -> Result<Response, String> {
    let mut state = shared.lock();
    let applied = state.fail(id, token, how, now).map_err(|e| e.to_string())?;
    if applied {
        state.set_stacktrace(id, raw.get("stack"));
    }
    Ok(Response::Finalized { applied })
}

fn range(field: &str, v: i64, min: i64, max: i64) -> Result<(), String> {
    if v < min {
        return Err(format!("{field} must be at least {min}"));
    }
    if v > max {
        return Err(format!("{field} must be at most {max}"));
    }
    Ok(())
}

/// PUSH and PUSHB: dependencies checked for every item first (all or nothing), then admitted in
/// order; replies wait for a commit when an item is durable (or the write buffer is too full).
async fn push(
    shared: &Shared,
    queue: &str,
    mut jobs: Vec<JobSpec>,
    batch: bool,
) -> Result<Vec<String>, String> {
    let (admitted, refused) = {
        let mut state = shared.lock();
        check_dependencies(state.jobs(), &jobs, batch)?;
        // `Queue.add` with a parent (bunqueue's `validateParentLinkInputs`): every parent
        // checked before anything is added.
        let links = jobs
            .iter()
            .map(|j| {
                let o = &j.opts;
                state
                    .jobs()
                    .parent_to_link(o.job_id.as_deref(), o.parent_id.as_deref(), &j.data)
            })
            .collect::<Result<Vec<_>, String>>()?;
        // As in bunqueue's PUSHB, the jobs before the one a group refuses are added all the
        // same, and the reply is the error.
        let refused = group_refusal(state.jobs(), queue, &jobs);
        if let Some((i, _)) = &refused {
            jobs.truncate(*i);
        }
        (admit(&mut state, queue, jobs, links), refused)
    };
    let Admitted {
        ids,
        created,
        waiter,
    } = admitted;
    if let Some(w) = waiter {
        if let Err(e) = w.wait().await {
            // Only a durable push gets here with an error (a flow-control barrier covers
            // nothing). Its jobs are taken back, so the error means "not added".
            let kept = shared.lock().withdraw(&created);
            if !kept.is_empty() {
                eprintln!(
                    "autobatch-broker: {} jobs of a failed durable push were already pulled \
                     and stay in memory only",
                    kept.len()
                );
            }
            return Err(format!("Durable write failed, jobs not added: {e}"));
        }
    }
    match refused {
        Some((_, msg)) => Err(msg),
        None => Ok(ids),
    }
}

/// Refuses a push whose job depends on itself or on a job that does not exist (in a batch,
/// a job of the same batch counts, and the error names the item).
fn check_dependencies(known: &Jobs, jobs: &[JobSpec], batch: bool) -> Result<(), String> {
    let batch_ids: HashSet<&str> = jobs
        .iter()
        .filter_map(|j| j.opts.job_id.as_deref())
        .collect();
    let item = |i: usize, msg: String| {
        if batch {
            format!("jobs[{i}]: {msg}")
        } else {
            msg
        }
    };
    for (i, job) in jobs.iter().enumerate() {
        for dep in &job.opts.depends_on {
            if job.opts.job_id.as_deref() == Some(dep.as_str()) {
                return Err(item(i, format!("Job cannot depend on itself: {dep}")));
            }
            if !(known.exists(dep) || batch && batch_ids.contains(dep.as_str())) {
                return Err(item(i, format!("Dependency job not found: {dep}")));
            }
        }
    }
    Ok(())
}

/// The first job a group's `maxSize` refuses, with bunqueue's `Group <id> has reached its
/// maximum size of <n>`, counting this batch's earlier jobs of the group. Counted (a walk of
/// the queue per group) only when a job of the batch sets a maxSize.
fn group_refusal(known: &Jobs, queue: &str, jobs: &[JobSpec]) -> Option<(usize, String)> {
    if !jobs.iter().any(|j| j.opts.group_max_size.is_some()) {
        return None;
    }
    let mut pending: HashMap<&str, u64> = HashMap::new();
    for (i, job) in jobs.iter().enumerate() {
        let Some(group) = job.opts.group_id.as_deref() else {
            continue;
        };
        let queued = pending
            .entry(group)
            .or_insert_with(|| known.group_queued(queue, group));
        if let Some(max) = job.opts.group_max_size {
            if *queued >= max.max(0) as u64 {
                return Some((
                    i,
                    format!("Group {group} has reached its maximum size of {max}"),
                ));
            }
        }
        *queued += 1;
    }
    None
}

/// What a push added: every item's id, the jobs it created (a live custom id or unique key
/// returns an existing job, which is not this push's to take back), and the commit its reply
/// waits for, if any.
struct Admitted {
    ids: Vec<String>,
    created: Vec<String>,
    waiter: Option<SyncWaiter>,
}

/// Adds checked jobs in order, each linked to its parent when it names one.
fn admit(
    state: &mut State,
    queue: &str,
    jobs: Vec<JobSpec>,
    links: Vec<Option<String>>,
) -> Admitted {
    let durable = jobs.iter().any(|j| j.opts.is_durable());
    let before = state.jobs().recorded();
    let mut ids = Vec::with_capacity(jobs.len());
    let mut created = Vec::new();
    // One time for the whole push, as bunqueue's PUSHB takes: its jobs share `createdAt`, so a
    // listing orders them among themselves by id, however long the batch takes to admit.
    let now = now_ms();
    for (job, parent) in jobs.into_iter().zip(links) {
        let recorded = state.jobs().recorded();
        let seq = state.jobs().jobs_created();
        let id = state.push(queue, job, now);
        if durable && state.jobs().recorded() > recorded {
            created.push(id.clone());
        }
        // Only a job this push created links itself (a live custom id returns its job).
        if let Some(parent) = parent.filter(|_| state.jobs().jobs_created() > seq) {
            state.link_parent(&parent, &id);
        }
        ids.push(id);
    }
    // A durable reply covers this push's own rows: it waits for their commit and fails if
    // they were lost. A reply behind a long backlog only waits (flow control).
    let waiter = if durable {
        let covering = state.jobs().recorded() - before;
        state.jobs().sync(covering)
    } else if state.jobs().backlog() > MAX_BACKLOG {
        state.jobs().sync(0)
    } else {
        None
    };
    Admitted {
        ids,
        created,
        waiter,
    }
}

/// PULL (`count: None`) and PULLB, with the long-poll.
async fn pull(
    shared: &Shared,
    conn: &Conn,
    args: PullArgs,
    count: Option<usize>,
    raw: &Value,
) -> Result<Response, String> {
    let timeout = args.timeout.unwrap_or(0);
    range("timeout", timeout, 0, MAX_PULL_TIMEOUT)?;
    let group = crate::queue::limits::groups::pull_group(raw)?;
    let locked = args.owner.as_deref().is_some_and(|o| !o.is_empty());
    let detach = raw.get("detach").and_then(Value::as_bool) == Some(true);
    let spec = PullSpec {
        queue: &args.queue,
        count: count.unwrap_or(1),
        locked,
        lock_ttl: args.lock_ttl.unwrap_or(DEFAULT_LOCK_TTL),
        tie_to: (locked || !detach).then_some(conn.id),
    };
    let deadline = Instant::now() + Duration::from_millis(timeout as u64);
    let pulled = if spec.count == 0 {
        Vec::new()
    } else {
        long_poll(shared, &spec, group.as_ref(), deadline).await
    };
    // This pull's hold on the queue's signal is gone: an index left with nothing in it is freed.
    shared.lock().jobs().forget_queue_if_idle(spec.queue);
    Ok(pulled_reply(pulled, count.is_some(), locked))
}

/// Pulls until jobs come, `deadline` passes or the broker stops (nothing then), waking when
/// the queue is signalled or its next delayed job or group limit is due.
async fn long_poll(
    shared: &Shared,
    spec: &PullSpec<'_>,
    group: Option<&PullGroup>,
    deadline: Instant,
) -> Vec<Pulled> {
    let mut stop = shared.stop.clone();
    loop {
        let notify = shared.lock().jobs().notifier(spec.queue);
        let notified = notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let (pulled, next_due) = {
            let mut state = shared.lock();
            let now = now_ms();
            let pulled = state.pull_in_groups(spec, group, now);
            let next_due = state.next_look(spec.queue, now).map(|t| (t - now).max(0.0));
            (pulled, next_due)
        };
        let left = deadline.saturating_duration_since(Instant::now());
        if !pulled.is_empty() || left.is_zero() {
            return pulled;
        }
        let wait = match next_due {
            Some(ms) => left.min(Duration::from_millis(ms as u64 + 1)),
            None => left,
        };
        tokio::select! {
            _ = &mut notified => {}
            _ = tokio::time::sleep(wait) => {}
            // The broker is stopping: answer now (empty) so that shutdown need not wait for
            // the long-poll to run out.
            _ = stop.wait_for(|s| *s) => return Vec::new(),
        }
    }
}

/// PULL's reply (`job`, and `token` when locked) or PULLB's (`jobs`, and `tokens`).
fn pulled_reply(pulled: Vec<Pulled>, batch: bool, locked: bool) -> Response {
    let (jobs, tokens): (Vec<_>, Vec<_>) = pulled.into_iter().map(|p| (p.job, p.token)).unzip();
    match (batch, locked) {
        (false, true) => match (jobs.into_iter().next(), tokens.into_iter().next().flatten()) {
            (Some(job), token) => {
                let mut f = vec![("job", job)];
                f.extend(token.map(|t| ("token", Value::from(t))));
                other(f)
            }
            (None, _) => other(vec![("job", Value::Nil), ("token", Value::Nil)]),
        },
        (false, false) => other(vec![("job", jobs.into_iter().next().unwrap_or(Value::Nil))]),
        (true, true) => {
            let tokens = tokens
                .into_iter()
                .map(|t| Value::from(t.unwrap_or_default()))
                .collect();
            other(vec![
                ("jobs", Value::Array(jobs)),
                ("tokens", Value::Array(tokens)),
            ])
        }
        (true, false) => other(vec![("jobs", Value::Array(jobs))]),
    }
}

/// ACKB: lengths, then every lock, then each item; a missing job does not stop the others.
fn ack_batch(
    shared: &Shared,
    ids: Vec<String>,
    results: Option<Vec<Value>>,
    tokens: Option<Vec<String>>,
    raw: &Value,
    now: f64,
) -> Result<Response, String> {
    let removes = raw.get("removeOnCompletes").and_then(Value::as_array);
    for (name, len) in [
        ("tokens", tokens.as_ref().map(Vec::len)),
        ("results", results.as_ref().map(Vec::len)),
        ("removeOnCompletes", removes.map(<[Value]>::len)),
    ] {
        if len.is_some_and(|n| n != ids.len()) {
            return Err(format!("ACKB {name} length must match ids length"));
        }
    }
    let token = |i: usize| tokens.as_ref().map(|t| t[i].as_str());
    let mut state = shared.lock();
    for (i, id) in ids.iter().enumerate() {
        state
            .jobs()
            .check_lock(id, token(i))
            .map_err(|e| e.to_string())?;
    }
    let mut first_missing: Option<FinishError> = None;
    for (i, id) in ids.iter().enumerate() {
        let result = results
            .as_ref()
            .map(|r| r[i].clone())
            .filter(|r| !r.is_nullish());
        let remove = removes.is_some_and(|r| r[i].as_bool() == Some(true));
        if let Err(e) = state.ack(id, token(i), result, remove, now) {
            first_missing.get_or_insert(e);
        }
    }
    match first_missing {
        Some(e) => Err(e.to_string()),
        None => Ok(Response::AckedBatch {
            ignored_indices: Vec::new(),
            ignored_ids: Vec::new(),
        }),
    }
}
