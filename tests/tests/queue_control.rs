//! Queue control operations (pause, resume, drain, clean, …) for every runtime, against the
//! real bunqueue 2.9.5 and against the embedded broker, each effect checked through an
//! independent connection ([`RawClient::command`]: hand-written frames).

mod common;

use autobatch_driver::{JobOptions, Value};
use autobatch_tests::Target;
use common::*;

/// Pause stops the queue for workers; resume undoes it: seen through a raw `IsPaused`.
async fn pause_and_resume<T: Rt>(target: Target) {
    let server = target.shared();
    let client = connect::<T>(options(server)).await;
    let name = queue_name::<T>("pause");
    let q = client.queue(&name);
    q.add("a", &1, JobOptions::new()).await.expect("add");
    let paused = |raw: &mut autobatch_tests::RawClient| {
        raw.command("IsPaused", &[("queue", Value::from(name.as_str()))])
            .expect("IsPaused")
            .get("paused")
            .and_then(Value::as_bool)
    };
    let mut check = raw(server);
    assert_eq!(paused(&mut check), Some(false));
    q.pause().await.expect("pause");
    assert_eq!(paused(&mut check), Some(true));
    assert!(q.is_paused().await.expect("is_paused"));
    q.resume().await.expect("resume");
    assert_eq!(paused(&mut check), Some(false));
    assert!(!q.is_paused().await.expect("is_paused"));
    client.close().await;
}

macro_rules! scenarios {
    ($rt:ty, $target:expr => $($name:ident),* $(,)?) => {$(
        #[test]
        fn $name() {
            <$rt as super::Rt>::block_on(super::$name::<$rt>($target));
        }
    )*};
}

macro_rules! all_scenarios {
    ($rt:ty, $target:expr) => {
        scenarios!($rt, $target => pause_and_resume);
    };
}

mod tokio_bunqueue {
    all_scenarios!(super::Tokio, autobatch_tests::Target::Bunqueue);
}
mod smol_bunqueue {
    all_scenarios!(super::Smol, autobatch_tests::Target::Bunqueue);
}
mod async_std_bunqueue {
    all_scenarios!(super::AsyncStd, autobatch_tests::Target::Bunqueue);
}
