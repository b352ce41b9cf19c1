//! A worker that reports progress and log lines while it works, handles a job it can never do
//! as unrecoverable, and prints its own events.
//!
//! `cargo run -p autobatch-async-std --example async_std_worker_progress -- [host:port] [queue]`
//! (or `BUNQUEUE_ADDR`; default 127.0.0.1:6789, queue `autobatch-progress`). Adds three jobs,
//! processes them, and stops when none is left waiting.

use std::time::Duration;

use autobatch_async_std::{Client, ClientOptions, JobOptions, Worker, WorkerOptions};
use autobatch_driver::{ActiveJob, JobError, WorkerEvent};
use futures_util::StreamExt;

/// Renders `pages` pages, reporting after each one.
async fn render(job: ActiveJob) -> Result<String, JobError> {
    let pages: u32 = job.data()?;
    if pages == 0 {
        // Retrying would not help: no more attempts.
        return Err(JobError::unrecoverable("nothing to render"));
    }
    for page in 1..=pages {
        async_std::task::sleep(Duration::from_millis(50)).await;
        // Sent at once, never waited for: the job does not pay a round trip per page.
        job.update_progress(f64::from(page) * 100.0 / f64::from(pages))
            .detach();
    }
    // Awaited: the line is on the server before the job completes.
    job.log(format!("rendered {pages} pages")).await?;
    Ok(format!("{pages} pages"))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    async_std::task::block_on(async {
        let mut args = std::env::args().skip(1);
        let addr = args
            .next()
            .or_else(|| std::env::var("BUNQUEUE_ADDR").ok())
            .unwrap_or_else(|| "127.0.0.1:6789".into());
        let queue = args.next().unwrap_or_else(|| "autobatch-progress".into());
        let options = ClientOptions::from_addr(&addr)?;

        let client = Client::connect(options.clone()).await?;
        let q = client.queue(&queue);
        for pages in [3u32, 5, 0] {
            q.add("render", &pages, JobOptions::new().attempts(3))
                .await?;
        }

        let worker =
            Worker::start(options, WorkerOptions::new(&queue).concurrency(2), render).await?;
        let mut events = worker.events();
        async_std::task::spawn(async move {
            while let Some(event) = events.next().await {
                match event {
                    WorkerEvent::Progress { id, progress, .. } => println!("{id}: {progress:.0}%"),
                    WorkerEvent::Completed { id, result } => println!("{id}: done, {result:?}"),
                    WorkerEvent::Failed { id, reason, .. } => println!("{id}: failed, {reason}"),
                    _ => {}
                }
            }
        });

        while q.count().await? > 0 || worker.running() > 0 {
            async_std::task::sleep(Duration::from_millis(200)).await;
        }
        worker.close_with_grace(Duration::from_secs(5)).await;
        client.close().await;
        Ok::<_, Box<dyn std::error::Error>>(())
    })
}
