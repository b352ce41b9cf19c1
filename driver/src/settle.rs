//! A worker's job whose broker was lost, on a fleet whose brokers share one store
//! ([`ClientOptions::shared_storage`](crate::ClientOptions::shared_storage)): its lock token
//! means the same on every broker, so its result, failure or lock extension goes to a live
//! broker instead of waiting for the lost one to come back (by then its lock would have
//! expired and another worker would run it again).

use std::time::Duration;

use autobatch_core::ops::{self, Operation};
use autobatch_core::session::Replay;
use autobatch_core::wire::{Command, Value};

use crate::cmd::Cmd;

/// How a job that ran ends.
pub(crate) enum Settlement {
    Complete(Value),
    Fail {
        error: String,
        stack: Vec<String>,
        unrecoverable: bool,
    },
    Delay(Duration),
    RateLimited,
}

/// The command that settles job `id` (held with `token`) on any broker of the fleet.
pub(crate) fn command(id: String, token: Option<String>, how: Settlement) -> Command {
    match how {
        Settlement::Complete(result) => Command::Ack {
            id,
            result: Some(result),
            token,
        },
        Settlement::Fail {
            error,
            stack,
            unrecoverable,
        } => Command::Fail {
            id,
            error: Some(error),
            token,
            unrecoverable,
            stack,
            remove_on_fail: false,
        },
        Settlement::Delay(delay) => {
            let mut op = ops::MoveToDelayed::new(id.as_str(), delay);
            op.token = token;
            op.to_command()
        }
        Settlement::RateLimited => {
            let mut op = ops::MoveToWait::new(id.as_str());
            op.token = token;
            op.to_command()
        }
    }
}

/// Settling a job again may not be harmless (a second FAIL counts an attempt): sent once.
pub(crate) const REPLAY: Replay = Replay::NotSafe;

/// Tells the lost broker's session to forget job `id`: it is settled elsewhere, so the
/// session neither renews its lock nor counts it as held any more.
pub(crate) fn forget(id: String) -> Cmd {
    Cmd::Forget(id)
}

/// The lock extension of a job whose broker was lost.
pub(crate) fn extend_lock(id: &str, token: Option<&str>, ttl: Duration) -> ops::ExtendLock {
    let op = ops::ExtendLock::new(id, ttl);
    match token {
        Some(t) => op.token(t),
        None => op,
    }
}
