//! Settings kept across restarts in SQLite mode, beside the jobs: a queue's stall and DLQ
//! settings, its rate and concurrency limits, its groups' controls, and the job schedulers.
//! One row per setting in table `broker_settings` (`kind`, `key`, the value as MessagePack),
//! written when a setting changes (by a writer thread of its own, in batches, apart from the
//! jobs' group commit) and read back when the broker starts.
//!
//! Table `broker_job_extras` keeps, per job that has any, what a job row does not: its
//! `timeout`, `ttl`, stall timeout and group, its flow links, and its DLQ reason. A row is
//! written when the job is added with any of them (or gets one) and deleted when the job
//! leaves; a row whose job is not recovered is ignored.

use std::io;
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use autobatch_core::wire::Value;
use rusqlite::{params, Connection};

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS broker_settings (
    kind TEXT NOT NULL,
    key TEXT NOT NULL,
    value BLOB NOT NULL,
    PRIMARY KEY (kind, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS broker_job_extras (
    id TEXT PRIMARY KEY NOT NULL,
    value BLOB NOT NULL
) WITHOUT ROWID;";

fn sql_err(e: rusqlite::Error) -> io::Error {
    io::Error::other(e.to_string())
}

/// One write, applied in order by the writer thread.
enum Write {
    Put(&'static str, String, Vec<u8>),
    Delete(&'static str, String),
    PutJob(String, Vec<u8>),
    DeleteJob(String),
}

/// Most writes applied in one transaction.
const BATCH: usize = 16_384;

/// The settings tables of one SQLite database: read once when opened, then written by a
/// thread of their own (its own connection), in order, in batches, so that a write made under
/// the broker's state lock only enqueues.
pub(crate) struct SettingsStore {
    tx: Option<mpsc::Sender<Write>>,
    thread: Option<std::thread::JoinHandle<()>>,
    settings: Vec<(String, String, Value)>,
    jobs: Vec<(String, Value)>,
}

fn decode(what: &str, bytes: &[u8]) -> io::Result<Value> {
    Value::decode(bytes)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("stored {what}: {e}")))
}

/// The settings rows (kind, key, value) and the job extras rows (id, value).
type Stored = (Vec<(String, String, Value)>, Vec<(String, Value)>);

fn read_all(conn: &Connection) -> io::Result<Stored> {
    let mut stmt = conn
        .prepare("SELECT kind, key, value FROM broker_settings ORDER BY kind, key")
        .map_err(sql_err)?;
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, Vec<u8>>(2)?,
            ))
        })
        .map_err(sql_err)?;
    let mut settings = Vec::new();
    for row in rows {
        let (kind, key, bytes) = row.map_err(sql_err)?;
        let value = decode(&format!("setting {kind} {key}"), &bytes)?;
        settings.push((kind, key, value));
    }
    let mut stmt = conn
        .prepare("SELECT id, value FROM broker_job_extras")
        .map_err(sql_err)?;
    let rows = stmt
        .query_map([], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, Vec<u8>>(1)?))
        })
        .map_err(sql_err)?;
    let mut jobs = Vec::new();
    for row in rows {
        let (id, bytes) = row.map_err(sql_err)?;
        let value = decode(&format!("extras of job {id}"), &bytes)?;
        jobs.push((id, value));
    }
    Ok((settings, jobs))
}

fn apply(conn: &Connection, w: &Write) -> rusqlite::Result<usize> {
    match w {
        Write::Put(kind, key, v) => conn.execute(
            "INSERT OR REPLACE INTO broker_settings (kind, key, value) VALUES (?1, ?2, ?3)",
            params![kind, key, v],
        ),
        Write::Delete(kind, key) => conn.execute(
            "DELETE FROM broker_settings WHERE kind = ?1 AND key = ?2",
            params![kind, key],
        ),
        Write::PutJob(id, v) => conn.execute(
            "INSERT OR REPLACE INTO broker_job_extras (id, value) VALUES (?1, ?2)",
            params![id, v],
        ),
        Write::DeleteJob(id) => {
            conn.execute("DELETE FROM broker_job_extras WHERE id = ?1", params![id])
        }
    }
}

/// How long the writer lets writes gather before it commits them: few commits, so that it
/// seldom holds the database's write lock when the jobs' writer wants it.
const LINGER: Duration = Duration::from_millis(25);

/// The writer thread: each batch in one transaction; a failed batch is logged and dropped
/// (the settings stay in force until the broker stops).
fn write_loop(mut conn: Connection, rx: mpsc::Receiver<Write>) {
    while let Ok(first) = rx.recv() {
        std::thread::sleep(LINGER);
        let mut batch = vec![first];
        while batch.len() < BATCH {
            match rx.try_recv() {
                Ok(w) => batch.push(w),
                Err(_) => break,
            }
        }
        let r = conn.transaction().and_then(|t| {
            for w in &batch {
                apply(&t, w)?;
            }
            t.commit()
        });
        if let Err(e) = r {
            tracing::error!(writes = batch.len(), error = %e, "settings were not stored");
        }
    }
}

impl SettingsStore {
    /// Opens the tables in the database at `path` (created if missing), reads what they
    /// hold, and starts the writer, which waits up to `busy_timeout` for the jobs' writer.
    pub fn open(path: &Path, busy_timeout: Duration) -> io::Result<SettingsStore> {
        let conn = Connection::open(path).map_err(sql_err)?;
        conn.busy_timeout(busy_timeout).map_err(sql_err)?;
        // As the jobs' connection: WAL (set on the file by the jobs' store), no fsync per
        // commit.
        conn.execute_batch("PRAGMA synchronous=NORMAL;")
            .map_err(sql_err)?;
        conn.execute_batch(SCHEMA).map_err(sql_err)?;
        let (settings, jobs) = read_all(&conn)?;
        let (tx, rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("autobatch-broker-settings".into())
            .spawn(move || write_loop(conn, rx))?;
        Ok(SettingsStore {
            tx: Some(tx),
            thread: Some(thread),
            settings,
            jobs,
        })
    }

    /// Every setting stored when the store was opened: (kind, key, value), by kind and key.
    pub fn load(&mut self) -> io::Result<Vec<(String, String, Value)>> {
        Ok(std::mem::take(&mut self.settings))
    }

    /// Every job's extras stored when the store was opened: (job id, value).
    pub fn load_jobs(&mut self) -> io::Result<Vec<(String, Value)>> {
        Ok(std::mem::take(&mut self.jobs))
    }

    fn send(&self, w: Write) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(w);
        }
    }

    /// Stores setting `kind`/`key` (replacing it).
    pub fn put(&self, kind: &'static str, key: &str, value: &Value) {
        self.send(Write::Put(kind, key.to_owned(), value.to_bytes()));
    }

    /// Forgets setting `kind`/`key`.
    pub fn delete(&self, kind: &'static str, key: &str) {
        self.send(Write::Delete(kind, key.to_owned()));
    }

    /// Stores job `id`'s extras (replacing them).
    pub fn put_job(&self, id: &str, value: &Value) {
        self.send(Write::PutJob(id.to_owned(), value.to_bytes()));
    }

    /// Forgets job `id`'s extras.
    pub fn delete_job(&self, id: &str) {
        self.send(Write::DeleteJob(id.to_owned()));
    }

    /// Writes what is queued and stops the writer. Blocks until done.
    pub fn close(&mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for SettingsStore {
    fn drop(&mut self) {
        self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_round_trip() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("s.db");
        {
            let s = SettingsStore::open(&path, Duration::from_secs(1)).expect("open");
            s.put("stall", "q", &Value::map([("maxStalls", Value::Int(5))]));
            s.put("dlq", "q", &Value::Int(1));
            s.put("dlq", "q", &Value::Int(2));
            s.put("rate", "r", &Value::Nil);
            s.delete("rate", "r");
            s.put_job("j", &Value::Int(7));
            s.put_job("k", &Value::Int(8));
            s.delete_job("k");
        }
        let mut s = SettingsStore::open(&path, Duration::from_secs(1)).expect("open");
        assert_eq!(
            s.load_jobs().expect("jobs"),
            vec![("j".to_owned(), Value::Int(7))]
        );
        let got = s.load().expect("load");
        assert_eq!(
            got,
            vec![
                ("dlq".to_owned(), "q".to_owned(), Value::Int(2)),
                (
                    "stall".to_owned(),
                    "q".to_owned(),
                    Value::map([("maxStalls", Value::Int(5))])
                ),
            ]
        );
    }
}
