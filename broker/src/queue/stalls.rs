//! Stall detection's own state, as bunqueue keeps it: each queue's stall settings
//! (SetStallConfig, bunqueue's defaults otherwise), the jobs the last check found silent, and
//! when the check last ran. What a job's silence is (its heartbeats, its `stallTimeout`) is the
//! job's.

use std::collections::{HashMap, HashSet};

use autobatch_core::ops::{StallConfig, StallConfigUpdate};

/// How often stall detection runs, ms (bunqueue's `stallCheckMs`).
pub(crate) const STALL_CHECK_MS: f64 = 5_000.0;

/// See the module docs.
pub(crate) struct Stalls {
    /// Settings set by SetStallConfig, per queue.
    configs: HashMap<String, StallConfig>,
    /// Jobs found stalled by the last check: stalled for good if the next check still finds
    /// them so (bunqueue's two-phase detection).
    candidates: HashSet<String>,
    /// When the check last ran, epoch ms.
    last_check: f64,
}

impl Stalls {
    /// No settings and no candidates; the first check is due [`STALL_CHECK_MS`] after `now`.
    pub fn new(now: f64) -> Stalls {
        Stalls {
            configs: HashMap::new(),
            candidates: HashSet::new(),
            last_check: now,
        }
    }

    /// The stall settings of `queue`.
    pub fn config(&self, queue: &str) -> StallConfig {
        self.configs.get(queue).cloned().unwrap_or_default()
    }

    /// SetStallConfig: merges `update` into the settings of `queue`.
    pub fn set(&mut self, queue: &str, update: &StallConfigUpdate) {
        let merged = update.apply(self.config(queue));
        self.configs.insert(queue.to_owned(), merged);
    }

    /// Puts back settings kept across a restart.
    pub fn restore(&mut self, queue: &str, config: StallConfig) {
        self.configs.insert(queue.to_owned(), config);
    }

    /// Whether a check is due at `now`; if so, it counts as run now.
    pub fn check_due(&mut self, now: f64) -> bool {
        if now - self.last_check < STALL_CHECK_MS {
            return false;
        }
        self.last_check = now;
        true
    }

    /// The candidates of the last check, taken (the check names the next ones).
    pub fn take_candidates(&mut self) -> HashSet<String> {
        std::mem::take(&mut self.candidates)
    }

    /// The jobs this check found silent: the next one confirms them.
    pub fn set_candidates(&mut self, candidates: HashSet<String>) {
        self.candidates = candidates;
    }
}
