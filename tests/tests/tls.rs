//! TLS, end to end: every runtime adapter (tokio, smol, async-std) against the real bunqueue
//! 2.9.5 server started with `TLS_CERT_FILE` / `TLS_KEY_FILE` and against the embedded broker
//! with `BrokerConfig::tls`, with certificates made at test time ([`TestPki`], rcgen).
//!
//! Effects are checked through [`RawClient::connect_tls`], a blocking rustls connection that
//! shares nothing with the driver's futures-rustls path. Connections are cut by a
//! [`CountingProxy`], which forwards TLS bytes unchanged. No assertion depends on timing; the
//! only durations are hang guards.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use autobatch_driver::{
    Client, ClientOptions, ConnectError, JobOptions, ReconnectConfig, TlsErrorKind, TlsOptions,
    TlsRoots, Worker, WorkerOptions,
};
use autobatch_tests::{
    BunqueueServer, CountingProxy, OwnedServer, RawClient, ServerOptions, Target, TestPki, TsPeer,
};
use futures_util::future::{join, join_all};

#[macro_use]
mod common;

use common::*;

// ------------------------------------------------------------------------------ helpers

/// One PKI for the whole test binary.
fn pki() -> &'static TestPki {
    static PKI: OnceLock<TestPki> = OnceLock::new();
    PKI.get_or_init(TestPki::generate)
}

/// One TLS server per target, shared by the scenarios of this binary (queues kept apart by
/// name). Kept in a `Mutex` only to be `Sync`.
fn shared_tls(target: Target) -> SocketAddr {
    static BQ: OnceLock<Mutex<Box<dyn OwnedServer>>> = OnceLock::new();
    static BROKER: OnceLock<Mutex<Box<dyn OwnedServer>>> = OnceLock::new();
    let cell = match target {
        Target::Bunqueue => &BQ,
        Target::Broker => &BROKER,
    };
    cell.get_or_init(|| Mutex::new(target.dedicated_tls(pki())))
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .addr()
}

/// A queue name unique to this scenario, runtime and process, marked as a TLS one.
fn queue_name<T: Rt>(scenario: &str) -> String {
    common::queue_name::<T>(&format!("tls-{scenario}"))
}

/// TLS trusting only the test CA, checked against the address's IP.
fn tls() -> TlsOptions {
    TlsOptions::new()
        .roots(TlsRoots::None)
        .ca_pem(pki().ca_pem().as_bytes().to_vec())
}

/// The shared client options, over `tls`.
fn options(addr: SocketAddr, tls: TlsOptions) -> ClientOptions {
    common::options(addr).tls(tls)
}

/// The shared fragile options over TLS; the handshake gets a longer connect timeout.
fn fragile_options(addr: SocketAddr) -> ClientOptions {
    common::fragile(options(addr, tls())).connect_timeout(Duration::from_secs(2))
}

/// An independent TLS connection (blocking rustls), to check what landed.
fn raw(addr: SocketAddr) -> RawClient {
    RawClient::connect_tls(addr, pki().ca_pem().as_bytes(), None).expect("raw TLS connection")
}

/// `Client::connect` with these options fails with a TLS error of `kind`, without hanging,
/// and so does `Worker::start`. A long reconnect backoff and connect timeout make sure the
/// failure does not come from giving up on retries.
async fn fails_with<T: Rt>(opts: ClientOptions, kind: TlsErrorKind) {
    let opts = opts
        .connect_timeout(Duration::from_secs(30))
        .reconnect(ReconnectConfig::default().base(Duration::from_secs(30)));
    match within::<T, _>("connect", Client::<T::R>::connect(opts.clone())).await {
        Err(ConnectError::Tls(e)) => {
            assert_eq!(e.kind(), kind, "{e}");
            assert!(e.is_certificate_problem(), "{e}");
            assert!(
                std::error::Error::source(&e).is_some(),
                "{e} keeps its cause"
            );
        }
        Err(e) => panic!("expected a TLS error {kind:?}, got {e:?}"),
        Ok(_) => panic!("connected although the certificate must be refused"),
    }
    let worker = Worker::<T::R>::start(opts, WorkerOptions::new("never"), |_job| async {
        Ok::<(), String>(())
    });
    match within::<T, _>("worker start", worker).await {
        Err(ConnectError::Tls(e)) => assert_eq!(e.kind(), kind, "{e}"),
        Err(e) => panic!("expected a TLS error {kind:?}, got {e:?}"),
        Ok(_) => panic!("a worker started although the certificate must be refused"),
    }
}

// ------------------------------------------------------------------------------ scenarios

/// Sequential and concurrent adds over TLS all land, once each.
async fn adds<T: Rt>(target: Target) {
    let server = shared_tls(target);
    let client = connect::<T>(options(server, tls())).await;
    let name = queue_name::<T>("adds");
    let q = client.queue(&name);
    let mut ids = HashSet::new();
    for i in 0..20 {
        let id = within::<T, _>("add", q.add("seq", &i, JobOptions::new()))
            .await
            .expect("sequential add");
        assert!(ids.insert(id), "one id per add");
    }
    for wave in [10usize, 100, 250] {
        let adds = (0..wave).map(|i| q.add("wave", &i, JobOptions::new()));
        for id in within::<T, _>("wave", join_all(adds)).await {
            assert!(ids.insert(id.expect("concurrent add")), "one id per add");
        }
    }
    let stats = client.stats().await;
    assert!(
        stats.session.pushb_frames < 380,
        "concurrent adds were batched over TLS: {stats:?}"
    );
    within::<T, _>("close", client.close()).await;
    let mut raw = raw(server);
    assert_eq!(raw.count(&name), 380);
    for id in ids.iter().take(25) {
        assert_eq!(raw.state(id), "waiting", "{id}");
    }
}

/// A worker over TLS processes every job once; completions are visible to another connection.
async fn worker<T: Rt>(target: Target) {
    let server = shared_tls(target);
    let name = queue_name::<T>("work");
    let client = connect::<T>(options(server, tls())).await;
    let q = client.queue(&name);
    let adds = (0..50i64).map(|i| q.add("work", &i, JobOptions::new()));
    let ids: Vec<String> = within::<T, _>("adds", join_all(adds))
        .await
        .into_iter()
        .map(|r| r.expect("add"))
        .collect();
    within::<T, _>("close", client.close()).await;

    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let worker = within::<T, _>(
        "worker start",
        Worker::<T::R>::start(
            options(server, tls()),
            WorkerOptions::new(&name)
                .concurrency(8)
                .poll_timeout(Duration::from_millis(200)),
            move |job| {
                let s = s.clone();
                async move {
                    s.lock().unwrap().push(job.id.clone());
                    let n: i64 = job.data.deserialize().map_err(|e| e.to_string())?;
                    Ok::<_, String>(n * 2)
                }
            },
        ),
    )
    .await
    .expect("worker");
    let mut raw = raw(server);
    eventually::<T>("all jobs completed", || raw.counts(&name).completed == 50).await;
    within::<T, _>("worker close", worker.close()).await;
    let mut seen = seen.lock().unwrap().clone();
    seen.sort();
    let mut expected = ids.clone();
    expected.sort();
    assert_eq!(seen, expected, "every job processed exactly once");
    assert_eq!(raw.state(&ids[7]), "completed");
    let c = raw.counts(&name);
    assert_eq!((c.waiting, c.active, c.failed), (0, 0, 0), "{c:?}");
}

/// The connection is cut mid-wave (a proxy resets both sockets): the client reconnects with a
/// new TLS handshake, every add resolves, and adds after the cut land.
async fn reconnect<T: Rt>(target: Target) {
    let server = shared_tls(target);
    // The proxy forwards TLS bytes unchanged; the certificate is checked against 127.0.0.1.
    let proxy = CountingProxy::start(server);
    let client = connect::<T>(fragile_options(proxy.addr())).await;
    let name = queue_name::<T>("cut");
    let q = client.queue(&name);
    within::<T, _>("add before the cut", q.add("before", &0, JobOptions::new()))
        .await
        .expect("add before the cut");
    let wave = join_all((0..300).map(|i| q.add("cut", &i, JobOptions::new())));
    let cutter = async {
        T::sleep(Duration::from_millis(1)).await;
        proxy.cut_all();
    };
    let (results, ()) = within::<T, _>("wave with a cut", join(wave, cutter)).await;
    let mut raw = raw(server);
    for r in &results {
        match r {
            Ok(id) => assert!(raw.job(id).is_some(), "{id} reported added but missing"),
            Err(e) => assert!(is_transport(e), "unexpected error {e:?}"),
        }
    }
    // The cut lands a moment after it is signalled: retry transport errors until the client
    // has reconnected.
    let mut after = None;
    for _ in 0..100 {
        match within::<T, _>("add after the cut", q.add("after", &0, JobOptions::new())).await {
            Ok(id) => {
                after = Some(id);
                break;
            }
            Err(e) => assert!(is_transport(&e), "unexpected error {e:?}"),
        }
    }
    let after = after.expect("an add succeeds after reconnecting");
    assert!(raw.job(&after).is_some());
    let connects = client.stats().await.session.connects;
    assert!(
        connects >= 2,
        "reconnected through TLS: {connects} connects"
    );
    assert!(proxy.snapshot().connections >= 2);
    within::<T, _>("close", client.close()).await;
}

/// A client that trusts only an unrelated CA fails at once with `UnknownIssuer`.
async fn wrong_ca<T: Rt>(target: Target) {
    let server = shared_tls(target);
    let tls = TlsOptions::new()
        .roots(TlsRoots::None)
        .ca_file(pki().other_ca_path());
    fails_with::<T>(options(server, tls), TlsErrorKind::UnknownIssuer).await;
    // The built-in roots do not know the test CA either.
    fails_with::<T>(
        options(server, TlsOptions::new()),
        TlsErrorKind::UnknownIssuer,
    )
    .await;
}

/// The right CA, but a name the certificate is not valid for: `NameMismatch`, at once.
async fn wrong_name<T: Rt>(target: Target) {
    let server = shared_tls(target);
    fails_with::<T>(
        options(server, tls().server_name("wrong.example.com")),
        TlsErrorKind::NameMismatch,
    )
    .await;
    // The DNS name the certificate does carry is accepted in place of the IP address.
    let client = connect::<T>(options(server, tls().server_name("localhost"))).await;
    client.ping().await.expect("ping");
    within::<T, _>("close", client.close()).await;
}

scenarios! {
    bunqueue, broker => [adds, worker, reconnect, wrong_ca, wrong_name];
}

// ------------------------------------------------------------------------------ one-offs

/// bunqueue is killed (SIGKILL) and restarted on the same port: the client comes back through
/// a new TLS handshake, and adds made afterwards land.
async fn bunqueue_restart<T: Rt>() {
    let mut server = BunqueueServer::start(ServerOptions {
        tls: Some(pki().server_tls()),
        ..ServerOptions::memory()
    })
    .expect("bunqueue with TLS");
    let client = connect::<T>(fragile_options(server.addr())).await;
    let name = queue_name::<T>("restart");
    let q = client.queue(&name);
    q.add("before", &0, JobOptions::new()).await.expect("add");
    server.kill().expect("kill");
    server.restart().expect("restart");
    let mut after = None;
    for _ in 0..200 {
        match within::<T, _>(
            "add after the restart",
            q.add("after", &1, JobOptions::new()),
        )
        .await
        {
            Ok(id) => {
                after = Some(id);
                break;
            }
            Err(e) => {
                assert!(is_transport(&e), "unexpected error {e:?}");
                T::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    let after = after.expect("an add succeeds once bunqueue is back");
    assert!(raw(server.addr()).job(&after).is_some());
    assert!(client.stats().await.session.connects >= 2);
    within::<T, _>("close", client.close()).await;
}

#[test]
fn tokio_bunqueue_restart() {
    Tokio::block_on(bunqueue_restart::<Tokio>());
}

#[test]
fn smol_bunqueue_restart() {
    Smol::block_on(bunqueue_restart::<Smol>());
}

#[test]
fn async_std_bunqueue_restart() {
    AsyncStd::block_on(bunqueue_restart::<AsyncStd>());
}

/// bunqueue's own TS client, with `tls: { caFile }`, adds jobs to the embedded broker over
/// TLS and works them off; the jobs are checked through another TLS connection.
#[test]
fn ts_client_over_tls_to_the_broker() {
    let server = shared_tls(Target::Broker);
    let tls = serde_json::json!({ "caFile": pki().ca_path() });
    let queue = format!("tls-ts-{}", std::process::id());
    let produced = TsPeer::new("produce.ts")
        .target(server)
        .options(&serde_json::json!({
            "queue": queue,
            "tag": "ts",
            "tls": tls,
            "steps": [
                {"kind": "seq", "n": 10},
                {"kind": "waves", "n": 100, "wave": 50},
            ],
        }))
        .run_json()
        .expect("produce.ts ran over TLS");
    let ids = produced["ids"].as_array().expect("ids");
    assert_eq!(ids.len(), 110, "{produced}");
    let mut raw = raw(server);
    assert_eq!(raw.count(&queue), 110);
    for id in ids.iter().take(10) {
        assert!(raw.job(id.as_str().unwrap()).is_some(), "{id}");
    }
    let consumed = TsPeer::new("consume.ts")
        .target(server)
        .options(&serde_json::json!({
            "queue": queue, "count": 110, "concurrency": 4, "settleMs": 200, "tls": tls,
        }))
        .run_json()
        .expect("consume.ts ran over TLS");
    assert_eq!(
        consumed["timed_out"],
        serde_json::json!(false),
        "{consumed}"
    );
    assert_eq!(raw.counts(&queue).completed, 110);
}

/// A TLS client against a plain server, and a plain client against a TLS server: both fail,
/// with a typed error and without hanging.
#[test]
fn tls_and_plain_do_not_mix() {
    Tokio::block_on(async {
        let plain = autobatch_broker::EmbeddedBroker::start(Default::default()).unwrap();
        match within::<Tokio, _>(
            "TLS to plain",
            Client::<autobatch_tokio::TokioRuntime>::connect(options(plain.addr(), tls())),
        )
        .await
        {
            Err(ConnectError::Tls(e)) => {
                assert_eq!(e.kind(), TlsErrorKind::Handshake, "{e}");
                assert!(!e.is_certificate_problem());
            }
            other => panic!("expected a TLS handshake error, got {other:?}"),
        }
        let server = shared_tls(Target::Broker);
        let opts = ClientOptions::new("127.0.0.1", server.port())
            .connect_timeout(Duration::from_secs(5))
            .command_timeout(Duration::from_secs(5));
        match within::<Tokio, _>(
            "plain to TLS",
            Client::<autobatch_tokio::TokioRuntime>::connect(opts),
        )
        .await
        {
            // The server's TLS alert is no bunqueue frame: the first request fails.
            Err(ConnectError::Handshake(_)) => {}
            other => panic!("expected the first request to fail, got {other:?}"),
        }
    });
}

/// Unusable TLS settings fail `connect` before anything is sent, with `Config`.
#[test]
fn bad_tls_settings() {
    Smol::block_on(async {
        let server = shared_tls(Target::Broker);
        let cases = [
            TlsOptions::new().ca_file(pki().dir().join("missing.pem")),
            TlsOptions::new().roots(TlsRoots::None),
            TlsOptions::new().ca_pem(b"not a certificate".to_vec()),
            tls().client_cert_pem(pki().server_cert_pem(), "not a key"),
            tls().server_name("not a valid name!"),
        ];
        for case in cases {
            let what = format!("{case:?}");
            match Client::<autobatch_smol::SmolRuntime>::connect(options(server, case)).await {
                Err(ConnectError::Tls(e)) => {
                    assert_eq!(e.kind(), TlsErrorKind::Config, "{what}: {e}")
                }
                other => panic!("{what}: expected a TLS config error, got {other:?}"),
            }
        }
        // A client certificate is accepted by rustls (the broker does not ask for one).
        let client = connect::<Smol>(options(
            server,
            tls().client_cert_pem(pki().server_cert_pem(), pki().server_key_pem()),
        ))
        .await;
        client.ping().await.expect("ping");
        client.close().await;
    });
}

/// `danger_accept_invalid_certs` connects whatever the certificate, and only with it.
#[test]
fn danger_accept_invalid_certs() {
    AsyncStd::block_on(async {
        let server = shared_tls(Target::Broker);
        let client = connect::<AsyncStd>(options(
            server,
            TlsOptions::new()
                .server_name("wrong.example.com")
                .danger_accept_invalid_certs(true),
        ))
        .await;
        let q = client.queue(queue_name::<AsyncStd>("danger"));
        q.add("x", &1, JobOptions::new()).await.expect("add");
        client.close().await;
    });
}

// ------------------------------------------------------------------------------ close_notify

/// A one-connection TLS server on a thread (blocking rustls) that answers every request with a
/// Pong and reports how the client ended the connection: `Ok(())` for a TLS close_notify
/// followed by EOF, `Err` for a TCP close without it.
fn close_notify_server() -> (SocketAddr, std::sync::mpsc::Receiver<Result<(), String>>) {
    use autobatch_core::wire::{FrameDecoder, Value};
    use autobatch_tests::msgpack::Writer;
    use std::io::{Read, Write};

    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let tls = pki().broker_tls_server_config();
    std::thread::spawn(move || {
        let (tcp, _) = listener.accept().unwrap();
        tcp.set_read_timeout(Some(HANG)).unwrap();
        let conn = rustls::ServerConnection::new(tls).unwrap();
        let mut s = rustls::StreamOwned::new(conn, tcp);
        let mut frames = FrameDecoder::new();
        let mut buf = [0u8; 4096];
        let outcome = loop {
            match s.read(&mut buf) {
                Ok(0) => break Ok(()),
                Ok(n) => frames.extend(&buf[..n]),
                Err(e) => break Err(format!("{:?}: {e}", e.kind())),
            }
            while let Some(body) = frames.next_frame().unwrap() {
                let req = Value::decode(&body).unwrap();
                let id = req.get("reqId").and_then(Value::as_str).unwrap().to_owned();
                let reply = Writer::new()
                    .map(3)
                    .str("ok")
                    .bool(true)
                    .str("data")
                    .map(2)
                    .str("pong")
                    .bool(true)
                    .str("time")
                    .uint(1)
                    .str("reqId")
                    .str(&id)
                    .to_frame();
                s.write_all(&reply).unwrap();
                s.flush().unwrap();
            }
        };
        let _ = tx.send(outcome);
    });
    (addr, rx)
}

/// `close()` ends the TLS session properly: the pump's `poll_close` sends close_notify before
/// the TCP close, so the server sees a clean end of stream, not a truncation.
async fn close_sends_close_notify<T: Rt>() {
    let (addr, outcome) = close_notify_server();
    let client = connect::<T>(options(addr, tls()).ping_interval(None)).await;
    client.ping().await.expect("ping");
    within::<T, _>("close", client.close()).await;
    let outcome = outcome.recv_timeout(HANG).expect("the server saw the end");
    assert_eq!(outcome, Ok(()), "the client closed with close_notify");
}

#[test]
fn tokio_close_sends_close_notify() {
    Tokio::block_on(close_sends_close_notify::<Tokio>());
}

#[test]
fn smol_close_sends_close_notify() {
    Smol::block_on(close_sends_close_notify::<Smol>());
}

#[test]
fn async_std_close_sends_close_notify() {
    AsyncStd::block_on(close_sends_close_notify::<AsyncStd>());
}
