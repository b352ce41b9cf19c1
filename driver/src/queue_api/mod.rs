//! The rest of [`Queue`](crate::Queue)'s methods, one module per domain, each a thin typed
//! wrapper over [`Client::run`](crate::Client::run) and an [`ops`](crate::ops) operation.

mod control;
mod cron;
mod dlq;
mod flow;
mod job;
mod limits;
mod lookup;
