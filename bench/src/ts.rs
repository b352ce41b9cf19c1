//! bunqueue's own TypeScript client, through `tests/peers/bench.ts` (run by the harness's
//! [`TsPeer`] with the pinned bun). One bun process per cell, so cells of every contender can
//! be interleaved; start-up happens before bench.ts starts its clock.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use autobatch_tests::TsPeer;

use crate::workload::{Cell, Contender};

/// bunqueue's TS client with `autoBatch.enabled` = `batching`.
pub struct TsClient {
    addr: SocketAddr,
    batching: bool,
}

impl TsClient {
    /// Checks the install first, so a missing bun fails at once with the install command.
    pub fn new(addr: SocketAddr, batching: bool) -> io::Result<TsClient> {
        autobatch_tests::BunqueueInstall::locate()?;
        Ok(TsClient { addr, batching })
    }
}

impl Contender for TsClient {
    fn id(&self) -> String {
        format!("ts-{}", if self.batching { "on" } else { "off" })
    }

    fn label(&self) -> String {
        format!(
            "bunqueue TS client {}, autoBatch {}",
            autobatch_tests::install::BUNQUEUE_VERSION,
            if self.batching { "on" } else { "off" }
        )
    }

    fn run(&mut self, cell: &Cell) -> io::Result<Duration> {
        let out = TsPeer::new("bench.ts")
            .target(self.addr)
            .options(&serde_json::json!({
                "total": cell.adds,
                "patterns": [cell.pattern.name()],
                "batching": [self.batching],
                "reps": 1,
                "warmup": cell.warmup,
                "queue": cell.queue,
            }))
            .run()?
            .success()?;
        let lines = out.json_lines()?;
        let ms = lines
            .iter()
            .find_map(|l| l.get("elapsed_ms").and_then(serde_json::Value::as_f64))
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("bench.ts printed no measurement:\n{}", out.stdout),
                )
            })?;
        Ok(Duration::from_secs_f64(ms / 1000.0))
    }
}
