//! The server a scenario runs against, as a parameter: the real bunqueue 2.9.5 server, or
//! (once it exists) autobatch's embedded broker. Scenarios ask for a shared server (one per
//! test binary and target, queues kept apart by name), a shared server with auth, or a
//! dedicated one they may kill.

use std::net::SocketAddr;
use std::sync::OnceLock;

use crate::{BunqueueServer, ServerOptions};

/// The token of the shared auth servers.
pub const AUTH_TOKEN: &str = "secret";

/// Which server implementation a scenario runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The real bunqueue 2.9.5 server (bun child process).
    Bunqueue,
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

fn bunqueue(opts: ServerOptions) -> BunqueueServer {
    BunqueueServer::start(opts).unwrap_or_else(|e| panic!("{e}"))
}

impl Target {
    /// A server shared by every scenario of this test binary (no auth).
    pub fn shared(self) -> SocketAddr {
        static BQ: OnceLock<BunqueueServer> = OnceLock::new();
        match self {
            Target::Bunqueue => BQ.get_or_init(|| bunqueue(ServerOptions::memory())).addr(),
        }
    }

    /// A shared server that requires [`AUTH_TOKEN`].
    pub fn shared_auth(self) -> SocketAddr {
        static BQ: OnceLock<BunqueueServer> = OnceLock::new();
        match self {
            Target::Bunqueue => BQ
                .get_or_init(|| {
                    bunqueue(ServerOptions {
                        auth_tokens: Some(AUTH_TOKEN.into()),
                        ..ServerOptions::memory()
                    })
                })
                .addr(),
        }
    }

    /// A server of this scenario's own.
    pub fn dedicated(self) -> Box<dyn OwnedServer> {
        match self {
            Target::Bunqueue => Box::new(bunqueue(ServerOptions::memory())),
        }
    }
}
