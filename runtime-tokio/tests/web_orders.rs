//! The `web_orders` example's endpoint, served in-process against the embedded broker: a
//! graceful shutdown under load loses no accepted order, and bad bodies and a dead broker get
//! clear answers instead of hangs.

#[allow(dead_code)]
#[path = "../examples/web_orders.rs"]
mod web_orders;

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use autobatch_broker::{BrokerConfig, EmbeddedBroker};
use autobatch_tokio::{Client, ClientOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

const ORDER: &str = r#"{"customer":"c-42","items":[{"sku":"A-1","quantity":2}]}"#;

/// One HTTP/1.1 answer: the status and the body.
#[derive(Debug)]
struct Answer {
    status: u16,
    head: String,
    body: serde_json::Value,
}

/// Sends one request on a fresh connection (`Connection: close`) and reads the whole answer.
async fn post(addr: SocketAddr, content_type: &str, body: &[u8]) -> io::Result<Answer> {
    let mut s = TcpStream::connect(addr).await?;
    let head = format!(
        "POST /orders HTTP/1.1\r\nhost: {addr}\r\ncontent-type: {content_type}\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).await?;
    // A server that refuses a large body may answer and close before reading it all.
    let _ = s.write_all(body).await;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "no complete answer"))?;
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, head.to_owned()))?;
    Ok(Answer {
        status,
        head: head.to_ascii_lowercase(),
        body: serde_json::from_str(body).unwrap_or(serde_json::Value::Null),
    })
}

/// The example's server on a free port, with a client of `broker`; stopped by the sender.
struct Web {
    addr: SocketAddr,
    stop: oneshot::Sender<()>,
    served: JoinHandle<io::Result<()>>,
}

async fn start_web(broker: SocketAddr, add_timeout: Duration) -> Web {
    let opts = ClientOptions::new(broker.ip().to_string(), broker.port());
    let client = Client::connect(opts).await.expect("connect to the broker");
    let app = web_orders::App {
        orders: Some((client.clone(), client.queue(web_orders::QUEUE))),
        add_timeout,
        body_limit: 1024,
    };
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let served = tokio::spawn(web_orders::serve(listener, app, Some(client), async {
        let _ = stopped.await;
    }));
    Web { addr, stop, served }
}

/// Counts the queue through a connection of its own.
async fn jobs_on_broker(broker: SocketAddr) -> (Client, u64) {
    let auditor = Client::connect(ClientOptions::new(broker.ip().to_string(), broker.port()))
        .await
        .expect("auditor connects");
    let n = auditor.queue(web_orders::QUEUE).count().await.unwrap();
    (auditor, n)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_under_load_loses_no_accepted_order() {
    const REQUESTS: usize = 400;
    const SHUTDOWN_AFTER: usize = 100;
    let broker = EmbeddedBroker::start(BrokerConfig::default()).unwrap();
    let web = start_web(broker.addr(), Duration::from_secs(30)).await;

    let (answered_tx, mut answered_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let requests: Vec<_> = (0..REQUESTS)
        .map(|_| {
            let answered = answered_tx.clone();
            let addr = web.addr;
            tokio::spawn(async move {
                let r = post(addr, "application/json", ORDER.as_bytes()).await;
                let _ = answered.send(());
                r
            })
        })
        .collect();
    drop(answered_tx);
    // Shut down once a quarter has been answered: the rest are in flight or not yet sent.
    for _ in 0..SHUTDOWN_AFTER {
        answered_rx.recv().await.unwrap();
    }
    web.stop.send(()).unwrap();

    let mut accepted = Vec::new();
    let (mut unavailable, mut refused) = (0, 0);
    for r in requests {
        match r.await.unwrap() {
            Ok(a) if a.status == 202 => {
                assert_eq!(a.body["status"], "queued", "{a:?}");
                accepted.push(a.body["id"].as_str().expect("an id").to_owned());
            }
            Ok(a) if a.status == 503 => {
                assert!(a.head.contains("retry-after:"), "{a:?}");
                unavailable += 1;
            }
            Ok(a) => panic!("an answer that is neither 202 nor 503: {a:?}"),
            Err(_) => refused += 1,
        }
    }
    // serve() returns only after the client closed, so every add has been answered.
    web.served.await.unwrap().unwrap();
    assert!(accepted.len() >= SHUTDOWN_AFTER, "{}", accepted.len());
    assert_eq!(accepted.len() + unavailable + refused, REQUESTS);

    let (auditor, jobs) = jobs_on_broker(broker.addr()).await;
    assert_eq!(
        jobs,
        accepted.len() as u64,
        "every 202 is one job ({} answered 202, {unavailable} 503, {refused} refused)",
        accepted.len()
    );
    let q = auditor.queue(web_orders::QUEUE);
    for id in &accepted {
        let job = q.get_job(id).await.unwrap();
        assert!(job.is_some(), "job {id} answered 202 is not on the broker");
    }
    // Once shut down, nothing is accepted any more.
    assert!(post(web.addr, "application/json", ORDER.as_bytes())
        .await
        .is_err());
    auditor.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_bodies_get_a_json_error_naming_the_problem() {
    let broker = EmbeddedBroker::start(BrokerConfig::default()).unwrap();
    let web = start_web(broker.addr(), Duration::from_secs(30)).await;

    let not_json = post(web.addr, "application/json", b"{not json")
        .await
        .unwrap();
    assert_eq!(not_json.status, 400, "{not_json:?}");
    assert!(not_json.body["error"].is_string(), "{not_json:?}");

    let not_declared = post(web.addr, "text/plain", ORDER.as_bytes())
        .await
        .unwrap();
    assert_eq!(not_declared.status, 415, "{not_declared:?}");

    let not_an_order = post(web.addr, "application/json", br#"{"customer":7}"#)
        .await
        .unwrap();
    assert_eq!(not_an_order.status, 422, "{not_an_order:?}");
    assert!(
        not_an_order.body["error"]
            .as_str()
            .is_some_and(|e| e.contains("customer")),
        "{not_an_order:?}"
    );

    let big = format!(
        r#"{{"customer":"{}","items":[]}}"#,
        "x".repeat(2048) // over the 1024-byte limit of start_web
    );
    let too_large = post(web.addr, "application/json", big.as_bytes())
        .await
        .unwrap();
    assert_eq!(too_large.status, 413, "{too_large:?}");
    assert_eq!(too_large.body["limit_bytes"], 1024, "{too_large:?}");

    web.stop.send(()).unwrap();
    web.served.await.unwrap().unwrap();
    let (auditor, jobs) = jobs_on_broker(broker.addr()).await;
    assert_eq!(jobs, 0, "a refused body never becomes a job");
    auditor.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_broker_gets_503_with_retry_after_not_a_hang() {
    let broker = EmbeddedBroker::start(BrokerConfig::default()).unwrap();
    let web = start_web(broker.addr(), Duration::from_secs(2)).await;
    let ok = post(web.addr, "application/json", ORDER.as_bytes())
        .await
        .unwrap();
    assert_eq!(ok.status, 202, "{ok:?}");

    broker.stop().unwrap();
    let down = post(web.addr, "application/json", ORDER.as_bytes())
        .await
        .unwrap();
    assert_eq!(down.status, 503, "{down:?}");
    assert!(down.head.contains("retry-after: 1"), "{down:?}");
    assert!(down.body["error"].is_string(), "{down:?}");

    web.stop.send(()).unwrap();
    web.served.await.unwrap().unwrap();
}
