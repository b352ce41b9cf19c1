//! Queue methods for flow; see [`ops`](crate::ops).
