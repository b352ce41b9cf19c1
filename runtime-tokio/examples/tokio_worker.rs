//! Processes jobs from a bunqueue queue with concurrency 10 until no job is left waiting.
//!
//! `cargo run -p autobatch-tokio --example tokio_worker -- [host:port] [queue]`
//! (or `BUNQUEUE_ADDR`; default 127.0.0.1:6789, queue `autobatch-example`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use autobatch_tokio::{Client, ClientOptions, Worker, WorkerOptions};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let addr = args
        .next()
        .or_else(|| std::env::var("BUNQUEUE_ADDR").ok())
        .unwrap_or_else(|| "127.0.0.1:6789".into());
    let queue = args.next().unwrap_or_else(|| "autobatch-example".into());
    let options = ClientOptions::from_addr(&addr)?;

    let done = Arc::new(AtomicU64::new(0));
    let counter = done.clone();
    let worker = Worker::start(
        options.clone(),
        WorkerOptions::new(&queue).concurrency(10),
        move |job| {
            let counter = counter.clone();
            async move {
                counter.fetch_add(1, Ordering::Relaxed);
                Ok::<_, String>(format!("processed {}", job.name))
            }
        },
    )
    .await?;

    let client = Client::connect(options).await?;
    let q = client.queue(&queue);
    while q.count().await? > 0 {
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    worker.close().await;
    client.close().await;
    println!("processed {} jobs", done.load(Ordering::Relaxed));
    Ok(())
}
