//! A snapshot of a connection's counters.

use autobatch_core::batch::BatchStats;
use autobatch_core::session::{Session, SessionStats};

/// Counters of one connection: the session's, plus the add batcher's of each queue used.
///
/// ```
/// use autobatch_driver::ClientStats;
/// let stats = ClientStats::default();
/// assert_eq!(stats.session.adds, 0);
/// assert!(stats.queue("emails").is_none());
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct ClientStats {
    /// Connection-wide counters: frames, adds, flushes by reason, timeouts, worker jobs.
    pub session: SessionStats,
    /// Per-queue add batcher counters (batch sizes, flushes by reason), in first-use order.
    pub queues: Vec<(String, BatchStats)>,
}

impl ClientStats {
    pub(crate) fn of(session: &Session) -> Self {
        ClientStats {
            session: session.stats().clone(),
            queues: session
                .batch_stats()
                .map(|(q, s)| (q.to_owned(), s.clone()))
                .collect(),
        }
    }

    /// The batcher counters of `queue`, if it was used.
    ///
    /// ```
    /// let stats = autobatch_driver::ClientStats::default();
    /// assert!(stats.queue("q").is_none());
    /// ```
    pub fn queue(&self, queue: &str) -> Option<&BatchStats> {
        self.queues.iter().find(|(q, _)| q == queue).map(|(_, s)| s)
    }
}
