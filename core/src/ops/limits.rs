//! Limits: rate limit, global concurrency, stall detection, and per-group controls.
//!
//! The queue-wide commands (`RateLimit`, `SetConcurrency`, the stall settings) do not validate
//! the queue name on the server, so they do not here either; the group commands validate the
//! queue name and the group id, with bunqueue's messages.

use std::time::Duration;

use crate::session::Replay;
use crate::wire::server::CommandError;
use crate::wire::{validate_queue_name, ProtocolError, ValidationError, Value, MAX_SAFE_INTEGER};

use super::dlq::{ms, opt_f64, opt_u64, put_data, reply_data, req_queue_raw, span};
use super::read::{reply_field, reply_opt, reply_u64};
use super::{Fields, Operation};

// ------------------------------------------------------------------------ queue-wide

/// `RateLimit`: at most `limit` jobs of the queue start per `duration` (1 s when absent);
/// with a `ttl`, the limit lifts itself after that long (the TS client's `rateLimit(ms)`
/// sends `limit: 1` with a `ttl`).
///
/// Setting the same limit twice is setting it once: replayed.
///
/// ```
/// use std::time::Duration;
/// use autobatch_core::ops::{Operation, RateLimit};
/// use autobatch_core::wire::Value;
/// let op = RateLimit::new("emails", 100).duration(Duration::from_secs(60));
/// assert_eq!(op.to_body().get("duration"), Some(&Value::Int(60_000)));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RateLimit {
    /// Queue name.
    pub queue: String,
    /// Jobs per window.
    pub limit: i64,
    /// The window (server default 1 s).
    pub duration: Option<Duration>,
    /// Lift the limit after this long.
    pub ttl: Option<Duration>,
}

impl RateLimit {
    /// `limit` jobs per second on `queue`.
    pub fn new(queue: impl Into<String>, limit: i64) -> Self {
        RateLimit {
            queue: queue.into(),
            limit,
            duration: None,
            ttl: None,
        }
    }

    /// Sets [`duration`](Self::duration).
    pub fn duration(mut self, d: Duration) -> Self {
        self.duration = Some(d);
        self
    }

    /// Sets [`ttl`](Self::ttl).
    pub fn ttl(mut self, d: Duration) -> Self {
        self.ttl = Some(d);
        self
    }
}

/// A number the server coerces with `Number()` and keeps when finite.
fn finite(v: &Value, field: &str) -> Option<f64> {
    match v.get(field)? {
        Value::Str(s) => s.trim().parse::<f64>().ok().filter(|f| f.is_finite()),
        Value::Bool(b) => Some(f64::from(u8::from(*b))),
        x => x.as_f64().filter(|f| f.is_finite()),
    }
}

fn req_limit(request: &Value) -> Result<i64, ValidationError> {
    finite(request, "limit")
        .map(|f| f as i64)
        .ok_or_else(|| ValidationError::new("limit", "limit must be a finite number"))
}

impl Operation for RateLimit {
    const NAME: &'static str = "RateLimit";
    type Output = ();

    const REPLAY: Replay = Replay::Safe;

    fn write_fields(&self, fields: &mut Fields) {
        fields
            .put("queue", self.queue.as_str())
            .put("limit", self.limit)
            .put_opt("duration", self.duration.map(ms))
            .put_opt("ttl", self.ttl.map(ms));
    }

    fn read_reply(_: &Value) -> Result<(), ProtocolError> {
        Ok(())
    }
}
impl crate::wire::server::ServeOperation for RateLimit {
    fn read_request(request: &Value) -> Result<Self, CommandError> {
        Ok(RateLimit {
            queue: req_queue_raw(request),
            limit: req_limit(request)?,
            duration: finite(request, "duration").map(span),
            ttl: finite(request, "ttl").map(span),
        })
    }

    fn write_reply(_: &(), fields: &mut Fields) {
        fields.put("id", Value::Undefined);
    }
}

/// A command on a whole queue that carries only the queue name and answers `{ok: true}`.
macro_rules! queue_command {
    ($(#[$doc:meta])* $name:ident, $cmd:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq)]
        #[non_exhaustive]
        pub struct $name {
            /// Queue name.
            pub queue: String,
        }

        impl $name {
            /// The command for `queue`.
            pub fn new(queue: impl Into<String>) -> Self {
                $name {
                    queue: queue.into(),
                }
            }
        }

        impl Operation for $name {
            const NAME: &'static str = $cmd;
            type Output = ();

            const REPLAY: Replay = Replay::Safe;

            fn write_fields(&self, fields: &mut Fields) {
                fields.put("queue", self.queue.as_str());
            }

            fn read_reply(_: &Value) -> Result<(), ProtocolError> {
                Ok(())
            }
        }
        impl crate::wire::server::ServeOperation for $name {

            fn read_request(request: &Value) -> Result<Self, CommandError> {
                Ok($name::new(req_queue_raw(request)))
            }

            fn write_reply(_: &(), fields: &mut Fields) {
                fields.put("id", Value::Undefined);
            }
        }
    };
}

queue_command! {
    /// `RateLimitClear`: lifts the queue's rate limit. Idempotent: replayed.
    ///
    /// ```
    /// use autobatch_core::ops::{Operation, RateLimitClear};
    /// assert_eq!(RateLimitClear::new("emails").to_body().get("queue").and_then(|v| v.as_str()), Some("emails"));
    /// ```
    RateLimitClear, "RateLimitClear"
}

queue_command! {
    /// `ClearConcurrency`: lifts the queue's global concurrency limit. Idempotent: replayed.
    ///
    /// ```
    /// use autobatch_core::ops::{ClearConcurrency, Operation};
    /// assert_eq!(ClearConcurrency::NAME, "ClearConcurrency");
    /// ```
    ClearConcurrency, "ClearConcurrency"
}

/// `SetConcurrency`: at most `limit` jobs of the queue active at once, over all workers.
/// Idempotent: replayed.
///
/// ```
/// use autobatch_core::ops::{Operation, SetConcurrency};
/// use autobatch_core::wire::Value;
/// assert_eq!(SetConcurrency::new("emails", 4).to_body().get("limit"), Some(&Value::Int(4)));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SetConcurrency {
    /// Queue name.
    pub queue: String,
    /// Most active jobs.
    pub limit: i64,
}

impl SetConcurrency {
    /// At most `limit` active jobs on `queue`.
    pub fn new(queue: impl Into<String>, limit: i64) -> Self {
        SetConcurrency {
            queue: queue.into(),
            limit,
        }
    }
}

impl Operation for SetConcurrency {
    const NAME: &'static str = "SetConcurrency";
    type Output = ();

    const REPLAY: Replay = Replay::Safe;

    fn write_fields(&self, fields: &mut Fields) {
        fields
            .put("queue", self.queue.as_str())
            .put("limit", self.limit);
    }

    fn read_reply(_: &Value) -> Result<(), ProtocolError> {
        Ok(())
    }
}
impl crate::wire::server::ServeOperation for SetConcurrency {
    fn read_request(request: &Value) -> Result<Self, CommandError> {
        Ok(SetConcurrency::new(
            req_queue_raw(request),
            req_limit(request)?,
        ))
    }

    fn write_reply(_: &(), fields: &mut Fields) {
        fields.put("id", Value::Undefined);
    }
}

// ------------------------------------------------------------------------ stall config

/// A queue's stall detection settings, as [`GetStallConfig`] reports them; bunqueue's
/// defaults in [`StallConfig::default`] (enabled, checked every 30 s, 3 stalls before the job
/// fails, 5 s grace after a job starts).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StallConfig {
    /// Detect stalled jobs.
    pub enabled: bool,
    /// How often to check.
    pub stall_interval: Duration,
    /// Stalls before the job fails for good.
    pub max_stalls: u64,
    /// Time after a job starts during which it cannot stall.
    pub grace_period: Duration,
}

impl Default for StallConfig {
    fn default() -> Self {
        StallConfig {
            enabled: true,
            stall_interval: Duration::from_secs(30),
            max_stalls: 3,
            grace_period: Duration::from_secs(5),
        }
    }
}

impl StallConfig {
    fn from_value(v: &Value) -> StallConfig {
        let d = StallConfig::default();
        StallConfig {
            enabled: reply_opt(v, "enabled")
                .and_then(Value::as_bool)
                .unwrap_or(d.enabled),
            stall_interval: opt_f64(v, "stallInterval").map_or(d.stall_interval, span),
            max_stalls: opt_u64(v, "maxStalls").unwrap_or(d.max_stalls),
            grace_period: opt_f64(v, "gracePeriod").map_or(d.grace_period, span),
        }
    }

    fn to_value(&self) -> Value {
        Value::map([
            ("enabled", Value::from(self.enabled)),
            ("stallInterval", ms(self.stall_interval)),
            ("maxStalls", Value::from(self.max_stalls)),
            ("gracePeriod", ms(self.grace_period)),
        ])
    }
}

/// `GetStallConfig`: a queue's stall detection settings. A read: replayed.
///
/// ```
/// use autobatch_core::ops::{GetStallConfig, Operation, StallConfig};
/// use autobatch_core::wire::Value;
/// let reply = Value::map([("ok", Value::from(true)), ("config", Value::map([("enabled", Value::from(true))]))]);
/// assert_eq!(GetStallConfig::read_reply(&reply).unwrap(), StallConfig::default());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GetStallConfig {
    /// Queue name.
    pub queue: String,
}

impl GetStallConfig {
    /// Asks about `queue`.
    pub fn new(queue: impl Into<String>) -> Self {
        GetStallConfig {
            queue: queue.into(),
        }
    }
}

impl Operation for GetStallConfig {
    const NAME: &'static str = "GetStallConfig";
    type Output = StallConfig;

    const REPLAY: Replay = Replay::Safe;

    fn write_fields(&self, fields: &mut Fields) {
        fields.put("queue", self.queue.as_str());
    }

    fn read_reply(reply: &Value) -> Result<StallConfig, ProtocolError> {
        Ok(StallConfig::from_value(reply_field(reply, "config")?))
    }
}
impl crate::wire::server::ServeOperation for GetStallConfig {
    fn read_request(request: &Value) -> Result<Self, CommandError> {
        Ok(GetStallConfig::new(req_queue_raw(request)))
    }

    fn write_reply(config: &StallConfig, fields: &mut Fields) {
        fields.put("config", config.to_value());
    }
}

/// The stall settings to change with [`SetStallConfig`]; the others keep their value.
///
/// ```
/// use std::time::Duration;
/// use autobatch_core::ops::StallConfigUpdate;
/// let u = StallConfigUpdate::new().max_stalls(1).stall_interval(Duration::from_secs(5));
/// assert_eq!(u.max_stalls, Some(1));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct StallConfigUpdate {
    /// Sets [`StallConfig::enabled`].
    pub enabled: Option<bool>,
    /// Sets [`StallConfig::stall_interval`].
    pub stall_interval: Option<Duration>,
    /// Sets [`StallConfig::max_stalls`].
    pub max_stalls: Option<u64>,
    /// Sets [`StallConfig::grace_period`].
    pub grace_period: Option<Duration>,
}

impl StallConfigUpdate {
    /// Changes nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets [`enabled`](Self::enabled).
    pub fn enabled(mut self, yes: bool) -> Self {
        self.enabled = Some(yes);
        self
    }

    /// Sets [`stall_interval`](Self::stall_interval).
    pub fn stall_interval(mut self, d: Duration) -> Self {
        self.stall_interval = Some(d);
        self
    }

    /// Sets [`max_stalls`](Self::max_stalls).
    pub fn max_stalls(mut self, n: u64) -> Self {
        self.max_stalls = Some(n);
        self
    }

    /// Sets [`grace_period`](Self::grace_period).
    pub fn grace_period(mut self, d: Duration) -> Self {
        self.grace_period = Some(d);
        self
    }

    /// `config` with this update applied.
    pub fn apply(&self, mut config: StallConfig) -> StallConfig {
        if let Some(x) = self.enabled {
            config.enabled = x;
        }
        if let Some(x) = self.stall_interval {
            config.stall_interval = x;
        }
        if let Some(x) = self.max_stalls {
            config.max_stalls = x;
        }
        if let Some(x) = self.grace_period {
            config.grace_period = x;
        }
        config
    }

    fn to_value(&self) -> Value {
        let mut f = Fields::default();
        f.put_opt("enabled", self.enabled)
            .put_opt("stallInterval", self.stall_interval.map(ms))
            .put_opt("maxStalls", self.max_stalls)
            .put_opt("gracePeriod", self.grace_period.map(ms));
        f.into_value()
    }

    fn from_value(v: &Value) -> StallConfigUpdate {
        StallConfigUpdate {
            enabled: v.get("enabled").and_then(Value::as_bool),
            stall_interval: finite(v, "stallInterval").map(span),
            max_stalls: finite(v, "maxStalls").map(|f| f.max(0.0) as u64),
            grace_period: finite(v, "gracePeriod").map(span),
        }
    }
}

/// `SetStallConfig`: changes some of a queue's stall settings. Idempotent: replayed.
///
/// ```
/// use autobatch_core::ops::{Operation, SetStallConfig, StallConfigUpdate};
/// let op = SetStallConfig::new("emails", StallConfigUpdate::new().enabled(false));
/// assert!(op.to_body().get("config").is_some());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SetStallConfig {
    /// Queue name.
    pub queue: String,
    /// What to change.
    pub config: StallConfigUpdate,
}

impl SetStallConfig {
    /// Applies `config` to `queue`.
    pub fn new(queue: impl Into<String>, config: StallConfigUpdate) -> Self {
        SetStallConfig {
            queue: queue.into(),
            config,
        }
    }
}

impl Operation for SetStallConfig {
    const NAME: &'static str = "SetStallConfig";
    type Output = ();

    const REPLAY: Replay = Replay::Safe;

    fn write_fields(&self, fields: &mut Fields) {
        fields
            .put("queue", self.queue.as_str())
            .put("config", self.config.to_value());
    }

    fn read_reply(_: &Value) -> Result<(), ProtocolError> {
        Ok(())
    }
}
impl crate::wire::server::ServeOperation for SetStallConfig {
    fn read_request(request: &Value) -> Result<Self, CommandError> {
        Ok(SetStallConfig::new(
            req_queue_raw(request),
            request
                .get("config")
                .map(StallConfigUpdate::from_value)
                .unwrap_or_default(),
        ))
    }

    fn write_reply(_: &(), fields: &mut Fields) {
        fields.put("id", Value::Undefined);
    }
}

// ------------------------------------------------------------------------ groups

/// bunqueue's checks of a group command (`validate` in its groups handler): the queue name,
/// then the group id, required.
fn check_group(queue: &str, group_id: &str) -> Result<(), ValidationError> {
    validate_queue_name(queue)?;
    crate::wire::check_group_id(group_id)
}

/// Reads `queue` and `groupId` of a group command, validated as bunqueue does.
fn req_group(request: &Value) -> Result<(String, String), ValidationError> {
    let queue = request
        .get("queue")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    validate_queue_name(&queue)?;
    let group = match request.get("groupId") {
        None | Some(Value::Undefined) => {
            return Err(ValidationError::new("groupId", "groupId is required"))
        }
        Some(Value::Str(g)) => g.clone(),
        Some(_) => return Err(ValidationError::new("groupId", "groupId must be a string")),
    };
    crate::wire::check_group_id(&group)?;
    Ok((queue, group))
}

/// bunqueue's `validatePositiveSafeInteger` on a request field.
fn req_positive(request: &Value, field: &'static str) -> Result<u64, ValidationError> {
    let bad = || ValidationError::new(field, format!("{field} must be a positive safe integer"));
    match request.get(field) {
        Some(x @ (Value::Int(_) | Value::F64(_))) => match x.as_f64() {
            Some(f) if f.fract() == 0.0 && f >= 1.0 && f <= MAX_SAFE_INTEGER as f64 => Ok(f as u64),
            _ => Err(bad()),
        },
        _ => Err(bad()),
    }
}

fn check_positive(field: &'static str, v: u64) -> Result<(), ValidationError> {
    if v == 0 || v > MAX_SAFE_INTEGER as u64 {
        return Err(ValidationError::new(
            field,
            format!("{field} must be a positive safe integer"),
        ));
    }
    Ok(())
}

/// A group's rate limit: `max` jobs per `duration`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroupRateLimit {
    /// Jobs per window.
    pub max: u64,
    /// The window.
    pub duration: Duration,
}

impl GroupRateLimit {
    /// `max` jobs per `duration`.
    pub fn new(max: u64, duration: Duration) -> Self {
        GroupRateLimit { max, duration }
    }
}

/// A `removed` answer, a count (0 or 1) on the wire.
fn removed(v: &Value) -> Result<bool, ProtocolError> {
    match reply_field(v, "removed")? {
        Value::Bool(b) => Ok(*b),
        x => x.as_f64().map(|f| f > 0.0).ok_or(ProtocolError::BadField {
            field: "removed",
            problem: "not a number",
        }),
    }
}

/// A command on one group of a queue that carries only `queue` and `groupId`.
macro_rules! group_command {
    (
        $(#[$doc:meta])* $name:ident, $cmd:literal, $out:ty, $replay:expr,
        read: |$r:ident| $read:expr,
        write: |$o:ident, $f:ident| $write:expr $(,)?
    ) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq)]
        #[non_exhaustive]
        pub struct $name {
            /// Queue name.
            pub queue: String,
            /// The group's id.
            pub group_id: String,
        }

        impl $name {
            /// The command for group `group_id` of `queue`.
            pub fn new(queue: impl Into<String>, group_id: impl Into<String>) -> Self {
                $name {
                    queue: queue.into(),
                    group_id: group_id.into(),
                }
            }
        }

        impl Operation for $name {
            const NAME: &'static str = $cmd;
            type Output = $out;

            const REPLAY: Replay = $replay;

            fn write_fields(&self, fields: &mut Fields) {
                fields
                    .put("groupId", self.group_id.as_str())
                    .put("queue", self.queue.as_str());
            }

            fn read_reply($r: &Value) -> Result<$out, ProtocolError> {
                $read
            }

            fn validate(&self) -> Result<(), ValidationError> {
                check_group(&self.queue, &self.group_id)
            }
        }
        impl crate::wire::server::ServeOperation for $name {

            fn read_request(request: &Value) -> Result<Self, CommandError> {
                let (queue, group) = req_group(request)?;
                Ok($name::new(queue, group))
            }

            fn write_reply($o: &$out, $f: &mut Fields) {
                $write
            }
        }
    };
}

group_command! {
    /// `GetGroupJobsCount`: jobs of the group waiting to run. A read: replayed.
    ///
    /// ```
    /// use autobatch_core::ops::{GetGroupJobsCount, Operation};
    /// assert!(GetGroupJobsCount::new("emails", "").validate().is_err());
    /// ```
    GetGroupJobsCount, "GetGroupJobsCount", u64, Replay::Safe,
    read: |r| reply_u64(reply_data(r)?, "count"),
    write: |n, f| put_data(f, "count", *n),
}

group_command! {
    /// `GetGroupActiveCount`: jobs of the group active now. A read: replayed.
    ///
    /// ```
    /// use autobatch_core::ops::{GetGroupActiveCount, Operation};
    /// assert_eq!(GetGroupActiveCount::NAME, "GetGroupActiveCount");
    /// ```
    GetGroupActiveCount, "GetGroupActiveCount", u64, Replay::Safe,
    read: |r| reply_u64(reply_data(r)?, "count"),
    write: |n, f| put_data(f, "count", *n),
}

group_command! {
    /// `GetGroupRateLimit`: the group's own rate limit, if it has one. A read: replayed.
    ///
    /// ```
    /// use autobatch_core::ops::{GetGroupRateLimit, Operation};
    /// use autobatch_core::wire::Value;
    /// let reply = Value::map([("ok", Value::from(true)), ("data", Value::map([("limit", Value::Nil)]))]);
    /// assert_eq!(GetGroupRateLimit::read_reply(&reply), Ok(None));
    /// ```
    GetGroupRateLimit, "GetGroupRateLimit", Option<GroupRateLimit>, Replay::Safe,
    read: |r| {
        let data = reply_data(r)?;
        Ok(reply_opt(data, "limit").map(|l| GroupRateLimit {
            max: opt_u64(l, "max").unwrap_or(0),
            duration: opt_f64(l, "duration").map_or(Duration::ZERO, span),
        }))
    },
    write: |l, f| put_data(
        f,
        "limit",
        l.map_or(Value::Nil, |l| Value::map([
            ("max", Value::from(l.max)),
            ("duration", ms(l.duration)),
        ])),
    ),
}

group_command! {
    /// `RemoveGroupRateLimit`: drops the group's own rate limit; answers whether it had one.
    /// Not replayed: a second run would answer `false`.
    ///
    /// ```
    /// use autobatch_core::ops::{Operation, RemoveGroupRateLimit};
    /// use autobatch_core::wire::Value;
    /// let reply = Value::map([("ok", Value::from(true)), ("data", Value::map([("removed", Value::Int(1))]))]);
    /// assert_eq!(RemoveGroupRateLimit::read_reply(&reply), Ok(true));
    /// ```
    RemoveGroupRateLimit, "RemoveGroupRateLimit", bool, Replay::NotSafe,
    read: |r| removed(reply_data(r)?),
    write: |b, f| put_data(f, "removed", i64::from(*b)),
}

group_command! {
    /// `GetGroupConcurrency`: the group's own concurrency limit, if it has one. A read:
    /// replayed.
    ///
    /// ```
    /// use autobatch_core::ops::{GetGroupConcurrency, Operation};
    /// use autobatch_core::wire::Value;
    /// let reply = Value::map([("ok", Value::from(true)), ("data", Value::map([("concurrency", Value::Int(2))]))]);
    /// assert_eq!(GetGroupConcurrency::read_reply(&reply), Ok(Some(2)));
    /// ```
    GetGroupConcurrency, "GetGroupConcurrency", Option<u64>, Replay::Safe,
    read: |r| Ok(opt_u64(reply_data(r)?, "concurrency")),
    write: |c, f| put_data(f, "concurrency", c.map_or(Value::Nil, Value::from)),
}

group_command! {
    /// `RemoveGroupConcurrency`: drops the group's own concurrency limit; answers whether it
    /// had one. Not replayed: a second run would answer `false`.
    ///
    /// ```
    /// use autobatch_core::ops::{Operation, RemoveGroupConcurrency};
    /// assert_eq!(RemoveGroupConcurrency::NAME, "RemoveGroupConcurrency");
    /// ```
    RemoveGroupConcurrency, "RemoveGroupConcurrency", bool, Replay::NotSafe,
    read: |r| removed(reply_data(r)?),
    write: |b, f| put_data(f, "removed", i64::from(*b)),
}

group_command! {
    /// `PauseGroup`: workers get no more jobs of this group until [`ResumeGroup`]; answers
    /// whether it changed anything. Not replayed: a second run would answer `false`.
    ///
    /// ```
    /// use autobatch_core::ops::{Operation, PauseGroup};
    /// use autobatch_core::wire::Value;
    /// let reply = Value::map([("ok", Value::from(true)), ("data", Value::map([("changed", Value::from(true))]))]);
    /// assert_eq!(PauseGroup::read_reply(&reply), Ok(true));
    /// ```
    PauseGroup, "PauseGroup", bool, Replay::NotSafe,
    read: |r| super::read::reply_bool(reply_data(r)?, "changed"),
    write: |b, f| put_data(f, "changed", *b),
}

group_command! {
    /// `ResumeGroup`: undoes [`PauseGroup`]; answers whether it changed anything. Not
    /// replayed: a second run would answer `false`.
    ///
    /// ```
    /// use autobatch_core::ops::{Operation, ResumeGroup};
    /// assert_eq!(ResumeGroup::NAME, "ResumeGroup");
    /// ```
    ResumeGroup, "ResumeGroup", bool, Replay::NotSafe,
    read: |r| super::read::reply_bool(reply_data(r)?, "changed"),
    write: |b, f| put_data(f, "changed", *b),
}

group_command! {
    /// `IsGroupPaused`: whether the group is paused. A read: replayed.
    ///
    /// ```
    /// use autobatch_core::ops::{IsGroupPaused, Operation};
    /// use autobatch_core::wire::Value;
    /// let reply = Value::map([("ok", Value::from(true)), ("data", Value::map([("paused", Value::from(false))]))]);
    /// assert_eq!(IsGroupPaused::read_reply(&reply), Ok(false));
    /// ```
    IsGroupPaused, "IsGroupPaused", bool, Replay::Safe,
    read: |r| super::read::reply_bool(reply_data(r)?, "paused"),
    write: |b, f| put_data(f, "paused", *b),
}

/// `SetGroupRateLimit`: at most `max` jobs of the group start per `duration`. Both must be
/// positive safe integers (`max must be a positive safe integer`, …). Idempotent: replayed.
///
/// ```
/// use std::time::Duration;
/// use autobatch_core::ops::{GroupRateLimit, Operation, SetGroupRateLimit};
/// let op = SetGroupRateLimit::new("emails", "tenant-1", GroupRateLimit::new(0, Duration::from_secs(1)));
/// assert_eq!(op.validate().unwrap_err().message, "max must be a positive safe integer");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SetGroupRateLimit {
    /// Queue name.
    pub queue: String,
    /// The group's id.
    pub group_id: String,
    /// The limit.
    pub limit: GroupRateLimit,
}

impl SetGroupRateLimit {
    /// Limits group `group_id` of `queue` to `limit`.
    pub fn new(
        queue: impl Into<String>,
        group_id: impl Into<String>,
        limit: GroupRateLimit,
    ) -> Self {
        SetGroupRateLimit {
            queue: queue.into(),
            group_id: group_id.into(),
            limit,
        }
    }
}

impl Operation for SetGroupRateLimit {
    const NAME: &'static str = "SetGroupRateLimit";
    type Output = ();

    const REPLAY: Replay = Replay::Safe;

    fn write_fields(&self, fields: &mut Fields) {
        fields
            .put("groupId", self.group_id.as_str())
            .put("max", self.limit.max)
            .put("duration", ms(self.limit.duration))
            .put("queue", self.queue.as_str());
    }

    fn read_reply(_: &Value) -> Result<(), ProtocolError> {
        Ok(())
    }

    fn validate(&self) -> Result<(), ValidationError> {
        check_group(&self.queue, &self.group_id)?;
        check_positive("max", self.limit.max)?;
        check_positive("duration", crate::wire::millis(self.limit.duration) as u64)
    }
}
impl crate::wire::server::ServeOperation for SetGroupRateLimit {
    fn read_request(request: &Value) -> Result<Self, CommandError> {
        let (queue, group) = req_group(request)?;
        let max = req_positive(request, "max")?;
        let duration = req_positive(request, "duration")?;
        Ok(SetGroupRateLimit::new(
            queue,
            group,
            GroupRateLimit::new(max, Duration::from_millis(duration)),
        ))
    }

    fn write_reply(_: &(), fields: &mut Fields) {
        fields.put("id", Value::Undefined);
    }
}

/// `SetGroupConcurrency`: at most `concurrency` jobs of the group active at once (a positive
/// safe integer). Idempotent: replayed.
///
/// ```
/// use autobatch_core::ops::{Operation, SetGroupConcurrency};
/// assert!(SetGroupConcurrency::new("emails", "tenant-1", 1).validate().is_ok());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SetGroupConcurrency {
    /// Queue name.
    pub queue: String,
    /// The group's id.
    pub group_id: String,
    /// Most active jobs of the group.
    pub concurrency: u64,
}

impl SetGroupConcurrency {
    /// At most `concurrency` active jobs of group `group_id` of `queue`.
    pub fn new(queue: impl Into<String>, group_id: impl Into<String>, concurrency: u64) -> Self {
        SetGroupConcurrency {
            queue: queue.into(),
            group_id: group_id.into(),
            concurrency,
        }
    }
}

impl Operation for SetGroupConcurrency {
    const NAME: &'static str = "SetGroupConcurrency";
    type Output = ();

    const REPLAY: Replay = Replay::Safe;

    fn write_fields(&self, fields: &mut Fields) {
        fields
            .put("groupId", self.group_id.as_str())
            .put("concurrency", self.concurrency)
            .put("queue", self.queue.as_str());
    }

    fn read_reply(_: &Value) -> Result<(), ProtocolError> {
        Ok(())
    }

    fn validate(&self) -> Result<(), ValidationError> {
        check_group(&self.queue, &self.group_id)?;
        check_positive("concurrency", self.concurrency)
    }
}
impl crate::wire::server::ServeOperation for SetGroupConcurrency {
    fn read_request(request: &Value) -> Result<Self, CommandError> {
        let (queue, group) = req_group(request)?;
        let concurrency = req_positive(request, "concurrency")?;
        Ok(SetGroupConcurrency::new(queue, group, concurrency))
    }

    fn write_reply(_: &(), fields: &mut Fields) {
        fields.put("id", Value::Undefined);
    }
}

/// `GetGroupRateLimitTtl`: how long until the group may start another job, ms (`-2` when it
/// has no window open, as bunqueue answers), optionally as if the limit were `max_jobs`. A
/// read: replayed.
///
/// ```
/// use autobatch_core::ops::{GetGroupRateLimitTtl, Operation};
/// use autobatch_core::wire::Value;
/// let reply = Value::map([("ok", Value::from(true)), ("data", Value::map([("ttl", Value::Int(-2))]))]);
/// assert_eq!(GetGroupRateLimitTtl::read_reply(&reply), Ok(-2));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GetGroupRateLimitTtl {
    /// Queue name.
    pub queue: String,
    /// The group's id.
    pub group_id: String,
    /// Count the window as full at this many jobs.
    pub max_jobs: Option<u64>,
}

impl GetGroupRateLimitTtl {
    /// Asks about group `group_id` of `queue`.
    pub fn new(queue: impl Into<String>, group_id: impl Into<String>) -> Self {
        GetGroupRateLimitTtl {
            queue: queue.into(),
            group_id: group_id.into(),
            max_jobs: None,
        }
    }

    /// Sets [`max_jobs`](Self::max_jobs).
    pub fn max_jobs(mut self, n: u64) -> Self {
        self.max_jobs = Some(n);
        self
    }
}

impl Operation for GetGroupRateLimitTtl {
    const NAME: &'static str = "GetGroupRateLimitTtl";
    type Output = i64;

    const REPLAY: Replay = Replay::Safe;

    fn write_fields(&self, fields: &mut Fields) {
        fields
            .put("groupId", self.group_id.as_str())
            .put_opt("maxJobs", self.max_jobs)
            .put("queue", self.queue.as_str());
    }

    fn read_reply(reply: &Value) -> Result<i64, ProtocolError> {
        super::read::reply_i64(reply_data(reply)?, "ttl")
    }

    fn validate(&self) -> Result<(), ValidationError> {
        check_group(&self.queue, &self.group_id)
    }
}
impl crate::wire::server::ServeOperation for GetGroupRateLimitTtl {
    fn read_request(request: &Value) -> Result<Self, CommandError> {
        let (queue, group) = req_group(request)?;
        Ok(GetGroupRateLimitTtl {
            queue,
            group_id: group,
            max_jobs: opt_u64(request, "maxJobs"),
        })
    }

    fn write_reply(ttl: &i64, fields: &mut Fields) {
        put_data(fields, "ttl", *ttl);
    }
}

/// `RateLimitGroup`: holds the group back for `duration` (what a worker does when a job of
/// the group hits an external rate limit); a positive safe integer of ms. Not replayed: a
/// second run would restart the window.
///
/// ```
/// use std::time::Duration;
/// use autobatch_core::ops::{Operation, RateLimitGroup};
/// assert!(RateLimitGroup::new("emails", "tenant-1", Duration::from_secs(5)).validate().is_ok());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RateLimitGroup {
    /// Queue name.
    pub queue: String,
    /// The group's id.
    pub group_id: String,
    /// How long.
    pub duration: Duration,
}

impl RateLimitGroup {
    /// Holds group `group_id` of `queue` back for `duration`.
    pub fn new(queue: impl Into<String>, group_id: impl Into<String>, duration: Duration) -> Self {
        RateLimitGroup {
            queue: queue.into(),
            group_id: group_id.into(),
            duration,
        }
    }
}

impl Operation for RateLimitGroup {
    const NAME: &'static str = "RateLimitGroup";
    type Output = ();

    const REPLAY: Replay = Replay::NotSafe;

    fn write_fields(&self, fields: &mut Fields) {
        fields
            .put("queue", self.queue.as_str())
            .put("groupId", self.group_id.as_str())
            .put("duration", ms(self.duration));
    }

    fn read_reply(_: &Value) -> Result<(), ProtocolError> {
        Ok(())
    }

    fn validate(&self) -> Result<(), ValidationError> {
        check_group(&self.queue, &self.group_id)?;
        check_positive("duration", crate::wire::millis(self.duration) as u64)
    }
}
impl crate::wire::server::ServeOperation for RateLimitGroup {
    fn read_request(request: &Value) -> Result<Self, CommandError> {
        let (queue, group) = req_group(request)?;
        let duration = req_positive(request, "duration")?;
        Ok(RateLimitGroup::new(
            queue,
            group,
            Duration::from_millis(duration),
        ))
    }

    fn write_reply(_: &(), fields: &mut Fields) {
        fields.put("id", Value::Undefined);
    }
}

/// `GetGroupsJobsCount`: jobs waiting in any group of the queue. A read: replayed. (The TS
/// client sends a `maxCount` the server ignores.)
///
/// ```
/// use autobatch_core::ops::{GetGroupsJobsCount, Operation};
/// assert_eq!(GetGroupsJobsCount::NAME, "GetGroupsJobsCount");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GetGroupsJobsCount {
    /// Queue name.
    pub queue: String,
    /// Sent as the TS client sends it; ignored by bunqueue 2.9.5.
    pub max_count: Option<u64>,
}

impl GetGroupsJobsCount {
    /// Asks about `queue`.
    pub fn new(queue: impl Into<String>) -> Self {
        GetGroupsJobsCount {
            queue: queue.into(),
            max_count: None,
        }
    }
}

impl Operation for GetGroupsJobsCount {
    const NAME: &'static str = "GetGroupsJobsCount";
    type Output = u64;

    const REPLAY: Replay = Replay::Safe;

    fn write_fields(&self, fields: &mut Fields) {
        fields
            .put_opt("maxCount", self.max_count)
            .put("queue", self.queue.as_str());
    }

    fn read_reply(reply: &Value) -> Result<u64, ProtocolError> {
        reply_u64(reply_data(reply)?, "count")
    }

    fn validate(&self) -> Result<(), ValidationError> {
        validate_queue_name(&self.queue)
    }
}
impl crate::wire::server::ServeOperation for GetGroupsJobsCount {
    fn read_request(request: &Value) -> Result<Self, CommandError> {
        let queue = request
            .get("queue")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        validate_queue_name(&queue)?;
        Ok(GetGroupsJobsCount {
            queue,
            max_count: opt_u64(request, "maxCount"),
        })
    }

    fn write_reply(n: &u64, fields: &mut Fields) {
        put_data(fields, "count", *n);
    }
}
