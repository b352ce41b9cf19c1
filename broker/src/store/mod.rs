//! Where jobs are kept across restarts. The broker's queue state always lives in memory
//! (the `queue` module); a [`Store`] is the durable log behind it, fed one [`StoreOp`] per state
//! change, in the order the changes happened.

mod memory;
mod options;
/// Settings kept across restarts in SQLite mode.
pub(crate) mod settings;
mod sqlite;

use std::io;

use autobatch_core::wire::{Backoff, Value};

pub use memory::MemoryStore;
pub use options::AddOptions;
pub use sqlite::{count_rows, SqliteOptions, SqliteStore};

/// Where a job is in its life, as the store keeps it. What a client is told is the wire's
/// `JobState`, named from this and the job's priority (`prioritized`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stage {
    /// Ready to be pulled (reported as `prioritized` when its priority is above 0).
    Waiting,
    /// Waiting for its `runAt` (a delay, or a retry backoff).
    Delayed,
    /// Pulled and not yet acknowledged or failed.
    Active,
    /// Acknowledged.
    Completed,
    /// Failed for good.
    Failed,
    /// Waiting for the jobs it depends on (a flow's parent, a `dependsOn` job): bunqueue's
    /// `waiting-children`.
    WaitingChildren,
}

impl Stage {
    /// The name stored in SQLite.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Waiting => "waiting",
            Stage::Delayed => "delayed",
            Stage::Active => "active",
            Stage::Completed => "completed",
            Stage::Failed => "failed",
            Stage::WaitingChildren => "waiting-children",
        }
    }

    /// Reads a stored name; unknown names read as waiting.
    pub fn parse(s: &str) -> Stage {
        match s {
            "delayed" => Stage::Delayed,
            "active" => Stage::Active,
            "completed" => Stage::Completed,
            "failed" => Stage::Failed,
            "waiting-children" => Stage::WaitingChildren,
            _ => Stage::Waiting,
        }
    }

    /// Whether the job still counts as live for deduplication (custom ids, unique keys).
    pub fn is_live(self) -> bool {
        matches!(
            self,
            Stage::Waiting | Stage::Delayed | Stage::Active | Stage::WaitingChildren
        )
    }
}

/// Everything the broker knows about one job, and what a [`Store`] persists.
#[derive(Debug, Clone, PartialEq)]
pub struct JobRecord {
    /// Job id: a UUIDv7 text, or the custom id.
    pub id: String,
    /// Queue name.
    pub queue: String,
    /// Job name.
    pub name: String,
    /// Payload, as sent.
    pub data: Value,
    /// Priority; higher runs first. An add sends an integer; a ChangePriority may leave a
    /// fraction, which bunqueue keeps as sent.
    pub priority: f64,
    /// Failed attempts so far.
    pub attempts: i64,
    /// Attempts allowed.
    pub max_attempts: i64,
    /// Retry backoff (`None`: the default 1000 ms base).
    pub backoff: Option<Backoff>,
    /// Creation time, epoch ms.
    pub created_at: f64,
    /// Earliest run time, epoch ms.
    pub run_at: f64,
    /// Insertion order, for FIFO within a priority.
    pub seq: u64,
    /// Last in, first out.
    pub lifo: bool,
    /// Drop the job once it completes.
    pub remove_on_complete: bool,
    /// Drop the job once it fails for good.
    pub remove_on_fail: bool,
    /// Pushed with `durable: true`.
    pub durable: bool,
    /// Deduplication key, if any.
    pub unique_key: Option<String>,
    /// Current state.
    pub state: Stage,
    /// Return value of a completed job.
    pub result: Option<Value>,
    /// Error of a failed job.
    pub failed_reason: Option<String>,
    /// Its other add options, as its record shows them (`None`: all unset).
    pub options: Option<Box<AddOptions>>,
}

/// One state change, in the order the broker made it.
#[derive(Debug, Clone, PartialEq)]
pub enum StoreOp {
    /// A new job, or a new generation of a custom id (insert or replace).
    Put(Box<JobRecord>),
    /// A job changed state.
    Update {
        /// Job id.
        id: String,
        /// New state.
        state: Stage,
        /// Attempts after the change.
        attempts: i64,
        /// Run time after the change, epoch ms.
        run_at: f64,
        /// Return value (completed jobs).
        result: Option<Value>,
        /// Error (failed or retried jobs).
        failed_reason: Option<String>,
    },
    /// The job is gone (`removeOnComplete` / `removeOnFail`).
    Remove(String),
}

/// Waits until everything recorded before it was committed (see [`Store::sync`]).
#[derive(Debug)]
pub struct SyncWaiter(pub(crate) tokio::sync::oneshot::Receiver<io::Result<()>>);

impl SyncWaiter {
    /// Resolves once the commit is done; an error if it failed or the store was closed.
    pub async fn wait(self) -> io::Result<()> {
        match self.0.await {
            Ok(r) => r,
            Err(_) => Err(io::Error::other("store closed before the commit")),
        }
    }
}

/// A durable log of job state changes.
///
/// Calls are made under the broker's state lock, so they must not block: [`record`](Self::record)
/// only enqueues, and [`sync`](Self::sync) hands back something to await after the lock is
/// released. Ops are applied in the order they were recorded.
///
/// ```
/// use autobatch_broker::store::{MemoryStore, Store};
/// let mut store = MemoryStore::new();
/// assert!(store.recover().unwrap().is_empty());
/// assert!(store.sync(1).is_none(), "memory has nothing to wait for");
/// ```
pub trait Store: Send {
    /// The jobs persisted by an earlier run, in insertion order. Called once, before serving.
    fn recover(&mut self) -> io::Result<Vec<JobRecord>>;
    /// Enqueues one state change (may be committed later, in a group).
    fn record(&mut self, op: StoreOp);
    /// Whether recorded ops are kept at all. A store that drops them (memory) lets the broker
    /// skip building them: a new job's record, data included, would otherwise be cloned for
    /// nothing on every push.
    fn persistent(&self) -> bool {
        true
    }
    /// A barrier: resolves once every op recorded so far has been committed or lost, `Ok` only
    /// if none of the last `covering` ops recorded before it was lost to a failed commit (a
    /// durable push covers its own rows; 0 just waits). `None` when there is nothing to wait for
    /// (memory).
    fn sync(&mut self, covering: usize) -> Option<SyncWaiter>;
    /// Ops recorded but not committed yet (to push back on producers that outrun the disk).
    fn backlog(&self) -> usize;
    /// Writes lost to failed commits since the store was opened.
    fn lost_writes(&self) -> u64 {
        0
    }
    /// Commits what is pending and stops. Blocks until done.
    fn close(&mut self);
}
