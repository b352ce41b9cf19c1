//! The event loop: one thread, a virtual clock, a seeded RNG, and a heap of timed events.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

use autobatch_core::batch::OverflowPolicy;
use autobatch_core::session::{Event, JobFailure, OpId, Session, SessionConfig};
use autobatch_core::wire::{Command, JobOptions, JobSpec, Response, Value};
use autobatch_core::Error;

use super::broker::{Broker, Handled, Request};
use super::invariants::{Ledger, OpKind, OpRec, OutcomeCounts, WireWatch};
use super::network::{ConnId, Dir, Net};
use super::workload::{custom_id, Action, Scenario};
use super::Rng;

/// Counts of the faults injected (and of what they caused) in one run or a campaign.
#[derive(Debug, Clone, Default)]
pub struct FaultCounts {
    /// Connections cut by the network.
    pub cuts: u64,
    /// ... while bytes were still in flight on them (mid-frame or mid-batch).
    pub cuts_mid_write: u64,
    /// Chunks lost to cuts.
    pub chunks_lost: u64,
    /// Connection attempts refused.
    pub connect_failures: u64,
    /// "Internal server error" replies.
    pub internal_errors: u64,
    /// ... PUSHBs that kept a prefix before the error.
    pub partial_pushb: u64,
    /// Replies dropped after applying the request.
    pub dropped_applied: u64,
    /// Replies dropped without applying the request.
    pub dropped_unapplied: u64,
    /// PUSHBs refused for one item (`jobs[i]: …`).
    pub invalid_items: u64,
    /// Durable pushes refused because the broker's commit failed.
    pub failed_commits: u64,
    /// Broker restarts that lost memory.
    pub restarts_memory: u64,
    /// Broker restarts that kept persisted jobs.
    pub restarts_persistent: u64,
    /// Live jobs lost in restarts.
    pub jobs_lost: u64,
    /// Client stalls (clock jumps).
    pub stalls: u64,
    /// Hostile frames sent to clients.
    pub hostile: u64,
    /// Bursts of adds near the frame limit (eight of 8.4 MB).
    pub huge_bursts: u64,
    /// Commands the clients timed out.
    pub client_timeouts: u64,
    /// Items the clients re-sent.
    pub client_resends: u64,
}

impl FaultCounts {
    /// Adds `o` into `self`.
    pub fn add(&mut self, o: &FaultCounts) {
        self.cuts += o.cuts;
        self.cuts_mid_write += o.cuts_mid_write;
        self.chunks_lost += o.chunks_lost;
        self.connect_failures += o.connect_failures;
        self.internal_errors += o.internal_errors;
        self.partial_pushb += o.partial_pushb;
        self.dropped_applied += o.dropped_applied;
        self.dropped_unapplied += o.dropped_unapplied;
        self.invalid_items += o.invalid_items;
        self.failed_commits += o.failed_commits;
        self.restarts_memory += o.restarts_memory;
        self.restarts_persistent += o.restarts_persistent;
        self.jobs_lost += o.jobs_lost;
        self.stalls += o.stalls;
        self.hostile += o.hostile;
        self.huge_bursts += o.huge_bursts;
        self.client_timeouts += o.client_timeouts;
        self.client_resends += o.client_resends;
    }
}

/// What one run did.
#[derive(Debug, Clone, Default)]
pub struct SimReport {
    /// The seed.
    pub seed: u64,
    /// Events processed.
    pub events: u64,
    /// Virtual time at the end.
    pub virtual_time: Duration,
    /// Operations made.
    pub ops: u64,
    /// Outcomes.
    pub outcomes: OutcomeCounts,
    /// Faults injected.
    pub faults: FaultCounts,
    /// Worker jobs finished by the workload.
    pub jobs_finished: u64,
    /// Largest batched PUSHB seen on the wire.
    pub max_batch_seen: usize,
    /// Whether the run had no fault at all.
    pub lossless: bool,
    /// K1 (fixed; a run with one fails): worker completions reported applied (`JobSettled Ok(true)`) that the
    /// broker never applied.
    pub settle_misreports: u64,
}

/// A failed run: the seed, what broke, and the last steps.
#[derive(Debug, Clone)]
pub struct SimFailure {
    /// The seed.
    pub seed: u64,
    /// What broke.
    pub message: String,
    /// The last steps before it.
    pub trace: Vec<String>,
}

impl fmt::Display for SimFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "simulation seed {} failed: {}", self.seed, self.message)?;
        writeln!(
            f,
            "reproduce: SIM_SEED={} cargo test -p autobatch-tests --test simulation -- --nocapture",
            self.seed
        )?;
        writeln!(f, "last {} steps:", self.trace.len())?;
        for line in &self.trace {
            writeln!(f, "  {line}")?;
        }
        Ok(())
    }
}

#[derive(Debug)]
enum Ev {
    Timer(usize, Instant),
    ToBroker(ConnId, Vec<u8>),
    ToClient(ConnId, Vec<u8>),
    /// The last chunk of a hostile frame: after it, the session must (or must not) have reset.
    HostileToClient(ConnId, Vec<u8>, &'static str, bool),
    Process(ConnId, Box<Request>),
    ConnectDone(usize),
    ClientNotice(usize, ConnId),
    BrokerNotice(ConnId),
    Plan(usize, Action),
    Finish(usize, String, bool),
    Waiters,
    Cut,
    Restart,
    BrokerUp,
    Stall(usize),
    StallEnd(usize),
    Close(usize),
    Hostile,
}

impl Ev {
    /// The client an event is delivered to, if it is delivered to one (such events wait out a
    /// stall).
    fn client(&self, net: &Net) -> Option<usize> {
        match self {
            Ev::Timer(c, _)
            | Ev::ConnectDone(c)
            | Ev::ClientNotice(c, _)
            | Ev::Plan(c, _)
            | Ev::Finish(c, _, _)
            | Ev::Close(c) => Some(*c),
            Ev::ToClient(conn, _) | Ev::HostileToClient(conn, ..) => net.client(*conn),
            _ => None,
        }
    }
}

struct Item {
    at: Duration,
    seq: u64,
    ev: Ev,
}

impl PartialEq for Item {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Item {}
impl PartialOrd for Item {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Item {
    fn cmp(&self, o: &Self) -> Ordering {
        // Min-heap on (time, seq).
        (o.at, o.seq).cmp(&(self.at, self.seq))
    }
}

struct Client {
    s: Session,
    config: SessionConfig,
    conn: Option<ConnId>,
    connecting: bool,
    armed: Option<Instant>,
    stalled: bool,
    deferred: Vec<Ev>,
    close_called: bool,
    closed: bool,
    /// If not closed by then, the session hangs. Set by `close()` from what is left to do.
    hang_at: Duration,
    /// Job id → completions/failures the session accepted.
    finished: BTreeMap<String, u32>,
    /// Job id → JobSettled events.
    settled: BTreeMap<String, u32>,
}

struct World {
    base: Instant,
    now: Duration,
    heap: BinaryHeap<Item>,
    seq: u64,
    rng_net: Rng,
    rng_broker: Rng,
    rng_work: Rng,
    rng_fault: Rng,
    /// Hostile frames draw from their own stream, so they move no other fault.
    rng_hostile: Rng,
    sc: Scenario,
    net: Net,
    broker: Broker,
    clients: Vec<Client>,
    ledger: Ledger,
    watch: WireWatch,
    writes: BTreeMap<ConnId, VecDeque<Duration>>,
    chains: BTreeMap<(usize, OpId), (String, u32, bool)>,
    next_tag: i64,
    faults: FaultCounts,
    trace: Option<VecDeque<String>>,
    trace_cap: usize,
    events: u64,
    jobs_finished: u64,
    settle_misreports: u64,
    outcomes: OutcomeCounts,
    out: Vec<u8>,
}

/// Steps kept for a failure report; `SIM_TRACE_LINES` overrides.
fn trace_lines() -> usize {
    std::env::var("SIM_TRACE_LINES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(400)
}

macro_rules! tr {
    ($w:expr, $($arg:tt)*) => {
        if $w.trace.is_some() {
            let line = format!("{:>10.3}ms {}", $w.now.as_secs_f64() * 1000.0, format!($($arg)*));
            $w.push_trace(line);
        }
    };
}

type Step = Result<(), String>;

/// Knobs of a run beyond its seed.
#[derive(Debug, Clone, Copy)]
pub struct SimOptions {
    /// Keep the hostile-frame fault class (part of the scenario each seed draws). Off, seeds replay
    /// exactly as they did before that class existed (the regression seeds need that).
    pub hostile: bool,
    /// Keep the "frames near the size limit" class (a burst of eight 8.4 MB adds). Off, seeds
    /// replay exactly as they did before that class existed.
    pub huge: bool,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            hostile: true,
            huge: true,
        }
    }
}

impl World {
    fn new(seed: u64, trace: bool, opts: SimOptions) -> Result<World, String> {
        let mut sc = Scenario::from_seed(seed);
        if !opts.hostile {
            sc.faults.hostile_rate = 0.0;
        }
        if !opts.huge && sc.faults.huge_adds {
            sc.faults.huge_adds = false;
            sc.plan.retain(|(_, _, a)| {
                !matches!(a, Action::Burst { pad, .. } if *pad == super::workload::HUGE_PAD)
            });
        }
        let mut rng = Rng::new(seed ^ 0xdead_beef);
        let base = Instant::now();
        let mut clients = Vec::new();
        for config in sc.sessions() {
            let s = Session::new(config.clone(), base).map_err(|e| format!("config: {e}"))?;
            clients.push(Client {
                s,
                config,
                conn: None,
                connecting: false,
                armed: None,
                stalled: false,
                deferred: Vec::new(),
                close_called: false,
                closed: false,
                hang_at: Duration::MAX,
                finished: BTreeMap::new(),
                settled: BTreeMap::new(),
            });
        }
        let broker = Broker::new(
            sc.token.clone(),
            sc.faults.persistent,
            sc.faults.broker.clone(),
        );
        Ok(World {
            base,
            now: Duration::ZERO,
            heap: BinaryHeap::new(),
            seq: 0,
            rng_net: rng.fork(),
            rng_broker: rng.fork(),
            rng_work: rng.fork(),
            rng_fault: rng.fork(),
            rng_hostile: rng.fork(),
            net: Net::new(sc.net.clone()),
            broker,
            clients,
            ledger: Ledger::default(),
            watch: WireWatch::default(),
            writes: BTreeMap::new(),
            chains: BTreeMap::new(),
            next_tag: 1,
            faults: FaultCounts::default(),
            trace: trace.then(VecDeque::new),
            trace_cap: trace_lines(),
            events: 0,
            jobs_finished: 0,
            settle_misreports: 0,
            outcomes: OutcomeCounts::default(),
            out: Vec::new(),
            sc,
        })
    }

    fn push_trace(&mut self, line: String) {
        let cap = self.trace_cap;
        if let Some(t) = &mut self.trace {
            if t.len() >= cap {
                t.pop_front();
            }
            t.push_back(line);
        }
    }

    fn at(&self) -> Instant {
        self.base + self.now
    }

    fn push(&mut self, at: Duration, ev: Ev) {
        self.seq += 1;
        self.heap.push(Item {
            at: at.max(self.now),
            seq: self.seq,
            ev,
        });
    }

    fn schedule(&mut self) {
        let sc = self.sc.clone();
        for (at, c, action) in &sc.plan {
            self.push(*at, Ev::Plan(*c, action.clone()));
        }
        for c in 0..self.clients.len() {
            self.push(sc.close_at, Ev::Close(c));
            self.pump(c)
                .expect("nothing can fail before the first event");
        }
        if sc.faults.cut_rate > 0.0 {
            let first = self.exp_delay(sc.faults.cut_rate * self.clients.len() as f64);
            self.push(first, Ev::Cut);
        }
        for _ in 0..sc.faults.restarts {
            let at = Duration::from_millis(self.rng_fault.below(sc.close_at.as_millis() as u64));
            self.push(at, Ev::Restart);
        }
        if sc.faults.stall_rate > 0.0 {
            for c in 0..self.clients.len() {
                let mut t = Duration::ZERO;
                loop {
                    t += self.exp_delay(sc.faults.stall_rate);
                    if t >= sc.close_at {
                        break;
                    }
                    self.push(t, Ev::Stall(c));
                }
            }
        }
        if sc.faults.hostile_rate > 0.0 {
            let first = exp_delay(&mut self.rng_hostile, sc.faults.hostile_rate);
            self.push(first, Ev::Hostile);
        }
    }

    fn exp_delay(&mut self, rate: f64) -> Duration {
        exp_delay(&mut self.rng_fault, rate)
    }

    // ------------------------------------------------------------------ the loop

    fn run(&mut self) -> Step {
        self.schedule();
        let mut same_instant = 0u64;
        while let Some(item) = self.heap.pop() {
            if item.at == self.now {
                same_instant += 1;
                if same_instant > 200_000 {
                    return Err("livelock: 200000 events at one instant".into());
                }
            } else {
                same_instant = 0;
            }
            self.now = item.at;
            self.events += 1;
            if self.events > 3_000_000 {
                return Err("runaway: more than 3M events".into());
            }
            let hang_at = self
                .clients
                .iter()
                .filter(|c| !c.closed)
                .map(|c| c.hang_at)
                .max();
            if hang_at.is_some_and(|h| self.now > h) {
                let open: Vec<String> = self
                    .clients
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| !c.closed && self.now > c.hang_at)
                    .map(|(i, c)| {
                        format!(
                            "client {i}: connected {} in_flight {} pending {:?} held {} stats {:?}",
                            c.s.is_connected(),
                            c.s.in_flight(),
                            c.s.pending_adds(),
                            c.s.jobs_held(),
                            c.s.stats()
                        )
                    })
                    .collect();
                if !open.is_empty() {
                    return Err(format!(
                        "hang: sessions not closed {:?} after close(): {}",
                        self.now - self.sc.close_at,
                        open.join("; ")
                    ));
                }
            }
            if let Some(c) = item.ev.client(&self.net) {
                if self.clients[c].stalled && !matches!(item.ev, Ev::StallEnd(_)) {
                    self.clients[c].deferred.push(item.ev);
                    continue;
                }
            }
            self.dispatch(item.ev)?;
            if self.clients.iter().all(|c| c.closed) && self.now > self.sc.close_at {
                // Drain the broker side a little so late requests are applied, then stop.
                let end = self.now + Duration::from_secs(2);
                while let Some(item) = self.heap.pop() {
                    if item.at > end {
                        break;
                    }
                    self.now = item.at;
                    self.events += 1;
                    if let ev @ (Ev::ToBroker(..)
                    | Ev::Process(..)
                    | Ev::Waiters
                    | Ev::BrokerNotice(_)) = item.ev
                    {
                        self.dispatch(ev)?;
                    }
                }
                break;
            }
        }
        self.check_final()
    }

    fn dispatch(&mut self, ev: Ev) -> Step {
        match ev {
            Ev::Timer(c, armed) => {
                let cl = &mut self.clients[c];
                // A timer re-armed since (or a stale one): the current one will fire.
                if cl.closed || cl.armed != Some(armed) {
                    return Ok(());
                }
                cl.armed = None;
                let at = self.at();
                tr!(self, "c{c} timer");
                self.clients[c].s.handle_timeout(at);
                self.pump(c)
            }
            Ev::ToBroker(conn, bytes) => {
                if !self.net.arrive(conn, Dir::ToBroker) {
                    self.faults.chunks_lost += 1;
                    return Ok(());
                }
                if !self.broker.has_conn(conn) {
                    return Ok(());
                }
                let reqs = self.broker.receive(conn, &bytes)?;
                let client = self.broker.client_of(conn).unwrap_or(0);
                for req in reqs {
                    let written = self
                        .writes
                        .get_mut(&conn)
                        .and_then(VecDeque::pop_front)
                        .ok_or("a request the client never wrote")?;
                    tr!(
                        self,
                        "broker <- c{client}/{conn} {}",
                        summary(&req.cmd, &req.req_id)
                    );
                    let config = &self.clients[client].config;
                    self.watch.on_request(
                        conn,
                        &req.req_id,
                        &req.cmd,
                        written,
                        self.now,
                        config,
                    )?;
                    self.check_settle_request(client, &req.cmd)?;
                    let d = Duration::from_nanos(
                        self.rng_broker
                            .below(self.sc.max_processing.as_nanos() as u64 + 1),
                    );
                    self.push(self.now + d, Ev::Process(conn, Box::new(req)));
                }
                Ok(())
            }
            Ev::Process(conn, req) => {
                let req_id = req.req_id.clone();
                let what = summary(&req.cmd, &req.req_id);
                match self
                    .broker
                    .handle(&mut self.rng_broker, conn, *req, self.now)
                {
                    Handled::Reply(bytes) => {
                        tr!(
                            self,
                            "broker -> {conn} reply to {what}: {}",
                            reply_summary(&bytes)
                        );
                        self.watch.on_answer(conn, &req_id);
                        self.send(conn, Dir::ToClient, &bytes);
                    }
                    Handled::NoReply => {
                        tr!(self, "broker {conn} no reply to {what}");
                        // A dropped reply never comes: the client will give up on it, so a
                        // hostile "reply" to it later may be a harmless stale one.
                        self.watch.on_answer(conn, &req_id);
                    }
                    Handled::Parked(until) => {
                        tr!(self, "broker {conn} parks {what}");
                        self.push(until, Ev::Waiters);
                    }
                }
                self.serve_waiters();
                Ok(())
            }
            Ev::Waiters => {
                self.serve_waiters();
                Ok(())
            }
            Ev::ToClient(conn, bytes) => {
                let Some(c) = self.net.client(conn) else {
                    return Ok(());
                };
                if !self.net.arrive(conn, Dir::ToClient) {
                    self.faults.chunks_lost += 1;
                    return Ok(());
                }
                if self.clients[c].conn != Some(conn) {
                    return Ok(());
                }
                tr!(self, "c{c} <- {} bytes", bytes.len());
                let at = self.at();
                self.clients[c].s.handle_input(at, &bytes);
                self.pump(c)
            }
            Ev::ConnectDone(c) => {
                if !self.clients[c].connecting {
                    return Ok(());
                }
                self.clients[c].connecting = false;
                let at = self.at();
                if self.broker.up && !self.rng_net.chance(self.sc.faults.connect_fail) {
                    let conn = self.net.open(c);
                    self.broker.open(conn, c);
                    self.clients[c].conn = Some(conn);
                    tr!(self, "c{c} connected as {conn}");
                    self.clients[c].s.handle_connected(at);
                } else {
                    self.faults.connect_failures += 1;
                    tr!(self, "c{c} connect failed");
                    self.clients[c].s.handle_connect_failed(at);
                }
                self.pump(c)
            }
            Ev::ClientNotice(c, conn) => {
                if self.clients[c].conn != Some(conn) {
                    return Ok(());
                }
                self.clients[c].conn = None;
                tr!(self, "c{c} sees {conn} closed");
                let at = self.at();
                self.clients[c].s.handle_disconnected(at);
                self.pump(c)
            }
            Ev::BrokerNotice(conn) => {
                tr!(self, "broker sees {conn} closed");
                self.broker.close_conn(conn);
                self.watch.on_close(conn);
                Ok(())
            }
            Ev::Plan(c, action) => {
                self.act(c, action)?;
                self.pump(c)
            }
            Ev::Finish(c, id, ok) => {
                let at = self.at();
                let cl = &mut self.clients[c];
                let r = if ok {
                    cl.s.complete_job(at, &id, Value::map([("r", Value::Int(1))]))
                } else {
                    let unrecoverable = self.rng_work.chance(0.3);
                    cl.s.fail_job(
                        at,
                        &id,
                        JobFailure::new("boom").unrecoverable(unrecoverable),
                    )
                };
                tr!(self, "c{c} finishes {id} ok={ok}: {r:?}");
                if r.is_ok() {
                    *self.clients[c].finished.entry(id).or_default() += 1;
                    self.jobs_finished += 1;
                }
                self.pump(c)
            }
            Ev::Cut => {
                if self.now < self.sc.close_at + Duration::from_millis(500) {
                    let next = self.now + self.exp_delay(self.sc.faults.cut_rate);
                    self.push(next, Ev::Cut);
                }
                let live = self.net.live();
                if live.is_empty() {
                    return Ok(());
                }
                let conn = *self.rng_fault.pick(&live);
                self.cut(conn);
                Ok(())
            }
            Ev::Restart => {
                let lost_before = self.broker.gens.iter().filter(|g| g.lost).count();
                let conns = self.broker.restart(self.now);
                let lost = self.broker.gens.iter().filter(|g| g.lost).count() - lost_before;
                self.faults.jobs_lost += lost as u64;
                if self.sc.faults.persistent {
                    self.faults.restarts_persistent += 1;
                } else {
                    self.faults.restarts_memory += 1;
                }
                tr!(self, "broker restarts, {lost} live jobs lost");
                for conn in conns {
                    self.watch.on_close(conn);
                    self.cut(conn);
                }
                self.broker.up = false;
                let down = self.rng_fault.ms(10, self.sc.max_down.as_millis() as u64);
                self.push(self.now + down, Ev::BrokerUp);
                Ok(())
            }
            Ev::BrokerUp => {
                self.broker.up = true;
                Ok(())
            }
            Ev::Stall(c) => {
                if self.clients[c].stalled || self.clients[c].closed {
                    return Ok(());
                }
                self.faults.stalls += 1;
                self.clients[c].stalled = true;
                let d = self.rng_fault.ms(10, self.sc.max_stall.as_millis() as u64);
                tr!(self, "c{c} stalls for {d:?}");
                self.push(self.now + d, Ev::StallEnd(c));
                Ok(())
            }
            Ev::StallEnd(c) => {
                self.clients[c].stalled = false;
                tr!(self, "c{c} resumes");
                let deferred = std::mem::take(&mut self.clients[c].deferred);
                for ev in deferred {
                    self.dispatch(ev)?;
                }
                self.clients[c].armed = None;
                self.pump(c)
            }
            Ev::Close(c) => {
                let at = self.at();
                tr!(self, "c{c} close()");
                self.clients[c].close_called = true;
                self.clients[c].s.close(at);
                // Liveness: what is left drains at one batch (or command) per slot and per
                // couple of timeouts at worst, plus reconnects and downtime.
                let cl = &self.clients[c];
                let cfg = &cl.config;
                let pending = cl.s.pending_adds();
                let (items, parked) = (pending.items, pending.parked);
                let per = cfg.batching.as_ref().map_or(1, |b| b.max_batch);
                let work = (items + parked).div_ceil(per)
                    + cl.s.in_flight()
                    + cl.s.jobs_held()
                    + cfg
                        .worker
                        .as_ref()
                        .map_or(0, |w| w.ack_retries as usize + 2)
                    + 5;
                let hang_at = self.now
                    + 3 * cfg.command_timeout * work as u32
                    + 4 * (cfg.reconnect.max + self.sc.max_down + self.sc.max_stall)
                    + Duration::from_secs(10);
                self.clients[c].hang_at = hang_at;
                self.pump(c)
            }
            Ev::Hostile => {
                if self.now < self.sc.close_at {
                    let next =
                        self.now + exp_delay(&mut self.rng_hostile, self.sc.faults.hostile_rate);
                    self.push(next, Ev::Hostile);
                }
                let live: Vec<ConnId> = self
                    .net
                    .live()
                    .into_iter()
                    .filter(|c| {
                        self.net
                            .client(*c)
                            .is_some_and(|cl| self.clients[cl].conn == Some(*c))
                    })
                    .collect();
                if live.is_empty() {
                    return Ok(());
                }
                let conn = *self.rng_hostile.pick(&live);
                let reply = |v: Value| {
                    let mut out = Vec::new();
                    autobatch_core::wire::write_frame(&mut out, |b| v.encode(b)).unwrap();
                    out
                };
                let (bytes, kind, reset) = match self.rng_hostile.below(7) {
                    // A truncated MessagePack array.
                    0 => (vec![0, 0, 0, 2, 0x92, 0x01], "undecodable payload", true),
                    // A header one byte over the 64 MiB limit.
                    1 => (vec![0x04, 0, 0, 1, 0xc0], "oversized frame", true),
                    2 => (
                        reply(Value::map([
                            ("ok", Value::Bool(true)),
                            ("reqId", Value::from("999999999")),
                        ])),
                        "reply to a reqId never sent",
                        true,
                    ),
                    3 => (reply(Value::Int(5)), "not a map", true),
                    // A reply that would take 32 bytes of tree for each of its 512 Ki bytes:
                    // refused by the decode budget before the memory is taken.
                    6 => {
                        let n = 512 * 1024;
                        let mut body = Vec::with_capacity(n + 16);
                        autobatch_core::wire::Encoder::new(&mut body)
                            .map(2)
                            .str("ok")
                            .bool(true)
                            .str("ids")
                            .array(n);
                        body.resize(body.len() + n, 0xc0);
                        let mut out = Vec::new();
                        autobatch_core::wire::write_frame(&mut out, |b| b.extend_from_slice(&body))
                            .unwrap();
                        (out, "reply too expensive to decode", true)
                    }
                    4 => match self.watch.open_pushb(conn) {
                        Some(req_id) => (
                            reply(Value::map([
                                ("ok", Value::Bool(true)),
                                ("ids", Value::Int(5)),
                                ("reqId", req_id),
                            ])),
                            "PUSHB reply with ids of the wrong type",
                            true,
                        ),
                        None => return Ok(()),
                    },
                    // reqIds start at 1: "0" reads as a late reply, harmless.
                    _ => (
                        reply(Value::map([
                            ("ok", Value::Bool(false)),
                            ("error", Value::from("late")),
                            ("reqId", Value::from("0")),
                        ])),
                        "stale reqId",
                        false,
                    ),
                };
                self.faults.hostile += 1;
                tr!(self, "hostile -> {conn}: {kind}");
                let mut chunks =
                    self.net
                        .send(&mut self.rng_hostile, self.now, conn, Dir::ToClient, &bytes);
                if let Some((at, last)) = chunks.pop() {
                    for (at, chunk) in chunks {
                        self.push(at, Ev::ToClient(conn, chunk));
                    }
                    self.push(at, Ev::HostileToClient(conn, last, kind, reset));
                }
                Ok(())
            }
            Ev::HostileToClient(conn, bytes, kind, reset) => {
                let Some(c) = self.net.client(conn) else {
                    return Ok(());
                };
                if !self.net.arrive(conn, Dir::ToClient) || self.clients[c].conn != Some(conn) {
                    return Ok(());
                }
                tr!(self, "c{c} <- hostile {kind}");
                let at = self.at();
                self.clients[c].s.handle_input(at, &bytes);
                self.pump(c)?;
                let still = self.clients[c].conn == Some(conn);
                if reset && still {
                    return Err(format!(
                        "client {c} kept connection {conn} after a hostile frame: {kind}"
                    ));
                }
                if !reset && !still {
                    return Err(format!(
                        "client {c} dropped connection {conn} over a harmless frame: {kind}"
                    ));
                }
                Ok(())
            }
        }
    }

    fn cut(&mut self, conn: ConnId) {
        let (was_alive, mid) = self.net.cut(conn);
        if !was_alive {
            return;
        }
        self.faults.cuts += 1;
        if mid || self.broker.partial(conn) > 0 {
            self.faults.cuts_mid_write += 1;
        }
        tr!(self, "network cuts {conn} (mid-write: {mid})");
        if let Some(c) = self.net.client(conn) {
            let d = self.rng_net.ms(0, 20);
            self.push(self.now + d, Ev::ClientNotice(c, conn));
        }
        let d = self.rng_net.ms(0, 20);
        self.push(self.now + d, Ev::BrokerNotice(conn));
    }

    fn send(&mut self, conn: ConnId, dir: Dir, bytes: &[u8]) {
        let chunks = self.net.send(&mut self.rng_net, self.now, conn, dir, bytes);
        for (at, chunk) in chunks {
            let ev = match dir {
                Dir::ToBroker => Ev::ToBroker(conn, chunk),
                Dir::ToClient => Ev::ToClient(conn, chunk),
            };
            self.push(at, ev);
        }
    }

    fn serve_waiters(&mut self) {
        for (conn, req_id, bytes) in self.broker.serve_waiters(self.now) {
            tr!(
                self,
                "broker -> {conn} long-poll {req_id:?}: {}",
                reply_summary(&bytes)
            );
            self.watch.on_answer(conn, &req_id);
            self.send(conn, Dir::ToClient, &bytes);
        }
    }

    /// The contract's round after any input: transmit, drain events, re-arm the timer.
    fn pump(&mut self, c: usize) -> Step {
        let at = self.at();
        let mut out = std::mem::take(&mut self.out);
        out.clear();
        self.clients[c].s.poll_transmit(at, &mut out);
        if !out.is_empty() {
            match self.clients[c].conn {
                Some(conn) => {
                    let w = self.writes.entry(conn).or_default();
                    let mut i = 0;
                    while i + 4 <= out.len() {
                        let n = u32::from_be_bytes([out[i], out[i + 1], out[i + 2], out[i + 3]]);
                        if n as usize > autobatch_core::wire::MAX_FRAME {
                            return Err(format!(
                                "client {c} wrote a frame of {n} bytes, past the 64 MiB limit"
                            ));
                        }
                        w.push_back(self.now);
                        i += 4 + n as usize;
                    }
                    tr!(self, "c{c} -> {conn} {} bytes", out.len());
                    self.send(conn, Dir::ToBroker, &out);
                }
                None => {
                    return Err(format!(
                        "client {c} wrote {} bytes with no connection",
                        out.len()
                    ))
                }
            }
        }
        self.out = out;
        while let Some(ev) = self.clients[c].s.poll_event() {
            self.on_event(c, ev)?;
        }
        self.check_step(c)?;
        let cl = &mut self.clients[c];
        if cl.closed {
            return Ok(());
        }
        if let Some(t) = cl.s.poll_timeout() {
            if cl.armed != Some(t) {
                cl.armed = Some(t);
                let d = t.saturating_duration_since(self.base);
                self.push(d, Ev::Timer(c, t));
            }
        }
        Ok(())
    }

    fn on_event(&mut self, c: usize, ev: Event) -> Step {
        match ev {
            Event::Connect => {
                tr!(self, "c{c} event Connect");
                let cl = &mut self.clients[c];
                if cl.closed {
                    return Err(format!("client {c}: Connect after Closed"));
                }
                if cl.connecting || cl.conn.is_some() {
                    return Err(format!(
                        "client {c}: Connect while {}",
                        if cl.connecting {
                            "already connecting"
                        } else {
                            "connected"
                        }
                    ));
                }
                cl.connecting = true;
                let d = self.rng_net.us(0, 5_000);
                self.push(self.now + d, Ev::ConnectDone(c));
            }
            Event::Disconnect => {
                tr!(self, "c{c} event Disconnect");
                let cl = &mut self.clients[c];
                if let Some(conn) = cl.conn.take() {
                    // Our side closes: the broker sees it after a moment.
                    self.net.cut(conn);
                    let d = self.rng_net.ms(0, 5);
                    self.push(self.now + d, Ev::BrokerNotice(conn));
                } else {
                    cl.connecting = false;
                }
            }
            Event::Done { op, result } => {
                tr!(
                    self,
                    "c{c} Done op {} {}",
                    op.get(),
                    result_summary(&result)
                );
                // Every add the workload makes is valid (the invalid ones are refused at once):
                // one failing as invalid later means good jobs sank together, e.g. in a PUSHB
                // past the frame limit.
                if let Err(e @ Error::Invalid(_)) = &result {
                    return Err(format!(
                        "client {c}: op {} failed as invalid: {e}",
                        op.get()
                    ));
                }
                self.ledger.on_done(c, op, self.now, result.clone())?;
                if let Some((queue, left, custom)) = self.chains.remove(&(c, op)) {
                    if left > 0 && !self.clients[c].close_called {
                        let d = self.rng_work.ms(0, 5);
                        self.push(
                            self.now + d,
                            Ev::Plan(
                                c,
                                Action::Chain {
                                    queue,
                                    left,
                                    custom,
                                },
                            ),
                        );
                    }
                }
            }
            Event::Job { job } => {
                tr!(self, "c{c} Job {}", job.id);
                if self.clients[c].config.worker.is_none() {
                    return Err(format!("client {c} got a Job without a worker"));
                }
                let d = Duration::from_nanos(
                    self.rng_work.below(self.sc.max_work.as_nanos() as u64 + 1),
                );
                let ok = !self.rng_work.chance(self.sc.fail_jobs);
                self.push(self.now + d, Ev::Finish(c, job.id, ok));
            }
            Event::JobSettled { id, result } => {
                tr!(self, "c{c} JobSettled {id} {result:?}");
                let cl = &mut self.clients[c];
                let fin = cl.finished.get(&id).copied().unwrap_or(0);
                let set = cl.settled.entry(id.clone()).or_default();
                *set += 1;
                if *set > fin {
                    return Err(format!(
                        "client {c}: job {id} settled {} times but finished {fin} times",
                        *set
                    ));
                }
                if result == Ok(true)
                    && !self.broker.acks_applied.contains(&(c, id.clone()))
                    && !self.broker.fails_applied.contains(&(c, id.clone()))
                {
                    // An ACKB error naming one missing job must not be read as every other
                    // item of the batch applied: the broker's record says which were.
                    self.settle_misreports += 1;
                    return Err(format!(
                        "client {c}: job {id} reported settled (applied) but the broker \
                         never applied an ACK or FAIL of it from this client"
                    ));
                }
            }
            Event::Drained => {
                // A worker's pull came back empty: informational; the ledger counts the jobs.
                tr!(self, "c{c} Drained");
                if self.clients[c].config.worker.is_none() {
                    return Err(format!("client {c} reported Drained without a worker"));
                }
            }
            Event::Closed => {
                tr!(self, "c{c} Closed");
                let cl = &mut self.clients[c];
                if !cl.close_called {
                    return Err(format!("client {c}: Closed without close()"));
                }
                if cl.closed {
                    return Err(format!("client {c}: Closed twice"));
                }
                cl.closed = true;
                if cl.conn.is_some() || cl.connecting {
                    return Err(format!("client {c}: Closed with a connection still open"));
                }
            }
            other => {
                return Err(format!(
                    "client {c}: an event the runner does not model: {other:?}"
                ))
            }
        }
        Ok(())
    }

    /// The cheap invariants, after every round.
    fn check_step(&self, c: usize) -> Step {
        let cl = &self.clients[c];
        let cfg = &cl.config;
        if cl.s.in_flight() > cfg.max_in_flight_commands {
            return Err(format!(
                "client {c}: {} commands in flight > {}",
                cl.s.in_flight(),
                cfg.max_in_flight_commands
            ));
        }
        let p = cl.s.pending_adds();
        let (items, bytes, parked) = (p.items, p.bytes, p.parked);
        if let Some(b) = &cfg.batching {
            let nq = self.sc.queues.len();
            if items > b.max_pending_items * nq || bytes > b.max_pending_bytes * nq {
                return Err(format!(
                    "client {c}: pending {items} items / {bytes} bytes over the limits \
                     ({} / {} per queue)",
                    b.max_pending_items, b.max_pending_bytes
                ));
            }
            if parked > 0 && b.overflow != OverflowPolicy::Backpressure {
                return Err(format!(
                    "client {c}: {parked} parked under {:?}",
                    b.overflow
                ));
            }
        }
        Ok(())
    }

    /// A worker may only ACK or FAIL jobs the workload finished.
    fn check_settle_request(&self, client: usize, cmd: &Command) -> Step {
        let ids: Vec<&String> = match cmd {
            Command::AckB { ids, .. } => ids.iter().collect(),
            Command::Ack { id, .. } | Command::Fail { id, .. } => vec![id],
            _ => return Ok(()),
        };
        for id in ids {
            if !self.clients[client].finished.contains_key(id) {
                return Err(format!(
                    "client {client} sent an ACK/FAIL for job {id}, which it never finished"
                ));
            }
        }
        Ok(())
    }

    // ------------------------------------------------------------------ the workload

    fn tagged(&mut self, kind: &str, idx: i64, pad: usize) -> (i64, Value) {
        let tag = self.next_tag;
        let mut m = vec![
            ("k", Value::from(kind)),
            ("t", Value::Int(tag)),
            ("i", Value::Int(idx)),
        ];
        if pad > 0 {
            m.push(("p", Value::from("x".repeat(pad))));
        }
        (tag, Value::map(m))
    }

    fn one_add(
        &mut self,
        c: usize,
        queue: &str,
        custom: bool,
        durable: bool,
        cancel: bool,
        pad: usize,
    ) -> Result<Option<OpId>, String> {
        let batching = self.clients[c].config.batching.clone();
        let kind = if durable {
            "d"
        } else if batching.is_some() {
            "a"
        } else {
            "p"
        };
        let (tag, data) = self.tagged(kind, 0, pad);
        self.next_tag += 1;
        let custom = custom.then(|| custom_id(&mut self.rng_work, c, tag as u64));
        let mut opts = JobOptions::new();
        if let Some(id) = &custom {
            opts = opts.job_id(id.clone());
        }
        if durable {
            opts = opts.durable(true);
        }
        let spec = JobSpec::new("job", data).with_options(opts);
        let size = spec.pushb_len();
        let at = self.at();
        let cl = &mut self.clients[c];
        let before = cl.s.pending_adds();
        let (buffered, parked_before) = (before.items, before.parked);
        match cl.s.add(at, queue, spec) {
            Ok(op) => {
                let parked = cl.s.pending_adds().parked > parked_before;
                let withdrawn = cancel && cl.s.cancel(op);
                tr!(self, "c{c} add {queue} tag {tag} custom {custom:?} durable {durable} -> op {} parked {parked} withdrawn {withdrawn}", op.get());
                self.ledger.ops.insert(
                    (c, op),
                    OpRec {
                        parked,
                        withdrawn,
                        ahead: buffered + parked_before,
                        ..OpRec::new(
                            tag,
                            OpKind::Add {
                                queue: queue.to_owned(),
                                custom,
                                durable,
                            },
                            self.now,
                        )
                    },
                );
                Ok(Some(op))
            }
            Err(Error::Closed) if cl.close_called => Ok(None),
            Err(Error::Overflow) => {
                tr!(self, "c{c} add {queue} tag {tag}: overflow");
                let b = batching.ok_or("overflow with batching off")?;
                let legit = match b.overflow {
                    OverflowPolicy::Reject => true,
                    _ => size > b.max_pending_bytes,
                };
                if legit || durable {
                    Ok(None)
                } else {
                    Err(format!(
                        "client {c}: add refused with Overflow under {:?} ({size} bytes)",
                        b.overflow
                    ))
                }
            }
            Err(e) => Err(format!("client {c}: add failed at once with {e:?}")),
        }
    }

    fn act(&mut self, c: usize, action: Action) -> Step {
        if self.clients[c].closed {
            return Ok(());
        }
        match action {
            Action::Burst {
                queue,
                n,
                custom,
                durable,
                cancel,
                pad,
            } => {
                if pad == super::workload::HUGE_PAD {
                    self.faults.huge_bursts += 1;
                }
                for _ in 0..n {
                    let cu = self.rng_work.chance(custom);
                    let du = self.rng_work.chance(durable);
                    let ca = self.rng_work.chance(cancel);
                    self.one_add(c, &queue, cu, du, ca, pad)?;
                }
            }
            Action::Chain {
                queue,
                left,
                custom,
            } => {
                if let Some(op) = self.one_add(c, &queue, custom, false, false, 0)? {
                    self.chains.insert((c, op), (queue, left - 1, custom));
                }
            }
            Action::Bulk { queue, n, custom } => {
                let mut jobs = Vec::new();
                let mut customs = Vec::new();
                let tag = self.next_tag;
                for i in 0..n as i64 {
                    let (t, data) = self.tagged("b", i, 0);
                    let cu =
                        custom.then(|| custom_id(&mut self.rng_work, c, (t * 1000 + i) as u64));
                    let mut opts = JobOptions::new();
                    if let Some(id) = &cu {
                        opts = opts.job_id(id.clone());
                    }
                    customs.push(cu);
                    jobs.push(JobSpec::new("bulk", data).with_options(opts));
                }
                self.next_tag = tag + 1;
                let at = self.at();
                match self.clients[c].s.add_bulk(at, &queue, jobs) {
                    Ok(op) => {
                        tr!(
                            self,
                            "c{c} add_bulk {queue} x{n} tag {tag} -> op {}",
                            op.get()
                        );
                        self.ledger.ops.insert(
                            (c, op),
                            OpRec::new(tag, OpKind::Bulk { queue, customs }, self.now),
                        );
                    }
                    Err(Error::Closed) if self.clients[c].close_called => {}
                    Err(e) => return Err(format!("client {c}: add_bulk failed at once: {e:?}")),
                }
            }
            Action::Lookup => {
                let known: Vec<String> = self
                    .broker
                    .gens
                    .iter()
                    .rev()
                    .take(10)
                    .map(|g| g.id.clone())
                    .collect();
                let cmd = if known.is_empty() || self.rng_work.chance(0.3) {
                    Command::Count {
                        queue: self.rng_work.pick(&self.sc.queues).clone(),
                    }
                } else {
                    Command::GetState {
                        id: self.rng_work.pick(&known).clone(),
                    }
                };
                let at = self.at();
                match self.clients[c].s.request(at, cmd) {
                    Ok(op) => {
                        self.ledger
                            .ops
                            .insert((c, op), OpRec::new(0, OpKind::Lookup, self.now));
                    }
                    Err(Error::Closed) if self.clients[c].close_called => {}
                    Err(e) => return Err(format!("client {c}: request failed at once: {e:?}")),
                }
            }
            Action::Invalid { queue } => {
                let spec = JobSpec::new("job", Value::Int(1))
                    .with_options(JobOptions::new().priority(2_000_000));
                let at = self.at();
                match self.clients[c].s.add(at, &queue, spec) {
                    Err(Error::Invalid(_)) => {}
                    other => {
                        return Err(format!(
                            "client {c}: an invalid add was not refused at once: {other:?}"
                        ))
                    }
                }
            }
            Action::CancelLast => {
                let last = self
                    .ledger
                    .ops
                    .iter()
                    .rev()
                    .find(|((cc, _), r)| {
                        *cc == c
                            && r.done.is_none()
                            && !r.withdrawn
                            && !matches!(r.kind, OpKind::Lookup)
                    })
                    .map(|(k, _)| *k);
                if let Some(key) = last {
                    if self.clients[c].s.cancel(key.1) {
                        tr!(self, "c{c} cancel op {} withdrawn", key.1.get());
                        if let Some(r) = self.ledger.ops.get_mut(&key) {
                            r.withdrawn = true;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    // ------------------------------------------------------------------ the end

    fn check_final(&mut self) -> Step {
        for (i, c) in self.clients.iter().enumerate() {
            if !c.closed {
                return Err(format!("client {i} never closed"));
            }
            for (id, n) in &c.finished {
                let s = c.settled.get(id).copied().unwrap_or(0);
                if s != *n {
                    return Err(format!(
                        "client {i}: job {id} finished {n} times but settled {s} times"
                    ));
                }
            }
            let st = c.s.stats();
            self.faults.client_timeouts += st.timeouts;
            self.faults.client_resends += st.items_resent;
        }
        let configs: Vec<SessionConfig> = self.clients.iter().map(|c| c.config.clone()).collect();
        let bounds: Vec<Duration> = configs.iter().map(|c| self.sc.op_bound(c)).collect();
        let mut outcomes = OutcomeCounts::default();
        self.ledger.check_final(
            &self.broker.gens,
            &configs,
            &bounds,
            self.sc.faults.is_lossless(),
            &mut outcomes,
        )?;
        self.outcomes = outcomes;
        Ok(())
    }
}

/// An exponentially distributed delay (a Poisson process of `rate` per second).
fn exp_delay(rng: &mut Rng, rate: f64) -> Duration {
    let u = rng.f64().max(1e-9);
    Duration::from_secs_f64((-u.ln() / rate).min(1e6))
}

fn summary(cmd: &Command, req_id: &Value) -> String {
    let r = req_id.as_str().unwrap_or("?");
    match cmd {
        Command::PushB { queue, jobs } => {
            let tags: Vec<String> = jobs
                .iter()
                .map(|j| {
                    let data = j.data.expanded().unwrap_or_default();
                    let t = data.get("t").and_then(Value::as_i64).unwrap_or(-1);
                    match &j.opts.job_id {
                        Some(c) => format!("{t}:{c}"),
                        None => t.to_string(),
                    }
                })
                .collect();
            format!("#{r} PUSHB {queue} [{}]", tags.join(","))
        }
        Command::Push { queue, job } => format!(
            "#{r} PUSH {queue} {}",
            job.data
                .expanded()
                .unwrap_or_default()
                .get("t")
                .and_then(Value::as_i64)
                .unwrap_or(-1)
        ),
        Command::AckB { ids, .. } => format!("#{r} ACKB {ids:?}"),
        Command::Fail { id, .. } => format!("#{r} FAIL {id}"),
        Command::PullB { count, .. } => format!("#{r} PULLB {count}"),
        other => format!("#{r} {}", other.name()),
    }
}

fn reply_summary(frame: &[u8]) -> String {
    match Value::decode(&frame[4..]) {
        Ok(v) => {
            let mut s = format!("{v:?}");
            if s.len() > 200 {
                s.truncate(200);
                s.push('…');
            }
            s
        }
        Err(e) => format!("<{e}>"),
    }
}

fn result_summary(r: &Result<Response, Error>) -> String {
    let mut s = format!("{r:?}");
    if s.len() > 160 {
        s.truncate(160);
        s.push('…');
    }
    s
}

/// Runs `seed`; with `trace`, keeps the last steps for the report.
pub fn run_traced(seed: u64, trace: bool, opts: SimOptions) -> Result<SimReport, SimFailure> {
    let result = catch_unwind(AssertUnwindSafe(|| {
        let mut w = match World::new(seed, trace, opts) {
            Ok(w) => w,
            Err(e) => return (Err(e), Vec::new(), SimReport::default()),
        };
        let r = w.run();
        let trace: Vec<String> = w.trace.take().map(Vec::from).unwrap_or_default();
        let mut faults = w.faults.clone();
        let b = &w.broker.counts;
        faults.internal_errors = b.internal_errors;
        faults.partial_pushb = b.partial_pushb;
        faults.dropped_applied = b.dropped_applied;
        faults.dropped_unapplied = b.dropped_unapplied;
        faults.invalid_items = b.invalid_items;
        faults.failed_commits = b.failed_commits;
        let report = SimReport {
            seed,
            events: w.events,
            virtual_time: w.now,
            ops: w.ledger.ops.len() as u64,
            outcomes: std::mem::take(&mut w.outcomes),
            faults,
            jobs_finished: w.jobs_finished,
            max_batch_seen: w.watch.max_batch_seen,
            lossless: w.sc.faults.is_lossless(),
            settle_misreports: w.settle_misreports,
        };
        (r, trace, report)
    }));
    match result {
        Ok((Ok(()), _, report)) => Ok(report),
        Ok((Err(message), trace, _)) => {
            let mut sc = Scenario::from_seed(seed);
            if !opts.hostile {
                sc.faults.hostile_rate = 0.0;
            }
            let message = format!(
                "{message}\nscenario: faults {:?}; net {:?}; sessions {:?}",
                sc.faults,
                sc.net,
                sc.sessions()
            );
            Err(SimFailure {
                seed,
                message,
                trace,
            })
        }
        Err(panic) => {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "panic".into());
            Err(SimFailure {
                seed,
                message: format!("panic: {message}"),
                trace: Vec::new(),
            })
        }
    }
}

/// Runs `seed`. On failure, runs it again with the step trace on (the run is deterministic,
/// so it fails the same way) and returns that report.
pub fn run(seed: u64) -> Result<SimReport, SimFailure> {
    run_with(seed, SimOptions::default())
}

/// [`run`] with options.
pub fn run_with(seed: u64, opts: SimOptions) -> Result<SimReport, SimFailure> {
    match run_traced(seed, false, opts) {
        Ok(r) => Ok(r),
        Err(first) => match run_traced(seed, true, opts) {
            Err(traced) => Err(traced),
            Ok(_) => Err(SimFailure {
                message: format!(
                    "{} (and NOT reproduced with tracing on: the run is not deterministic)",
                    first.message
                ),
                ..first
            }),
        },
    }
}
