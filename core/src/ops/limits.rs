//! Limits: rate limit, global concurrency, stall detection, and per-group controls (only these
//! validate the queue name and the group id, with bunqueue's messages).
//!
//! Each command's wire shape and bunqueue 2.9.5's behaviour: `docs/protocol/limits.md`.
//!
//! ```
//! use std::time::Duration;
//! use autobatch_core::ops::{GroupRateLimit, Operation, RateLimit, SetGroupRateLimit};
//! use autobatch_core::wire::Value;
//! let op = RateLimit::new("emails", 100).duration(Duration::from_secs(60));
//! assert_eq!(op.to_body().get("duration"), Some(&Value::Int(60_000)));
//! let group = SetGroupRateLimit::new("emails", "tenant-1", GroupRateLimit::new(0, Duration::from_secs(1)));
//! assert_eq!(group.validate().unwrap_err().message, "max must be a positive safe integer");
//! ```

use std::time::Duration;

use super::decl::kind::Queue;
use super::decl::{
    fields, kinds, ms, op, options, put_data, record, reply_data, span, wires, Kind, Wire,
};
use super::read::{bad, reply_field};
use super::Fields;
use crate::wire::{ProtocolError, ValidationError, Value, MAX_SAFE_INTEGER};

/// A number the server coerces with `Number()` and keeps when finite.
fn finite(v: &Value, field: &str) -> Option<f64> {
    match v.get(field)? {
        Value::Str(s) => s.trim().parse::<f64>().ok().filter(|f| f.is_finite()),
        Value::Bool(b) => Some(f64::from(u8::from(*b))),
        x => x.as_f64().filter(|f| f.is_finite()),
    }
}

kinds! {
    /// A limit bunqueue requires finite (`<key> must be a finite number`).
    Finite: i64 = |r, k| {
        let refuse = || ValidationError::new(k, format!("{k} must be a finite number"));
        finite(r, k).map(|f| f as i64).ok_or_else(refuse)
    };
    /// A time span the server coerces with `Number()`, ignored when not finite.
    FiniteSpan: Option<Duration> = |r, k| Ok(finite(r, k).map(span));
    /// A group's id, checked as bunqueue's groups handler checks it: after the queue name, which
    /// it reads first (as a string), then the id (required, a string).
    Group: String = |r, k| {
        Queue::take(r, "queue")?;
        let group = match r.get(k) {
            None | Some(Value::Undefined) => return Err(ValidationError::new(k, "groupId is required")),
            Some(Value::Str(g)) => g.clone(),
            Some(_) => return Err(ValidationError::new(k, "groupId must be a string")),
        };
        crate::wire::check_group_id(&group)?;
        Ok(group)
    }, check |group_id, _| crate::wire::check_group_id(group_id);
    /// bunqueue's `validatePositiveSafeInteger`.
    Positive: u64 = |r, k| match r.get(k) {
        Some(x @ (Value::Int(_) | Value::F64(_))) => match x.as_f64() {
            Some(f) if f.fract() == 0.0 && f >= 1.0 && f <= MAX_SAFE_INTEGER as f64 => Ok(f as u64),
            _ => Err(not_positive(k)),
        },
        _ => Err(not_positive(k)),
    }, check |v, k| if *v == 0 || *v > MAX_SAFE_INTEGER as u64 {
        Err(not_positive(k))
    } else {
        Ok(())
    };
    /// A time span of [`Positive`] ms.
    PositiveSpan: Duration = |r, k| Positive::take(r, k).map(Duration::from_millis),
        check |v, k| Positive::check(&(crate::wire::millis(*v) as u64), k);
    /// A group's rate window: `max` then `duration`, both [`Positive`].
    Window: GroupRateLimit = |r, _| {
        let max = Positive::take(r, "max")?;
        Ok(GroupRateLimit::new(max, PositiveSpan::take(r, "duration")?))
    }, check |limit, _| {
        Positive::check(&limit.max, "max")?;
        PositiveSpan::check(&limit.duration, "duration")
    };
    /// A count the server reads without checking: kept when a non-negative number.
    Lax: Option<u64> = |r, k| Ok(u64::get(r, k));
}

op! {
    /// `RateLimit`: at most `limit` jobs of the queue start per `duration` (1 s when absent);
    /// with a `ttl`, the limit lifts itself after that long.
    RateLimit, Safe, Eq;
    /// `limit` jobs per second on `queue`.
    new(queue: impl Into<String>, limit: i64);
    fields {
        /// Queue name.
        queue: String = "queue",
        /// Jobs per window.
        limit: i64 = "limit" => Finite,
        /// The window (server default 1 s).
        duration: Option<Duration> = "duration" => FiniteSpan,
        /// Lift the limit after this long.
        ttl: Option<Duration> = "ttl" => FiniteSpan,
    }
    set { duration: Duration, ttl: Duration }
}

op! {
    /// `RateLimitClear`: lifts the queue's rate limit. Idempotent: replayed.
    RateLimitClear, Safe, Eq;
    queue (unchecked);
}

op! {
    /// `ClearConcurrency`: lifts the queue's global concurrency limit. Idempotent: replayed.
    ClearConcurrency, Safe, Eq;
    queue (unchecked);
}

op! {
    /// `SetConcurrency`: at most `limit` jobs of the queue active at once, over all workers.
    /// Idempotent: replayed.
    SetConcurrency, Safe, Eq;
    /// At most `limit` active jobs on `queue`.
    new(queue: impl Into<String>, limit: i64);
    fields {
        /// Queue name.
        queue: String = "queue",
        /// Most active jobs.
        limit: i64 = "limit" => Finite,
    }
}

record! {
    /// A queue's stall detection settings, as [`GetStallConfig`] reports them (bunqueue's
    /// defaults: [`StallConfig::default`]).
    #[derive(Debug, Clone, PartialEq, Eq)]
    StallConfig (Default) {
        /// Detect stalled jobs (default: yes).
        enabled: bool = "enabled" | true,
        /// How often to check (default 30 s).
        stall_interval: Duration = "stallInterval" | Duration::from_secs(30),
        /// Stalls before the job fails for good (default 3).
        max_stalls: u64 = "maxStalls" | 3,
        /// Time after a job starts during which it cannot stall (default 5 s).
        grace_period: Duration = "gracePeriod" | Duration::from_secs(5),
    }
}

op! {
    /// `GetStallConfig`: a queue's stall detection settings. A read: replayed.
    GetStallConfig, Safe, Eq;
    queue (unchecked);
    reply: StallConfig = field("config");
}

/// A count the server coerces with `Number()`, negatives as 0.
struct FiniteCount;

wires! {
    FiniteSpan => Duration: |v, k| finite(v, k).map(span), |x| ms(*x);
    FiniteCount => u64: |v, k| finite(v, k).map(|f| f.max(0.0) as u64), |x| Value::from(*x);
}

options! {
    /// The stall settings to change with [`SetStallConfig`]; the others keep their value.
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    StallConfigUpdate for StallConfig {
        /// Changes nothing.
        new();
        /// Sets [`StallConfig::enabled`].
        enabled: bool = "enabled",
        /// Sets [`StallConfig::stall_interval`].
        stall_interval: Duration = "stallInterval" => FiniteSpan,
        /// Sets [`StallConfig::max_stalls`].
        max_stalls: u64 = "maxStalls" => FiniteCount,
        /// Sets [`StallConfig::grace_period`].
        grace_period: Duration = "gracePeriod" => FiniteSpan,
    }
}

op! {
    /// `SetStallConfig`: changes some of a queue's stall settings. Idempotent: replayed.
    SetStallConfig, Safe, Eq;
    /// Applies `config` to `queue`.
    new(queue: impl Into<String>, config: StallConfigUpdate);
    fields {
        /// Queue name.
        queue: String = "queue",
        /// What to change.
        config: StallConfigUpdate = "config",
    }
}

fn not_positive(key: &'static str) -> ValidationError {
    ValidationError::new(key, format!("{key} must be a positive safe integer"))
}

record! {
    /// A group's rate limit: `max` jobs per `duration`.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    GroupRateLimit {
        /// Jobs per window.
        max: u64 = "max",
        /// The window.
        duration: Duration = "duration",
    }
    /// `max` jobs per `duration`.
    new(max: u64, duration: Duration);
}

/// A `removed` answer, a count (0 or 1) on the wire.
fn removed(r: &Value) -> Result<bool, ProtocolError> {
    match reply_field(&reply_data(r)?, "removed")? {
        Value::Bool(b) => Ok(*b),
        x => x
            .as_f64()
            .map(|f| f > 0.0)
            .ok_or(bad("removed", "not a number")),
    }
}

fn write_removed(b: &bool, f: &mut Fields) {
    put_data(f, "removed", i64::from(*b));
}

/// Declares a command on one group of a queue that carries only `groupId` and `queue`.
macro_rules! group_op {
    ($(#[$doc:meta])* $name:ident, $replay:ident, $out:ty = $shape:ident $($shape_arg:tt)*) => {
        op! {
            $(#[$doc])*
            $name, $replay, Eq;
            /// The command for group `group_id` of `queue`.
            new(queue: impl Into<String>, group_id: impl Into<String>);
            fields {
                /// The group's id.
                group_id: String = "groupId" => Group,
                /// Queue name.
                queue: String = "queue" => Queue,
            }
            reply: $out = $shape $($shape_arg)*;
        }
    };
}

group_op! {
    /// `GetGroupJobsCount`: jobs of the group waiting to run. A read: replayed.
    GetGroupJobsCount, Safe, u64 = data("count")
}

group_op! {
    /// `GetGroupActiveCount`: jobs of the group active now. A read: replayed.
    GetGroupActiveCount, Safe, u64 = data("count")
}

group_op! {
    /// `GetGroupRateLimit`: the group's own rate limit, if it has one. A read: replayed.
    GetGroupRateLimit, Safe, Option<GroupRateLimit> = data("limit")
}

group_op! {
    /// `RemoveGroupRateLimit`: drops the group's own rate limit; answers whether it had one.
    /// Not replayed: a second run would answer `false`.
    RemoveGroupRateLimit, NotSafe, bool = with(removed, write_removed)
}

group_op! {
    /// `GetGroupConcurrency`: the group's own concurrency limit, if it has one. A read:
    /// replayed.
    GetGroupConcurrency, Safe, Option<u64> = data("concurrency")
}

group_op! {
    /// `RemoveGroupConcurrency`: drops the group's own concurrency limit; answers whether it
    /// had one. Not replayed: a second run would answer `false`.
    RemoveGroupConcurrency, NotSafe, bool = with(removed, write_removed)
}

group_op! {
    /// `PauseGroup`: workers get no more jobs of this group until [`ResumeGroup`]; answers
    /// whether it changed anything. Not replayed: a second run would answer `false`.
    PauseGroup, NotSafe, bool = data("changed")
}

group_op! {
    /// `ResumeGroup`: undoes [`PauseGroup`]; answers whether it changed anything. Not
    /// replayed: a second run would answer `false`.
    ResumeGroup, NotSafe, bool = data("changed")
}

group_op! {
    /// `IsGroupPaused`: whether the group is paused. A read: replayed.
    IsGroupPaused, Safe, bool = data("paused")
}

fields! {
    /// On the wire, a window is two fields: `max` and `duration`.
    GroupRateLimit: |limit, _, f| f.put("max", limit.max).put("duration", ms(limit.duration)),
        |r, k| Window::take(r, k);
}

op! {
    /// `SetGroupRateLimit`: at most `max` jobs of the group start per `duration`. Both must be
    /// positive safe integers (`max must be a positive safe integer`, …). Idempotent: replayed.
    SetGroupRateLimit, Safe, Eq;
    /// Limits group `group_id` of `queue` to `limit`.
    new(queue: impl Into<String>, group_id: impl Into<String>, limit: GroupRateLimit);
    fields {
        /// The group's id.
        group_id: String = "groupId" => Group,
        /// The limit (`max` and `duration` on the wire).
        limit: GroupRateLimit = "max" => Window,
        /// Queue name.
        queue: String = "queue" => Queue,
    }
}

op! {
    /// `SetGroupConcurrency`: at most `concurrency` jobs of the group active at once (a positive
    /// safe integer). Idempotent: replayed.
    SetGroupConcurrency, Safe, Eq;
    /// At most `concurrency` active jobs of group `group_id` of `queue`.
    new(queue: impl Into<String>, group_id: impl Into<String>, concurrency: u64);
    fields {
        /// The group's id.
        group_id: String = "groupId" => Group,
        /// Most active jobs of the group.
        concurrency: u64 = "concurrency" => Positive,
        /// Queue name.
        queue: String = "queue" => Queue,
    }
}

op! {
    /// `GetGroupRateLimitTtl`: ms until the group may start another job (`-2`: no window
    /// open), optionally as if the limit were `max_jobs`. A read: replayed.
    GetGroupRateLimitTtl, Safe, Eq;
    /// Asks about group `group_id` of `queue`.
    new(queue: impl Into<String>, group_id: impl Into<String>);
    fields {
        /// The group's id.
        group_id: String = "groupId" => Group,
        /// Count the window as full at this many jobs.
        max_jobs: Option<u64> = "maxJobs" => Lax,
        /// Queue name.
        queue: String = "queue" => Queue,
    }
    set { max_jobs: u64 }
    reply: i64 = data("ttl");
}

op! {
    /// `RateLimitGroup`: holds the group back for `duration` (a positive safe integer of ms).
    /// Not replayed: a second run would restart the window.
    RateLimitGroup, NotSafe, Eq;
    /// Holds group `group_id` of `queue` back for `duration`.
    new(queue: impl Into<String>, group_id: impl Into<String>, duration: Duration);
    fields {
        /// Queue name.
        queue: String = "queue" => Queue,
        /// The group's id.
        group_id: String = "groupId" => Group,
        /// How long.
        duration: Duration = "duration" => PositiveSpan,
    }
}

op! {
    /// `GetGroupsJobsCount`: jobs waiting in any group of the queue. A read: replayed. (The TS
    /// client sends a `maxCount` the server ignores.)
    GetGroupsJobsCount, Safe, Eq;
    /// Asks about `queue`.
    new(queue: impl Into<String>);
    fields {
        /// Sent as the TS client sends it; ignored by bunqueue 2.9.5.
        max_count: Option<u64> = "maxCount" => Lax,
        /// Queue name.
        queue: String = "queue" => Queue,
    }
    reply: u64 = data("count");
}
