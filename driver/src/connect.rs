//! Opening connections: one pump per broker, spawned on the runtime, and the wait for each
//! one's first answer (which proves the connection, and the token).

use std::sync::Arc;

use autobatch_core::session::{Session, WorkerConfig};
use autobatch_core::Error;
use futures_channel::oneshot;

use crate::cmd::JobTx;
use crate::conn::Conn;
use crate::event_buffer::EventHook;
use crate::inbox;
use crate::links::{Ends, Links, Shared};
use crate::options::{ClientOptions, ConnectError, OptionsError};
use crate::pump::{Pump, PumpParts};
use crate::runtime::Runtime;

/// A pump spawned for one broker, and the receiver of its first outcome.
type Spawned = (Ends, oneshot::Receiver<Result<(), ConnectError>>);

/// Spawns the pump of a new connection and waits for its first request to be answered.
pub(crate) async fn start<R: Runtime>(
    runtime: R,
    options: &ClientOptions,
    worker: Option<(WorkerConfig, JobTx)>,
) -> Result<Ends, ConnectError> {
    let (ends, started) = spawn(runtime, options, worker, None, false, 0)?;
    first_outcome(started).await.map(|()| ends)
}

async fn first_outcome(
    started: oneshot::Receiver<Result<(), ConnectError>>,
) -> Result<(), ConnectError> {
    match started.await {
        Ok(r) => r,
        Err(_) => Err(ConnectError::Handshake(Error::Closed)),
    }
}

/// Spawns one pump per broker of `options` and waits for each one's first outcome. Succeeds
/// when at least one broker answered; the others keep trying in the background (they join
/// once up). A refused token, a TLS failure or invalid options fail it whatever the others
/// (every broker gets the same settings, so these are configuration errors).
pub(crate) async fn start_links<R: Runtime>(
    runtime: R,
    options: &ClientOptions,
    worker: Option<(WorkerConfig, JobTx)>,
) -> Result<Links, ConnectError> {
    options.validate()?;
    let addrs = options.broker_addrs();
    if addrs.len() == 1 {
        let ends = start(runtime, options, worker).await?;
        return Ok(Links::new(vec![ends], options.stall_timeout)
            .with_idempotent_adds(options.idempotent_adds));
    }
    let mut parts = Vec::with_capacity(addrs.len());
    let mut waits = Vec::with_capacity(addrs.len());
    for (i, (host, port)) in addrs.iter().enumerate() {
        let (ends, started) = spawn(
            runtime.clone(),
            &options.for_broker(host, *port),
            worker.clone(),
            None,
            true,
            i,
        )?;
        parts.push(ends);
        waits.push(first_outcome(started));
    }
    let outcomes = futures_util::future::join_all(waits).await;
    let mut first_err = None;
    let mut up = 0;
    for (r, (host, port)) in outcomes.into_iter().zip(&addrs) {
        match r {
            Ok(()) => up += 1,
            Err(e @ (ConnectError::Options(_) | ConnectError::Tls(_))) => return Err(e),
            Err(ConnectError::Handshake(Error::AuthFailed(m))) => {
                return Err(ConnectError::Handshake(Error::AuthFailed(m)))
            }
            Err(e) => {
                tracing::warn!(addr = %format!("{host}:{port}"), error = %e, "broker unreachable at connect; retrying in the background");
                first_err.get_or_insert(e);
            }
        }
    }
    match (up, first_err) {
        (0, Some(e)) => Err(e),
        _ => Ok(Links::new(parts, options.stall_timeout)
            .with_shared_storage(options.shared_storage)
            .with_idempotent_adds(options.idempotent_adds)),
    }
}

/// Like [`start`], for a `QueueEvents` connection: the hook subscribes on every connection.
pub(crate) async fn start_with_events<R: Runtime>(
    runtime: R,
    options: &ClientOptions,
    hook: EventHook,
) -> Result<Ends, ConnectError> {
    let (ends, started) = spawn(runtime, options, None, Some(hook), false, 0)?;
    first_outcome(started).await.map(|()| ends)
}

fn spawn<R: Runtime>(
    runtime: R,
    options: &ClientOptions,
    worker: Option<(WorkerConfig, JobTx)>,
    events: Option<EventHook>,
    keep_trying: bool,
    link: usize,
) -> Result<Spawned, ConnectError> {
    let (worker_config, jobs) = match worker {
        Some((c, j)) => (Some(c), Some(j)),
        None => (None, None),
    };
    let config = options.session_config(worker_config)?;
    let session = Session::new(config, runtime.now()).map_err(OptionsError::from_session)?;
    // Files are read and the rustls configuration built once, here: a bad CA or key fails
    // `connect` before anything is sent.
    let tls = match &options.tls {
        Some(t) => Some(t.connector(&options.host)?),
        None => None,
    };
    let shared = Arc::new(Shared::new(format!("{}:{}", options.host, options.port)));
    let (tx, rx) = inbox::inbox();
    let (pump, started) = Pump::new(PumpParts {
        runtime: runtime.clone(),
        session,
        host: options.host.clone(),
        port: options.port,
        connect_timeout: options.connect_timeout,
        tls,
        shared: shared.clone(),
        rx,
        jobs,
        events,
        keep_trying,
        link,
        shared_storage: options.shared_storage,
    });
    let (direct, task) = Conn::new(pump);
    runtime.spawn(Box::pin(task));
    Ok((Ends { tx, shared, direct }, started))
}
