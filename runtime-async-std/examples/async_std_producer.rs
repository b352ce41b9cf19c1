//! Adds jobs to a bunqueue server on async-std (discontinued upstream; prefer smol): sequential adds, then waves of 100 (auto-batched).
//!
//! `cargo run -p autobatch-async-std --example async_std_producer -- [host:port] [jobs]`
//! (or `BUNQUEUE_ADDR`; default 127.0.0.1:6789).
//!
//! The connection's pump runs on this thread, inside `block_on` (`AsyncStdRuntime::local`), so
//! an add never wakes another thread and a wave reaches the pump whole.

use std::time::Instant;

use autobatch_async_std::{AsyncStdRuntime, Client, ClientOptions, JobOptions};
use futures_util::future::join_all;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let addr = args
        .next()
        .or_else(|| std::env::var("BUNQUEUE_ADDR").ok())
        .unwrap_or_else(|| "127.0.0.1:6789".into());
    let jobs: usize = args.next().map(|n| n.parse()).transpose()?.unwrap_or(1000);

    async_std::task::block_on(async {
        let opts = ClientOptions::from_addr(&addr)?;
        let client = Client::connect_with(AsyncStdRuntime::local(), opts).await?;
        let q = client.queue("autobatch-example");

        let t = Instant::now();
        for i in 0..jobs {
            q.add("sequential", &i, JobOptions::new()).await?;
        }
        println!("{jobs} sequential adds in {:?}", t.elapsed());

        let t = Instant::now();
        for wave in 0..jobs.div_ceil(100) {
            let adds = (0..100).map(|i| q.add("wave", &(wave * 100 + i), JobOptions::new()));
            for r in join_all(adds).await {
                r?;
            }
        }
        println!("{jobs} adds in waves of 100 in {:?}", t.elapsed());
        client.close().await;
        Ok(())
    })
}
