//! The pump honours the futures-io contract: written bytes are flushed (`poll_flush`), and
//! the stream is closed (`poll_close`) when the client closes. TLS streams depend on both.
//!
//! The stream under test holds every written byte until it is flushed, as a TLS stream or a
//! `BufWriter` may: a pump that never flushes never gets its first Ping to the broker.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use autobatch_broker::{BrokerConfig, EmbeddedBroker};
use autobatch_driver::{AsyncTimer, BoxFuture, Client, ClientOptions, JobOptions, Runtime};
use autobatch_tokio::{TokioRuntime, TokioSocket};
use futures_io::{AsyncRead, AsyncWrite};

#[derive(Debug, Default)]
struct Calls {
    flushes: AtomicUsize,
    closes: AtomicUsize,
}

/// tokio, with every socket wrapped in a [`FlushGated`] that reports to `calls`.
#[derive(Debug, Clone)]
struct Gated {
    inner: TokioRuntime,
    calls: Arc<Calls>,
}

impl Runtime for Gated {
    type Socket = FlushGated;

    fn spawn(&self, task: BoxFuture<()>) {
        self.inner.spawn(task)
    }

    fn connect(&self, host: &str, port: u16) -> BoxFuture<io::Result<FlushGated>> {
        let connect = self.inner.connect(host, port);
        let calls = self.calls.clone();
        Box::pin(async move {
            Ok(FlushGated {
                inner: connect.await?,
                held: Vec::new(),
                calls,
            })
        })
    }

    fn new_timer(&self, deadline: Instant) -> Pin<Box<dyn AsyncTimer>> {
        self.inner.new_timer(deadline)
    }

    fn now(&self) -> Instant {
        self.inner.now()
    }
}

/// Holds written bytes until `poll_flush` or `poll_close`.
#[derive(Debug)]
struct FlushGated {
    inner: TokioSocket,
    held: Vec<u8>,
    calls: Arc<Calls>,
}

impl FlushGated {
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while !self.held.is_empty() {
            match Pin::new(&mut self.inner).poll_write(cx, &self.held) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => {
                    self.held.drain(..n);
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        Pin::new(&mut self.inner).poll_flush(cx)
    }
}

impl AsyncRead for FlushGated {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for FlushGated {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().held.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let r = this.poll_drain(cx);
        if r.is_ready() {
            this.calls.flushes.fetch_add(1, Ordering::SeqCst);
        }
        r
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match this.poll_drain(cx) {
            Poll::Ready(Ok(())) => {}
            other => return other,
        }
        let r = Pin::new(&mut this.inner).poll_close(cx);
        if r.is_ready() {
            this.calls.closes.fetch_add(1, Ordering::SeqCst);
        }
        r
    }
}

#[tokio::test]
async fn pump_flushes_its_writes_and_closes_the_stream() {
    let broker = EmbeddedBroker::start(BrokerConfig::default()).unwrap();
    let calls = Arc::new(Calls::default());
    let runtime = Gated {
        inner: TokioRuntime::default(),
        calls: calls.clone(),
    };
    let opts = ClientOptions::new("127.0.0.1", broker.addr().port());

    // A hang guard only: a correct pump takes a few loopback round trips.
    tokio::time::timeout(Duration::from_secs(10), async {
        let client = Client::connect_with(runtime, opts)
            .await
            .expect("connect: the probe Ping must be flushed to reach the broker");
        let q = client.queue("io-contract");
        // Sequential (one PUSH each) and concurrent (one PUSHB) adds: each write is flushed.
        for i in 0..3 {
            q.add("seq", &i, JobOptions::new()).await.unwrap();
        }
        let adds = (0..20).map(|i| q.add("burst", &i, JobOptions::new()));
        for id in futures_util::future::join_all(adds).await {
            id.unwrap();
        }
        assert_eq!(q.count().await.unwrap(), 23);
        assert!(calls.flushes.load(Ordering::SeqCst) >= 5);
        assert_eq!(
            calls.closes.load(Ordering::SeqCst),
            0,
            "closed while in use"
        );

        // close() returns once the stream is closed, and closes it once.
        client.close().await;
        assert_eq!(
            calls.closes.load(Ordering::SeqCst),
            1,
            "poll_close on shutdown"
        );
    })
    .await
    .expect("hang guard: the pump stalled");

    // The broker saw an orderly close: the connection is gone.
    let mut gone = false;
    for _ in 0..500 {
        if broker.connection_count() == 0 {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(gone, "the broker still serves the closed connection");
    broker.stop().unwrap();
}
