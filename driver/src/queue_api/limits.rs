//! Queue methods for limits; see [`ops`](crate::ops).
