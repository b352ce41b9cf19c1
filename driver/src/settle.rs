//! A worker's job whose broker was lost, on a fleet whose brokers share one store
//! ([`ClientOptions::shared_storage`](crate::ClientOptions::shared_storage)): its lock token
//! means the same on every broker, so its result, failure or lock extension goes to a live
//! broker instead of waiting for the lost one to come back (by then its lock would have
//! expired and another worker would run it again).

use std::time::Duration;

use autobatch_core::ops::{self, Operation};
use autobatch_core::session::Replay;
use autobatch_core::wire::{Command, Value};

use crate::cmd::{Cmd, WorkerCmd};

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

/// Whether settling command `cmd` may go again, to another live broker, when the connection
/// it was written on is lost before its answer.
///
/// A completion carrying every job's lock token may: the store completes a job once (a repeat
/// is answered as already finalized), and a token from an earlier run is refused, so a repeat
/// can never complete a later run of the job. Given up instead, the job's lock would expire
/// and the job run again. Anything else is sent once: a second FAIL counts another attempt,
/// and a move without a token could move a later run.
pub(crate) fn replay(cmd: &Command) -> Replay {
    let has = |t: &String| !t.is_empty();
    match cmd {
        Command::Ack { token: Some(t), .. } if has(t) => Replay::Safe,
        Command::AckB {
            tokens: Some(ts), ..
        } if ts.iter().all(has) => Replay::Safe,
        _ => Replay::NotSafe,
    }
}

/// Tells the lost broker's session to forget job `id`: it is settled elsewhere, so the
/// session neither renews its lock nor counts it as held any more.
pub(crate) fn forget(id: String) -> Cmd {
    Cmd::Worker(WorkerCmd::Forget(id))
}

/// The lock extension of a job whose broker was lost.
pub(crate) fn extend_lock(id: &str, token: Option<&str>, ttl: Duration) -> ops::ExtendLock {
    let op = ops::ExtendLock::new(id, ttl);
    match token {
        Some(t) => op.token(t),
        None => op,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_completion_with_every_token_goes_again() {
        let ack = |token: Option<&str>| Command::Ack {
            id: "1".into(),
            result: None,
            token: token.map(str::to_owned),
        };
        assert_eq!(replay(&ack(Some("t"))), Replay::Safe);
        assert_eq!(replay(&ack(Some(""))), Replay::NotSafe);
        assert_eq!(replay(&ack(None)), Replay::NotSafe);
        let ackb = |tokens: Option<Vec<&str>>| Command::AckB {
            ids: vec!["1".into(), "2".into()],
            results: None,
            tokens: tokens.map(|ts| ts.into_iter().map(str::to_owned).collect()),
            remove_on_completes: Vec::new(),
        };
        assert_eq!(replay(&ackb(Some(vec!["a", "b"]))), Replay::Safe);
        assert_eq!(replay(&ackb(Some(vec!["a", ""]))), Replay::NotSafe);
        assert_eq!(replay(&ackb(None)), Replay::NotSafe);
        let fail = command(
            "1".into(),
            Some("t".into()),
            Settlement::Fail {
                error: "boom".into(),
                stack: Vec::new(),
                unrecoverable: false,
            },
        );
        assert_eq!(
            replay(&fail),
            Replay::NotSafe,
            "a second FAIL counts an attempt"
        );
    }
}
