//! The TCP side: the broker's start, its accept loop and its timers (the sweep of running
//! jobs, the job schedulers); each accepted connection is served by `connection`.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use autobatch_core::wire::Value;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;

use crate::clock::now_ms;
use crate::config::BrokerConfig;
use crate::connection::{connection, stopped};
use crate::context::Shared;
use crate::dispatch::{error_frame, max_large_decodes};
use crate::error::context;
use crate::framing::Budget;
use crate::queue::State;
use crate::store::settings::SettingsStore;
use crate::store::{MemoryStore, SqliteStore, Store};

/// Longest wait of the scheduler timer, ms: how soon a newly upserted scheduler is seen.
const CRON_POLL_MS: f64 = 50.0;

/// How often running jobs are checked for a timeout (stall detection and expired locks run on
/// bunqueue's slower 5 s period inside the sweep). bunqueue times jobs out on a timer: a
/// quarter second keeps a job's `timeout` close without costing much.
const LOCK_SWEEP: Duration = Duration::from_millis(250);

/// A bound, not yet serving, bunqueue-compatible broker.
///
/// ```
/// use autobatch_broker::{Broker, BrokerConfig};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// let broker = Broker::bind(BrokerConfig::default()).await?;
/// let addr = broker.local_addr();
/// let stop = broker.shutdown_handle();
/// let serving = tokio::spawn(broker.serve());
/// // … clients connect to `addr` …
/// # let _ = addr;
/// stop.shutdown();
/// serving.await.unwrap()?;
/// # Ok(())
/// # }
/// ```
pub struct Broker {
    listener: TcpListener,
    shared: Arc<Shared>,
    shutdown: ShutdownHandle,
}

impl std::fmt::Debug for Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broker")
            .field("addr", &self.local_addr())
            .finish()
    }
}

/// Stops a serving [`Broker`]: it stops accepting and reading, lets the requests already in
/// flight finish and answers them (a long-poll answers at once, empty), closes every connection
/// (their pulled jobs go back to waiting), commits what is pending and returns from
/// [`Broker::serve`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// let broker = autobatch_broker::Broker::bind(Default::default()).await?;
/// let stop = broker.shutdown_handle();
/// stop.shutdown(); // may come before serve(): serve then returns at once
/// broker.serve().await
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct ShutdownHandle {
    tx: Arc<watch::Sender<bool>>,
}

impl ShutdownHandle {
    /// Asks the broker to stop. Idempotent.
    pub fn shutdown(&self) {
        self.tx.send_replace(true);
    }
}

impl Broker {
    /// Opens the storage (recovering the jobs of an earlier run in SQLite mode) and binds the
    /// listener. Port 0 picks a free port.
    pub async fn bind(config: BrokerConfig) -> io::Result<Broker> {
        let store: Box<dyn Store> = match &config.data_path {
            Some(path) => Box::new(SqliteStore::open_with(path, config.sqlite.clone()).map_err(
                |e| {
                    context(
                        e,
                        format_args!("cannot open the SQLite database at {}", path.display()),
                    )
                },
            )?),
            None => Box::new(MemoryStore::new()),
        };
        let mut state = State::new(store, now_ms()).map_err(|e| match &config.data_path {
            Some(path) => context(
                e,
                format_args!("cannot recover the jobs stored at {}", path.display()),
            ),
            None => e,
        })?;
        if let Some(path) = &config.data_path {
            let settings = SettingsStore::open(path, config.sqlite.busy_timeout)
                .and_then(|s| state.attach_settings(s, now_ms()));
            settings.map_err(|e| {
                context(
                    e,
                    format_args!("cannot recover the settings stored at {}", path.display()),
                )
            })?;
        }
        let listener = TcpListener::bind((config.host.as_str(), config.port))
            .await
            .map_err(|e| {
                context(
                    e,
                    format_args!("cannot listen on {}:{}", config.host, config.port),
                )
            })?;
        let (tx, stop) = watch::channel(false);
        let budget = Arc::new(Budget {
            used: AtomicUsize::new(0),
            max: config.partial_frame_budget,
        });
        Ok(Broker {
            listener,
            shared: Arc::new(Shared {
                state: Mutex::new(state),
                config,
                next_conn: AtomicU64::new(1),
                connections: AtomicUsize::new(0),
                budget,
                large_decodes: Semaphore::new(max_large_decodes()),
                stop,
            }),
            shutdown: ShutdownHandle { tx: Arc::new(tx) },
        })
    }

    /// The address the listener is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], 0)))
    }

    /// The state every connection shares (for [`EmbeddedBroker`](crate::EmbeddedBroker)'s
    /// introspection).
    pub(crate) fn shared(&self) -> Arc<Shared> {
        self.shared.clone()
    }

    /// A handle that stops [`serve`](Self::serve).
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        self.shutdown.clone()
    }

    /// Serves connections until [`ShutdownHandle::shutdown`], then answers the requests in
    /// flight, closes every connection and commits what the store still holds.
    pub async fn serve(self) -> io::Result<()> {
        let Broker {
            listener,
            shared,
            shutdown,
        } = self;
        let mut stop = shutdown.tx.subscribe();
        let mut conns = JoinSet::new();
        let sweeper = tokio::spawn({
            let shared = shared.clone();
            async move {
                let mut tick = tokio::time::interval(LOCK_SWEEP);
                loop {
                    tick.tick().await;
                    shared.lock().sweep(now_ms());
                }
            }
        });
        // Schedulers fire on their own timer, at their next run (bunqueue arms a timeout for
        // the earliest one), not on the sweep's quarter second, which would merge the runs of
        // a shorter interval into overlaps. The wait is capped so a new scheduler is seen soon.
        let cron_timer = tokio::spawn({
            let shared = shared.clone();
            async move {
                loop {
                    let now = now_ms();
                    let next = {
                        let mut state = shared.lock();
                        state.fire_crons(now);
                        state.crons().next_due()
                    };
                    let wait = next.map_or(CRON_POLL_MS, |t| (t - now).clamp(1.0, CRON_POLL_MS));
                    tokio::time::sleep(Duration::from_micros((wait * 1000.0) as u64)).await;
                }
            }
        });
        loop {
            tokio::select! {
                _ = stopped(&mut stop) => break,
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => {
                        // Only this loop adds connections, so the count cannot overshoot.
                        if shared.connections.load(Ordering::Acquire) >= shared.config.max_connections {
                            tracing::warn!(
                                max = shared.config.max_connections,
                                "connection refused: too many open connections"
                            );
                            refuse(stream);
                        } else {
                            shared.connections.fetch_add(1, Ordering::AcqRel);
                            conns.spawn(connection(shared.clone(), stream, shutdown.tx.subscribe()));
                        }
                    }
                    // Out of descriptors and the like: back off briefly, keep serving.
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(10)).await
                    }
                },
                Some(_) = conns.join_next(), if !conns.is_empty() => {}
            }
        }
        drop(listener);
        while conns.join_next().await.is_some() {}
        sweeper.abort();
        cron_timer.abort();
        let shared2 = shared.clone();
        tokio::task::spawn_blocking(move || shared2.lock().close_store())
            .await
            .map_err(io::Error::other)?;
        Ok(())
    }
}

/// A connection past `max_connections`: accepted and closed at once, after one error frame
/// that says why. Accepted rather than left in the listen backlog, where the client would sit
/// connected (the kernel completes the handshake) and unanswered until its own timeout, and
/// where it would hold a backlog slot that a client could use once a connection closes.
fn refuse(stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    // A fresh socket's send buffer is empty: this small write does not block or come short.
    let _ = stream.try_write(&error_frame(&Value::Undefined, "Too many connections"));
}
