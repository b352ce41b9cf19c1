//! What SQLite mode keeps across a restart beside the jobs, as bunqueue's SQLite mode keeps
//! it: each queue's stall settings, DLQ settings, rate and concurrency limits, its groups'
//! pause, concurrency and rate limit, and the job schedulers (their executions and next run
//! included). Each change is written to the settings table (`crate::store::settings`) as it
//! is made, and read back by [`State::attach_settings`] when the broker starts.
//!
//! Not kept, as in bunqueue: a group's manual rate limit (`RateLimitGroup`) and open rate
//! windows, a queue's concurrency slots in use (a restart requeues active jobs).

use std::io;

use autobatch_core::ops::{CronUpsert, GetDlqConfig, GetStallConfig, Operation};
use autobatch_core::wire::server::ServeOperation;
use autobatch_core::wire::Value;

use super::State;
use crate::store::settings::SettingsStore;

/// The kinds of setting rows.
pub(crate) mod kind {
    pub const STALL: &str = "stall";
    pub const DLQ: &str = "dlq";
    pub const LIMITS: &str = "limits";
    pub const GROUP: &str = "group";
    pub const CRON: &str = "cron";
}

impl State {
    /// Restores the settings `store` holds, then writes every later change to it.
    pub fn attach_settings(&mut self, store: SettingsStore, now: f64) -> io::Result<()> {
        for (kind, key, value) in store.load()? {
            self.restore_setting(&kind, &key, &value, now);
        }
        self.settings = Some(store);
        Ok(())
    }

    /// Writes setting `kind`/`key` (`None`: forgets it), in SQLite mode.
    pub(in crate::queue) fn keep(&self, kind: &str, key: &str, value: Option<Value>) {
        if let Some(s) = &self.settings {
            match value {
                Some(v) => s.put(kind, key, &v),
                None => s.delete(kind, key),
            }
        }
    }

    /// Writes `queue`'s stall settings.
    pub(in crate::queue) fn keep_stall(&self, queue: &str) {
        if self.settings.is_some() {
            let v = GetStallConfig::reply_body(&self.stall_config(queue));
            self.keep(kind::STALL, queue, Some(v));
        }
    }

    /// Writes `queue`'s DLQ settings.
    pub(in crate::queue) fn keep_dlq(&self, queue: &str) {
        if self.settings.is_some() {
            let v = GetDlqConfig::reply_body(&self.dlq_config.get(queue));
            self.keep(kind::DLQ, queue, Some(v));
        }
    }

    /// Writes the controls of `group` of `queue`.
    pub fn keep_group(&self, queue: &str, group: &str) {
        if self.settings.is_some() {
            let key = format!("{queue}\0{group}");
            self.keep(kind::GROUP, &key, self.limits.group_setting(queue, group));
        }
    }

    /// Writes scheduler `name` as it is now (forgets it when it is gone).
    pub fn keep_cron(&self, name: &str) {
        if self.settings.is_some() {
            self.keep(kind::CRON, name, self.crons.setting(name));
        }
    }

    fn restore_setting(&mut self, kind: &str, key: &str, value: &Value, now: f64) {
        match kind {
            kind::STALL => {
                if let Ok(c) = GetStallConfig::read_reply(value) {
                    self.stall_config.insert(key.to_owned(), c);
                }
            }
            kind::DLQ => {
                if let Ok(c) = GetDlqConfig::read_reply(value) {
                    self.dlq_config.restore(key, c);
                }
            }
            kind::LIMITS => self.restore_limits(key, value, now),
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
}
