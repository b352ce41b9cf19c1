//! Queue methods for job; see [`ops`](crate::ops).
