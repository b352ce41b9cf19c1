//! Connection and worker options, validated before anything is spawned.

use std::io;
use std::time::Duration;

use autobatch_core::batch::BatchConfig;
use autobatch_core::session::{ConfigError, ReconnectConfig, SessionConfig, WorkerConfig};
use autobatch_core::Error;

use crate::tls::{TlsError, TlsOptions};

/// The port bunqueue listens on by default.
pub const DEFAULT_PORT: u16 = 6789;

/// How to reach and talk to a bunqueue server.
///
/// Built with chained setters from [`ClientOptions::new`] (or [`ClientOptions::from_addr`]);
/// [`validate`](Self::validate) (also run by `Client::connect`) refuses out-of-range values
/// with a typed error instead of adjusting them.
///
/// ```
/// use std::time::Duration;
/// use autobatch_driver::{BatchConfig, ClientOptions};
///
/// let opts = ClientOptions::new("127.0.0.1", 6789)
///     .token("secret")
///     .command_timeout(Duration::from_secs(5))
///     .batching(Some(BatchConfig::new().max_batch(100)));
/// assert!(opts.validate().is_ok());
/// assert!(ClientOptions::new("", 6789).validate().is_err());
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ClientOptions {
    /// Host name or IP address. Default `127.0.0.1`.
    pub host: String,
    /// TCP port. Default 6789.
    pub port: u16,
    /// Auth token, sent first on every connection. Default none.
    pub token: Option<String>,
    /// How long a command may wait for its reply. Default 30 s.
    pub command_timeout: Duration,
    /// How long one TCP connect attempt may take. Default 10 s.
    pub connect_timeout: Duration,
    /// Auto-batching of adds; `None` sends every add as its own PUSH. Default on, with
    /// bunqueue's settings (50 jobs, 5 ms linger).
    pub batching: Option<BatchConfig>,
    /// Most commands written and unanswered on the connection. Default 100.
    pub max_in_flight_commands: usize,
    /// Once `max_in_flight_commands` are out, how long the connection waits for half of them
    /// to be answered before it writes more anyway; `None` writes one as soon as a slot is
    /// free. Default 5 ms. Waiting lets thousands of unbatched adds leave fifty frames per
    /// write instead of a few; the bound keeps slow commands (long polls, `WaitJob`) that hold
    /// slots from holding up the rest.
    pub full_window_wait: Option<Duration>,
    /// Consecutive command timeouts that force a reconnect. Default 3.
    pub max_command_timeouts: u32,
    /// Ping period on a quiet connection; `None` disables pings. Default 30 s.
    pub ping_interval: Option<Duration>,
    /// Reconnect backoff after the connection is lost. Default 100 ms doubling to 30 s.
    pub reconnect: ReconnectConfig,
    /// TLS (rustls) on every connection; `None`, the default, is plain TCP. The handshake
    /// counts against `connect_timeout`.
    pub tls: Option<TlsOptions>,
    /// Further brokers of the same bunqueue deployment (PostgreSQL mode), beyond
    /// `host:port`: the client keeps one connection per broker and spreads its work over
    /// them (see [`broker`](Self::broker)). Default none.
    pub extra_brokers: Vec<(String, u16)>,
    /// With several brokers: a broker that has left every operation sent to it unanswered
    /// for this long (frozen, overwhelmed) gets no new work until it answers again. Default
    /// 1 s. Unused with one broker.
    pub stall_timeout: Duration,
    /// The brokers share one store: bunqueue brokers in PostgreSQL mode on one database
    /// (`BUNQUEUE_POSTGRES_URL`). The client cannot tell this from the brokers, so it is
    /// told. With it, when a broker's connection is lost, adds with a custom id that were
    /// written to it are replayed on a live broker (after a lookup of the id there, so a job
    /// already finished is not added again), and a worker's results, heartbeats and lock
    /// extensions of jobs from that broker go to a live one with the job's lock token.
    /// Without it they wait for that broker to come back. Default `false`. Unused with one
    /// broker.
    pub shared_storage: bool,
    /// Every add without a custom id gets one made by the client (a UUID v7, the shape of
    /// bunqueue's own ids), so that an add written on a connection that is then lost is
    /// looked up by its id and written again only if it did not land, instead of failing
    /// with [`Error::ConnectionLost`] `{ maybe_applied: true }`. The ids show in each job's
    /// `customId`. Where the guarantee ends (jobs removed when they finish, a server
    /// restarted without its data, `add_bulk` across brokers): docs/reliability.md.
    /// Default `false`.
    pub idempotent_adds: bool,
}

impl Default for ClientOptions {
    fn default() -> Self {
        let s = SessionConfig::default();
        ClientOptions {
            host: "127.0.0.1".into(),
            port: DEFAULT_PORT,
            token: None,
            command_timeout: s.command_timeout,
            connect_timeout: Duration::from_secs(10),
            batching: s.batching,
            max_in_flight_commands: s.max_in_flight_commands,
            full_window_wait: s.full_window_wait,
            max_command_timeouts: s.max_command_timeouts,
            ping_interval: s.ping_interval,
            reconnect: s.reconnect,
            tls: None,
            extra_brokers: Vec::new(),
            stall_timeout: Duration::from_secs(1),
            shared_storage: false,
            idempotent_adds: false,
        }
    }
}

impl ClientOptions {
    /// Defaults, for `host:port`.
    ///
    /// ```
    /// let opts = autobatch_driver::ClientOptions::new("localhost", 6789);
    /// assert_eq!(opts.port, 6789);
    /// ```
    pub fn new(host: impl Into<String>, port: u16) -> Self {
        ClientOptions {
            host: host.into(),
            port,
            ..Self::default()
        }
    }

    /// Defaults, for an address written `host:port` (or `host`, meaning port 6789).
    ///
    /// ```
    /// use autobatch_driver::ClientOptions;
    /// assert_eq!(ClientOptions::from_addr("10.0.0.1:7000").unwrap().port, 7000);
    /// assert_eq!(ClientOptions::from_addr("queue.local").unwrap().port, 6789);
    /// assert!(ClientOptions::from_addr("h:notaport").is_err());
    /// ```
    pub fn from_addr(addr: &str) -> Result<Self, OptionsError> {
        match addr.rsplit_once(':') {
            Some((host, port)) if !host.ends_with(':') => {
                let port = port.parse().map_err(|_| OptionsError::Field {
                    field: "port",
                    problem: "must be a number within 1..=65535",
                })?;
                Ok(Self::new(host.trim_matches(|c| c == '[' || c == ']'), port))
            }
            _ => Ok(Self::new(addr, DEFAULT_PORT)),
        }
    }

    /// Defaults, for several brokers of one bunqueue deployment, each written `host:port` (or
    /// `host`, meaning port 6789); the first becomes [`host`](Self::host) and
    /// [`port`](Self::port), the others [`extra_brokers`](Self::extra_brokers).
    ///
    /// # Errors
    ///
    /// [`OptionsError::NoBroker`] for an empty list, [`OptionsError::Field`] for an address
    /// whose port is not a number. Duplicates and empty hosts are refused by
    /// [`validate`](Self::validate).
    ///
    /// ```
    /// use autobatch_driver::{ClientOptions, OptionsError};
    /// let opts = ClientOptions::from_addrs(["10.0.0.1:6789", "10.0.0.2:6789"]).unwrap();
    /// assert_eq!(opts.broker_addrs().len(), 2);
    /// assert_eq!(ClientOptions::from_addrs([""; 0]).unwrap_err(), OptionsError::NoBroker);
    /// ```
    pub fn from_addrs<S: AsRef<str>>(
        addrs: impl IntoIterator<Item = S>,
    ) -> Result<Self, OptionsError> {
        let mut addrs = addrs.into_iter();
        let first = addrs.next().ok_or(OptionsError::NoBroker)?;
        let mut opts = Self::from_addr(first.as_ref())?;
        for a in addrs {
            let o = Self::from_addr(a.as_ref())?;
            opts.extra_brokers.push((o.host, o.port));
        }
        Ok(opts)
    }

    /// Adds one more broker of the same deployment (bunqueue's PostgreSQL mode: several
    /// brokers on one database, each with its own `BUNQUEUE_BROKER_ID`). Every broker gets
    /// the same token, TLS and timeouts. The client then keeps one connection per broker:
    /// adds go to the live broker with the fewest adds in flight, lookups and control calls
    /// to the least loaded live one, and a broker that dies or stalls gets no new work until
    /// it is back. `Client::connect` succeeds when at least one broker answers.
    ///
    /// ```
    /// use autobatch_driver::{ClientOptions, OptionsError};
    /// let opts = ClientOptions::new("10.0.0.1", 6789).broker("10.0.0.2", 6789);
    /// assert!(opts.validate().is_ok());
    /// let twice = ClientOptions::new("10.0.0.1", 6789).broker("10.0.0.1", 6789);
    /// assert!(matches!(twice.validate(), Err(OptionsError::DuplicateBroker(_))));
    /// ```
    pub fn broker(mut self, host: impl Into<String>, port: u16) -> Self {
        self.extra_brokers.push((host.into(), port));
        self
    }

    /// Adds several brokers, as [`broker`](Self::broker) does one.
    ///
    /// ```
    /// let opts = autobatch_driver::ClientOptions::new("a", 6789)
    ///     .brokers([("b", 6789), ("c", 6790)]);
    /// assert_eq!(opts.broker_addrs().len(), 3);
    /// ```
    pub fn brokers<H: Into<String>>(mut self, brokers: impl IntoIterator<Item = (H, u16)>) -> Self {
        self.extra_brokers
            .extend(brokers.into_iter().map(|(h, p)| (h.into(), p)));
        self
    }

    /// Every broker, `host:port` first, then [`extra_brokers`](Self::extra_brokers).
    ///
    /// ```
    /// let opts = autobatch_driver::ClientOptions::new("a", 1).broker("b", 2);
    /// assert_eq!(opts.broker_addrs(), [("a".to_owned(), 1), ("b".to_owned(), 2)]);
    /// ```
    pub fn broker_addrs(&self) -> Vec<(String, u16)> {
        std::iter::once((self.host.clone(), self.port))
            .chain(self.extra_brokers.iter().cloned())
            .collect()
    }

    /// These options for one broker alone.
    pub(crate) fn for_broker(&self, host: &str, port: u16) -> Self {
        ClientOptions {
            host: host.to_owned(),
            port,
            extra_brokers: Vec::new(),
            ..self.clone()
        }
    }

    /// Sets the auth token.
    ///
    /// ```
    /// let opts = autobatch_driver::ClientOptions::default().token("secret");
    /// assert_eq!(opts.token.as_deref(), Some("secret"));
    /// ```
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// Turns TLS on, with these settings ([`TlsOptions`]). The client then connects only to a
    /// server that serves TLS with a certificate it trusts: a certificate problem fails
    /// `connect` at once with [`ConnectError::Tls`].
    ///
    /// ```
    /// use autobatch_driver::{ClientOptions, TlsOptions};
    /// let opts = ClientOptions::new("queue.example.com", 6789)
    ///     .tls(TlsOptions::new().ca_file("/etc/bunqueue/ca.pem"));
    /// assert!(opts.tls.is_some());
    /// ```
    pub fn tls(mut self, tls: TlsOptions) -> Self {
        self.tls = Some(tls);
        self
    }

    autobatch_core::setters! {
        /// Sets [`command_timeout`](Self::command_timeout).
        ///
        /// ```
        /// # use std::time::Duration;
        /// let o = autobatch_driver::ClientOptions::default().command_timeout(Duration::from_secs(2));
        /// assert_eq!(o.command_timeout, Duration::from_secs(2));
        /// ```
        command_timeout = Duration,
        /// Sets [`connect_timeout`](Self::connect_timeout).
        ///
        /// ```
        /// # use std::time::Duration;
        /// let o = autobatch_driver::ClientOptions::default().connect_timeout(Duration::from_secs(1));
        /// assert_eq!(o.connect_timeout, Duration::from_secs(1));
        /// ```
        connect_timeout = Duration,
        /// Sets [`batching`](Self::batching); `None` turns auto-batching off.
        ///
        /// ```
        /// let o = autobatch_driver::ClientOptions::default().batching(None);
        /// assert!(o.batching.is_none());
        /// ```
        batching = Option<BatchConfig>,
        /// Sets [`max_in_flight_commands`](Self::max_in_flight_commands).
        ///
        /// ```
        /// let o = autobatch_driver::ClientOptions::default().max_in_flight_commands(10);
        /// assert_eq!(o.max_in_flight_commands, 10);
        /// ```
        max_in_flight_commands = usize,
        /// Sets [`full_window_wait`](Self::full_window_wait); `None` refills the window as
        /// soon as a slot is free.
        ///
        /// ```
        /// # use std::time::Duration;
        /// let o = autobatch_driver::ClientOptions::default()
        ///     .full_window_wait(Some(Duration::from_millis(1)));
        /// assert_eq!(o.full_window_wait, Some(Duration::from_millis(1)));
        /// assert!(o.validate().is_ok());
        /// assert!(o.full_window_wait(Some(Duration::ZERO)).validate().is_err());
        /// ```
        full_window_wait = Option<Duration>,
        /// Sets [`max_command_timeouts`](Self::max_command_timeouts).
        ///
        /// ```
        /// let o = autobatch_driver::ClientOptions::default().max_command_timeouts(1);
        /// assert_eq!(o.max_command_timeouts, 1);
        /// ```
        max_command_timeouts = u32,
        /// Sets [`ping_interval`](Self::ping_interval).
        ///
        /// ```
        /// let o = autobatch_driver::ClientOptions::default().ping_interval(None);
        /// assert!(o.ping_interval.is_none());
        /// ```
        ping_interval = Option<Duration>,
        /// Sets [`stall_timeout`](Self::stall_timeout).
        ///
        /// ```
        /// # use std::time::Duration;
        /// let o = autobatch_driver::ClientOptions::default().stall_timeout(Duration::from_millis(500));
        /// assert_eq!(o.stall_timeout, Duration::from_millis(500));
        /// ```
        stall_timeout = Duration,
        /// Sets [`shared_storage`](Self::shared_storage): the brokers share one PostgreSQL
        /// database, so a job's lock token and a custom id mean the same on every broker.
        ///
        /// ```
        /// let o = autobatch_driver::ClientOptions::new("10.0.0.1", 6789)
        ///     .broker("10.0.0.2", 6789)
        ///     .shared_storage(true);
        /// assert!(o.shared_storage);
        /// ```
        shared_storage = bool,
        /// Sets [`idempotent_adds`](Self::idempotent_adds): every add carries a job id, so
        /// that a lost connection never leaves an add "maybe applied" while its job is kept.
        ///
        /// ```
        /// let o = autobatch_driver::ClientOptions::default().idempotent_adds(true);
        /// assert!(o.idempotent_adds);
        /// ```
        idempotent_adds = bool,
        /// Sets [`reconnect`](Self::reconnect).
        ///
        /// ```
        /// # use std::time::Duration;
        /// use autobatch_driver::ReconnectConfig;
        /// let r = ReconnectConfig::default().base(Duration::from_millis(10));
        /// let o = autobatch_driver::ClientOptions::default().reconnect(r);
        /// assert_eq!(o.reconnect.base, Duration::from_millis(10));
        /// ```
        reconnect = ReconnectConfig,
    }

    /// Checks every field; the first problem is reported with the field's name.
    ///
    /// ```
    /// use autobatch_driver::{ClientOptions, OptionsError};
    /// let err = ClientOptions::default().max_in_flight_commands(0).validate().unwrap_err();
    /// assert_eq!(err.to_string(), "max_in_flight_commands must be at least 1");
    /// ```
    pub fn validate(&self) -> Result<(), OptionsError> {
        self.session_config(None).map(|_| ())
    }

    pub(crate) fn session_config(
        &self,
        worker: Option<WorkerConfig>,
    ) -> Result<SessionConfig, OptionsError> {
        if self.host.is_empty() {
            return Err(OptionsError::Field {
                field: "host",
                problem: "must not be empty",
            });
        }
        if self.port == 0 {
            return Err(OptionsError::Field {
                field: "port",
                problem: "must be within 1..=65535",
            });
        }
        let mut seen: Vec<(String, u16)> = vec![(self.host.to_ascii_lowercase(), self.port)];
        for (host, port) in &self.extra_brokers {
            if host.is_empty() {
                return Err(OptionsError::Field {
                    field: "extra_brokers",
                    problem: "must not hold an empty host",
                });
            }
            if *port == 0 {
                return Err(OptionsError::Field {
                    field: "extra_brokers",
                    problem: "must hold ports within 1..=65535",
                });
            }
            let key = (host.to_ascii_lowercase(), *port);
            if seen.contains(&key) {
                return Err(OptionsError::DuplicateBroker(format!("{host}:{port}")));
            }
            seen.push(key);
        }
        if self.stall_timeout.is_zero() {
            return Err(OptionsError::Field {
                field: "stall_timeout",
                problem: "must be positive",
            });
        }
        if self.connect_timeout.is_zero() {
            return Err(OptionsError::Field {
                field: "connect_timeout",
                problem: "must be positive",
            });
        }
        // Checked here first so that the error names which batcher is wrong (the session's
        // own check says only "batching").
        if let Some(b) = &self.batching {
            b.validate().map_err(|e| OptionsError::Setting {
                field: "batching",
                problem: e.to_string(),
            })?;
        }
        if let Some(w) = &worker {
            w.acks.validate().map_err(|e| OptionsError::Setting {
                field: "worker.acks",
                problem: e.to_string(),
            })?;
        }
        let config = match &self.token {
            Some(t) => SessionConfig::default().with_token(t.clone()),
            None => SessionConfig::default(),
        };
        let config = config
            .batching(self.batching.clone())
            .max_in_flight_commands(self.max_in_flight_commands)
            .full_window_wait(self.full_window_wait)
            .command_timeout(self.command_timeout)
            .max_command_timeouts(self.max_command_timeouts)
            .ping_interval(self.ping_interval)
            .reconnect(self.reconnect)
            .worker(worker);
        config.validate().map_err(OptionsError::from_session)?;
        Ok(config)
    }
}

/// What a [`Worker`](crate::Worker) works on and how.
///
/// ```
/// use autobatch_driver::WorkerOptions;
/// let opts = WorkerOptions::new("emails").concurrency(10);
/// assert_eq!(opts.concurrency, 10);
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct WorkerOptions {
    /// The queue to work.
    pub queue: String,
    /// Most jobs processed at once: any number from 1 (thousands suit I/O-bound processors).
    /// Each pull asks for the free slots, at most 1,000 at a time (bunqueue's clients cap
    /// their pulls the same way), so a larger concurrency fills over several pulls.
    /// Default 1.
    pub concurrency: usize,
    /// Long-poll time of each pull (at most 60 s). Default 1 s.
    pub poll_timeout: Duration,
    /// How long a pulled job stays locked to this worker. Default 30 s.
    pub lock_ttl: Duration,
    /// ACK batching: completions are sent together as ACKB. Default 10 per ACKB, 50 ms linger.
    pub acks: BatchConfig,
    /// Worker id sent as the pull `owner`. Default `autobatch-<queue>-<pid>-<n>`: unique per
    /// process (the pid) and per worker within it (a process-wide counter), so two processes
    /// working the same queue never share an owner.
    pub owner: Option<String>,
    /// How often the locks of the jobs being processed are renewed (JobHeartbeatB), so a job
    /// that runs longer than `lock_ttl` stays with this worker. Default 10 s (bunqueue's), or
    /// half of `lock_ttl` when that is shorter; `None` sends no heartbeats.
    pub heartbeat_interval: Option<Duration>,
    /// Client-side rate limit: at most `max` jobs pulled per `window`. Default `None`.
    pub limiter: Option<(u32, Duration)>,
    /// The name the worker registers under (`ListWorkers`). Default: the queue's name, as
    /// bunqueue's worker.
    pub name: Option<String>,
    /// Remove each job this worker completes, whatever the job's own option (the TS worker's
    /// `removeOnComplete`). Default false.
    pub remove_on_complete: bool,
    /// Remove each job whose failure by this worker is final, whatever the job's own option
    /// (the TS worker's `removeOnFail`). Default false.
    pub remove_on_fail: bool,
}

/// bunqueue's worker heartbeat period.
const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(10);

impl WorkerOptions {
    /// Defaults, for `queue`.
    ///
    /// ```
    /// let opts = autobatch_driver::WorkerOptions::new("emails");
    /// assert_eq!(opts.concurrency, 1);
    /// ```
    pub fn new(queue: impl Into<String>) -> Self {
        let c = WorkerConfig::new(queue);
        WorkerOptions {
            queue: c.queue,
            concurrency: c.concurrency,
            poll_timeout: c.poll_timeout,
            lock_ttl: c.lock_ttl,
            acks: c.acks,
            owner: None,
            heartbeat_interval: Some(DEFAULT_HEARTBEAT),
            limiter: None,
            name: None,
            remove_on_complete: false,
            remove_on_fail: false,
        }
    }

    autobatch_core::setters! {
        /// Sets [`concurrency`](Self::concurrency).
        ///
        /// ```
        /// let o = autobatch_driver::WorkerOptions::new("q").concurrency(4);
        /// assert_eq!(o.concurrency, 4);
        /// ```
        concurrency = usize,
        /// Sets [`poll_timeout`](Self::poll_timeout).
        ///
        /// ```
        /// # use std::time::Duration;
        /// let o = autobatch_driver::WorkerOptions::new("q").poll_timeout(Duration::from_millis(200));
        /// assert_eq!(o.poll_timeout, Duration::from_millis(200));
        /// ```
        poll_timeout = Duration,
        /// Sets [`lock_ttl`](Self::lock_ttl).
        ///
        /// ```
        /// # use std::time::Duration;
        /// let o = autobatch_driver::WorkerOptions::new("q").lock_ttl(Duration::from_secs(60));
        /// assert_eq!(o.lock_ttl, Duration::from_secs(60));
        /// ```
        lock_ttl = Duration,
        /// Sets [`acks`](Self::acks).
        ///
        /// ```
        /// use autobatch_driver::BatchConfig;
        /// let o = autobatch_driver::WorkerOptions::new("q")
        ///     .acks(BatchConfig::new().max_batch(20));
        /// assert_eq!(o.acks.max_batch, 20);
        /// ```
        acks = BatchConfig,
        /// Sets [`heartbeat_interval`](Self::heartbeat_interval).
        ///
        /// ```
        /// # use std::time::Duration;
        /// let o = autobatch_driver::WorkerOptions::new("q").heartbeat_interval(None);
        /// assert_eq!(o.heartbeat_interval, None);
        /// ```
        heartbeat_interval = Option<Duration>,
        /// Sets [`remove_on_complete`](Self::remove_on_complete).
        ///
        /// ```
        /// let o = autobatch_driver::WorkerOptions::new("q").remove_on_complete(true);
        /// assert!(o.remove_on_complete);
        /// ```
        remove_on_complete = bool,
        /// Sets [`remove_on_fail`](Self::remove_on_fail).
        ///
        /// ```
        /// let o = autobatch_driver::WorkerOptions::new("q").remove_on_fail(true);
        /// assert!(o.remove_on_fail);
        /// ```
        remove_on_fail = bool,
    }

    /// Sets [`owner`](Self::owner).
    ///
    /// ```
    /// let o = autobatch_driver::WorkerOptions::new("q").owner("host-1");
    /// assert_eq!(o.owner.as_deref(), Some("host-1"));
    /// ```
    pub fn owner(mut self, owner: impl Into<String>) -> Self {
        self.owner = Some(owner.into());
        self
    }

    /// Pulls at most `max` jobs per `window` (a client-side limiter, as BullMQ's worker
    /// `limiter: {max, duration}`).
    ///
    /// ```
    /// use std::time::Duration;
    /// let o = autobatch_driver::WorkerOptions::new("q").limiter(10, Duration::from_secs(1));
    /// assert_eq!(o.limiter, Some((10, Duration::from_secs(1))));
    /// ```
    pub fn limiter(mut self, max: u32, window: Duration) -> Self {
        self.limiter = Some((max, window));
        self
    }

    /// Sets the name the worker registers under.
    ///
    /// ```
    /// let o = autobatch_driver::WorkerOptions::new("q").name("mailer");
    /// assert_eq!(o.name.as_deref(), Some("mailer"));
    /// ```
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    pub(crate) fn worker_config(&self) -> Result<WorkerConfig, OptionsError> {
        let mut c = WorkerConfig::new(self.queue.clone())
            .concurrency(self.concurrency)
            .poll_timeout(self.poll_timeout)
            .lock_ttl(self.lock_ttl)
            .acks(self.acks.clone())
            .limiter(self.limiter)
            .remove_on_complete(self.remove_on_complete)
            .remove_on_fail(self.remove_on_fail);
        c.heartbeat_interval = match self.heartbeat_interval {
            // The default adapts to a short lock; an interval the caller chose is kept as is
            // (and refused if it is not shorter than the lock).
            Some(DEFAULT_HEARTBEAT) if self.lock_ttl <= DEFAULT_HEARTBEAT => {
                Some(self.lock_ttl / 2)
            }
            other => other,
        };
        c.owner = match &self.owner {
            Some(o) => o.clone(),
            None => default_owner(&self.queue),
        };
        Ok(c)
    }
}

/// `autobatch-<queue>-<pid>-<n>`: the core cannot read the pid, the driver can.
fn default_owner(queue: &str) -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("autobatch-{queue}-{}-{n}", std::process::id())
}

/// An option out of range. Local misuse: fix the options.
///
/// ```
/// use autobatch_driver::{BatchConfig, ClientOptions, OptionsError};
/// let err = ClientOptions::new("h", 0).validate().unwrap_err();
/// assert!(matches!(err, OptionsError::Field { field: "port", .. }));
///
/// let no_batch = ClientOptions::default().batching(Some(BatchConfig::new().max_batch(0)));
/// let err = no_batch.validate().unwrap_err();
/// assert!(matches!(err, OptionsError::Setting { field: "batching", .. }));
/// assert_eq!(err.to_string(), "batching: max_batch must be at least 1");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OptionsError {
    /// A field of the options.
    #[error("{field} {problem}")]
    Field {
        /// The field's name.
        field: &'static str,
        /// What is wrong.
        problem: &'static str,
    },
    /// A setting out of range whose problem names the value given: a batching limit
    /// (`field` is `batching` for adds, `worker.acks` for a worker's completions).
    #[error("{field}: {problem}")]
    Setting {
        /// The setting's name.
        field: &'static str,
        /// What is wrong, with the value given.
        problem: String,
    },
    /// The same broker (`host:port`, host compared without case) is given twice.
    #[error("broker {0} is given twice")]
    DuplicateBroker(String),
    /// No broker address at all ([`ClientOptions::from_addrs`] with an empty list).
    #[error("no broker address given")]
    NoBroker,
}

impl OptionsError {
    /// The session's own check of the settings, in the driver's terms (a crate-private
    /// conversion, so the core's error type stays out of the public API).
    pub(crate) fn from_session(e: ConfigError) -> Self {
        match e {
            ConfigError::Field { field, problem } => OptionsError::Field { field, problem },
            ConfigError::Batching(e) => OptionsError::Setting {
                field: "batching",
                problem: e.to_string(),
            },
            other => OptionsError::Setting {
                field: "session",
                problem: other.to_string(),
            },
        }
    }
}

/// Why `Client::connect` or `Worker::start` did not give a connected client.
///
/// ```
/// use autobatch_driver::{ConnectError, OptionsError};
/// let e = ConnectError::Options(OptionsError::Field { field: "host", problem: "must not be empty" });
/// assert_eq!(e.to_string(), "invalid options: host must not be empty");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The options are invalid; nothing was attempted.
    #[error("invalid options: {0}")]
    Options(#[from] OptionsError),
    /// The TCP connection could not be opened.
    #[error("connect failed: {0}")]
    Io(#[from] io::Error),
    /// The TCP connection did not open within `connect_timeout`.
    #[error("connect timed out")]
    Timeout,
    /// The connection opened, but the server refused it ([`Error::AuthFailed`]) or did not
    /// answer the first request ([`Error::Timeout`], [`Error::ConnectionLost`]).
    #[error("handshake failed: {0}")]
    Handshake(Error),
    /// TLS failed: the server's certificate was refused (unknown issuer, wrong name, expired…),
    /// the TLS handshake failed, or the TLS settings are unusable. Match on
    /// [`TlsError::kind`]. A certificate problem is not transient, so the first connect is
    /// not retried.
    #[error("TLS failed: {0}")]
    Tls(#[from] TlsError),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worker_error(w: WorkerOptions) -> OptionsError {
        let config = w.worker_config().expect("worker config");
        ClientOptions::default()
            .session_config(Some(config))
            .expect_err("invalid worker options")
    }

    #[test]
    fn any_concurrency_from_one_is_accepted() {
        for n in [1, 1_000, 1_001, 5_000] {
            let config = WorkerOptions::new("q").concurrency(n).worker_config();
            assert!(
                ClientOptions::default()
                    .session_config(Some(config.expect("worker config")))
                    .is_ok(),
                "concurrency {n}"
            );
        }
    }

    #[test]
    fn worker_settings_are_refused_with_their_name() {
        assert_eq!(
            worker_error(WorkerOptions::new("q").acks(BatchConfig::new().max_batch(0))),
            OptionsError::Setting {
                field: "worker.acks",
                problem: "max_batch must be at least 1".into(),
            }
        );
        assert!(matches!(
            worker_error(WorkerOptions::new("q").concurrency(0)),
            OptionsError::Field {
                field: "worker.concurrency",
                ..
            }
        ));
    }
}
