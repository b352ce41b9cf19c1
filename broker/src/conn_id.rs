//! How the queue state and the event subscriptions name a connection.

/// A connection's number, unique for the broker's lifetime: the jobs it holds, the workers it
/// registered and its event subscription are tied to it, and go when it closes.
pub(crate) type ConnId = u64;
