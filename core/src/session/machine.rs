//! The connection state machine, and the one owner of [`Session`]: commands, replies, the
//! pipelining window, timeouts, reconnects. It drives the producer and worker parts, which own
//! their state, return the requests they want sent, and get their replies handed back.

use std::borrow::Borrow;
use std::collections::VecDeque;
use std::time::Instant;

use crate::error::Error;
use crate::hash::IntMap;
use crate::wire::{validate_queue_name, CommandKind, PushIds, PushReply, Response};
use crate::wire::{Command, EncodedJob, FrameError, Incoming, JobSpec, Reply, Value};

use super::config::{ConfigError, SessionConfig};
use super::event::{Event, FailKind, OpId, Out};
use super::failure::{JobFailure, Release};
use super::producer::{AddRequest, Producers};
use super::queue::{Queued, SendQueue, WrittenDeadlines};
use super::replay::Replay;
use super::request::Request;
use super::rng::SplitMix64;
use super::stats::SessionStats;
use super::window::Window;
use super::worker::{WorkRequest, WorkerState};

/// The session's events and counters, lent to a part of it (borrows two fields only, so the
/// part itself can be borrowed alongside).
macro_rules! out {
    ($s:ident) => {
        &mut Out {
            events: &mut $s.events,
            stats: &mut $s.stats,
        }
    };
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

/// The adds of a session not yet sent ([`Session::pending_adds`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PendingAdds {
    /// Adds buffered in the batchers, waiting for their batch to leave.
    pub items: usize,
    /// Their encoded size, bytes.
    pub bytes: usize,
    /// Adds parked: waiting for room in a full buffer under backpressure.
    pub parked: usize,
}

/// One client connection to a bunqueue server, as a deterministic state machine.
///
/// See the [module docs](super) for the contract and the canonical run loop.
#[derive(Debug)]
pub struct Session {
    config: SessionConfig,
    conn: Conn,
    reconnect_attempt: u32,
    rng: SplitMix64,
    frames: crate::wire::FrameDecoder,
    next_op: u64,
    next_req: u32,
    /// Commands waiting to be written, in order.
    outgoing: SendQueue,
    /// Commands written and not yet answered, by reqId.
    in_flight: IntMap<u32, Queued>,
    /// How many of them may be out, and when a full window is refilled.
    window: Window,
    /// The deadlines of the in-flight commands, earliest first on demand.
    deadlines: WrittenDeadlines,
    consecutive_timeouts: u32,
    next_ping: Option<Instant>,
    producers: Producers,
    worker: Option<WorkerState>,
    events: VecDeque<Event>,
    closing: bool,
    stats: SessionStats,
    /// When the current (or last) connection came up: an add written on it and lost is looked
    /// up on the next one, and a server that started after this instant is another one.
    connected_at: Instant,
    /// See [`hand_off_settlements`](Self::hand_off_settlements).
    hand_off: bool,
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
        let window = Window::new(config.max_in_flight_commands, config.full_window_wait);
        Ok(Session {
            rng: SplitMix64::new(config.seed),
            config,
            conn: Conn::Connecting,
            reconnect_attempt: 0,
            frames: crate::wire::FrameDecoder::new(),
            next_op: 0,
            next_req: 0,
            outgoing: SendQueue::default(),
            in_flight: IntMap::default(),
            window,
            deadlines: WrittenDeadlines::default(),
            consecutive_timeouts: 0,
            next_ping: None,
            producers,
            worker,
            events: VecDeque::from([Event::Connect]),
            closing: false,
            stats: SessionStats::default(),
            hand_off: false,
            connected_at: now,
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

    fn next_op_id(&mut self) -> OpId {
        self.next_op += 1;
        OpId(self.next_op)
    }

    fn deadline(&self, now: Instant) -> Instant {
        now + self.config.command_timeout
    }

    fn is_closing(&self) -> bool {
        self.closing || self.conn == Conn::Closed
    }

    /// Queues a request, due `command_timeout` from now (plus a long-poll's poll time).
    fn enqueue(&mut self, now: Instant, req: Request) {
        let deadline = self.deadline(now) + req.long_poll();
        self.outgoing.push_back(Queued {
            req,
            deadline,
            written: false,
        });
    }

    fn enqueue_work(&mut self, now: Instant, reqs: impl IntoIterator<Item = WorkRequest>) {
        for w in reqs {
            self.enqueue(now, Request::Work(w));
        }
    }

    // ---------------------------------------------------------------- requests

    /// Sends a typed command (a lookup such as `GetJob`, `GetState`, `Count`, `GetJobCounts`,
    /// `GetResult`, `Ping`); its typed reply arrives as [`Event::Done`].
    ///
    /// Whether it is written again after a lost connection is decided by
    /// [`Command::replay_safety`]: lookups and adds with a custom job id are; anything else
    /// that was written fails with [`Error::ConnectionLost`] `{ maybe_applied: true }`. A
    /// command that was never written is always sent on the next connection.
    pub fn request(&mut self, now: Instant, cmd: impl Into<Box<Command>>) -> Result<OpId, Error> {
        let cmd = cmd.into();
        let replay = cmd.replay_safety();
        self.request_raw(now, cmd, replay)
    }

    /// Sends any command, the caller saying whether it is safe to write again after a lost
    /// connection (see [`Replay`]): the escape hatch for commands this crate does not type,
    /// such as [`Command::Other`]. Its reply arrives as [`Event::Done`].
    ///
    /// With [`Replay::NotSafe`], a command written on a connection that is lost before its
    /// reply fails with [`Error::ConnectionLost`] `{ maybe_applied: true }` and is never
    /// written again; with [`Replay::Safe`] it is written again on the next connection.
    ///
    /// # Errors
    ///
    /// [`Error::Closed`] after [`close`](Self::close).
    ///
    /// ```
    /// use std::time::Instant;
    /// use autobatch_core::session::{Replay, Session, SessionConfig};
    /// use autobatch_core::wire::{Command, Value};
    ///
    /// use autobatch_core::session::Event;
    /// use autobatch_core::Error;
    ///
    /// let now = Instant::now();
    /// let mut s = Session::new(SessionConfig::default(), now).unwrap();
    /// while s.poll_event().is_some() {} // Connect
    /// s.handle_connected(now);
    /// // Pausing a queue is not a read: it must never be written twice.
    /// let pause = Command::Other {
    ///     cmd: "Pause".into(),
    ///     body: Value::map([("cmd", Value::from("Pause")), ("queue", Value::from("emails"))]),
    /// };
    /// let op = s.request_raw(now, pause, Replay::NotSafe).unwrap();
    /// let mut out = Vec::new();
    /// assert!(s.poll_transmit(now, &mut out)); // written
    /// s.handle_disconnected(now); // ...and the connection drops before its reply
    /// let lost = Error::ConnectionLost { maybe_applied: true };
    /// assert_eq!(s.poll_event(), Some(Event::Done { op, result: Err(lost) }));
    /// ```
    pub fn request_raw(
        &mut self,
        now: Instant,
        cmd: impl Into<Box<Command>>,
        replay: Replay,
    ) -> Result<OpId, Error> {
        if self.is_closing() {
            return Err(Error::Closed);
        }
        let op = self.next_op_id();
        self.enqueue(
            now,
            Request::User {
                op,
                cmd: cmd.into(),
                replay,
            },
        );
        Ok(op)
    }

    /// Adds one job to `queue`. Its outcome (the job id, or why not) arrives as
    /// [`Event::Done`] with the returned id.
    ///
    /// Validation happens here, so a bad job fails alone, at once, with an error naming the
    /// field; it never sinks the jobs batched with it. Nor do good jobs sink together: each
    /// PUSHB is capped by encoded bytes at what one frame holds, so a batch that would overflow
    /// the 64 MiB frame limit leaves as several. With batching on, the add is flushed at
    /// once when no batch is in flight (sequential code pays nothing) and otherwise joins the
    /// next PUSHB. `durable` jobs bypass the batcher and go out alone as PUSH.
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] for a bad queue name or job (field `data` for a job that alone would
    /// not fit in a frame), [`Error::Closed`] after
    /// [`close`](Session::close), [`Error::Overflow`] when the buffer is full under the
    /// `Reject` policy.
    ///
    /// `job` may be a `JobSpec`, a reference to one or a box: it is validated and encoded here
    /// ([`EncodedJob::new`]), and the session keeps only its bytes.
    pub fn add(
        &mut self,
        now: Instant,
        queue: &str,
        job: impl Borrow<JobSpec>,
    ) -> Result<OpId, Error> {
        if !self.producers.is_last_queue(queue) {
            validate_queue_name(queue)?;
        }
        let job = EncodedJob::new(job.borrow())?;
        self.add_validated(now, queue, job)
    }

    /// [`add`](Self::add) for a job encoded already, for example by the caller's thread when it
    /// made the job, so that the session's thread never touches the `JobSpec`.
    ///
    /// # Errors
    ///
    /// As [`add`](Self::add), but for the job's own checks, which [`EncodedJob::new`] made.
    ///
    /// ```
    /// use std::time::Instant;
    /// use autobatch_core::session::{Session, SessionConfig};
    /// use autobatch_core::wire::{EncodedJob, JobSpec, Value};
    /// let now = Instant::now();
    /// let mut session = Session::new(SessionConfig::default(), now).unwrap();
    /// let job = EncodedJob::new(&JobSpec::new("welcome", Value::from("a@b"))).unwrap();
    /// session.add_encoded(now, "emails", job).unwrap();
    /// // The queue name is still checked here.
    /// let job = EncodedJob::new(&JobSpec::new("welcome", Value::from("a@b"))).unwrap();
    /// assert!(session.add_encoded(now, "", job).is_err());
    /// ```
    pub fn add_encoded(
        &mut self,
        now: Instant,
        queue: &str,
        job: EncodedJob,
    ) -> Result<OpId, Error> {
        if !self.producers.is_last_queue(queue) {
            validate_queue_name(queue)?;
        }
        self.add_validated(now, queue, job)
    }

    fn add_validated(&mut self, now: Instant, queue: &str, job: EncodedJob) -> Result<OpId, Error> {
        if self.is_closing() {
            return Err(Error::Closed);
        }
        let op = self.next_op_id();
        let deadline = self.deadline(now);
        if let Some(push) = self
            .producers
            .add(now, op, queue, job, deadline, out!(self))?
        {
            self.enqueue(now, Request::Add(push));
        }
        Ok(op)
    }

    /// Adds many jobs to `queue` as one PUSHB; the outcome is one
    /// [`Response::PushedBatch`] with the ids in order.
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] naming the first bad job (`jobs[i]: …`), or [`Error::Closed`].
    pub fn add_bulk(
        &mut self,
        now: Instant,
        queue: &str,
        jobs: Vec<JobSpec>,
    ) -> Result<OpId, Error> {
        validate_queue_name(queue)?;
        let jobs = jobs
            .iter()
            .enumerate()
            .map(|(i, job)| EncodedJob::new(job).map_err(|e| e.in_batch(i)))
            .collect::<Result<Vec<_>, _>>()?;
        if self.is_closing() {
            return Err(Error::Closed);
        }
        let op = self.next_op_id();
        self.stats.adds += jobs.len() as u64;
        let bulk = AddRequest::Bulk {
            op,
            queue: queue.into(),
            jobs,
        };
        self.enqueue(now, Request::Add(bulk));
        Ok(op)
    }

    /// Withdraws an operation whose request has not been sent yet (its caller gave up). Returns
    /// whether it was withdrawn; if not, its outcome still arrives as usual.
    pub fn cancel(&mut self, op: OpId) -> bool {
        // A re-send waiting after a reconnect was written before and may have been applied:
        // from then on it cannot be withdrawn.
        let withdrawn = if self.producers.cancel(op) {
            Some(1)
        } else {
            self.outgoing
                .remove_first(|q| !q.written && q.req.single_op() == Some(op))
                .map(|q| match &q.req {
                    Request::Add(a) => a.len(),
                    // A lookup or another caller's command: no add.
                    _ => 0,
                })
        };
        if let Some(n) = withdrawn {
            self.stats.adds_cancelled += n as u64;
        }
        withdrawn.is_some()
    }

    /// Gives back every add this session has not written, so that a driver with several
    /// brokers can send them to another one when this connection is lost: adds held,
    /// buffered or batched and queued resolve at once with
    /// [`Error::ConnectionLost`] `{ maybe_applied: false }` (nothing of them reached the
    /// server). With [`Release::WrittenCustomIdsToo`], adds with a custom id that were written
    /// and wait here to be sent again after a reconnect resolve too, with
    /// `{ maybe_applied: true }`: where brokers share one store, the driver replays them on
    /// another broker instead.
    /// Returns how many adds were given back (each counted in `adds_cancelled`).
    ///
    /// ```
    /// use std::time::Instant;
    /// use autobatch_core::session::{Event, Release, Session, SessionConfig};
    /// use autobatch_core::wire::JobSpec;
    /// use autobatch_core::Error;
    ///
    /// let now = Instant::now();
    /// let mut s = Session::new(SessionConfig::default(), now).unwrap();
    /// let op = s.add(now, "emails", JobSpec::new("send", "x".into())).unwrap();
    /// assert_eq!(s.release_unwritten(now, Release::Unwritten), 1);
    /// let lost = Error::ConnectionLost { maybe_applied: false };
    /// let done = std::iter::from_fn(|| s.poll_event())
    ///     .any(|e| matches!(e, Event::Done { op: o, result: Err(ref e) } if o == op && *e == lost));
    /// assert!(done);
    /// ```
    pub fn release_unwritten(&mut self, now: Instant, which: Release) -> usize {
        let written_custom_ids = which == Release::WrittenCustomIdsToo;
        let mut released = 0;
        let mut keep = Vec::new();
        for q in self.outgoing.drain() {
            match q.req {
                Request::Add(a) if !q.written || written_custom_ids => {
                    released += a.len();
                    let err = Error::ConnectionLost {
                        maybe_applied: q.written,
                    };
                    self.producers.resolve(now, a, err, out!(self));
                }
                req => keep.push(Queued { req, ..q }),
            }
        }
        for q in keep {
            self.outgoing.push_back(q);
        }
        released += self.producers.release(now, out!(self));
        self.stats.adds_cancelled += released as u64;
        // Resolved above as failed; they were given back, not failed.
        self.stats.adds_failed = self.stats.adds_failed.saturating_sub(released as u64);
        released
    }

    /// With `on`, while the connection is down the worker's completions and failures are not
    /// kept for a reconnect: each ACKB or FAIL queued, and each one written and unanswered
    /// when the connection is lost, is handed out as [`Event::HandOff`] for the driver to
    /// send to another broker. For brokers that share one store, where a job's lock token
    /// is good on every broker: its lock would expire before this broker came back.
    ///
    /// ```
    /// use std::time::Instant;
    /// use autobatch_core::session::{Session, SessionConfig};
    /// let mut s = Session::new(SessionConfig::default(), Instant::now()).unwrap();
    /// s.hand_off_settlements(true);
    /// ```
    pub fn hand_off_settlements(&mut self, on: bool) {
        self.hand_off = on;
    }

    /// Hands out the ACKBs and FAILs queued while the connection is down (see
    /// [`hand_off_settlements`](Self::hand_off_settlements)).
    fn hand_off_queued(&mut self, now: Instant) {
        if !self.hand_off || matches!(self.conn, Conn::Ready | Conn::Authenticating) {
            return;
        }
        let Some(worker) = self.worker.as_mut() else {
            return;
        };
        let is_settlement = |q: &Queued| {
            matches!(
                q.req,
                Request::Work(WorkRequest::Acks { .. } | WorkRequest::Fail { .. })
            )
        };
        while let Some(q) = self.outgoing.remove_first(is_settlement) {
            if let Request::Work(w) = q.req {
                if let Ok(cmd) = worker.hand_off(now, w) {
                    self.events.push_back(Event::HandOff { cmd: Box::new(cmd) });
                }
            }
        }
    }

    /// Per-queue batcher statistics: items, batches, flushes by reason, batch sizes.
    pub fn batch_stats(&self) -> impl Iterator<Item = (&str, &crate::batch::BatchStats)> {
        self.producers.stats()
    }

    /// The adds not yet sent, over every queue: buffered and parked.
    pub fn pending_adds(&self) -> PendingAdds {
        let (items, bytes, parked) = self.producers.pending();
        PendingAdds {
            items,
            bytes,
            parked,
        }
    }

    // ---------------------------------------------------------------- worker

    /// A job handed out by [`Event::Job`] finished: its result goes to the server in the next
    /// ACKB. The server's answer arrives as [`Event::JobSettled`].
    ///
    /// # Errors
    ///
    /// [`Error::Closed`] when the session has no worker, [`Error::Protocol`] when the job is
    /// not one this worker holds.
    pub fn complete_job(&mut self, now: Instant, id: &str, result: Value) -> Result<(), Error> {
        let worker = self.worker.as_mut().ok_or(Error::Closed)?;
        if let Some(alone) = worker.complete_job(now, id, result, &mut self.stats)? {
            self.enqueue(now, Request::Work(alone));
        }
        Ok(())
    }

    /// A job handed out by [`Event::Job`] failed: a FAIL goes out at once, with the error,
    /// whether the server may retry the job, and the stack lines it stores as the job's
    /// `stacktrace` (see [`JobFailure`]).
    ///
    /// # Errors
    ///
    /// As [`complete_job`](Self::complete_job).
    ///
    /// ```
    /// use std::time::Instant;
    /// use autobatch_core::session::{JobFailure, Session, SessionConfig, WorkerConfig};
    /// let config = SessionConfig::default().worker(Some(WorkerConfig::new("q")));
    /// let mut s = Session::new(config, Instant::now()).unwrap();
    /// let failure = JobFailure::new("parse failed").stack(vec!["caused by: bad digit".into()]);
    /// // Only jobs the worker holds can be failed.
    /// assert!(s.fail_job(Instant::now(), "not-held", failure).is_err());
    /// ```
    pub fn fail_job(&mut self, now: Instant, id: &str, failure: JobFailure) -> Result<(), Error> {
        let worker = self.worker.as_mut().ok_or(Error::Closed)?;
        let JobFailure {
            error,
            unrecoverable,
            stack,
        } = failure;
        let fail = worker.fail_job(id, &error, unrecoverable, stack, &mut self.stats)?;
        self.enqueue(now, Request::Work(fail));
        Ok(())
    }

    /// The lock token the server gave with held job `id` (`None` when it gave none or the job
    /// is not held): what ExtendLock, MoveToDelayed and MoveToWait need.
    pub fn job_token(&self, id: &str) -> Option<&str> {
        self.worker.as_ref().and_then(|w| w.token(id))
    }

    /// The ids of the jobs held, sorted.
    pub fn held_jobs(&self) -> Vec<String> {
        self.worker.as_ref().map_or_else(Vec::new, |w| w.held())
    }

    /// Held job `id` leaves the worker without an ACK or FAIL: the caller settles it with a
    /// command of its own (MoveToDelayed, MoveToWait) using the returned lock token. Its slot
    /// is free for the next pull.
    ///
    /// # Errors
    ///
    /// As [`complete_job`](Self::complete_job).
    pub fn take_job(&mut self, id: &str) -> Result<Option<String>, Error> {
        self.worker.as_mut().ok_or(Error::Closed)?.take(id)
    }

    /// Pauses (`true`) or resumes pulling; held jobs go on and are settled as usual.
    pub fn set_worker_paused(&mut self, paused: bool) {
        if let Some(w) = self.worker.as_mut() {
            w.set_paused(paused);
        }
    }

    /// Whether pulling is paused.
    pub fn is_worker_paused(&self) -> bool {
        self.worker.as_ref().is_some_and(|w| w.is_paused())
    }

    /// No pull before `at` (a rate limit the processor reported); held jobs go on.
    pub fn delay_pulls_until(&mut self, at: Instant) {
        if let Some(w) = self.worker.as_mut() {
            w.pull_not_before(at);
        }
    }

    /// Jobs handed out and not yet completed or failed.
    pub fn jobs_held(&self) -> usize {
        self.worker.as_ref().map_or(0, |w| w.jobs_held())
    }

    /// Whether a pull is out. The server counts its jobs as active already, before they are
    /// [held](Self::jobs_held) here: a worker that stops waits for it to answer.
    pub fn pull_in_flight(&self) -> bool {
        self.worker.as_ref().is_some_and(|w| w.pull_in_flight())
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
        self.connected_at = now;
        if let Some(token) = self.config.token.clone() {
            // Auth goes first and alone: until its reply, the server refuses everything else.
            self.conn = Conn::Authenticating;
            let q = Queued {
                req: Request::Auth { token },
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
            // An add's reply in bunqueue's own shape is read without a tree; anything else
            // (or one that does not match its request) takes the generic way.
            let fast = PushReply::read(&frame).is_some_and(|r| self.on_push_reply(now, r));
            if !fast {
                let bytes = frame.len();
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
                    // Only after a SubscribeEvents on this connection: handed out as they
                    // come, in order, interleaved with the replies around them.
                    Ok(Incoming::Event(frame)) => {
                        self.events.push_back(Event::QueueEvent { frame, bytes });
                    }
                    Err(why) => {
                        self.reset_connection(now, FailKind::Protocol(why));
                        return;
                    }
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
        self.answered(req, &q);
        let kind = q.req.kind();
        if let Err(msg) = reply.result {
            self.on_error_reply(now, q, msg);
            return Ok(());
        }
        let response = match reply.response(kind) {
            Ok(r) => r,
            Err(e) => {
                // A success reply we cannot read: fail this request, then reset (the stream
                // itself is suspect).
                let why = e.to_string();
                self.resolve(now, q, FailKind::Protocol(why.clone()));
                return Err(why);
            }
        };
        self.on_response(now, q, response);
        Ok(())
    }

    /// The command `req` got its reply.
    fn answered(&mut self, req: u32, q: &Queued) {
        let in_flight = &self.in_flight;
        self.deadlines.remove(q.deadline, req, |r, d| {
            in_flight.get(&r).is_some_and(|q| q.deadline == d)
        });
        self.consecutive_timeouts = 0;
        self.reconnect_attempt = 0;
    }

    /// A PUSH or PUSHB reply read the fast way. Handled as [`on_reply`](Self::on_reply)
    /// would (returns `true`) when it answers an in-flight command of its kind; otherwise
    /// (`false`) nothing is touched and the frame is read the generic way, which reports it.
    fn on_push_reply(&mut self, now: Instant, reply: PushReply) -> bool {
        let req = reply.req_id;
        let response = match (self.in_flight.get(&req).map(|q| q.req.kind()), reply.ids) {
            (Some(CommandKind::Push), PushIds::One(id)) => Response::Pushed(id),
            (Some(CommandKind::PushB), PushIds::Many(ids)) => Response::PushedBatch(ids),
            _ => return false,
        };
        let Some(q) = self.in_flight.remove(&req) else {
            return false;
        };
        self.answered(req, &q);
        self.on_response(now, q, response);
        true
    }

    /// A success reply, handed to whoever made the request `q`.
    fn on_response(&mut self, now: Instant, q: Queued, response: Response) {
        let Queued { req, deadline, .. } = q;
        match req {
            Request::Auth { .. } => self.conn = Conn::Ready,
            Request::Ping => {}
            Request::User { op, .. } => self.events.push_back(Event::Done {
                op,
                result: Ok(response),
            }),
            Request::Add(a) => {
                if let Some(next) = self.producers.on_reply(now, a, response, out!(self)) {
                    self.outgoing.push_front(Queued {
                        req: Request::Add(next),
                        deadline,
                        written: true,
                    });
                }
            }
            Request::Work(w) => {
                // Work requests are made by the worker only, so it exists.
                if let Some(worker) = self.worker.as_mut() {
                    worker.on_reply(now, w, response, out!(self));
                }
            }
        }
    }

    fn on_error_reply(&mut self, now: Instant, q: Queued, msg: String) {
        self.stats.error_replies += 1;
        let Queued { req, deadline, .. } = q;
        match req {
            Request::Auth { .. } => {
                // Everything queued behind the Auth would be refused too: fail it now rather
                // than time it out, then reconnect with backoff (the token may be fixed).
                for other in self.outgoing.drain() {
                    self.resolve(now, other, FailKind::Auth(msg.clone()));
                }
                self.reset_connection(now, FailKind::Auth(msg));
            }
            Request::Add(a) => {
                if let Some(rest) = self.producers.on_error(now, a, &msg, out!(self)) {
                    self.outgoing.push_front(Queued {
                        req: Request::Add(rest),
                        deadline,
                        written: true,
                    });
                }
            }
            Request::Work(w) => {
                if let Some(worker) = self.worker.as_mut() {
                    let checks = worker.on_error(now, w, msg, out!(self));
                    self.enqueue_work(now, checks);
                }
            }
            req @ (Request::Ping | Request::User { .. }) => {
                let q = Queued {
                    req,
                    deadline,
                    written: true,
                };
                self.resolve(now, q, FailKind::Server(msg));
            }
        }
    }

    /// Resolves a command that will get no reply, with the error `why`.
    fn resolve(&mut self, now: Instant, q: Queued, why: FailKind) {
        let err = why.error(true);
        match q.req {
            Request::Auth { .. } | Request::Ping => {}
            Request::User { op, .. } => self.events.push_back(Event::Done {
                op,
                result: Err(err),
            }),
            Request::Add(a) => self.producers.resolve(now, a, err, out!(self)),
            Request::Work(w) => {
                if let Some(worker) = self.worker.as_mut() {
                    worker.resolve(now, w, err, out!(self));
                }
            }
        }
    }

    /// Every written command loses its connection: re-send what is safe to replay (see
    /// [`Replay`]), fail the rest as maybe applied.
    fn fail_in_flight(&mut self, now: Instant, why: FailKind) {
        let mut reqs: Vec<u32> = self.in_flight.keys().copied().collect();
        reqs.sort_unstable();
        self.deadlines.clear();
        self.window.reset();
        let mut resend = Vec::new();
        for req in reqs {
            let Some(q) = self.in_flight.remove(&req) else {
                continue;
            };
            let deadline = q.deadline;
            let again = match q.req {
                Request::Auth { .. } => None,
                Request::Add(a) => {
                    let since = self.connected_at;
                    let again = self.producers.on_lost(now, a, &why, since, out!(self));
                    resend.extend(again.into_iter().map(|a| Queued {
                        req: Request::Add(a),
                        deadline,
                        written: true,
                    }));
                    None
                }
                Request::User {
                    replay: Replay::Safe,
                    ..
                } if why.allows_resend() => Some(q.req),
                Request::Work(w) => match self.worker.as_mut() {
                    Some(worker) if self.hand_off => match worker.hand_off(now, w) {
                        Ok(cmd) => {
                            self.events.push_back(Event::HandOff { cmd: Box::new(cmd) });
                            None
                        }
                        Err(w) => worker.on_lost(now, w, &why, out!(self)).map(Request::Work),
                    },
                    Some(worker) => worker.on_lost(now, w, &why, out!(self)).map(Request::Work),
                    None => None,
                },
                req @ (Request::Ping | Request::User { .. }) => {
                    let q = Queued {
                        req,
                        deadline,
                        written: true,
                    };
                    self.resolve(now, q, why.clone());
                    None
                }
            };
            if let Some(req) = again {
                resend.push(Queued {
                    req,
                    deadline,
                    written: true,
                });
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
                Conn::Ready => self.window.may_write(self.in_flight.len(), now),
                // Only the Auth itself goes out before Auth succeeds.
                Conn::Authenticating => {
                    self.in_flight.is_empty()
                        && matches!(
                            self.outgoing.front(),
                            Some(Queued {
                                req: Request::Auth { .. },
                                ..
                            })
                        )
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
            let written = q.req.write(req, out);
            if let Ok(kind) = written {
                self.stats.frames_sent += 1;
                self.stats.count_command(kind);
            }
            if let Err(e) = written {
                // Only a job far over the data limit could get here; validation stops those.
                let why = FailKind::TooLarge(e.to_string());
                self.resolve(now, q, why);
                continue;
            }
            // The timeout restarts when the command is written, as in the official client; a
            // long-poll gets its whole poll time on top, however long it waited to be written.
            q.deadline = self.deadline(now) + q.req.long_poll();
            q.written = true;
            self.deadlines.insert(q.deadline, req);
            self.in_flight.insert(req, q);
            self.window.on_written(self.in_flight.len(), now);
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
    ///
    /// Every source answers in O(log n) or better: the send queue and the in-flight commands
    /// keep their deadlines ordered, so a long queue costs nothing here.
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
        consider(self.deadlines.first());
        consider(self.outgoing.next_deadline());
        consider(self.producers.poll_timeout());
        consider(self.producers.next_expiry());
        if !self.outgoing.is_empty() {
            // A waiting window matters only to commands waiting to be written.
            consider(self.window.poll_timeout());
        }
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
        self.window.handle_timeout(now);
        self.producers.handle_timeout(now);
        self.producers.expire(now, out!(self));
        if let Some(w) = self.worker.as_mut() {
            if let Some(retry) = w.handle_timeout(now, &mut self.stats) {
                self.enqueue(now, Request::Work(retry));
            }
        }
        // Written commands whose reply is overdue.
        let in_flight = &self.in_flight;
        let overdue = self.deadlines.take_due(now, |r, d| {
            in_flight.get(&r).is_some_and(|q| q.deadline == d)
        });
        for req in overdue {
            if let Some(q) = self.in_flight.remove(&req) {
                self.stats.timeouts += 1;
                self.consecutive_timeouts += 1;
                self.resolve(now, q, FailKind::Timeout { written: true });
            }
        }
        // Queued commands that never got written in time.
        for q in self.outgoing.take_expired(now) {
            self.stats.timeouts += 1;
            // A re-send was written on an earlier connection: it may have been applied.
            let written = q.written;
            self.resolve(now, q, FailKind::Timeout { written });
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
                self.enqueue(now, Request::Ping);
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
        self.producers.close(now, out!(self));
        if let Some(w) = &mut self.worker {
            w.stop();
        }
    }

    fn nothing_left(&self) -> bool {
        self.outgoing.is_empty()
            && self.in_flight.values().all(|q| q.req.is_background())
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
        let default_deadline = self.deadline(now);
        while let Some((batch, deadline)) =
            self.producers
                .poll_request(now, default_deadline, out!(self))
        {
            self.outgoing.push_back(Queued {
                req: Request::Add(batch),
                deadline,
                written: false,
            });
        }
        let connected = self.is_connected();
        if let Some(w) = self.worker.as_mut() {
            let reqs = w.poll_requests(now, connected, &mut self.stats);
            self.enqueue_work(now, reqs);
        }
        self.hand_off_queued(now);
        let (items, bytes, parked) = self.producers.pending();
        self.stats.buffered_adds = items as u64;
        self.stats.buffered_bytes = bytes as u64;
        self.stats.parked_adds = parked as u64;
        self.stats.in_flight_commands = self.in_flight.len() as u64;
        if self.closing && self.nothing_left() {
            self.finish_close();
        }
    }
}
