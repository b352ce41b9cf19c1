//! A broker on its own thread with its own tokio runtime, for code that runs on another
//! runtime (smol, async-std) or none at all.

use std::io;
use std::net::SocketAddr;
use std::thread::JoinHandle;

use crate::config::BrokerConfig;
use crate::server::{Broker, ShutdownHandle};

/// A [`Broker`] serving from a background thread. Dropping it stops the broker cleanly (like
/// [`stop`](Self::stop), ignoring errors).
///
/// ```
/// use autobatch_broker::{BrokerConfig, EmbeddedBroker};
/// let broker = EmbeddedBroker::start(BrokerConfig::default()).unwrap();
/// let stream = std::net::TcpStream::connect(broker.addr()).unwrap();
/// drop(stream);
/// broker.stop().unwrap();
/// ```
pub struct EmbeddedBroker {
    addr: SocketAddr,
    handle: ShutdownHandle,
    /// What the introspection reads.
    #[cfg(feature = "test-util")]
    shared: std::sync::Arc<crate::context::Shared>,
    thread: Option<JoinHandle<io::Result<()>>>,
}

impl EmbeddedBroker {
    /// Binds and starts serving on a new thread; returns once the listener is bound.
    pub fn start(config: BrokerConfig) -> io::Result<EmbeddedBroker> {
        let (tx, rx) = std::sync::mpsc::channel();
        let threads = config.worker_threads.max(1);
        let thread = std::thread::Builder::new()
            .name("autobatch-broker".into())
            .spawn(move || -> io::Result<()> {
                let rt = match tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(threads)
                    .thread_name("autobatch-broker-rt")
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return Ok(());
                    }
                };
                rt.block_on(async move {
                    match Broker::bind(config).await {
                        Ok(broker) => {
                            let _ = tx.send(Ok((
                                broker.local_addr(),
                                broker.shutdown_handle(),
                                broker.shared(),
                            )));
                            broker.serve().await
                        }
                        Err(e) => {
                            let _ = tx.send(Err(e));
                            Ok(())
                        }
                    }
                })
            })?;
        #[cfg_attr(not(feature = "test-util"), allow(unused_variables))]
        let (addr, handle, shared) = rx
            .recv()
            .map_err(|_| io::Error::other("broker thread exited during start"))??;
        Ok(EmbeddedBroker {
            addr,
            handle,
            #[cfg(feature = "test-util")]
            shared,
            thread: Some(thread),
        })
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Queues the broker keeps an index for (introspection for tests: an index must not
    /// outlive what it holds). With the `test-util` feature.
    #[cfg(feature = "test-util")]
    pub fn queue_count(&self) -> usize {
        self.shared.lock().queue_count()
    }

    /// Connections being served (introspection for tests). With the `test-util` feature.
    #[cfg(feature = "test-util")]
    pub fn connection_count(&self) -> usize {
        use std::sync::atomic::Ordering;
        self.shared.connections.load(Ordering::Acquire)
    }

    /// Bytes held in incomplete frames across every connection (introspection for tests).
    /// With the `test-util` feature.
    #[cfg(feature = "test-util")]
    pub fn partial_frame_bytes(&self) -> usize {
        use std::sync::atomic::Ordering;
        self.shared.budget.used.load(Ordering::Acquire)
    }

    /// A handle that stops the broker from anywhere.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        self.handle.clone()
    }

    /// Stops the broker: closes connections, commits pending writes, joins the thread.
    pub fn stop(mut self) -> io::Result<()> {
        self.stop_inner()
    }

    fn stop_inner(&mut self) -> io::Result<()> {
        self.handle.shutdown();
        match self.thread.take() {
            Some(t) => t
                .join()
                .map_err(|_| io::Error::other("broker thread panicked"))?,
            None => Ok(()),
        }
    }
}

impl std::fmt::Debug for EmbeddedBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedBroker")
            .field("addr", &self.addr)
            .finish()
    }
}

impl Drop for EmbeddedBroker {
    fn drop(&mut self) {
        let _ = self.stop_inner();
    }
}
