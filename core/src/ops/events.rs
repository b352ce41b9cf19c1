//! Event subscriptions: the two commands that start and stop the events bunqueue pushes on a
//! connection, typed as [`QueueEvent`](crate::session::QueueEvent)s.
//!
//! Each command's wire shape and bunqueue 2.9.5's behaviour: `docs/protocol/events.md`.
//!
//! ```
//! use autobatch_core::ops::{Operation, SubscribeEvents};
//! use autobatch_core::wire::Value;
//! let sub = SubscribeEvents::new("emails");
//! assert_eq!(sub.to_body(), Value::map([("cmd", Value::from("SubscribeEvents")), ("queue", Value::from("emails"))]));
//! assert!(SubscribeEvents::new("bad name!").validate().is_err());
//! ```

use super::decl::kind::Queue;
use super::decl::op;

op! {
    /// `SubscribeEvents`: this connection receives the events of `queue` from now on (replacing
    /// any earlier subscription of the connection: bunqueue keeps one per connection).
    SubscribeEvents, NotSafe, Eq;
    queue;
}

op! {
    /// `UnsubscribeEvents`: this connection receives no more events. Takes no fields (the
    /// connection has one subscription at most); idempotent.
    UnsubscribeEvents, Safe, Eq, Default;
    /// Unsubscribes this connection.
    new();
    fields {}
}
