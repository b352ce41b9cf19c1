//! The command line as typed: [`Args`], parsed by clap. Which run it asks for, the defaults
//! that depend on that run, and the flags that cannot go together are decided in one place,
//! `crate::mode`, so every field here is what the user gave (`None`, `false` or empty when
//! left out).

use std::path::PathBuf;

use clap::{Parser, ValueEnum};

use crate::runtime_kind::RuntimeKind;
use crate::web;

/// add() throughput of autobatch with batching off and on, the four patterns of bunqueue's
/// auto-batching write-up.
///
/// Without arguments: the embedded broker in-process, the four patterns, 5 interleaved
/// repetitions, the table on stdout and progress on stderr.
#[derive(Debug, Parser)]
#[command(name = "autobatch-bench", version, about, long_about = None)]
pub struct Args {
    /// Measure against this server (HOST:PORT, e.g. a real bunqueue) instead of starting one.
    #[arg(long, value_name = "HOST:PORT")]
    pub server: Option<String>,

    /// Runtime adapter(s) for the autobatch client, comma-separated: with several, the same
    /// client runs on each, interleaved, and a table puts them side by side (the goals and
    /// the throughput table are the first one's) [default: tokio].
    #[arg(long, value_enum, value_delimiter = ',')]
    pub runtime: Vec<RuntimeKind>,

    /// Timed adds per cell [default: 20000; 5000 with --compare; 500 with --fleet; 300 with
    /// --smoke].
    #[arg(long, value_name = "N")]
    pub adds: Option<usize>,

    /// Repetitions of every cell [default: 5; 3 with --fleet; 1 with --smoke].
    #[arg(long, value_name = "N")]
    pub reps: Option<usize>,

    /// Untimed warm-up adds before each cell [default: adds/20, 50..=1000].
    #[arg(long, value_name = "N")]
    pub warmup: Option<usize>,

    /// Patterns to run, comma-separated (seq, all10, all50, all100 or any allN) [default:
    /// seq,all10,all50,all100].
    #[arg(long, value_delimiter = ',')]
    pub patterns: Vec<String>,

    /// Write machine-readable results (samples, summaries, ratios, machine, date) here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,

    /// Write an SVG bar chart of the table here.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,

    /// A quick run to check everything works (a few hundred adds per cell, 1 rep): what CI runs.
    #[arg(long)]
    pub smoke: bool,

    /// Side by side against one real bunqueue 2.9.5 server: autobatch, bunqueue's TS client
    /// and the official Rust client `bunqueue-client`, plus the ping-pong floor.
    #[arg(long)]
    pub compare: bool,

    /// With --compare: bunqueue's storage, memory (its default) or SQLite (a database file in
    /// a temporary directory, removed afterwards) [default: memory].
    #[arg(long, value_enum)]
    pub storage: Option<Storage>,

    /// bunqueue's PostgreSQL fleet: start a throwaway PostgreSQL (`initdb` from
    /// /usr/lib/postgresql/15/bin, or $AUTOBATCH_PG_BIN) and as many bunqueue brokers as the
    /// largest size, then measure autobatch and bunqueue's TS client with their producers
    /// spread over the first N brokers, for every N given (e.g. `--fleet 1,2,3`).
    #[arg(long, value_name = "N,…", value_delimiter = ',')]
    pub fleet: Option<Vec<usize>>,

    /// tokio runtimes only: each add of a wave runs in its own spawned task (joined), as
    /// concurrent request handlers add, instead of `join_all` in one task.
    #[arg(long)]
    pub spawn_adds: bool,

    /// Which batching modes to run (one mode alone is for profiling; ratios need both)
    /// [default: both].
    #[arg(long, value_enum)]
    pub batching: Option<Batching>,

    /// Skip counting each cell's jobs on the server afterwards (and emptying its queue).
    #[arg(long)]
    pub no_verify: bool,

    /// The cost of TLS: the throughput table over plain TCP and over TLS (rustls), interleaved,
    /// against two embedded brokers of the same configuration in this process, one serving
    /// TLS with a certificate made at start. Not with --compare or --server.
    #[arg(long)]
    pub tls: bool,

    /// Only the autobatch contenders, for profiling (`perf record`): no TS client, no official
    /// client, no floors, no server ceiling, no client floor, so no blocking reads of other
    /// loops run on the bench thread between autobatch's cells. Targets that compare with those
    /// are left out. Add --no-verify to leave out the job count after each cell too.
    #[arg(long)]
    pub client_only: bool,

    /// Run nothing: print the tables and goals of an earlier run's JSON document (`--json`) as
    /// Markdown, as `scripts/perf-docs.sh` puts them into docs/performance.md.
    #[arg(long, value_name = "FILE.json")]
    pub render: Option<PathBuf>,

    /// Run nothing: print README's headline table (every client's adds per second, and
    /// autobatch's ratio to the TS client) from a `--compare` run's JSON document.
    #[arg(long, value_name = "FILE.json")]
    pub render_headline: Option<PathBuf>,

    /// Run nothing: print the SVG chart of an earlier run's JSON document (`--json`), as
    /// `scripts/perf-docs.sh` writes bench/results/NAME.svg from bench/results/NAME.json.
    #[arg(long, value_name = "FILE.json")]
    pub render_svg: Option<PathBuf>,

    /// The write-up's web endpoint, `POST /orders` with one add per request, under `wrk`: the
    /// web_orders example on tokio multi_thread and current_thread and, as the peer, Bun with
    /// bunqueue's TS client, batching off and on, beside the same handler without the add.
    /// Against the embedded broker, or bunqueue 2.9.5 with --compare. See docs/web.md.
    #[arg(long)]
    pub web: bool,

    /// With --web: only these web servers, comma-separated [default: all three].
    #[arg(long, value_enum, value_delimiter = ',')]
    pub web_stacks: Vec<web::Stack>,

    /// With --web: only these connection counts, comma-separated [default: 1,10,100,1000;
    /// 1,10 with --smoke].
    #[arg(long, value_delimiter = ',', value_name = "N")]
    pub web_connections: Vec<usize>,
}

/// `--storage`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Storage {
    /// In memory.
    Memory,
    /// SQLite, on disk.
    Sqlite,
}

/// `--batching`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Batching {
    /// Batching off and on, interleaved.
    Both,
    /// Batching off only.
    Off,
    /// Batching on only.
    On,
}

impl Batching {
    /// The client's batching settings to run, off first.
    pub fn modes(self) -> &'static [bool] {
        match self {
            Batching::Both => &[false, true],
            Batching::Off => &[false],
            Batching::On => &[true],
        }
    }
}
