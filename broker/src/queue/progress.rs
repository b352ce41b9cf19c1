//! Jobs' progress and log lines, as bunqueue keeps them (in memory only: a restart loses them).

use std::collections::HashMap;

/// Most log lines kept per job (bunqueue's default `maxLogsPerJob`).
const MAX_LOGS_PER_JOB: usize = 1000;

/// A job's progress and log lines.
#[derive(Debug, Default)]
pub(crate) struct JobExtras {
    pub progress: f64,
    pub message: Option<String>,
    /// `(timestamp, level, message)`, oldest first.
    pub logs: Vec<(f64, String, String)>,
}

/// Every job's progress and log lines, for the jobs that have any.
#[derive(Debug, Default)]
pub(crate) struct Progress {
    jobs: HashMap<String, JobExtras>,
}

impl Progress {
    /// Job `id`'s, if it has any.
    pub fn get(&self, id: &str) -> Option<&JobExtras> {
        self.jobs.get(id)
    }

    /// Job `id` left for good.
    pub fn remove(&mut self, id: &str) {
        self.jobs.remove(id);
    }

    /// Sets job `id`'s progress (clamped to 0..=100) and, when given, its message.
    pub fn set(&mut self, id: &str, progress: f64, message: Option<String>) -> &JobExtras {
        let x = self.jobs.entry(id.to_owned()).or_default();
        x.progress = progress.clamp(0.0, 100.0);
        if message.is_some() {
            x.message = message;
        }
        x
    }

    /// Job `id`'s progress and message (0 and none until set).
    pub fn progress(&self, id: &str) -> (f64, Option<String>) {
        self.jobs
            .get(id)
            .map_or((0.0, None), |x| (x.progress, x.message.clone()))
    }

    /// Appends a log line to job `id`'s, keeping the newest [`MAX_LOGS_PER_JOB`].
    pub fn add_log(&mut self, id: &str, message: String, level: String, now: f64) {
        let logs = &mut self.jobs.entry(id.to_owned()).or_default().logs;
        logs.push((now, level, message));
        if logs.len() > MAX_LOGS_PER_JOB {
            let excess = logs.len() - MAX_LOGS_PER_JOB;
            logs.drain(..excess);
        }
    }

    /// Job `id`'s log lines (empty for a job without any).
    pub fn logs(&self, id: &str) -> &[(f64, String, String)] {
        self.jobs.get(id).map_or(&[], |x| x.logs.as_slice())
    }

    /// Empties job `id`'s log, or keeps its newest `keep` lines.
    pub fn clear_logs(&mut self, id: &str, keep: Option<i64>) {
        let Some(x) = self.jobs.get_mut(id) else {
            return;
        };
        match keep.filter(|k| *k > 0) {
            None => x.logs.clear(),
            Some(k) => {
                let k = k as usize;
                if x.logs.len() > k {
                    let excess = x.logs.len() - k;
                    x.logs.drain(..excess);
                }
            }
        }
    }
}
