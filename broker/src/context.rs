//! What every request is served with: the broker's shared state ([`Shared`]), the
//! connection it came on ([`Conn`]), and both with the request's time ([`Ctx`]).

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

/// One request's context, as every command handler receives it.
pub(crate) struct Ctx<'a> {
    pub shared: &'a Shared,
    pub conn: &'a Conn,
    /// When the request is served, epoch ms.
    pub now: f64,
}

impl Ctx<'_> {
    /// The queue state, locked.
    pub fn state(&self) -> MutexGuard<'_, State> {
        self.shared.lock()
    }
}

/// What a command handler answers: its output, or the error text bunqueue would send.
pub(crate) type Served<T> = Result<T, String>;
