//! bunqueue's PostgreSQL multi-broker mode: one throwaway [`Postgres`] and several bunqueue
//! 2.9.5 brokers on it, each a [`BunqueueServer`] on its own loopback ports.
//!
//! What 2.9.5 needs (read from `dist/config/resolve.js` and
//! `dist/infrastructure/persistence/postgres/`):
//!
//! * `BUNQUEUE_POSTGRES_URL` selects the PostgreSQL driver; no data path may be set with it.
//!   The first broker creates the schema itself (under an advisory lock), so an empty
//!   database is enough.
//! * `BUNQUEUE_BROKER_ID` must be unique among live brokers: a broker registers a session row
//!   and heartbeats it every `lease / 3` (at least 1 s). A broker id whose last heartbeat is
//!   younger than the stale window (`max(lease, 3 × heartbeat)`) is "already active", and a
//!   broker started with it exits at once (`Failed to initialize storage`). So a broker that
//!   was SIGKILLed cannot come back under its id before the window has passed:
//!   [`Fleet::restart`] retries until then. A broker frozen past the window is purged by the
//!   others and its session fenced.
//! * `BUNQUEUE_POSTGRES_LEASE_DURATION_MS` (30 s by default) is that lease; the tests shorten
//!   it to [`TEST_LEASE`] so that a restart waits seconds, not half a minute.
//! * `BUNQUEUE_POSTGRES_POLL_INTERVAL_MS` (250 ms, at least 25) is how often a broker reads
//!   the other brokers' events into its local snapshot: counts and lookups on one broker
//!   show another broker's adds only after that. Check them with a retry, never once.
//! * The rate limit is lifted as for every harness server.

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use crate::postgres::{Postgres, PostgresOptions};
use crate::server::{BunqueueServer, ServerOptions};

/// The broker lease of [`FleetOptions::for_tests`]: a SIGKILLed broker's id is free again
/// after 3 s.
pub const TEST_LEASE: Duration = Duration::from_secs(3);
/// The poll interval of [`FleetOptions::for_tests`].
pub const TEST_POLL: Duration = Duration::from_millis(50);

/// How to run a fleet.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct FleetOptions {
    /// Brokers started by [`Fleet::start`] (more can be added with [`Fleet::add_broker`]).
    pub brokers: usize,
    /// `BUNQUEUE_POSTGRES_LEASE_DURATION_MS`; `None` keeps bunqueue's default (30 s).
    pub lease: Option<Duration>,
    /// `BUNQUEUE_POSTGRES_POLL_INTERVAL_MS`; `None` keeps bunqueue's default (250 ms).
    pub poll_interval: Option<Duration>,
    /// `BUNQUEUE_POSTGRES_NAMESPACE`; `None` keeps bunqueue's default (`default`).
    pub namespace: Option<String>,
    /// Extra environment for every broker (applied last).
    pub env: Vec<(String, String)>,
    /// The database server.
    pub postgres: PostgresOptions,
}

impl FleetOptions {
    /// `brokers` brokers with bunqueue's own lease and poll interval, on a database with
    /// PostgreSQL's default durability (`fsync` on): what the bench measures.
    pub fn new(brokers: usize) -> Self {
        FleetOptions {
            brokers,
            lease: None,
            poll_interval: None,
            namespace: None,
            env: Vec::new(),
            postgres: PostgresOptions::default().fsync(true),
        }
    }

    /// `brokers` brokers with a short lease ([`TEST_LEASE`]) and poll interval
    /// ([`TEST_POLL`]), on a database without `fsync` ([`PostgresOptions::default`]).
    pub fn for_tests(brokers: usize) -> Self {
        FleetOptions {
            lease: Some(TEST_LEASE),
            poll_interval: Some(TEST_POLL),
            postgres: PostgresOptions::default(),
            ..FleetOptions::new(brokers)
        }
    }

    /// The environment of broker `id` on `url`.
    pub fn broker_env(&self, url: &str, id: &str) -> Vec<(String, String)> {
        let mut env = vec![
            ("BUNQUEUE_POSTGRES_URL".to_owned(), url.to_owned()),
            ("BUNQUEUE_BROKER_ID".to_owned(), id.to_owned()),
        ];
        if let Some(l) = self.lease {
            env.push((
                "BUNQUEUE_POSTGRES_LEASE_DURATION_MS".into(),
                l.as_millis().to_string(),
            ));
        }
        if let Some(p) = self.poll_interval {
            env.push((
                "BUNQUEUE_POSTGRES_POLL_INTERVAL_MS".into(),
                p.as_millis().to_string(),
            ));
        }
        if let Some(ns) = &self.namespace {
            env.push(("BUNQUEUE_POSTGRES_NAMESPACE".into(), ns.clone()));
        }
        env.extend(self.env.iter().cloned());
        env
    }

    /// How long a SIGKILLed broker's id stays "already active": bunqueue's stale window
    /// `max(lease, 3 × max(1 s, lease / 3))`.
    pub fn stale_window(&self) -> Duration {
        let lease = self.lease.unwrap_or(Duration::from_secs(30));
        let heartbeat = (lease / 3).max(Duration::from_secs(1));
        lease.max(heartbeat * 3)
    }
}

/// A PostgreSQL server ([`PostgresOptions::default`]) shared by every caller that holds it:
/// the first caller starts it, it stops when the last [`Arc`] is dropped, and a later caller
/// starts a new one. Fleets on it keep apart with their own
/// [namespace](FleetOptions::namespace).
pub fn shared_postgres() -> io::Result<Arc<Postgres>> {
    static SHARED: Mutex<Weak<Postgres>> = Mutex::new(Weak::new());
    let mut slot = SHARED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(pg) = slot.upgrade() {
        return Ok(pg);
    }
    let pg = Arc::new(Postgres::start()?);
    *slot = Arc::downgrade(&pg);
    Ok(pg)
}

/// One PostgreSQL server and bunqueue brokers on it, broker `i` with the id `broker-i`.
/// Dropping it kills the brokers, then stops PostgreSQL unless another fleet shares it.
#[derive(Debug)]
pub struct Fleet {
    // Dropped first: brokers before the database they use.
    brokers: Vec<BunqueueServer>,
    opts: FleetOptions,
    postgres: Arc<Postgres>,
}

impl Fleet {
    /// Start PostgreSQL, then the brokers: the first alone (it creates the schema), the
    /// others in parallel.
    pub fn start(opts: FleetOptions) -> io::Result<Fleet> {
        let postgres = Arc::new(Postgres::start_with(opts.postgres.clone())?);
        Self::start_on(postgres, opts)
    }

    /// Start the brokers on an existing server (`opts.postgres` is not used): use a
    /// namespace of this fleet's own when the server is shared.
    pub fn start_on(postgres: Arc<Postgres>, opts: FleetOptions) -> io::Result<Fleet> {
        let mut fleet = Fleet {
            brokers: Vec::new(),
            opts,
            postgres,
        };
        let n = fleet.opts.brokers;
        if n > 0 {
            fleet.add_broker()?;
        }
        let rest: Vec<io::Result<BunqueueServer>> = std::thread::scope(|s| {
            let handles: Vec<_> = (1..n)
                .map(|i| {
                    let opts = fleet.server_options(i);
                    s.spawn(move || BunqueueServer::start(opts))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(io::Error::other("panicked")))
                })
                .collect()
        });
        for (i, b) in rest.into_iter().enumerate() {
            fleet
                .brokers
                .push(b.map_err(|e| io::Error::new(e.kind(), format!("broker-{}: {e}", i + 1)))?);
        }
        Ok(fleet)
    }

    fn server_options(&self, i: usize) -> ServerOptions {
        ServerOptions {
            env: self.opts.broker_env(&self.postgres.url(), &broker_id(i)),
            ..ServerOptions::memory()
        }
    }

    /// Start one more broker; returns its index.
    pub fn add_broker(&mut self) -> io::Result<usize> {
        let i = self.brokers.len();
        let b = BunqueueServer::start(self.server_options(i))
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", broker_id(i))))?;
        self.brokers.push(b);
        Ok(i)
    }

    /// The database.
    pub fn postgres(&self) -> &Postgres {
        &self.postgres
    }

    /// The options it was started with.
    pub fn options(&self) -> &FleetOptions {
        &self.opts
    }

    /// Number of brokers (running or not).
    pub fn len(&self) -> usize {
        self.brokers.len()
    }

    /// Whether the fleet has no broker.
    pub fn is_empty(&self) -> bool {
        self.brokers.is_empty()
    }

    /// Broker `i`.
    pub fn broker(&self, i: usize) -> &BunqueueServer {
        &self.brokers[i]
    }

    /// Broker `i`, mutably (to stop it, for example).
    pub fn broker_mut(&mut self, i: usize) -> &mut BunqueueServer {
        &mut self.brokers[i]
    }

    /// The TCP address of broker `i`.
    pub fn addr(&self, i: usize) -> SocketAddr {
        self.brokers[i].addr()
    }

    /// The TCP addresses of all brokers, by index.
    pub fn addrs(&self) -> Vec<SocketAddr> {
        self.brokers.iter().map(BunqueueServer::addr).collect()
    }

    /// SIGKILL broker `i` (it gets no chance to release anything; its leases expire).
    pub fn kill(&mut self, i: usize) -> io::Result<()> {
        self.brokers[i].kill().map(drop)
    }

    /// SIGSTOP broker `i`.
    pub fn suspend(&self, i: usize) -> io::Result<()> {
        self.brokers[i].suspend()
    }

    /// SIGCONT broker `i`.
    pub fn resume(&self, i: usize) -> io::Result<()> {
        self.brokers[i].resume()
    }

    /// Start broker `i` again (stopping it gracefully first if it runs) with the same id and
    /// ports. After a SIGKILL its id stays "already active" for the
    /// [stale window](FleetOptions::stale_window): starts refused for that reason are retried
    /// until the window (plus 10 s) has passed.
    pub fn restart(&mut self, i: usize) -> io::Result<()> {
        const REFUSED: &str = "is already active";
        let deadline = Instant::now() + self.opts.stale_window() + Duration::from_secs(10);
        let b = &mut self.brokers[i];
        loop {
            let before = b.log().matches(REFUSED).count();
            match b.restart() {
                Ok(()) => return Ok(()),
                Err(e)
                    if b.log().matches(REFUSED).count() > before && Instant::now() < deadline =>
                {
                    let _ = e;
                    std::thread::sleep(Duration::from_millis(250));
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// The `BUNQUEUE_BROKER_ID` of broker `i`: `broker-i`.
pub fn broker_id(i: usize) -> String {
    format!("broker-{i}")
}
