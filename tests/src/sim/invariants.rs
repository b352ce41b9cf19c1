//! What must hold, and the records needed to check it.
//!
//! * [`Ledger`]: every operation a session returned an [`OpId`] for, its outcome, and the
//!   checks against the broker's insertion ledger.
//! * [`WireWatch`]: what the broker sees on each connection: batch sizes, PUSHBs of batched
//!   adds in flight per queue, commands in flight.

use std::collections::BTreeMap;
use std::time::Duration;

use autobatch_core::batch::OverflowPolicy;
use autobatch_core::session::{OpId, SessionConfig};
use autobatch_core::wire::{Command, Response, Value};
use autobatch_core::Error;

use super::broker::Gen;
use super::network::ConnId;

/// What an operation was.
#[derive(Debug, Clone)]
pub enum OpKind {
    /// `add`.
    Add {
        /// Queue.
        queue: String,
        /// Custom id.
        custom: Option<String>,
        /// Durable.
        durable: bool,
    },
    /// `add_bulk`.
    Bulk {
        /// Queue.
        queue: String,
        /// Custom ids, one per job.
        customs: Vec<Option<String>>,
    },
    /// `request`.
    Lookup,
}

/// One operation.
#[derive(Debug, Clone)]
pub struct OpRec {
    /// The workload's tag (in the job data).
    pub tag: i64,
    /// What it is.
    pub kind: OpKind,
    /// When it was made.
    pub created: Duration,
    /// The add was parked by backpressure (its wait is unbounded by design).
    pub parked: bool,
    /// `cancel` withdrew it: no outcome may come.
    pub withdrawn: bool,
    /// Adds buffered or parked in the session (all queues) when it was made.
    pub ahead: usize,
    /// Its outcome and when.
    pub done: Option<(Duration, Result<Response, Error>)>,
}

impl OpRec {
    /// A fresh, unresolved record of an operation made at `created`.
    pub fn new(tag: i64, kind: OpKind, created: Duration) -> OpRec {
        OpRec {
            tag,
            kind,
            created,
            parked: false,
            withdrawn: false,
            ahead: 0,
            done: None,
        }
    }
}

/// Every operation of every session.
#[derive(Debug, Default)]
pub struct Ledger {
    /// By `(client, op)`.
    pub ops: BTreeMap<(usize, OpId), OpRec>,
}

/// Counts over the outcomes, for the report.
#[derive(Debug, Clone, Default)]
pub struct OutcomeCounts {
    /// Adds (items) that succeeded.
    pub ok: u64,
    /// Adds that failed, by error kind.
    pub failed: BTreeMap<&'static str, u64>,
    /// K3 (fixed, so always 0): adds that waited behind buffered batches beyond the per-command bound
    /// (a batch gets its deadline only when it leaves the batcher).
    pub slow_behind_batches: u64,
    /// Custom-id jobs inserted again by a re-send after their first generation was lost in a
    /// restart or failed for good (the re-send recovers a lost job).
    pub custom_regenerations: u64,
    /// K2 (fixed, so always 0): custom-id jobs inserted again by a re-send after their first
    /// generation completed, which would run the job twice (the server deduplicates live jobs
    /// only, §7.2). A written custom-id add is looked up before it is written again.
    pub custom_rerun_after_completion: u64,
}

fn error_kind(e: &Error) -> &'static str {
    match e {
        Error::Invalid(_) => "invalid",
        Error::Closed => "closed",
        Error::Overflow => "overflow",
        Error::Server(_) => "server",
        Error::Protocol(_) => "protocol",
        Error::AuthFailed(_) => "auth",
        Error::ConnectionLost { .. } => "connection-lost",
        Error::Timeout { .. } => "timeout",
        _ => "other",
    }
}

/// Whether an error says the request was certainly not applied.
fn not_applied(e: &Error) -> bool {
    matches!(
        e,
        Error::Invalid(_)
            | Error::Closed
            | Error::Overflow
            | Error::ConnectionLost {
                maybe_applied: false
            }
            | Error::Timeout {
                maybe_applied: false
            }
    )
}

impl Ledger {
    /// Records an outcome; fails on a second outcome, an unknown op, or a withdrawn one.
    pub fn on_done(
        &mut self,
        client: usize,
        op: OpId,
        now: Duration,
        result: Result<Response, Error>,
    ) -> Result<(), String> {
        let Some(rec) = self.ops.get_mut(&(client, op)) else {
            return Err(format!("client {client}: Done for unknown op {}", op.get()));
        };
        if rec.withdrawn {
            return Err(format!(
                "client {client}: Done for op {} (tag {}) that cancel() withdrew: {result:?}",
                op.get(),
                rec.tag
            ));
        }
        if let Some((_, first)) = &rec.done {
            return Err(format!(
                "client {client}: second Done for op {} (tag {}): first {first:?}, then {result:?}",
                op.get(),
                rec.tag
            ));
        }
        rec.done = Some((now, result));
        Ok(())
    }

    /// The final checks against the broker's insertion ledger. `lossless`: no fault was injected.
    pub fn check_final(
        &self,
        gens: &[Gen],
        configs: &[SessionConfig],
        bounds: &[Duration],
        lossless: bool,
        counts: &mut OutcomeCounts,
    ) -> Result<(), String> {
        let mut by_tag: BTreeMap<(i64, i64), Vec<&Gen>> = BTreeMap::new();
        for g in gens {
            if let Some(t) = g.tag {
                by_tag.entry(t).or_default().push(g);
            }
        }
        let live_id = |id: &str| gens.iter().any(|g| g.id == id);
        for (&(client, op), rec) in &self.ops {
            let who = format!("client {client} op {} (tag {})", op.get(), rec.tag);
            let items: Vec<(i64, Option<String>)> = match &rec.kind {
                OpKind::Add { custom, .. } => vec![(0, custom.clone())],
                OpKind::Bulk { customs, .. } => customs
                    .iter()
                    .enumerate()
                    .map(|(i, c)| (i as i64, c.clone()))
                    .collect(),
                OpKind::Lookup => Vec::new(),
            };
            // Generations per item: never two of one plain add; custom ids only one live at once.
            for (i, custom) in &items {
                let g = by_tag.get(&(rec.tag, *i)).map_or(&[][..], Vec::as_slice);
                if custom.is_none() && g.len() > 1 {
                    return Err(format!(
                        "{who} item {i}: a plain add was inserted {} times: {:?}",
                        g.len(),
                        g.iter().map(|g| &g.id).collect::<Vec<_>>()
                    ));
                }
                for w in g.windows(2) {
                    match w[0].ended {
                        Some(end) if end <= w[1].inserted => {
                            if w[0].completed {
                                counts.custom_rerun_after_completion += 1;
                                return Err(format!(
                                    "{who} item {i} ({:?}): added again after its first copy completed, so it runs twice: {:?}",
                                    rec.kind, w
                                ));
                            } else {
                                counts.custom_regenerations += 1;
                            }
                        }
                        _ => {
                            return Err(format!(
                                "{who} item {i}: two live generations of one add: {:?}",
                                w
                            ))
                        }
                    }
                }
            }
            if rec.withdrawn {
                if by_tag.contains_key(&(rec.tag, 0)) {
                    return Err(format!("{who}: withdrawn by cancel() but inserted"));
                }
                continue;
            }
            let Some((at, result)) = &rec.done else {
                return Err(format!("{who}: never resolved ({:?})", rec.kind));
            };
            let bound = bounds[client];
            let took = *at - rec.created;
            if !rec.parked && took > bound {
                return Err(format!(
                    "{who}: resolved {:?} after it was made ({} adds ahead), beyond the bound \
                     {bound:?} (timeout {:?}): {result:?}",
                    took, rec.ahead, configs[client].command_timeout
                ));
            }
            if matches!(rec.kind, OpKind::Lookup) {
                continue;
            }
            let overflow_policy = configs[client]
                .batching
                .as_ref()
                .map(|b| b.overflow)
                .unwrap_or_default();
            match result {
                Ok(Response::Pushed(id)) => {
                    counts.ok += 1;
                    let (_, custom) = &items[0];
                    match custom {
                        Some(c) => {
                            if id != c {
                                return Err(format!("{who}: custom id {c} came back as {id}"));
                            }
                            if !live_id(id) {
                                return Err(format!("{who}: pushed {id} is not in the broker"));
                            }
                        }
                        None => {
                            let g = by_tag.get(&(rec.tag, 0)).map_or(&[][..], Vec::as_slice);
                            if g.len() != 1 || g[0].id != *id {
                                return Err(format!(
                                    "{who}: reported pushed as {id} but the broker holds {:?}",
                                    g.iter().map(|g| &g.id).collect::<Vec<_>>()
                                ));
                            }
                        }
                    }
                }
                Ok(Response::PushedBatch(ids)) => {
                    counts.ok += ids.len() as u64;
                    if ids.len() != items.len() {
                        return Err(format!(
                            "{who}: bulk of {} came back with {} ids",
                            items.len(),
                            ids.len()
                        ));
                    }
                    for ((i, custom), id) in items.iter().zip(ids) {
                        let g = by_tag.get(&(rec.tag, *i)).map_or(&[][..], Vec::as_slice);
                        let ok = match custom {
                            Some(c) => id == c && live_id(id),
                            None => g.len() == 1 && g[0].id == *id,
                        };
                        if !ok {
                            return Err(format!("{who} item {i}: reported {id}, broker has {g:?}"));
                        }
                    }
                }
                Ok(other) => return Err(format!("{who}: an add answered with {other:?}")),
                Err(e) => {
                    *counts.failed.entry(error_kind(e)).or_default() += items.len() as u64;
                    if not_applied(e) {
                        for (i, _) in &items {
                            if let Some(g) = by_tag.get(&(rec.tag, *i)) {
                                return Err(format!(
                                    "{who}: failed with {e:?} (not applied) yet inserted: {g:?}"
                                ));
                            }
                        }
                    }
                    if *e == Error::Overflow
                        && overflow_policy == OverflowPolicy::Backpressure
                        && matches!(rec.kind, OpKind::Add { .. })
                    {
                        return Err(format!(
                            "{who}: overflow error under Backpressure (an add was dropped)"
                        ));
                    }
                    let legit_in_lossless = matches!(
                        e,
                        Error::Overflow
                            | Error::Timeout {
                                maybe_applied: false
                            }
                    );
                    if lossless && !legit_in_lossless {
                        return Err(format!("{who}: failed with {e:?} in a run without faults"));
                    }
                }
            }
        }
        Ok(())
    }
}

/// One request the broker has read and not answered.
#[derive(Debug, Clone)]
struct Open {
    /// The request's reqId.
    req_id: Value,
    /// A PUSHB (of any kind).
    pushb: bool,
    /// `Some(queue)` for a PUSHB of batched adds.
    batched: Option<String>,
    /// When the client stops waiting for it at the latest (written + its timeout).
    gives_up: Duration,
}

/// The broker's view of each connection, checked against the client's limits.
#[derive(Debug, Default)]
pub struct WireWatch {
    open: BTreeMap<ConnId, BTreeMap<String, Open>>,
    /// Largest batched-add PUSHB seen.
    pub max_batch_seen: usize,
    /// Most batched-add PUSHBs of one queue seen in flight on one connection.
    pub max_pushb_in_flight_seen: usize,
    /// Most commands seen in flight on one connection.
    pub max_commands_seen: usize,
}

/// Whether a PUSHB carries batched adds (tag kind 0) rather than a bulk add.
fn is_batched(jobs: &[autobatch_core::wire::JobSpec]) -> bool {
    jobs.first()
        .and_then(|j| j.data.expanded().ok()?.get("k").cloned())
        .is_some_and(|k| k.as_str() == Some("a"))
}

impl WireWatch {
    /// A request arrived at the broker; `written` is when the client wrote it.
    pub fn on_request(
        &mut self,
        conn: ConnId,
        req_id: &Value,
        cmd: &Command,
        written: Duration,
        now: Duration,
        c: &SessionConfig,
    ) -> Result<(), String> {
        let open = self.open.entry(conn).or_default();
        open.retain(|_, o| o.gives_up > now);
        // The client gives up `command_timeout` after writing at the latest. (A long-poll gets
        // its poll time on top, minus however long it waited to be written: not knowable here,
        // so long-polls are counted conservatively, as plain commands.)
        let gives_up = written + c.command_timeout;
        let mut batched = None;
        if let Command::PushB { queue, jobs } = cmd {
            if is_batched(jobs) {
                if jobs.iter().any(|j| {
                    let data = j.data.expanded().unwrap_or_default();
                    !matches!(data.get("k").and_then(Value::as_str), Some("a"))
                }) {
                    return Err("a PUSHB mixes batched adds with other jobs".into());
                }
                let b = c
                    .batching
                    .as_ref()
                    .ok_or("a batched PUSHB with batching off")?;
                self.max_batch_seen = self.max_batch_seen.max(jobs.len());
                if jobs.len() > b.max_batch {
                    return Err(format!(
                        "PUSHB of {} batched adds > max_batch {}",
                        jobs.len(),
                        b.max_batch
                    ));
                }
                let n = open
                    .values()
                    .filter(|o| o.batched.as_deref() == Some(queue.as_str()))
                    .count()
                    + 1;
                self.max_pushb_in_flight_seen = self.max_pushb_in_flight_seen.max(n);
                if n > b.max_in_flight {
                    return Err(format!(
                        "{n} PUSHBs of batched adds in flight on queue {queue} > max_in_flight {}",
                        b.max_in_flight
                    ));
                }
                batched = Some(queue.clone());
            }
        }
        let key = format!("{req_id:?}");
        if open.contains_key(&key) {
            return Err(format!("reqId {key} reused while in flight"));
        }
        open.insert(
            key,
            Open {
                req_id: req_id.clone(),
                pushb: matches!(cmd, Command::PushB { .. }),
                batched,
                gives_up,
            },
        );
        self.max_commands_seen = self.max_commands_seen.max(open.len());
        if open.len() > c.max_in_flight_commands {
            return Err(format!(
                "{} commands in flight > max_in_flight_commands {}",
                open.len(),
                c.max_in_flight_commands
            ));
        }
        Ok(())
    }

    /// The reqId of a PUSHB read on `conn` and not answered yet, if any.
    pub fn open_pushb(&self, conn: ConnId) -> Option<Value> {
        self.open
            .get(&conn)?
            .values()
            .find(|o| o.pushb)
            .map(|o| o.req_id.clone())
    }

    /// The broker answered (or dropped) a request.
    pub fn on_answer(&mut self, conn: ConnId, req_id: &Value) {
        if let Some(open) = self.open.get_mut(&conn) {
            open.remove(&format!("{req_id:?}"));
        }
    }

    /// The connection is gone.
    pub fn on_close(&mut self, conn: ConnId) {
        self.open.remove(&conn);
    }
}
