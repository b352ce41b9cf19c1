//! A job's way into and out of the DLQ, on its record: what [`Dlq`](crate::queue::dlq::Dlq) holds, read with
//! the jobs' own records.

use autobatch_core::wire::Value;

use super::Jobs;
use crate::queue::dlq::Entry;
use crate::queue::progress::Progress;
use crate::queue::{timeline, view};
use crate::store::Stage;

impl Jobs {
    /// A failed job about to run again from its first attempt, as bunqueue's `prepareRetry`
    /// resets it: attempts, stalls and history cleared, a `waiting` step in its timeline.
    pub fn prepare_retry(&mut self, id: &str, now: f64) {
        if let Some(e) = self.map.get_mut(id) {
            e.rec.attempts = 0;
            e.run.stall_count = 0;
            e.run.dlq = None;
            e.run.shown_started = None;
            e.run.last_heartbeat = now;
            e.run.attempt_log.clear();
            crate::queue::timeline::note(
                &mut e.run.timeline,
                crate::queue::timeline::Step {
                    state: "waiting",
                    at: now,
                    error: None,
                    attempt: None,
                },
            );
        }
    }

    /// Files a job that just failed for good as its queue's newest DLQ entry (it is `Failed`
    /// already or about to be: the caller records the state): its finish numbered, its last
    /// attempt and the entry's reason and error noted, counted as failed. Returns its queue
    /// and its place in the DLQ, for [`Dlq::file`](crate::queue::dlq::Dlq::file).
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
    /// the caller's). Returns its queue and its place in the DLQ, for [`Dlq::remove`](crate::queue::dlq::Dlq::remove).
    pub fn leave_dlq(&mut self, id: &str) -> Option<(String, Option<u64>)> {
        let e = self.map.get(id)?;
        if e.rec.state != Stage::Failed {
            return None;
        }
        let seq = e.run.finished.map(|(_, n)| n);
        let queue = e.rec.queue.clone();
        let q = self.index(&queue);
        q.failed = q.failed.saturating_sub(1);
        Some((queue, seq))
    }

    /// A DLQ job's `(enteredAt, reason)`, read from its record, for [`Dlq`](crate::queue::dlq::Dlq)'s walks.
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
        let stored = self.persistent();
        ids.iter()
            .take(n)
            .filter_map(|id| self.map.get(id))
            .map(|e| {
                let (reason, error) = e.run.dlq.clone().unwrap_or(("unknown", None));
                let entered_at = e.run.finished.map_or(e.rec.created_at, |(at, _)| at);
                Entry {
                    job: Value::map(view::record(e, extras.get(&e.rec.id), stored)),
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
            .is_some_and(|e| e.rec.queue == queue && e.rec.state == Stage::Failed)
    }
}
