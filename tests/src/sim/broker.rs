//! A small bunqueue-compatible broker model over the core's wire types.
//!
//! What it keeps from bunqueue 2.9.5 (protocol reference §3, §4.4, §6, §7.2, §7.3):
//!
//! * custom ids are the job id and deduplicate while the job lives (globally across queues);
//! * PUSHB validation is all-or-nothing (`jobs[i]: …`, nothing inserted); an error during
//!   admission keeps the accepted prefix and names no index;
//! * PULLB with an owner hands out lock tokens and ties the jobs to the connection; a closed
//!   connection puts them back to waiting; long-polls wait for a job or their timeout;
//! * ACKB checks every lock first (one bad token: nothing applied), then applies each item; a
//!   missing job fails the reply but the others are applied;
//! * with persistence, durable jobs survive a restart at once, buffered ones once their 10 ms
//!   write-buffer flush has passed; without it, a restart loses everything.
//!
//! Every job ever inserted is kept in a ledger ([`Broker::gens`]) with the tag the workload
//! put in its data, so the checks can tell which operation produced which job.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use autobatch_core::ops::{ServerStats, Stats};
use autobatch_core::wire::server::{encode_error, DecodeCommand, EncodeResponse, ServeOperation};
use autobatch_core::wire::{write_frame, Command, FrameDecoder, Job, JobSpec, Response, Value};

use super::network::ConnId;
use super::Rng;

/// The write buffer flush period of bunqueue's SQLite mode.
const FLUSH: Duration = Duration::from_millis(10);

/// One generation of a job: one insertion.
#[derive(Debug, Clone)]
pub struct Gen {
    /// Job id.
    pub id: String,
    /// `(workload tag, index in a bulk add)` read from the job data.
    pub tag: Option<(i64, i64)>,
    /// When it was inserted.
    pub inserted: Duration,
    /// When it stopped being live (completed, failed for good, or lost in a restart).
    pub ended: Option<Duration>,
    /// Lost in a restart.
    pub lost: bool,
    /// Completed (by an ACK).
    pub completed: bool,
}

#[derive(Debug, Clone, PartialEq)]
enum St {
    Waiting,
    Active { conn: ConnId, token: String },
    Completed,
    Failed,
}

#[derive(Debug, Clone)]
struct JobRec {
    queue: String,
    name: String,
    data: Value,
    st: St,
    attempts: i64,
    max_attempts: i64,
    durable: bool,
    inserted: Duration,
    gen: usize,
}

impl JobRec {
    fn live(&self) -> bool {
        matches!(self.st, St::Waiting | St::Active { .. })
    }
}

#[derive(Debug)]
struct BConn {
    client: usize,
    frames: FrameDecoder,
    authed: bool,
}

/// A held long-poll.
#[derive(Debug)]
struct Waiter {
    conn: ConnId,
    req_id: Value,
    cmd: Command,
    expires: Duration,
}

/// Fault probabilities the broker applies when it handles a request.
#[derive(Debug, Clone, Default)]
pub struct BrokerFaults {
    /// "Internal server error" (a PUSHB may keep a prefix).
    pub internal_error: f64,
    /// No reply at all (applied or not).
    pub drop_reply: f64,
    /// A PUSHB refused for one item, `jobs[i]: …`, nothing inserted.
    pub invalid_item: f64,
    /// A durable PUSH whose commit fails (disk full): refused as autobatch-broker refuses it,
    /// `Durable write failed, …`, with nothing inserted.
    pub commit_fail: f64,
}

/// Counts of the faults the broker injected.
#[derive(Debug, Clone, Default)]
pub struct BrokerFaultCounts {
    /// Internal errors.
    pub internal_errors: u64,
    /// ... of which a PUSHB kept a non-empty prefix.
    pub partial_pushb: u64,
    /// Replies dropped after applying.
    pub dropped_applied: u64,
    /// Replies dropped without applying.
    pub dropped_unapplied: u64,
    /// `jobs[i]` refusals.
    pub invalid_items: u64,
    /// Durable pushes refused because their commit failed.
    pub failed_commits: u64,
}

/// What handling a request gave.
#[derive(Debug)]
pub enum Handled {
    /// A reply frame to send.
    Reply(Vec<u8>),
    /// No reply (a dropped reply, or the connection is gone).
    NoReply,
    /// A long-poll was parked until `expires`.
    Parked(Duration),
}

/// A request read off a connection.
#[derive(Debug, Clone)]
pub struct Request {
    /// Its reqId as sent.
    pub req_id: Value,
    /// The command.
    pub cmd: Command,
}

/// The broker model.
#[derive(Debug)]
pub struct Broker {
    token: Option<String>,
    persistent: bool,
    faults: BrokerFaults,
    /// Whether it accepts connections.
    pub up: bool,
    jobs: BTreeMap<String, JobRec>,
    waiting: BTreeMap<String, VecDeque<String>>,
    conns: BTreeMap<ConnId, BConn>,
    waiters: Vec<Waiter>,
    next_id: u64,
    next_token: u64,
    /// Every insertion ever.
    pub gens: Vec<Gen>,
    /// `(client, job id)` of every ACK that completed a job.
    pub acks_applied: BTreeSet<(usize, String)>,
    /// `(client, job id)` of every FAIL that was applied.
    pub fails_applied: BTreeSet<(usize, String)>,
    /// Faults injected.
    pub counts: BrokerFaultCounts,
    /// When it last started: `Stats` answers its uptime, as bunqueue does.
    started: Duration,
}

fn tag_of(data: &Value) -> Option<(i64, i64)> {
    // Job data arrives kept encoded (a payload): look into its tree.
    let data = data.expanded().ok()?;
    let t = data.get("t")?.as_i64()?;
    Some((t, data.get("i").and_then(Value::as_i64).unwrap_or(0)))
}

fn frame(f: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut out = Vec::new();
    write_frame(&mut out, f).expect("broker replies are small");
    out
}

impl Broker {
    /// A broker; `token` turns auth on.
    pub fn new(token: Option<String>, persistent: bool, faults: BrokerFaults) -> Broker {
        Broker {
            token,
            persistent,
            faults,
            up: true,
            jobs: BTreeMap::new(),
            waiting: BTreeMap::new(),
            conns: BTreeMap::new(),
            waiters: Vec::new(),
            next_id: 1,
            next_token: 1,
            gens: Vec::new(),
            acks_applied: BTreeSet::new(),
            fails_applied: BTreeSet::new(),
            counts: BrokerFaultCounts::default(),
            started: Duration::ZERO,
        }
    }

    /// A client connected.
    pub fn open(&mut self, conn: ConnId, client: usize) {
        self.conns.insert(
            conn,
            BConn {
                client,
                frames: FrameDecoder::new(),
                authed: self.token.is_none(),
            },
        );
    }

    /// Whether the broker still serves `conn`.
    pub fn has_conn(&self, conn: ConnId) -> bool {
        self.conns.contains_key(&conn)
    }

    /// The client of `conn`.
    pub fn client_of(&self, conn: ConnId) -> Option<usize> {
        self.conns.get(&conn).map(|c| c.client)
    }

    /// Bytes held for `conn` that do not form a whole frame yet.
    pub fn partial(&self, conn: ConnId) -> usize {
        self.conns.get(&conn).map_or(0, |c| c.frames.buffered())
    }

    /// The connection closed: its jobs go back to waiting, its long-polls are dropped (§4.4).
    pub fn close_conn(&mut self, conn: ConnId) {
        if self.conns.remove(&conn).is_none() {
            return;
        }
        self.waiters.retain(|w| w.conn != conn);
        let mut back: Vec<(usize, String, String)> = Vec::new();
        for (id, j) in self.jobs.iter_mut() {
            if matches!(&j.st, St::Active { conn: c, .. } if *c == conn) {
                j.st = St::Waiting;
                back.push((j.gen, j.queue.clone(), id.clone()));
            }
        }
        back.sort();
        for (_, q, id) in back.into_iter().rev() {
            self.waiting.entry(q).or_default().push_front(id);
        }
    }

    /// Bytes arrived on `conn`: the complete requests, in order. A frame the real server would
    /// refuse is an error here: our client must never send one.
    pub fn receive(&mut self, conn: ConnId, bytes: &[u8]) -> Result<Vec<Request>, String> {
        let Some(c) = self.conns.get_mut(&conn) else {
            return Ok(Vec::new());
        };
        c.frames.extend(bytes);
        let mut out = Vec::new();
        loop {
            match c.frames.next_frame() {
                Ok(Some(body)) => {
                    let v = Value::decode(&body)
                        .map_err(|e| format!("client sent an undecodable frame: {e}"))?;
                    let (req_id, cmd) = Command::decode(&v);
                    let cmd = cmd.map_err(|e| format!("client sent a bad command: {e}: {v:?}"))?;
                    out.push(Request { req_id, cmd });
                }
                Ok(None) => return Ok(out),
                Err(e) => return Err(format!("client sent a bad frame: {e}")),
            }
        }
    }

    /// Handles one request at `now`.
    pub fn handle(&mut self, rng: &mut Rng, conn: ConnId, req: Request, now: Duration) -> Handled {
        let Some(c) = self.conns.get_mut(&conn) else {
            return Handled::NoReply;
        };
        let client = c.client;
        let Request { req_id, cmd } = req;
        if let Command::Auth { token } = &cmd {
            if rng.chance(self.faults.internal_error) {
                self.counts.internal_errors += 1;
                return Handled::Reply(frame(|b| {
                    encode_error(&req_id, "Internal server error", b)
                }));
            }
            if self.token.as_ref() == Some(token) {
                c.authed = true;
                return Handled::Reply(frame(|b| Response::Done.encode(&req_id, b)));
            }
            return Handled::Reply(frame(|b| encode_error(&req_id, "Invalid token", b)));
        }
        if !c.authed {
            return Handled::Reply(frame(|b| encode_error(&req_id, "Not authenticated", b)));
        }
        // Faults.
        if rng.chance(self.faults.drop_reply) {
            if rng.chance(0.5) {
                self.counts.dropped_applied += 1;
                let _ = self.apply(rng, conn, client, &req_id, &cmd, now);
            } else {
                self.counts.dropped_unapplied += 1;
            }
            return Handled::NoReply;
        }
        if let Command::Push { job, .. } = &cmd {
            if job.opts.is_durable() && rng.chance(self.faults.commit_fail) {
                self.counts.failed_commits += 1;
                let msg = "Durable write failed, jobs not added: the commit failed: disk full";
                return Handled::Reply(frame(|b| encode_error(&req_id, msg, b)));
            }
        }
        if let Command::PushB { queue, jobs } = &cmd {
            if !jobs.is_empty() && rng.chance(self.faults.invalid_item) {
                self.counts.invalid_items += 1;
                let i = rng.below(jobs.len() as u64);
                let msg = format!("jobs[{i}]: priority must be an integer");
                return Handled::Reply(frame(|b| encode_error(&req_id, &msg, b)));
            }
            if rng.chance(self.faults.internal_error) {
                self.counts.internal_errors += 1;
                let keep = rng.below(jobs.len() as u64 + 1) as usize;
                if keep > 0 {
                    self.counts.partial_pushb += 1;
                }
                for job in &jobs[..keep] {
                    self.insert(queue, job, now);
                }
                return Handled::Reply(frame(|b| {
                    encode_error(&req_id, "Internal server error", b)
                }));
            }
        } else if !matches!(cmd, Command::Ping) && rng.chance(self.faults.internal_error) {
            self.counts.internal_errors += 1;
            return Handled::Reply(frame(|b| encode_error(&req_id, "Internal server error", b)));
        }
        self.apply(rng, conn, client, &req_id, &cmd, now)
    }

    fn apply(
        &mut self,
        _rng: &mut Rng,
        conn: ConnId,
        client: usize,
        req_id: &Value,
        cmd: &Command,
        now: Duration,
    ) -> Handled {
        let reply = |r: Response| Handled::Reply(frame(|b| r.encode_for(cmd, req_id, b)));
        let error = |m: &str| Handled::Reply(frame(|b| encode_error(req_id, m, b)));
        match cmd {
            Command::Hello => reply(Response::Hello {
                protocol_version: 3,
                server: "sim".into(),
                version: "2.9.5".into(),
            }),
            Command::Auth { .. } => reply(Response::Done),
            Command::Ping => reply(Response::Pong {
                time: now.as_secs_f64() * 1000.0,
            }),
            Command::Push { queue, job } => reply(Response::Pushed(self.insert(queue, job, now))),
            Command::PushB { queue, jobs } => {
                let ids = jobs.iter().map(|j| self.insert(queue, j, now)).collect();
                reply(Response::PushedBatch(ids))
            }
            Command::PullB { args, count } => {
                let jobs = self.take(conn, &args.queue, *count as usize, args.owner.is_some());
                if jobs.is_empty() && args.timeout.unwrap_or(0) > 0 {
                    let expires = now + Duration::from_millis(args.timeout.unwrap_or(0) as u64);
                    self.waiters.push(Waiter {
                        conn,
                        req_id: req_id.clone(),
                        cmd: cmd.clone(),
                        expires,
                    });
                    return Handled::Parked(expires);
                }
                reply(pulled(jobs))
            }
            Command::AckB {
                ids,
                results: _,
                tokens,
                ..
            } => {
                let tokens = tokens.clone().unwrap_or_default();
                // Locks first, for every item: one problem and nothing is applied.
                for (i, id) in ids.iter().enumerate() {
                    if let Some(St::Active { token, .. }) = self.jobs.get(id).map(|j| &j.st) {
                        let sent = tokens.get(i).map(String::as_str).unwrap_or("");
                        if sent.is_empty() {
                            return error(&format!("Lock token required for job {id}"));
                        }
                        if sent != token {
                            return error(&format!("Invalid or expired lock token for job {id}"));
                        }
                    }
                }
                let mut missing = None;
                for id in ids {
                    if !self.finish(client, id, true, now) && missing.is_none() {
                        missing = Some(id.clone());
                    }
                }
                match missing {
                    Some(id) => error(&format!("Job not found or not in processing state: {id}")),
                    None => reply(Response::AckedBatch {
                        ignored_indices: Vec::new(),
                        ignored_ids: Vec::new(),
                    }),
                }
            }
            Command::Fail {
                id,
                token,
                unrecoverable,
                ..
            } => {
                if let Some(St::Active { token: held, .. }) = self.jobs.get(id).map(|j| &j.st) {
                    match token {
                        None => return error(&format!("Lock token required for job {id}")),
                        Some(t) if t != held => {
                            return error(&format!("Invalid or expired lock token for job {id}"))
                        }
                        _ => {}
                    }
                }
                let Some(j) = self
                    .jobs
                    .get_mut(id)
                    .filter(|j| matches!(j.st, St::Active { .. }))
                else {
                    return error(&format!("Job not found or not in processing state: {id}"));
                };
                j.attempts += 1;
                self.fails_applied.insert((client, id.clone()));
                if *unrecoverable || j.attempts >= j.max_attempts {
                    j.st = St::Failed;
                    let g = j.gen;
                    self.gens[g].ended = Some(now);
                } else {
                    j.st = St::Waiting;
                    let q = j.queue.clone();
                    self.waiting.entry(q).or_default().push_back(id.clone());
                }
                reply(Response::Finalized { applied: true })
            }
            Command::GetState { id } => {
                let st = match self.jobs.get(id).map(|j| &j.st) {
                    None => "unknown",
                    Some(St::Waiting) => "waiting",
                    Some(St::Active { .. }) => "active",
                    Some(St::Completed) => "completed",
                    Some(St::Failed) => "failed",
                };
                reply(Response::State(st.into()))
            }
            Command::Count { queue } => reply(Response::Count(
                self.waiting.get(queue).map_or(0, |w| w.len()) as u64,
            )),
            Command::GetJob { id } => match self.jobs.get(id) {
                Some(j) => reply(Response::Job(Box::new(self.job_value(id, j)))),
                None => error("Job not found"),
            },
            Command::Other { cmd, .. } if cmd == "Stats" => {
                let mut stats = ServerStats::default();
                stats.uptime = now.saturating_sub(self.started).as_secs_f64() * 1000.0;
                reply(Response::Other(Stats::reply_body(&stats)))
            }
            other => error(&format!("Unknown command: {}", other.name())),
        }
    }

    fn job_value(&self, id: &str, j: &JobRec) -> Job {
        let mut job = Job::new(id, j.queue.clone(), j.name.clone(), j.data.clone());
        job.attempts = j.attempts;
        job.max_attempts = j.max_attempts;
        job.created_at = j.inserted.as_secs_f64() * 1000.0;
        job.run_at = j.inserted.as_secs_f64() * 1000.0;
        job
    }

    /// Completes (ACK) an active job; false when it is not active.
    fn finish(&mut self, client: usize, id: &str, _ok: bool, now: Duration) -> bool {
        let Some(j) = self.jobs.get_mut(id) else {
            return false;
        };
        if !matches!(j.st, St::Active { .. }) {
            return false;
        }
        j.st = St::Completed;
        let g = j.gen;
        self.gens[g].ended = Some(now);
        self.gens[g].completed = true;
        self.acks_applied.insert((client, id.to_owned()));
        true
    }

    /// Inserts one job (or finds the live one with its custom id); returns its id.
    fn insert(&mut self, queue: &str, job: &JobSpec, now: Duration) -> String {
        let custom = job.opts.job_id.clone().filter(|c| !c.is_empty());
        if let Some(c) = &custom {
            if self.jobs.get(c).is_some_and(JobRec::live) {
                return c.clone();
            }
        }
        let id = custom.unwrap_or_else(|| {
            let id = format!("j{}", self.next_id);
            self.next_id += 1;
            id
        });
        self.gens.push(Gen {
            id: id.clone(),
            tag: tag_of(&job.data),
            inserted: now,
            ended: None,
            lost: false,
            completed: false,
        });
        self.jobs.insert(
            id.clone(),
            JobRec {
                queue: queue.to_owned(),
                name: job.name.clone(),
                data: job.data.clone(),
                st: St::Waiting,
                attempts: 0,
                max_attempts: job.opts.attempts.unwrap_or(3),
                durable: job.opts.is_durable(),
                inserted: now,
                gen: self.gens.len() - 1,
            },
        );
        self.waiting
            .entry(queue.to_owned())
            .or_default()
            .push_back(id.clone());
        id
    }

    fn take(&mut self, conn: ConnId, queue: &str, count: usize, owner: bool) -> Vec<(Job, String)> {
        let mut out = Vec::new();
        while out.len() < count {
            let Some(id) = self.waiting.get_mut(queue).and_then(VecDeque::pop_front) else {
                break;
            };
            let Some(j) = self.jobs.get(&id) else {
                continue;
            };
            if j.st != St::Waiting {
                continue;
            }
            let job = self.job_value(&id, j);
            let token = if owner {
                self.next_token += 1;
                format!("tok{}", self.next_token)
            } else {
                String::new()
            };
            if let Some(j) = self.jobs.get_mut(&id) {
                j.st = St::Active {
                    conn,
                    token: token.clone(),
                };
            }
            out.push((job, token));
        }
        out
    }

    /// Serves held long-polls that jobs are now waiting for, and those whose time is up.
    pub fn serve_waiters(&mut self, now: Duration) -> Vec<(ConnId, Value, Vec<u8>)> {
        let mut out = Vec::new();
        let waiters = std::mem::take(&mut self.waiters);
        for w in waiters {
            let Command::PullB { args, count } = &w.cmd else {
                continue;
            };
            let has_jobs = self.waiting.get(&args.queue).is_some_and(|q| !q.is_empty());
            if has_jobs || now >= w.expires {
                let jobs = self.take(w.conn, &args.queue, *count as usize, args.owner.is_some());
                let bytes = frame(|b| pulled(jobs).encode_for(&w.cmd, &w.req_id, b));
                out.push((w.conn, w.req_id.clone(), bytes));
            } else {
                self.waiters.push(w);
            }
        }
        out
    }

    /// The process dies: every connection is gone; memory is lost unless persisted. Returns the
    /// connections that were open.
    pub fn restart(&mut self, now: Duration) -> Vec<ConnId> {
        self.started = now;
        let conns: Vec<ConnId> = self.conns.keys().copied().collect();
        self.conns.clear();
        self.waiters.clear();
        let mut keep: Vec<(usize, String)> = Vec::new();
        let mut lost = Vec::new();
        for (id, j) in &self.jobs {
            let persisted =
                self.persistent && (j.durable || now.saturating_sub(j.inserted) >= FLUSH);
            if persisted {
                if j.live() {
                    keep.push((j.gen, id.clone()));
                }
            } else {
                lost.push(id.clone());
            }
        }
        for id in lost {
            if let Some(j) = self.jobs.remove(&id) {
                if j.live() {
                    self.gens[j.gen].lost = true;
                    self.gens[j.gen].ended = Some(now);
                }
            }
        }
        keep.sort();
        self.waiting.clear();
        for (_, id) in keep {
            if let Some(j) = self.jobs.get_mut(&id) {
                j.st = St::Waiting;
                self.waiting
                    .entry(j.queue.clone())
                    .or_default()
                    .push_back(id);
            }
        }
        conns
    }

    /// Live jobs right now.
    pub fn live_jobs(&self) -> usize {
        self.jobs.values().filter(|j| j.live()).count()
    }
}

fn pulled(jobs: Vec<(Job, String)>) -> Response {
    let (jobs, tokens) = jobs.into_iter().unzip();
    Response::PulledBatch { jobs, tokens }
}
