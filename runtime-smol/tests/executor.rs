//! `SmolRuntime::with_executor` puts the connection's pump on the given executor: it is a task
//! of that executor while the client lives, and a wave of concurrent adds made on the same
//! executor reaches it whole (one thread, so the pump runs only once the wave is queued).
//! What landed is checked through a second client on smol's global executor.

use std::sync::Arc;

use autobatch_broker::{BrokerConfig, EmbeddedBroker};
use autobatch_smol::{Client, ClientOptions, JobOptions, SmolRuntime};
use futures_util::future::join_all;

fn options(broker: &EmbeddedBroker) -> ClientOptions {
    let addr = broker.addr();
    ClientOptions::new(addr.ip().to_string(), addr.port())
}

#[test]
fn the_pump_is_a_task_of_the_given_executor_and_a_wave_leaves_whole() {
    let broker = EmbeddedBroker::start(BrokerConfig::default()).expect("broker");
    let ex = Arc::new(smol::Executor::new());
    assert!(ex.is_empty());
    smol::block_on(ex.run(async {
        let rt = SmolRuntime::with_executor(ex.clone());
        let client = Client::connect_with(rt, options(&broker))
            .await
            .expect("connect");
        // The future `ex.run` drives is not one of its tasks: only the pump can be.
        assert!(
            !ex.is_empty(),
            "the pump must be a task of the given executor"
        );

        let q = client.queue("smol-executor");
        let adds = (0..100).map(|i| q.add("wave", &i, JobOptions::new()));
        for id in join_all(adds).await {
            id.expect("add");
        }
        let stats = client.stats().await.session;
        assert_eq!(stats.adds, 100, "{stats:?}");
        // The whole wave was queued before the pump ran: two PUSHB of 50 (the default batch
        // size), never a partial wave flushed early.
        assert_eq!(stats.pushb_frames, 2, "{stats:?}");
        assert_eq!(stats.push_frames, 0, "{stats:?}");

        client.close().await;
        drop(client);
        // Closing ends the pump's task. A hang guard, not a timing check: the task finishes
        // within the poll that answered `close`, and this only yields until the executor has
        // dropped it.
        for _ in 0..10_000 {
            if ex.is_empty() {
                break;
            }
            smol::future::yield_now().await;
        }
        assert!(ex.is_empty(), "the pump's task must end with the client");
    }));

    // An independent connection, on smol's global executor, sees the 100 jobs.
    smol::block_on(async {
        let other = Client::connect(options(&broker)).await.expect("connect");
        assert_eq!(
            other.queue("smol-executor").count().await.expect("count"),
            100
        );
        other.close().await;
    });
}

#[test]
fn the_default_runtime_spawns_on_the_global_executor() {
    // Nothing is spawned on an executor nobody gave: the default still works from a plain
    // `block_on`, its pump running on smol's global executor.
    let broker = EmbeddedBroker::start(BrokerConfig::default()).expect("broker");
    assert!(SmolRuntime::default().executor().is_none());
    smol::block_on(async {
        let client = Client::connect(options(&broker)).await.expect("connect");
        client
            .queue("smol-global")
            .add("one", &1, JobOptions::new())
            .await
            .expect("add");
        assert_eq!(client.queue("smol-global").count().await.expect("count"), 1);
        client.close().await;
    });
}
