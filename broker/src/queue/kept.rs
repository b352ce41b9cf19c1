//! What SQLite mode keeps across a restart beside the jobs, as bunqueue's SQLite mode keeps
//! it: each queue's stall settings, DLQ settings, rate and concurrency limits, its groups'
//! pause, concurrency and rate limit, and the job schedulers (their executions and next run
//! included). Each change is written to the settings table (`crate::store::settings`) as it
//! is made, and read back by `State::attach_settings` when the broker starts.
//!
//! Per job, what its row does not hold: its `timeout`, `ttl`, stall timeout and group, its flow
//! links (a job that waited for its children waits again after the restart, for those not
//! completed yet), its DLQ reason, the stack trace of its last failure and its failed attempts
//! (a DLQ entry's `attempts`), and a failed job's timeline (final once it failed for good).
//!
//! Not kept, as in bunqueue: a group's manual rate limit (`RateLimitGroup`) and open rate
//! windows, a queue's concurrency slots in use (a restart requeues active jobs). Not kept
//! either: the children failures a parent collected, progress and logs (a completed job's
//! progress reads 100 in SQLite mode all the same: see `view`), and the timeline of a
//! job that has not failed for good (written at every step, it would double the store's
//! writes; after a restart such a job's timeline starts again from its recovered state).

/// The kinds of setting rows.
pub(crate) mod kind {
    pub const STALL: &str = "stall";
    pub const DLQ: &str = "dlq";
    pub const LIMITS: &str = "limits";
    pub const GROUP: &str = "group";
    pub const CRON: &str = "cron";
}
