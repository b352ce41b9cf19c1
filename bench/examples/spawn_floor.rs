//! What tokio itself costs for one task per add, with no client in the way.
//!
//! A published goal asks that one task per add on tokio's `multi_thread` runtime cost at most
//! 1.2x the client CPU of `current_thread`. This example runs the same shape with the least
//! possible client: each add is a spawned task that puts a `oneshot` sender into a shared
//! inbox (waking a "pump" task only when the inbox was empty, as autobatch's does) and awaits
//! its answer; the pump takes the whole inbox, makes one round trip of one byte to an echo
//! thread over loopback TCP (the server), and answers every task it took. Waves of `WAVE`
//! tasks are spawned from the `block_on` thread and joined, as `autobatch-bench --spawn-adds`
//! does. No encoding, no session, no batcher: what is left is the runtime's spawning, waking
//! and joining, and a socket.
//!
//! CPU time is every thread of this process but the echo thread's, over the timed waves
//! (`/proc/self/task/*/schedstat`), for each runtime in turn, repeated and interleaved.
//!
//! ```sh
//! cargo run --release -p autobatch-bench --example spawn_floor -- [WAVES] [WAVE] [REPS]
//! ```

use std::future::poll_fn;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};
use std::time::Duration;

use futures::channel::oneshot;
use futures::future::join_all;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The name of the echo thread, whose CPU is the server's and not counted.
const ECHO: &str = "spawn-floor-echo";

#[derive(Default)]
struct Inbox {
    waiting: Vec<oneshot::Sender<u64>>,
    pump: Option<Waker>,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let waves: usize = args.next().map_or(Ok(200), |a| a.parse())?;
    let wave: usize = args.next().map_or(Ok(100), |a| a.parse())?;
    let reps: usize = args.next().map_or(Ok(5), |a| a.parse())?;
    let addr = echo_server()?;

    let mut current = Vec::new();
    let mut multi = Vec::new();
    for _ in 0..reps {
        let ct = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        current.push(run(&ct, addr, waves, wave)?);
        let mt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        multi.push(run(&mt, addr, waves, wave)?);
    }
    let ratios: Vec<f64> = multi.iter().zip(&current).map(|(m, c)| m / c).collect();
    println!(
        "one task per add, waves of {wave}, {waves} waves, {reps} reps (median, min–max):\n  \
         current_thread {}\n  multi_thread   {}\n  multi ÷ current {}",
        summary(&current, "µs per add"),
        summary(&multi, "µs per add"),
        summary(&ratios, "x"),
    );
    Ok(())
}

/// µs of client CPU per add over `waves` waves of `wave` spawned adds on `rt`.
fn run(
    rt: &tokio::runtime::Runtime,
    addr: SocketAddr,
    waves: usize,
    wave: usize,
) -> std::io::Result<f64> {
    rt.block_on(async {
        let stream = tokio::net::TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let inbox = Arc::new(Mutex::new(Inbox::default()));
        let pump = tokio::spawn(pump(stream, inbox.clone()));
        // Warm-up: the runtime's threads started, the pump's buffers grown.
        adds(&inbox, waves / 10 + 1, wave).await;
        let before = client_cpu();
        adds(&inbox, waves, wave).await;
        let cpu = client_cpu() - before;
        pump.abort();
        Ok(cpu.as_secs_f64() * 1e6 / (waves * wave) as f64)
    })
}

async fn adds(inbox: &Arc<Mutex<Inbox>>, waves: usize, wave: usize) {
    for _ in 0..waves {
        let tasks: Vec<_> = (0..wave)
            .map(|_| {
                let inbox = inbox.clone();
                tokio::spawn(async move {
                    let (tx, rx) = oneshot::channel();
                    let pump = {
                        let mut inbox = inbox.lock().unwrap();
                        inbox.waiting.push(tx);
                        inbox.pump.take()
                    };
                    if let Some(pump) = pump {
                        pump.wake();
                    }
                    rx.await.expect("answered")
                })
            })
            .collect();
        for t in join_all(tasks).await {
            t.expect("an add's task panicked");
        }
    }
}

/// Takes the whole inbox, makes one round trip to the echo thread, answers all it took.
async fn pump(mut stream: tokio::net::TcpStream, inbox: Arc<Mutex<Inbox>>) -> std::io::Result<()> {
    let mut taken = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        poll_fn(|cx| {
            let mut inbox = inbox.lock().unwrap();
            if inbox.waiting.is_empty() {
                inbox.pump = Some(cx.waker().clone());
                Poll::Pending
            } else {
                std::mem::swap(&mut inbox.waiting, &mut taken);
                Poll::Ready(())
            }
        })
        .await;
        stream.write_all(&byte).await?;
        stream.read_exact(&mut byte).await?;
        for (i, tx) in taken.drain(..).enumerate() {
            let _ = tx.send(i as u64);
        }
    }
}

/// A thread accepting connections, each echoed byte by byte on a thread of its own.
fn echo_server() -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    std::thread::Builder::new()
        .name(ECHO.into())
        .spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                // Its own thread, named like this one: a runtime that is done with its
                // connection may not have closed it yet.
                let _ = std::thread::Builder::new()
                    .name(ECHO.into())
                    .spawn(move || {
                        let _ = conn.set_nodelay(true);
                        let mut byte = [0u8; 1];
                        while conn.read_exact(&mut byte).is_ok() {
                            if conn.write_all(&byte).is_err() {
                                break;
                            }
                        }
                    });
            }
        })?;
    Ok(addr)
}

/// CPU time of every thread of this process but the echo thread.
fn client_cpu() -> Duration {
    let mut total = Duration::ZERO;
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return total;
    };
    for task in tasks.flatten() {
        let path = task.path();
        let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        if comm.trim_end() == ECHO {
            continue;
        }
        let stat = std::fs::read_to_string(path.join("schedstat")).unwrap_or_default();
        if let Some(ns) = stat.split_whitespace().next().and_then(|n| n.parse().ok()) {
            total += Duration::from_nanos(ns);
        }
    }
    total
}

fn summary(xs: &[f64], unit: &str) -> String {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    format!(
        "{:.2} {unit} ({:.2}–{:.2})",
        v[v.len() / 2],
        v[0],
        v[v.len() - 1]
    )
}
