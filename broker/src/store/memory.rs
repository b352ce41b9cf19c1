//! No storage: the queue state in memory is all there is.

use std::io;

use super::{JobRecord, Store, StoreOp, SyncWaiter};

/// A store that keeps nothing: every op is dropped, and there is never anything to recover.
///
/// ```
/// use autobatch_broker::store::{MemoryStore, Store, StoreOp};
/// let mut s = MemoryStore::new();
/// s.record(StoreOp::Remove("x".into()));
/// assert_eq!(s.backlog(), 0);
/// ```
#[derive(Debug, Default, Clone, Copy)]
pub struct MemoryStore;

impl MemoryStore {
    /// A memory store.
    pub fn new() -> Self {
        MemoryStore
    }
}

impl Store for MemoryStore {
    fn recover(&mut self) -> io::Result<Vec<JobRecord>> {
        Ok(Vec::new())
    }

    fn record(&mut self, _op: StoreOp) {}

    fn persistent(&self) -> bool {
        false
    }

    fn sync(&mut self, _covering: usize) -> Option<SyncWaiter> {
        None
    }

    fn backlog(&self) -> usize {
        0
    }

    fn close(&mut self) {}
}
