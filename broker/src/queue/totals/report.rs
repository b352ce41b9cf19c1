//! What Stats and Prometheus report: the totals beside the queues' counts, which the caller
//! reads from the job index and hands in.

use autobatch_core::ops::ServerStats;

use super::Totals;

/// Job counts over every queue, as bunqueue's `getStats` adds them up.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Gauges {
    /// Ready, priority 0.
    pub waiting: u64,
    /// Ready, priority above 0.
    pub prioritized: u64,
    /// Not due yet.
    pub delayed: u64,
    pub active: u64,
    /// In the dead-letter queue.
    pub dlq: u64,
    /// Completed and kept.
    pub completed: u64,
    pub waiting_children: u64,
}

/// bunqueue's Prometheus metrics, in its order: name (after `bunqueue_`), type, help.
const METRICS: [(&str, &str, &str); 14] = [
    ("jobs_waiting", "gauge", "Number of jobs waiting in queue"),
    (
        "jobs_prioritized",
        "gauge",
        "Number of prioritized jobs (priority > 0)",
    ),
    ("jobs_delayed", "gauge", "Number of delayed jobs"),
    ("jobs_active", "gauge", "Number of jobs being processed"),
    ("jobs_dlq", "gauge", "Number of jobs in dead letter queue"),
    ("jobs_completed", "gauge", "Number of completed jobs"),
    ("jobs_pushed_total", "counter", "Total jobs pushed"),
    ("jobs_pulled_total", "counter", "Total jobs pulled"),
    ("jobs_completed_total", "counter", "Total jobs completed"),
    ("jobs_failed_total", "counter", "Total jobs failed"),
    ("uptime_seconds", "gauge", "Server uptime in seconds"),
    (
        "cron_jobs_registered",
        "gauge",
        "Number of registered cron jobs",
    ),
    (
        "workers_registered",
        "gauge",
        "Number of registered workers",
    ),
    (
        "webhooks_registered",
        "gauge",
        "Number of registered webhooks",
    ),
];

impl Totals {
    /// Stats' `stats`, as bunqueue's `handleStats` answers it.
    pub fn stats(&mut self, g: &Gauges, now: f64) -> ServerStats {
        let (push, pull) = self.rates(now);
        let mut s = ServerStats::default();
        (s.waiting, s.active, s.delayed) = (g.waiting, g.active, g.delayed);
        (s.dlq, s.completed, s.failed) = (g.dlq, g.completed, self.failed);
        s.uptime = now - self.started_at;
        (s.push_per_sec, s.pull_per_sec) = (push, pull);
        s
    }

    /// Prometheus' text exposition: bunqueue's server-wide gauges and counters under its own
    /// metric names ([`METRICS`]). `workers` and `crons`: how many workers and job schedulers
    /// are registered.
    pub fn prometheus(&self, g: &Gauges, workers: usize, crons: usize, now: f64) -> String {
        let uptime_seconds = ((now - self.started_at) / 1000.0).floor() as i64;
        let values: [String; 14] = [
            g.waiting.to_string(),
            g.prioritized.to_string(),
            g.delayed.to_string(),
            g.active.to_string(),
            g.dlq.to_string(),
            g.completed.to_string(),
            self.pushed.to_string(),
            self.pulled.to_string(),
            self.completed.to_string(),
            self.failed.to_string(),
            uptime_seconds.to_string(),
            crons.to_string(),
            workers.to_string(),
            "0".into(),
        ];
        let mut out = String::new();
        for ((name, kind, help), value) in METRICS.iter().zip(values) {
            out.push_str(&format!(
                "# HELP bunqueue_{name} {help}\n# TYPE bunqueue_{name} {kind}\nbunqueue_{name} {value}\n\n"
            ));
        }
        out
    }
}
