//! The typed operations of [`autobatch_core::ops`], served: one module per domain, each
//! answering the commands it implements and leaving the rest to the refusal below.
//!
//! A command bunqueue 2.9.5 knows and this broker does not serve is refused with
//! [`not_supported`]'s message, never with "Unknown command" (which would say the client is
//! wrong) and never silently.

use autobatch_core::wire::server::ServeOperation;
use autobatch_core::wire::{Response, Value};

use crate::dispatch::{Conn, Shared};

mod control;
mod cron;
mod dlq;
pub(crate) mod flow;
mod job;
mod limits;
mod lookup;

/// Serves `cmd` if one of the domain modules implements it.
pub(crate) fn serve(
    shared: &Shared,
    conn: &Conn,
    cmd: &str,
    body: &Value,
    now: f64,
) -> Option<Result<Response, String>> {
    control::serve(shared, conn, cmd, body, now)
        .or_else(|| lookup::serve(shared, conn, cmd, body, now))
        .or_else(|| dlq::serve(shared, conn, cmd, body, now))
        .or_else(|| flow::serve(shared, conn, cmd, body, now))
        .or_else(|| limits::serve(shared, conn, cmd, body, now))
        .or_else(|| cron::serve(shared, conn, cmd, body, now))
        .or_else(|| job::serve(shared, conn, cmd, body, now))
}

/// Reads `body` as an `O`, runs `f` on it, and writes its reply: the request's validation
/// errors read as bunqueue's.
pub(crate) fn answer<O: ServeOperation>(
    body: &Value,
    f: impl FnOnce(O) -> Result<O::Output, String>,
) -> Result<Response, String> {
    let op = O::read_request(body).map_err(|e| e.to_string())?;
    let out = f(op)?;
    Ok(Response::Other(O::reply_body(&out)))
}

/// Every command bunqueue 2.9.5's TCP handler knows (from its `handler-routes`), so that the
/// ones this broker does not serve are refused as such.
pub(crate) const BUNQUEUE_COMMANDS: &[&str] = &[
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

/// The refusal for a command: "not supported" for one bunqueue knows, bunqueue's own
/// "Unknown command" otherwise.
pub(crate) fn not_supported(cmd: &str) -> String {
    if BUNQUEUE_COMMANDS.contains(&cmd) {
        format!("{cmd} is not supported by autobatch-broker (see its README section)")
    } else {
        format!("Unknown command: {cmd}")
    }
}
