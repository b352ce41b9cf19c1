//! Queue control: pause, resume, drain, clean, obliterate, and the per-job moves (promote,
//! retry, change priority or delay, discard, cancel, remove).

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
    ///
    /// Pausing twice is pausing once, so it may be replayed.
    ///
    /// ```
    /// use autobatch_core::ops::{Operation, Pause};
    /// use autobatch_core::session::Replay;
    /// use autobatch_core::wire::Value;
    /// let pause = Pause::new("emails");
    /// assert_eq!(pause.to_body(), Value::map([("cmd", Value::from("Pause")), ("queue", Value::from("emails"))]));
    /// assert_eq!(Pause::REPLAY, Replay::Safe);
    /// assert_eq!(Pause::new("bad name!").validate().unwrap_err().field, "queue");
    /// ```
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
    ///
    /// ```
    /// use autobatch_core::ops::{IsPaused, Operation};
    /// use autobatch_core::wire::Value;
    /// let reply = Value::map([("ok", Value::from(true)), ("paused", Value::from(true))]);
    /// assert_eq!(IsPaused::read_reply(&reply), Ok(true));
    /// ```
    IsPaused, Safe, Eq;
    queue;
    reply: bool = field("paused");
}

op! {
    /// `Drain`: removes every waiting, prioritized and delayed job of a queue (not active ones),
    /// and says how many.
    ///
    /// Not replayed: a second drain would also remove the jobs added between the two.
    Drain, NotSafe, Eq;
    queue;
    reply: u64 = field("count");
}

op! {
    /// `Clean`: removes up to `limit` jobs of a queue in one state that are older than `grace`,
    /// and returns their ids.
    ///
    /// States: `waiting` (also `delayed`, `prioritized`, `paused`: every ready or delayed job —
    /// bunqueue cleans those together), `completed`, `failed`; none means waiting. `active` jobs
    /// are never cleaned (an empty answer). A state name bunqueue does not know is refused
    /// locally (the server would answer with nothing cleaned).
    ///
    /// Not replayed: a second clean removes jobs that aged past the grace in between.
    ///
    /// ```
    /// use std::time::Duration;
    /// use autobatch_core::ops::{Clean, Operation};
    /// use autobatch_core::wire::{JobState, Value};
    /// let op = Clean::new("emails", Duration::from_secs(60), 100).state(JobState::Completed);
    /// assert_eq!(op.to_body().get("grace"), Some(&Value::from(60_000_u64)));
    /// assert_eq!(op.to_body().get("state"), Some(&Value::from("completed")));
    /// let reply = Value::map([("ok", Value::from(true)), ("count", Value::Int(1)), ("ids", Value::Array(vec![Value::from("j1")]))]);
    /// assert_eq!(Clean::read_reply(&reply), Ok(vec!["j1".to_owned()]));
    /// ```
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
    ///
    /// Not replayed: a second one would also destroy what was added between the two.
    Obliterate, NotSafe, Eq;
    queue;
}

op! {
    /// `Cancel`: removes a job that is not active (the TS client's `remove(id)` and
    /// `job.remove()`). Refused with `Job not found or cannot be cancelled` for an unknown or
    /// active job.
    ///
    /// Not replayed: if the first one removed the job, a second is refused.
    ///
    /// ```
    /// use autobatch_core::ops::{Cancel, Operation};
    /// use autobatch_core::wire::Value;
    /// assert_eq!(Cancel::new("j1").to_body(), Value::map([("cmd", Value::from("Cancel")), ("id", Value::from("j1"))]));
    /// assert_eq!(Cancel::new("").validate().unwrap_err().message, "id is required");
    /// ```
    Cancel, NotSafe, Eq;
    id;
}

op! {
    /// `Promote`: makes a delayed job ready now. Refused with `Job not found or not delayed`.
    ///
    /// Not replayed: a second one is refused once the first has promoted the job.
    Promote, NotSafe, Eq;
    id;
}

op! {
    /// `Discard`: fails a job for good, without retries (an active job needs its lock token:
    /// `Lock token required for job <id>` otherwise). Refused with `Job not found`.
    ///
    /// Not replayed: the job's state moves on, and a second move from the new state does
    /// something else or is refused.
    ///
    /// ```
    /// use autobatch_core::ops::{Discard, Operation};
    /// use autobatch_core::wire::Value;
    /// let op = Discard::new("j1").token("t1");
    /// assert_eq!(op.to_body().get("token"), Some(&Value::from("t1")));
    /// ```
    Discard, NotSafe, Eq;
    /// For job `id`, without a token.
    new(id: impl Into<String>);
    fields {
        /// Job id.
        id: String = "id" => Required,
        /// The lock token of an active job (required when the job is active and locked).
        token: Option<String> = "token",
    }
    set { token: impl Into<String> }
}

op! {
    /// `MoveToWait`: puts a job back to waiting — the TS client's `retryJob(id)` and
    /// `moveJobToWait(id, token)`: an active job is released (with its token if locked), a
    /// delayed one promoted, a failed one retried from the dead-letter queue, a waiting one
    /// left alone. Refused for other states (`Cannot move job from state '<state>' to
    /// waiting`; an unknown id is state `unknown`).
    ///
    /// Not replayed: the job's state moves on.
    MoveToWait, NotSafe, Eq;
    /// For job `id`, without a token.
    new(id: impl Into<String>);
    fields {
        /// Job id.
        id: String = "id" => Required,
        /// The lock token of an active job (required when the job is active and locked).
        token: Option<String> = "token",
    }
    set { token: impl Into<String> }
}

op! {
    /// `PromoteJobs`: makes up to `count` delayed jobs of a queue ready now (all when no count),
    /// and says how many. The batch form of [`Promote`].
    ///
    /// Not replayed: a second one would promote more jobs.
    PromoteJobs, NotSafe, Eq;
    /// Promotes every delayed job of `queue`.
    new(queue: impl Into<String>);
    fields {
        /// Queue name.
        queue: String = "queue" => Queue,
        /// At most this many; all when `None`.
        count: Option<u64> = "count",
    }
    set { count: u64 }
    reply: u64 = field("count");
}

op! {
    /// `RetryCompleted`: runs completed jobs of a queue again — one (`id`), or up to `count`
    /// (completed before `timestamp`, when given) — and says how many.
    ///
    /// Not replayed: a job the first one re-ran may have completed again by the second.
    RetryCompleted, NotSafe;
    /// Retries every completed job of `queue`.
    new(queue: impl Into<String>);
    fields {
        /// Queue name.
        queue: String = "queue" => Queue,
        /// Only this job.
        id: Option<String> = "id",
        /// At most this many.
        count: Option<u64> = "count",
        /// Only jobs completed before this time, epoch ms.
        timestamp: Option<f64> = "timestamp",
    }
    set { id: impl Into<String>, count: u64 }
    reply: u64 = field("count");
}

impl RetryCompleted {
    /// Only jobs completed before `timestamp` (epoch ms).
    pub fn before(mut self, timestamp: f64) -> Self {
        self.timestamp = Some(timestamp);
        self
    }
}

op! {
    /// `ChangePriority`: gives a waiting, prioritized or delayed job a new priority (and, with
    /// `lifo`, puts it first among its equals). Refused with `Job not found or not in queue`
    /// (unknown, active or finished job).
    ///
    /// Replayed: it sets an absolute value, so a second one leaves the job as the first did.
    ChangePriority, Safe, Eq;
    /// Sets job `id`'s priority to `priority`.
    new(id: impl Into<String>, priority: i64);
    fields {
        /// Job id.
        id: String = "id" => Required,
        /// The new priority (higher runs first).
        priority: i64 = "priority",
        /// Put it before the jobs of the same priority.
        lifo: Option<bool> = "lifo",
    }
    set { lifo: bool }
}

op! {
    /// `ChangeDelay`: makes a delayed (or waiting) job run `delay` from now. Refused with
    /// `Job not found or cannot change delay`.
    ///
    /// Not replayed: the delay counts from when the server reads it, so a later replay would
    /// push the job further out.
    ///
    /// ```
    /// use std::time::Duration;
    /// use autobatch_core::ops::{ChangeDelay, Operation};
    /// use autobatch_core::wire::Value;
    /// let op = ChangeDelay::new("j1", Duration::from_secs(5)).token("t1");
    /// assert_eq!(op.to_body().get("delay"), Some(&Value::from(5_000_u64)));
    /// assert_eq!(op.to_body().get("token"), Some(&Value::from("t1")));
    /// ```
    ChangeDelay, NotSafe, Eq;
    /// Job `id` runs `delay` from now.
    new(id: impl Into<String>, delay: Duration => ms_u64);
    fields {
        /// Job id.
        id: String = "id" => Required,
        /// Ms from now.
        delay: u64 = "delay",
        /// The lock token of an active job (bunqueue then moves it to delayed; without the
        /// token it answers `Lock token required for job <id>`). The TS worker's
        /// `job.changeDelay` sends it.
        token: Option<String> = "token",
    }
    set { token: impl Into<String> }
}

op! {
    /// `MoveToDelayed`: moves an active job back to delayed, to run `delay` from now (the TS
    /// client's `moveJobToDelayed(id, timestamp, token)`, which sends the delay). Refused with
    /// `Job not found`, or `Job is not active (current state: <state>)`.
    ///
    /// Not replayed: the job's state moves on.
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
    ///
    /// Not replayed: a job added between the two could own the key by the second.
    ///
    /// ```
    /// use autobatch_core::ops::{Operation, RemoveDeduplicationKey};
    /// use autobatch_core::wire::Value;
    /// let reply = Value::map([("ok", Value::from(true)), ("data", Value::map([("count", Value::Int(1))]))]);
    /// assert_eq!(RemoveDeduplicationKey::read_reply(&reply), Ok(1));
    /// ```
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
    ///
    /// Replayed: the server frees the key only while this job owns it, so a second one changes
    /// nothing (and cannot free a key another job took since).
    RemoveJobDeduplicationKey, Safe, Eq;
    id;
    reply: bool = data("removed");
}
