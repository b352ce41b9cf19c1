//! bunqueue's own TypeScript client, through `tests/peers/bench.ts` (run by the harness's
//! [`TsPeer`] with the pinned bun). One bun process per cell, so cells of every contender can
//! be interleaved; start-up happens before bench.ts starts its clock.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use autobatch_tests::TsPeer;

use crate::workload::{Cell, CellCost, Contender, Latency};

/// bunqueue's TS client with `autoBatch.enabled` = `batching`.
pub struct TsClient {
    addr: SocketAddr,
    batching: bool,
    // `--fleet`: one Queue per broker (all on the host of `addr`), adds dealt round-robin.
    fleet: Option<Vec<SocketAddr>>,
    cost: CellCost,
}

impl TsClient {
    /// Checks the install first, so a missing bun fails at once with the install command.
    pub fn new(addr: SocketAddr, batching: bool) -> io::Result<TsClient> {
        autobatch_tests::BunqueueInstall::locate()?;
        Ok(TsClient {
            addr,
            batching,
            fleet: None,
            cost: CellCost::default(),
        })
    }

    /// Spread over several brokers on one host: bench.ts's `ports`, one Queue per broker,
    /// add `i` through broker `i % n`. Its id is `ts-on.nN` / `ts-off.nN` for N brokers.
    pub fn fleet(addrs: &[SocketAddr], batching: bool) -> io::Result<TsClient> {
        let mut c = Self::new(addrs[0], batching)?;
        c.fleet = Some(addrs.to_vec());
        Ok(c)
    }
}

impl Contender for TsClient {
    fn id(&self) -> String {
        let id = format!("ts-{}", if self.batching { "on" } else { "off" });
        match &self.fleet {
            Some(a) => format!("{id}.n{}", a.len()),
            None => id,
        }
    }

    fn label(&self) -> String {
        format!(
            "bunqueue TS client {}, autoBatch {}{}",
            autobatch_tests::install::BUNQUEUE_VERSION,
            if self.batching { "on" } else { "off" },
            match &self.fleet {
                Some(a) => format!(
                    ", {} broker{}",
                    a.len(),
                    if a.len() == 1 { "" } else { "s" }
                ),
                None => String::new(),
            }
        )
    }

    fn run(&mut self, cell: &Cell) -> io::Result<Duration> {
        let mut opts = serde_json::json!({
            "total": cell.adds,
            "patterns": [cell.pattern.name()],
            "batching": [self.batching],
            "reps": 1,
            "warmup": cell.warmup,
            "queue": cell.queue,
            // One queue, named as the cell's, left for the auditor to count and empty, and
            // outside the server CPU measured around the cell.
            "keep": true,
        });
        if let Some(addrs) = &self.fleet {
            let ports: Vec<u16> = addrs.iter().map(SocketAddr::port).collect();
            opts["ports"] = serde_json::json!(ports);
        }
        let out = TsPeer::new("bench.ts")
            .target(self.addr)
            .options(&opts)
            .run()?
            .success()?;
        let lines = out.json_lines()?;
        let line = lines
            .iter()
            .find(|l| l.get("elapsed_ms").is_some())
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("bench.ts printed no measurement:\n{}", out.stdout),
                )
            })?;
        let field = |k: &str| line.get(k).and_then(serde_json::Value::as_f64);
        let micros = |k: &str| field(k).map(|us| Duration::from_secs_f64(us.max(0.0) / 1e6));
        self.cost = CellCost {
            client_cpu: micros("cpu_us"),
            latency: micros("lat_p50_us")
                .zip(micros("lat_p99_us"))
                .map(|(p50, p99)| Latency { p50, p99 }),
        };
        let ms = field("elapsed_ms").unwrap_or_default();
        Ok(Duration::from_secs_f64(ms / 1000.0))
    }

    fn last_cost(&self) -> CellCost {
        self.cost
    }
}
