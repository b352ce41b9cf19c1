//! What callers hand a connection's pump ([`Cmd`]) and what a worker's pump hands back to
//! its dispatcher ([`Dispatch`]): the vocabulary between the handles and the pump, below both.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use autobatch_core::session::Replay;
use autobatch_core::wire::{Command, EncodedJob, Job, JobSpec, Value};
use futures_channel::{mpsc, oneshot};

use crate::reply::Reply;
use crate::stats::ClientStats;

/// Identifies a caller's operation before the session has given it an [`OpId`](autobatch_core::session::OpId), so that a
/// dropped future can withdraw it.
pub(crate) type Ticket = u64;

/// Where a worker's jobs go, each with its lock token, tagged with the index of the link
/// (broker) it came from: its ACK or FAIL must go back there, since locks and tokens are per
/// broker.
pub(crate) type JobTx = mpsc::UnboundedSender<(usize, Dispatch)>;

/// What a worker's pump hands to its dispatcher.
// Jobs are nearly all of the traffic: boxing them would add an allocation per job to spare
// the rare small variants a few hundred bytes in the channel.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum Dispatch {
    /// A job to run, with its lock token.
    Job(Job, Option<String>),
    /// A pull came back empty ([`Event::Drained`](autobatch_core::session::Event::Drained)).
    Drained,
    /// The server had already finalised this job, or its lock was gone, when its result
    /// arrived: the result was not recorded.
    LockLost(String),
    /// A job's result could not be delivered.
    SettleFailed(String, autobatch_core::Error),
    /// Completions or a failure (ACKB, FAIL with lock tokens) for another broker: this one's
    /// connection is down and the fleet shares storage.
    HandOff(Box<autobatch_core::wire::Command>),
}

/// Counts a job handle's request until the pump is done with it (answered or dropped), so the
/// handles can bound what they have outstanding.
pub(crate) struct InFlight(Arc<AtomicUsize>);

impl InFlight {
    /// Counts one more request (the caller has already incremented `n`).
    pub(crate) fn new(n: Arc<AtomicUsize>) -> Self {
        InFlight(n)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// An operation from a caller to the pump.
pub(crate) enum Cmd {
    Add {
        ticket: Ticket,
        queue: Arc<str>,
        job: EncodedJob,
        reply: Reply,
    },
    AddBulk {
        ticket: Ticket,
        queue: Arc<str>,
        jobs: Vec<JobSpec>,
        reply: Reply,
    },
    Request {
        ticket: Ticket,
        cmd: Box<Command>,
        /// `None`: the command's own replay rule (typed commands); `Some`: the caller's word
        /// (an untyped command sent through `Client::request_raw`).
        replay: Option<Replay>,
        reply: Reply,
    },
    /// A request a job handle sent (progress, log, lock, data): not withdrawn when its caller
    /// stops waiting, and counted until answered.
    JobRequest {
        cmd: Box<Command>,
        replay: Replay,
        reply: Reply,
        guard: InFlight,
    },
    /// The caller of `ticket` gave up.
    Cancel(Ticket),
    /// Like `Cancel`, answering whether the operation was withdrawn (not yet written): the
    /// links layer then sends it to another broker.
    Withdraw(Ticket, oneshot::Sender<bool>),
    /// What a worker asks of the jobs it holds.
    Worker(WorkerCmd),
    Stats(oneshot::Sender<ClientStats>),
    Close(oneshot::Sender<()>),
}

/// What a worker asks of its pump about the jobs it holds.
pub(crate) enum WorkerCmd {
    Complete {
        id: String,
        result: Value,
    },
    Fail {
        id: String,
        error: String,
        /// The error's stack lines (message, causes, backtrace), for the job's `stacktrace`.
        stack: Vec<String>,
        /// No more attempts: the job fails for good.
        unrecoverable: bool,
    },
    /// The processor asked for the job to run again after `delay` (MoveToDelayed).
    Delay {
        id: String,
        delay: std::time::Duration,
    },
    /// The processor hit a rate limit: the job goes back to waiting (MoveToWait) and the worker
    /// pulls nothing for `wait`.
    RateLimited {
        id: String,
        wait: std::time::Duration,
    },
    /// Job `id` is settled through another broker (its own was lost, the fleet shares
    /// storage): this session forgets it, without a word to its server.
    Forget(String),
    /// Forced close: every job still held goes back to waiting at once (MoveToWait with its
    /// token) instead of waiting for its lock to expire; answers with their ids.
    ReleaseHeld(oneshot::Sender<Vec<String>>),
    /// Pauses (`true`) or resumes the worker's pulls.
    Pause(bool),
    /// How many jobs the worker holds (handed out, not yet settled), plus one while a pull
    /// is out.
    JobsHeld(oneshot::Sender<usize>),
}
