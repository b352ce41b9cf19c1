//! The future of [`Queue::add`](crate::Queue::add), written out by hand.
//!
//! Why not an `async` block around a call: the compiler's state machine for it kept
//! the job, the work item and every guard of the general path in separate fields (336 bytes),
//! and `join_all` or a spawned task copies each add's future into place; it also reached the
//! reply slot twice (once to take it, once on the first poll to leave the waker there). Here
//! an add is its encoded job until first polled, then its reply slot and two guards: a few
//! words. The first poll takes the slot with the caller's waker already in it and hands the
//! job to the connection itself (see `direct.rs`), one lock each: an add that comes alone is
//! written there and then, the first of a burst yields and writes the burst on its next poll.
//! Later polls read for it while no other caller does. With several brokers an add takes the
//! general path, boxed.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use autobatch_core::wire::{EncodedJob, Response};
use autobatch_core::Error;

use crate::call::{call_spread, unexpected, CancelOnDrop, Work};
use crate::cmd::{Cmd, Ticket};
use crate::direct::Handed;
use crate::links::{Link, Links, Load};
use crate::reply::Outcome;

type Spread<'a> = Pin<Box<dyn Future<Output = Result<Response, Error>> + Send + 'a>>;

enum State<'a> {
    /// Checked and encoded; nothing sent until the first poll.
    Encoded(EncodedJob),
    /// The job was refused before sending.
    Invalid(Error),
    /// Sent to the only broker: its answer comes in `outcome`.
    Sent {
        outcome: Outcome,
        /// Given to the connection on the caller's poll: later polls move the connection on
        /// until the answer is in. (`None`: sent through the pump's inbox, which answers.)
        direct: Option<Ticket>,
        /// Withdraws the add if the caller drops this future before its answer.
        withdraw: CancelOnDrop<'a>,
        _load: Load<'a>,
    },
    /// Several brokers: the general path (choose a broker, move on when it goes down).
    Spread(Spread<'a>),
    Done,
}

/// An add in flight: resolves to the job's id once the server has it.
pub(crate) struct AddFuture<'a> {
    /// The queue's name.
    queue: &'a Arc<str>,
    /// The client's links (brokers).
    links: &'a Links,
    state: State<'a>,
}

impl<'a> AddFuture<'a> {
    /// An add of `job` to `queue` through `links`; nothing is sent until the first poll.
    pub(crate) fn new(
        queue: &'a Arc<str>,
        links: &'a Links,
        job: Result<EncodedJob, Error>,
    ) -> Self {
        AddFuture {
            queue,
            links,
            state: match job {
                Ok(job) => State::Encoded(job),
                Err(e) => State::Invalid(e),
            },
        }
    }

    /// Sends the job on the first poll, with `cx`'s waker already in its reply slot.
    fn send(&mut self, cx: &mut Context<'_>, job: EncodedJob) -> Poll<Result<String, Error>> {
        let queue = self.queue.clone();
        let links = self.links;
        if links.len() > 1 {
            return self.poll_spread(cx, Box::pin(call_spread(links, Work::Add { queue, job })));
        }
        let load = links.load(0, 1);
        let link = links.get(0);
        let (reply, mut outcome) = link.tx.reply_slot_waking(cx.waker());
        let ticket = link.shared.ticket();
        let direct = match link.direct.add(cx, ticket, &queue, job, reply) {
            Ok(Handed::Yielded) => Some(ticket),
            Ok(Handed::Written) => {
                // Its answer may be in already (delivered without a wake: this poll looks).
                if let Poll::Ready(answer) = Pin::new(&mut outcome).poll(cx) {
                    self.state = State::Done;
                    drop(load);
                    return Poll::Ready(pushed(answer.unwrap_or(Err(Error::Closed))));
                }
                Some(ticket)
            }
            Err((job, reply)) => {
                let cmd = Cmd::Add {
                    ticket,
                    queue,
                    job,
                    reply,
                };
                if link.tx.unbounded_send(cmd).is_err() {
                    self.state = State::Done;
                    return Poll::Ready(Err(Error::Closed));
                }
                None
            }
        };
        self.state = State::Sent {
            outcome,
            direct,
            withdraw: CancelOnDrop::new(&link.tx, ticket),
            _load: load,
        };
        // The waker is in the slot, so an answer from here on wakes this task.
        Poll::Pending
    }

    /// The only broker's link.
    fn link(&self) -> &'a Link {
        self.links.get(0)
    }

    fn poll_spread(
        &mut self,
        cx: &mut Context<'_>,
        mut call: Spread<'a>,
    ) -> Poll<Result<String, Error>> {
        match call.as_mut().poll(cx) {
            Poll::Ready(result) => Poll::Ready(pushed(result)),
            Poll::Pending => {
                self.state = State::Spread(call);
                Poll::Pending
            }
        }
    }
}

/// The id from an add's answer.
fn pushed(result: Result<Response, Error>) -> Result<String, Error> {
    match result? {
        Response::Pushed(id) => Ok(id),
        other => Err(unexpected("PUSH", other)),
    }
}

impl Future for AddFuture<'_> {
    type Output = Result<String, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        // Taken out and put back while pending: each state is a few words.
        match std::mem::replace(&mut this.state, State::Done) {
            State::Encoded(job) => this.send(cx, job),
            State::Sent {
                mut outcome,
                direct,
                withdraw,
                _load,
            } => {
                let mut answer = Pin::new(&mut outcome).poll(cx);
                if let (Poll::Pending, Some(ticket)) = (&answer, direct) {
                    if this.link().direct.drive(cx, ticket) {
                        answer = Pin::new(&mut outcome).poll(cx);
                    }
                }
                match answer {
                    Poll::Ready(answer) => {
                        // Answered: nothing to withdraw. The load guard drops here.
                        withdraw.disarm();
                        Poll::Ready(pushed(answer.unwrap_or(Err(Error::Closed))))
                    }
                    Poll::Pending => {
                        this.state = State::Sent {
                            outcome,
                            direct,
                            withdraw,
                            _load,
                        };
                        Poll::Pending
                    }
                }
            }
            State::Spread(call) => this.poll_spread(cx, call),
            State::Invalid(e) => Poll::Ready(Err(e)),
            State::Done => Poll::Ready(Err(Error::Closed)),
        }
    }
}
