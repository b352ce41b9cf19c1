//! Several brokers behind one [`Client`](crate::Client): one pump (connection) per broker, the
//! state each link's pump shares with its handles ([`Shared`]), and the rule that says which
//! link takes an operation.
//!
//! * Adds go to the **live** link with the fewest adds in flight; lookups and control calls to
//!   the live link with the fewest operations in flight. Ties go round-robin, so an idle
//!   client spreads its work. Each pump batches what it is given: batches form per link.
//! * A link is live when its socket is up and it is not *stalled*: a link with operations out
//!   and no answer for [`stall_timeout`](crate::ClientOptions::stall_timeout) (a broker frozen
//!   or overwhelmed) gets no new work until it answers again.
//! * With no live link, work goes to a connected (stalled) one, else to any: it then waits
//!   there under the pump's reconnect policy, as with one broker.
//!
//! The selection itself is the pure [`pick`], tested below without any I/O.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_channel::oneshot;
use futures_util::future::{FutureExt, Shared as SharedFuture};

use autobatch_core::wire::JobOptions;

use crate::add_ids;
use crate::cmd::Ticket;
use crate::direct::Direct;
use crate::inbox::Sender;
use crate::stats::ClientStats;

/// A future that resolves when a link's connection goes down (see [`Beacon`]).
pub(crate) type Signal = SharedFuture<oneshot::Receiver<()>>;

/// A one-to-many "it happened" signal that can fire many times: each firing resolves every
/// [`Signal`] taken before it. Dropped subscribers leave nothing behind (a shared future
/// forgets the waker of a clone that is dropped), so memory stays bounded.
#[derive(Debug)]
pub(crate) struct Beacon(Mutex<(oneshot::Sender<()>, Signal)>);

impl Beacon {
    pub(crate) fn new() -> Self {
        let (tx, rx) = oneshot::channel();
        Beacon(Mutex::new((tx, rx.shared())))
    }

    pub(crate) fn subscribe(&self) -> Signal {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).1.clone()
    }

    pub(crate) fn fire(&self) {
        let (tx, rx) = oneshot::channel();
        let mut slot = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let (old, _) = std::mem::replace(&mut *slot, (tx, rx.shared()));
        let _ = old.send(());
    }
}

/// The state one link's pump and every handle on it share.
#[derive(Debug)]
pub(crate) struct Shared {
    next_ticket: AtomicU64,
    /// The stats when the pump ended, for `stats()` after `close()`.
    pub(crate) final_stats: Mutex<Option<ClientStats>>,
    /// `host:port`, for logs.
    pub(crate) addr: String,
    /// Whether the socket is up (set by the pump): the links layer sends new work only to
    /// connected brokers.
    connected: AtomicBool,
    /// Fired whenever the connection goes down, for the callers waiting on this link.
    down: Beacon,
    /// Reads that brought bytes in, counted by the pump: the callers' stall clock stamps the
    /// time once per new read, not once per answered operation (a clock read per add).
    reads: AtomicU64,
    /// Something came in since the socket last came up: a broker that accepts connections
    /// while it is still starting (a restarted bunqueue broker on PostgreSQL) gets new work
    /// only once it answers (the pump sends it a Ping on every reconnect).
    answered: AtomicBool,
}

impl Shared {
    pub(crate) fn new(addr: String) -> Self {
        Shared {
            next_ticket: AtomicU64::new(1),
            final_stats: Mutex::new(None),
            addr,
            connected: AtomicBool::new(false),
            down: Beacon::new(),
            reads: AtomicU64::new(0),
            answered: AtomicBool::new(false),
        }
    }

    /// How many reads have brought bytes in so far.
    pub(crate) fn reads(&self) -> u64 {
        self.reads.load(Ordering::Acquire)
    }

    /// Whether the pump's socket is up.
    pub(crate) fn is_connected(&self) -> bool {
        self.connected.load(Ordering::Acquire)
    }

    /// A future that resolves the next time the connection goes down.
    pub(crate) fn on_down(&self) -> Signal {
        self.down.subscribe()
    }

    /// Counts a read that brought bytes in (the pump calls it before handing them on, so a
    /// caller woken by an answer in them sees it).
    pub(crate) fn note_read(&self) {
        self.reads.fetch_add(1, Ordering::Release);
        self.answered.store(true, Ordering::Release);
    }

    /// Whether the broker answered since the socket last came up.
    pub(crate) fn has_answered(&self) -> bool {
        self.answered.load(Ordering::Acquire)
    }

    /// Records whether the socket is up (the pump's word); going down fires the beacon.
    pub(crate) fn set_connected(&self, up: bool) {
        if up {
            self.answered.store(false, Ordering::Release);
        }
        let was = self.connected.swap(up, Ordering::AcqRel);
        if was && !up {
            self.down.fire();
        }
    }

    /// A new operation's ticket, unique on this link.
    pub(crate) fn ticket(&self) -> Ticket {
        self.next_ticket.fetch_add(1, Ordering::Relaxed)
    }
}

/// What the selection needs to know of one link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct View {
    /// The socket is up.
    pub(crate) connected: bool,
    /// It answered since it connected (see [`Shared`]'s `answered`).
    pub(crate) answered: bool,
    /// Operations are out and nothing has come back for the stall timeout.
    pub(crate) stalled: bool,
    /// Jobs being added through it, not yet answered.
    pub(crate) adds: usize,
    /// Other operations (lookups, control calls) not yet answered.
    pub(crate) requests: usize,
}

impl View {
    fn live(&self) -> bool {
        self.connected && self.answered && !self.stalled
    }
}

/// Which link takes the next operation: among the live links (else the connected ones, else
/// all) the one with the least load — adds in flight for an add, every operation in flight
/// otherwise — the first from `start` on winning ties.
pub(crate) fn pick(views: &[View], add: bool, start: usize) -> usize {
    let n = views.len();
    let load = |v: &View| if add { v.adds } else { v.adds + v.requests };
    for eligible in [View::live as fn(&View) -> bool, |v| v.connected, |_| true] {
        let best = (0..n)
            .map(|k| (start + k) % n)
            .filter(|&i| eligible(&views[i]))
            .min_by_key(|&i| load(&views[i]));
        if let Some(i) = best {
            return i;
        }
    }
    0
}

/// What a spawned pump gives the handles on its connection.
pub(crate) struct Ends {
    /// The pump's inbox.
    pub(crate) tx: Sender,
    /// The state the pump shares with its handles.
    pub(crate) shared: Arc<Shared>,
    /// The connection, for an add's poll to move it itself.
    pub(crate) direct: Arc<dyn Direct>,
}

/// One broker: its pump's channel and shared state, and what the callers have out on it.
pub(crate) struct Link {
    pub(crate) tx: Sender,
    pub(crate) shared: Arc<Shared>,
    pub(crate) direct: Arc<dyn Direct>,
    adds: AtomicUsize,
    requests: AtomicUsize,
    /// Milliseconds (since `Links::epoch`) of the last sign of life: an answer, or the moment
    /// the link went from idle to busy.
    progress: AtomicU64,
    /// The pump's read count when `progress` was last stamped for an answer.
    stamped_reads: AtomicU64,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link")
            .field("shared", &self.shared)
            .field("adds", &self.adds)
            .field("requests", &self.requests)
            .finish_non_exhaustive()
    }
}

/// The links of one client, in the order the brokers were given.
#[derive(Debug)]
pub(crate) struct Links {
    links: Vec<Link>,
    stall_timeout: Duration,
    epoch: Instant,
    next: AtomicUsize,
    /// [`ClientOptions::shared_storage`](crate::ClientOptions::shared_storage).
    shared_storage: bool,
    /// [`ClientOptions::idempotent_adds`](crate::ClientOptions::idempotent_adds): every add
    /// gets a job id of the client's own.
    idempotent_adds: bool,
}

impl Links {
    pub(crate) fn new(parts: Vec<Ends>, stall_timeout: Duration) -> Self {
        Links {
            links: parts
                .into_iter()
                .map(|Ends { tx, shared, direct }| Link {
                    tx,
                    shared,
                    direct,
                    adds: AtomicUsize::new(0),
                    requests: AtomicUsize::new(0),
                    progress: AtomicU64::new(0),
                    stamped_reads: AtomicU64::new(0),
                })
                .collect(),
            stall_timeout,
            epoch: Instant::now(),
            next: AtomicUsize::new(0),
            shared_storage: false,
            idempotent_adds: false,
        }
    }

    /// With `on`, every add without a custom id gets one (see [`add_ids`](crate::add_ids)).
    pub(crate) fn with_idempotent_adds(mut self, on: bool) -> Self {
        self.idempotent_adds = on;
        self
    }

    /// `opts` as this client sends them: with a job id of the client's own where adds are
    /// idempotent and it has none.
    pub(crate) fn job_options(&self, opts: JobOptions) -> JobOptions {
        if self.idempotent_adds {
            add_ids::with_own_id(opts)
        } else {
            opts
        }
    }

    /// Whether the brokers share one store (see
    /// [`ClientOptions::shared_storage`](crate::ClientOptions::shared_storage)).
    pub(crate) fn with_shared_storage(mut self, shared: bool) -> Self {
        self.shared_storage = shared;
        self
    }

    pub(crate) fn shared_storage(&self) -> bool {
        self.shared_storage
    }

    /// Whether any link's connection is up.
    pub(crate) fn any_connected(&self) -> bool {
        self.links.iter().any(|l| l.shared.is_connected())
    }

    pub(crate) fn len(&self) -> usize {
        self.links.len()
    }

    pub(crate) fn get(&self, i: usize) -> &Link {
        &self.links[i]
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &Link> {
        self.links.iter()
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    fn view(&self, link: &Link, now_ms: u64) -> View {
        let adds = link.adds.load(Ordering::Acquire);
        let requests = link.requests.load(Ordering::Acquire);
        let quiet = now_ms.saturating_sub(link.progress.load(Ordering::Acquire));
        View {
            connected: link.shared.is_connected(),
            answered: link.shared.has_answered(),
            stalled: adds + requests > 0 && quiet > self.stall_timeout.as_millis() as u64,
            adds,
            requests,
        }
    }

    pub(crate) fn views(&self) -> Vec<View> {
        let now = self.now_ms();
        self.links.iter().map(|l| self.view(l, now)).collect()
    }

    /// The link for the next operation (see [`pick`]).
    pub(crate) fn choose(&self, add: bool) -> usize {
        if self.links.len() == 1 {
            return 0;
        }
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        pick(&self.views(), add, start % self.links.len())
    }

    /// Whether a live link exists.
    pub(crate) fn any_live(&self) -> bool {
        let now = self.now_ms();
        self.links.iter().any(|l| self.view(l, now).live())
    }

    /// Whether a live link other than `i` exists.
    pub(crate) fn other_live(&self, i: usize) -> bool {
        let now = self.now_ms();
        self.links
            .iter()
            .enumerate()
            .any(|(k, l)| k != i && self.view(l, now).live())
    }

    /// Counts `adds` jobs (or one request when 0) as in flight on link `i` until the guard is
    /// dropped.
    pub(crate) fn load(&self, i: usize, adds: usize) -> Load<'_> {
        let link = &self.links[i];
        let was_idle =
            link.adds.load(Ordering::Acquire) + link.requests.load(Ordering::Acquire) == 0;
        if was_idle {
            // The stall clock starts when the link gets something to answer.
            link.progress.store(self.now_ms(), Ordering::Release);
        }
        if adds > 0 {
            link.adds.fetch_add(adds, Ordering::AcqRel);
        } else {
            link.requests.fetch_add(1, Ordering::AcqRel);
        }
        Load {
            links: self,
            link: i,
            adds,
        }
    }
}

/// An operation counted in flight on a link; done (answered, withdrawn or given up) on drop.
pub(crate) struct Load<'a> {
    links: &'a Links,
    link: usize,
    adds: usize,
}

impl Drop for Load<'_> {
    fn drop(&mut self) {
        let link = &self.links.links[self.link];
        // An answer is progress; a caller giving up is not. The answers of one read (a PUSHB
        // reply answers 50 adds) stamp the clock once, the first time one of them ends.
        let reads = link.shared.reads();
        if link.stamped_reads.swap(reads, Ordering::AcqRel) != reads {
            link.progress.store(self.links.now_ms(), Ordering::Release);
        }
        if self.adds > 0 {
            link.adds.fetch_sub(self.adds, Ordering::AcqRel);
        } else {
            link.requests.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// One broker of a [`Client`](crate::Client), as [`Client::brokers`](crate::Client::brokers)
/// reports it at the moment of the call.
///
/// ```no_run
/// # fn demo<R: autobatch_driver::Runtime>(client: autobatch_driver::Client<R>) {
/// for b in client.brokers() {
///     println!("{}: live {}, {} adds in flight", b.addr, b.live, b.adds_in_flight);
/// }
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BrokerStatus {
    /// `host:port` as given in the options.
    pub addr: String,
    /// The connection is up.
    pub connected: bool,
    /// Connected and answering: it takes new work. A broker that has left every operation
    /// unanswered for the stall timeout is connected but not live.
    pub live: bool,
    /// Jobs being added through it, not yet answered.
    pub adds_in_flight: usize,
    /// Other operations through it, not yet answered.
    pub requests_in_flight: usize,
}

impl Links {
    pub(crate) fn status(&self) -> Vec<BrokerStatus> {
        let now = self.now_ms();
        self.links
            .iter()
            .map(|l| {
                let v = self.view(l, now);
                BrokerStatus {
                    addr: l.shared.addr.clone(),
                    connected: v.connected,
                    live: v.live(),
                    adds_in_flight: v.adds,
                    requests_in_flight: v.requests,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(adds: usize, requests: usize) -> View {
        View {
            connected: true,
            answered: true,
            stalled: false,
            adds,
            requests,
        }
    }

    #[test]
    fn adds_go_to_the_live_link_with_fewest_adds() {
        let views = [live(5, 0), live(2, 9), live(3, 0)];
        assert_eq!(pick(&views, true, 0), 1);
        // Lookups count every operation in flight.
        assert_eq!(pick(&views, false, 0), 2);
    }

    #[test]
    fn ties_go_round_robin() {
        let views = [live(0, 0), live(0, 0), live(0, 0)];
        let picked: Vec<usize> = (0..6).map(|s| pick(&views, true, s % 3)).collect();
        assert_eq!(picked, [0, 1, 2, 0, 1, 2]);
    }

    #[test]
    fn dead_and_stalled_links_get_no_work_while_a_live_one_exists() {
        let dead = View {
            connected: false,
            ..live(0, 0)
        };
        let stalled = View {
            stalled: true,
            ..live(1, 0)
        };
        let views = [dead, stalled, live(40, 3)];
        for start in 0..3 {
            assert_eq!(pick(&views, true, start), 2);
            assert_eq!(pick(&views, false, start), 2);
        }
        // No live link: a connected one (it may answer yet), else any (it waits there).
        assert_eq!(pick(&[dead, stalled], true, 0), 1);
        let other_dead = View { adds: 3, ..dead };
        assert_eq!(pick(&[other_dead, dead], true, 0), 1);
    }

    #[test]
    fn a_beacon_wakes_every_subscriber_once_per_firing() {
        let b = Beacon::new();
        let (s1, s2) = (b.subscribe(), b.subscribe());
        b.fire();
        let s3 = b.subscribe();
        assert!(s1.now_or_never().is_some());
        assert!(s2.now_or_never().is_some());
        assert!(
            s3.clone().now_or_never().is_none(),
            "taken after the firing"
        );
        b.fire();
        assert!(s3.now_or_never().is_some());
    }
}
