//! SQLite commits that fail: a durable push is acknowledged only once its own rows are
//! committed, and the writes a failed commit lost are counted.
//!
//! The fault is real: another connection holds the database's write lock (`BEGIN EXCLUSIVE`),
//! as another process or a backup tool would, so the broker's commits fail with SQLITE_BUSY
//! after their busy timeout. A transaction with no writes takes no lock, so a barrier alone in
//! its group still commits: a barrier that judged by its own commit alone would report success
//! for writes that an earlier group had lost, which is why these tests put barriers after
//! failed groups.

mod common;

use std::path::Path;
use std::time::Duration;

use autobatch_broker::store::{
    count_rows, JobRecord, SqliteOptions, SqliteStore, Stage, Store, StoreOp,
};
use autobatch_broker::{BrokerConfig, EmbeddedBroker};
use autobatch_core::wire::Value;
use common::*;

/// Commits that give up at once instead of waiting seconds for the lock.
fn impatient() -> SqliteOptions {
    SqliteOptions::default()
        .busy_timeout(Duration::from_millis(20))
        .commit_retries(0)
}

/// Holds the database's write lock until dropped.
struct WriteLock(rusqlite::Connection);

impl WriteLock {
    fn take(path: &Path) -> WriteLock {
        let conn = rusqlite::Connection::open(path).unwrap();
        conn.execute_batch("BEGIN EXCLUSIVE").unwrap();
        WriteLock(conn)
    }
}

impl Drop for WriteLock {
    fn drop(&mut self) {
        let _ = self.0.execute_batch("ROLLBACK");
    }
}

fn record(id: &str, seq: u64) -> JobRecord {
    JobRecord {
        id: id.into(),
        queue: "q".into(),
        name: "n".into(),
        data: Value::Int(1),
        priority: 0.0,
        attempts: 0,
        max_attempts: 3,
        backoff: None,
        created_at: 0.0,
        run_at: 0.0,
        seq,
        lifo: false,
        remove_on_complete: false,
        remove_on_fail: false,
        durable: true,
        unique_key: None,
        state: Stage::Waiting,
        result: None,
        failed_reason: None,
        options: None,
    }
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(f)
}

/// Waits (a hang guard, not a timing assertion) until the writer has taken every op.
fn drained(store: &SqliteStore) {
    for _ in 0..2_000 {
        if store.backlog() == 0 {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("the writer never took its ops");
}

#[test]
fn a_barrier_after_a_lost_write_fails_even_when_its_own_group_commits() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.db");
    let mut store = SqliteStore::open_with(&path, impatient()).unwrap();
    store.recover().unwrap();

    let lock = WriteLock::take(&path);
    store.record(StoreOp::Put(Box::new(record("lost", 0))));
    // The write's group fails; the barrier then lands alone in a group of its own, which
    // commits nothing and succeeds. It covers the lost write, so it must fail.
    drained(&store);
    let barrier = store.sync(1).unwrap();
    assert!(
        block_on(barrier.wait()).is_err(),
        "a barrier covering a lost write reported it committed"
    );
    assert_eq!(store.lost_writes(), 1);
    drop(lock);

    // The store is healthy again: a new write and its barrier commit, and the old loss is not
    // held against them.
    store.record(StoreOp::Put(Box::new(record("kept", 1))));
    block_on(store.sync(1).unwrap().wait()).expect("a healthy commit");
    // A barrier that covers nothing only waits.
    block_on(store.sync(0).unwrap().wait()).expect("covers nothing");
    store.close();
    assert_eq!(count_rows(&path).unwrap(), Some(1));
    assert_eq!(store.lost_writes(), 1);
}

#[test]
fn a_barrier_in_the_failed_group_fails_and_later_groups_are_judged_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.db");
    let mut store = SqliteStore::open_with(&path, impatient()).unwrap();
    store.recover().unwrap();
    let lock = WriteLock::take(&path);
    // However the writer groups these, the first two writes are lost while the lock is held.
    store.record(StoreOp::Put(Box::new(record("a", 0))));
    store.record(StoreOp::Put(Box::new(record("b", 1))));
    let first = store.sync(2).unwrap();
    assert!(block_on(first.wait()).is_err());
    drop(lock);
    store.record(StoreOp::Put(Box::new(record("c", 2))));
    let second = store.sync(1).unwrap();
    block_on(second.wait()).expect("its own write committed");
    store.close();
    assert_eq!(count_rows(&path).unwrap(), Some(1));
    assert_eq!(store.lost_writes(), 2);
}

/// Through the broker: while the database is locked, a durable push is refused (not
/// acknowledged), and the job it carried is not left in the queue either; once the lock is
/// gone, durable pushes are acknowledged and survive a restart. Every acknowledged durable
/// push is in the database, counted through an independent connection to the file.
#[test]
fn a_durable_push_is_never_acknowledged_without_its_row() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.db");
    let config = || {
        let mut c = BrokerConfig::default().data_path(&path);
        c.sqlite = impatient();
        c
    };
    let durable = || vec![("durable", Value::Bool(true))];
    let mut acknowledged = Vec::new();
    {
        let b = EmbeddedBroker::start(config()).unwrap();
        let mut c = Raw::connect(b.addr());
        // A first job makes sure the schema and WAL exist before the lock is taken.
        acknowledged.push(push(&mut c, "q", int(0), durable()));

        let lock = WriteLock::take(&path);
        // Non-durable pushes are acknowledged before their commit, as in bunqueue: they are
        // lost with the failing groups (and counted), but must not let a durable push through.
        for i in 0..250 {
            c.send(
                "PUSH",
                vec![("queue", s("q")), ("name", s("n")), ("data", int(i))],
            );
        }
        c.send(
            "PUSH",
            vec![
                ("queue", s("q")),
                ("name", s("n")),
                ("data", s("refused")),
                ("durable", Value::Bool(true)),
            ],
        );
        let mut refused = 0;
        for _ in 0..251 {
            let r = c.recv();
            if !ok(&r) {
                refused += 1;
                assert!(
                    err(&r).starts_with("Durable write failed"),
                    "unexpected error: {r:?}"
                );
            }
        }
        assert_eq!(refused, 1, "the durable push under a locked database");
        drop(lock);

        for i in 0..5 {
            acknowledged.push(push(&mut c, "q", int(100 + i), durable()));
        }
        // The refused job was taken back: it is not waiting in the queue.
        let r = c.call("PULLB", vec![("queue", s("q")), ("count", int(1000))]);
        let jobs = r.get("jobs").unwrap().as_array().unwrap();
        assert!(
            jobs.iter().all(|j| j.get("data") != Some(&s("refused"))),
            "a refused durable job was left in the queue"
        );
        b.stop().unwrap();
    }
    let conn = rusqlite::Connection::open(&path).unwrap();
    for id in &acknowledged {
        let n: i64 = conn
            .query_row("SELECT COUNT(*) FROM jobs WHERE id = ?1", [id], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(n, 1, "acknowledged durable job {id} is not in the database");
    }
}
