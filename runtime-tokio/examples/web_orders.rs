//! A web endpoint that queues one job per request: `POST /orders` with a JSON order adds a
//! `process-order` job and answers `202 {"status":"queued","id":"…"}`. It is the handler of
//! bunqueue's auto-batching write-up (<https://bunqueue.dev>), on axum: requests that arrive
//! together have their adds leave together, as one PUSHB.
//!
//! ```text
//! cargo run --release -p autobatch-tokio --example web_orders -- \
//!     [--listen 127.0.0.1:3000] [--bunqueue 127.0.0.1:6789[,HOST:PORT…]] \
//!     [--batching on|off] [--runtime multi_thread|current_thread] [--workers N] \
//!     [--add-timeout-ms 5000] [--body-limit BYTES] [--no-add]
//! curl -i -H 'content-type: application/json' \
//!     -d '{"customer":"c-42","items":[{"sku":"A-1","quantity":2}]}' localhost:3000/orders
//! ```
//!
//! Every option can come from the environment instead: `WEB_LISTEN`, `BUNQUEUE_ADDR`,
//! `WEB_BATCHING`, `WEB_RUNTIME`, `WEB_WORKERS`, `WEB_ADD_TIMEOUT_MS`, `WEB_BODY_LIMIT`,
//! `WEB_NO_ADD=1`. `--no-add` answers the same 202 without adding (a baseline: what the web
//! server costs alone). The address it listens on is printed as `listening on ADDR`.
//!
//! Answers:
//! * `202` — the job is in the queue (`id` is its id);
//! * `400` / `415` / `422` — the body is not JSON, not declared as JSON, or not an order;
//! * `413` — the body is over `--body-limit` bytes (default 64 KiB);
//! * `503` with `Retry-After` — the client's add buffer is full, no broker is reachable, or
//!   the add did not finish within `--add-timeout-ms` (no request hangs; such a job may
//!   still have been added, so clients retry with care);
//! * `502` — the server refused the job.
//!
//! SIGTERM or Ctrl-C shuts it down gracefully: it stops accepting connections, lets the
//! requests in flight finish, then closes the client, which flushes every pending add, so
//! every order answered 202 is in the queue.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use autobatch_tokio::{Client, ClientOptions, Error, JobOptions, Queue};
use axum::extract::rejection::JsonRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// The queue every order goes to.
pub const QUEUE: &str = "orders";

/// The largest body accepted by default, in bytes.
pub const DEFAULT_BODY_LIMIT: usize = 64 * 1024;

/// What `Retry-After` advises when the queue cannot take the order now, in seconds.
const RETRY_AFTER_SECS: &str = "1";

/// An order, as posted.
#[derive(Debug, Deserialize, Serialize)]
pub struct Order {
    /// Who ordered.
    pub customer: String,
    /// What they ordered.
    pub items: Vec<LineItem>,
}

/// One line of an order.
#[derive(Debug, Deserialize, Serialize)]
pub struct LineItem {
    /// The article.
    pub sku: String,
    /// How many.
    pub quantity: u32,
}

/// What the handler needs: the client and its queue (or nothing, for the `--no-add`
/// baseline), how long an add may take and how large a body may be.
#[derive(Clone)]
pub struct App {
    /// `None` answers 202 without adding.
    pub orders: Option<(Client, Queue)>,
    /// The bound on each add: past it the request gets a 503.
    pub add_timeout: Duration,
    /// The largest body accepted, in bytes.
    pub body_limit: usize,
}

/// The router: `POST /orders`.
pub fn router(app: App) -> Router {
    let limit = app.body_limit;
    Router::new()
        .route("/orders", post(create_order))
        .layer(DefaultBodyLimit::max(limit))
        .with_state(Arc::new(app))
}

async fn create_order(
    State(app): State<Arc<App>>,
    body: Result<Json<Order>, JsonRejection>,
) -> Response {
    let Json(order) = match body {
        Ok(order) => order,
        Err(rejection) => return bad_body(&rejection, app.body_limit),
    };
    let Some((client, queue)) = &app.orders else {
        // The baseline: the same work and the same answer, minus the add.
        return queued("00000000-0000-0000-0000-000000000000".into());
    };
    // With every broker down an add would wait for a reconnect: answer at once instead.
    // (`any_broker_live`, not `brokers()`: this runs on every request, and the list costs
    // two allocations.)
    if !client.any_broker_live() {
        return unavailable("no queue broker is reachable");
    }
    let add = queue.add("process-order", &order, JobOptions::new());
    match tokio::time::timeout(app.add_timeout, add).await {
        Ok(Ok(id)) => queued(id),
        Ok(Err(e)) => add_failed(&e),
        Err(_) => unavailable("the queue did not answer in time"),
    }
}

fn queued(id: String) -> Response {
    let body = json!({ "status": "queued", "id": id });
    (StatusCode::ACCEPTED, Json(body)).into_response()
}

/// 400 (not JSON), 415 (not declared JSON), 422 (JSON but not an order) or 413 (too large),
/// each with a JSON body saying what was wrong.
fn bad_body(rejection: &JsonRejection, limit: usize) -> Response {
    let status = rejection.status();
    let mut body = json!({ "error": rejection.body_text() });
    if status == StatusCode::PAYLOAD_TOO_LARGE {
        body["limit_bytes"] = json!(limit);
    }
    (status, Json(body)).into_response()
}

fn add_failed(e: &Error) -> Response {
    match e {
        // Overload, a lost connection, a shutdown: the order may be retried later.
        Error::Overflow | Error::Closed | Error::ConnectionLost { .. } | Error::Timeout { .. } => {
            unavailable(&e.to_string())
        }
        // The job itself was refused: retrying will not help.
        Error::Invalid(_) => error(StatusCode::UNPROCESSABLE_ENTITY, &e.to_string()),
        _ => error(StatusCode::BAD_GATEWAY, &e.to_string()),
    }
}

fn unavailable(why: &str) -> Response {
    let mut r = error(StatusCode::SERVICE_UNAVAILABLE, why);
    r.headers_mut().insert(
        header::RETRY_AFTER,
        header::HeaderValue::from_static(RETRY_AFTER_SECS),
    );
    r
}

fn error(status: StatusCode, why: &str) -> Response {
    (status, Json(json!({ "error": why }))).into_response()
}

/// Serves `app` on `listener` until `shutdown` resolves, lets the requests in flight finish,
/// then closes `client`: every add answered 202 has reached the server when this returns.
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: App,
    client: Option<Client>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    use axum::serve::ListenerExt;
    let listener = listener.tap_io(|tcp| {
        // Responses are small: send each at once.
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, router(app))
        .with_graceful_shutdown(shutdown)
        .await?;
    if let Some(client) = client {
        client.close().await;
    }
    Ok(())
}

/// Resolves on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}

/// The command line (or environment).
#[derive(Debug, Clone)]
pub struct Config {
    /// Where to listen.
    pub listen: String,
    /// bunqueue's address(es), comma-separated.
    pub bunqueue: String,
    /// Auto-batching of adds.
    pub batching: bool,
    /// `multi_thread` (tokio's default for servers) or `current_thread`.
    pub multi_thread: bool,
    /// Worker threads of `multi_thread` (default: one per core).
    pub workers: Option<usize>,
    /// The bound on each add.
    pub add_timeout: Duration,
    /// The largest body accepted, in bytes.
    pub body_limit: usize,
    /// Answer without adding.
    pub no_add: bool,
}

impl Config {
    /// Reads `args` (without the program name), falling back to the environment.
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Config, String> {
        let env = |k: &str| std::env::var(k).ok();
        let mut c = Config {
            listen: env("WEB_LISTEN").unwrap_or_else(|| "127.0.0.1:3000".into()),
            bunqueue: env("BUNQUEUE_ADDR").unwrap_or_else(|| "127.0.0.1:6789".into()),
            batching: env("WEB_BATCHING").map_or(Ok(true), |v| on_off(&v))?,
            multi_thread: env("WEB_RUNTIME").map_or(Ok(true), |v| flavour(&v))?,
            workers: env("WEB_WORKERS").map(|v| number(&v)).transpose()?,
            add_timeout: Duration::from_millis(
                env("WEB_ADD_TIMEOUT_MS").map_or(Ok(5000), |v| number(&v))? as u64,
            ),
            body_limit: env("WEB_BODY_LIMIT").map_or(Ok(DEFAULT_BODY_LIMIT), |v| number(&v))?,
            no_add: env("WEB_NO_ADD").is_some_and(|v| v == "1"),
        };
        let mut args = args.into_iter();
        while let Some(flag) = args.next() {
            if flag == "--no-add" {
                c.no_add = true;
                continue;
            }
            let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
            match flag.as_str() {
                "--listen" => c.listen = value,
                "--bunqueue" => c.bunqueue = value,
                "--batching" => c.batching = on_off(&value)?,
                "--runtime" => c.multi_thread = flavour(&value)?,
                "--workers" => c.workers = Some(number(&value)?),
                "--add-timeout-ms" => {
                    c.add_timeout = Duration::from_millis(number(&value)? as u64);
                }
                "--body-limit" => c.body_limit = number(&value)?,
                _ => return Err(format!("unknown option {flag}")),
            }
        }
        Ok(c)
    }
}

fn on_off(v: &str) -> Result<bool, String> {
    match v {
        "on" | "1" | "true" => Ok(true),
        "off" | "0" | "false" => Ok(false),
        _ => Err(format!("expected on or off, got {v:?}")),
    }
}

fn flavour(v: &str) -> Result<bool, String> {
    match v {
        "multi_thread" => Ok(true),
        "current_thread" => Ok(false),
        _ => Err(format!(
            "expected multi_thread or current_thread, got {v:?}"
        )),
    }
}

fn number(v: &str) -> Result<usize, String> {
    v.parse()
        .map_err(|_| format!("expected a number, got {v:?}"))
}

/// Connects (unless `--no-add`), binds, prints the address and serves until a signal.
pub async fn run(config: Config) -> Result<(), Box<dyn std::error::Error>> {
    let client = if config.no_add {
        None
    } else {
        let mut opts = ClientOptions::from_addrs(config.bunqueue.split(','))?;
        if !config.batching {
            opts = opts.batching(None);
        }
        Some(Client::connect(opts).await?)
    };
    let app = App {
        orders: client.as_ref().map(|c| (c.clone(), c.queue(QUEUE))),
        add_timeout: config.add_timeout,
        body_limit: config.body_limit,
    };
    let listener = tokio::net::TcpListener::bind(&config.listen).await?;
    let addr: SocketAddr = listener.local_addr()?;
    println!("listening on {addr}");
    serve(listener, app, client, shutdown_signal()).await?;
    eprintln!("web_orders: shut down, every queued order delivered");
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let config = Config::parse(std::env::args().skip(1))?;
    let runtime = if config.multi_thread {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        if let Some(n) = config.workers {
            b.worker_threads(n);
        }
        b.enable_all().build()?
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
    };
    runtime.block_on(run(config))
}
