//! Job schedulers (bunqueue's `Cron*`), as bunqueue 2.9.5's `CronScheduler` keeps them: a
//! named timer, global to the server, that adds a job to its queue every `repeatEvery` ms.
//!
//! What is bunqueue's here (its `cron/runtime.js`, `cron/execution.js`, `types/cron.js`):
//! - an upsert keeps the executions of the scheduler it replaces and forgets its last firing;
//!   `immediately` runs a new one at once; `maxLimit` ≤ 0 means no limit;
//! - a due scheduler at its limit is dropped (it stays listed until it is next due);
//! - each due scheduler fires at most once per tick, its next run its scheduled run plus the
//!   interval (so a late tick catches up), and a run within 0.8 intervals of the last firing
//!   is skipped (`overlap`), as is one whose queue has no live worker with `skipIfNoWorker`;
//! - the job it adds: its `jobName`, `data`, `priority`, `uniqueKey` (`cron:<name>` when
//!   `preventOverlap`, the default, so a job still live stops the next one), `dedup` and
//!   the `jobOptions` bunqueue passes on.
//!
//! Cron patterns (`schedule`) are read as bunqueue reads them (see `pattern`) and run in UTC,
//! or on the wall clock of their IANA `timezone` (see `zone`; an unknown name is refused with
//! Bun's text; with `repeatEvery` alone bunqueue only stores it, and so does this broker).
//! In SQLite mode schedulers are kept across a restart (see `crate::queue::kept`).

use autobatch_core::ops::{CronUpsert, Operation};
use autobatch_core::wire::{JobOptions, JobSpec, Value};

use crate::events::js_number;
use pattern::{expand_shortcut, Pattern};
use zone::Zone;

/// bunqueue's pattern syntax and next-run rule.
pub(crate) mod pattern;
/// IANA time zones for patterns.
pub(crate) mod zone;

/// Firing the schedulers.
mod tick;

pub(crate) use tick::Effect;

/// Most schedulers kept at once: the registry is bounded like every other map of the broker.
pub(crate) const MAX_CRONS: usize = 10_000;

/// bunqueue's fallback interval for the overlap check of a scheduler without `repeatEvery`.
const OVERLAP_FALLBACK_MS: f64 = 60_000.0;

/// One scheduler.
#[derive(Debug, Clone)]
pub(crate) struct Cron {
    name: String,
    job_name: String,
    queue: String,
    data: Value,
    /// The pattern as sent, and as read.
    schedule: Option<(String, Pattern)>,
    repeat_every: Option<f64>,
    priority: i64,
    timezone: Option<String>,
    next_run: f64,
    executions: u64,
    max_limit: Option<i64>,
    unique_key: Option<String>,
    dedup: Option<autobatch_core::wire::Dedup>,
    skip_if_no_worker: bool,
    prevent_overlap: bool,
    job_options: Option<autobatch_core::ops::CronJobOptions>,
    /// Epoch ms of its last firing (bunqueue's `lastFiredAt`).
    last_fired: Option<f64>,
    /// The upsert that made it, as a request (kept across a restart in SQLite mode).
    request: Value,
}

impl Cron {
    /// bunqueue's `cronData`: what Cron, CronGet and CronList answer.
    pub(crate) fn to_value(&self) -> Value {
        Value::map([
            ("name", Value::from(self.name.as_str())),
            ("jobName", Value::from(self.job_name.as_str())),
            ("queue", Value::from(self.queue.as_str())),
            (
                "schedule",
                self.schedule
                    .as_ref()
                    .map_or(Value::Nil, |(s, _)| Value::from(s.as_str())),
            ),
            (
                "repeatEvery",
                self.repeat_every.map_or(Value::Nil, js_number),
            ),
            ("nextRun", js_number(self.next_run)),
            ("executions", Value::from(self.executions)),
            ("maxLimit", self.max_limit.map_or(Value::Nil, Value::Int)),
            (
                "timezone",
                self.timezone.clone().map_or(Value::Nil, Value::Str),
            ),
            ("priority", Value::Int(self.priority)),
        ])
    }

    fn at_limit(&self) -> bool {
        self.max_limit
            .is_some_and(|m| self.executions as f64 >= m as f64)
    }

    fn spec(&self) -> JobSpec {
        let o = self.job_options.clone().unwrap_or_default();
        let unique_key = self
            .unique_key
            .clone()
            .or_else(|| self.prevent_overlap.then(|| format!("cron:{}", self.name)));
        let mut opts = JobOptions::new().priority(self.priority);
        opts.unique_key = unique_key;
        opts.dedup = self.dedup;
        opts.attempts = o.attempts;
        opts.backoff = o.backoff;
        opts.timeout = o.timeout;
        opts.delay = o.delay;
        opts.stall_timeout = o.stall_timeout;
        opts.remove_on_complete = o.remove_on_complete;
        opts.remove_on_fail = o.remove_on_fail;
        JobSpec::new(self.job_name.clone(), self.data.clone()).with_options(opts)
    }
}

/// The schedulers, in bunqueue's `Map` order (insertion; an upsert keeps a name's place).
#[derive(Debug, Default)]
pub(crate) struct Crons {
    list: Vec<Cron>,
}

impl Crons {
    /// How many schedulers there are.
    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }

    fn find(&self, name: &str) -> Option<usize> {
        self.list.iter().position(|c| c.name == name)
    }

    /// Cron: adds or replaces scheduler `op.name`, as bunqueue's `CronRuntime.add`. The
    /// timing was checked with bunqueue's texts when the request was read.
    pub(crate) fn upsert(&mut self, op: CronUpsert, now: f64) -> Result<Value, String> {
        let request = op.to_body();
        // Checked by the caller, with bunqueue's payload rules (`ops::cron`).
        let job_name = op.job_name.unwrap_or_else(|| "default".into());
        let every = op.repeat_every.map(|d| d.as_millis() as f64);
        // `assertValidCronInput`: an empty pattern counts as none (JS falsy).
        let schedule = match op.schedule.filter(|s| !s.is_empty()) {
            Some(s) => {
                let invalid = |e: String| format!("Invalid cron expression: {e}");
                let p = Pattern::parse(expand_shortcut(&s)).map_err(invalid)?;
                // bunqueue passes the zone only when it is truthy (`timezone ? {tz} : …`).
                let zone = match op.timezone.as_deref().filter(|tz| !tz.is_empty()) {
                    Some(tz) => Some(Zone::get(tz).map_err(invalid)?),
                    None => None,
                };
                let p = p.in_zone(zone);
                if p.next_after(now) == 0.0 {
                    return Err(
                        "Invalid cron expression: Cron expression has no future occurrences".into(),
                    );
                }
                Some((s, p))
            }
            None if every.is_none() => {
                return Err("Cron job must have either schedule or repeatEvery".into())
            }
            None => None,
        };
        let next_run = match (&schedule, every) {
            (Some((_, p)), _) => p.next_after(now),
            (None, Some(e)) => now + e,
            (None, None) => unreachable!("refused above"),
        };
        let existing = self.find(&op.name);
        if existing.is_none() && self.list.len() >= MAX_CRONS {
            return Err(format!(
                "autobatch-broker keeps at most {MAX_CRONS} job schedulers"
            ));
        }
        let mut cron = Cron {
            name: op.name,
            job_name,
            queue: op.queue,
            data: op.data,
            schedule,
            repeat_every: every,
            priority: op.priority.unwrap_or(0),
            timezone: op.timezone,
            next_run,
            executions: 0,
            max_limit: op.max_limit.filter(|m| *m > 0),
            unique_key: op.unique_key,
            dedup: op.dedup,
            skip_if_no_worker: op.skip_if_no_worker.unwrap_or(false),
            prevent_overlap: op.prevent_overlap.unwrap_or(true),
            job_options: op.job_options,
            last_fired: None,
            request,
        };
        let value;
        match existing {
            Some(i) => {
                cron.executions = self.list[i].executions;
                value = cron.to_value();
                self.list[i] = cron;
            }
            None => {
                if op.immediately == Some(true) {
                    cron.next_run = now;
                }
                value = cron.to_value();
                self.list.push(cron);
            }
        }
        Ok(value)
    }

    /// CronGet's scheduler.
    pub(crate) fn get(&self, name: &str) -> Option<&Cron> {
        self.find(name).map(|i| &self.list[i])
    }

    /// What a restart keeps of scheduler `name`: the upsert that made it, its executions and
    /// its next run (`None` once it is gone).
    pub(crate) fn setting(&self, name: &str) -> Option<Value> {
        let c = self.get(name)?;
        Some(Value::map([
            ("request", c.request.clone()),
            ("executions", Value::from(c.executions)),
            ("nextRun", Value::F64(c.next_run)),
        ]))
    }

    /// Puts back a scheduler [`setting`](Self::setting) kept: made again by its upsert, with
    /// its executions and next run (a run missed while the broker was down is due at once).
    pub(crate) fn restore(&mut self, op: CronUpsert, kept: &Value, now: f64) {
        let name = op.name.clone();
        if self.upsert(op, now).is_err() {
            return;
        }
        if let Some(i) = self.find(&name) {
            let c = &mut self.list[i];
            if let Some(n) = kept.get("executions").and_then(Value::as_i64) {
                c.executions = u64::try_from(n).unwrap_or(0);
            }
            if let Some(at) = kept.get("nextRun").and_then(Value::as_f64) {
                c.next_run = at;
            }
        }
    }

    /// CronList's schedulers.
    pub(crate) fn list(&self) -> &[Cron] {
        &self.list
    }

    /// CronDelete: whether `name` was there.
    pub(crate) fn remove(&mut self, name: &str) -> bool {
        match self.find(name) {
            Some(i) => {
                self.list.remove(i);
                true
            }
            None => false,
        }
    }

    /// Epoch ms of the earliest run, if any scheduler is kept.
    pub(crate) fn next_due(&self) -> Option<f64> {
        self.list.iter().map(|c| c.next_run).reduce(f64::min)
    }
}
