//! Firing the job schedulers: which are due at a tick and what each asks of the queue. A
//! child of `cron`, so it sees the schedulers' private fields.

use super::*;

/// What a tick asks of the caller, in order.
#[derive(Debug)]
pub(crate) enum Effect {
    /// Add this job to `queue` (a scheduler fired).
    Push { queue: String, spec: Box<JobSpec> },
    /// Keep scheduler `name` as it is now (or its removal) across a restart.
    Keep(String),
}

impl Crons {
    /// bunqueue's `CronExecution.tick` at `now`, repeated while a scheduler is still due
    /// (bunqueue re-arms its timer at once for a run left in the past, so a late tick's
    /// catch-up runs are skipped as overlaps there too). `has_worker`: whether `queue` has a
    /// live worker, for `skipIfNoWorker`.
    pub(crate) fn tick(&mut self, now: f64, has_worker: impl Fn(&str) -> bool) -> Vec<Effect> {
        let mut out = Vec::new();
        // Each pass moves every due interval scheduler's next run forward by at least 1 ms
        // (or drops it), so this ends; the bound only guards against a clock gone wild. A
        // pattern's next run is after `now` (or 0 for none, which bunqueue keeps due for
        // ever): it takes part in the first pass only, so a 0 cannot spin here.
        for pass in 0..100_000 {
            let mut due: Vec<(f64, String)> = self
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
                if self.find(&name).is_none() {
                    continue;
                }
                if let Some(push) = self.fire(&name, now, &has_worker) {
                    out.push(push);
                }
                out.push(Effect::Keep(name));
            }
        }
        out
    }

    /// Fires scheduler `name` if it may run now: the job it adds, if any. A scheduler at its
    /// limit is dropped; a skipped run only moves its next run.
    fn fire(&mut self, name: &str, now: f64, has_worker: impl Fn(&str) -> bool) -> Option<Effect> {
        let i = self.find(name)?;
        if self.list[i].at_limit() {
            self.list.remove(i);
            return None;
        }
        let c = &mut self.list[i];
        let next = match (&c.schedule, c.repeat_every) {
            (Some((_, p)), _) => p.next_after(now),
            (None, Some(e)) => c.next_run + e,
            (None, None) => now,
        };
        let no_worker = c.skip_if_no_worker && !has_worker(&c.queue);
        let overlap = c.last_fired.is_some_and(|last| {
            let interval = c.repeat_every.unwrap_or(OVERLAP_FALLBACK_MS);
            last > 0.0 && now - last < interval * 0.8
        });
        c.next_run = next;
        if no_worker || overlap {
            return None;
        }
        c.executions += 1;
        c.last_fired = Some(now);
        Some(Effect::Push {
            queue: c.queue.clone(),
            spec: Box::new(c.spec()),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::queue::State;
    use crate::store::MemoryStore;

    fn state() -> State {
        State::new(Box::new(MemoryStore::new()), 0.0).unwrap()
    }

    /// Jobs queued in `q` (waiting or prioritized), as GetJobCounts shows them.
    fn queued(s: &mut State) -> u64 {
        let c = s.jobs.counts("q", 0.0);
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
        let job = autobatch_core::wire::Job::from_value(&pulled.pop().unwrap().job).unwrap();
        assert_eq!(job.name, "mail");
        assert_eq!(job.priority, 7.0);
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
            CronUpsert::pattern("q", "b", "@daily").timezone("Nowhere/Bad"),
            t0,
        );
        assert_eq!(
            e.unwrap_err(),
            "Invalid cron expression: Bun.cron: unknown time zone 'Nowhere/Bad'"
        );
        // 00:00 in Rome is 23:00 UTC in winter (t0 is in January).
        let rome = s
            .crons()
            .upsert(
                CronUpsert::pattern("q", "b", "@daily").timezone("Europe/Rome"),
                t0,
            )
            .expect("a zone");
        let next = rome
            .get("nextRun")
            .and_then(Value::as_f64)
            .expect("nextRun");
        assert_eq!(next.rem_euclid(86_400_000.0), 23.0 * 3_600_000.0);
        assert!(s
            .crons()
            .upsert(CronUpsert::pattern("q", "b", "@daily").timezone("UTC"), t0)
            .is_ok());
        assert!(s.crons().remove("b"));
        assert!(!s.crons().remove("b"));
    }
}
