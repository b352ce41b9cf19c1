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
    /// metric names.
    /// `workers` and `crons`: how many workers and job schedulers are registered.
    pub fn prometheus(&self, g: &Gauges, workers: usize, crons: usize, now: f64) -> String {
        let t = self;
        let lines: [(&str, &str, &str, String); 14] = [
            (
                "jobs_waiting",
                "gauge",
                "Number of jobs waiting in queue",
                g.waiting.to_string(),
            ),
            (
                "jobs_prioritized",
                "gauge",
                "Number of prioritized jobs (priority > 0)",
                g.prioritized.to_string(),
            ),
            (
                "jobs_delayed",
                "gauge",
                "Number of delayed jobs",
                g.delayed.to_string(),
            ),
            (
                "jobs_active",
                "gauge",
                "Number of jobs being processed",
                g.active.to_string(),
            ),
            (
                "jobs_dlq",
                "gauge",
                "Number of jobs in dead letter queue",
                g.dlq.to_string(),
            ),
            (
                "jobs_completed",
                "gauge",
                "Number of completed jobs",
                g.completed.to_string(),
            ),
            (
                "jobs_pushed_total",
                "counter",
                "Total jobs pushed",
                t.pushed.to_string(),
            ),
            (
                "jobs_pulled_total",
                "counter",
                "Total jobs pulled",
                t.pulled.to_string(),
            ),
            (
                "jobs_completed_total",
                "counter",
                "Total jobs completed",
                t.completed.to_string(),
            ),
            (
                "jobs_failed_total",
                "counter",
                "Total jobs failed",
                t.failed.to_string(),
            ),
            (
                "uptime_seconds",
                "gauge",
                "Server uptime in seconds",
                (((now - t.started_at) / 1000.0).floor() as i64).to_string(),
            ),
            (
                "cron_jobs_registered",
                "gauge",
                "Number of registered cron jobs",
                crons.to_string(),
            ),
            (
                "workers_registered",
                "gauge",
                "Number of registered workers",
                workers.to_string(),
            ),
            (
                "webhooks_registered",
                "gauge",
                "Number of registered webhooks",
                "0".into(),
            ),
        ];
        let mut out = String::new();
        for (name, kind, help, value) in lines {
            out.push_str(&format!(
                "# HELP bunqueue_{name} {help}\n# TYPE bunqueue_{name} {kind}\nbunqueue_{name} {value}\n\n"
            ));
        }
        out
    }
}
