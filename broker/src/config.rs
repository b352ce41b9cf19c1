//! Broker settings.

use std::path::PathBuf;
use std::time::Duration;

use crate::store::SqliteOptions;
use crate::tls::BrokerTls;

/// How a [`Broker`](crate::Broker) listens, stores and limits.
///
/// ```
/// use autobatch_broker::BrokerConfig;
/// let memory = BrokerConfig::default(); // 127.0.0.1, port picked by the OS, no storage
/// assert_eq!(memory.port, 0);
/// let sqlite = BrokerConfig::default().data_path("/tmp/jobs.db").auth_token("secret");
/// assert!(sqlite.data_path.is_some());
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct BrokerConfig {
    /// Address to bind (default `127.0.0.1`).
    pub host: String,
    /// Port to bind; 0 lets the OS pick (see [`Broker::local_addr`](crate::Broker::local_addr)).
    pub port: u16,
    /// SQLite database file; `None` keeps everything in memory only.
    pub data_path: Option<PathBuf>,
    /// Accepted tokens; when non-empty every connection must `Auth` first.
    pub auth_tokens: Vec<String>,
    /// Requests handled at once per connection (bunqueue: 50); further frames wait.
    pub max_handlers_per_connection: usize,
    /// Reply bytes a connection may have queued before the broker stops reading from it.
    pub write_pause_bytes: usize,
    /// Reply bytes queued past which the connection is closed (bunqueue: 64 MiB).
    pub max_write_queue_bytes: usize,
    /// A connection holding an incomplete frame this long after the frame's first byte is
    /// closed without a reply (bunqueue: 60 s, `TCP_IDLE_TIMEOUT_MS`). The deadline is fixed
    /// when the frame starts: later bytes do not extend it, so a trickle cannot hold a partial
    /// frame forever. `None` disables it. A connection holding no partial frame is never closed
    /// for being idle (as bunqueue).
    pub partial_frame_timeout: Option<Duration>,
    /// Bytes that all connections together may hold in incomplete frames (default 256 MiB).
    /// A connection whose growing frame would pass it gets one error frame and is closed.
    pub partial_frame_budget: usize,
    /// Largest frame a connection may send before it authenticates, when
    /// [`auth_tokens`](Self::auth_tokens) are configured (default 64 KiB). Checked from the
    /// length header, before the body is buffered: one error frame, then the connection closes.
    pub max_unauthenticated_frame: usize,
    /// Open connections past which a new one gets one error frame and is closed at once
    /// (default 10,000; bunqueue has no such limit).
    pub max_connections: usize,
    /// Runtime threads of an [`EmbeddedBroker`](crate::EmbeddedBroker).
    pub worker_threads: usize,
    /// How the SQLite store waits and retries when a commit fails (SQLite mode only).
    pub sqlite: SqliteOptions,
    /// Serve TLS instead of plain TCP on the port (as bunqueue does with `TLS_CERT_FILE` and
    /// `TLS_KEY_FILE`). A client that has not finished its handshake within 10 s is dropped.
    /// Default `None`: plain TCP.
    pub tls: Option<BrokerTls>,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        BrokerConfig {
            host: "127.0.0.1".into(),
            port: 0,
            data_path: None,
            auth_tokens: Vec::new(),
            max_handlers_per_connection: 50,
            write_pause_bytes: 4 * 1024 * 1024,
            max_write_queue_bytes: 64 * 1024 * 1024,
            partial_frame_timeout: Some(Duration::from_secs(60)),
            partial_frame_budget: 256 * 1024 * 1024,
            max_unauthenticated_frame: 64 * 1024,
            max_connections: 10_000,
            worker_threads: 2,
            sqlite: SqliteOptions::default(),
            tls: None,
        }
    }
}

impl BrokerConfig {
    /// Sets [`host`](Self::host), the address to bind.
    ///
    /// ```
    /// let config = autobatch_broker::BrokerConfig::default().host("0.0.0.0");
    /// assert_eq!(config.host, "0.0.0.0");
    /// ```
    pub fn host(mut self, host: impl Into<String>) -> Self {
        self.host = host.into();
        self
    }

    /// Serves TLS with this certificate and key ([`tls`](Self::tls)).
    ///
    /// ```no_run
    /// use autobatch_broker::{BrokerConfig, BrokerTls};
    /// let tls = BrokerTls::from_pem_files("server.pem", "server.key")?;
    /// let config = BrokerConfig::default().tls(tls);
    /// assert!(config.tls.is_some());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn tls(mut self, tls: BrokerTls) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Sets [`port`](Self::port).
    pub fn port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// Sets [`data_path`](Self::data_path): SQLite mode.
    pub fn data_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.data_path = Some(path.into());
        self
    }

    /// Adds one accepted token.
    pub fn auth_token(mut self, token: impl Into<String>) -> Self {
        self.auth_tokens.push(token.into());
        self
    }

    /// Sets [`max_connections`](Self::max_connections).
    ///
    /// ```
    /// use autobatch_broker::BrokerConfig;
    /// let config = BrokerConfig::default().max_connections(100);
    /// assert_eq!(config.max_connections, 100);
    /// ```
    pub fn max_connections(mut self, n: usize) -> Self {
        self.max_connections = n;
        self
    }

    /// Sets [`partial_frame_timeout`](Self::partial_frame_timeout); `None` disables it.
    ///
    /// ```
    /// use std::time::Duration;
    /// use autobatch_broker::BrokerConfig;
    /// let config = BrokerConfig::default().partial_frame_timeout(Some(Duration::from_secs(5)));
    /// assert_eq!(config.partial_frame_timeout, Some(Duration::from_secs(5)));
    /// ```
    pub fn partial_frame_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.partial_frame_timeout = timeout;
        self
    }

    /// Sets [`partial_frame_budget`](Self::partial_frame_budget), in bytes.
    ///
    /// ```
    /// use autobatch_broker::BrokerConfig;
    /// let config = BrokerConfig::default().partial_frame_budget(16 * 1024 * 1024);
    /// assert_eq!(config.partial_frame_budget, 16 * 1024 * 1024);
    /// ```
    pub fn partial_frame_budget(mut self, bytes: usize) -> Self {
        self.partial_frame_budget = bytes;
        self
    }

    /// Sets [`max_unauthenticated_frame`](Self::max_unauthenticated_frame), in bytes.
    ///
    /// ```
    /// use autobatch_broker::BrokerConfig;
    /// let config = BrokerConfig::default().auth_token("secret").max_unauthenticated_frame(4096);
    /// assert_eq!(config.max_unauthenticated_frame, 4096);
    /// ```
    pub fn max_unauthenticated_frame(mut self, bytes: usize) -> Self {
        self.max_unauthenticated_frame = bytes;
        self
    }

    /// Sets [`max_handlers_per_connection`](Self::max_handlers_per_connection) (at least 1 is
    /// used).
    ///
    /// ```
    /// use autobatch_broker::BrokerConfig;
    /// let config = BrokerConfig::default().max_handlers_per_connection(8);
    /// assert_eq!(config.max_handlers_per_connection, 8);
    /// ```
    pub fn max_handlers_per_connection(mut self, n: usize) -> Self {
        self.max_handlers_per_connection = n;
        self
    }
}
