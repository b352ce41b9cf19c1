//! Queue methods for cron; see [`ops`](crate::ops).
