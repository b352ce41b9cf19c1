//! The [`State`] methods that only compose: each hands a request to the owner of its concern
//! (totals, schedulers, limits, the DLQ, …) with what that owner needs from the others, and
//! applies the effects it returns.

use std::io;
use std::sync::Arc;

use autobatch_core::ops::{
    CronUpsert, DlqConfig, GetDlqConfig, GetStallConfig, Operation, ServerStats, StallConfig,
    StallConfigUpdate,
};
use autobatch_core::wire::server::ServeOperation;
use autobatch_core::wire::Value;
use tokio::sync::Notify;

use super::cron::{self, Crons};
use super::dlq::{Entry as DlqEntry, Filter};
use super::kept::kind;
use super::limits::groups::Groups;
use super::totals::Totals;
use super::workers::Worker;
use super::{Jobs, State};
use crate::events::js_number;
use crate::store::settings::SettingsStore;

impl State {
    /// The jobs, to look up and move (see [`Jobs`]).
    pub fn jobs(&mut self) -> &mut Jobs {
        &mut self.jobs
    }

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
        let has_worker = |queue: &str| workers.live_on(queue, now);
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

    /// Frees a concurrency slot of the queue of job `id` outside [`State::finish`] (which
    /// frees its own), waking the long-polls it held back.
    pub(in crate::queue) fn release_slot_of(&mut self, id: &str) {
        let Some((queue, group)) = self.jobs.slot_of(id) else {
            return;
        };
        if self.limits.release(queue, group) {
            self.jobs.wake(queue);
        }
    }

    /// GetGroupActiveCount (see [`super::limits::Limits::group_active`]).
    pub fn group_active_count(&self, queue: &str, group: &str) -> u64 {
        self.limits.group_active(queue, group)
    }

    /// RateLimit (see [`super::limits::Limits::set_rate`]), kept across a restart.
    pub fn set_rate_limit(
        &mut self,
        queue: &str,
        limit: f64,
        duration: Option<f64>,
        ttl: Option<f64>,
        now: f64,
    ) {
        self.limits.set_rate(queue, limit, duration, ttl, now);
        self.keep_limits(queue);
    }

    /// RateLimitClear.
    pub fn clear_rate_limit(&mut self, queue: &str) {
        self.limits.clear_rate(queue);
        self.keep_limits(queue);
    }

    /// SetConcurrency (see [`super::limits::Limits::set_concurrency`]).
    pub fn set_concurrency(&mut self, queue: &str, limit: f64) {
        self.limits.set_concurrency(queue, limit);
        self.keep_limits(queue);
    }

    /// ClearConcurrency.
    pub fn clear_concurrency(&mut self, queue: &str) {
        self.limits.clear_concurrency(queue);
        self.keep_limits(queue);
    }

    /// Keeps `queue`'s limits across a restart (SQLite mode).
    pub(in crate::queue) fn keep_limits(&self, queue: &str) {
        if self.settings.is_on() {
            self.keep(kind::LIMITS, queue, self.limits.kept(queue));
        }
    }

    /// GetQueueLimits' `limits` (see [`super::limits::Limits::status`]).
    pub fn queue_limits(&mut self, queue: &str, max_jobs: Option<f64>, now: f64) -> Value {
        self.limits.status(queue, max_jobs, now)
    }

    /// The group controls, to read and set.
    pub fn groups(&mut self) -> &mut Groups {
        self.limits.groups()
    }

    /// When a long-poll on `queue` should look again: its next delayed job or the end of a
    /// group's rate limit, whichever comes first.
    pub fn next_look(&self, queue: &str, now: f64) -> Option<f64> {
        let retry = self.limits.next_group_retry(queue, now);
        match (self.jobs.next_due(queue), retry) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Sets an active job's progress and, when given, its message (see
    /// [`super::progress::Progress::set`]), with bunqueue's `progress` event.
    pub fn set_progress(
        &mut self,
        id: &str,
        progress: f64,
        message: Option<String>,
        now: f64,
    ) -> Result<(), String> {
        self.jobs.require_active(id, now)?;
        let x = self.extras.set(id, progress, message);
        let Some(queue) = self.jobs.queue_of(id) else {
            return Ok(());
        };
        if self.events.wants(queue) {
            let p = js_number(x.progress);
            let message = x.message.clone().map_or(Value::Nil, Value::from);
            let (q, j) = (Value::from(queue), Value::from(id));
            // bunqueue's key order here: jobId before queue.
            self.events.emit(queue, "progress", |ts| {
                vec![
                    ("jobId", j),
                    ("queue", q),
                    ("timestamp", Value::F64(ts)),
                    ("progress", p.clone()),
                    ("data", Value::map([("progress", p), ("message", message)])),
                ]
            });
        } else {
            self.events.note(queue);
        }
        Ok(())
    }

    /// An active job's progress and message.
    pub fn progress(&mut self, id: &str, now: f64) -> Result<(f64, Option<String>), String> {
        self.jobs.require_active(id, now)?;
        Ok(self.extras.progress(id))
    }

    /// Appends a log line; false for an unknown job.
    pub fn add_log(&mut self, id: &str, message: String, level: String, now: f64) -> bool {
        if !self.jobs.exists(id) {
            return false;
        }
        self.extras.add_log(id, message, level, now);
        true
    }

    /// A job's log lines (empty for an unknown job).
    pub fn logs(&self, id: &str) -> &[(f64, String, String)] {
        self.extras.logs(id)
    }

    /// Empties a job's log, or keeps its newest `keep` lines.
    pub fn clear_logs(&mut self, id: &str, keep: Option<i64>) {
        self.extras.clear_logs(id, keep);
    }

    /// Registers a worker on its connection.
    pub fn register_worker(&mut self, id: String, worker: Worker) {
        self.workers.register(id, worker);
    }

    /// A worker's Heartbeat: false if it is not registered.
    pub fn touch_worker(&mut self, id: &str, now: f64) -> bool {
        self.workers.touch(id, now)
    }

    /// The registered workers, oldest registration first.
    pub fn workers(&self) -> Vec<(&String, &Worker)> {
        self.workers.list()
    }

    /// Unregisters a worker; false if it was not registered.
    pub fn unregister_worker(&mut self, id: &str) -> bool {
        self.workers.unregister(id)
    }

    /// The stall settings of `queue`.
    pub fn stall_config(&self, queue: &str) -> StallConfig {
        self.stalls.config(queue)
    }

    /// SetStallConfig: merges `update` into the settings of `queue`.
    pub fn set_stall_config(&mut self, queue: &str, update: &StallConfigUpdate) {
        self.stalls.set(queue, update);
        self.keep_stall(queue);
    }

    /// The whole record of job `id` (PULL's and PUSHF's form: no state).
    pub(in crate::queue) fn job_record(&self, id: &str) -> Option<Value> {
        self.jobs.record_view(id, &self.extras)
    }

    /// A job as GetJob returns it: with its state, result and failure reason.
    pub fn get_job(&mut self, id: &str, now: f64) -> Option<Value> {
        self.jobs.job_view(id, now, &self.extras)
    }

    /// GetDlqConfig.
    pub fn dlq_config(&self, queue: &str) -> DlqConfig {
        self.dlq.config(queue)
    }

    /// SetDlqConfig: merges `patch` into `queue`'s settings; a lower `maxEntries` evicts the
    /// oldest entries at once, as bunqueue's does.
    pub fn set_dlq_config(&mut self, queue: &str, patch: &Value) -> Result<(), String> {
        let next = self.dlq.set_config(queue, patch)?;
        self.keep_dlq(queue);
        self.evict_dlq(queue, next.max_entries as usize);
        Ok(())
    }

    /// `Dlq`: the entries of `queue`, oldest first, the first `count` of them when given.
    pub fn dlq_entries(
        &self,
        queue: &str,
        count: Option<u64>,
        filter: Option<&Filter>,
        now: f64,
    ) -> Vec<DlqEntry> {
        let ids = self
            .dlq
            .select(queue, filter, now, self.jobs.dlq_entry_of());
        let max_age = self.dlq.max_age(queue);
        self.jobs.dlq_entries(&ids, count, max_age, &self.extras)
    }

    /// `GetDlqStats`: `(total, per reason in [`REASONS`] order, expired, oldest, newest)`.
    ///
    /// [`REASONS`]: super::dlq::REASONS
    pub fn dlq_stats(
        &self,
        queue: &str,
        now: f64,
    ) -> (u64, [u64; 7], u64, Option<f64>, Option<f64>) {
        self.dlq.stats(queue, now, self.jobs.dlq_entry_of())
    }

    /// Restores the settings `store` holds, then writes every later change to it.
    pub fn attach_settings(&mut self, mut store: SettingsStore, now: f64) -> io::Result<()> {
        for (kind, key, value) in store.load()? {
            self.restore_setting(&kind, &key, &value, now);
        }
        let jobs = store.load_jobs()?;
        self.settings.attach(store);
        for (id, value) in jobs {
            if self.jobs.restore_job(&id, &value, &mut self.waits) {
                self.settings.note_job(&id);
            } else {
                self.settings.delete_stale_job(&id);
            }
        }
        Ok(())
    }

    /// Writes job `id`'s extras (forgets them once it has none), in SQLite mode.
    pub(in crate::queue) fn keep_job(&mut self, id: &str) {
        if self.settings.is_on() {
            let extras = self.jobs.job_extras(id);
            self.settings.put_job(id, extras);
        }
    }

    /// Job `id` left for good: its extras go too.
    pub(in crate::queue) fn forget_kept_job(&mut self, id: &str) {
        self.settings.forget_job(id);
    }

    /// Writes setting `kind`/`key` (`None`: forgets it), in SQLite mode.
    pub(in crate::queue) fn keep(&self, kind: &'static str, key: &str, value: Option<Value>) {
        self.settings.put(kind, key, value);
    }

    /// Writes `queue`'s stall settings.
    pub(in crate::queue) fn keep_stall(&self, queue: &str) {
        if self.settings.is_on() {
            let v = GetStallConfig::reply_body(&self.stall_config(queue));
            self.keep(kind::STALL, queue, Some(v));
        }
    }

    /// Writes `queue`'s DLQ settings.
    pub(in crate::queue) fn keep_dlq(&self, queue: &str) {
        if self.settings.is_on() {
            let v = GetDlqConfig::reply_body(&self.dlq.config(queue));
            self.keep(kind::DLQ, queue, Some(v));
        }
    }

    /// Writes the controls of `group` of `queue`.
    pub fn keep_group(&self, queue: &str, group: &str) {
        if self.settings.is_on() {
            let key = format!("{queue}\0{group}");
            self.keep(kind::GROUP, &key, self.limits.group_setting(queue, group));
        }
    }

    /// Writes scheduler `name` as it is now (forgets it when it is gone).
    pub fn keep_cron(&self, name: &str) {
        if self.settings.is_on() {
            self.keep(kind::CRON, name, self.crons.setting(name));
        }
    }

    fn restore_setting(&mut self, kind: &str, key: &str, value: &Value, now: f64) {
        match kind {
            kind::STALL => {
                if let Ok(c) = GetStallConfig::read_reply(value) {
                    self.stalls.restore(key, c);
                }
            }
            kind::DLQ => {
                if let Ok(c) = GetDlqConfig::read_reply(value) {
                    self.dlq.restore_config(key, c);
                }
            }
            kind::LIMITS => self.limits.restore(key, value, now),
            kind::GROUP => {
                if let Some((queue, group)) = key.split_once('\0') {
                    self.limits.restore_group(queue, group, value);
                }
            }
            kind::CRON => {
                let op = value.get("request").map(CronUpsert::read_request);
                if let Some(Ok(op)) = op {
                    self.crons.restore(op, value, now);
                }
            }
            _ => tracing::warn!(kind, key, "an unknown stored setting was skipped"),
        }
    }

    /// Whether a flow may not use `id`: a job has it (any state), or jobs wait for it
    /// (bunqueue's `Flow job <id> already exists`).
    pub fn id_taken(&self, id: &str) -> bool {
        self.jobs.exists(id) || self.waits.awaited(id)
    }

    /// A new job as PUSHF's reply shows it (no state: bunqueue's record has none).
    pub fn snapshot(&self, id: &str) -> Option<Value> {
        self.job_record(id)
    }

    /// The signal WaitJob waits on for job `id` (woken when it completes). The caller drops
    /// its clone and calls [`forget_waiter`](Self::forget_waiter) when done.
    pub fn job_waiter(&mut self, id: &str) -> Arc<Notify> {
        self.waits.waiter(id)
    }

    /// Frees the signal of `id` once no WaitJob holds it.
    pub fn forget_waiter(&mut self, id: &str) {
        self.waits.forget_waiter(id);
    }
}
