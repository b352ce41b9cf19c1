//! `AsyncStdRuntime::local` runs the connection's task on the thread that connected (its
//! local executor, which `task::block_on` runs): the task's log events (connecting,
//! connected, closed) reach a tracing subscriber installed for this thread only, which a task
//! on async-std's global executor threads never reaches. A wave of concurrent adds leaves
//! whole with either constructor, its adds' own polls writing it. What landed is checked
//! through a second client on the global executor.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use autobatch_async_std::{AsyncStdRuntime, Client, ClientOptions, JobOptions};
use autobatch_broker::{BrokerConfig, EmbeddedBroker};
use futures_util::future::join_all;
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata};

/// Counts the connection's events above `TRACE` (an add's own poll logs only at `TRACE`,
/// wherever it runs) emitted on the thread it is the default subscriber of.
struct PumpEvents(Arc<AtomicUsize>);

impl tracing::Subscriber for PumpEvents {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.target().starts_with("autobatch_driver")
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let meta = event.metadata();
        if meta.target() == "autobatch_driver::pump" && *meta.level() != tracing::Level::TRACE {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

fn options(broker: &EmbeddedBroker) -> ClientOptions {
    let addr = broker.addr();
    ClientOptions::new(addr.ip().to_string(), addr.port())
}

/// Connects with `rt`, adds a wave of 100, closes; returns the connection's events this
/// thread saw and the session's PUSHB frames.
fn wave_on(rt: AsyncStdRuntime, broker: &EmbeddedBroker, queue: &str) -> (usize, u64) {
    let seen = Arc::new(AtomicUsize::new(0));
    let frames = tracing::subscriber::with_default(PumpEvents(seen.clone()), || {
        async_std::task::block_on(async {
            let client = Client::connect_with(rt, options(broker))
                .await
                .expect("connect");
            let q = client.queue(queue);
            let adds = (0..100).map(|i| q.add("wave", &i, JobOptions::new()));
            for id in join_all(adds).await {
                id.expect("add");
            }
            let stats = client.stats().await.session;
            assert_eq!(stats.adds, 100, "{stats:?}");
            client.close().await;
            stats.pushb_frames
        })
    });
    (seen.load(Ordering::SeqCst), frames)
}

#[test]
fn a_local_pump_runs_on_the_connecting_thread_and_a_wave_leaves_whole() {
    let broker = EmbeddedBroker::start(BrokerConfig::default()).expect("broker");
    let (seen, frames) = wave_on(AsyncStdRuntime::local(), &broker, "async-std-local");
    // "connecting", "connected", "closed" at the least.
    assert!(
        seen >= 2,
        "the connection logged {seen} events on this thread"
    );
    // The adds' first polls all ran before any wrote: two PUSHB of 50 (the default batch
    // size), never a partial wave flushed early.
    assert_eq!(frames, 2);

    // The same run with the default runtime: the connection's task is elsewhere, this thread
    // sees none of its events (the check above is not vacuous), and the wave leaves as whole.
    let (seen, frames) = wave_on(AsyncStdRuntime::default(), &broker, "async-std-global");
    assert_eq!(
        seen, 0,
        "a global-executor connection task must not run on this thread"
    );
    assert_eq!(frames, 2);

    // An independent connection, on the global executor, sees both waves.
    async_std::task::block_on(async {
        let other = Client::connect(options(&broker)).await.expect("connect");
        for q in ["async-std-local", "async-std-global"] {
            assert_eq!(other.queue(q).count().await.expect("count"), 100, "{q}");
        }
        other.close().await;
    });
}
