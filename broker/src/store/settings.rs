//! Settings kept across restarts in SQLite mode, beside the jobs: a queue's stall and DLQ
//! settings, its rate and concurrency limits, its groups' controls, and the job schedulers.
//! One row per setting in table `broker_settings` (`kind`, `key`, the value as MessagePack),
//! written at once when a setting changes (settings change rarely, so they do not go through
//! the jobs' group commit) and read back when the broker starts.
//!
//! Table `broker_job_extras` keeps, per job that has any, what a job row does not: its
//! `timeout`, `ttl`, stall timeout and group, its flow links, and its DLQ reason. A row is
//! written when the job is added with any of them (or gets one) and deleted when the job
//! leaves; a row whose job is not recovered is ignored.

use std::io;
use std::path::Path;
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

/// The settings table of one SQLite database (its own connection).
pub(crate) struct SettingsStore {
    conn: Connection,
}

impl SettingsStore {
    /// Opens the table in the database at `path` (created if missing), waiting up to
    /// `busy_timeout` for the jobs' writer.
    pub fn open(path: &Path, busy_timeout: Duration) -> io::Result<SettingsStore> {
        let conn = Connection::open(path).map_err(sql_err)?;
        conn.busy_timeout(busy_timeout).map_err(sql_err)?;
        conn.execute_batch(SCHEMA).map_err(sql_err)?;
        Ok(SettingsStore { conn })
    }

    /// Every setting stored: (kind, key, value), by kind and key.
    pub fn load(&self) -> io::Result<Vec<(String, String, Value)>> {
        let mut stmt = self
            .conn
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
        let mut out = Vec::new();
        for row in rows {
            let (kind, key, bytes) = row.map_err(sql_err)?;
            let value = Value::decode(&bytes).map_err(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("stored setting {kind} {key}: {e}"),
                )
            })?;
            out.push((kind, key, value));
        }
        Ok(out)
    }

    /// Stores setting `kind`/`key` (replacing it). A failed write is logged: the setting
    /// stays in force until the broker stops.
    pub fn put(&self, kind: &str, key: &str, value: &Value) {
        let r = self.conn.execute(
            "INSERT OR REPLACE INTO broker_settings (kind, key, value) VALUES (?1, ?2, ?3)",
            params![kind, key, value.to_bytes()],
        );
        if let Err(e) = r {
            tracing::error!(kind, key, error = %e, "a setting was not stored");
        }
    }

    /// Every job's extras stored: (job id, value).
    pub fn load_jobs(&self) -> io::Result<Vec<(String, Value)>> {
        let mut stmt = self
            .conn
            .prepare("SELECT id, value FROM broker_job_extras")
            .map_err(sql_err)?;
        let rows = stmt
            .query_map([], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, Vec<u8>>(1)?))
            })
            .map_err(sql_err)?;
        let mut out = Vec::new();
        for row in rows {
            let (id, bytes) = row.map_err(sql_err)?;
            let value = Value::decode(&bytes).map_err(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("stored extras of job {id}: {e}"),
                )
            })?;
            out.push((id, value));
        }
        Ok(out)
    }

    /// Stores job `id`'s extras (replacing them); a failed write is logged.
    pub fn put_job(&self, id: &str, value: &Value) {
        let r = self.conn.execute(
            "INSERT OR REPLACE INTO broker_job_extras (id, value) VALUES (?1, ?2)",
            params![id, value.to_bytes()],
        );
        if let Err(e) = r {
            tracing::error!(id, error = %e, "a job's extras were not stored");
        }
    }

    /// Forgets job `id`'s extras.
    pub fn delete_job(&self, id: &str) {
        let r = self
            .conn
            .execute("DELETE FROM broker_job_extras WHERE id = ?1", params![id]);
        if let Err(e) = r {
            tracing::error!(id, error = %e, "a job's extras were not forgotten");
        }
    }

    /// Forgets setting `kind`/`key`.
    pub fn delete(&self, kind: &str, key: &str) {
        let r = self.conn.execute(
            "DELETE FROM broker_settings WHERE kind = ?1 AND key = ?2",
            params![kind, key],
        );
        if let Err(e) = r {
            tracing::error!(kind, key, error = %e, "a setting was not forgotten");
        }
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
        }
        let s = SettingsStore::open(&path, Duration::from_secs(1)).expect("open");
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
