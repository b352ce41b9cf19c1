//! Running the cells: every contender, every pattern, every repetition, interleaved.

use std::collections::HashMap;
use std::io::{self, IsTerminal, Write};
use std::time::{Duration, Instant};

use crate::cpu::{self, Threads};
use crate::official::Auditor;
use crate::stats::Summary;
use crate::workload::{Cell, Contender, Latency, Pattern};

/// Sizes of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Rows of the table.
    pub patterns: Vec<Pattern>,
    /// Timed adds per cell.
    pub adds: usize,
    /// Untimed adds before each cell's timed ones.
    pub warmup: usize,
    /// Repetitions of every cell.
    pub reps: usize,
    /// Prefix of the queue names (each cell gets its own queue).
    pub queue_prefix: String,
}

/// One timed cell.
#[derive(Debug, Clone)]
pub struct Sample {
    /// Contender id.
    pub contender: String,
    /// Pattern.
    pub pattern: Pattern,
    /// Repetition, from 0.
    pub rep: usize,
    /// Timed adds.
    pub adds: usize,
    /// Time they took.
    pub elapsed: Duration,
    /// Frames the client wrote during the timed adds, where it can tell.
    pub frames: Option<u64>,
    /// The client's CPU time over the timed adds, where it can tell.
    pub client_cpu: Option<Duration>,
    /// The server's CPU time over the whole cell, warm-up adds included, where it is known.
    pub server_cpu: Option<Duration>,
    /// Untimed warm-up adds of the cell (they count in `server_cpu`).
    pub warmup: usize,
    /// Add latencies of the timed adds, where the client records them.
    pub latency: Option<Latency>,
}

impl Sample {
    /// Adds per second.
    pub fn ops_per_sec(&self) -> f64 {
        self.adds as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// The client's CPU time per timed add, in microseconds.
    pub fn client_us_per_add(&self) -> Option<f64> {
        Some(self.client_cpu?.as_secs_f64() * 1e6 / self.adds.max(1) as f64)
    }

    /// The server's CPU time per add of the cell (warm-up included), in microseconds.
    pub fn server_us_per_add(&self) -> Option<f64> {
        Some(self.server_cpu?.as_secs_f64() * 1e6 / (self.adds + self.warmup).max(1) as f64)
    }
}

/// Everything measured in one run.
#[derive(Debug, Clone, Default)]
pub struct Measurements {
    /// `(id, label)` of every contender, in plan order.
    pub contenders: Vec<(String, String)>,
    /// All cells, in the order they ran.
    pub samples: Vec<Sample>,
    /// Wall-clock time of the whole run.
    pub wall: Duration,
}

impl Measurements {
    /// ops/s of `contender` in `pattern`, one per repetition, in repetition order.
    pub fn series(&self, contender: &str, pattern: Pattern) -> Vec<f64> {
        self.series_of(contender, pattern, |s| Some(s.ops_per_sec()))
    }

    /// `f` of every sample of `contender` in `pattern` that has it, in repetition order.
    pub fn series_of(
        &self,
        contender: &str,
        pattern: Pattern,
        f: impl Fn(&Sample) -> Option<f64>,
    ) -> Vec<f64> {
        let mut v: Vec<&Sample> = self
            .samples
            .iter()
            .filter(|s| s.contender == contender && s.pattern == pattern)
            .collect();
        v.sort_by_key(|s| s.rep);
        v.into_iter().filter_map(f).collect()
    }

    /// `(f(a), f(b))` for every repetition in which both `a` and `b` ran `pattern` and both
    /// have `f`, in repetition order: pairs that always come from the same repetition, even
    /// when some repetitions lack a reading.
    pub fn paired_of(
        &self,
        a: &str,
        b: &str,
        pattern: Pattern,
        f: impl Fn(&Sample) -> Option<f64>,
    ) -> Vec<(f64, f64)> {
        let of = |id: &str, rep: usize| {
            self.samples
                .iter()
                .find(|s| s.contender == id && s.pattern == pattern && s.rep == rep)
                .and_then(&f)
        };
        let mut reps: Vec<usize> = self
            .samples
            .iter()
            .filter(|s| s.contender == a && s.pattern == pattern)
            .map(|s| s.rep)
            .collect();
        reps.sort_unstable();
        reps.dedup();
        reps.into_iter()
            .filter_map(|rep| Some((of(a, rep)?, of(b, rep)?)))
            .collect()
    }

    /// Median and spread of `f` over the repetitions that have it.
    pub fn summary_of(
        &self,
        contender: &str,
        pattern: Pattern,
        f: impl Fn(&Sample) -> Option<f64>,
    ) -> Option<Summary> {
        Summary::of(&self.series_of(contender, pattern, f))
    }

    /// Adds per frame written, over all repetitions, where the client reports frames.
    pub fn adds_per_frame(&self, contender: &str, pattern: Pattern) -> Option<f64> {
        let (adds, frames) = self
            .samples
            .iter()
            .filter(|s| s.contender == contender && s.pattern == pattern)
            .try_fold((0u64, 0u64), |(a, f), s| {
                Some((a + s.adds as u64, f + s.frames?))
            })?;
        (frames > 0).then(|| adds as f64 / frames as f64)
    }

    /// Median and spread of [`series`](Self::series).
    pub fn summary(&self, contender: &str, pattern: Pattern) -> Option<Summary> {
        Summary::of(&self.series(contender, pattern))
    }

    /// The label of a contender id.
    pub fn label(&self, id: &str) -> String {
        self.contenders
            .iter()
            .find(|(i, _)| i == id)
            .map(|(_, l)| l.clone())
            .unwrap_or_else(|| id.to_owned())
    }

    /// Whether a contender took part.
    pub fn has(&self, id: &str) -> bool {
        self.contenders.iter().any(|(i, _)| i == id)
    }
}

/// Checks and cleans up each cell's queue after it ran (outside the timed region).
pub trait AfterCell {
    /// Called with the cell and the number of jobs it should have left in its queue (`None`
    /// when the contender cleans up itself or adds nothing).
    fn after(&mut self, cell: &Cell, expected_jobs: Option<usize>) -> io::Result<()>;
}

/// `--no-verify`: nothing after a cell.
pub struct NoCheck;

impl AfterCell for NoCheck {
    fn after(&mut self, _: &Cell, _: Option<usize>) -> io::Result<()> {
        Ok(())
    }
}

impl AfterCell for Auditor {
    fn after(&mut self, cell: &Cell, expected_jobs: Option<usize>) -> io::Result<()> {
        if let Some(expected) = expected_jobs {
            let found = self.jobs_in(&cell.queue)?;
            if found != expected as i64 {
                return Err(io::Error::other(format!(
                    "queue {} holds {found} jobs after the cell, expected {expected}: \
                     adds were lost or duplicated",
                    cell.queue
                )));
            }
            self.obliterate(&cell.queue);
        }
        Ok(())
    }
}

/// The [`AfterCell`] check of a `--tls` run: cells of the TLS contenders (`autobatch-tls-…`)
/// are checked on the TLS broker, the others on the plain one.
pub struct TlsRouted {
    /// The plain broker's auditor.
    pub plain: Auditor,
    /// The TLS broker's auditor.
    pub tls: TlsAuditor,
}

impl AfterCell for TlsRouted {
    fn after(&mut self, cell: &Cell, expected_jobs: Option<usize>) -> io::Result<()> {
        if cell.queue.contains("-autobatch-tls-") {
            self.tls.after(cell, expected_jobs)
        } else {
            self.plain.after(cell, expected_jobs)
        }
    }
}

/// Checks and empties cell queues over TLS, through a blocking rustls connection
/// ([`autobatch_tests::RawClient::connect_tls`]).
pub struct TlsAuditor(autobatch_tests::RawClient);

impl TlsAuditor {
    /// Connects to `addr`, trusting the CAs in `ca_pem`.
    pub fn connect(addr: std::net::SocketAddr, ca_pem: &[u8]) -> io::Result<TlsAuditor> {
        autobatch_tests::RawClient::connect_tls(addr, ca_pem, None).map(TlsAuditor)
    }
}

impl AfterCell for TlsAuditor {
    fn after(&mut self, cell: &Cell, expected_jobs: Option<usize>) -> io::Result<()> {
        if let Some(expected) = expected_jobs {
            let c = self.0.counts(&cell.queue);
            let found = c.waiting + c.prioritized + c.delayed + c.active;
            if found != expected as u64 {
                return Err(io::Error::other(format!(
                    "queue {} holds {found} jobs after the cell (over TLS), expected {expected}: \
                     adds were lost or duplicated",
                    cell.queue
                )));
            }
            // Not emptied: the embedded broker has no Obliterate (the plain auditor's call is
            // ignored there too), so both twins keep their jobs alike.
        }
        Ok(())
    }
}

/// Whether a contender's jobs stay in its queue for the [`AfterCell`] check.
pub fn leaves_jobs(id: &str) -> bool {
    // Every client's jobs are counted, the TS client's too (bench.ts `keep`); the Ping
    // floor adds nothing.
    id != "floor"
}

impl Plan {
    /// The `seq`-th cell of `pattern` for contender `id`, on a queue of its own.
    fn cell(&self, pattern: Pattern, id: &str, seq: usize) -> Cell {
        Cell {
            pattern,
            adds: self.adds,
            warmup: self.warmup,
            queue: format!(
                "{}-{}-{id}-{}-{seq}",
                self.queue_prefix,
                std::process::id(),
                pattern.name()
            ),
        }
    }
}

/// Run every cell of `plan` for every contender. Order: for each repetition, for each
/// pattern, every contender back to back, starting one further along the list at each
/// repetition (so no contender always runs first or right after a given other one).
/// `server`, where known, is read before and after each cell for the server's CPU time.
pub fn run(
    plan: &Plan,
    contenders: &mut [Box<dyn Contender>],
    after: &mut dyn AfterCell,
    server: Option<&Threads>,
) -> io::Result<Measurements> {
    let started = Instant::now();
    let mut m = Measurements {
        contenders: contenders.iter().map(|c| (c.id(), c.label())).collect(),
        ..Measurements::default()
    };
    let total: usize = plan
        .patterns
        .iter()
        .map(|p| contenders.iter().filter(|c| c.applies(*p)).count())
        .sum::<usize>()
        * plan.reps;
    let mut progress = Progress::new(total);
    let n = contenders.len();
    let mut names: HashMap<String, usize> = HashMap::new();
    for rep in 0..plan.reps {
        for &pattern in &plan.patterns {
            for k in 0..n {
                let c = &mut contenders[(k + rep) % n];
                if !c.applies(pattern) {
                    continue;
                }
                let id = c.id();
                let seq = names.entry(id.clone()).or_default();
                *seq += 1;
                let cell = plan.cell(pattern, &id, *seq);
                progress.start(&format!(
                    "{} {} rep {}/{}",
                    pattern.name(),
                    c.label(),
                    rep + 1,
                    plan.reps
                ));
                let server_before = server.and_then(Threads::now);
                let elapsed = c.run(&cell).map_err(|e| {
                    progress.finish();
                    io::Error::new(
                        e.kind(),
                        format!("{} / {} / rep {}: {e}", c.label(), pattern.name(), rep + 1),
                    )
                })?;
                let server_cpu = cpu::delta(server_before, server.and_then(Threads::now));
                let expected = leaves_jobs(&id).then_some(cell.warmup + cell.adds);
                after
                    .after(&cell, expected)
                    .inspect_err(|_| progress.finish())?;
                let sample = Sample {
                    contender: id,
                    pattern,
                    rep,
                    adds: plan.adds,
                    elapsed,
                    frames: c.last_frames(),
                    client_cpu: c.last_cost().client_cpu,
                    server_cpu,
                    warmup: plan.warmup,
                    latency: c.last_cost().latency,
                };
                progress.done(sample.ops_per_sec());
                m.samples.push(sample);
            }
        }
    }
    progress.finish();
    m.wall = started.elapsed();
    Ok(m)
}

/// The progress line on stderr: rewritten in place on a terminal, one line per cell otherwise.
struct Progress {
    total: usize,
    k: usize,
    tty: bool,
    line: String,
}

impl Progress {
    fn new(total: usize) -> Progress {
        Progress {
            total,
            k: 0,
            tty: io::stderr().is_terminal(),
            line: String::new(),
        }
    }

    fn start(&mut self, what: &str) {
        self.k += 1;
        self.line = format!("[{}/{}] {what} …", self.k, self.total);
        if self.tty {
            eprint!("\r\x1b[2K{}", self.line);
            let _ = io::stderr().flush();
        }
    }

    fn done(&mut self, ops: f64) {
        let line = format!(
            "{} {} ops/s",
            self.line.trim_end_matches(" …"),
            crate::table::thousands(ops)
        );
        if self.tty {
            eprint!("\r\x1b[2K{line}");
            let _ = io::stderr().flush();
        } else {
            eprintln!("{line}");
        }
    }

    fn finish(&mut self) {
        if self.tty && self.k > 0 {
            eprintln!();
            self.k = 0;
        }
    }
}
