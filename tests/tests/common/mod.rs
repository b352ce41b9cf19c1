//! Shared by the integration test files: the runtimes under test, the `scenarios!` macro that
//! turns a file's scenarios into tests, and the scenario helpers. Each test file includes it
//! with `#[macro_use] mod common;` and uses what it needs.
#![allow(dead_code, unused_macros)]

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use autobatch_driver::{Client, ClientOptions, Error, ReconnectConfig, Runtime};
use autobatch_tests::RawClient;
use futures_util::future::{select, Either};

// ------------------------------------------------------------------------------ runtimes

pub type BoxFut<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// A runtime under test: its adapter's [`Runtime`], a way to block on a future, a sleep.
pub trait Rt: 'static {
    type R: Runtime + Default;
    const NAME: &'static str;
    fn block_on<F: Future>(f: F) -> F::Output;
    fn sleep(d: Duration) -> BoxFut<()>;
}

pub struct Tokio;
impl Rt for Tokio {
    type R = autobatch_tokio::TokioRuntime;
    const NAME: &'static str = "tokio";
    fn block_on<F: Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("tokio runtime")
            .block_on(f)
    }
    fn sleep(d: Duration) -> BoxFut<()> {
        Box::pin(tokio::time::sleep(d))
    }
}

pub struct Smol;
impl Rt for Smol {
    type R = autobatch_smol::SmolRuntime;
    const NAME: &'static str = "smol";
    fn block_on<F: Future>(f: F) -> F::Output {
        smol::block_on(f)
    }
    fn sleep(d: Duration) -> BoxFut<()> {
        Box::pin(async move {
            smol::Timer::after(d).await;
        })
    }
}

pub struct AsyncStd;
impl Rt for AsyncStd {
    type R = autobatch_async_std::AsyncStdRuntime;
    const NAME: &'static str = "async-std";
    fn block_on<F: Future>(f: F) -> F::Output {
        async_std::task::block_on(f)
    }
    fn sleep(d: Duration) -> BoxFut<()> {
        Box::pin(async_std::task::sleep(d))
    }
}

// ------------------------------------------------------------------------------ scenarios

/// Turns a file's scenarios into tests: one `#[test]` per scenario, server and runtime.
///
/// A scenario is an `async fn name<T: Rt>(target: Target)` at the top of the test file. Each
/// group names the servers it runs on (`bunqueue`, `broker`; each server in one group at most)
/// and the scenarios that run there. Every (server, runtime) pair gets its own module,
/// `tokio_bunqueue`, `smol_broker`, ..., so a test is named `tokio_bunqueue::pause_and_resume`
/// and `cargo test smol_broker::` runs one pair alone.
///
/// ```ignore
/// scenarios! {
///     bunqueue, broker => [pause_and_resume, drain_removes_waiting_and_delayed];
/// }
/// ```
macro_rules! scenarios {
    ($($($server:ident),+ => $names:tt);+ $(;)?) => {
        $($(scenarios!(@server $server $names);)+)+
    };
    (@server bunqueue $names:tt) => {
        scenarios!(@modules Bunqueue [tokio_bunqueue smol_bunqueue async_std_bunqueue] $names);
    };
    (@server broker $names:tt) => {
        scenarios!(@modules Broker [tokio_broker smol_broker async_std_broker] $names);
    };
    (@modules $target:ident [$tokio:ident $smol:ident $async_std:ident] $names:tt) => {
        mod $tokio {
            scenarios!(@tests Tokio $target $names);
        }
        mod $smol {
            scenarios!(@tests Smol $target $names);
        }
        mod $async_std {
            scenarios!(@tests AsyncStd $target $names);
        }
    };
    (@tests $rt:ident $target:ident [$($name:ident),* $(,)?]) => {$(
        #[test]
        fn $name() {
            <super::$rt as super::Rt>::block_on(super::$name::<super::$rt>(
                autobatch_tests::Target::$target,
            ));
        }
    )*};
}

// ------------------------------------------------------------------------------ helpers

/// Longest any scenario step may take before the test fails as hung.
pub const HANG: Duration = Duration::from_secs(60);

/// A queue name unique to this scenario, runtime and process.
pub fn queue_name<T: Rt>(scenario: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "{scenario}-{}-{}-{}",
        T::NAME,
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

pub fn options(addr: SocketAddr) -> ClientOptions {
    ClientOptions::new(addr.ip().to_string(), addr.port())
        .command_timeout(Duration::from_secs(10))
        .connect_timeout(Duration::from_secs(5))
}

/// Options for scenarios where the server goes away: short timeouts, quick reconnects.
pub fn fragile_options(addr: SocketAddr) -> ClientOptions {
    fragile(options(addr))
}

/// `opts` with short timeouts and quick reconnects, for connections that go away.
pub fn fragile(opts: ClientOptions) -> ClientOptions {
    opts.command_timeout(Duration::from_secs(2))
        .connect_timeout(Duration::from_secs(1))
        .reconnect(
            ReconnectConfig::default()
                .base(Duration::from_millis(50))
                .max(Duration::from_millis(200))
                .jitter(0.0),
        )
}

pub async fn connect<T: Rt>(opts: ClientOptions) -> Client<T::R> {
    within::<T, _>("connect", Client::<T::R>::connect(opts))
        .await
        .unwrap_or_else(|e| panic!("connect: {e}"))
}

/// Fails the test if `f` takes longer than [`HANG`]: a hang guard, not a timing assertion.
pub async fn within<T: Rt, F: Future>(what: &str, f: F) -> F::Output {
    let f = std::pin::pin!(f);
    match select(f, T::sleep(HANG)).await {
        Either::Left((out, _)) => out,
        Either::Right(_) => panic!("{what} hung for {HANG:?}"),
    }
}

/// Waits until `cond` holds (checked every 20 ms, yielding to the runtime meanwhile).
pub async fn eventually<T: Rt>(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + HANG;
    while !cond() {
        assert!(Instant::now() < deadline, "{what}: not reached in {HANG:?}");
        T::sleep(Duration::from_millis(20)).await;
    }
}

pub fn raw(addr: SocketAddr) -> RawClient {
    RawClient::connect(addr, None).expect("raw connection")
}

pub fn is_transport(e: &Error) -> bool {
    matches!(e, Error::ConnectionLost { .. } | Error::Timeout { .. })
}

// ------------------------------------------------------------------------------ queue ops helpers

/// Pulls one job of `queue` through `raw` as a worker would (with an owner, so it is locked):
/// its id and lock token; `None` when the queue hands out nothing.
pub fn raw_pull(raw: &mut RawClient, queue: &str) -> Option<(String, String)> {
    use autobatch_driver::Value;
    let reply = raw
        .command(
            "PULL",
            &[
                ("queue", Value::from(queue)),
                ("owner", Value::from("raw-worker")),
                ("timeout", Value::from(0_i64)),
            ],
        )
        .expect("PULL");
    let job = reply.get("job").filter(|j| !j.is_nullish())?;
    let id = autobatch_core::wire::Job::from_value(job)?.id;
    let token = reply.get("token").and_then(Value::as_str)?.to_owned();
    Some((id, token))
}

/// Pulls and acks one job of `queue` through `raw`: it is then completed. Returns its id.
pub fn raw_complete(raw: &mut RawClient, queue: &str) -> String {
    use autobatch_driver::Value;
    let (id, token) = raw_pull(raw, queue).expect("a job to complete");
    raw.command(
        "ACK",
        &[
            ("id", Value::from(id.as_str())),
            ("token", Value::from(token.as_str())),
            ("result", Value::from(1_i64)),
        ],
    )
    .expect("ACK");
    id
}

/// The server's refusal `e` as (kind, message); panics on any other error.
pub fn server_error(e: Error) -> (autobatch_driver::ServerErrorKind, String) {
    match e {
        Error::Server(s) => (s.kind(), s.message().to_owned()),
        other => panic!("expected the server's refusal, got {other:?}"),
    }
}
