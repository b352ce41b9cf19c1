//! The [`State`] methods that only compose: each hands a request to the owner of its concern
//! (totals, schedulers, limits, the DLQ, …) with what that owner needs from the others, and
//! applies the effects it returns.

use autobatch_core::ops::ServerStats;

use super::cron::{self, Crons};
use super::totals::Totals;
use super::State;

impl State {
    /// The running totals.
    pub fn totals(&mut self) -> &mut Totals {
        &mut self.totals
    }

    /// Stats' `stats`: the totals beside the counts of every queue.
    pub fn stats(&mut self, now: f64) -> ServerStats {
        let g = self.gauges(now);
        self.totals.stats(&g, now)
    }

    /// Prometheus' text exposition (see [`Totals::prometheus`]).
    pub fn prometheus(&mut self, now: f64) -> String {
        let g = self.gauges(now);
        self.totals
            .prometheus(&g, self.workers.len(), self.crons.len(), now)
    }

    /// The schedulers (Cron, CronGet, CronList, CronDelete).
    pub(crate) fn crons(&mut self) -> &mut Crons {
        &mut self.crons
    }

    /// Fires the job schedulers due at `now` (see [`Crons::tick`]). Returns the jobs added.
    pub(crate) fn fire_crons(&mut self, now: f64) -> usize {
        let workers = &self.workers;
        let has_worker = |queue: &str| {
            workers.values().any(|w| {
                now - w.info.last_seen < cron::WORKER_TIMEOUT_MS
                    && w.info.queues.iter().any(|q| q == queue)
            })
        };
        let mut added = 0;
        for effect in self.crons.tick(now, has_worker) {
            match effect {
                cron::Effect::Push { queue, spec } => {
                    self.push(&queue, *spec, now);
                    added += 1;
                }
                cron::Effect::Keep(name) => self.keep_cron(&name),
            }
        }
        added
    }
}
