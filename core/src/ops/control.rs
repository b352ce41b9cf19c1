//! Queue control: pause, resume, drain, clean, obliterate, and the per-job moves (promote,
//! retry, change priority or delay, discard, cancel, remove).
//!
//! Each command's wire shape and bunqueue 2.9.5's behaviour: `docs/protocol/control.md`.
//!
//! ```
//! use std::time::Duration;
//! use autobatch_core::ops::{Clean, IsPaused, Operation, Pause};
//! use autobatch_core::session::Replay;
//! use autobatch_core::wire::{JobState, Value};
//! let pause = Pause::new("emails");
//! assert_eq!(pause.to_body(), Value::map([("cmd", Value::from("Pause")), ("queue", Value::from("emails"))]));
//! assert_eq!(Pause::REPLAY, Replay::Safe);
//! assert_eq!(Pause::new("bad name!").validate().unwrap_err().field, "queue");
//! let clean = Clean::new("emails", Duration::from_secs(60), 100).state(JobState::Completed);
//! assert_eq!(clean.to_body().get("grace"), Some(&Value::from(60_000_u64)));
//! let reply = Value::map([("ok", Value::from(true)), ("paused", Value::from(true))]);
//! assert_eq!(IsPaused::read_reply(&reply), Ok(true));
//! ```

use std::time::Duration;

use super::decl::kind::{Queue, Required};
use super::decl::{ms_u64, op, Field};
use super::lookup::validate_state;
use super::read::{array, reply_strings, req_opt_str};
use super::Fields;
use crate::wire::server::CommandError;
use crate::wire::{JobState, Value};

op! {
    /// `Pause`: workers get no more jobs from the queue until [`Resume`]; jobs keep arriving.
    Pause, Safe, Eq;
    queue;
}

op! {
    /// `Resume`: undoes [`Pause`]. Idempotent, so it may be replayed.
    Resume, Safe, Eq;
    queue;
}

op! {
    /// `IsPaused`: whether the queue is paused.
    IsPaused, Safe, Eq;
    queue;
    reply: bool = field("paused");
}

op! {
    /// `Drain`: removes every waiting, prioritized and delayed job of a queue (not active ones),
    /// and says how many.
    Drain, NotSafe, Eq;
    queue;
    reply: u64 = field("count");
}

op! {
    /// `Clean`: removes up to `limit` jobs of a queue in one state that are older than `grace`,
    /// and returns their ids.
    Clean, NotSafe, Eq;
    /// Cleans up to `limit` waiting jobs of `queue` older than `grace`.
    new(queue: impl Into<String>, grace: Duration => ms_u64, limit: u64);
    fields {
        /// Queue name.
        queue: String = "queue" => Queue,
        /// Only jobs older than this, ms.
        grace: u64 = "grace",
        /// At most this many jobs (0: none).
        limit: u64 = "limit",
        /// Which jobs; waiting ones when `None`.
        state: Option<JobState> = "state",
    }
    set { state: JobState }
    reply: Vec<String> = with(|r| reply_strings(r, "ids"), |ids: &Vec<String>, f: &mut Fields| {
        f.put("count", ids.len() as u64).put("ids", array(ids.iter().map(String::as_str)));
    });
    validate: |op: &Clean| op.state.as_ref().map_or(Ok(()), |s| validate_state("state", s));
    request: |r: &Value| -> Result<Clean, CommandError> {
        Ok(Clean {
            queue: super::read::req_queue(r)?,
            grace: Field::take(r, "grace")?,
            // bunqueue's default when absent.
            limit: <Option<u64> as Field>::take(r, "limit")?.unwrap_or(1000),
            // `wait`: bunqueue's own alias.
            state: req_opt_str(r, "state")
                .map(|s| if s == "wait" { JobState::Waiting } else { JobState::from(s) }),
        })
    };
}

op! {
    /// `Obliterate`: removes a queue and everything in it (jobs in every state, its dead-letter
    /// queue, its settings).
    Obliterate, NotSafe, Eq;
    queue;
}

op! {
    /// `Cancel`: removes a job that is not active (the TS client's `remove(id)`); refused for an
    /// unknown or active job.
    Cancel, NotSafe, Eq;
    id;
}

op! {
    /// `Promote`: makes a delayed job ready now. Refused with `Job not found or not delayed`.
    Promote, NotSafe, Eq;
    id;
}

op! {
    /// `Discard`: fails a job for good, without retries (an active job needs its lock token:
    /// `Lock token required for job <id>` otherwise). Refused with `Job not found`.
    Discard, NotSafe, Eq;
    id;
    fields {
        /// The lock token of an active job (required when the job is active and locked).
        token: Option<String> = "token",
    }
    set { token: impl Into<String> }
}

op! {
    /// `MoveToWait`: puts an active, delayed or failed job back to waiting (the TS client's
    /// `retryJob(id)` and `moveJobToWait(id, token)`); refused for other states.
    MoveToWait, NotSafe, Eq;
    id;
    fields {
        /// The lock token of an active job (required when the job is active and locked).
        token: Option<String> = "token",
    }
    set { token: impl Into<String> }
}

op! {
    /// `PromoteJobs`: makes up to `count` delayed jobs of a queue ready now (all when no count),
    /// and says how many. The batch form of [`Promote`].
    PromoteJobs, NotSafe, Eq;
    queue;
    fields {
        /// At most this many; all when `None`.
        count: Option<u64> = "count",
    }
    set { count: u64 }
    reply: u64 = field("count");
}

op! {
    /// `RetryCompleted`: runs completed jobs of a queue again — one (`id`), or up to `count`
    /// (completed before `timestamp`, when given) — and says how many.
    RetryCompleted, NotSafe;
    queue;
    fields {
        /// Only this job.
        id: Option<String> = "id",
        /// At most this many.
        count: Option<u64> = "count",
        /// Only jobs completed before this time, epoch ms.
        timestamp: Option<f64> = "timestamp",
    }
    set { id: impl Into<String>, count: u64, before(timestamp): f64 }
    reply: u64 = field("count");
}

op! {
    /// `ChangePriority`: gives a waiting, prioritized or delayed job a new priority (and, with
    /// `lifo`, puts it first among its equals).
    ChangePriority, Safe;
    /// Sets job `id`'s priority to `priority`.
    new(id: impl Into<String>, priority: f64);
    fields {
        /// Job id.
        id: String = "id" => Required,
        /// The new priority (higher runs first); bunqueue keeps a fraction as sent.
        priority: f64 = "priority",
        /// Put it before the jobs of the same priority.
        lifo: Option<bool> = "lifo",
    }
    set { lifo: bool }
}

op! {
    /// `ChangeDelay`: makes a delayed (or waiting) job run `delay` from now. Refused with
    /// `Job not found or cannot change delay`.
    ChangeDelay, NotSafe, Eq;
    /// Job `id` runs `delay` from now.
    new(id: impl Into<String>, delay: Duration => crate::wire::millis);
    fields {
        /// Job id.
        id: String = "id" => Required,
        /// Ms from now; bunqueue takes a negative delay too, as a run time already past.
        delay: i64 = "delay",
        /// The lock token of an active job (bunqueue then moves it to delayed).
        token: Option<String> = "token",
    }
    set { token: impl Into<String> }
}

op! {
    /// `MoveToDelayed`: moves an active job back to delayed, to run `delay` from now (the TS
    /// client's `moveJobToDelayed(id, timestamp, token)`).
    MoveToDelayed, NotSafe, Eq;
    /// Job `id` runs again `delay` from now.
    new(id: impl Into<String>, delay: Duration => ms_u64);
    fields {
        /// Job id.
        id: String = "id" => Required,
        /// Ms from now.
        delay: u64 = "delay",
        /// The lock token it was pulled with.
        token: Option<String> = "token",
    }
    set { token: impl Into<String> }
}

op! {
    /// `RemoveDeduplicationKey`: frees a deduplication key of a queue, so that the next job
    /// added with it is accepted; says how many keys were removed (0 or 1).
    RemoveDeduplicationKey, NotSafe, Eq;
    /// Frees `deduplication_id` in `queue`.
    new(queue: impl Into<String>, deduplication_id: impl Into<String>);
    fields {
        /// Queue name.
        queue: String = "queue" => Queue,
        /// The key (the `deduplication.id` job option).
        deduplication_id: String = "deduplicationId",
    }
    reply: u64 = data("count");
}

op! {
    /// `RemoveJobDeduplicationKey`: frees the deduplication key a job holds; says whether it
    /// held one.
    RemoveJobDeduplicationKey, Safe, Eq;
    id;
    reply: bool = data("removed");
}
