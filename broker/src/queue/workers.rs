//! Registered workers (the official Worker's housekeeping): RegisterWorker, Heartbeat,
//! ListWorkers, UnregisterWorker, and whether a queue has a live one (a job scheduler's
//! `skipIfNoWorker`).

use std::collections::HashMap;

use autobatch_core::ops::WorkerInfo;

use crate::conn_id::ConnId;

/// bunqueue's `WORKER_TIMEOUT_MS` default: a worker not seen for this long does not count.
const WORKER_TIMEOUT_MS: f64 = 30_000.0;

/// A registered worker, as ListWorkers shows it.
pub(crate) struct Worker {
    /// The connection it registered on: it is unregistered when that closes.
    pub conn: ConnId,
    /// Its record as RegisterWorker answered it; `last_seen` moves with each Heartbeat.
    pub info: WorkerInfo,
}

/// The registered workers by id.
#[derive(Default)]
pub(crate) struct Workers {
    by_id: HashMap<String, Worker>,
}

impl Workers {
    /// Registers (or replaces) worker `id`.
    pub fn register(&mut self, id: String, worker: Worker) {
        self.by_id.insert(id, worker);
    }

    /// A worker's Heartbeat: false if it is not registered.
    pub fn touch(&mut self, id: &str, now: f64) -> bool {
        match self.by_id.get_mut(id) {
            Some(w) => {
                w.info.last_seen = now;
                true
            }
            None => false,
        }
    }

    /// The registered workers, oldest registration first.
    pub fn list(&self) -> Vec<(&String, &Worker)> {
        let mut all: Vec<_> = self.by_id.iter().collect();
        all.sort_by(|a, b| {
            a.1.info
                .registered_at
                .total_cmp(&b.1.info.registered_at)
                .then(a.0.cmp(b.0))
        });
        all
    }

    /// Unregisters a worker; false if it was not registered.
    pub fn unregister(&mut self, id: &str) -> bool {
        self.by_id.remove(id).is_some()
    }

    /// Connection `conn` closed: its workers are unregistered.
    pub fn drop_conn(&mut self, conn: ConnId) {
        self.by_id.retain(|_, w| w.conn != conn);
    }

    /// How many are registered.
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// Whether a worker of `queue` was seen within bunqueue's worker timeout.
    pub fn live_on(&self, queue: &str, now: f64) -> bool {
        self.by_id.values().any(|w| {
            now - w.info.last_seen < WORKER_TIMEOUT_MS && w.info.queues.iter().any(|q| q == queue)
        })
    }
}
