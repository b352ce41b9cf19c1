//! The [`State`] methods that only compose: each hands a request to the owner of its concern
//! (totals, schedulers, limits, the DLQ, …) with what that owner needs from the others, and
//! applies the effects it returns.

use autobatch_core::ops::ServerStats;

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
}
