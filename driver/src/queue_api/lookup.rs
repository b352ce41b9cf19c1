//! Queue methods for lookup; see [`ops`](crate::ops).
