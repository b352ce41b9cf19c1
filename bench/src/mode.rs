//! What one run of the bench does, decided once from the command line: a [`Mode`], built by
//! [`Mode::from_args`] together with every default that depends on it, or a [`ModeError`]
//! naming the flags that cannot go together.

use std::fmt;
use std::path::PathBuf;

use crate::cli::{Args, Batching, Storage};
use crate::run::Plan;
use crate::runtime_kind::RuntimeKind;
use crate::web::WebPlan;
use crate::workload::Pattern;

/// The patterns run when `--patterns` is left out: the write-up's four.
const DEFAULT_PATTERNS: [Pattern; 4] = [
    Pattern::Seq,
    Pattern::All(10),
    Pattern::All(50),
    Pattern::All(100),
];

/// What the bench does.
#[derive(Debug, Clone, PartialEq)]
pub enum Mode {
    /// The throughput table of the write-up: the main job, `--compare` or `--tls`.
    Table {
        /// Which of the three.
        table: Table,
        /// Sizes, runtimes and outputs.
        measure: Measure,
    },
    /// `--fleet N,…`: the throughput table on bunqueue's PostgreSQL fleet.
    Fleet {
        /// Broker counts above 0, ascending, without repeats; never empty.
        sizes: Vec<usize>,
        /// Sizes and outputs (autobatch runs on tokio only).
        measure: Measure,
    },
    /// `--web`: the web endpoint under `wrk`.
    Web {
        /// `--compare`: against bunqueue 2.9.5 instead of the embedded broker.
        bunqueue: bool,
        /// Stacks, connection counts, cell length, repetitions.
        plan: WebPlan,
        /// Files to write.
        output: Output,
    },
    /// `--render`, `--render-headline` or `--render-svg`: measure nothing, print a rendering
    /// of an earlier run's JSON document.
    Render {
        /// Which rendering.
        rendering: Rendering,
        /// The JSON document.
        path: PathBuf,
    },
}

/// The three runs of the throughput table.
#[derive(Debug, Clone, PartialEq)]
pub enum Table {
    /// No mode flag: autobatch with batching off and on, against the embedded broker or
    /// `--server`.
    Main {
        /// `--server HOST:PORT`.
        server: Option<String>,
    },
    /// `--compare`: beside bunqueue's TS client and the official Rust client, against
    /// bunqueue 2.9.5 started for the run or `--server`.
    Compare {
        /// `--server HOST:PORT`: no bunqueue is started, and `storage` is unused.
        server: Option<String>,
        /// `--storage` of the bunqueue started for the run.
        storage: Storage,
    },
    /// `--tls`: over plain TCP and over TLS side by side, against twin embedded brokers.
    Tls,
}

/// What the measuring modes other than `--web` share.
#[derive(Debug, Clone, PartialEq)]
pub struct Measure {
    /// Patterns, adds, warm-up and repetitions, defaults filled in.
    pub plan: Plan,
    /// `--runtime`, without repeats, in the order given; never empty.
    pub runtimes: Vec<RuntimeKind>,
    /// `--batching`.
    pub batching: Batching,
    /// `--spawn-adds`.
    pub spawn_adds: bool,
    /// `--client-only`.
    pub client_only: bool,
    /// `--no-verify`.
    pub no_verify: bool,
    /// `--smoke`.
    pub smoke: bool,
    /// Files to write.
    pub output: Output,
}

/// `--json` and `--svg`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Output {
    /// `--json FILE`.
    pub json: Option<PathBuf>,
    /// `--svg FILE`.
    pub svg: Option<PathBuf>,
}

/// What a `--render*` flag prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rendering {
    /// `--render`: the run's tables and goals in Markdown.
    Markdown,
    /// `--render-headline`: README's headline table.
    Headline,
    /// `--render-svg`: the run's chart.
    Svg,
}

/// Why a command line asks for no run the bench can do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModeError {
    /// Two flags that cannot go together.
    Clash {
        /// The flag that rules the other out.
        flag: &'static str,
        /// The flag given beside it.
        with: &'static str,
    },
    /// A flag that means something only beside another, given without it.
    Needs {
        /// The flag given.
        flag: &'static str,
        /// The flag it needs.
        needs: &'static str,
    },
    /// A `--patterns` entry that is neither `seq` nor `allN`.
    UnknownPattern(String),
    /// `--fleet` with no broker count above 0.
    NoFleetSize,
    /// `--spawn-adds` with a runtime other than tokio's.
    SpawnAddsRuntime(RuntimeKind),
}

impl fmt::Display for ModeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModeError::Clash { flag, with } => write!(f, "{flag} cannot be used with {with}"),
            ModeError::Needs { flag, needs } => write!(f, "{flag} needs {needs}"),
            ModeError::UnknownPattern(p) => {
                write!(f, "unknown pattern {p:?} (expected seq or allN)")
            }
            ModeError::NoFleetSize => write!(f, "--fleet needs at least one broker count above 0"),
            ModeError::SpawnAddsRuntime(rt) => write!(
                f,
                "--spawn-adds is for --runtime tokio or tokio-multi-thread, not {}",
                rt.name()
            ),
        }
    }
}

impl std::error::Error for ModeError {}

impl ModeError {
    /// The kind of command-line error, as clap reports its own.
    pub fn kind(&self) -> clap::error::ErrorKind {
        use clap::error::ErrorKind;
        match self {
            ModeError::Clash { .. } | ModeError::SpawnAddsRuntime(_) => ErrorKind::ArgumentConflict,
            ModeError::Needs { .. } => ErrorKind::MissingRequiredArgument,
            ModeError::UnknownPattern(_) | ModeError::NoFleetSize => ErrorKind::InvalidValue,
        }
    }
}

/// The mode flags that cannot go together; `--web --compare` can: there `--compare` picks
/// the server.
const MODE_CLASHES: [(&str, &str); 5] = [
    ("--fleet", "--compare"),
    ("--tls", "--compare"),
    ("--fleet", "--tls"),
    ("--web", "--fleet"),
    ("--web", "--tls"),
];

/// Flags that rule out another: `--server` is a server of its own, the fleet profiles more
/// than the client.
const OPTION_CLASHES: [(&str, &str); 4] = [
    ("--fleet", "--server"),
    ("--tls", "--server"),
    ("--web", "--server"),
    ("--fleet", "--client-only"),
];

/// Flags that mean something only beside another.
const NEEDS: [(&str, &str); 3] = [
    ("--storage", "--compare"),
    ("--web-stacks", "--web"),
    ("--web-connections", "--web"),
];

impl Mode {
    /// The mode `args` ask for, with its defaults filled in.
    ///
    /// # Errors
    ///
    /// [`ModeError`] naming the first flag that clashes with another, lacks the one it
    /// needs, or has a value that names no run.
    pub fn from_args(args: &Args) -> Result<Mode, ModeError> {
        let given = given(args);
        check_flags(&given)?;
        if let Some((rendering, path)) = rendering(args) {
            return Ok(Mode::Render { rendering, path });
        }
        let patterns = patterns(&args.patterns)?;
        let output = Output {
            json: args.json.clone(),
            svg: args.svg.clone(),
        };
        if args.web {
            return Ok(Mode::Web {
                bunqueue: args.compare,
                plan: web_plan(args),
                output,
            });
        }
        let measure = measure(args, patterns, output);
        if let Some(sizes) = &args.fleet {
            let sizes = fleet_sizes(sizes)?;
            return Ok(Mode::Fleet { sizes, measure });
        }
        check_spawn_adds(&measure)?;
        let table = if args.tls {
            Table::Tls
        } else if args.compare {
            Table::Compare {
                server: args.server.clone(),
                storage: args.storage.unwrap_or(Storage::Memory),
            }
        } else {
            Table::Main {
                server: args.server.clone(),
            }
        };
        Ok(Mode::Table { table, measure })
    }
}

/// The flags `args` were given, in the order `Args` declares them.
fn given(args: &Args) -> Vec<&'static str> {
    let flags = [
        ("--server", args.server.is_some()),
        ("--runtime", !args.runtime.is_empty()),
        ("--adds", args.adds.is_some()),
        ("--reps", args.reps.is_some()),
        ("--warmup", args.warmup.is_some()),
        ("--patterns", !args.patterns.is_empty()),
        ("--json", args.json.is_some()),
        ("--svg", args.svg.is_some()),
        ("--smoke", args.smoke),
        ("--compare", args.compare),
        ("--storage", args.storage.is_some()),
        ("--fleet", args.fleet.is_some()),
        ("--spawn-adds", args.spawn_adds),
        ("--batching", args.batching.is_some()),
        ("--no-verify", args.no_verify),
        ("--tls", args.tls),
        ("--client-only", args.client_only),
        ("--render", args.render.is_some()),
        ("--render-headline", args.render_headline.is_some()),
        ("--render-svg", args.render_svg.is_some()),
        ("--web", args.web),
        ("--web-stacks", !args.web_stacks.is_empty()),
        ("--web-connections", !args.web_connections.is_empty()),
    ];
    flags
        .into_iter()
        .filter_map(|(flag, given)| given.then_some(flag))
        .collect()
}

/// The first clash among the `given` flags: a `--render*` flag stands alone; then the mode
/// flags, the flags they rule out, and the flags that need another.
fn check_flags(given: &[&'static str]) -> Result<(), ModeError> {
    let has = |flag: &str| given.contains(&flag);
    let render = ["--render", "--render-headline", "--render-svg"];
    if let Some(&flag) = given.iter().find(|f| render.contains(f)) {
        if let Some(&with) = given.iter().find(|f| **f != flag) {
            return Err(ModeError::Clash { flag, with });
        }
    }
    for (flag, with) in MODE_CLASHES.into_iter().chain(OPTION_CLASHES) {
        if has(flag) && has(with) {
            return Err(ModeError::Clash { flag, with });
        }
    }
    for (flag, needs) in NEEDS {
        if has(flag) && !has(needs) {
            return Err(ModeError::Needs { flag, needs });
        }
    }
    Ok(())
}

/// The `--render*` flag given, if any (`check_flags` saw to it that it is alone).
fn rendering(args: &Args) -> Option<(Rendering, PathBuf)> {
    let renderings = [
        (Rendering::Markdown, &args.render),
        (Rendering::Headline, &args.render_headline),
        (Rendering::Svg, &args.render_svg),
    ];
    renderings
        .into_iter()
        .find_map(|(rendering, path)| Some((rendering, path.clone()?)))
}

/// `--patterns`, parsed; the write-up's four when left out.
fn patterns(given: &[String]) -> Result<Vec<Pattern>, ModeError> {
    if given.is_empty() {
        return Ok(DEFAULT_PATTERNS.to_vec());
    }
    given
        .iter()
        .map(|p| Pattern::parse(p.trim()).ok_or_else(|| ModeError::UnknownPattern(p.clone())))
        .collect()
}

/// The options of the measuring modes, with the sizes' defaults for the mode asked for.
fn measure(args: &Args, patterns: Vec<Pattern>, output: Output) -> Measure {
    let fleet = args.fleet.is_some();
    let adds = args
        .adds
        .unwrap_or(match (args.smoke, args.compare, fleet) {
            (true, _, _) => 300,
            (false, true, _) => 5_000,
            (false, false, true) => 500,
            (false, false, false) => 20_000,
        })
        .max(1);
    let reps = args
        .reps
        .unwrap_or(match (args.smoke, fleet) {
            (true, _) => 1,
            (false, true) => 3,
            (false, false) => 5,
        })
        .max(1);
    let warmup = args.warmup.unwrap_or((adds / 20).clamp(50, 1000));
    Measure {
        plan: Plan {
            patterns,
            adds,
            warmup,
            reps,
            queue_prefix: "autobatch-bench".into(),
        },
        runtimes: runtimes(&args.runtime),
        batching: args.batching.unwrap_or(Batching::Both),
        spawn_adds: args.spawn_adds,
        client_only: args.client_only,
        no_verify: args.no_verify,
        smoke: args.smoke,
        output,
    }
}

/// `--runtime`'s list without repeats, in the order given; tokio when left out.
fn runtimes(given: &[RuntimeKind]) -> Vec<RuntimeKind> {
    let mut out: Vec<RuntimeKind> = Vec::new();
    for &r in given {
        if !out.contains(&r) {
            out.push(r);
        }
    }
    if out.is_empty() {
        out.push(RuntimeKind::Tokio);
    }
    out
}

/// `--web`'s plan: the full or the smoke run, narrowed by `--web-stacks` and
/// `--web-connections`.
fn web_plan(args: &Args) -> WebPlan {
    let mut plan = WebPlan::new(args.smoke, args.reps);
    if !args.web_stacks.is_empty() {
        plan.stacks = args.web_stacks.clone();
    }
    if !args.web_connections.is_empty() {
        plan.connections = args.web_connections.clone();
    }
    plan
}

/// `--fleet`'s broker counts above 0, ascending, without repeats.
fn fleet_sizes(given: &[usize]) -> Result<Vec<usize>, ModeError> {
    let mut sizes: Vec<usize> = given.iter().copied().filter(|n| *n > 0).collect();
    sizes.sort_unstable();
    sizes.dedup();
    if sizes.is_empty() {
        return Err(ModeError::NoFleetSize);
    }
    Ok(sizes)
}

/// `--spawn-adds` spawns tokio tasks: every runtime measured must be tokio's.
fn check_spawn_adds(measure: &Measure) -> Result<(), ModeError> {
    let not_tokio = measure
        .runtimes
        .iter()
        .find(|r| !matches!(r, RuntimeKind::Tokio | RuntimeKind::TokioMultiThread));
    match not_tokio {
        Some(&rt) if measure.spawn_adds => Err(ModeError::SpawnAddsRuntime(rt)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests;
