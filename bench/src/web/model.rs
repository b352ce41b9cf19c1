//! What a web run is made of: the stacks and modes measured, the plan, each cell's figures and
//! the whole run. A leaf of `web`, so that the report and the chart read the run without
//! depending on the code that measures it. It reads back from the run's JSON document, so that
//! `--render` gives the same tables again.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::wrk;

/// Which web server answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Stack {
    /// `web_orders` on tokio `multi_thread`, 2 workers.
    #[value(name = "multi_thread")]
    AxumMultiThread,
    /// `web_orders` on tokio `current_thread`.
    #[value(name = "current_thread")]
    AxumCurrentThread,
    /// `orders.ts` on Bun with bunqueue's TS client.
    #[value(name = "bun")]
    Bun,
}

impl Stack {
    /// Every stack, in report order.
    pub const ALL: [Stack; 3] = [Stack::AxumMultiThread, Stack::AxumCurrentThread, Stack::Bun];

    /// For tables.
    pub fn label(self) -> &'static str {
        match self {
            Stack::AxumMultiThread => "axum + autobatch, multi_thread",
            Stack::AxumCurrentThread => "axum + autobatch, current_thread",
            Stack::Bun => "Bun.serve + bunqueue TS client",
        }
    }
}

/// What the handler does after parsing the order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Answers 202 without adding: the web server alone.
    NoAdd,
    /// Adds with batching off.
    Off,
    /// Adds with batching on.
    On,
}

impl Mode {
    /// Every mode, in report order.
    pub const ALL: [Mode; 3] = [Mode::NoAdd, Mode::Off, Mode::On];

    /// For tables.
    pub fn label(self) -> &'static str {
        match self {
            Mode::NoAdd => "no add",
            Mode::Off => "batching off",
            Mode::On => "batching on",
        }
    }
}

/// What `--web` runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WebPlan {
    /// The web servers measured, in report order.
    pub stacks: Vec<Stack>,
    /// Concurrent keep-alive connections, one cell each.
    pub connections: Vec<usize>,
    /// The timed wrk run of a cell.
    pub duration: Duration,
    /// The untimed wrk run before it.
    pub warmup: Duration,
    /// Repetitions of every cell, interleaved.
    pub reps: usize,
    /// Short cells for CI.
    pub smoke: bool,
}

impl WebPlan {
    /// The full run (10 s cells at 1, 10, 100 and 1,000 connections) or the smoke run
    /// (1 s cells at 1 and 10).
    pub fn new(smoke: bool, reps: Option<usize>) -> WebPlan {
        if smoke {
            WebPlan {
                stacks: Stack::ALL.to_vec(),
                connections: vec![1, 10],
                duration: Duration::from_secs(1),
                warmup: Duration::from_secs(1),
                reps: reps.unwrap_or(1).max(1),
                smoke,
            }
        } else {
            WebPlan {
                stacks: Stack::ALL.to_vec(),
                connections: vec![1, 10, 100, 1000],
                duration: Duration::from_secs(10),
                warmup: Duration::from_secs(2),
                reps: reps.unwrap_or(1).max(1),
                smoke,
            }
        }
    }
}

/// One cell's measurements.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WebCell {
    /// The web server.
    pub stack: Stack,
    /// With or without the add, batching off or on.
    pub mode: Mode,
    /// wrk's connections.
    pub connections: usize,
    /// Which repetition.
    pub rep: usize,
    /// The timed wrk run.
    pub wrk: wrk::WrkResult,
    /// PUSH frames the web process sent the server during the timed run.
    pub push_frames: u64,
    /// PUSHB frames likewise.
    pub pushb_frames: u64,
    /// The web process's CPU time during the timed run, µs.
    pub web_cpu_us: Option<f64>,
    /// Its context switches during the timed run.
    pub web_switches: u64,
    /// The server's CPU time during the timed run, µs.
    pub server_cpu_us: Option<f64>,
    /// 202s of the warm-up and the timed run together.
    pub accepted: u64,
    /// Jobs on the server after the web process stopped.
    pub jobs: u64,
    /// Requests wrk left unanswered when it stopped (still served before the process exited):
    /// at most its connections per wrk run, which is how many jobs may exceed the 202s.
    pub unanswered_bound: u64,
}

impl WebCell {
    /// 202s that are not jobs on the server (0 unless an add was lost).
    pub fn lost(&self) -> u64 {
        self.accepted.saturating_sub(self.jobs)
    }

    /// Per request of the timed run.
    fn per_request(&self, x: f64) -> Option<f64> {
        (self.wrk.requests > 0).then(|| x / self.wrk.requests as f64)
    }

    /// Web-process CPU µs per request.
    pub fn web_us(&self) -> Option<f64> {
        self.per_request(self.web_cpu_us?)
    }

    /// Server CPU µs per request.
    pub fn server_us(&self) -> Option<f64> {
        self.per_request(self.server_cpu_us?)
    }

    /// Context switches of the web process per request.
    pub fn switches_per_request(&self) -> Option<f64> {
        self.per_request(self.web_switches as f64)
    }

    /// PUSH + PUSHB frames per request.
    pub fn frames_per_request(&self) -> Option<f64> {
        self.per_request((self.push_frames + self.pushb_frames) as f64)
    }
}

/// Everything a run measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WebRun {
    /// The plan.
    pub plan: WebPlan,
    /// The server.
    pub server: String,
    /// Every cell in the order run.
    pub cells: Vec<WebCell>,
    /// Wall time of the whole run.
    pub wall_s: f64,
}
