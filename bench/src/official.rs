//! The official synchronous Rust client, `bunqueue-client` 0.1.1 from crates.io.
//!
//! Its [`Connection`] is one TCP socket behind a mutex: a call writes a frame and blocks until
//! the reply, so calls from several threads take turns. The concurrent patterns are run the way
//! its API allows: `w` threads share one [`Queue`] (clones share the connection); each wave every
//! thread adds once, then all meet at a barrier before the next wave.

use std::io;
use std::net::SocketAddr;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use bunqueue_client::{Connection, ConnectionOptions, JobOptions, Queue, Value};

use crate::cpu;
use crate::workload::{Cell, CellCost, Contender, Latency, Pattern};

/// The version measured (pinned in Cargo.toml).
pub const VERSION: &str = "0.1.1";

/// `bunqueue-client` with one shared connection.
pub struct Official {
    connection: Connection,
    cost: CellCost,
}

impl Official {
    /// Connect to `addr` (the connection is opened by the first call).
    pub fn connect(addr: SocketAddr) -> io::Result<Official> {
        let connection = Connection::new(ConnectionOptions {
            host: addr.ip().to_string(),
            port: addr.port(),
            ..ConnectionOptions::default()
        });
        connection.ensure_connected().map_err(io::Error::other)?;
        Ok(Official {
            connection,
            cost: CellCost::default(),
        })
    }

    /// `n` adds in `pattern`; returns the CPU time of every thread that made them (each
    /// thread reads its own, since the wave threads exit before the cell ends) and, with
    /// `lat`, each add's latency.
    fn adds(
        queue: &Queue,
        pattern: Pattern,
        n: usize,
        lat: Option<&mut Vec<Duration>>,
    ) -> io::Result<Option<Duration>> {
        let w = pattern.wave();
        let record = lat.is_some();
        if w == 1 {
            let cpu0 = cpu::this_thread();
            let mut own = Vec::new();
            for i in 0..n {
                let start = Instant::now();
                add(queue, i)?;
                if record {
                    own.push(start.elapsed());
                }
            }
            if let Some(lat) = lat {
                lat.append(&mut own);
            }
            return Ok(cpu::delta(cpu0, cpu::this_thread()));
        }
        let barrier = Barrier::new(w);
        let per_thread = std::thread::scope(|s| {
            let handles: Vec<_> = (0..w)
                .map(|t| {
                    let barrier = &barrier;
                    let queue = queue.clone();
                    s.spawn(move || -> io::Result<(Option<Duration>, Vec<Duration>)> {
                        let cpu0 = cpu::this_thread();
                        let mut own = Vec::new();
                        let mut result = Ok(());
                        for wave_start in (0..n).step_by(w) {
                            let start = Instant::now();
                            if result.is_ok() && wave_start + t < n {
                                result = add(&queue, wave_start + t);
                                if record {
                                    own.push(start.elapsed());
                                }
                            }
                            barrier.wait();
                        }
                        result.map(|()| (cpu::delta(cpu0, cpu::this_thread()), own))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("bunqueue-client thread panicked"))
                .collect::<io::Result<Vec<_>>>()
        })?;
        let mut total = Some(Duration::ZERO);
        let mut all = Vec::new();
        for (cpu, mut own) in per_thread {
            total = total.zip(cpu).map(|(a, b)| a + b);
            all.append(&mut own);
        }
        if let Some(lat) = lat {
            lat.append(&mut all);
        }
        Ok(total)
    }
}

fn add(queue: &Queue, i: usize) -> io::Result<()> {
    let data = Value::Map(vec![(Value::from("i"), Value::from(i as u64))]);
    queue
        .add("bench", data, JobOptions::default())
        .map(drop)
        .map_err(io::Error::other)
}

impl Contender for Official {
    fn id(&self) -> String {
        "official".into()
    }

    fn label(&self) -> String {
        format!("bunqueue-client {VERSION} (Rust, sync)")
    }

    fn run(&mut self, cell: &Cell) -> io::Result<Duration> {
        let queue = Queue::with_connection(cell.queue.clone(), self.connection.clone());
        Self::adds(&queue, cell.pattern, cell.warmup, None)?;
        // Thread start-up for the concurrent patterns is inside the timed region: the same
        // for every wave count and small next to thousands of round trips.
        let mut lat = Vec::with_capacity(cell.adds);
        let t0 = Instant::now();
        let client_cpu = Self::adds(&queue, cell.pattern, cell.adds, Some(&mut lat))?;
        let elapsed = t0.elapsed();
        self.cost = CellCost {
            client_cpu,
            latency: Latency::of(&mut lat),
        };
        Ok(elapsed)
    }

    fn last_cost(&self) -> CellCost {
        self.cost
    }
}

/// Checks that a cell's adds all landed, and empties its queue so the server does not grow
/// across cells. Uses its own `bunqueue-client` connection, outside every timed region.
pub struct Auditor {
    connection: Connection,
}

impl Auditor {
    /// Connect to `addr`.
    pub fn connect(addr: SocketAddr) -> io::Result<Auditor> {
        Official::connect(addr).map(|o| Auditor {
            connection: o.connection,
        })
    }

    /// Jobs in `queue` (waiting + delayed + active + ...), summed over the states the server
    /// reports.
    pub fn jobs_in(&self, queue: &str) -> io::Result<i64> {
        let q = Queue::with_connection(queue, self.connection.clone());
        let counts = q.get_job_counts().map_err(io::Error::other)?;
        Ok(counts
            .iter()
            .filter(|(state, _)| !matches!(state.as_str(), "completed" | "failed"))
            .map(|(_, n)| *n)
            .sum())
    }

    /// Obliterate `queue`; errors (a broker without Obliterate) are ignored.
    pub fn obliterate(&self, queue: &str) {
        let _ = Queue::with_connection(queue, self.connection.clone()).obliterate();
    }
}
