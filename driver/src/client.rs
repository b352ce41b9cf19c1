//! The producer side: [`Client`] (one connection) and [`Queue`] (a cheap handle on one queue).

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use autobatch_core::ops::Operation;
use autobatch_core::session::Replay;
use autobatch_core::wire::{validate_queue_name, ValidationError};
use autobatch_core::wire::{
    Command, EncodedJob, Job, JobCounts, JobOptions, JobSpec, JobState, Response, Value,
};
use autobatch_core::{Error, ServerErrorKind};
use futures_channel::oneshot;
use serde::Serialize;

use crate::add::AddFuture;
use crate::call::{self, unexpected, Work};
use crate::cmd::Cmd;
use crate::connect::start_links;
use crate::inbox::Sender;
use crate::links::{BrokerStatus, Ends, Link, Links};
use crate::options::{ClientOptions, ConnectError};
use crate::runtime::Runtime;
use crate::stats::ClientStats;

/// Connections to a bunqueue server — one, or several brokers of one deployment — with
/// transparent auto-batching of adds.
///
/// A background task (one per broker) pumps each connection; every handle talks to it through
/// a channel. Cloning a client or a [`Queue`] is cheap and shares the connections.
///
/// With several brokers ([`ClientOptions::broker`]), adds go to the live broker with the
/// fewest adds in flight (batches form per broker), lookups and control calls to the least
/// loaded live one; a broker that dies or stalls gets no new work until it is back. See
/// [`brokers`](Self::brokers).
///
/// ```no_run
/// # async fn demo<R: autobatch_driver::Runtime + Default>() -> Result<(), Box<dyn std::error::Error>> {
/// use autobatch_driver::{Client, ClientOptions, JobOptions};
///
/// let client = Client::<R>::connect(ClientOptions::new("127.0.0.1", 6789)).await?;
/// let emails = client.queue("emails");
/// let id = emails.add("welcome", &"a@b.c", JobOptions::new()).await?;
/// println!("added {id}");
/// client.close().await;
/// # Ok(()) }
/// ```
pub struct Client<R: Runtime> {
    links: Arc<Links>,
    _runtime: std::marker::PhantomData<fn() -> R>,
}

/// What a server says it is, from its `Hello` reply ([`Client::server_info`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerInfo {
    /// The protocol version (3 for bunqueue 2.9.5).
    pub protocol_version: i64,
    /// The server's name (`"bunqueue"`; autobatch-broker answers the same).
    pub server: String,
    /// The server's version.
    pub version: String,
}

impl<R: Runtime> Clone for Client<R> {
    fn clone(&self) -> Self {
        Client {
            links: self.links.clone(),
            _runtime: std::marker::PhantomData,
        }
    }
}

impl<R: Runtime> fmt::Debug for Client<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let addrs: Vec<&str> = self.links.iter().map(|l| l.shared.addr.as_str()).collect();
        f.debug_struct("Client")
            .field("addr", &addrs.join(","))
            .finish_non_exhaustive()
    }
}

impl<R: Runtime> Client<R> {
    /// Connects with the runtime's default handle (for tokio: the current runtime, so call it
    /// from within one). Returns once the server has answered a first Ping (after Auth, when
    /// a token is set); later connection losses are handled by reconnecting.
    ///
    /// With several brokers ([`ClientOptions::broker`]) it tries them all at once and returns
    /// when each has answered or failed its first attempt (within `connect_timeout`, or
    /// `command_timeout` for a broker that accepts but does not answer): it succeeds when **at least one**
    /// broker answered. The others keep reconnecting in the background (with the reconnect
    /// backoff) and take work once they are up. It fails when none answered (with the first
    /// broker's error), and at once when a broker refuses the token or TLS fails on one
    /// (every broker gets the same settings).
    ///
    /// # Errors
    ///
    /// [`ConnectError::Options`] for invalid options (nothing is attempted),
    /// [`ConnectError::Io`] / [`ConnectError::Timeout`] when the first connect fails, and
    /// [`ConnectError::Handshake`] with [`Error::AuthFailed`] for a refused token, and
    /// [`ConnectError::Tls`] when TLS is on and fails (a refused certificate, a failed
    /// handshake, unreadable TLS files) — at once, without retrying.
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime + Default>() {
    /// use autobatch_driver::{Client, ClientOptions};
    /// match Client::<R>::connect(ClientOptions::default().token("secret")).await {
    ///     Ok(client) => client.close().await,
    ///     Err(e) => eprintln!("cannot connect: {e}"),
    /// }
    /// # }
    /// ```
    pub async fn connect(options: ClientOptions) -> Result<Self, ConnectError>
    where
        R: Default,
    {
        Self::connect_with(R::default(), options).await
    }

    /// Like [`connect`](Self::connect), on an explicit runtime handle.
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime + Default>() -> Result<(), autobatch_driver::ConnectError> {
    /// use autobatch_driver::{Client, ClientOptions};
    /// let client = Client::connect_with(R::default(), ClientOptions::default()).await?;
    /// # client.close().await; Ok(()) }
    /// ```
    pub async fn connect_with(runtime: R, options: ClientOptions) -> Result<Self, ConnectError> {
        let links = start_links(runtime, &options, None).await?;
        Ok(Self::from_links(links))
    }

    /// A handle on `queue`. Cheap (no I/O); `Clone`, `Send` and `Sync`. An invalid name is
    /// reported by each operation, as [`Error::Invalid`].
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(client: autobatch_driver::Client<R>) {
    /// let emails = client.queue("emails");
    /// let again = emails.clone(); // same connection, same batcher
    /// # }
    /// ```
    pub fn queue(&self, name: impl AsRef<str>) -> Queue<R> {
        Queue {
            name: Arc::from(name.as_ref()),
            client: self.clone(),
        }
    }

    /// A snapshot of the connection's counters and of each queue's batcher.
    ///
    /// With several brokers, the session counters are summed over every broker's connection
    /// (gauges too: they are the totals), and `queues` lists each broker's batchers in turn
    /// (a queue used through two brokers appears twice); [`broker_stats`](Self::broker_stats)
    /// has them apart.
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(client: autobatch_driver::Client<R>) {
    /// let stats = client.stats().await;
    /// println!("{} adds in {} PUSHB frames", stats.session.adds, stats.session.pushb_frames);
    /// # }
    /// ```
    pub async fn stats(&self) -> ClientStats {
        let mut all = self.broker_stats().await.into_iter();
        let mut total = all.next().unwrap_or_default();
        for s in all {
            add_stats(&mut total, s);
        }
        total
    }

    /// Each broker's connection counters, in the order the brokers were given (one entry with
    /// one broker).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(client: autobatch_driver::Client<R>) {
    /// for (b, s) in client.brokers().iter().zip(client.broker_stats().await) {
    ///     println!("{}: {} adds", b.addr, s.session.adds);
    /// }
    /// # }
    /// ```
    pub async fn broker_stats(&self) -> Vec<ClientStats> {
        let mut out = Vec::with_capacity(self.links.len());
        for link in self.links.iter() {
            out.push(link_stats(link).await);
        }
        out
    }

    /// Where each broker stands now: connected, live (taking new work), operations in
    /// flight. Cheap (no I/O).
    ///
    /// ```no_run
    /// # fn demo<R: autobatch_driver::Runtime>(client: autobatch_driver::Client<R>) {
    /// let live = client.brokers().iter().filter(|b| b.live).count();
    /// println!("{live} brokers take work");
    /// # }
    /// ```
    pub fn brokers(&self) -> Vec<BrokerStatus> {
        self.links.status()
    }

    /// Whether some broker is live (connected and answering: what [`brokers`](Self::brokers)
    /// reports as `live`). For a check on every request, such as a web handler that answers
    /// at once when no broker can take its add: it builds no list and copies no address.
    ///
    /// ```no_run
    /// # fn demo<R: autobatch_driver::Runtime>(client: autobatch_driver::Client<R>) {
    /// if !client.any_broker_live() {
    ///     println!("no broker takes work now");
    /// }
    /// # }
    /// ```
    pub fn any_broker_live(&self) -> bool {
        self.links.any_live()
    }

    /// Stops taking new operations, flushes every pending add, waits for every batch in
    /// flight to be answered, then disconnects. Every add made before resolves (none is
    /// dropped); operations started afterwards fail with [`Error::Closed`]. Closing through
    /// any clone closes the connection for all; closing twice is harmless.
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(client: autobatch_driver::Client<R>) {
    /// client.close().await;
    /// # }
    /// ```
    pub async fn close(&self) {
        let closing = self.links.iter().filter_map(|link| {
            let (tx, rx) = oneshot::channel();
            link.tx.unbounded_send(Cmd::Close(tx)).ok().map(|()| rx)
        });
        futures_util::future::join_all(closing).await;
    }

    /// Asks the server for a `Pong`: resolves once it answered, with the server's clock
    /// (epoch milliseconds). A health check that goes through the same connection, window and
    /// timeouts as every other operation. With several brokers it asks one live broker (the
    /// least loaded), so it succeeds while any broker answers; [`brokers`](Self::brokers)
    /// says which are up.
    ///
    /// # Errors
    ///
    /// A lost connection or a timeout, or [`Error::Closed`] after [`close`](Self::close).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(client: autobatch_driver::Client<R>) -> Result<(), autobatch_driver::Error> {
    /// let server_ms = client.ping().await?;
    /// println!("the server's clock reads {server_ms} ms");
    /// # Ok(()) }
    /// ```
    pub async fn ping(&self) -> Result<f64, Error> {
        match self.typed_request(Command::Ping).await? {
            Response::Pong { time } => Ok(time),
            other => Err(unexpected("Ping", other)),
        }
    }

    /// What the server says it is (`Hello`): its name, version and protocol version. With
    /// several brokers, one live broker answers (they run the same bunqueue).
    ///
    /// # Errors
    ///
    /// As [`ping`](Self::ping).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(client: autobatch_driver::Client<R>) -> Result<(), autobatch_driver::Error> {
    /// let info = client.server_info().await?;
    /// println!("{} {} (protocol {})", info.server, info.version, info.protocol_version);
    /// # Ok(()) }
    /// ```
    pub async fn server_info(&self) -> Result<ServerInfo, Error> {
        match self.typed_request(Command::Hello).await? {
            Response::Hello {
                protocol_version,
                server,
                version,
            } => Ok(ServerInfo {
                protocol_version,
                server,
                version,
            }),
            other => Err(unexpected("Hello", other)),
        }
    }

    /// Sends `cmd` with replay rule `replay` to a live broker and waits for its reply.
    pub(crate) async fn command(&self, cmd: Command, replay: Replay) -> Result<Response, Error> {
        self.call(Work::Request {
            cmd: Box::new(cmd),
            replay: Some(replay),
        })
        .await
    }

    async fn typed_request(&self, cmd: Command) -> Result<Response, Error> {
        self.call(Work::Request {
            cmd: Box::new(cmd),
            replay: None,
        })
        .await
    }

    /// Runs one typed [`Operation`](autobatch_core::ops::Operation) (see
    /// [`ops`](crate::ops)): validates it locally, sends it, waits for its reply and reads
    /// it. Whether it is written again after a lost connection is the operation's own
    /// [`replay`](autobatch_core::ops::Operation::replay). The methods of [`Queue`] are built
    /// on this; call it directly for a command they do not cover.
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] before anything is sent, for a field the server would refuse;
    /// the server's refusal as [`Error::Server`]; a lost connection or a timeout; a reply
    /// that lacks what the command promises as [`Error::Protocol`]; [`Error::Closed`] after
    /// [`close`](Self::close).
    ///
    /// ```no_run
    /// use autobatch_driver::ops::IsPaused;
    /// # async fn demo<R: autobatch_driver::Runtime>(client: autobatch_driver::Client<R>) -> Result<(), autobatch_driver::Error> {
    /// let paused: bool = client.run(IsPaused::new("emails")).await?;
    /// # Ok(()) }
    /// ```
    pub async fn run<O: Operation>(&self, op: O) -> Result<O::Output, Error> {
        op.validate().map_err(Error::Invalid)?;
        let replay = op.replay();
        let cmd = op.to_command();
        let reply = self
            .call(Work::Request {
                cmd: Box::new(cmd),
                replay: Some(replay),
            })
            .await?;
        match reply {
            Response::Other(body) => O::read_reply(&body)
                .map_err(|e| Error::Protocol(format!("reply to {}: {e}", O::NAME))),
            other => Err(unexpected(O::NAME, other)),
        }
    }

    /// Sends a command the typed API does not have yet, as a map of bunqueue's own keys, and
    /// returns the server's reply body ([`Response::Other`] for a command the core does not
    /// type). `body` is the whole request: its `cmd` names the command the server knows, and
    /// the session adds the `reqId`. `replay` is the caller's word on what may happen after a
    /// lost connection: [`Replay::Safe`] for a read, which is sent again on the next
    /// connection; [`Replay::NotSafe`] for anything that changes state, which fails with
    /// [`Error::ConnectionLost`] `{ maybe_applied: true }` if it was written and not
    /// answered, and is never written twice.
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] on `cmd`, with nothing sent, when `body` is not a map with a string
    /// `cmd`; the server's refusal as [`Error::Server`], a lost connection or a timeout, or
    /// [`Error::Closed`] after [`close`](Self::close).
    ///
    /// ```no_run
    /// use autobatch_driver::{Replay, Response, Value};
    /// # async fn demo<R: autobatch_driver::Runtime>(client: autobatch_driver::Client<R>) -> Result<(), autobatch_driver::Error> {
    /// // Pausing a queue is not a read: it must not be replayed blindly.
    /// let body = Value::map([("cmd", Value::from("Pause")), ("queue", Value::from("emails"))]);
    /// let reply = client.request_raw(body, Replay::NotSafe).await?;
    /// if let Response::Other(v) = reply {
    ///     println!("paused: {:?}", v.get("ok"));
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn request_raw(&self, body: Value, replay: Replay) -> Result<Response, Error> {
        let cmd = Command::raw(body)?;
        self.call(Work::Request {
            cmd: Box::new(cmd),
            replay: Some(replay),
        })
        .await
    }

    /// Sends `work` and waits for its outcome (see [`call::call`]).
    async fn call(&self, work: Work) -> Result<Response, Error> {
        call::call(&self.links, work).await
    }

    /// The client's links (brokers).
    pub(crate) fn links(&self) -> &Links {
        &self.links
    }

    /// Every broker's channel, in order.
    pub(crate) fn senders(&self) -> impl Iterator<Item = &Sender> {
        self.links.iter().map(|l| &l.tx)
    }

    /// Sends a command made by `make` to every broker's pump.
    pub(crate) fn broadcast(&self, make: impl Fn() -> Cmd) {
        for tx in self.senders() {
            let _ = tx.unbounded_send(make());
        }
    }

    pub(crate) fn from_ends(ends: Ends) -> Self {
        Self::from_links(Links::new(vec![ends], std::time::Duration::from_secs(1)))
    }

    pub(crate) fn from_links(links: Links) -> Self {
        Client {
            links: Arc::new(links),
            _runtime: std::marker::PhantomData,
        }
    }
}

/// Adds `other`'s counters to `total`'s (several brokers' connections as one).
fn add_stats(total: &mut ClientStats, other: ClientStats) {
    let (t, o) = (&mut total.session, other.session);
    macro_rules! sum {
        ($($f:ident),*) => {$( t.$f += o.$f; )*};
    }
    sum!(
        connects,
        reconnects_scheduled,
        frames_sent,
        frames_received,
        bytes_sent,
        bytes_received,
        push_frames,
        pushb_frames,
        ackb_frames,
        adds,
        adds_direct,
        adds_parked,
        adds_rejected,
        adds_cancelled,
        adds_ok,
        adds_failed,
        items_resent,
        batches_sent,
        error_replies,
        timeouts,
        jobs_received,
        jobs_completed,
        jobs_failed,
        ack_batches_sent,
        ack_retries,
        heartbeats_sent,
        buffered_adds,
        buffered_bytes,
        parked_adds,
        in_flight_commands,
        ack_checks
    );
    for (a, b) in t.flushes.iter_mut().zip(o.flushes) {
        *a += b;
    }
    total.queues.extend(other.queues);
}

/// One link's counters, or its final ones once its pump has ended.
async fn link_stats(link: &Link) -> ClientStats {
    let (tx, rx) = oneshot::channel();
    if link.tx.unbounded_send(Cmd::Stats(tx)).is_ok() {
        if let Ok(stats) = rx.await {
            return stats;
        }
    }
    link.shared
        .final_stats
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
        .unwrap_or_default()
}

/// A handle on one queue of a [`Client`]: adds (auto-batched) and lookups.
///
/// ```no_run
/// # async fn demo<R: autobatch_driver::Runtime>(client: autobatch_driver::Client<R>) -> Result<(), autobatch_driver::Error> {
/// use autobatch_driver::JobOptions;
/// let q = client.queue("emails");
/// // Concurrent adds made in one go leave together as one PUSHB.
/// let adds = (0..100).map(|i| q.add("welcome", &i, JobOptions::new()));
/// let ids = futures_util::future::join_all(adds).await;
/// assert!(ids.iter().all(|r| r.is_ok()));
/// println!("{} jobs waiting", q.count().await?);
/// # Ok(()) }
/// ```
pub struct Queue<R: Runtime> {
    pub(crate) name: Arc<str>,
    pub(crate) client: Client<R>,
}

impl<R: Runtime> Clone for Queue<R> {
    fn clone(&self) -> Self {
        Queue {
            name: self.name.clone(),
            client: self.client.clone(),
        }
    }
}

impl<R: Runtime> fmt::Debug for Queue<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Queue")
            .field("name", &&*self.name)
            .field("client", &self.client)
            .finish()
    }
}

fn data_value<T: Serialize + ?Sized>(data: &T) -> Result<Value, Error> {
    Value::from_serialize(data).map_err(|e| {
        Error::Invalid(ValidationError::new(
            "data",
            format!("Job data must be serializable: {}", e.0),
        ))
    })
}

impl<R: Runtime> Queue<R> {
    /// The queue's name.
    ///
    /// ```no_run
    /// # fn demo<R: autobatch_driver::Runtime>(client: autobatch_driver::Client<R>) {
    /// assert_eq!(client.queue("emails").name(), "emails");
    /// # }
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Adds a job and returns its id once the server has it.
    ///
    /// Concurrent adds are batched into PUSHB transparently; a lone add goes out at once.
    /// `data` is anything `Serialize`. With [`JobOptions::durable`] the job bypasses the
    /// batcher and goes out alone as PUSH. The job is checked and encoded when `add` is
    /// called (`data` straight to MessagePack, see [`EncodedJob::from_serialize`]), so the
    /// future borrows nothing; nothing is sent until the future is polled. Dropping the
    /// future before the job is sent withdraws it.
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] (caught before sending: bad queue name, name, options, data over
    /// 10 MB) fails this add alone; [`Error::Server`] for a job the server refuses;
    /// [`Error::ConnectionLost`] / [`Error::Timeout`] (see their `maybe_applied`);
    /// [`Error::Closed`] after [`Client::close`].
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// use autobatch_driver::JobOptions;
    /// let id = q.add("invoice", &serde_json::json!({"order": 42}), JobOptions::new().attempts(3)).await?;
    /// let durable = q.add("payment", &42, JobOptions::new().durable(true)).await?;
    /// # Ok(()) }
    /// ```
    pub fn add<T: Serialize + ?Sized>(
        &self,
        name: impl AsRef<str>,
        data: &T,
        opts: JobOptions,
    ) -> impl Future<Output = Result<String, Error>> + Send + '_ {
        // The job is checked and encoded now, straight from its parts: the future borrows
        // nothing of the caller's and holds a few words (see `AddFuture`), and neither a
        // `JobSpec` nor a tree of the data is built.
        let links = self.client.links();
        let opts = links.job_options(opts);
        let job = EncodedJob::from_serialize(name.as_ref(), data, &opts).map_err(Error::Invalid);
        AddFuture::new(&self.name, links, job)
    }

    /// Adds many jobs as one PUSHB, all or nothing, and returns their ids in order.
    ///
    /// # Errors
    ///
    /// As [`add`](Self::add); a bad job fails the whole call with [`Error::Invalid`] naming
    /// it (`jobs[i]: …`).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// use autobatch_driver::JobOptions;
    /// let jobs = (0..10).map(|i| ("resize", i, JobOptions::new())).collect();
    /// let ids = q.add_bulk(jobs).await?;
    /// assert_eq!(ids.len(), 10);
    /// # Ok(()) }
    /// ```
    pub async fn add_bulk<N: Into<String>, T: Serialize>(
        &self,
        jobs: Vec<(N, T, JobOptions)>,
    ) -> Result<Vec<String>, Error> {
        let n = jobs.len();
        let mut specs = Vec::with_capacity(n);
        for (i, (name, data, opts)) in jobs.into_iter().enumerate() {
            let data = data_value(&data).map_err(|e| match e {
                Error::Invalid(v) => Error::Invalid(v.in_batch(i)),
                e => e,
            })?;
            specs.push(JobSpec {
                name: name.into(),
                data,
                opts: self.client.links().job_options(opts),
            });
        }
        let queue = self.name.clone();
        match self.client.call(Work::Bulk { queue, jobs: specs }).await? {
            Response::PushedBatch(ids) if ids.len() == n => Ok(ids),
            other => Err(unexpected("PUSHB", other)),
        }
    }

    async fn request(&self, cmd: Command) -> Result<Response, Error> {
        self.client.typed_request(cmd).await
    }

    /// Looks a job up by id; `None` if the server does not know it.
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>, id: String) -> Result<(), autobatch_driver::Error> {
    /// if let Some(job) = q.get_job(&id).await? {
    ///     println!("{} is {:?}", job.id, job.state);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn get_job(&self, id: &str) -> Result<Option<Job>, Error> {
        match self.request(Command::GetJob { id: id.to_owned() }).await {
            Ok(Response::Job(job)) => Ok(Some(*job)),
            Ok(other) => Err(unexpected("GetJob", other)),
            Err(Error::Server(e)) if e.kind() == ServerErrorKind::JobNotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// A job's state ([`JobState`]); [`JobState::Unknown`] with `"unknown"` for an id the
    /// server does not know.
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>, id: String) -> Result<(), autobatch_driver::Error> {
    /// let state = q.get_state(&id).await?;
    /// # Ok(()) }
    /// ```
    pub async fn get_state(&self, id: &str) -> Result<JobState, Error> {
        match self
            .request(Command::GetState { id: id.to_owned() })
            .await?
        {
            Response::State(s) => Ok(JobState::from(s)),
            other => Err(unexpected("GetState", other)),
        }
    }

    /// A completed job's result: what its processor returned, as its ACK carried it
    /// (bunqueue's `GetResult`). `None` for an id the server does not know and for a job
    /// without a result: not completed (yet), or completed with none (a processor that
    /// returned `()` sends nil).
    ///
    /// # Errors
    ///
    /// A lost connection or a timeout (it is a read: sent again on the next connection),
    /// or [`Error::Closed`] after [`Client::close`].
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>, id: String) -> Result<(), autobatch_driver::Error> {
    /// match q.get_result(&id).await? {
    ///     Some(result) => println!("{id} returned {result:?}"),
    ///     None => println!("{id} has no result (yet)"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn get_result(&self, id: &str) -> Result<Option<Value>, Error> {
        match self
            .request(Command::GetResult { id: id.to_owned() })
            .await?
        {
            Response::Result(result) => Ok(result),
            other => Err(unexpected("GetResult", other)),
        }
    }

    /// Jobs still to run in this queue (waiting + prioritized + delayed).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// let n = q.count().await?;
    /// # Ok(()) }
    /// ```
    pub async fn count(&self) -> Result<u64, Error> {
        validate_queue_name(&self.name)?;
        match self
            .request(Command::Count {
                queue: self.name.to_string(),
            })
            .await?
        {
            Response::Count(n) => Ok(n),
            other => Err(unexpected("Count", other)),
        }
    }

    /// Per-state counts of this queue.
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// let c = q.get_job_counts().await?;
    /// println!("{} waiting, {} completed", c.waiting, c.completed);
    /// # Ok(()) }
    /// ```
    pub async fn get_job_counts(&self) -> Result<JobCounts, Error> {
        validate_queue_name(&self.name)?;
        match self
            .request(Command::GetJobCounts {
                queue: self.name.to_string(),
            })
            .await?
        {
            Response::Counts(c) => Ok(c),
            other => Err(unexpected("GetJobCounts", other)),
        }
    }
}
