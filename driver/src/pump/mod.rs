//! The pump: one task per connection that moves bytes, time and operations between the
//! socket, the timer, the callers and the sans-IO [`Session`]. It makes no protocol or
//! batching decision of its own. Its task turns it (`poll_task`); an add's own poll moves it
//! too (`caller.rs`).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use autobatch_core::ops::{self, Operation};
use autobatch_core::session::{Event, JobFailure, OpId, Release, Replay, Session};
use autobatch_core::wire::{Command, Job, Response};
use futures_channel::oneshot;
use futures_io::{AsyncRead, AsyncWrite};

use crate::cmd::{Cmd, Dispatch, InFlight, JobTx, Ticket, WorkerCmd};
use crate::event_buffer::EventHook;
use crate::inbox::Receiver;
use crate::links::Shared;
use crate::options::ConnectError;
use crate::relay::ReadRelay;
use crate::reply::Reply;
use crate::runtime::{AsyncTimer, BoxFuture, Runtime};
use crate::seq_map::{seq_map, SeqMap};
use crate::stats::ClientStats;
use crate::tls::{Stream, Tls};
use crate::Error;

mod caller;

/// Size of the read buffer: replies to a window of 100 PUSHB of 50 ids fit in one read.
const READ_BUF: usize = 64 * 1024;
/// Reads per wake-up before the pump gives other work (and other tasks) a turn.
const READS_PER_TURN: usize = 16;
/// Takes from the inbox per turn while callers keep sending, before the pump writes.
const DRAINS_PER_TURN: usize = 16;
/// How long a caller may hold a duty — the read role, or writing the burst it yielded for —
/// before the pump's task does it. A caller's future that is polled once and then kept
/// without being polled (or dropped) would otherwise leave everyone's answers unread, or its
/// burst unwritten; this bounds that stall. The task's timer is moved for it at most once per
/// period, not once per add.
const CALLER_WATCH: Duration = Duration::from_millis(10);

/// The runtime's socket, plain or wrapped in TLS.
type Socket<R> = Stream<<R as Runtime>::Socket>;

/// A connect attempt (TCP, then the TLS handshake if any) and its deadline.
type Connecting<R> = (
    BoxFuture<Result<Socket<R>, ConnectError>>,
    Pin<Box<dyn AsyncTimer>>,
);

/// Who the socket's "readable" goes to (through the [`ReadRelay`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reader {
    /// The pump's task.
    Task,
    /// A caller waiting for the answer of this ticket (see `direct.rs`).
    Caller(Ticket),
}

/// Who reads the socket in a turn.
pub(crate) enum ReadBy<'a> {
    /// The pump's task, with the turn's own context.
    Task,
    /// The caller of the ticket, polled with this waker.
    Caller(Ticket, &'a Waker),
    /// Nobody: the socket is left to its current reader.
    Nobody,
    /// Whoever holds the connection, for its reader, which may have been told "readable" and
    /// found the connection held: what the socket holds is read, the role left where it is.
    ForReader,
}

struct Waiter {
    ticket: Ticket,
    reply: Reply,
    /// For a job handle's request: released when the waiter goes.
    _guard: Option<InFlight>,
}

/// The pump of one connection, a hand-written future so that the channel, the socket, the
/// connect attempt and the timer are all watched at once, without a select macro.
pub(crate) struct Pump<R: Runtime> {
    runtime: R,
    session: Session,
    host: String,
    port: u16,
    connect_timeout: std::time::Duration,
    /// TLS settings, when the connection is wrapped in TLS.
    tls: Option<Tls>,
    shared: Arc<Shared>,
    rx: Receiver,
    rx_open: bool,
    /// Commands taken from the inbox in one go, handled in order (kept for its capacity).
    inbound: Vec<Cmd>,
    socket: Option<Socket<R>>,
    connecting: Option<Connecting<R>>,
    timer: Option<Pin<Box<dyn AsyncTimer>>>,
    timer_at: Option<Instant>,
    /// The deadline the runtime's timer is set to: never later than the next deadline. A
    /// deadline that moves later (every add pushes the command timeout and the next ping on)
    /// leaves the timer alone; it fires early once and is set again then, because setting a
    /// timer is a timer-queue operation, and on async-io (smol, async-std) a wake-up of the
    /// reactor thread too: once per add would be most of an add's cost there.
    armed_at: Option<Instant>,
    /// The task's waker as of its last poll. A caller's poll registers it for everything it
    /// starts but its own read (writes, the timer, a connect), so that what it leaves
    /// unfinished wakes the task.
    task_waker: Option<Waker>,
    /// Who reads the socket.
    reader: Reader,
    /// The socket is read with its waker only, which passes "readable" on to the reader.
    relay: Arc<ReadRelay>,
    relay_waker: Waker,
    /// While a caller reads or owes a write: when the task does it anyway (see
    /// [`CALLER_WATCH`]).
    caller_watch: Option<Instant>,
    /// The last caller that found another reading while its own answer was out: the read
    /// role passes to it, not to the task, when the reader's answer comes first.
    standby: Option<(Ticket, Waker)>,
    /// A caller's turn left something only the task does: a connect to start, a timer that
    /// fired, the end of the session.
    task_needed: bool,
    /// The ticket whose caller's poll runs this turn: its answer wakes nobody (that caller
    /// looks at its slot right after).
    driving: Option<Ticket>,
    /// A caller gave the session an add and no turn has run since: the next caller's poll
    /// runs one, to write it.
    flush_owed: bool,
    /// Adds come while others are out: each yields once before it is written, so that the
    /// rest of its wave joins it. Off while adds come one at a time, each then written at
    /// once (a yield costs a reschedule, and on async-io a reactor tick).
    coalesce: bool,
    /// Adds given to the session by callers since the last turn that wrote.
    adds_since_flush: u32,
    /// Bytes to write, from `out_pos` on.
    out: Vec<u8>,
    out_pos: usize,
    /// Bytes were written and `poll_flush` has not yet completed since: a buffering stream
    /// (TLS, a `BufWriter`) may hold them until flushed.
    unflushed: bool,
    /// The session is done: the socket is being closed (`poll_close`) before the pump ends.
    shutting_down: bool,
    read_buf: Box<[u8]>,
    waiters: SeqMap<OpId, Waiter>,
    tickets: SeqMap<Ticket, OpId>,
    closers: Vec<oneshot::Sender<()>>,
    /// Until the first request is answered: who waits for `connect` to finish.
    startup: Option<(OpId, oneshot::Sender<Result<(), ConnectError>>)>,
    /// Where worker jobs go.
    jobs: Option<JobTx>,
    /// A `QueueEvents` connection's subscription (see `events.rs`).
    events: Option<EventHook>,
    connected_once: bool,
    /// `connect` was told it failed: nobody holds a client, so the pump stops.
    startup_failed: bool,
    /// One broker of several: a failed first connect is reported to `connect` but the pump
    /// keeps trying (with the reconnect backoff), so the broker joins once it is up.
    keep_trying: bool,
    /// This link's index among the client's brokers, sent with every worker job.
    link: usize,
    /// With `keep_trying`, the first Ping while it is unanswered: a close withdraws it, so a
    /// broker that never came up does not hold the close for a command timeout.
    probe: Option<OpId>,
    /// [`ClientOptions::shared_storage`](crate::ClientOptions::shared_storage): with several
    /// brokers, written custom-id adds are given back on a loss too, for a live broker.
    shared_storage: bool,
    /// Closed while its broker was down (one of several): the pump ends without waiting.
    abandoned: bool,
}

pub(crate) struct PumpParts<R: Runtime> {
    pub(crate) runtime: R,
    pub(crate) session: Session,
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) connect_timeout: std::time::Duration,
    pub(crate) tls: Option<Tls>,
    pub(crate) shared: Arc<Shared>,
    pub(crate) rx: Receiver,
    pub(crate) jobs: Option<JobTx>,
    pub(crate) events: Option<EventHook>,
    pub(crate) keep_trying: bool,
    pub(crate) link: usize,
    pub(crate) shared_storage: bool,
}

impl<R: Runtime> Pump<R> {
    /// A pump whose first request is a Ping: its answer proves the connection (and the token),
    /// and is reported through the returned receiver.
    pub(crate) fn new(parts: PumpParts<R>) -> (Self, oneshot::Receiver<Result<(), ConnectError>>) {
        let PumpParts {
            runtime,
            mut session,
            host,
            port,
            connect_timeout,
            tls,
            shared,
            rx,
            jobs,
            events,
            keep_trying,
            link,
            shared_storage,
        } = parts;
        let (tx, started) = oneshot::channel();
        let relay = Arc::new(ReadRelay::default());
        // One broker of several sharing one store: a worker's results go to another broker
        // while this one is down (see `settle.rs`).
        session.hand_off_settlements(keep_trying && shared_storage);
        let probe = session
            .request(runtime.now(), Command::Ping)
            .expect("a new session takes requests");
        let pump = Pump {
            runtime,
            session,
            host,
            port,
            connect_timeout,
            tls,
            shared,
            rx,
            rx_open: true,
            inbound: Vec::new(),
            socket: None,
            connecting: None,
            timer: None,
            timer_at: None,
            armed_at: None,
            task_waker: None,
            reader: Reader::Task,
            relay: relay.clone(),
            relay_waker: relay.waker(),
            caller_watch: None,
            standby: None,
            task_needed: false,
            driving: None,
            flush_owed: false,
            // On: a connection's first adds may well be a wave, and a first sequential add
            // turns it off (one reschedule, once).
            coalesce: true,
            adds_since_flush: 0,
            out: Vec::with_capacity(READ_BUF),
            out_pos: 0,
            unflushed: false,
            shutting_down: false,
            read_buf: vec![0; READ_BUF].into_boxed_slice(),
            waiters: seq_map(),
            tickets: seq_map(),
            closers: Vec::new(),
            startup: Some((probe, tx)),
            jobs,
            events,
            connected_once: false,
            startup_failed: false,
            keep_trying,
            link,
            probe: keep_trying.then_some(probe),
            shared_storage,
            abandoned: false,
        };
        (pump, started)
    }

    fn stats(&self) -> ClientStats {
        ClientStats::of(&self.session)
    }

    fn waiting(&mut self, op: OpId, ticket: Ticket, reply: Reply) {
        self.tickets.insert(ticket, op);
        self.waiters.insert(
            op,
            Waiter {
                ticket,
                reply,
                _guard: None,
            },
        );
    }

    /// Sends a worker's own command for a job it gave up holding; its answer is only logged.
    fn settle_elsewhere(&mut self, now: Instant, id: &str, cmd: Command) {
        if let Err(e) = self.session.request_raw(now, cmd, Replay::NotSafe) {
            tracing::warn!(job = %id, error = %e, "handing a job back failed");
        }
    }

    fn take_job(&mut self, id: &str) -> Option<Option<String>> {
        match self.session.take_job(id) {
            Ok(token) => Some(token),
            Err(e) => {
                tracing::warn!(job = %id, error = %e, "job is not held");
                None
            }
        }
    }

    /// Withdraws the operation of `ticket` if it has not been written; returns whether it was.
    fn withdraw(&mut self, ticket: Ticket) -> bool {
        if let Some(&op) = self.tickets.get(&ticket) {
            if self.session.cancel(op) {
                self.tickets.remove(&ticket);
                self.waiters.remove(&op);
                return true;
            }
        }
        false
    }

    fn on_cmd(&mut self, now: Instant, cmd: Cmd) {
        match cmd {
            Cmd::Add {
                ticket,
                queue,
                job,
                reply,
            } => {
                let added = self.session.add_encoded(now, &queue, job);
                self.wait_for(added, ticket, reply);
            }
            Cmd::AddBulk {
                ticket,
                queue,
                jobs,
                reply,
            } => {
                let added = self.session.add_bulk(now, &queue, jobs);
                self.wait_for(added, ticket, reply);
            }
            Cmd::Request {
                ticket,
                cmd,
                replay,
                reply,
            } => {
                let sent = match replay {
                    None => self.session.request(now, cmd),
                    Some(replay) => self.session.request_raw(now, cmd, replay),
                };
                self.wait_for(sent, ticket, reply);
            }
            Cmd::JobRequest {
                cmd,
                replay,
                reply,
                guard,
            } => match self.session.request_raw(now, cmd, replay) {
                Ok(op) => {
                    let waiter = Waiter {
                        ticket: 0,
                        reply,
                        _guard: Some(guard),
                    };
                    self.waiters.insert(op, waiter);
                }
                Err(e) => {
                    let _ = reply.send(Err(e));
                }
            },
            Cmd::Cancel(ticket) => {
                self.caller_gone(ticket);
                self.withdraw(ticket);
            }
            Cmd::Withdraw(ticket, reply) => {
                let _ = reply.send(self.withdraw(ticket));
            }
            Cmd::Stats(reply) => {
                let _ = reply.send(self.stats());
            }
            Cmd::Close(reply) => self.close(now, reply),
            Cmd::Worker(w) => self.on_worker_cmd(now, w),
        }
    }

    /// A caller's call was taken by the session (its outcome arrives for `ticket`), or
    /// refused at once.
    fn wait_for(&mut self, taken: Result<OpId, Error>, ticket: Ticket, reply: Reply) {
        match taken {
            Ok(op) => self.waiting(op, ticket, reply),
            Err(e) => {
                let _ = reply.send(Err(e));
            }
        }
    }

    /// What a worker asks of the jobs it holds.
    fn on_worker_cmd(&mut self, now: Instant, cmd: WorkerCmd) {
        match cmd {
            WorkerCmd::Delay { id, delay } => {
                if let Some(token) = self.take_job(&id) {
                    let mut op = ops::MoveToDelayed::new(id.as_str(), delay);
                    op.token = token;
                    self.settle_elsewhere(now, &id, op.to_command());
                }
            }
            WorkerCmd::RateLimited { id, wait } => {
                self.move_to_wait(now, &id);
                self.session.delay_pulls_until(now + wait);
            }
            WorkerCmd::ReleaseHeld(reply) => {
                let held = self.session.held_jobs();
                for id in &held {
                    self.move_to_wait(now, id);
                }
                let _ = reply.send(held);
            }
            WorkerCmd::Forget(id) => {
                let _ = self.session.take_job(&id);
            }
            WorkerCmd::Pause(paused) => self.session.set_worker_paused(paused),
            WorkerCmd::JobsHeld(reply) => {
                // A pull still out counts: the server has made its jobs active already, and
                // a close that stopped waiting now would find them held a moment later.
                // A pull out on a lost connection brings nothing: the server hands its jobs
                // back when the connection closes.
                let on_their_way =
                    usize::from(self.session.pull_in_flight() && self.shared.is_connected());
                let _ = reply.send(self.session.jobs_held() + on_their_way);
            }
            WorkerCmd::Complete { id, result } => {
                if let Err(e) = self.session.complete_job(now, &id, result) {
                    tracing::warn!(job = %id, error = %e, "completing a job failed");
                }
            }
            WorkerCmd::Fail {
                id,
                error,
                stack,
                unrecoverable,
            } => {
                let failure = JobFailure::new(error)
                    .unrecoverable(unrecoverable)
                    .stack(stack);
                if let Err(e) = self.session.fail_job(now, &id, failure) {
                    tracing::warn!(job = %id, error = %e, "failing a job failed");
                }
            }
        }
    }

    /// Held job `id` goes back to waiting, for this worker or another to take.
    fn move_to_wait(&mut self, now: Instant, id: &str) {
        if let Some(token) = self.take_job(id) {
            let mut op = ops::MoveToWait::new(id);
            op.token = token;
            self.settle_elsewhere(now, id, op.to_command());
        }
    }

    fn close(&mut self, now: Instant, reply: oneshot::Sender<()>) {
        if let Some(probe) = self.probe.take() {
            self.session.cancel(probe);
        }
        if !self.session.is_closed() {
            tracing::debug!(addr = %self.shared.addr, "closing: flushing pending work");
        }
        self.closers.push(reply);
        self.session.close(now);
        if self.keep_trying && !self.shared.is_connected() {
            // One broker of several, and down: what it still holds cannot be
            // written before it comes back, which a close does not wait for (the
            // adds it had were given back when it went down).
            tracing::debug!(addr = %self.shared.addr, "closing a lost connection: nothing more is waited for");
            self.abandoned = true;
        }
    }

    fn on_event(&mut self, event: Event) {
        match event {
            Event::Connect => self.connect(),
            Event::Disconnect => {
                if self.session.is_closed() {
                    // The end: the socket is closed gracefully (`poll_shutdown`) once this
                    // turn's output is written.
                    self.connecting = None;
                } else {
                    // The session gave up on this connection (timeouts, a protocol error):
                    // nothing more is owed to the peer, the socket is dropped.
                    self.drop_socket();
                    let now = self.runtime.now();
                    self.give_back(now);
                }
            }
            Event::Done { op, result } => self.done(op, result),
            Event::Job { job } => self.hand_to_worker(*job),
            Event::Drained => self.dispatch(Dispatch::Drained),
            Event::JobSettled { id, result } => self.settled(id, result),
            Event::QueueEvent { frame, bytes } => match &mut self.events {
                Some(hook) => hook.on_frame(&frame, bytes),
                None => tracing::debug!("event frame on a connection that did not subscribe"),
            },
            Event::HandOff { cmd } => self.dispatch(Dispatch::HandOff(cmd)),
            Event::Closed => {
                // `close()` returns once the socket is closed too (`end`).
                tracing::debug!(addr = %self.shared.addr, "closed");
            }
            // An event a newer core may add: nothing this driver must act on.
            other => tracing::trace!(event = ?other, "unhandled session event"),
        }
    }

    /// Starts connecting, within the connect timeout (TCP, then TLS when configured).
    fn connect(&mut self) {
        self.task_needed = true;
        if self.connected_once {
            tracing::info!(addr = %self.shared.addr, "reconnecting");
        } else {
            tracing::debug!(addr = %self.shared.addr, "connecting");
        }
        let deadline = self.runtime.now() + self.connect_timeout;
        let timer = self.runtime.new_timer(deadline);
        let tcp = self.runtime.connect(&self.host, self.port);
        let tls = self.tls.clone();
        let fut: BoxFuture<Result<Socket<R>, ConnectError>> = Box::pin(async move {
            let socket = tcp.await?;
            match tls {
                None => Ok(Stream::Plain(socket)),
                Some(tls) => Ok(tls.handshake(socket).await?),
            }
        });
        self.connecting = Some((fut, timer));
    }

    /// Operation `op` ended: its caller, the connection's own startup or probe, or the
    /// event subscription learns the outcome.
    fn done(&mut self, op: OpId, result: Result<Response, Error>) {
        if self.probe == Some(op) {
            self.probe = None;
        }
        if let Some((probe, _)) = &self.startup {
            if *probe == op {
                let (_, tx) = self.startup.take().expect("checked");
                self.startup_failed = result.is_err() && !self.keep_trying;
                let _ = tx.send(result.map(|_| ()).map_err(ConnectError::Handshake));
                return;
            }
        }
        if let Some(hook) = &mut self.events {
            if hook.on_done(op, &result) {
                return;
            }
        }
        if let Some(w) = self.waiters.remove(&op) {
            if w.ticket != 0 {
                self.tickets.remove(&w.ticket);
            }
            if let Err(e) = &result {
                tracing::debug!(op = op.get(), error = %e, "operation failed");
            }
            if w.ticket != 0 && self.driving == Some(w.ticket) {
                let _ = w.reply.send_quiet(result);
            } else {
                let _ = w.reply.send(result);
            }
        }
    }

    /// A pulled job goes to the worker's dispatcher; with nobody left to process it, it is
    /// failed so that the server retries it.
    fn hand_to_worker(&mut self, job: Job) {
        let token = self.session.job_token(&job.id).map(str::to_owned);
        let undelivered = match &self.jobs {
            Some(tx) => match tx.unbounded_send((self.link, Dispatch::Job(job, token))) {
                Ok(()) => None,
                Err(e) => match e.into_inner().1 {
                    Dispatch::Job(job, _) => Some(job),
                    _ => None,
                },
            },
            None => Some(job),
        };
        if let Some(job) = undelivered {
            // Nobody processes it any more: hand it back as failed so it is retried.
            let now = self.runtime.now();
            let _ = self
                .session
                .fail_job(now, &job.id, JobFailure::new("worker stopped"));
        }
    }

    /// A job's ACK or FAIL was answered.
    fn settled(&mut self, id: String, result: Result<bool, Error>) {
        match result {
            Ok(true) => tracing::trace!(job = %id, "job settled"),
            Ok(false) => {
                tracing::debug!(job = %id, "job was already finalised by the server");
                self.dispatch(Dispatch::LockLost(id));
            }
            Err(Error::Server(e)) if e.kind() == autobatch_core::ServerErrorKind::LockToken => {
                tracing::debug!(job = %id, error = %e, "job's lock was gone");
                self.dispatch(Dispatch::LockLost(id));
            }
            Err(e) => {
                tracing::warn!(job = %id, error = %e, "job could not be settled");
                self.dispatch(Dispatch::SettleFailed(id, e));
            }
        }
    }

    /// Tells the worker's dispatcher, if it still listens (a report, never waited for).
    fn dispatch(&self, what: Dispatch) {
        if let Some(tx) = &self.jobs {
            let _ = tx.unbounded_send((self.link, what));
        }
    }

    fn drop_socket(&mut self) {
        self.shared.set_connected(false);
        // A new socket is read by the task first; nothing is registered on it yet.
        self.reader = Reader::Task;
        self.caller_watch = None;
        self.task_needed = true;
        if self.socket.take().is_some() {
            tracing::debug!(addr = %self.shared.addr, "disconnected");
        }
        self.connecting = None;
        self.out.clear();
        self.out_pos = 0;
        self.unflushed = false;
    }

    fn lost(&mut self, now: Instant, why: &dyn std::fmt::Display) {
        tracing::warn!(addr = %self.shared.addr, error = %why, "connection lost");
        self.drop_socket();
        self.session.handle_disconnected(now);
        self.give_back(now);
    }

    /// One broker of several, its connection lost: every add not written to it resolves at
    /// once as not applied (and, where the brokers share storage, every written custom-id
    /// add as maybe applied), so that its caller sends it to a live broker instead of
    /// waiting here for a reconnect or the command timeout.
    fn give_back(&mut self, now: Instant) {
        if !self.keep_trying || !self.closers.is_empty() || self.session.is_closed() {
            return;
        }
        let release = if self.shared_storage {
            Release::WrittenCustomIdsToo
        } else {
            Release::Unwritten
        };
        let n = self.session.release_unwritten(now, release);
        if n > 0 {
            tracing::debug!(addr = %self.shared.addr, adds = n, "connection lost: adds given back for another broker");
        }
    }

    /// One turn: every input that is ready, then one round of transmit/events/timeout.
    /// `cx` is the task's context (or one made from its waker, on a caller's poll): writes,
    /// the connect attempt and the timer wake it. `read` says who reads the socket.
    /// Returns whether anything happened (so another turn may be useful).
    pub(crate) fn turn(&mut self, cx: &mut Context<'_>, read: ReadBy<'_>) -> bool {
        let now = self.runtime.now();
        if std::mem::take(&mut self.flush_owed) {
            // A yielded add that leaves alone had no company to wait for.
            self.coalesce = self.adds_since_flush > 1;
            self.adds_since_flush = 0;
            if self.reader == Reader::Task {
                self.caller_watch = None;
            }
        }
        let mut busy = self.take_commands(now);
        busy |= self.poll_connecting(cx, now);
        busy |= match read {
            ReadBy::Task if !self.task_reads(now) => false,
            ReadBy::Task => {
                self.reader = Reader::Task;
                self.caller_watch = None;
                self.relay.pass_to(cx.waker());
                self.read_in(now)
            }
            ReadBy::Caller(ticket, waker) => {
                self.relay.pass_to(waker);
                let got = self.read_in(now);
                if self.socket.is_some() {
                    self.reader = Reader::Caller(ticket);
                    self.watch_caller(now);
                }
                got
            }
            ReadBy::ForReader => self.read_in(now),
            ReadBy::Nobody => false,
        };

        // Time.
        if self.timer_at.is_some_and(|t| t <= now) {
            self.timer_at = None;
            self.session.handle_timeout(now);
        }

        // Outputs, in the contract's order.
        let before = self.out.len();
        if self.session.poll_transmit(now, &mut self.out) {
            tracing::trace!(bytes = self.out.len() - before, "transmit");
        }
        while let Some(event) = self.session.poll_event() {
            busy |= matches!(
                event,
                Event::Connect | Event::Disconnect | Event::Job { .. }
            );
            self.on_event(event);
        }
        busy |= self.write(cx, now);
        busy |= self.arm_timer(cx, now);
        busy
    }

    /// Callers' commands: everything queued, so a burst of adds joins one batch. Taken again
    /// while more came in meanwhile: callers on other threads may still be sending the rest
    /// of their burst (bounded, so a flood cannot hold back the socket).
    fn take_commands(&mut self, now: Instant) -> bool {
        let mut busy = false;
        let mut takes = 0;
        while self.rx_open && takes < DRAINS_PER_TURN {
            takes += 1;
            let open = self.rx.drain(&mut self.inbound);
            let mut cmds = std::mem::take(&mut self.inbound);
            let got = !cmds.is_empty();
            busy |= got;
            for cmd in cmds.drain(..) {
                self.on_cmd(now, cmd);
            }
            self.inbound = cmds;
            if !open {
                // Every handle is gone: finish what was asked, then stop.
                self.rx_open = false;
                self.session.close(now);
                busy = true;
            }
            if !got {
                break;
            }
        }
        busy
    }

    /// A connect attempt, if one is under way: its socket, or its failure.
    fn poll_connecting(&mut self, cx: &mut Context<'_>, now: Instant) -> bool {
        let Some((fut, timer)) = &mut self.connecting else {
            return false;
        };
        let outcome = match fut.as_mut().poll(cx) {
            Poll::Ready(r) => r,
            Poll::Pending => match timer.as_mut().poll(cx) {
                Poll::Ready(()) => Err(ConnectError::Timeout),
                Poll::Pending => return false,
            },
        };
        self.connecting = None;
        match outcome {
            Ok(socket) => self.connected(socket, now),
            Err(e) => self.connect_failed(e, now),
        }
        true
    }

    fn connected(&mut self, socket: Socket<R>, now: Instant) {
        tracing::info!(addr = %self.shared.addr, "connected");
        self.connected_once = true;
        self.socket = Some(socket);
        self.shared.set_connected(true);
        self.out.clear();
        self.out_pos = 0;
        self.unflushed = false;
        self.session.handle_connected(now);
        if self.keep_trying && self.startup.is_none() {
            // A reconnect: the broker gets new work once it answers this (see
            // `Shared::has_answered`); its answer goes to nobody.
            let _ = self.session.request(now, Command::Ping);
        }
        if let Some(hook) = &mut self.events {
            hook.on_connected(&mut self.session, now);
        }
    }

    fn connect_failed(&mut self, e: ConnectError, now: Instant) {
        match &e {
            // Not transient: say so loudly (reconnects still retry, in case the server's
            // certificate is being replaced).
            ConnectError::Tls(t) if t.is_certificate_problem() => {
                tracing::error!(addr = %self.shared.addr, error = %e, "server certificate refused");
            }
            _ => tracing::warn!(addr = %self.shared.addr, error = %e, "connect failed"),
        }
        self.session.handle_connect_failed(now);
        if !self.connected_once {
            // The first attempt decides `connect`: report and stop (one broker of several:
            // report and keep trying).
            if let Some((_, tx)) = self.startup.take() {
                self.startup_failed = !self.keep_trying;
                let _ = tx.send(Err(e));
            }
        }
    }

    /// Bytes in, in large chunks. The socket is polled with the relay's waker, which passes
    /// "readable" on to the current reader.
    fn read_in(&mut self, now: Instant) -> bool {
        let Some(socket) = &mut self.socket else {
            return false;
        };
        self.relay.reading();
        let mut cx = Context::from_waker(&self.relay_waker);
        let mut got = false;
        for _ in 0..READS_PER_TURN {
            match Pin::new(&mut *socket).poll_read(&mut cx, &mut self.read_buf) {
                Poll::Ready(Ok(0)) => {
                    self.lost(now, &"closed by the server");
                    return true;
                }
                Poll::Ready(Ok(n)) => {
                    // Before the replies go out, so a caller woken by one sees it.
                    self.shared.note_read();
                    self.session.handle_input(now, &self.read_buf[..n]);
                    got = true;
                }
                Poll::Ready(Err(e)) => {
                    self.lost(now, &e);
                    return true;
                }
                Poll::Pending => return got,
            }
        }
        true
    }

    /// Starts the watch on a caller's duty, unless one runs.
    pub(super) fn watch_caller(&mut self, now: Instant) {
        if self.caller_watch.is_none_or(|w| w <= now) {
            self.caller_watch = Some(now + CALLER_WATCH);
        }
    }

    /// Sets the timer for the next deadline (the session's, or the read watch's while a
    /// caller reads), only when it moves earlier than the timer or the timer has passed
    /// (see `armed_at`). Returns whether something is due now.
    pub(super) fn arm_timer(&mut self, cx: &mut Context<'_>, now: Instant) -> bool {
        let at = self.session.poll_timeout();
        if at.is_some_and(|at| at <= now) {
            self.session.handle_timeout(now);
            return true;
        }
        self.timer_at = at;
        // The watch matters while a caller owes a read or a write.
        let watch = match self.reader {
            Reader::Caller(_) => self.caller_watch,
            Reader::Task if self.flush_owed => self.caller_watch,
            Reader::Task => None,
        };
        let Some(due) = [at, watch].into_iter().flatten().min() else {
            return false;
        };
        if self.armed_at.is_none_or(|a| due < a || a <= now) {
            self.armed_at = Some(due);
            match &mut self.timer {
                Some(t) => t.as_mut().reset(due),
                None => self.timer = Some(self.runtime.new_timer(due)),
            }
        }
        let fired = self
            .timer
            .as_mut()
            .is_some_and(|t| t.as_mut().poll(cx).is_ready());
        // On a caller's poll a fired timer is not registered again: the task must turn.
        self.task_needed |= fired;
        fired
    }

    /// Writes what is buffered, usually in one call, then flushes it (the futures-io contract:
    /// a stream may hold written bytes until `poll_flush`). Returns whether the connection
    /// changed.
    fn write(&mut self, cx: &mut Context<'_>, now: Instant) -> bool {
        let Some(socket) = &mut self.socket else {
            // Nothing may be written while disconnected; the session keeps its commands.
            self.out.clear();
            self.out_pos = 0;
            return false;
        };
        while self.out_pos < self.out.len() {
            match Pin::new(&mut *socket).poll_write(cx, &self.out[self.out_pos..]) {
                Poll::Ready(Ok(0)) => {
                    self.lost(now, &"write returned 0");
                    return true;
                }
                Poll::Ready(Ok(n)) => {
                    self.out_pos += n;
                    self.unflushed = true;
                }
                Poll::Ready(Err(e)) => {
                    self.lost(now, &e);
                    return true;
                }
                Poll::Pending => return false,
            }
        }
        self.out.clear();
        self.out_pos = 0;
        if self.unflushed {
            match Pin::new(&mut *socket).poll_flush(cx) {
                Poll::Ready(Ok(())) => self.unflushed = false,
                Poll::Ready(Err(e)) => {
                    self.lost(now, &e);
                    return true;
                }
                // Woken when the stream can go on; the next turn flushes again.
                Poll::Pending => {}
            }
        }
        false
    }

    /// Ends the connection the futures-io way: what is still buffered is written, then
    /// `poll_close` flushes and shuts the stream down (a TLS stream sends its close_notify).
    /// Gives up at the close deadline, or on an error: the socket is then just dropped.
    fn poll_shutdown(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        // Callers may still ask for stats or close (and wait for the end); anything else
        // the closed session refuses.
        loop {
            let open = self.rx.drain(&mut self.inbound);
            let mut cmds = std::mem::take(&mut self.inbound);
            let now = self.runtime.now();
            for cmd in cmds.drain(..) {
                self.on_cmd(now, cmd);
            }
            self.inbound = cmds;
            if !open || self.rx.park(cx.waker()) {
                break;
            }
        }
        let Some(socket) = &mut self.socket else {
            return Poll::Ready(());
        };
        let done = loop {
            if self.out_pos < self.out.len() {
                match Pin::new(&mut *socket).poll_write(cx, &self.out[self.out_pos..]) {
                    Poll::Ready(Ok(n)) if n > 0 => {
                        self.out_pos += n;
                        continue;
                    }
                    Poll::Ready(_) => break true,
                    Poll::Pending => break false,
                }
            }
            match Pin::new(&mut *socket).poll_close(cx) {
                Poll::Ready(Ok(())) => break true,
                Poll::Ready(Err(e)) => {
                    tracing::debug!(addr = %self.shared.addr, error = %e, "closing the socket failed");
                    break true;
                }
                Poll::Pending => break false,
            }
        };
        let timed_out = !done
            && self
                .timer
                .as_mut()
                .is_some_and(|t| t.as_mut().poll(cx).is_ready());
        if done || timed_out {
            if timed_out {
                tracing::debug!(addr = %self.shared.addr, "closing the socket timed out");
            }
            self.socket = None;
            self.out.clear();
            self.out_pos = 0;
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }

    fn finished(&self) -> bool {
        self.session.is_closed() || self.startup_failed || self.abandoned
    }
}

impl<R: Runtime> Pump<R> {
    /// The task's poll: turns until nothing more is ready, then sleeps on the inbox, the
    /// socket (when no caller reads it) and the timer; at the end, closes the socket.
    pub(crate) fn poll_task(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        match &self.task_waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => self.task_waker = Some(cx.waker().clone()),
        }
        self.task_needed = false;
        if !self.shutting_down {
            // A bounded number of turns per wake-up keeps the pump fair to other tasks.
            let mut turns = 0;
            loop {
                let busy = self.turn(cx, ReadBy::Task);
                if self.finished() {
                    self.begin_shutdown();
                    break;
                }
                if !busy {
                    // Asleep on the inbox only if nothing came in during the turn (a send
                    // then wakes it); otherwise another turn takes what came.
                    if !self.rx_open || self.rx.park(cx.waker()) {
                        self.task_needed = false;
                        return Poll::Pending;
                    }
                    continue;
                }
                turns += 1;
                if turns == 64 {
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
            }
        }
        match self.poll_shutdown(cx) {
            Poll::Ready(()) => {
                self.end();
                Poll::Ready(())
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<R: Runtime> Pump<R> {
    /// The session is over: record the final stats and give closing the socket at most the
    /// connect timeout.
    fn begin_shutdown(&mut self) {
        self.shutting_down = true;
        *self
            .shared
            .final_stats
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(self.stats());
        if self.socket.is_some() {
            let deadline = self.runtime.now() + self.connect_timeout;
            match &mut self.timer {
                Some(t) => t.as_mut().reset(deadline),
                None => self.timer = Some(self.runtime.new_timer(deadline)),
            }
            self.timer_at = None;
            self.armed_at = Some(deadline);
        }
    }

    /// Ends the connection without closing anything gracefully (its state is not to be
    /// trusted): every caller still waiting resolves as closed.
    pub(crate) fn abandon(&mut self) {
        tracing::error!(addr = %self.shared.addr, "connection state lost to a panic: ending the connection");
        self.end();
    }

    fn end(&mut self) {
        self.shared.set_connected(false);
        // Whatever is still waiting resolves as closed (its sender is dropped).
        self.waiters.clear();
        self.tickets.clear();
        for c in self.closers.drain(..) {
            let _ = c.send(());
        }
        self.rx.close();
        self.socket = None;
        self.jobs = None;
        if let Some(hook) = &mut self.events {
            hook.on_end();
        }
    }
}
