//! The server a scenario runs against, as a parameter: the real bunqueue 2.9.5 server, or
//! autobatch's embedded broker. Scenarios ask for a shared server (one per
//! test binary and target, queues kept apart by name), a shared server with auth, or a
//! dedicated one they may kill.

use std::net::SocketAddr;
use std::sync::OnceLock;

use autobatch_broker::{BrokerConfig, EmbeddedBroker};

use crate::{BunqueueServer, ServerOptions, TestPki};

/// The token of the shared auth servers.
pub const AUTH_TOKEN: &str = "secret";

/// Which server implementation a scenario runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The real bunqueue 2.9.5 server (bun child process).
    Bunqueue,
    /// autobatch's own broker, in memory, on its own thread ([`EmbeddedBroker`]).
    Broker,
}

/// A server a scenario owns: it can be killed mid-test.
pub trait OwnedServer: Send {
    /// Its TCP address.
    fn addr(&self) -> SocketAddr;
    /// Stops it abruptly (every connection drops).
    fn kill(&mut self);
}

impl OwnedServer for BunqueueServer {
    fn addr(&self) -> SocketAddr {
        BunqueueServer::addr(self)
    }

    fn kill(&mut self) {
        let _ = BunqueueServer::kill(self);
    }
}

/// An embedded broker owned by one scenario, kept until it is killed.
struct OwnedBroker {
    addr: SocketAddr,
    broker: Option<EmbeddedBroker>,
}

impl OwnedBroker {
    fn new(broker: EmbeddedBroker) -> OwnedBroker {
        OwnedBroker {
            addr: broker.addr(),
            broker: Some(broker),
        }
    }
}

impl OwnedServer for OwnedBroker {
    fn addr(&self) -> SocketAddr {
        self.addr
    }

    fn kill(&mut self) {
        // Returns once every connection is closed and the broker's thread has ended, as a
        // killed process is gone when `kill` returns: a request sent after it meets a closed
        // connection, never a broker still finishing its shutdown.
        if let Some(broker) = self.broker.take() {
            let _ = broker.stop();
        }
    }
}

fn broker(config: BrokerConfig) -> EmbeddedBroker {
    EmbeddedBroker::start(config).unwrap_or_else(|e| panic!("embedded broker: {e}"))
}

fn bunqueue(opts: ServerOptions) -> BunqueueServer {
    BunqueueServer::start(opts).unwrap_or_else(|e| panic!("{e}"))
}

impl Target {
    /// A server shared by every scenario of this test binary (no auth).
    pub fn shared(self) -> SocketAddr {
        static BQ: OnceLock<BunqueueServer> = OnceLock::new();
        static BROKER: OnceLock<EmbeddedBroker> = OnceLock::new();
        match self {
            Target::Bunqueue => BQ.get_or_init(|| bunqueue(ServerOptions::memory())).addr(),
            Target::Broker => BROKER
                .get_or_init(|| broker(BrokerConfig::default()))
                .addr(),
        }
    }

    /// A shared server that requires [`AUTH_TOKEN`].
    pub fn shared_auth(self) -> SocketAddr {
        static BQ: OnceLock<BunqueueServer> = OnceLock::new();
        static BROKER: OnceLock<EmbeddedBroker> = OnceLock::new();
        match self {
            Target::Bunqueue => BQ
                .get_or_init(|| {
                    bunqueue(ServerOptions {
                        auth_tokens: Some(AUTH_TOKEN.into()),
                        ..ServerOptions::memory()
                    })
                })
                .addr(),
            Target::Broker => BROKER
                .get_or_init(|| broker(BrokerConfig::default().auth_token(AUTH_TOKEN)))
                .addr(),
        }
    }

    /// A server of this scenario's own.
    pub fn dedicated(self) -> Box<dyn OwnedServer> {
        match self {
            Target::Bunqueue => Box::new(bunqueue(ServerOptions::memory())),
            Target::Broker => Box::new(OwnedBroker::new(broker(BrokerConfig::default()))),
        }
    }

    /// A server of this scenario's own that serves TLS with `pki`'s server certificate
    /// (bunqueue through `TLS_CERT_FILE` / `TLS_KEY_FILE`, the broker through
    /// [`BrokerConfig::tls`]), on 127.0.0.1.
    pub fn dedicated_tls(self, pki: &TestPki) -> Box<dyn OwnedServer> {
        match self {
            Target::Bunqueue => Box::new(bunqueue(ServerOptions {
                tls: Some(pki.server_tls()),
                ..ServerOptions::memory()
            })),
            Target::Broker => Box::new(OwnedBroker::new(broker(
                BrokerConfig::default().tls(pki.broker_tls()),
            ))),
        }
    }
}
