//! The DLQ commands and a job's way into and out of the DLQ: what [`super::Dlq`] holds, read with
//! the jobs' own records.

use autobatch_core::ops::DlqConfig;
use autobatch_core::wire::Value;

use super::{Entry, Filter};
use crate::queue::State;
use crate::store::{JobState, StoreOp};

impl State {
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

    /// Files a job that just failed for good in its queue's DLQ (it is `Failed` already or
    /// about to be: the caller records the state), evicting the oldest entry past
    /// the queue's `maxEntries`.
    pub(in crate::queue) fn enter_dlq(
        &mut self,
        id: &str,
        now: f64,
        reason: &'static str,
        error: Option<String>,
    ) {
        let seq = self.jobs.finish_seq;
        self.jobs.finish_seq += 1;
        let Some(e) = self.jobs.map.get_mut(id) else {
            return;
        };
        e.run.finished = Some((now, seq));
        // The entry's last attempt (bunqueue's `createDlqEntry`).
        let started = e.run.shown_started;
        e.run.attempt_log.push(crate::queue::timeline::Attempt {
            attempt: e.rec.attempts,
            started_at: started.unwrap_or(e.rec.created_at),
            failed_at: now,
            reason,
            error: error.clone(),
            duration: started.map_or(0.0, |s| now - s),
        });
        e.run.dlq = Some((reason, error));
        let queue = e.rec.queue.clone();
        if self.settings.is_on() {
            self.keep_job(id);
        }
        self.totals.finished(&queue, true, now);
        self.jobs.index(&queue).failed += 1;
        self.dlq.file(&queue, seq, id);
        let max = self.dlq.max_entries(&queue);
        self.evict_dlq(&queue, max);
    }

    /// Drops the oldest DLQ entries of `queue` for good until at most `max` are left.
    pub(in crate::queue) fn evict_dlq(&mut self, queue: &str, max: usize) {
        for oldest in self.dlq.evict(queue, max) {
            // `forget` counts it out of `failed` (its DLQ slot is gone already).
            self.forget(&oldest);
            self.jobs.record(StoreOp::Remove(oldest));
        }
    }

    /// Takes a failed job out of the DLQ (to run it again); its state is the caller's.
    pub(in crate::queue) fn leave_dlq(&mut self, id: &str) {
        let Some(e) = self.jobs.map.get(id) else {
            return;
        };
        if e.rec.state != JobState::Failed {
            return;
        }
        let seq = e.run.finished.map(|(_, n)| n);
        let queue = e.rec.queue.clone();
        let q = self.jobs.index(&queue);
        q.failed = q.failed.saturating_sub(1);
        if let Some(n) = seq {
            self.dlq.remove(&queue, n);
        }
    }

    /// The DLQ ids of `queue` selected by `filter`, oldest first.
    fn dlq_ids(&self, queue: &str, filter: Option<&Filter>, now: f64) -> Vec<String> {
        self.dlq.select(queue, filter, now, self.dlq_entry_of())
    }

    /// A DLQ job's `(enteredAt, reason)`, read from its record, for [`super::Dlq`]'s walks.
    fn dlq_entry_of(&self) -> impl Fn(&str) -> Option<(f64, &'static str)> + '_ {
        |id| {
            let e = self.jobs.map.get(id)?;
            let entered = e.run.finished.map_or(e.rec.created_at, |(at, _)| at);
            Some((entered, e.run.dlq.as_ref().map_or("unknown", |d| d.0)))
        }
    }

    /// `Dlq`: the entries of `queue`, oldest first, the first `count` of them when given.
    pub fn dlq_entries(
        &self,
        queue: &str,
        count: Option<u64>,
        filter: Option<&Filter>,
        now: f64,
    ) -> Vec<Entry> {
        let ids = self.dlq_ids(queue, filter, now);
        let n = count.map_or(usize::MAX, |c| c as usize);
        let max_age = self.dlq.max_age(queue);
        ids.iter()
            .take(n)
            .filter_map(|id| self.jobs.map.get(id))
            .map(|e| {
                let (reason, error) = e.run.dlq.clone().unwrap_or(("unknown", None));
                let entered_at = e.run.finished.map_or(e.rec.created_at, |(at, _)| at);
                Entry {
                    job: Value::map(crate::queue::view::record(e, self.extras.get(&e.rec.id))),
                    attempts: e.run.attempt_log.iter().map(|a| a.to_value()).collect(),
                    entered_at,
                    reason,
                    error,
                    expires_at: max_age.map(|age| entered_at + age),
                }
            })
            .collect()
    }

    /// `GetDlqStats`: `(total, per reason in [`REASONS`] order, expired, oldest, newest)`.
    pub fn dlq_stats(
        &self,
        queue: &str,
        now: f64,
    ) -> (u64, [u64; 7], u64, Option<f64>, Option<f64>) {
        self.dlq.stats(queue, now, self.dlq_entry_of())
    }

    /// `RetryDlq`: runs DLQ jobs again from their first attempt, waiting now: one job, the
    /// first `count`, the filtered ones, or all. A job whose unique key another live job holds
    /// now stays (bunqueue's `canRetry`). How many were retried.
    pub fn retry_dlq(
        &mut self,
        queue: &str,
        id: Option<&str>,
        count: Option<u64>,
        filter: Option<&Filter>,
        now: f64,
    ) -> u64 {
        let ids: Vec<String> = match (id, filter) {
            (Some(id), None) => self
                .dlq_ids(queue, None, now)
                .into_iter()
                .filter(|x| x == id)
                .take(1)
                .collect(),
            (_, Some(f)) => self.dlq_ids(queue, Some(f), now),
            (None, None) => {
                let all = self.dlq_ids(queue, None, now);
                match count {
                    Some(c) => all.into_iter().take(c as usize).collect(),
                    None => all,
                }
            }
        };
        let mut done = 0;
        for id in ids {
            let Some(e) = self.jobs.map.get(&id) else {
                continue;
            };
            if let Some(k) = &e.rec.unique_key {
                let holder = self.unique.holder(queue, k);
                let held = holder.is_some_and(|h| {
                    *h != id && self.jobs.map.get(h).is_some_and(|o| o.rec.state.is_live())
                });
                if held {
                    continue;
                }
            }
            self.leave_dlq(&id);
            self.jobs.prepare_retry(&id, now);
            self.jobs.refile(&id, now, now);
            done += 1;
        }
        done
    }

    /// `PurgeDlq`: drops every DLQ job of `queue` for good; how many.
    pub fn purge_dlq(&mut self, queue: &str, now: f64) -> u64 {
        let ids = self.dlq_ids(queue, None, now);
        for id in &ids {
            self.forget(id);
            self.jobs.record(StoreOp::Remove(id.clone()));
        }
        ids.len() as u64
    }

    /// `RemoveDlqJob`: drops one DLQ job of `queue` for good; false if it is not there.
    pub fn remove_dlq_job(&mut self, queue: &str, id: &str) -> bool {
        let there = self
            .jobs
            .map
            .get(id)
            .is_some_and(|e| e.rec.queue == queue && e.rec.state == JobState::Failed);
        if there {
            self.forget(id);
            self.jobs.record(StoreOp::Remove(id.to_owned()));
        }
        there
    }
}

#[cfg(test)]
mod tests {
    use crate::queue::dlq::Filter;
    use crate::queue::dlq_config::DEFAULT_MAX_ENTRIES as DLQ_MAX_ENTRIES;
    use crate::queue::Failure;
    use crate::queue::{PullSpec, State};
    use crate::store::MemoryStore;
    use autobatch_core::wire::{JobOptions, JobSpec, Value};

    fn state() -> State {
        State::new(Box::new(MemoryStore::new()), 0.0).expect("memory store")
    }

    fn fail_one(s: &mut State, now: f64) -> String {
        let o = JobOptions::new().attempts(1);
        let id = s.push("q", JobSpec::new("j", Value::Nil).with_options(o), now);
        let spec = PullSpec {
            queue: "q",
            count: 1,
            locked: false,
            lock_ttl: 0,
            tie_to: None,
        };
        let got = s.pull(&spec, now).remove(0).id;
        assert_eq!(got, id);
        s.fail(&id, None, Failure::new(Some(format!("boom {now}"))), now)
            .expect("active");
        id
    }

    /// Failed jobs are the DLQ, in failure order, with bunqueue's reasons; RetryDlq runs them
    /// again from their first attempt, RemoveDlqJob and PurgeDlq drop them.
    #[test]
    fn failed_jobs_are_the_dlq() {
        let mut s = state();
        let a = fail_one(&mut s, 1.0);
        let b = s.push("q", JobSpec::new("j", Value::Nil), 2.0);
        s.discard(&b, None, 3.0).unwrap();
        let c = fail_one(&mut s, 4.0);
        let listed: Vec<_> = s.dlq_entries("q", None, None, 5.0);
        let got: Vec<_> = listed
            .iter()
            .map(|e| {
                (
                    e.job.get("id").and_then(Value::as_str).unwrap().to_owned(),
                    e.reason,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (a.clone(), "max_attempts_exceeded"),
                (b.clone(), "unknown"),
                (c.clone(), "max_attempts_exceeded")
            ]
        );
        assert_eq!(listed[0].error.as_deref(), Some("boom 1"));
        let only_unknown = Filter {
            reason: Some("unknown".into()),
            ..Filter::default()
        };
        assert_eq!(s.dlq_entries("q", None, Some(&only_unknown), 5.0).len(), 1);
        let (total, by, ..) = s.dlq_stats("q", 5.0);
        assert_eq!((total, by[1], by[6]), (3, 2, 1));

        assert_eq!(s.retry_dlq("q", None, Some(1), None, 6.0), 1);
        assert_eq!(s.jobs.get_state(&a, 6.0), "waiting");
        assert_eq!(s.get_job_wire(&a, 6.0).unwrap().attempts, 0);
        assert!(s.remove_dlq_job("q", &b));
        assert!(!s.remove_dlq_job("q", &b));
        assert_eq!(s.purge_dlq("q", 7.0), 1);
        assert_eq!(s.jobs.get_state(&c, 7.0), "unknown");
        assert_eq!(s.jobs.counts("q", 7.0).failed, 0);
    }

    /// Past bunqueue's `maxEntries` the oldest entry leaves for good: the DLQ stays bounded.
    #[test]
    fn the_dlq_is_bounded() {
        let mut s = state();
        let first = fail_one(&mut s, 0.0);
        for i in 1..=DLQ_MAX_ENTRIES {
            fail_one(&mut s, i as f64);
        }
        assert_eq!(s.jobs.counts("q", 1e9).failed, DLQ_MAX_ENTRIES as u64);
        assert_eq!(s.jobs.get_state(&first, 1e9), "unknown");
        assert_eq!(s.dlq_entries("q", None, None, 1e9).len(), DLQ_MAX_ENTRIES);
    }
}
