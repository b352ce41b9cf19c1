//! Prints a queue's events as they happen (smol).
//!
//! `cargo run -p autobatch-smol --example smol_queue_events -- [host:port] [queue]`
//! (or `BUNQUEUE_ADDR`; default 127.0.0.1:6789, queue `autobatch-example`). Run a producer or
//! a worker example on the same queue meanwhile to see events.

use autobatch_driver::{QueueEvent, QueueEvents};
use autobatch_smol::{ClientOptions, SmolRuntime};
use futures_util::StreamExt;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let addr = args
        .next()
        .or_else(|| std::env::var("BUNQUEUE_ADDR").ok())
        .unwrap_or_else(|| "127.0.0.1:6789".into());
    let queue = args.next().unwrap_or_else(|| "autobatch-example".into());
    let options = ClientOptions::from_addr(&addr)?;

    smol::block_on(async {
        let mut events = QueueEvents::<SmolRuntime>::connect(options, &queue).await?;
        println!("listening to {queue}; Ctrl-C to stop");
        while let Some(event) = events.next().await {
            match event {
                QueueEvent::Waiting { job_id, .. } => println!("waiting   {job_id}"),
                QueueEvent::Active { job_id, .. } => println!("active    {job_id}"),
                QueueEvent::Progress {
                    job_id, progress, ..
                } => {
                    println!("progress  {job_id}: {progress:?}")
                }
                QueueEvent::Completed {
                    job_id,
                    return_value,
                    ..
                } => println!("completed {job_id}: {return_value:?}"),
                QueueEvent::Failed { job_id, reason, .. } => {
                    println!("failed    {job_id}: {reason}")
                }
                // Never silent: after a reconnect, events in between may be missing.
                QueueEvent::Gap => println!("reconnected: some events may have been missed"),
                QueueEvent::Lagged { missed } => println!("too slow: {missed} events dropped"),
                other => println!("{:9} {:?}", other.name(), other.job_id()),
            }
        }
        Ok(())
    })
}
