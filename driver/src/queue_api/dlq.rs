//! Queue methods for dlq; see [`ops`](crate::ops).
