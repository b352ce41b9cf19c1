//! Every command the broker serves past the hot path, in one table: its wire name (its op's
//! [`Operation::NAME`]) and its handler in `crate::ops`.
//!
//! The hot path never looks here: the commands core decodes into a typed
//! [`Command`](autobatch_core::wire::Command) (PUSH, PUSHB, PULL, PULLB, ACK, ACKB, FAIL,
//! GetJob, …) are served by `dispatch::run` from their variant. Only a `Command::Other` is
//! routed, by one binary search over [`ROUTES`] (sorted by name, checked when the crate
//! compiles).
//!
//! A command bunqueue 2.9.5 knows and this broker does not serve is in [`REFUSED`] and refused
//! with [`not_supported`]'s message, never with "Unknown command" (which would say the client
//! is wrong) and never silently.
//!
//! A command's entry is one line: `typed Pause => control::pause,` for a handler that answers
//! the op's output (the op writes the reply). The other kinds are for handlers that write
//! their own reply (`own`), that see the raw body beside the typed request (`body`), that read
//! the raw body only (`raw`, `named` when core has no typed op), or that wait before they
//! answer (`waits`, `waits_raw`).

use std::future::Future;
use std::pin::Pin;

use autobatch_core::ops::{
    AddLog, Cancel, ChangeDelay, ChangePriority, Clean, ClearConcurrency, ClearLogs, CronDelete,
    CronGet, CronList, CronUpsert, Discard, Dlq, Drain, ExtendLock, ExtendLocks, GetChildrenValues,
    GetCountsPerPriority, GetDeduplicationJobId, GetDlqConfig, GetDlqStats,
    GetFailedChildrenValues, GetGroupActiveCount, GetGroupConcurrency, GetGroupJobsCount,
    GetGroupRateLimit, GetGroupRateLimitTtl, GetGroupsJobsCount, GetIgnoredChildrenFailures,
    GetJobByCustomId, GetJobs, GetLogs, GetProgress, GetQueueLimits, GetStallConfig, IsGroupPaused,
    IsPaused, ListQueues, ListWorkers, Metrics, MoveToDelayed, MoveToWait, Obliterate, Operation,
    Pause, PauseGroup, Promote, PromoteJobs, PurgeDlq, PushFlow, RateLimit, RateLimitClear,
    RateLimitGroup, RegisterWorker, RemoveDeduplicationKey, RemoveDlqJob, RemoveGroupConcurrency,
    RemoveGroupRateLimit, RemoveJobDeduplicationKey, Resume, ResumeGroup, RetryCompleted, RetryDlq,
    SetConcurrency, SetDlqConfig, SetGroupConcurrency, SetGroupRateLimit, SetStallConfig, Stats,
    UnregisterWorker, UpdateData, UpdateProgress, WaitJob, WorkerHeartbeat,
};
use autobatch_core::ops::{SubscribeEvents, UnsubscribeEvents};
use autobatch_core::wire::server::ServeOperation;
use autobatch_core::wire::{Response, Value};

use crate::context::{Ctx, Served};
use crate::ops::{
    control, cron, dlq, flow, groups, job, limits, lookup, observe, relink, subscribe, worker,
};

/// The role of an op that the broker serves (reading a request, writing a reply): named here
/// once, so that every generic below asks for it the same way.
pub(crate) trait ServedOp: ServeOperation {}

impl<O: ServeOperation> ServedOp for O {}

/// Reads `body` as an `O`: its validation errors read as bunqueue's.
fn request<O: ServedOp>(body: &Value) -> Served<O> {
    O::read_request(body).map_err(|e| e.to_string())
}

/// The reply the op writes for `output`.
fn reply<O: ServedOp>(output: &O::Output) -> Response {
    Response::Other(O::reply_body(output))
}

/// A handler's future, for the commands that wait (a commit, a job's completion).
pub(crate) type Waiting<'a> = Pin<Box<dyn Future<Output = Served<Response>> + Send + 'a>>;

/// How a route serves its command.
#[derive(Clone, Copy)]
pub(crate) enum Handler {
    /// At once.
    Now(fn(&Ctx<'_>, &Value) -> Served<Response>),
    /// After a wait, holding one of the connection's request slots (as a long-poll does) and
    /// nothing else.
    Waits(for<'a> fn(&'a Ctx<'a>, &'a Value) -> Waiting<'a>),
}

/// One served command.
pub(crate) struct Route {
    /// The wire name (`cmd`).
    pub name: &'static str,
    pub handler: Handler,
}

/// One [`Route`] from its kind, its op (or name) and its handler.
macro_rules! route {
    (typed $op:ty => $serve:expr) => {
        Route {
            name: <$op as Operation>::NAME,
            handler: Handler::Now(|cx, body| {
                let serve: fn(&Ctx<'_>, $op) -> Served<<$op as Operation>::Output> = $serve;
                let out = serve(cx, request::<$op>(body)?)?;
                Ok(reply::<$op>(&out))
            }),
        }
    };
    (own $op:ty => $serve:expr) => {
        Route {
            name: <$op as Operation>::NAME,
            handler: Handler::Now(|cx, body| ($serve)(cx, request::<$op>(body)?)),
        }
    };
    (body $op:ty => $serve:expr) => {
        Route {
            name: <$op as Operation>::NAME,
            handler: Handler::Now(|cx, body| ($serve)(cx, body, request::<$op>(body))),
        }
    };
    (raw $op:ty => $serve:expr) => {
        Route {
            name: <$op as Operation>::NAME,
            handler: Handler::Now($serve),
        }
    };
    (named $name:ident => $serve:expr) => {
        Route {
            name: untyped::$name,
            handler: Handler::Now($serve),
        }
    };
    (waits $op:ty => $serve:expr) => {
        Route {
            name: <$op as Operation>::NAME,
            handler: Handler::Waits(|cx, body| {
                Box::pin(async move {
                    let out = ($serve)(cx, request::<$op>(body)?).await?;
                    Ok(reply::<$op>(&out))
                })
            }),
        }
    };
    (waits_raw $op:ty => $serve:expr) => {
        Route {
            name: <$op as Operation>::NAME,
            handler: Handler::Waits(|cx, body| Box::pin(($serve)(cx, body))),
        }
    };
}

/// The table, from one entry per command.
macro_rules! routes {
    ($($kind:ident $op:tt => $serve:expr,)*) => {
        &[$(route!($kind $op => $serve)),*]
    };
}

/// The wire names of the served commands that have no typed op in `autobatch_core::ops`
/// (autobatch's client does not send them one by one); their handlers read the raw body. A
/// command that has an op but is read from its raw body all the same is a `raw` entry, its
/// handler saying what the op's reading would lose.
mod untyped {
    pub const PROMETHEUS: &str = "Prometheus";
    pub const STORAGE_STATUS: &str = "StorageStatus";
    pub const COMPACT_MEMORY: &str = "CompactMemory";
    pub const TRIM_EVENTS: &str = "TrimEvents";
    pub const LIST_WEBHOOKS: &str = "ListWebhooks";
    pub const REMOVE_WEBHOOK: &str = "RemoveWebhook";
    pub const SET_WEBHOOK_ENABLED: &str = "SetWebhookEnabled";
    pub const UPDATE_PARENT: &str = "UpdateParent";
    pub const MOVE_TO_WAITING_CHILDREN: &str = "MoveToWaitingChildren";
    pub const JOB_HEARTBEAT: &str = "JobHeartbeat";
    pub const JOB_HEARTBEAT_B: &str = "JobHeartbeatB";
    pub const REMOVE_CHILD_DEPENDENCY: &str = "RemoveChildDependency";
    pub const REMOVE_UNPROCESSED_CHILDREN: &str = "RemoveUnprocessedChildren";
}

/// Every command served past the hot path, sorted by wire name (bytewise), each once; an op
/// whose type is not named as its command has its wire name beside it.
pub(crate) const ROUTES: &[Route] = routes! {
    typed AddLog => job::add_log,
    typed Cancel => control::cancel,
    typed ChangeDelay => control::change_delay,
    typed ChangePriority => control::change_priority,
    typed Clean => control::clean,
    raw ClearConcurrency => limits::clear_concurrency,
    typed ClearLogs => job::clear_logs,
    named COMPACT_MEMORY => observe::compact_memory,
    body CronUpsert => cron::upsert, // Cron
    own CronDelete => cron::delete,
    own CronGet => cron::get,
    own CronList => cron::list,
    typed Discard => control::discard,
    own Dlq => dlq::list,
    typed Drain => control::drain,
    typed ExtendLock => job::extend_lock,
    typed ExtendLocks => job::extend_locks,
    typed GetChildrenValues => flow::children_values,
    typed GetCountsPerPriority => lookup::get_counts_per_priority,
    typed GetDeduplicationJobId => lookup::get_deduplication_job_id,
    typed GetDlqConfig => dlq::get_config,
    typed GetDlqStats => dlq::stats,
    typed GetFailedChildrenValues => flow::failed_children_values,
    typed GetGroupActiveCount => limits::group_active_count,
    typed GetGroupConcurrency => groups::get_concurrency,
    typed GetGroupJobsCount => limits::group_jobs_count,
    typed GetGroupRateLimit => groups::get_rate_limit,
    raw GetGroupRateLimitTtl => groups::rate_limit_ttl,
    typed GetGroupsJobsCount => limits::groups_jobs_count,
    typed GetIgnoredChildrenFailures => flow::ignored_children_failures,
    own GetJobByCustomId => lookup::get_job_by_custom_id,
    own GetJobs => lookup::get_jobs,
    typed GetLogs => job::get_logs,
    typed GetProgress => job::get_progress,
    raw GetQueueLimits => limits::get_queue_limits,
    typed GetStallConfig => limits::get_stall_config,
    typed WorkerHeartbeat => worker::heartbeat, // Heartbeat
    typed IsGroupPaused => groups::is_paused,
    typed IsPaused => |cx, op| Ok(cx.state().jobs().is_paused(&op.queue)),
    named JOB_HEARTBEAT => job::heartbeat,
    named JOB_HEARTBEAT_B => job::heartbeat_batch,
    typed ListQueues => lookup::list_queues,
    named LIST_WEBHOOKS => observe::list_webhooks,
    typed ListWorkers => worker::list,
    own Metrics => observe::metrics,
    typed MoveToDelayed => control::move_to_delayed,
    typed MoveToWait => control::move_to_wait,
    named MOVE_TO_WAITING_CHILDREN => relink::move_to_waiting_children,
    typed Obliterate => control::obliterate,
    waits_raw PushFlow => flow::push_flow, // PUSHF
    typed Pause => control::pause,
    typed PauseGroup => groups::pause,
    typed UpdateProgress => job::update_progress, // Progress
    named PROMETHEUS => observe::prometheus,
    typed Promote => control::promote,
    typed PromoteJobs => control::promote_jobs,
    typed PurgeDlq => dlq::purge,
    raw RateLimit => limits::rate_limit,
    raw RateLimitClear => limits::rate_limit_clear,
    typed RateLimitGroup => groups::rate_limit,
    typed RegisterWorker => worker::register,
    named REMOVE_CHILD_DEPENDENCY => flow::remove_child_dependency,
    typed RemoveDeduplicationKey => control::remove_deduplication_key,
    typed RemoveDlqJob => dlq::remove_job,
    typed RemoveGroupConcurrency => groups::remove_concurrency,
    typed RemoveGroupRateLimit => groups::remove_rate_limit,
    typed RemoveJobDeduplicationKey => control::remove_job_deduplication_key,
    named REMOVE_UNPROCESSED_CHILDREN => flow::remove_unprocessed_children,
    named REMOVE_WEBHOOK => observe::remove_webhook,
    typed Resume => control::resume,
    typed ResumeGroup => groups::resume,
    typed RetryCompleted => control::retry_completed,
    typed RetryDlq => dlq::retry,
    raw SetConcurrency => limits::set_concurrency,
    raw SetDlqConfig => dlq::set_config,
    typed SetGroupConcurrency => groups::set_concurrency,
    typed SetGroupRateLimit => groups::set_rate_limit,
    typed SetStallConfig => limits::set_stall_config,
    named SET_WEBHOOK_ENABLED => observe::set_webhook_enabled,
    typed Stats => observe::stats,
    named STORAGE_STATUS => observe::storage_status,
    typed SubscribeEvents => subscribe::subscribe,
    named TRIM_EVENTS => observe::trim_events,
    typed UnregisterWorker => worker::unregister,
    typed UnsubscribeEvents => subscribe::unsubscribe,
    typed UpdateData => job::update_data, // Update
    named UPDATE_PARENT => relink::update_parent,
    waits WaitJob => flow::wait_job,
};

/// Whether `a` sorts strictly before `b`, bytewise (as `str::cmp`), in a const context.
const fn before(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut i = 0;
    while i < a.len() && i < b.len() {
        if a[i] != b[i] {
            return a[i] < b[i];
        }
        i += 1;
    }
    a.len() < b.len()
}

/// Whether `routes` is sorted by name with no name twice: what the binary search needs.
const fn strictly_sorted(routes: &[Route]) -> bool {
    let mut i = 1;
    while i < routes.len() {
        if !before(routes[i - 1].name, routes[i].name) {
            return false;
        }
        i += 1;
    }
    true
}

const _: () = assert!(
    strictly_sorted(ROUTES),
    "ROUTES must be sorted by wire name (bytewise), each name once"
);

/// The handler of `cmd`, if the broker serves it past the hot path.
pub(crate) fn find(cmd: &str) -> Option<Handler> {
    ROUTES
        .binary_search_by(|r| r.name.cmp(cmd))
        .ok()
        .map(|i| ROUTES[i].handler)
}

/// Serves a command routed by name (a `Command::Other`).
pub(crate) async fn serve(cx: &Ctx<'_>, cmd: &str, body: &Value) -> Served<Response> {
    match find(cmd) {
        Some(Handler::Now(serve)) => serve(cx, body),
        Some(Handler::Waits(serve)) => serve(cx, body).await,
        None => Err(not_supported(cmd)),
    }
}

/// The commands bunqueue 2.9.5's TCP handler knows (its `handler-routes`) that this broker
/// does not serve: adding a webhook (it would call out over HTTP) and the dashboards.
pub(crate) const REFUSED: &[&str] = &[
    "AddWebhook",
    "DashboardOverview",
    "DashboardQueue",
    "DashboardQueues",
];

/// The refusal for a command: "not supported" for one bunqueue knows, bunqueue's own
/// "Unknown command" otherwise.
pub(crate) fn not_supported(cmd: &str) -> String {
    if REFUSED.contains(&cmd) {
        format!("{cmd} is not supported by autobatch-broker (see its README section)")
    } else {
        format!("Unknown command: {cmd}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use autobatch_core::wire::server::DecodeCommand;
    use autobatch_core::wire::Command;

    /// Every command bunqueue 2.9.5's TCP handler knows (its `handler-routes`).
    const BUNQUEUE_2_9_5: &[&str] = &[
        "ACK",
        "ACKB",
        "AddLog",
        "AddWebhook",
        "Auth",
        "Cancel",
        "ChangeDelay",
        "ChangePriority",
        "Clean",
        "ClearConcurrency",
        "ClearLogs",
        "CompactMemory",
        "Count",
        "Cron",
        "CronDelete",
        "CronGet",
        "CronList",
        "DashboardOverview",
        "DashboardQueue",
        "DashboardQueues",
        "Discard",
        "Dlq",
        "Drain",
        "ExtendLock",
        "ExtendLocks",
        "FAIL",
        "GetChildrenValues",
        "GetCountsPerPriority",
        "GetDeduplicationJobId",
        "GetDlqConfig",
        "GetDlqStats",
        "GetFailedChildrenValues",
        "GetGroupActiveCount",
        "GetGroupConcurrency",
        "GetGroupJobsCount",
        "GetGroupRateLimit",
        "GetGroupRateLimitTtl",
        "GetGroupsJobsCount",
        "GetIgnoredChildrenFailures",
        "GetJob",
        "GetJobByCustomId",
        "GetJobCounts",
        "GetJobs",
        "GetLogs",
        "GetProgress",
        "GetQueueLimits",
        "GetResult",
        "GetStallConfig",
        "GetState",
        "Heartbeat",
        "Hello",
        "IsGroupPaused",
        "IsPaused",
        "JobHeartbeat",
        "JobHeartbeatB",
        "ListQueues",
        "ListWebhooks",
        "ListWorkers",
        "Metrics",
        "MoveToDelayed",
        "MoveToWait",
        "MoveToWaitingChildren",
        "Obliterate",
        "PULL",
        "PULLB",
        "PUSH",
        "PUSHB",
        "PUSHF",
        "Pause",
        "PauseGroup",
        "Ping",
        "Progress",
        "Prometheus",
        "Promote",
        "PromoteJobs",
        "PurgeDlq",
        "RateLimit",
        "RateLimitClear",
        "RateLimitGroup",
        "RegisterWorker",
        "RemoveChildDependency",
        "RemoveDeduplicationKey",
        "RemoveDlqJob",
        "RemoveGroupConcurrency",
        "RemoveGroupRateLimit",
        "RemoveJobDeduplicationKey",
        "RemoveUnprocessedChildren",
        "RemoveWebhook",
        "Resume",
        "ResumeGroup",
        "RetryCompleted",
        "RetryDlq",
        "SetConcurrency",
        "SetDlqConfig",
        "SetGroupConcurrency",
        "SetGroupRateLimit",
        "SetStallConfig",
        "SetWebhookEnabled",
        "Stats",
        "StorageStatus",
        "SubscribeEvents",
        "TrimEvents",
        "UnregisterWorker",
        "UnsubscribeEvents",
        "Update",
        "UpdateParent",
        "WaitJob",
    ];

    /// Whether core decodes `cmd` into a typed `Command` (served by `dispatch::run` from its
    /// variant), rather than a `Command::Other` routed here. A request refused for a missing
    /// field was decoded as typed too.
    fn decoded_by_core(cmd: &str) -> bool {
        let body = Value::map([("cmd", Value::from(cmd))]);
        !matches!(Command::decode(&body).1, Ok(Command::Other { .. }))
    }

    #[test]
    fn served_and_refused_cover_bunqueue_exactly_once() {
        let routed: Vec<&str> = ROUTES.iter().map(|r| r.name).collect();
        let mut all: Vec<&str> = routed.iter().chain(REFUSED).copied().collect();
        all.extend(BUNQUEUE_2_9_5.iter().filter(|c| decoded_by_core(c)));
        all.sort_unstable();
        let mut seen = all.clone();
        seen.dedup();
        assert_eq!(
            all, seen,
            "a command both routed, refused or decoded by core"
        );
        assert_eq!(all, BUNQUEUE_2_9_5, "served ∪ refused is bunqueue's list");
    }

    #[test]
    fn the_hot_path_is_not_routed() {
        for cmd in ["PUSH", "PUSHB", "PULL", "PULLB", "ACK", "ACKB", "FAIL"] {
            assert!(decoded_by_core(cmd), "{cmd} is a typed Command");
            assert!(find(cmd).is_none(), "{cmd} is in the table");
        }
        let routed: Vec<&str> = ROUTES
            .iter()
            .map(|r| r.name)
            .filter(|c| decoded_by_core(c))
            .collect();
        assert_eq!(
            routed,
            Vec::<&str>::new(),
            "routed though core decodes them"
        );
    }

    #[test]
    fn every_route_is_found_and_nothing_else() {
        for r in ROUTES {
            assert!(find(r.name).is_some(), "{}", r.name);
        }
        for cmd in ["", "pause", "Pause ", "Nonsense", "ZZZ", "AAA"] {
            assert!(find(cmd).is_none(), "{cmd:?}");
        }
        assert!(REFUSED.iter().all(|c| find(c).is_none()));
    }

    #[test]
    fn refusals_name_the_command() {
        assert_eq!(
            not_supported("AddWebhook"),
            "AddWebhook is not supported by autobatch-broker (see its README section)"
        );
        assert_eq!(not_supported("Nonsense"), "Unknown command: Nonsense");
    }

    #[test]
    fn sorting_is_bytewise() {
        assert!(before("A", "B") && before("PUSHF", "Pause") && before("Get", "GetJob"));
        assert!(!before("Pause", "Pause") && !before("b", "B"));
    }
}
