//! Broker settings.

use std::path::PathBuf;
use std::time::Duration;

use crate::store::SqliteOptions;

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
    /// A connection holding an incomplete frame for this long is closed (bunqueue: 60 s).
    pub partial_frame_timeout: Option<Duration>,
    /// Runtime threads of an [`EmbeddedBroker`](crate::EmbeddedBroker).
    pub worker_threads: usize,
    /// How the SQLite store waits and retries when a commit fails (SQLite mode only).
    pub sqlite: SqliteOptions,
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
            worker_threads: 2,
            sqlite: SqliteOptions::default(),
        }
    }
}

impl BrokerConfig {
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
}
