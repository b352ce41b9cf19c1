//! What every request is served with: the broker's shared state ([`Shared`]) and the
//! connection it came on ([`Conn`]).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::{watch, Semaphore};

use crate::config::BrokerConfig;
use crate::conn_id::ConnId;
use crate::events::EventSink;
use crate::framing::Budget;
use crate::queue::State;

/// State shared by every connection of one broker.
pub(crate) struct Shared {
    pub state: Mutex<State>,
    pub config: BrokerConfig,
    pub next_conn: AtomicU64,
    /// Connections being served (for `max_connections`).
    pub connections: AtomicUsize,
    /// Bytes allocated for incomplete frames across every connection (for
    /// `partial_frame_budget`).
    pub budget: Arc<Budget>,
    /// Decodes of large frames running at once (they run off the reactor, see
    /// `dispatch::handle`).
    pub large_decodes: Semaphore,
    /// Becomes true when the broker stops: long-polls return at once.
    pub stop: watch::Receiver<bool>,
}

impl Shared {
    /// The queue state, locked.
    pub fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock would be a bug; keep serving rather than cascade.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Per-connection context.
pub(crate) struct Conn {
    pub id: ConnId,
    pub authed: AtomicBool,
    /// Where this connection's event frames go once it subscribes (its outbox).
    pub events: Arc<dyn EventSink>,
}
