//! `autobatch-broker`: serve bunqueue's TCP protocol from the command line.
//!
//! Every flag can also come from the environment: bunqueue's own names where it has the
//! setting (`HOST`, `TCP_PORT`, `DATA_PATH`, `AUTH_TOKENS`, `TCP_IDLE_TIMEOUT_MS`,
//! `TLS_CERT_FILE`, `TLS_KEY_FILE`, `LOG_LEVEL`), an `AUTOBATCH_` name otherwise. A flag wins
//! over its variable. Logs go to stderr through `tracing-subscriber`; stdout keeps its one
//! `listening on ADDR` line for scripts.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use autobatch_broker::{Broker, BrokerConfig, BrokerTls};
use clap::Parser;

/// A bunqueue 2.9.5-compatible broker (memory, or SQLite with --data-path).
#[derive(Parser, Debug)]
#[command(name = "autobatch-broker", version)]
struct Args {
    /// Address to bind.
    #[arg(long, env = "HOST", default_value = "127.0.0.1")]
    host: String,
    /// Port to bind (0 = pick a free one).
    #[arg(
        long,
        visible_alias = "tcp-port",
        env = "TCP_PORT",
        default_value_t = 6789
    )]
    port: u16,
    /// SQLite database file; without it jobs live in memory only.
    #[arg(long, env = "DATA_PATH")]
    data_path: Option<PathBuf>,
    /// Accepted auth tokens (repeatable, or comma-separated, so a token cannot hold a comma);
    /// with any, clients must Auth first.
    #[arg(
        long = "auth-token",
        visible_alias = "auth-tokens",
        env = "AUTH_TOKENS",
        value_delimiter = ',',
        // --help would otherwise print the tokens found in the environment.
        hide_env_values = true
    )]
    auth_tokens: Vec<String>,
    /// Open connections past which new ones get an error frame and are closed [default: 10000].
    #[arg(long, env = "AUTOBATCH_MAX_CONNECTIONS")]
    max_connections: Option<usize>,
    /// Milliseconds an incomplete frame may take from its first byte; 0 disables
    /// [default: 60000].
    #[arg(long, env = "TCP_IDLE_TIMEOUT_MS")]
    partial_frame_timeout_ms: Option<u64>,
    /// Bytes all connections together may hold in incomplete frames [default: 268435456].
    #[arg(long, env = "AUTOBATCH_PARTIAL_FRAME_BUDGET")]
    partial_frame_budget: Option<usize>,
    /// Requests handled at once per connection [default: 50].
    #[arg(long, env = "AUTOBATCH_MAX_HANDLERS_PER_CONNECTION")]
    max_handlers_per_connection: Option<usize>,
    /// Largest frame, in bytes, accepted before Auth when tokens are set [default: 65536].
    #[arg(long, env = "AUTOBATCH_MAX_UNAUTHENTICATED_FRAME")]
    max_unauthenticated_frame: Option<usize>,
    /// PEM certificate chain: serve TLS (with --tls-key), as bunqueue does.
    #[arg(long, env = "TLS_CERT_FILE")]
    tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, env = "TLS_KEY_FILE")]
    tls_key: Option<PathBuf>,
    /// Least severe log level written to stderr: error, warn, info, debug or trace (any case,
    /// as bunqueue's LOG_LEVEL).
    #[arg(long, env = "LOG_LEVEL", default_value = "info")]
    log_level: tracing::Level,
}

impl Args {
    /// The settings, or why they cannot be used (a TLS file that cannot be loaded).
    fn config(self) -> std::io::Result<BrokerConfig> {
        // `BrokerConfig` is non-exhaustive: start from the defaults and set what was given.
        let mut c = BrokerConfig::default().host(self.host).port(self.port);
        c.data_path = self.data_path;
        c.auth_tokens = self
            .auth_tokens
            .into_iter()
            .filter(|t| !t.is_empty())
            .collect();
        if let Some(n) = self.max_connections {
            c.max_connections = n;
        }
        if let Some(ms) = self.partial_frame_timeout_ms {
            c.partial_frame_timeout = (ms > 0).then(|| Duration::from_millis(ms));
        }
        if let Some(n) = self.partial_frame_budget {
            c.partial_frame_budget = n;
        }
        if let Some(n) = self.max_handlers_per_connection {
            c.max_handlers_per_connection = n;
        }
        if let Some(n) = self.max_unauthenticated_frame {
            c.max_unauthenticated_frame = n;
        }
        // As bunqueue: one without the other is a mistake, not plain TCP.
        c.tls = match (self.tls_cert, self.tls_key) {
            (Some(cert), Some(key)) => Some(BrokerTls::from_pem_files(cert, key)?),
            (None, None) => None,
            (Some(_), None) => {
                return Err(misconfigured(
                    "--tls-cert is set but --tls-key (TLS_KEY_FILE) is missing",
                ))
            }
            (None, Some(_)) => {
                return Err(misconfigured(
                    "--tls-key is set but --tls-cert (TLS_CERT_FILE) is missing",
                ))
            }
        };
        Ok(c)
    }
}

fn misconfigured(what: &str) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!("TLS misconfigured: {what}"),
    )
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_max_level(args.log_level)
        .with_writer(std::io::stderr)
        .init();
    match async { run(args.config()?).await }.await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Display: the message names what failed and on what path (see Broker::bind).
            eprintln!("autobatch-broker: {e}");
            ExitCode::from(1)
        }
    }
}

async fn run(config: BrokerConfig) -> std::io::Result<()> {
    let broker_tls = config.tls.is_some();
    let broker = Broker::bind(config).await?;
    // The first line stays `listening on ADDR` (scripts parse it); TLS is said on stderr.
    println!("listening on {}", broker.local_addr());
    tracing::info!(addr = %broker.local_addr(), tls = broker_tls, "autobatch-broker listening");
    if broker_tls {
        eprintln!("autobatch-broker: serving TLS");
    }
    let stop = broker.shutdown_handle();
    tokio::spawn(async move {
        stop_signal().await;
        // Stop accepting, answer what is in flight, commit the store, exit 0.
        stop.shutdown();
    });
    broker.serve().await
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM (what `kill`, systemd and container runtimes send).
async fn stop_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
                return;
            }
            Err(e) => eprintln!("autobatch-broker: SIGTERM will not stop cleanly: {e}"),
        }
    }
    if tokio::signal::ctrl_c().await.is_err() {
        // No signal handling at all: serve until killed.
        std::future::pending::<()>().await;
    }
}
