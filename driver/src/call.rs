//! A call: an operation a caller hands to the links ([`Work`]), sent to one link's pump and
//! awaited, withdrawn if the caller stops waiting ([`CancelOnDrop`]), and moved to another
//! broker when its link goes down before it was written.

use std::sync::Arc;

use autobatch_core::session::Replay;
use autobatch_core::wire::{Command, EncodedJob, JobSpec, Response};
use autobatch_core::Error;
use futures_channel::oneshot;
use futures_util::future::{select, Either};

use crate::cmd::{Cmd, Ticket};
use crate::inbox::Sender;
use crate::links::{Link, Links};
use crate::reply::{Outcome, Reply};

/// An operation a caller hands to one of the links; kept whole so that it can go to another
/// broker when its link dies before it was written.
#[derive(Clone)]
pub(crate) enum Work {
    Add {
        queue: Arc<str>,
        // Encoded by the caller when it makes the job, while the job is in its cache: from
        // there on only the job's bytes move (through the caller's future, the inbox and into
        // the session), and the pump never touches the 700-byte `JobSpec`.
        job: EncodedJob,
    },
    Bulk {
        queue: Arc<str>,
        jobs: Vec<JobSpec>,
    },
    Request {
        cmd: Box<Command>,
        replay: Option<Replay>,
    },
}

impl Work {
    /// Jobs it adds (0 for a request).
    pub(crate) fn adds(&self) -> usize {
        match self {
            Work::Add { .. } => 1,
            Work::Bulk { jobs, .. } => jobs.len().max(1),
            Work::Request { .. } => 0,
        }
    }

    /// The custom id of a single add that a lookup can answer for: one whose job is not
    /// removed when it finishes (once it ran and was removed, nothing would tell that it
    /// landed). A bulk add is not replayed on another broker: one lookup cannot answer for
    /// all its jobs.
    pub(crate) fn custom_id(&self) -> Option<&str> {
        match self {
            Work::Add { job, .. } if !job.removed_when_finished() => job.custom_id(),
            Work::Add { .. } => None,
            Work::Bulk { .. } | Work::Request { .. } => None,
        }
    }

    /// A read: sending it again elsewhere after it was written changes nothing.
    fn is_read(&self) -> bool {
        match self {
            Work::Request { cmd, replay } => {
                *replay != Some(Replay::NotSafe)
                    && matches!(
                        **cmd,
                        Command::Hello
                            | Command::Ping
                            | Command::GetJob { .. }
                            | Command::GetState { .. }
                            | Command::GetResult { .. }
                            | Command::Count { .. }
                            | Command::GetJobCounts { .. }
                    )
            }
            _ => false,
        }
    }

    fn into_cmd(self, ticket: Ticket, reply: Reply) -> Cmd {
        match self {
            Work::Add { queue, job } => Cmd::Add {
                ticket,
                queue,
                job,
                reply,
            },
            Work::Bulk { queue, jobs } => Cmd::AddBulk {
                ticket,
                queue,
                jobs,
                reply,
            },
            Work::Request { cmd, replay } => Cmd::Request {
                ticket,
                cmd,
                replay,
                reply,
            },
        }
    }
}

/// Sends `work` and waits for its outcome; a drop before the outcome withdraws the
/// operation if it has not been sent.
///
/// With several brokers: the operation goes to the link [`Links::choose`] picks. When that
/// link's connection goes down before the outcome, the operation moves to another broker if
/// it was not written yet (the link's pump gives back every add it had not written, and a
/// lone request is withdrawn); a read that was written is sent again elsewhere too. An add
/// that was written resolves at once as `ConnectionLost { maybe_applied: true }`, except an
/// add with a custom id: where the brokers share storage
/// ([`ClientOptions::shared_storage`](crate::ClientOptions::shared_storage)) it is replayed
/// on a live broker, once a lookup of its id there found no job (a job that already ran
/// is not added again); otherwise it is replayed on the same broker once it is back.
pub(crate) async fn call(links: &Links, work: Work) -> Result<Response, Error> {
    if links.len() == 1 {
        call_one(links, work).await
    } else {
        // Boxed: this path's future keeps a copy of the work and watches the link, which
        // would make every caller's future several times larger, most callers having
        // one broker.
        Box::pin(call_spread(links, work)).await
    }
}

/// [`call`] with one broker: nothing to watch, nowhere else to send it. Its
/// future holds only the reply's receiver and the guards, so the future of an add is a
/// few words, cheap for `join_all` and spawned tasks to move and store.
async fn call_one(links: &Links, work: Work) -> Result<Response, Error> {
    let _load = links.load(0, work.adds());
    let (outcome, guard) = submit(links.get(0), work)?;
    let result = outcome.await;
    std::mem::forget(guard);
    result.unwrap_or(Err(Error::Closed))
}

/// What to do with an outcome of `work` on a lost connection.
#[derive(Debug, PartialEq, Eq)]
enum Next {
    /// The outcome stands.
    Done,
    /// Not applied: send it to another broker.
    Move,
    /// Written with a custom id to a broker that shares storage: look the id up on a live
    /// broker, and add it there only if no job has it.
    Replay,
}

fn next(result: &Result<Response, Error>, work: &Work, shared_storage: bool) -> Next {
    match result {
        Err(Error::ConnectionLost {
            maybe_applied: false,
        }) => Next::Move,
        Err(Error::ConnectionLost {
            maybe_applied: true,
        }) if shared_storage && work.custom_id().is_some() => Next::Replay,
        _ => Next::Done,
    }
}

/// [`call`] with several brokers.
pub(crate) async fn call_spread(links: &Links, work: Work) -> Result<Response, Error> {
    let mut work = work;
    // Written to a broker that was lost: its custom id is looked up before it is added again.
    let mut replay = false;
    // Moves so far: a bound, so that a fleet whose every broker keeps dropping connections
    // cannot keep an operation circling.
    let mut moves = 0u32;
    loop {
        if replay {
            if let Some(outcome) = look_up(links, &work).await {
                return outcome;
            }
        }
        let i = links.choose(work.adds() > 0);
        let link = links.get(i);
        // Subscribed before reading the state, so a loss in between is not missed.
        let down = link.shared.on_down();
        let watch = link.shared.is_connected();
        let spare = work.clone();
        let _load = links.load(i, work.adds());
        let (mut outcome, guard) = submit(link, work)?;
        let ticket = guard.ticket;
        let result = if watch {
            match select(&mut outcome, down).await {
                Either::Left((result, _)) => {
                    std::mem::forget(guard);
                    result.unwrap_or(Err(Error::Closed))
                }
                Either::Right(_) => {
                    // The link went down first.
                    let (tx, rx) = oneshot::channel();
                    let withdrawn = link.tx.unbounded_send(Cmd::Withdraw(ticket, tx)).is_ok()
                        && rx.await.unwrap_or(false);
                    if withdrawn {
                        std::mem::forget(guard);
                        Err(Error::ConnectionLost {
                            maybe_applied: false,
                        })
                    } else if spare.is_read() && links.other_live(i) {
                        // Its outcome there is dropped; the guard's Cancel is harmless.
                        drop(guard);
                        Err(Error::ConnectionLost {
                            maybe_applied: false,
                        })
                    } else {
                        let result = outcome.await;
                        std::mem::forget(guard);
                        result.unwrap_or(Err(Error::Closed))
                    }
                }
            }
        } else {
            let result = outcome.await;
            std::mem::forget(guard);
            result.unwrap_or(Err(Error::Closed))
        };
        let step = next(&result, &spare, links.shared_storage());
        if step == Next::Done || moves >= MAX_MOVES || !links.any_connected() {
            return result;
        }
        moves += 1;
        replay |= step == Next::Replay;
        tracing::debug!(addr = %link.shared.addr, "broker down: operation sent to another");
        work = spare;
    }
}

/// Looks up the custom id of an add written to a broker that was lost: its outcome when the
/// job exists or the lookup cannot tell, `None` when the add is to be written again.
async fn look_up(links: &Links, work: &Work) -> Option<Result<Response, Error>> {
    let id = work.custom_id()?;
    match find_job(links, id).await {
        Ok(true) => Some(Ok(Response::Pushed(id.to_owned()))),
        Ok(false) => None,
        // The lookup could not tell: the add's fate stays unknown, for the lookup's own
        // reason (a broker too slow to answer in time, or none left).
        Err(Error::Timeout { .. }) => Some(Err(Error::Timeout {
            maybe_applied: true,
        })),
        Err(_) => Some(Err(Error::ConnectionLost {
            maybe_applied: true,
        })),
    }
}

/// How often one operation moves to another broker before its last outcome stands.
const MAX_MOVES: u32 = 16;

/// Whether a job with `id` exists on the fleet's shared store, asked of a live broker
/// (`GetJob` reads the store itself).
async fn find_job(links: &Links, id: &str) -> Result<bool, Error> {
    let work = Work::Request {
        cmd: Box::new(Command::GetJob { id: id.to_owned() }),
        replay: None,
    };
    match Box::pin(call_spread(links, work)).await {
        Ok(Response::Job(_)) => Ok(true),
        Ok(other) => Err(unexpected("GetJob", other)),
        Err(Error::Server(e)) if e.kind() == autobatch_core::ServerErrorKind::JobNotFound => {
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

/// Sends `work` to `link`'s pump: the receiver of its outcome, and the guard that withdraws it
/// if the caller stops waiting (forget the guard once the outcome is in).
fn submit(link: &Link, work: Work) -> Result<(Outcome, CancelOnDrop<'_>), Error> {
    let (reply, outcome) = link.tx.reply_slot();
    let ticket = link.shared.ticket();
    link.tx
        .unbounded_send(work.into_cmd(ticket, reply))
        .map_err(|_| Error::Closed)?;
    Ok((
        outcome,
        CancelOnDrop {
            tx: &link.tx,
            ticket,
        },
    ))
}

/// Withdraws an operation whose caller stopped waiting.
pub(crate) struct CancelOnDrop<'a> {
    tx: &'a Sender,
    ticket: Ticket,
}

impl<'a> CancelOnDrop<'a> {
    pub(crate) fn new(tx: &'a Sender, ticket: Ticket) -> Self {
        CancelOnDrop { tx, ticket }
    }

    /// The operation is answered: nothing to withdraw.
    pub(crate) fn disarm(self) {
        std::mem::forget(self);
    }
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        let _ = self.tx.unbounded_send(Cmd::Cancel(self.ticket));
    }
}

/// A reply of the wrong kind for `what`: the server broke the protocol.
pub(crate) fn unexpected(what: &str, r: Response) -> Error {
    Error::Protocol(format!("unexpected reply to {what}: {r:?}"))
}
