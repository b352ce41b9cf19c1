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
//! Cron patterns (`schedule`) are read as bunqueue reads them (see `pattern`) and run in UTC:
//! a `timezone` other than `UTC` is refused with a pattern (with `repeatEvery` alone bunqueue
//! only stores it, and so does this broker). Schedulers are kept in memory only (a SQLite
//! restart forgets them).

use autobatch_core::ops::CronUpsert;
use autobatch_core::wire::{JobOptions, JobSpec, Value};

use super::State;
use crate::events::js_number;
use pattern::{expand_shortcut, Pattern};

/// bunqueue's pattern syntax and next-run rule.
pub(crate) mod pattern;

/// Most schedulers kept at once: the registry is bounded like every other map of the broker.
pub(crate) const MAX_CRONS: usize = 10_000;

/// bunqueue's `WORKER_TIMEOUT_MS` default: a worker not seen for this long does not count.
const WORKER_TIMEOUT_MS: f64 = 30_000.0;

/// bunqueue's fallback interval for the overlap check of a scheduler without `repeatEvery`.
const OVERLAP_FALLBACK_MS: f64 = 60_000.0;

/// The refusal of a time zone other than UTC for a cron pattern.
pub(crate) const TIMEZONE_REFUSED: &str = "Cron timezone is not supported by autobatch-broker: \
patterns run in UTC only (timezone \"UTC\" or none; see its README section)";

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
    fn find(&self, name: &str) -> Option<usize> {
        self.list.iter().position(|c| c.name == name)
    }

    /// Cron: adds or replaces scheduler `op.name`, as bunqueue's `CronRuntime.add`. The
    /// timing was checked with bunqueue's texts when the request was read.
    pub(crate) fn upsert(&mut self, op: CronUpsert, now: f64) -> Result<Value, String> {
        // Checked by the caller, with bunqueue's payload rules (`ops::cron`).
        let job_name = op.job_name.unwrap_or_else(|| "default".into());
        let every = op.repeat_every.map(|d| d.as_millis() as f64);
        // `assertValidCronInput`: an empty pattern counts as none (JS falsy).
        let schedule = match op.schedule.filter(|s| !s.is_empty()) {
            Some(s) => {
                let p = Pattern::parse(expand_shortcut(&s))
                    .map_err(|e| format!("Invalid cron expression: {e}"))?;
                if p.next_after(now) == 0.0 {
                    return Err(
                        "Invalid cron expression: Cron expression has no future occurrences".into(),
                    );
                }
                if op.timezone.as_deref().is_some_and(|tz| tz != "UTC") {
                    return Err(TIMEZONE_REFUSED.into());
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

impl State {
    /// The schedulers (Cron, CronGet, CronList, CronDelete).
    pub(crate) fn crons(&mut self) -> &mut Crons {
        &mut self.crons
    }

    fn has_worker(&self, queue: &str, now: f64) -> bool {
        self.workers.values().any(|w| {
            now - w.info.last_seen < WORKER_TIMEOUT_MS && w.info.queues.iter().any(|q| q == queue)
        })
    }

    /// bunqueue's `CronExecution.tick` at `now`, repeated while a scheduler is still due
    /// (bunqueue re-arms its timer at once for a run left in the past, so a late tick's
    /// catch-up runs are skipped as overlaps there too). Returns the jobs added.
    pub(crate) fn fire_crons(&mut self, now: f64) -> usize {
        let mut added = 0;
        // Each pass moves every due interval scheduler's next run forward by at least 1 ms
        // (or drops it), so this ends; the bound only guards against a clock gone wild. A
        // pattern's next run is after `now` (or 0 for none, which bunqueue keeps due for
        // ever): it takes part in the first pass only, so a 0 cannot spin here.
        for pass in 0..100_000 {
            let mut due: Vec<(f64, String)> = self
                .crons
                .list
                .iter()
                .filter(|c| c.next_run <= now && (pass == 0 || c.schedule.is_none()))
                .map(|c| (c.next_run, c.name.clone()))
                .collect();
            if due.is_empty() {
                break;
            }
            due.sort_by(|a, b| a.0.total_cmp(&b.0));
            for (_, name) in due {
                let Some(i) = self.crons.find(&name) else {
                    continue;
                };
                if self.crons.list[i].at_limit() {
                    self.crons.list.remove(i);
                    continue;
                }
                let c = &self.crons.list[i];
                let next = match (&c.schedule, c.repeat_every) {
                    (Some((_, p)), _) => p.next_after(now),
                    (None, Some(e)) => c.next_run + e,
                    (None, None) => now,
                };
                let no_worker = c.skip_if_no_worker && !self.has_worker(&c.queue, now);
                let overlap = c.last_fired.is_some_and(|last| {
                    let interval = c.repeat_every.unwrap_or(OVERLAP_FALLBACK_MS);
                    last > 0.0 && now - last < interval * 0.8
                });
                if no_worker || overlap {
                    self.crons.list[i].next_run = next;
                    continue;
                }
                let c = &mut self.crons.list[i];
                c.executions += 1;
                c.next_run = next;
                c.last_fired = Some(now);
                let (queue, spec) = (c.queue.clone(), c.spec());
                self.push(&queue, spec, now);
                added += 1;
            }
        }
        added
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::store::MemoryStore;

    fn state() -> State {
        State::new(Box::new(MemoryStore::new()), 0.0).unwrap()
    }

    /// Jobs queued in `q` (waiting or prioritized), as GetJobCounts shows them.
    fn queued(s: &mut State) -> u64 {
        let c = s.counts("q", 0.0);
        c.waiting + c.prioritized
    }

    fn every(name: &str, ms: u64) -> CronUpsert {
        CronUpsert::every("q", name, Duration::from_millis(ms))
    }

    fn field<'a>(v: &'a Value, k: &str) -> &'a Value {
        v.get(k).unwrap()
    }

    #[test]
    fn an_every_scheduler_fires_on_its_interval_and_keeps_its_count_across_upserts() {
        let mut s = state();
        let v = s.crons().upsert(every("a", 100), 1000.0).unwrap();
        assert_eq!(field(&v, "nextRun").as_f64(), Some(1100.0));
        assert_eq!(field(&v, "schedule"), &Value::Nil);
        assert_eq!(s.fire_crons(1099.0), 0);
        assert_eq!(s.fire_crons(1100.0), 1);
        assert_eq!(queued(&mut s), 1);
        // The job is live, so preventOverlap's unique key stops a second one; the run counts.
        assert_eq!(s.fire_crons(1200.0), 1);
        assert_eq!(queued(&mut s), 1);
        let c = s.crons().get("a").unwrap().to_value();
        assert_eq!(field(&c, "executions").as_f64(), Some(2.0));
        assert_eq!(field(&c, "nextRun").as_f64(), Some(1300.0));
        // Re-upserted: executions kept, next run from now, no `immediately` for an old name.
        let mut again = every("a", 50);
        again.immediately = Some(true);
        let v = s.crons().upsert(again, 1210.0).unwrap();
        assert_eq!(field(&v, "executions").as_f64(), Some(2.0));
        assert_eq!(field(&v, "nextRun").as_f64(), Some(1260.0));
    }

    #[test]
    fn a_late_tick_fires_once_and_skips_the_missed_runs_as_overlaps() {
        let mut s = state();
        let mut op = every("a", 100);
        op.prevent_overlap = Some(false);
        s.crons().upsert(op, 0.0).unwrap();
        assert_eq!(s.fire_crons(550.0), 1);
        let c = s.crons().get("a").unwrap().to_value();
        assert_eq!(field(&c, "executions").as_f64(), Some(1.0));
        assert_eq!(field(&c, "nextRun").as_f64(), Some(600.0));
        assert_eq!(
            s.fire_crons(600.0),
            0,
            "50 ms after the last firing: overlap"
        );
        assert_eq!(s.fire_crons(700.0), 1);
        assert_eq!(queued(&mut s), 2);
    }

    #[test]
    fn max_limit_stops_firing_and_drops_the_scheduler_when_next_due() {
        let mut s = state();
        let mut op = every("a", 10);
        op.max_limit = Some(2);
        op.prevent_overlap = Some(false);
        op.immediately = Some(true);
        let v = s.crons().upsert(op, 0.0).unwrap();
        assert_eq!(field(&v, "nextRun").as_f64(), Some(0.0));
        assert_eq!(field(&v, "maxLimit").as_f64(), Some(2.0));
        assert_eq!(s.fire_crons(0.0), 1);
        assert_eq!(s.fire_crons(10.0), 1);
        assert!(s.crons().get("a").is_some(), "listed until next due");
        assert_eq!(s.fire_crons(20.0), 0);
        assert!(s.crons().get("a").is_none());
        assert_eq!(queued(&mut s), 2);
    }

    #[test]
    fn zero_max_limit_means_none_and_the_job_carries_the_scheduler_settings() {
        let mut s = state();
        let mut op = every("a", 10)
            .job_name("mail")
            .priority(7)
            .data(Value::map([("x", Value::Int(1))]));
        op.max_limit = Some(0);
        let v = s.crons().upsert(op, 0.0).unwrap();
        assert_eq!(field(&v, "maxLimit"), &Value::Nil);
        assert_eq!(field(&v, "jobName").as_str(), Some("mail"));
        s.fire_crons(10.0);
        let mut pulled = s.pull(
            &crate::queue::PullSpec {
                queue: "q",
                count: 1,
                locked: false,
                lock_ttl: 30_000,
                tie_to: None,
            },
            10.0,
        );
        let job = pulled.pop().unwrap().job;
        assert_eq!(job.name, "mail");
        assert_eq!(job.priority, 7);
        assert_eq!(job.data.get("x").and_then(Value::as_f64), Some(1.0));
    }

    #[test]
    fn skip_if_no_worker_skips_without_counting() {
        let mut s = state();
        let mut op = every("a", 10);
        op.skip_if_no_worker = Some(true);
        s.crons().upsert(op, 0.0).unwrap();
        assert_eq!(s.fire_crons(10.0), 0);
        let c = s.crons().get("a").unwrap().to_value();
        assert_eq!(field(&c, "executions").as_f64(), Some(0.0));
        assert_eq!(field(&c, "nextRun").as_f64(), Some(20.0));
    }

    #[test]
    fn a_pattern_runs_on_its_minutes_and_bad_ones_are_refused() {
        let mut s = state();
        // 2026-01-01T00:00:30Z.
        let t0 = 1_767_225_630_000.0;
        let op = CronUpsert::pattern("q", "p", "*/2 * * * *").prevent_overlap(false);
        let v = s.crons().upsert(op, t0).unwrap();
        assert_eq!(field(&v, "schedule").as_str(), Some("*/2 * * * *"));
        assert_eq!(field(&v, "repeatEvery"), &Value::Nil);
        assert_eq!(field(&v, "nextRun").as_f64(), Some(t0 + 90_000.0));
        assert_eq!(s.fire_crons(t0 + 90_000.0), 1);
        let c = s.crons().get("p").unwrap().to_value();
        assert_eq!(field(&c, "nextRun").as_f64(), Some(t0 + 210_000.0));
        let e = s
            .crons()
            .upsert(CronUpsert::pattern("q", "b", "61 * * * *"), t0);
        assert_eq!(
            e.unwrap_err(),
            "Invalid cron expression: Invalid cron expression: value out of range for field"
        );
        let e = s
            .crons()
            .upsert(CronUpsert::pattern("q", "b", "0 0 31 2 *"), t0);
        assert_eq!(
            e.unwrap_err(),
            "Invalid cron expression: Cron expression has no future occurrences"
        );
        let e = s.crons().upsert(
            CronUpsert::pattern("q", "b", "@daily").timezone("Europe/Rome"),
            t0,
        );
        assert_eq!(e.unwrap_err(), TIMEZONE_REFUSED);
        assert!(s
            .crons()
            .upsert(CronUpsert::pattern("q", "b", "@daily").timezone("UTC"), t0)
            .is_ok());
        assert!(s.crons().remove("b"));
        assert!(!s.crons().remove("b"));
    }
}
