//! `autobatch-broker`: serve bunqueue's TCP protocol from the command line.

use std::path::PathBuf;

use autobatch_broker::{Broker, BrokerConfig};
use clap::Parser;

/// A bunqueue 2.9.5-compatible broker (memory, or SQLite with --data-path).
#[derive(Parser, Debug)]
#[command(name = "autobatch-broker", version)]
struct Args {
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Port to bind (0 = pick a free one).
    #[arg(long, default_value_t = 6789)]
    port: u16,
    /// SQLite database file; without it jobs live in memory only.
    #[arg(long)]
    data_path: Option<PathBuf>,
    /// Accepted auth token (repeatable); with any, clients must Auth first.
    #[arg(long = "auth-token")]
    auth_tokens: Vec<String>,
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let args = Args::parse();
    let config = BrokerConfig {
        host: args.host,
        port: args.port,
        data_path: args.data_path,
        auth_tokens: args.auth_tokens,
        ..BrokerConfig::default()
    };
    let broker = Broker::bind(config).await?;
    println!("listening on {}", broker.local_addr());
    let stop = broker.shutdown_handle();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            stop.shutdown();
        }
    });
    broker.serve().await
}
