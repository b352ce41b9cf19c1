//! The connection state machine: commands, replies, the pipelining window, timeouts,
//! reconnects. The producer and worker halves live in their own modules and plug in here.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::time::{Duration, Instant};

use crate::batch::BatchId;
use crate::error::Error;
use crate::wire::{write_frame, Command, FrameError, Incoming, Reply, Response, Value};

use super::config::{ConfigError, SessionConfig};
use super::producer::{AddItem, Producers};
use super::rng::SplitMix64;
use super::stats::SessionStats;
use super::worker::{AckItem, WorkerState};

/// Identifies one operation (an add, a bulk add, a lookup) to the caller. Its outcome comes
/// back as exactly one [`Event::Done`] with the same id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpId(pub(crate) u64);

impl OpId {
    /// The raw number, for logs.
    pub fn get(self) -> u64 {
        self.0
    }
}

/// What the session asks of its driver, or reports to it. Drain with [`Session::poll_event`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Event {
    /// Open a connection now, then call [`Session::handle_connected`] or
    /// [`Session::handle_connect_failed`].
    Connect,
    /// Close the socket now (the session already counts it as gone: feed it no more bytes from
    /// it and do not call [`Session::handle_disconnected`] for it).
    Disconnect,
    /// The outcome of an operation: an add gives [`Response::Pushed`], a bulk add
    /// [`Response::PushedBatch`], a lookup its typed response.
    Done {
        /// The operation.
        op: OpId,
        /// Its outcome.
        result: Result<Response, Error>,
    },
    /// A worker job to process. Report the end with [`Session::complete_job`] or
    /// [`Session::fail_job`].
    Job {
        /// The job.
        job: crate::wire::Job,
    },
    /// The server's answer to a worker's completion or failure of a job: `Ok(true)` applied,
    /// `Ok(false)` the server had already finalised it (it timed out, for example).
    JobSettled {
        /// Job id.
        id: String,
        /// Outcome.
        result: Result<bool, Error>,
    },
    /// [`Session::close`] finished: everything was flushed and answered.
    Closed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Conn {
    /// Waiting to reconnect at the given time.
    Disconnected(Instant),
    /// [`Event::Connect`] was emitted; waiting for the driver.
    Connecting,
    /// Connected, Auth written, waiting for its reply: nothing else goes out yet.
    Authenticating,
    /// Connected and usable.
    Ready,
    /// Closed for good.
    Closed,
}

/// Who is waiting on a command, and what to do with its reply.
#[derive(Debug)]
pub(super) enum Origin {
    /// A PUSHB of batched adds: `ops[i]` is `jobs[i]`. A re-sent or split batch keeps its
    /// `batch`, so its in-flight slot stays taken until it is answered.
    Adds {
        queue: usize,
        batch: Option<BatchId>,
        ops: Vec<OpId>,
    },
    /// A single PUSH (durable, or batching off).
    Push(OpId),
    /// `add_bulk`: one PUSHB, one outcome.
    Bulk(OpId),
    /// A read-only request: safe to re-send.
    Request(OpId),
    Auth,
    Ping,
    Pull,
    /// An ACKB of worker completions.
    Acks {
        batch: Option<BatchId>,
        attempt: u32,
    },
    /// A worker's FAIL.
    Fail,
    /// A GetState that checks whether an ACK of an ACKB the server refused took effect.
    AckCheck,
    /// A worker's JobHeartbeatB, renewing the locks of the jobs it holds.
    Heartbeat,
}

#[derive(Debug)]
pub(super) struct Queued {
    pub(super) cmd: Command,
    pub(super) origin: Origin,
    pub(super) deadline: Instant,
    /// Written at least once (a re-send waiting in `outgoing` may already have been applied).
    pub(super) written: bool,
}

/// One client connection to a bunqueue server, as a deterministic state machine.
///
/// See the [module docs](super) for the contract and the canonical run loop.
#[derive(Debug)]
pub struct Session {
    pub(super) config: SessionConfig,
    conn: Conn,
    reconnect_attempt: u32,
    rng: SplitMix64,
    frames: crate::wire::FrameDecoder,
    next_op: u64,
    next_req: u32,
    /// Commands waiting to be written, in order.
    pub(super) outgoing: VecDeque<Queued>,
    /// Commands written and not yet answered, by reqId.
    in_flight: HashMap<u32, Queued>,
    /// `(deadline, reqId)` of every in-flight command, earliest first.
    deadlines: BTreeSet<(Instant, u32)>,
    consecutive_timeouts: u32,
    next_ping: Option<Instant>,
    pub(super) producers: Producers,
    pub(super) worker: Option<WorkerState>,
    pub(super) events: VecDeque<Event>,
    closing: bool,
    pub(super) stats: SessionStats,
}

impl Session {
    /// A session that will ask to connect straight away ([`Event::Connect`]).
    pub fn new(config: SessionConfig, now: Instant) -> Result<Session, ConfigError> {
        config.validate()?;
        let producers = Producers::new(config.batching.clone());
        let worker = match &config.worker {
            Some(w) => Some(WorkerState::new(w.clone()).map_err(ConfigError::Batching)?),
            None => None,
        };
        // `now` is not needed yet (the first connect is asked for at once); it is taken so that
        // construction reads like every other input, and so a future deadline can use it.
        let _ = now;
        Ok(Session {
            rng: SplitMix64::new(config.seed),
            config,
            conn: Conn::Connecting,
            reconnect_attempt: 0,
            frames: crate::wire::FrameDecoder::new(),
            next_op: 0,
            next_req: 0,
            outgoing: VecDeque::new(),
            in_flight: HashMap::new(),
            deadlines: BTreeSet::new(),
            consecutive_timeouts: 0,
            next_ping: None,
            producers,
            worker,
            events: VecDeque::from([Event::Connect]),
            closing: false,
            stats: SessionStats::default(),
        })
    }

    /// The configuration in force.
    pub fn config(&self) -> &SessionConfig {
        &self.config
    }

    /// Counters of this session.
    pub fn stats(&self) -> &SessionStats {
        &self.stats
    }

    /// Whether the connection is up and authenticated.
    pub fn is_connected(&self) -> bool {
        self.conn == Conn::Ready
    }

    /// Whether [`close`](Self::close) has finished.
    pub fn is_closed(&self) -> bool {
        self.conn == Conn::Closed
    }

    /// Commands written and awaiting replies.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    pub(super) fn next_op_id(&mut self) -> OpId {
        self.next_op += 1;
        OpId(self.next_op)
    }

    pub(super) fn deadline(&self, now: Instant) -> Instant {
        now + self.config.command_timeout
    }

    pub(super) fn is_closing(&self) -> bool {
        self.closing || self.conn == Conn::Closed
    }

    /// Queues a command. Reads and worker traffic go through here; adds through the producer.
    pub(super) fn enqueue(&mut self, now: Instant, cmd: Command, origin: Origin) {
        let deadline = self.deadline(now) + long_poll(&cmd);
        self.outgoing.push_back(Queued {
            cmd,
            origin,
            deadline,
            written: false,
        });
    }

    /// Sends any command (a lookup such as `GetJob`, `GetState`, `Count`, `GetJobCounts`,
    /// `GetResult`, `Ping`); its typed reply arrives as [`Event::Done`]. Lookups are re-sent
    /// after a reconnect, since reading twice is harmless.
    pub fn request(&mut self, now: Instant, cmd: Command) -> Result<OpId, Error> {
        if self.is_closing() {
            return Err(Error::Closed);
        }
        let op = self.next_op_id();
        self.enqueue(now, cmd, Origin::Request(op));
        Ok(op)
    }

    // ---------------------------------------------------------------- connection lifecycle

    /// The driver connected the socket asked for by [`Event::Connect`].
    ///
    /// Follow with [`poll_transmit`](Self::poll_transmit).
    pub fn handle_connected(&mut self, now: Instant) {
        if self.conn != Conn::Connecting {
            return;
        }
        self.frames.clear();
        self.stats.connects += 1;
        if let Some(token) = self.config.token.clone() {
            // Auth goes first and alone: until its reply, the server refuses everything else.
            self.conn = Conn::Authenticating;
            let q = Queued {
                cmd: Command::Auth { token },
                origin: Origin::Auth,
                deadline: self.deadline(now),
                written: false,
            };
            self.outgoing.push_front(q);
        } else {
            self.conn = Conn::Ready;
        }
        self.next_ping = self.config.ping_interval.map(|p| now + p);
    }

    /// The connection attempt failed. The session backs off and asks again later.
    pub fn handle_connect_failed(&mut self, now: Instant) {
        if self.conn == Conn::Connecting {
            self.schedule_reconnect(now);
        }
    }

    /// The socket closed or failed. In-flight requests resolve (or are re-sent where that is
    /// safe) and the session backs off before asking to reconnect.
    pub fn handle_disconnected(&mut self, now: Instant) {
        match self.conn {
            Conn::Disconnected(_) | Conn::Closed => {}
            Conn::Connecting => self.schedule_reconnect(now),
            Conn::Authenticating | Conn::Ready => {
                self.fail_in_flight(now, FailKind::ConnectionLost);
                self.schedule_reconnect(now);
            }
        }
    }

    fn schedule_reconnect(&mut self, now: Instant) {
        self.frames.clear();
        if self.closing && self.nothing_left() {
            self.finish_close();
            return;
        }
        self.reconnect_attempt += 1;
        let delay = self
            .config
            .reconnect
            .delay(self.reconnect_attempt, self.rng.next_f64());
        self.conn = Conn::Disconnected(now + delay);
        self.stats.reconnects_scheduled += 1;
    }

    /// The session drops the connection itself (protocol violation, auth failure, timeouts).
    fn reset_connection(&mut self, now: Instant, why: FailKind) {
        if matches!(self.conn, Conn::Authenticating | Conn::Ready) {
            self.events.push_back(Event::Disconnect);
            self.fail_in_flight(now, why);
            self.schedule_reconnect(now);
        }
    }

    // ---------------------------------------------------------------- input

    /// Bytes received from the socket.
    ///
    /// Follow with [`poll_transmit`](Self::poll_transmit) and [`poll_event`](Self::poll_event).
    pub fn handle_input(&mut self, now: Instant, bytes: &[u8]) {
        if !matches!(self.conn, Conn::Authenticating | Conn::Ready) {
            return;
        }
        self.stats.bytes_received += bytes.len() as u64;
        self.frames.extend(bytes);
        loop {
            let frame = match self.frames.next_frame() {
                Ok(Some(f)) => f,
                Ok(None) => break,
                Err(e) => {
                    let why = match e {
                        FrameError::TooLarge { .. } => {
                            format!("server sent an oversized frame: {e}")
                        }
                        FrameError::Empty => "server sent a zero-length frame".to_owned(),
                    };
                    self.reset_connection(now, FailKind::Protocol(why));
                    return;
                }
            };
            self.stats.frames_received += 1;
            let incoming = Value::decode(&frame)
                .map_err(|e| format!("undecodable reply: {e}"))
                .and_then(|v| Incoming::from_value(v).map_err(|e| e.to_string()));
            match incoming {
                Ok(Incoming::Reply(reply)) => {
                    if let Err(why) = self.on_reply(now, reply) {
                        self.reset_connection(now, FailKind::Protocol(why));
                        return;
                    }
                }
                // Events only come after SubscribeEvents, which this session never sends.
                Ok(Incoming::Event(_)) => {}
                Err(why) => {
                    self.reset_connection(now, FailKind::Protocol(why));
                    return;
                }
            }
            if !matches!(self.conn, Conn::Authenticating | Conn::Ready) {
                return;
            }
        }
    }

    fn on_reply(&mut self, now: Instant, reply: Reply) -> Result<(), String> {
        let req = match &reply.req_id {
            Value::Str(s) => s.parse::<u32>().ok(),
            _ => None,
        }
        .ok_or_else(|| format!("reply with a reqId we never send: {:?}", reply.req_id))?;
        let Some(q) = self.in_flight.remove(&req) else {
            // A late reply to a command that already timed out is harmless; one we never sent
            // is not.
            return if req <= self.next_req {
                Ok(())
            } else {
                Err(format!("reply to unknown reqId {req}"))
            };
        };
        self.deadlines.remove(&(q.deadline, req));
        self.consecutive_timeouts = 0;
        self.reconnect_attempt = 0;
        let kind = q.cmd.kind();
        let result = match reply.result {
            Ok(()) => reply.response(kind).map_err(|e| e.to_string()),
            Err(msg) => {
                return {
                    self.on_error_reply(now, q, msg);
                    Ok(())
                }
            }
        };
        let response = match result {
            Ok(r) => r,
            Err(why) => {
                // A success reply we cannot read: fail this request, then reset (the stream
                // itself is suspect).
                self.resolve(now, q, FailKind::Protocol(why.clone()));
                return Err(why);
            }
        };
        match q.origin {
            Origin::Auth => {
                self.conn = Conn::Ready;
            }
            // A lost heartbeat is covered by the next one; a refused one means the lock is
            // gone, which the job's ACK will report.
            Origin::Ping | Origin::Heartbeat => {}
            Origin::Adds { queue, batch, ops } => {
                let Response::PushedBatch(ids) = response else {
                    unreachable!("PUSHB replies decode as PushedBatch")
                };
                if ids.len() != ops.len() {
                    let why = format!(
                        "PUSHB of {} jobs answered with {} ids",
                        ops.len(),
                        ids.len()
                    );
                    for op in ops {
                        self.done(op, Err(Error::Protocol(why.clone())));
                    }
                } else {
                    for (op, id) in ops.into_iter().zip(ids) {
                        self.stats.adds_ok += 1;
                        self.done(op, Ok(Response::Pushed(id)));
                    }
                }
                self.producers.complete(now, queue, batch);
            }
            Origin::Push(op) => {
                self.stats.adds_ok += 1;
                self.done(op, Ok(response));
            }
            Origin::Bulk(op) => {
                if let Response::PushedBatch(ids) = &response {
                    self.stats.adds_ok += ids.len() as u64;
                }
                self.done(op, Ok(response));
            }
            Origin::Request(op) => self.done(op, Ok(response)),
            Origin::Pull => self.on_pulled(now, response),
            Origin::Acks { batch, .. } => {
                let Command::AckB { ids, .. } = q.cmd else {
                    unreachable!("Acks origin holds an ACKB")
                };
                let ignored = match response {
                    Response::AckedBatch {
                        ignored_indices, ..
                    } => ignored_indices,
                    _ => Vec::new(),
                };
                for (i, id) in ids.into_iter().enumerate() {
                    let applied = !ignored.contains(&i);
                    self.events.push_back(Event::JobSettled {
                        id,
                        result: Ok(applied),
                    });
                }
                self.ack_batch_done(now, batch);
            }
            Origin::AckCheck => {
                let Command::GetState { id } = q.cmd else {
                    unreachable!("AckCheck origin holds a GetState")
                };
                let result = match response {
                    Response::State(s) if s == "completed" => Ok(true),
                    Response::State(s) => Err(Error::server(format!(
                        "the ACK of job {id} did not take effect (state {s})"
                    ))),
                    _ => Err(Error::Protocol("GetState reply without a state".into())),
                };
                self.events.push_back(Event::JobSettled { id, result });
                self.ack_batch_done(now, None);
            }
            Origin::Fail => {
                let Command::Fail { id, .. } = q.cmd else {
                    unreachable!("Fail origin holds a FAIL")
                };
                let applied = response == Response::Finalized { applied: true };
                self.events.push_back(Event::JobSettled {
                    id,
                    result: Ok(applied),
                });
                // The FAIL is answered: it no longer holds up `close`.
                self.ack_batch_done(now, None);
            }
        }
        Ok(())
    }

    fn on_error_reply(&mut self, now: Instant, q: Queued, msg: String) {
        self.stats.error_replies += 1;
        match q.origin {
            Origin::Auth => {
                // Everything queued behind the Auth would be refused too: fail it now rather
                // than time it out, then reconnect with backoff (the token may be fixed).
                let queued: Vec<Queued> = self.outgoing.drain(..).collect();
                for other in queued {
                    self.resolve(now, other, FailKind::Auth(msg.clone()));
                }
                self.reset_connection(now, FailKind::Auth(msg));
            }
            Origin::Adds { queue, batch, ops } => {
                let Command::PushB { queue: name, jobs } = q.cmd else {
                    unreachable!("Adds origin holds a PUSHB")
                };
                // "jobs[i]: …" is a validation failure: the server inserted nothing, so the
                // other jobs can safely go again without the bad one. One bad job fails alone.
                match batch_index(&msg).filter(|&i| i < ops.len() && ops.len() > 1) {
                    Some(bad) => {
                        let mut keep_ops = Vec::with_capacity(ops.len() - 1);
                        let mut keep_jobs = Vec::with_capacity(ops.len() - 1);
                        for (i, (op, job)) in ops.into_iter().zip(jobs).enumerate() {
                            if i == bad {
                                self.stats.adds_failed += 1;
                                self.done(op, Err(Error::server(strip_index(&msg).to_owned())));
                            } else {
                                keep_ops.push(op);
                                keep_jobs.push(job);
                            }
                        }
                        self.stats.items_resent += keep_ops.len() as u64;
                        // The rest keeps the batch's in-flight slot until it is answered, so
                        // the queue never has more than `max_in_flight` batches out.
                        self.outgoing.push_front(Queued {
                            cmd: Command::PushB {
                                queue: name,
                                jobs: keep_jobs,
                            },
                            origin: Origin::Adds {
                                queue,
                                batch,
                                ops: keep_ops,
                            },
                            deadline: q.deadline,
                            written: true,
                        });
                    }
                    None => {
                        for op in ops {
                            self.stats.adds_failed += 1;
                            self.done(op, Err(Error::server(strip_index(&msg).to_owned())));
                        }
                        self.producers.complete(now, queue, batch);
                    }
                }
            }
            Origin::Acks { batch, attempt } => {
                let Command::AckB {
                    ids,
                    results,
                    tokens,
                } = q.cmd
                else {
                    unreachable!("Acks origin holds an ACKB")
                };
                // The server names one job. A lock problem means nothing was applied, so the
                // others go again. A missing job means the others were applied (§6.6) — unless
                // they are missing too (after a lost connection, usually several are), and the
                // server names only the first: so each of the others is checked, not assumed.
                let named = ids.iter().position(|id| names_job(&msg, id));
                let lock_problem = msg.starts_with("Lock token")
                    || msg.starts_with("Invalid or expired lock token");
                let results = results.unwrap_or_default();
                let tokens = tokens.unwrap_or_default();
                for (i, id) in ids.into_iter().enumerate() {
                    if Some(i) == named || named.is_none() {
                        self.events.push_back(Event::JobSettled {
                            id,
                            result: Err(Error::server(msg.clone())),
                        });
                    } else if lock_problem {
                        let item = AckItem {
                            id,
                            token: tokens.get(i).filter(|t| !t.is_empty()).cloned(),
                            result: results.get(i).cloned().unwrap_or(Value::Nil),
                            attempt,
                        };
                        self.requeue_ack(now, item);
                    } else {
                        self.check_ack(now, id);
                    }
                }
                self.ack_batch_done(now, batch);
            }
            Origin::AckCheck => {
                let Command::GetState { id } = q.cmd else {
                    unreachable!("AckCheck origin holds a GetState")
                };
                self.events.push_back(Event::JobSettled {
                    id,
                    result: Err(Error::server(msg)),
                });
                self.ack_batch_done(now, None);
            }
            Origin::Pull => self.on_pull_failed(now),
            other => {
                let q = Queued { origin: other, ..q };
                self.resolve(now, q, FailKind::Server(msg));
            }
        }
    }

    pub(super) fn done(&mut self, op: OpId, result: Result<Response, Error>) {
        self.events.push_back(Event::Done { op, result });
    }

    /// Resolves a command that will get no reply, with the error `why`.
    fn resolve(&mut self, now: Instant, q: Queued, why: FailKind) {
        let err = why.error(true);
        match q.origin {
            Origin::Adds { queue, batch, ops } => {
                self.stats.adds_failed += ops.len() as u64;
                for op in ops {
                    self.done(op, Err(err.clone()));
                }
                self.producers.complete(now, queue, batch);
            }
            Origin::Push(op) | Origin::Bulk(op) => {
                self.stats.adds_failed += 1;
                self.done(op, Err(err));
            }
            Origin::Request(op) => self.done(op, Err(err)),
            Origin::Auth | Origin::Ping | Origin::Heartbeat => {}
            Origin::Pull => self.on_pull_failed(now),
            Origin::Acks { batch, .. } => {
                if let Command::AckB { ids, .. } = q.cmd {
                    for id in ids {
                        self.events.push_back(Event::JobSettled {
                            id,
                            result: Err(err.clone()),
                        });
                    }
                }
                self.ack_batch_done(now, batch);
            }
            Origin::Fail => {
                if let Command::Fail { id, .. } = q.cmd {
                    self.events.push_back(Event::JobSettled {
                        id,
                        result: Err(err),
                    });
                }
                self.ack_batch_done(now, None);
            }
            Origin::AckCheck => {
                if let Command::GetState { id } = q.cmd {
                    self.events.push_back(Event::JobSettled {
                        id,
                        result: Err(err),
                    });
                }
                self.ack_batch_done(now, None);
            }
        }
    }

    /// Every written command loses its connection: re-send what is safe, fail the rest.
    fn fail_in_flight(&mut self, now: Instant, why: FailKind) {
        let mut reqs: Vec<u32> = self.in_flight.keys().copied().collect();
        reqs.sort_unstable();
        self.deadlines.clear();
        let mut resend = Vec::new();
        for req in reqs {
            let Some(q) = self.in_flight.remove(&req) else {
                continue;
            };
            let retry_safe = why.allows_resend();
            match q.origin {
                Origin::Request(_) | Origin::AckCheck if retry_safe => resend.push(q),
                Origin::Push(_) if retry_safe && has_custom_id(&q.cmd) => {
                    self.stats.items_resent += 1;
                    resend.push(q)
                }
                Origin::Adds { queue, batch, ops } if retry_safe => {
                    // Items with a custom id are idempotent on the server: send them again.
                    let Command::PushB { queue: name, jobs } = q.cmd else {
                        unreachable!("Adds origin holds a PUSHB")
                    };
                    let mut again_ops = Vec::new();
                    let mut again_jobs = Vec::new();
                    for (op, job) in ops.into_iter().zip(jobs) {
                        if job.opts.job_id.is_some() {
                            again_ops.push(op);
                            again_jobs.push(job);
                        } else {
                            self.stats.adds_failed += 1;
                            self.done(op, Err(why.error(true)));
                        }
                    }
                    if again_ops.is_empty() {
                        self.producers.complete(now, queue, batch);
                    } else {
                        // The re-sent part keeps the batch's in-flight slot (max_in_flight).
                        self.stats.items_resent += again_ops.len() as u64;
                        resend.push(Queued {
                            cmd: Command::PushB {
                                queue: name,
                                jobs: again_jobs,
                            },
                            origin: Origin::Adds {
                                queue,
                                batch,
                                ops: again_ops,
                            },
                            deadline: q.deadline,
                            written: true,
                        });
                    }
                }
                Origin::Auth => {}
                _ => self.resolve(now, q, why.clone()),
            }
        }
        for q in resend.into_iter().rev() {
            self.outgoing.push_front(q);
        }
    }

    // ---------------------------------------------------------------- output

    /// Appends every frame that may be written now to `out`; returns whether it wrote any.
    ///
    /// Call after every input: it also moves due batches from the batchers into the send queue
    /// and may produce events, so drain [`poll_event`](Self::poll_event) after it.
    pub fn poll_transmit(&mut self, now: Instant, out: &mut Vec<u8>) -> bool {
        self.drive(now);
        let before = out.len();
        loop {
            let may_write = match self.conn {
                Conn::Ready => self.in_flight.len() < self.config.max_in_flight_commands,
                // Only the Auth itself goes out before Auth succeeds.
                Conn::Authenticating => {
                    self.in_flight.is_empty()
                        && matches!(self.outgoing.front(), Some(q) if matches!(q.origin, Origin::Auth))
                }
                _ => false,
            };
            if !may_write {
                break;
            }
            let Some(mut q) = self.outgoing.pop_front() else {
                break;
            };
            self.next_req = self.next_req.wrapping_add(1) & 0x7fff_ffff;
            let req = self.next_req;
            let req_value = Value::Str(req.to_string());
            if let Err(e) = write_frame(out, |buf| q.cmd.encode(Some(&req_value), buf)) {
                // Only a job far over the data limit could get here; validation stops those.
                let why = FailKind::TooLarge(e.to_string());
                self.resolve(now, q, why);
                continue;
            }
            self.stats.frames_sent += 1;
            self.stats.count_command(&q.cmd);
            // The timeout restarts when the command is written, as in the official client; a
            // long-poll gets its whole poll time on top, however long it waited to be written.
            q.deadline = self.deadline(now) + long_poll(&q.cmd);
            q.written = true;
            self.deadlines.insert((q.deadline, req));
            self.in_flight.insert(req, q);
        }
        let wrote = out.len() > before;
        if wrote {
            self.stats.bytes_sent += (out.len() - before) as u64;
            if let Some(p) = self.config.ping_interval {
                self.next_ping = Some(now + p);
            }
        }
        wrote
    }

    /// The next event, until `None`. Drain after every input and after
    /// [`poll_transmit`](Self::poll_transmit).
    #[must_use = "an event left in the queue is never seen"]
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// When [`handle_timeout`](Self::handle_timeout) must be called next, if ever.
    #[must_use = "a deadline that is not armed never fires"]
    pub fn poll_timeout(&self) -> Option<Instant> {
        let mut t: Option<Instant> = None;
        let mut consider = |x: Option<Instant>| {
            if let Some(x) = x {
                t = Some(t.map_or(x, |t| t.min(x)));
            }
        };
        if let Conn::Disconnected(at) = self.conn {
            consider(Some(at));
        }
        consider(self.deadlines.first().map(|(d, _)| *d));
        consider(self.outgoing.iter().map(|q| q.deadline).min());
        consider(self.producers.poll_timeout());
        consider(self.producers.next_expiry());
        if let Some(w) = &self.worker {
            consider(w.poll_timeout());
        }
        if self.conn == Conn::Ready && self.in_flight.is_empty() {
            consider(self.next_ping);
        }
        t
    }

    /// The time given by [`poll_timeout`](Self::poll_timeout) has come (calling early or late
    /// is harmless). Follow with [`poll_transmit`](Self::poll_transmit) and
    /// [`poll_event`](Self::poll_event).
    pub fn handle_timeout(&mut self, now: Instant) {
        if let Conn::Disconnected(at) = self.conn {
            if now >= at {
                self.conn = Conn::Connecting;
                self.events.push_back(Event::Connect);
            }
        }
        self.producers.handle_timeout(now);
        self.expire_buffered_adds(now);
        self.worker_timeout(now);
        // Written commands whose reply is overdue.
        let mut overdue = Vec::new();
        while let Some(&(d, req)) = self.deadlines.first() {
            if d > now {
                break;
            }
            self.deadlines.pop_first();
            overdue.push(req);
        }
        for req in overdue {
            if let Some(q) = self.in_flight.remove(&req) {
                self.stats.timeouts += 1;
                self.consecutive_timeouts += 1;
                self.resolve(now, q, FailKind::Timeout { written: true });
            }
        }
        // Queued commands that never got written in time.
        if self.outgoing.iter().any(|q| q.deadline <= now) {
            let (late, keep): (Vec<Queued>, Vec<Queued>) =
                self.outgoing.drain(..).partition(|q| q.deadline <= now);
            self.outgoing = keep.into();
            for q in late {
                self.stats.timeouts += 1;
                // A re-send was written on an earlier connection: it may have been applied.
                let written = q.written;
                self.resolve(now, q, FailKind::Timeout { written });
            }
        }
        if self.consecutive_timeouts >= self.config.max_command_timeouts {
            self.consecutive_timeouts = 0;
            self.reset_connection(now, FailKind::Timeout { written: true });
        }
        // Ping only a connection with nothing to do: not even adds waiting to be flushed, or
        // the Ping could take the window slot they need.
        if self.conn == Conn::Ready && self.next_ping.is_some_and(|p| now >= p) {
            // Rescheduled whether or not it goes out, so a due time never stays in the past.
            self.next_ping = self.config.ping_interval.map(|p| now + p);
            if self.in_flight.is_empty()
                && self.outgoing.is_empty()
                && self.producers.pending() == (0, 0, 0)
            {
                self.enqueue(now, Command::Ping, Origin::Ping);
            }
        }
    }

    // ---------------------------------------------------------------- close

    /// Stops taking new work, flushes every pending add and ACK, waits for every reply, then
    /// emits [`Event::Disconnect`] and [`Event::Closed`]. Nothing pending is dropped: every
    /// operation still resolves (a request that cannot be sent times out).
    pub fn close(&mut self, now: Instant) {
        if self.closing {
            return;
        }
        self.closing = true;
        self.producers.close(now);
        if let Some(w) = &mut self.worker {
            w.stopping = true;
        }
    }

    fn nothing_left(&self) -> bool {
        self.outgoing.is_empty()
            && self
                .in_flight
                .values()
                .all(|q| matches!(q.origin, Origin::Ping | Origin::Pull | Origin::Heartbeat))
            && self.producers.is_drained()
            && self.worker.as_ref().is_none_or(|w| w.is_drained())
    }

    fn finish_close(&mut self) {
        if matches!(
            self.conn,
            Conn::Authenticating | Conn::Ready | Conn::Connecting
        ) {
            self.events.push_back(Event::Disconnect);
        }
        // A pull still out is abandoned: closing the connection hands its jobs back to the
        // server (§4.4), so nothing is lost.
        self.in_flight.clear();
        self.deadlines.clear();
        self.conn = Conn::Closed;
        self.events.push_back(Event::Closed);
    }

    /// Moves due work into the send queue: batches from the batchers, worker pulls and ACKs,
    /// and finishes a close when nothing is left.
    fn drive(&mut self, now: Instant) {
        if self.conn == Conn::Closed {
            return;
        }
        self.drain_producers(now);
        self.drive_worker(now);
        let (items, bytes, parked) = self.producers.pending();
        self.stats.buffered_adds = items as u64;
        self.stats.buffered_bytes = bytes as u64;
        self.stats.parked_adds = parked as u64;
        self.stats.in_flight_commands = self.in_flight.len() as u64;
        if self.closing && self.nothing_left() {
            self.finish_close();
        }
    }

    pub(super) fn add_item_batch(
        &mut self,
        now: Instant,
        queue: usize,
        batch: BatchId,
        name: String,
        items: Vec<(crate::batch::ItemId, AddItem)>,
    ) {
        let mut ops = Vec::with_capacity(items.len());
        let mut jobs = Vec::with_capacity(items.len());
        // The batch must be written before its oldest add's deadline: time spent buffered
        // counts against the command timeout, so an add never waits more than one timeout
        // for its write however many batches queue up ahead of it.
        let mut deadline = self.deadline(now);
        for (_, item) in items {
            deadline = deadline.min(item.deadline);
            ops.push(item.op);
            jobs.push(item.job);
        }
        self.stats.batches_sent += 1;
        self.outgoing.push_back(Queued {
            cmd: Command::PushB { queue: name, jobs },
            origin: Origin::Adds {
                queue,
                batch: Some(batch),
                ops,
            },
            deadline,
            written: false,
        });
    }
}

/// Why a command ended without a reply.
#[derive(Debug, Clone)]
pub(super) enum FailKind {
    ConnectionLost,
    Timeout {
        written: bool,
    },
    Protocol(String),
    Auth(String),
    Server(String),
    /// The encoded request would exceed the 64 MiB frame limit.
    TooLarge(String),
}

impl FailKind {
    fn error(&self, written: bool) -> Error {
        match self {
            FailKind::ConnectionLost => Error::ConnectionLost {
                maybe_applied: written,
            },
            FailKind::Timeout { written } => Error::Timeout {
                maybe_applied: *written,
            },
            FailKind::Protocol(m) => Error::Protocol(m.clone()),
            FailKind::Auth(m) => Error::AuthFailed(m.clone()),
            FailKind::Server(m) => Error::server(m.clone()),
            FailKind::TooLarge(m) => Error::Invalid(crate::wire::ValidationError {
                field: "data",
                message: format!("request too large to send: {m}"),
            }),
        }
    }

    /// Whether idempotent requests may go again on the next connection.
    fn allows_resend(&self) -> bool {
        matches!(
            self,
            FailKind::ConnectionLost | FailKind::Protocol(_) | FailKind::Timeout { .. }
        )
    }
}

/// How long the server may legitimately hold the reply to `cmd` beyond the command timeout:
/// the poll time of a long-poll.
fn long_poll(cmd: &Command) -> Duration {
    match cmd {
        Command::Pull(args) | Command::PullB { args, .. } => {
            Duration::from_millis(args.timeout.unwrap_or(0).max(0) as u64)
        }
        _ => Duration::ZERO,
    }
}

fn has_custom_id(cmd: &Command) -> bool {
    match cmd {
        Command::Push { job, .. } => job.opts.job_id.is_some(),
        _ => false,
    }
}

/// Whether a server message ends by naming job `id` ("… for job <id>", "…: <id>"), as a whole
/// word: id "7" is not named by a message about job "17".
fn names_job(msg: &str, id: &str) -> bool {
    !id.is_empty() && msg.strip_suffix(id).is_some_and(|head| head.ends_with(' '))
}

/// The index in a `"jobs[<i>]: …"` error message.
fn batch_index(msg: &str) -> Option<usize> {
    let rest = msg.strip_prefix("jobs[")?;
    let end = rest.find("]: ")?;
    rest[..end].parse().ok()
}

fn strip_index(msg: &str) -> &str {
    match (msg.strip_prefix("jobs["), msg.find("]: ")) {
        (Some(_), Some(end)) => &msg[end + 3..],
        _ => msg,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_is_named_as_a_whole_word() {
        assert!(names_job(
            "Job not found or not in processing state: 17",
            "17"
        ));
        assert!(!names_job(
            "Job not found or not in processing state: 17",
            "7"
        ));
        assert!(names_job("Lock token required for job abc", "abc"));
        assert!(!names_job("anything", ""));
    }

    #[test]
    fn batch_error_index() {
        assert_eq!(batch_index("jobs[3]: priority must be an integer"), Some(3));
        assert_eq!(
            batch_index("Group g has reached its maximum size of 2"),
            None
        );
        assert_eq!(
            strip_index("jobs[3]: priority must be an integer"),
            "priority must be an integer"
        );
        assert_eq!(strip_index("plain"), "plain");
    }
}
