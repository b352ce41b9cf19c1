//! The commands of [`autobatch_core::ops`], served: one module per domain, one handler per
//! command, routed by `crate::routes`.
//!
//! A handler takes the request's context and its typed op, and answers the op's output (the
//! op writes the reply), or a reply of its own where the broker keeps its records as wire
//! values; a few read the raw body, where bunqueue reads fields the typed request would
//! round or refuse.

pub(crate) mod control;
pub(crate) mod cron;
pub(crate) mod dlq;
pub(crate) mod flow;
mod flow_plan;
pub(crate) mod groups;
pub(crate) mod job;
pub(crate) mod limits;
pub(crate) mod lookup;
pub(crate) mod observe;
pub(crate) mod relink;
pub(crate) mod subscribe;
pub(crate) mod worker;
