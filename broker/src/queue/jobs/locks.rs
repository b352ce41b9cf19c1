//! A running job's lock: checked for ACK, FAIL and the moves, renewed by heartbeats.

use super::{FinishError, Jobs};
use crate::store::Stage;

impl Jobs {
    /// Checks the lock of one job for ACK/FAIL/ACKB (a job that is not active has no lock to
    /// check: that case is reported by `State::ack` and `State::fail`).
    pub fn check_lock(&self, id: &str, token: Option<&str>) -> Result<(), FinishError> {
        let Some(e) = self.map.get(id) else {
            return Ok(());
        };
        if e.rec.state != Stage::Active {
            return Ok(());
        }
        let Some(lock) = &e.lock else {
            return Ok(());
        };
        match token.filter(|t| !t.is_empty()) {
            None => Err(FinishError::TokenRequired(id.to_owned())),
            Some(t) if t == lock.token => Ok(()),
            Some(_) => Err(FinishError::BadToken(id.to_owned())),
        }
    }

    /// A job that ran, failed and now waits in its queue for a retry.
    pub fn retried_in_queue(&self, id: &str) -> bool {
        self.map.get(id).is_some_and(|e| {
            matches!(e.rec.state, Stage::Waiting | Stage::Delayed) && e.rec.attempts > 0
        })
    }

    /// JobHeartbeat, as bunqueue's `jobHeartbeat`: with a token, renews the job's lock (by
    /// `duration` ms when given, else by the lock's own ttl) and fails when the job has no lock,
    /// the token differs or the lock already expired; without one, only marks the job alive for
    /// stall detection. False if the job is not active.
    pub fn heartbeat(
        &mut self,
        id: &str,
        token: Option<&str>,
        duration: Option<f64>,
        now: f64,
    ) -> bool {
        let Some(e) = self.map.get_mut(id) else {
            return false;
        };
        if e.rec.state != Stage::Active {
            return false;
        }
        let Some(token) = token.filter(|t| !t.is_empty()) else {
            e.run.last_heartbeat = now;
            return true;
        };
        match &mut e.lock {
            Some(lock) if lock.token == token && now < lock.expires_at => {
                lock.expires_at = now + duration.filter(|d| *d > 0.0).unwrap_or(lock.ttl);
                lock.renewals += 1;
                e.run.last_heartbeat = now;
                true
            }
            _ => false,
        }
    }

    /// Extends an active job's lock to `duration` ms from now; false when it has no lock, the
    /// lock expired, or a token is given and does not match.
    pub fn extend_lock(&mut self, id: &str, token: Option<&str>, duration: f64, now: f64) -> bool {
        let Some(e) = self.map.get_mut(id) else {
            return false;
        };
        if e.rec.state != Stage::Active {
            return false;
        }
        // bunqueue's `extendLock`: without a token it renews the job's lock with the lock's
        // own token; an expired lock is not renewed.
        match (&mut e.lock, token.filter(|t| !t.is_empty())) {
            (Some(lock), t) if t.is_none_or(|t| t == lock.token) && now < lock.expires_at => {
                lock.expires_at = now + duration;
                lock.renewals += 1;
                e.run.last_heartbeat = now;
                true
            }
            _ => false,
        }
    }

    /// `Job not found` / `Job is not active (current state: <state>)`, as bunqueue words them.
    pub fn require_active(&mut self, id: &str, now: f64) -> Result<(), String> {
        match self.get_state(id, now) {
            "unknown" => Err("Job not found".into()),
            "active" => Ok(()),
            s => Err(format!("Job is not active (current state: {s})")),
        }
    }
}
