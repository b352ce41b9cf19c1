//! Group controls, kept and enforced as bunqueue 2.9.5's `GroupLimiterManager` does: a group's
//! pause, its manual rate limit (`RateLimitGroup`), and its concurrency and rate-limit
//! overrides (`SetGroupConcurrency`, `SetGroupRateLimit`).
//!
//! A pull skips the jobs of a group that is not eligible and takes the next job in its order:
//!
//! * a paused group is never eligible;
//! * a group rate-limited by `RateLimitGroup` is not eligible until the duration has passed;
//! * a group's concurrency bounds its active jobs only when the pull sends a default
//!   (`group.concurrency`): the override, if set, replaces that default. Without a default the
//!   override is kept and reported but does not limit, as in bunqueue;
//! * likewise a group's rate limit applies only when the pull sends `group.limit`: a fixed
//!   window of `max` jobs per `duration` ms, opened by the first job handed out in it.
//!
//! Memory: one entry per (queue, group) that has a control or an open window; an entry is freed
//! when it holds nothing, and Obliterate forgets the queue's.

use std::collections::HashMap;

use autobatch_core::wire::Value;

/// The group defaults a pull sends (`group: {concurrency, limit: {max, duration}, affinity}`).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct PullGroup {
    pub concurrency: Option<u64>,
    pub limit: Option<GroupRate>,
    /// `affinity`: unset (`None`), `null` (`Some(None)`: only jobs without a group) or a
    /// group id (only that group's jobs); applied while the queue holds a grouped job.
    pub affinity: Option<Option<String>>,
}

/// A group rate limit: `max` jobs per `duration` ms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct GroupRate {
    pub max: u64,
    pub duration: u64,
}

impl GroupRate {
    /// As bunqueue answers GetGroupRateLimit: `{max, duration}`.
    pub fn to_value(self) -> Value {
        Value::map([
            ("max", Value::Int(self.max as i64)),
            ("duration", Value::Int(self.duration as i64)),
        ])
    }
}

/// An open rate window of a group.
#[derive(Debug, Clone, Copy)]
struct Window {
    rate: GroupRate,
    started_at: f64,
    count: u64,
}

impl Window {
    fn ends_at(&self) -> f64 {
        self.started_at + self.rate.duration as f64
    }
}

#[derive(Debug, Default)]
struct GroupLimit {
    rate: Option<GroupRate>,
    concurrency: Option<u64>,
    window: Option<Window>,
    /// `RateLimitGroup`: not eligible until then, epoch ms.
    manual_until: Option<f64>,
    paused: bool,
}

impl GroupLimit {
    fn is_empty(&self) -> bool {
        self.rate.is_none()
            && self.concurrency.is_none()
            && self.window.is_none()
            && self.manual_until.is_none()
            && !self.paused
    }

    /// The open window for `rate`, dropping one that ran out or was opened for another limit.
    fn current_window(&mut self, rate: GroupRate, now: f64) -> Option<&mut Window> {
        if self
            .window
            .is_some_and(|w| now >= w.ends_at() || w.rate != rate)
        {
            self.window = None;
        }
        self.window.as_mut()
    }

    fn eligible(&mut self, defaults: Option<&PullGroup>, active: u64, now: f64) -> bool {
        if self.paused {
            return false;
        }
        if let Some(until) = self.manual_until {
            if now < until {
                return false;
            }
            self.manual_until = None;
        }
        let Some(defaults) = defaults else {
            return true;
        };
        if let Some(default) = defaults.concurrency {
            if active >= self.concurrency.unwrap_or(default) {
                return false;
            }
        }
        let Some(default) = defaults.limit else {
            return true;
        };
        let rate = self.rate.unwrap_or(default);
        self.current_window(rate, now)
            .is_none_or(|w| w.count < rate.max)
    }
}

/// Every queue's group controls (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Groups {
    queues: HashMap<String, HashMap<String, GroupLimit>>,
}

impl Groups {
    /// Whether no group of `queue` has a control.
    pub fn none_in(&self, queue: &str) -> bool {
        !self.queues.contains_key(queue)
    }

    fn entry(&mut self, queue: &str, group: &str) -> &mut GroupLimit {
        self.queues
            .entry(queue.to_owned())
            .or_default()
            .entry(group.to_owned())
            .or_default()
    }

    fn get(&self, queue: &str, group: &str) -> Option<&GroupLimit> {
        self.queues.get(queue)?.get(group)
    }

    /// Frees the entry of `group` if it holds nothing.
    fn tidy(&mut self, queue: &str, group: &str) {
        if let Some(groups) = self.queues.get_mut(queue) {
            if groups.get(group).is_some_and(GroupLimit::is_empty) {
                groups.remove(group);
            }
            if groups.is_empty() {
                self.queues.remove(queue);
            }
        }
    }

    /// Whether a job of `group` may be handed out now (bunqueue's `status`), `active` being
    /// the group's active count.
    pub fn eligible(
        &mut self,
        queue: &str,
        group: &str,
        defaults: Option<&PullGroup>,
        active: u64,
        now: f64,
    ) -> bool {
        let ok = match self.queues.get_mut(queue).and_then(|g| g.get_mut(group)) {
            Some(g) => g.eligible(defaults, active, now),
            None => GroupLimit::default().eligible(defaults, active, now),
        };
        self.tidy(queue, group);
        ok
    }

    /// A job of `group` is handed out: counted in its rate window when the pull sends a
    /// rate-limit default.
    pub fn acquired(&mut self, queue: &str, group: &str, defaults: Option<&PullGroup>, now: f64) {
        let Some(default) = defaults.and_then(|d| d.limit) else {
            return;
        };
        let g = self.entry(queue, group);
        let rate = g.rate.unwrap_or(default);
        match g.current_window(rate, now) {
            Some(w) => w.count += 1,
            None => {
                g.window = Some(Window {
                    rate,
                    started_at: now,
                    count: 1,
                });
            }
        }
    }

    /// The earliest time after `now` a group of `queue` held back by a rate limit may be
    /// eligible again: when a long-poll should look again.
    pub fn next_retry(&self, queue: &str, now: f64) -> Option<f64> {
        self.queues
            .get(queue)?
            .values()
            .flat_map(|g| [g.manual_until, g.window.map(|w| w.ends_at())])
            .flatten()
            .filter(|t| *t > now)
            .min_by(f64::total_cmp)
    }

    /// SetGroupRateLimit: replaces the override and closes the open window.
    pub fn set_rate(&mut self, queue: &str, group: &str, rate: GroupRate) {
        let g = self.entry(queue, group);
        g.rate = Some(rate);
        g.window = None;
    }

    /// GetGroupRateLimit.
    pub fn rate(&self, queue: &str, group: &str) -> Option<GroupRate> {
        self.get(queue, group)?.rate
    }

    /// RemoveGroupRateLimit: 1 if there was an override, else 0.
    pub fn remove_rate(&mut self, queue: &str, group: &str) -> u64 {
        let Some(g) = self.queues.get_mut(queue).and_then(|g| g.get_mut(group)) else {
            return 0;
        };
        g.window = None;
        let removed = u64::from(g.rate.take().is_some());
        self.tidy(queue, group);
        removed
    }

    /// GetGroupRateLimitTtl: ms until the group may run again; -2 when no window is open (as
    /// Redis' PTTL of a missing key); 0 while the window has taken fewer than `max_jobs`.
    pub fn rate_ttl(&mut self, queue: &str, group: &str, max_jobs: Option<f64>, now: f64) -> f64 {
        let Some(g) = self.queues.get_mut(queue).and_then(|g| g.get_mut(group)) else {
            return -2.0;
        };
        if let Some(until) = g.manual_until {
            if now < until {
                return until - now;
            }
            g.manual_until = None;
        }
        let ttl = match g.window {
            None => -2.0,
            Some(w) if now >= w.ends_at() => {
                g.window = None;
                -2.0
            }
            Some(w) if max_jobs.is_some_and(|m| (w.count as f64) < m) => 0.0,
            Some(w) => w.ends_at() - now,
        };
        self.tidy(queue, group);
        ttl
    }

    /// SetGroupConcurrency.
    pub fn set_concurrency(&mut self, queue: &str, group: &str, concurrency: u64) {
        self.entry(queue, group).concurrency = Some(concurrency);
    }

    /// GetGroupConcurrency.
    pub fn concurrency(&self, queue: &str, group: &str) -> Option<u64> {
        self.get(queue, group)?.concurrency
    }

    /// RemoveGroupConcurrency: 1 if there was an override, else 0.
    pub fn remove_concurrency(&mut self, queue: &str, group: &str) -> u64 {
        let Some(g) = self.queues.get_mut(queue).and_then(|g| g.get_mut(group)) else {
            return 0;
        };
        let removed = u64::from(g.concurrency.take().is_some());
        self.tidy(queue, group);
        removed
    }

    /// PauseGroup: whether it changed anything.
    pub fn pause(&mut self, queue: &str, group: &str) -> bool {
        let g = self.entry(queue, group);
        !std::mem::replace(&mut g.paused, true)
    }

    /// ResumeGroup: whether it changed anything.
    pub fn resume(&mut self, queue: &str, group: &str) -> bool {
        let Some(g) = self.queues.get_mut(queue).and_then(|g| g.get_mut(group)) else {
            return false;
        };
        let changed = std::mem::replace(&mut g.paused, false);
        self.tidy(queue, group);
        changed
    }

    /// IsGroupPaused.
    pub fn is_paused(&self, queue: &str, group: &str) -> bool {
        self.get(queue, group).is_some_and(|g| g.paused)
    }

    /// RateLimitGroup: the group is not eligible for `duration` ms.
    pub fn rate_limit(&mut self, queue: &str, group: &str, duration: u64, now: f64) {
        self.entry(queue, group).manual_until = Some(now + duration as f64);
    }

    /// Obliterate: the queue's group controls go with it.
    pub fn forget(&mut self, queue: &str) {
        self.queues.remove(queue);
    }

    /// The groups of `queue` that have a control.
    pub fn names(&self, queue: &str) -> Vec<String> {
        self.queues
            .get(queue)
            .map(|g| g.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// What a restart keeps of `group`'s controls (bunqueue keeps the pause, the concurrency
    /// and the rate limit): `None` when there is none of them.
    pub fn setting(&self, queue: &str, group: &str) -> Option<Value> {
        let g = self.get(queue, group)?;
        if !g.paused && g.concurrency.is_none() && g.rate.is_none() {
            return None;
        }
        Some(Value::map([
            ("paused", Value::from(g.paused)),
            (
                "concurrency",
                g.concurrency.map_or(Value::Nil, |c| Value::Int(c as i64)),
            ),
            ("rate", g.rate.map_or(Value::Nil, GroupRate::to_value)),
        ]))
    }

    /// Puts back what [`setting`](Self::setting) kept.
    pub fn restore(&mut self, queue: &str, group: &str, v: &Value) {
        let g = self.entry(queue, group);
        g.paused = v.get("paused").and_then(Value::as_bool) == Some(true);
        g.concurrency = v
            .get("concurrency")
            .and_then(Value::as_i64)
            .and_then(|c| u64::try_from(c).ok());
        g.rate = v.get("rate").and_then(|r| {
            Some(GroupRate {
                max: u64::try_from(r.get("max")?.as_i64()?).ok()?,
                duration: u64::try_from(r.get("duration")?.as_i64()?).ok()?,
            })
        });
        self.tidy(queue, group);
    }
}

/// bunqueue's `validatePositiveSafeInteger`.
pub(crate) fn positive_safe_integer(v: Option<&Value>, name: &str) -> Result<u64, String> {
    const MAX_SAFE: f64 = 9_007_199_254_740_991.0;
    let n = match v {
        Some(Value::Int(i)) => *i as f64,
        Some(Value::F64(f)) => *f,
        _ => f64::NAN,
    };
    if n.is_finite() && n.fract() == 0.0 && n > 0.0 && n <= MAX_SAFE {
        Ok(n as u64)
    } else {
        Err(format!("{name} must be a positive safe integer"))
    }
}

/// bunqueue's `validateGroupId` for a required group id.
pub(crate) fn group_id(v: Option<&Value>) -> Result<String, String> {
    match v {
        None | Some(Value::Undefined) => Err("groupId is required".into()),
        Some(Value::Str(s)) if s.is_empty() => Err("groupId must be a non-empty string".into()),
        Some(Value::Str(s)) if s.encode_utf16().count() > 256 => {
            Err("groupId must be at most 256 characters".into())
        }
        Some(Value::Str(s)) if s.contains('\0') => {
            Err("groupId must not contain NUL characters".into())
        }
        Some(Value::Str(s)) => Ok(s.clone()),
        Some(_) => Err("groupId must be a string".into()),
    }
}

/// The `group` of a PULL or PULLB, checked as bunqueue's `validateGroupPullOptions`.
pub(crate) fn pull_group(raw: &Value) -> Result<Option<PullGroup>, String> {
    let group = match raw.get("group") {
        None | Some(Value::Undefined) => return Ok(None),
        Some(g @ Value::Map(_)) => g,
        Some(_) => return Err("group must be an object".into()),
    };
    let affinity = match group.get("affinity") {
        None | Some(Value::Undefined) => None,
        Some(Value::Nil) => Some(None),
        Some(Value::Str(s)) => Some(Some(s.clone())),
        Some(_) => return Err("group.affinity must be a string or null".into()),
    };
    let concurrency = match group.get("concurrency") {
        None | Some(Value::Undefined) => None,
        c => Some(positive_safe_integer(c, "group.concurrency")?),
    };
    let limit = match group.get("limit") {
        None | Some(Value::Undefined) => None,
        Some(l @ Value::Map(_)) => Some(GroupRate {
            max: positive_safe_integer(l.get("max"), "group.limit.max")?,
            duration: positive_safe_integer(l.get("duration"), "group.limit.duration")?,
        }),
        Some(_) => return Err("group.limit must be an object".into()),
    };
    Ok(Some(PullGroup {
        concurrency,
        limit,
        affinity,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defaults(concurrency: Option<u64>, limit: Option<(u64, u64)>) -> PullGroup {
        PullGroup {
            concurrency,
            limit: limit.map(|(max, duration)| GroupRate { max, duration }),
            affinity: None,
        }
    }

    #[test]
    fn pause_and_resume_report_changes() {
        let mut g = Groups::default();
        assert!(g.pause("q", "a"));
        assert!(!g.pause("q", "a"));
        assert!(g.is_paused("q", "a"));
        assert!(!g.eligible("q", "a", None, 0, 0.0));
        assert!(g.eligible("q", "b", None, 0, 0.0));
        assert!(g.resume("q", "a"));
        assert!(!g.resume("q", "a"));
        assert!(g.none_in("q"), "an entry with nothing is freed");
    }

    #[test]
    fn concurrency_limits_only_with_a_pull_default() {
        let mut g = Groups::default();
        g.set_concurrency("q", "a", 1);
        assert!(
            g.eligible("q", "a", None, 5, 0.0),
            "no default: not limited"
        );
        let d = defaults(Some(3), None);
        assert!(
            !g.eligible("q", "a", Some(&d), 1, 0.0),
            "the override replaces 3"
        );
        assert!(g.eligible("q", "b", Some(&d), 2, 0.0));
        assert!(!g.eligible("q", "b", Some(&d), 3, 0.0));
        assert_eq!(g.remove_concurrency("q", "a"), 1);
        assert_eq!(g.remove_concurrency("q", "a"), 0);
    }

    #[test]
    fn rate_windows_are_fixed() {
        let mut g = Groups::default();
        let d = defaults(None, Some((2, 1000)));
        assert_eq!(g.rate_ttl("q", "a", None, 0.0), -2.0);
        for _ in 0..2 {
            assert!(g.eligible("q", "a", Some(&d), 0, 10.0));
            g.acquired("q", "a", Some(&d), 10.0);
        }
        assert!(!g.eligible("q", "a", Some(&d), 0, 500.0));
        assert_eq!(g.rate_ttl("q", "a", None, 500.0), 510.0);
        assert_eq!(g.rate_ttl("q", "a", Some(3.0), 500.0), 0.0);
        assert_eq!(g.next_retry("q", 500.0), Some(1010.0));
        assert!(g.eligible("q", "a", Some(&d), 0, 1010.0));
        g.set_rate(
            "q",
            "a",
            GroupRate {
                max: 1,
                duration: 50,
            },
        );
        g.acquired("q", "a", Some(&d), 1010.0);
        assert!(
            !g.eligible("q", "a", Some(&d), 0, 1020.0),
            "the override's max is 1"
        );
    }

    #[test]
    fn manual_rate_limits_lift() {
        let mut g = Groups::default();
        g.rate_limit("q", "a", 100, 0.0);
        assert!(!g.eligible("q", "a", None, 0, 50.0));
        assert_eq!(g.rate_ttl("q", "a", None, 50.0), 50.0);
        assert!(g.eligible("q", "a", None, 0, 100.0));
        assert!(g.none_in("q"));
    }

    #[test]
    fn requests_are_checked_as_bunqueue_checks_them() {
        assert_eq!(positive_safe_integer(Some(&Value::Int(3)), "max"), Ok(3));
        assert_eq!(positive_safe_integer(Some(&Value::F64(3.0)), "max"), Ok(3));
        for bad in [Value::Int(0), Value::F64(1.5), Value::from("3"), Value::Nil] {
            assert_eq!(
                positive_safe_integer(Some(&bad), "max"),
                Err("max must be a positive safe integer".into())
            );
        }
        assert_eq!(group_id(None), Err("groupId is required".into()));
        assert_eq!(
            group_id(Some(&Value::Int(1))),
            Err("groupId must be a string".into())
        );
        let raw = Value::map([(
            "group",
            Value::map([("limit", Value::map([("max", Value::Int(1))]))]),
        )]);
        assert_eq!(
            pull_group(&raw),
            Err("group.limit.duration must be a positive safe integer".into())
        );
        assert_eq!(
            pull_group(&Value::map([("queue", Value::from("q"))])),
            Ok(None)
        );
    }
}
