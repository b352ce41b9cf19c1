//! The job store as the queue state feeds it: every state change handed over, counted, so that
//! a durable reply can wait for the commit that covers the changes its request made.

use crate::store::{Store, StoreOp, SyncWaiter};

/// The store and how many changes it was handed.
pub(crate) struct Journal {
    store: Box<dyn Store>,
    /// State changes handed to the store so far.
    recorded: u64,
}

impl Journal {
    /// Feeds `store` from now on.
    pub fn new(store: Box<dyn Store>) -> Journal {
        Journal { store, recorded: 0 }
    }

    /// Whether the store keeps jobs across a restart (full records are written then).
    pub fn persistent(&self) -> bool {
        self.store.persistent()
    }

    /// Hands one state change to the store, counting it.
    pub fn record(&mut self, op: StoreOp) {
        self.recorded += 1;
        self.store.record(op);
    }

    /// How many state changes were handed to the store so far.
    pub fn recorded(&self) -> u64 {
        self.recorded
    }

    /// A commit barrier covering the last `covering` recorded changes (see [`Store::sync`]).
    pub fn sync(&mut self, covering: u64) -> Option<SyncWaiter> {
        self.store.sync(covering as usize)
    }

    /// Changes recorded but not yet committed.
    pub fn backlog(&self) -> usize {
        self.store.backlog()
    }

    /// Commits what is pending and closes the store.
    pub fn close(&mut self) {
        self.store.close();
    }
}
