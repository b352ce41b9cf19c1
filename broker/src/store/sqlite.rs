//! SQLite storage: WAL, `synchronous=NORMAL`, one writer thread, group commit.
//!
//! Ops are queued to a dedicated writer thread, grouped by the core's
//! [`Batcher`](autobatch_core::batch::Batcher) and committed one group per transaction: at most
//! [`GROUP_MAX`] messages a group, one group in flight, and a partial group waits at most
//! [`GROUP_LINGER`] while another commits. A non-durable push is acknowledged as soon as its op is
//! queued (before the commit, as bunqueue's write buffer does); a durable one waits for a
//! [`Store::sync`] barrier, which resolves once the transaction holding it has committed.
//!
//! A commit that fails (disk full, the file locked by another process past the busy timeout,
//! an I/O error) loses its group's writes: SQLite rolls the transaction back. The writer numbers
//! writes in the order they were recorded and remembers the last one lost, so a barrier that
//! covers the writes recorded just before it (a durable push's own rows) is answered `Ok` only
//! if none of them was lost, even when the barrier itself lands in a later group that commits.
//! Lost writes are counted ([`Store::lost_writes`]) and logged.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use autobatch_core::batch::{BatchConfig, Batcher, ItemId, OverflowPolicy};

use autobatch_core::wire::{Backoff, Value};
use rusqlite::{params, Connection, OptionalExtension};

use super::{AddOptions, JobRecord, Stage, Store, StoreOp, SyncWaiter};

/// Most ops in one transaction (bunqueue's write buffer flushes at 100 jobs).
pub const GROUP_MAX: usize = 100;
/// How long a group may wait for more ops while a commit is in flight (bunqueue: 10 ms).
pub const GROUP_LINGER: Duration = Duration::from_millis(10);

/// How a [`SqliteStore`] waits and retries when a commit fails.
///
/// ```
/// use std::time::Duration;
/// use autobatch_broker::store::SqliteOptions;
/// let fast_failing = SqliteOptions::default()
///     .busy_timeout(Duration::from_millis(10))
///     .commit_retries(0);
/// assert_eq!(fast_failing.commit_retries, 0);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SqliteOptions {
    /// How long one statement waits for a lock held by another connection (default 5 s).
    pub busy_timeout: Duration,
    /// Further attempts after a failed commit (default 5), each after a delay that doubles
    /// from [`retry_delay`](Self::retry_delay). A group that still fails is lost.
    pub commit_retries: u32,
    /// Delay before the first retry (default 100 ms).
    pub retry_delay: Duration,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            busy_timeout: Duration::from_secs(5),
            commit_retries: 5,
            retry_delay: Duration::from_millis(100),
        }
    }
}

impl SqliteOptions {
    /// Sets [`busy_timeout`](Self::busy_timeout).
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout;
        self
    }

    /// Sets [`commit_retries`](Self::commit_retries).
    pub fn commit_retries(mut self, retries: u32) -> Self {
        self.commit_retries = retries;
        self
    }

    /// Sets [`retry_delay`](Self::retry_delay).
    pub fn retry_delay(mut self, delay: Duration) -> Self {
        self.retry_delay = delay;
        self
    }
}

enum Msg {
    Op(StoreOp),
    /// A barrier covering the `covers` ops recorded just before it.
    Sync {
        tx: tokio::sync::oneshot::Sender<io::Result<()>>,
        covers: u64,
    },
}

/// A SQLite-backed [`Store`].
///
/// ```
/// use autobatch_broker::store::{SqliteStore, Store};
/// let dir = tempfile::tempdir().unwrap();
/// let mut store = SqliteStore::open(dir.path().join("jobs.db")).unwrap();
/// assert!(store.recover().unwrap().is_empty());
/// store.close();
/// ```
pub struct SqliteStore {
    tx: Option<mpsc::Sender<Msg>>,
    thread: Option<JoinHandle<()>>,
    recovered: Option<Vec<JobRecord>>,
    backlog: Arc<AtomicUsize>,
    lost: Arc<AtomicU64>,
    path: PathBuf,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .field("backlog", &self.backlog())
            .field("lost_writes", &self.lost_writes())
            .finish()
    }
}

fn sql_err(e: rusqlite::Error) -> io::Error {
    io::Error::other(e)
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    seq INTEGER NOT NULL,
    queue TEXT NOT NULL,
    name TEXT NOT NULL,
    data BLOB NOT NULL,
    state TEXT NOT NULL,
    priority INTEGER NOT NULL,
    attempts INTEGER NOT NULL,
    max_attempts INTEGER NOT NULL,
    backoff TEXT,
    created_at REAL NOT NULL,
    run_at REAL NOT NULL,
    lifo INTEGER NOT NULL,
    remove_on_complete INTEGER NOT NULL,
    remove_on_fail INTEGER NOT NULL,
    durable INTEGER NOT NULL,
    unique_key TEXT,
    result BLOB,
    failed_reason TEXT,
    options BLOB
);";

/// Adds the columns a database made by an earlier version lacks.
fn migrate(conn: &Connection) -> rusqlite::Result<()> {
    let has_options = conn
        .prepare("SELECT 1 FROM pragma_table_info('jobs') WHERE name = 'options'")?
        .exists([])?;
    if !has_options {
        conn.execute_batch("ALTER TABLE jobs ADD COLUMN options BLOB;")?;
    }
    Ok(())
}

impl SqliteStore {
    /// Opens (or creates) the database file at `path`, reads back the jobs of an earlier run and
    /// starts the writer thread, with the default [`SqliteOptions`].
    pub fn open(path: impl AsRef<Path>) -> io::Result<SqliteStore> {
        Self::open_with(path, SqliteOptions::default())
    }

    /// [`open`](Self::open) with explicit options.
    pub fn open_with(path: impl AsRef<Path>, options: SqliteOptions) -> io::Result<SqliteStore> {
        let path = path.as_ref().to_path_buf();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let conn = Connection::open(&path).map_err(sql_err)?;
        conn.busy_timeout(options.busy_timeout).map_err(sql_err)?;
        let mode: String = conn
            .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
            .map_err(sql_err)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(io::Error::other(format!("journal_mode is {mode}, not WAL")));
        }
        conn.execute_batch("PRAGMA synchronous=NORMAL;")
            .map_err(sql_err)?;
        conn.execute_batch(SCHEMA).map_err(sql_err)?;
        migrate(&conn).map_err(sql_err)?;
        let recovered = load(&conn).map_err(sql_err)?;
        let (tx, rx) = mpsc::channel();
        let backlog = Arc::new(AtomicUsize::new(0));
        let lost = Arc::new(AtomicU64::new(0));
        let thread = std::thread::Builder::new()
            .name("autobatch-broker-sqlite".into())
            .spawn({
                let committer = Committer {
                    conn,
                    options,
                    backlog: backlog.clone(),
                    lost: lost.clone(),
                    recorded: 0,
                    last_lost: 0,
                    last_error: String::new(),
                };
                move || writer(committer, rx)
            })?;
        Ok(SqliteStore {
            tx: Some(tx),
            thread: Some(thread),
            recovered: Some(recovered),
            backlog,
            lost,
            path,
        })
    }

    fn send(&self, msg: Msg) -> Result<(), Msg> {
        match &self.tx {
            Some(tx) => tx.send(msg).map_err(|e| e.0),
            None => Err(msg),
        }
    }
}

impl Store for SqliteStore {
    fn recover(&mut self) -> io::Result<Vec<JobRecord>> {
        Ok(self.recovered.take().unwrap_or_default())
    }

    fn record(&mut self, op: StoreOp) {
        self.backlog.fetch_add(1, Ordering::Relaxed);
        if self.send(Msg::Op(op)).is_err() {
            self.backlog.fetch_sub(1, Ordering::Relaxed);
        }
    }

    fn sync(&mut self, covering: usize) -> Option<SyncWaiter> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let covers = covering as u64;
        if let Err(Msg::Sync { tx, .. }) = self.send(Msg::Sync { tx, covers }) {
            let _ = tx.send(Err(io::Error::other("store closed")));
        }
        Some(SyncWaiter(rx))
    }

    fn backlog(&self) -> usize {
        self.backlog.load(Ordering::Relaxed)
    }

    fn lost_writes(&self) -> u64 {
        self.lost.load(Ordering::Relaxed)
    }

    fn close(&mut self) {
        self.tx = None; // the writer drains what is queued, commits, and exits
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for SqliteStore {
    fn drop(&mut self) {
        self.close();
    }
}

/// The writer thread: feeds queued messages to a [`Batcher`] (at most [`GROUP_MAX`] per group,
/// one group in flight, [`GROUP_LINGER`] at most for a partial group while another commits) and
/// commits each group it hands out as one transaction, until the channel closes.
fn writer(mut committer: Committer, rx: mpsc::Receiver<Msg>) {
    let config = BatchConfig::new()
        .max_batch(GROUP_MAX)
        .linger(GROUP_LINGER)
        .max_in_flight(1)
        .max_pending_items(1 << 30)
        .max_pending_bytes(usize::MAX / 2)
        .overflow(OverflowPolicy::Backpressure);
    let Ok(mut batcher) = Batcher::new(config) else {
        return;
    };
    let mut open = true;
    loop {
        let now = Instant::now();
        if open {
            let idle = batcher.pending_items() == 0 && batcher.parked() == 0;
            let mut first = if idle { rx.recv().ok() } else { None };
            if idle && first.is_none() {
                open = false;
                batcher.close(now);
            }
            while open {
                let msg = match first.take() {
                    Some(m) => m,
                    None => match rx.try_recv() {
                        Ok(m) => m,
                        Err(mpsc::TryRecvError::Empty) => break,
                        Err(mpsc::TryRecvError::Disconnected) => {
                            open = false;
                            batcher.close(now);
                            break;
                        }
                    },
                };
                // Never refused: the batcher is open and the limits are far off.
                let _ = batcher.push(now, msg, 1);
            }
        }
        let now = Instant::now();
        batcher.handle_timeout(now);
        if let Some(batch) = batcher.poll_batch(now) {
            let mut items = batch.items;
            committer.commit_group(&mut items);
            batcher.complete(Instant::now(), batch.id);
            batcher.recycle(items);
            continue;
        }
        if !open {
            break;
        }
        // A partial group waiting for its linger: wait for more, or for the linger.
        if let Some(at) = batcher.poll_timeout() {
            match rx.recv_timeout(at.saturating_duration_since(now)) {
                Ok(m) => {
                    let _ = batcher.push(Instant::now(), m, 1);
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    open = false;
                    batcher.close(Instant::now());
                }
            }
        }
    }
}

/// The writer thread's side of the database: commits groups and remembers which writes were
/// lost, for the barriers that cover them.
struct Committer {
    conn: Connection,
    options: SqliteOptions,
    backlog: Arc<AtomicUsize>,
    lost: Arc<AtomicU64>,
    /// Ops taken so far, in recording order (the number of the last one).
    recorded: u64,
    /// The number of the last op lost to a failed commit (0: none).
    last_lost: u64,
    /// Why the last failed commit failed, for the barriers that fail because of it.
    last_error: String,
}

impl Committer {
    /// Commits one group as one transaction and answers its barriers, in order.
    fn commit_group(&mut self, items: &mut Vec<(ItemId, Msg)>) {
        let ops = items
            .iter()
            .filter(|(_, m)| matches!(m, Msg::Op(_)))
            .count();
        let result = self.commit_with_retry(items);
        self.backlog.fetch_sub(ops, Ordering::Relaxed);
        if let Err(e) = &result {
            // SQLite rolled the whole transaction back: every write in it is gone.
            self.lost.fetch_add(ops as u64, Ordering::Relaxed);
            self.last_lost = self.recorded + ops as u64;
            self.last_error = e.to_string();
            tracing::error!(
                lost = ops,
                lost_in_all = self.lost.load(Ordering::Relaxed),
                error = %e,
                "SQLite commit failed: its writes are lost"
            );
        }
        for (_, msg) in items.drain(..) {
            match msg {
                Msg::Op(_) => self.recorded += 1,
                Msg::Sync { tx, covers } => {
                    // The writes it covers are numbered (recorded - covers, recorded]; a group
                    // that failed lost them all, an earlier failed group may have lost some.
                    let first = self.recorded.saturating_sub(covers) + 1;
                    let answer = if covers > 0 && self.last_lost >= first {
                        Err(io::Error::other(format!(
                            "the commit failed: {}",
                            self.last_error
                        )))
                    } else {
                        Ok(())
                    };
                    let _ = tx.send(answer);
                }
            }
        }
    }

    fn commit_with_retry(&mut self, batch: &[(ItemId, Msg)]) -> rusqlite::Result<()> {
        let mut delay = self.options.retry_delay;
        let mut tries = 0;
        loop {
            match commit(&mut self.conn, batch) {
                Ok(()) => return Ok(()),
                Err(e) if tries >= self.options.commit_retries => return Err(e),
                Err(_) => {
                    tries += 1;
                    std::thread::sleep(delay);
                    delay *= 2;
                }
            }
        }
    }
}

fn commit(conn: &mut Connection, batch: &[(ItemId, Msg)]) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    {
        let mut put = tx.prepare_cached(
            "INSERT OR REPLACE INTO jobs (id, seq, queue, name, data, state, priority, attempts,
             max_attempts, backoff, created_at, run_at, lifo, remove_on_complete, remove_on_fail,
             durable, unique_key, result, failed_reason, options)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,
             ?18, ?19, ?20)",
        )?;
        let mut update = tx.prepare_cached(
            "UPDATE jobs SET state = ?2, attempts = ?3, run_at = ?4, result = ?5,
             failed_reason = ?6 WHERE id = ?1",
        )?;
        let mut remove = tx.prepare_cached("DELETE FROM jobs WHERE id = ?1")?;
        for (_, msg) in batch {
            let Msg::Op(op) = msg else { continue };
            match op {
                StoreOp::Put(r) => {
                    put.execute(params![
                        r.id,
                        r.seq as i64,
                        r.queue,
                        r.name,
                        r.data.to_bytes(),
                        r.state.as_str(),
                        r.priority,
                        r.attempts,
                        r.max_attempts,
                        r.backoff.map(backoff_text),
                        r.created_at,
                        r.run_at,
                        r.lifo,
                        r.remove_on_complete,
                        r.remove_on_fail,
                        r.durable,
                        r.unique_key,
                        r.result.as_ref().map(Value::to_bytes),
                        r.failed_reason,
                        r.options.as_ref().map(|o| o.to_value().to_bytes()),
                    ])?;
                }
                StoreOp::Update {
                    id,
                    state,
                    attempts,
                    run_at,
                    result,
                    failed_reason,
                } => {
                    update.execute(params![
                        id,
                        state.as_str(),
                        attempts,
                        run_at,
                        result.as_ref().map(Value::to_bytes),
                        failed_reason,
                    ])?;
                }
                StoreOp::Remove(id) => {
                    remove.execute(params![id])?;
                }
            }
        }
    }
    tx.commit()
}

/// A backoff as stored: its kind and its delay in ms (the format predates `Duration`).
fn backoff_text(b: Backoff) -> String {
    let kind = match b {
        Backoff::Fixed(_) => "f",
        Backoff::Exponential(_) => "e",
        _ => "d",
    };
    format!("{kind}:{}", b.delay().as_millis())
}

fn parse_backoff(s: &str) -> Option<Backoff> {
    let (kind, n) = s.split_once(':')?;
    let n: i64 = n.parse().ok()?;
    let n = Duration::from_millis(n.max(0) as u64);
    match kind {
        "d" => Some(Backoff::Delay(n)),
        "f" => Some(Backoff::Fixed(n)),
        "e" => Some(Backoff::Exponential(n)),
        _ => None,
    }
}

fn load(conn: &Connection) -> rusqlite::Result<Vec<JobRecord>> {
    let mut stmt = conn.prepare(
        "SELECT id, seq, queue, name, data, state, priority, attempts, max_attempts, backoff,
         created_at, run_at, lifo, remove_on_complete, remove_on_fail, durable, unique_key,
         result, failed_reason, options FROM jobs ORDER BY seq",
    )?;
    let rows = stmt.query_map([], |r| {
        let data: Vec<u8> = r.get(4)?;
        let state: String = r.get(5)?;
        let backoff: Option<String> = r.get(9)?;
        let result: Option<Vec<u8>> = r.get(17)?;
        let options: Option<Vec<u8>> = r.get(19)?;
        Ok(JobRecord {
            id: r.get(0)?,
            seq: r.get::<_, i64>(1)? as u64,
            queue: r.get(2)?,
            name: r.get(3)?,
            data: Value::decode(&data).unwrap_or(Value::Undefined),
            state: Stage::parse(&state),
            priority: r.get(6)?,
            attempts: r.get(7)?,
            max_attempts: r.get(8)?,
            backoff: backoff.as_deref().and_then(parse_backoff),
            created_at: r.get(10)?,
            run_at: r.get(11)?,
            lifo: r.get(12)?,
            remove_on_complete: r.get(13)?,
            remove_on_fail: r.get(14)?,
            durable: r.get(15)?,
            unique_key: r.get(16)?,
            result: result.and_then(|b| Value::decode(&b).ok()),
            failed_reason: r.get(18)?,
            options: options
                .and_then(|b| Value::decode(&b).ok())
                .map(|v| Box::new(AddOptions::from_value(&v))),
        })
    })?;
    rows.collect()
}

/// The number of job rows in a database file, for tests and tools (`None` if it has no table).
pub fn count_rows(path: impl AsRef<Path>) -> io::Result<Option<u64>> {
    let conn = Connection::open(path).map_err(sql_err)?;
    let exists: Option<String> = conn
        .query_row(
            "SELECT name FROM sqlite_master WHERE type='table' AND name='jobs'",
            [],
            |r| r.get(0),
        )
        .optional()
        .map_err(sql_err)?;
    if exists.is_none() {
        return Ok(None);
    }
    let n: i64 = conn
        .query_row("SELECT COUNT(*) FROM jobs", [], |r| r.get(0))
        .map_err(sql_err)?;
    Ok(Some(n as u64))
}
