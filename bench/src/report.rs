//! Turning [`Measurements`](crate::run::Measurements) into the printed report, the published
//! goals judged on the run and the JSON document: one module each, over the figures and cells
//! they share.

mod cells;
mod goals;
mod json;
mod text;

pub use cells::{ratio_summary, short_name};
pub use json::to_json;
pub use text::{render, render_costs};

use crate::machine::MachineInfo;
use crate::run::Plan;

/// What was run, against what, where.
#[derive(Debug, Clone)]
pub struct RunInfo {
    /// Machine, date, versions.
    pub machine: MachineInfo,
    /// The server measured against, in words.
    pub server: String,
    /// The autobatch runtime adapter (the first of `runtimes`).
    pub runtime: String,
    /// Every runtime measured (`--runtime a,b,…`); the others' contenders are `id:runtime`.
    pub runtimes: Vec<String>,
    /// Sizes.
    pub plan: Plan,
    /// `--compare` run.
    pub compare: bool,
    /// `--tls` run: the TLS server, in words.
    pub tls: Option<String>,
    /// `--smoke` run.
    pub smoke: bool,
}

#[cfg(test)]
mod tests;
