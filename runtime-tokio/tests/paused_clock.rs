//! The driver keeps time on tokio's clock: with it paused, the driver's timers fire when the
//! test advances the clock, not when the wall clock gets there.

use std::sync::mpsc;
use std::time::Duration;

use autobatch_broker::{BrokerConfig, EmbeddedBroker};
use autobatch_tokio::{Client, ClientOptions, ClientStats};

/// Keeps a paused clock still while the test waits on real I/O.
///
/// A paused current-thread runtime with nothing to do jumps its clock to the next timer; the
/// broker answers from its own thread, so every wait for it would let the clock jump (and a
/// command timeout could fire). A running blocking task stops the jumps: with this held, the
/// clock moves only on `tokio::time::advance`.
struct HoldClock {
    release: Option<mpsc::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl HoldClock {
    fn new() -> Self {
        let (release, held) = mpsc::channel::<()>();
        let task = tokio::task::spawn_blocking(move || {
            let _ = held.recv();
        });
        HoldClock {
            release: Some(release),
            task,
        }
    }

    async fn release(mut self) {
        self.release.take();
        (&mut self.task).await.unwrap();
    }
}

/// Polls the client's stats until `done` holds. A hang guard, not a timing check: the bound
/// (a few seconds of real time) is far beyond what a correct driver needs (a loopback round
/// trip) and is only reached when the awaited event never happens.
async fn stats_until(
    client: &Client,
    what: &str,
    done: impl Fn(&ClientStats) -> bool,
) -> ClientStats {
    for _ in 0..2_000 {
        let stats = client.stats().await;
        if done(&stats) {
            return stats;
        }
        tokio::task::spawn_blocking(|| std::thread::sleep(Duration::from_millis(2)))
            .await
            .unwrap();
    }
    panic!(
        "{what}: never happened; stats: {:?}",
        client.stats().await.session
    );
}

#[tokio::test(start_paused = true)]
async fn ping_interval_runs_on_the_paused_clock() {
    let hold = HoldClock::new();
    let broker = EmbeddedBroker::start(BrokerConfig::default()).unwrap();
    let interval = Duration::from_secs(60);
    let opts = ClientOptions::new("127.0.0.1", broker.addr().port()).ping_interval(Some(interval));
    let client = Client::connect(opts).await.unwrap();

    // Connected: the probe Ping and its answer, nothing else.
    let s = client.stats().await.session;
    assert_eq!((s.frames_sent, s.frames_received), (1, 1));

    // Just short of the interval: no keep-alive yet.
    tokio::time::advance(interval - Duration::from_secs(1)).await;
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    let s = client.stats().await.session;
    assert_eq!(
        s.frames_sent, 1,
        "a keep-alive Ping went out before the interval"
    );

    // At the interval, on the paused clock: the keep-alive Ping goes out and is answered,
    // although next to no real time has passed.
    tokio::time::advance(Duration::from_secs(1)).await;
    let s = stats_until(&client, "the keep-alive Ping", |s| {
        s.session.frames_received == 2
    })
    .await;
    assert_eq!(s.session.frames_sent, 2);
    assert_eq!(s.session.timeouts, 0);

    client.close().await;
    hold.release().await;
    broker.stop().unwrap();
}
