//! A job's way into and out of the DLQ, on its record: what [`super::Dlq`] holds, read with
//! the jobs' own records.

use autobatch_core::wire::Value;

use super::Entry;
use crate::queue::jobs::Jobs;
use crate::queue::progress::Progress;
use crate::queue::{timeline, view};
use crate::store::JobState;

impl Jobs {
    /// Files a job that just failed for good as its queue's newest DLQ entry (it is `Failed`
    /// already or about to be: the caller records the state): its finish numbered, its last
    /// attempt and the entry's reason and error noted, counted as failed. Returns its queue
    /// and its place in the DLQ, for [`super::Dlq::file`].
    pub fn enter_dlq(
        &mut self,
        id: &str,
        now: f64,
        reason: &'static str,
        error: Option<String>,
    ) -> Option<(String, u64)> {
        let seq = self.finish_seq;
        self.finish_seq += 1;
        let e = self.map.get_mut(id)?;
        e.run.finished = Some((now, seq));
        // The entry's last attempt (bunqueue's `createDlqEntry`).
        let started = e.run.shown_started;
        e.run.attempt_log.push(timeline::Attempt {
            attempt: e.rec.attempts,
            started_at: started.unwrap_or(e.rec.created_at),
            failed_at: now,
            reason,
            error: error.clone(),
            duration: started.map_or(0.0, |s| now - s),
        });
        e.run.dlq = Some((reason, error));
        let queue = e.rec.queue.clone();
        self.index(&queue).failed += 1;
        Some((queue, seq))
    }

    /// Takes a failed job out of its queue's failed count (to run it again; its state is
    /// the caller's). Returns its queue and its place in the DLQ, for [`super::Dlq::remove`].
    pub fn leave_dlq(&mut self, id: &str) -> Option<(String, Option<u64>)> {
        let e = self.map.get(id)?;
        if e.rec.state != JobState::Failed {
            return None;
        }
        let seq = e.run.finished.map(|(_, n)| n);
        let queue = e.rec.queue.clone();
        let q = self.index(&queue);
        q.failed = q.failed.saturating_sub(1);
        Some((queue, seq))
    }

    /// A DLQ job's `(enteredAt, reason)`, read from its record, for [`super::Dlq`]'s walks.
    pub fn dlq_entry_of(&self) -> impl Fn(&str) -> Option<(f64, &'static str)> + '_ {
        |id| {
            let e = self.map.get(id)?;
            let entered = e.run.finished.map_or(e.rec.created_at, |(at, _)| at);
            Some((entered, e.run.dlq.as_ref().map_or("unknown", |d| d.0)))
        }
    }

    /// The DLQ entries of jobs `ids`, the first `count` of them when given; `max_age`: their
    /// queue's.
    pub fn dlq_entries(
        &self,
        ids: &[String],
        count: Option<u64>,
        max_age: Option<f64>,
        extras: &Progress,
    ) -> Vec<Entry> {
        let n = count.map_or(usize::MAX, |c| c as usize);
        ids.iter()
            .take(n)
            .filter_map(|id| self.map.get(id))
            .map(|e| {
                let (reason, error) = e.run.dlq.clone().unwrap_or(("unknown", None));
                let entered_at = e.run.finished.map_or(e.rec.created_at, |(at, _)| at);
                Entry {
                    job: Value::map(view::record(e, extras.get(&e.rec.id))),
                    attempts: e.run.attempt_log.iter().map(|a| a.to_value()).collect(),
                    entered_at,
                    reason,
                    error,
                    expires_at: max_age.map(|age| entered_at + age),
                }
            })
            .collect()
    }

    /// Whether job `id` is in the DLQ of `queue`.
    pub fn in_dlq(&self, queue: &str, id: &str) -> bool {
        self.map
            .get(id)
            .is_some_and(|e| e.rec.queue == queue && e.rec.state == JobState::Failed)
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
