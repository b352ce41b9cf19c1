//! Every command line the docs, the scripts and CI give parses to the mode and options they
//! describe; the flags that cannot go together are refused by name.

use std::path::{Path, PathBuf};

use clap::Parser;

use super::*;
use crate::web::Stack;

/// `line` (the arguments after `autobatch-bench`) as the bench reads it.
fn parse(line: &str) -> Result<Mode, String> {
    let argv = std::iter::once("autobatch-bench").chain(line.split_whitespace());
    let args = Args::try_parse_from(argv).map_err(|e| e.to_string())?;
    Mode::from_args(&args).map_err(|e| e.to_string())
}

fn table(line: &str) -> (Table, Measure) {
    match parse(line) {
        Ok(Mode::Table { table, measure }) => (table, measure),
        other => panic!("{line:?}: expected a throughput table, got {other:?}"),
    }
}

/// A run of the client alone (for strace or a profiler) against `HOST:PORT`, batching on, its
/// jobs not counted afterwards.
fn client_alone(line: &str) -> Measure {
    let (t, m) = table(line);
    let server = Some("HOST:PORT".to_owned());
    assert_eq!(t, Table::Main { server });
    assert_eq!(m.batching, Batching::On);
    assert!(m.client_only && m.no_verify);
    m
}

fn fleet(line: &str) -> (Vec<usize>, Measure) {
    match parse(line) {
        Ok(Mode::Fleet { sizes, measure }) => (sizes, measure),
        other => panic!("{line:?}: expected --fleet, got {other:?}"),
    }
}

fn web(line: &str) -> (bool, WebPlan, Output) {
    match parse(line) {
        Ok(Mode::Web {
            bunqueue,
            plan,
            output,
        }) => (bunqueue, plan, output),
        other => panic!("{line:?}: expected --web, got {other:?}"),
    }
}

fn render(line: &str) -> (Rendering, PathBuf) {
    match parse(line) {
        Ok(Mode::Render { rendering, path }) => (rendering, path),
        other => panic!("{line:?}: expected a rendering, got {other:?}"),
    }
}

fn patterns(names: &str) -> Vec<Pattern> {
    names
        .split(',')
        .map(|p| Pattern::parse(p).unwrap())
        .collect()
}

fn output(json: Option<&str>, svg: Option<&str>) -> Output {
    Output {
        json: json.map(PathBuf::from),
        svg: svg.map(PathBuf::from),
    }
}

const MAIN: Table = Table::Main { server: None };
const COMPARE: Table = Table::Compare {
    server: None,
    storage: Storage::Memory,
};
const RUNTIMES4: [RuntimeKind; 4] = [
    RuntimeKind::Tokio,
    RuntimeKind::TokioMultiThread,
    RuntimeKind::Smol,
    RuntimeKind::AsyncStd,
];
const ALL5: &str = "seq,all10,all50,all100,all1000";
const ALL6: &str = "seq,all10,all50,all100,all1000,all5000";

/// Checks one documented command line's mode and options.
type Check = fn(&str);

/// Every documented command line (the arguments after `autobatch-bench`, as written there)
/// and what it must parse to.
const DOCUMENTED: &[(&str, Check)] = &[
    // README.md, docs/performance-method.md, .ci/run: the main job.
    ("", |line| {
        let (t, m) = table(line);
        assert_eq!(t, MAIN);
        assert_eq!(m.plan.patterns, patterns("seq,all10,all50,all100"));
        assert_eq!((m.plan.adds, m.plan.warmup, m.plan.reps), (20_000, 1000, 5));
        assert_eq!(m.plan.queue_prefix, "autobatch-bench");
        assert_eq!(m.runtimes, [RuntimeKind::Tokio]);
        assert_eq!(m.batching, Batching::Both);
        assert!(!m.smoke && !m.client_only && !m.no_verify && !m.spawn_adds);
        assert_eq!(m.output, Output::default());
    }),
    // README.md: the headline table.
    (
        "--compare --patterns seq,all10,all50,all100,all1000,all5000 --adds 10000 --reps 5",
        |line| {
            let (t, m) = table(line);
            assert_eq!(t, COMPARE);
            assert_eq!(m.plan.patterns, patterns(ALL6));
            assert_eq!((m.plan.adds, m.plan.warmup, m.plan.reps), (10_000, 500, 5));
            assert_eq!(m.runtimes, [RuntimeKind::Tokio]);
        },
    ),
    // README.md: the web headline.
    ("--web --compare", |line| {
        let (bunqueue, plan, out) = web(line);
        assert!(bunqueue);
        assert_eq!(plan, WebPlan::new(false, None));
        assert_eq!(plan.connections, [1, 10, 100, 1000]);
        assert_eq!(out, Output::default());
    }),
    // docs/fleet.md, .ci/run.
    ("--fleet 1,2,3", |line| {
        let (sizes, m) = fleet(line);
        assert_eq!(sizes, [1, 2, 3]);
        assert_eq!((m.plan.adds, m.plan.warmup, m.plan.reps), (500, 50, 3));
        assert_eq!(m.plan.patterns, patterns("seq,all10,all50,all100"));
    }),
    // docs/performance.md, each section's command.
    (
        "--reps 5 --patterns seq,all10,all50,all100,all1000 --json bench/results/default.json \
         --svg bench/results/default.svg",
        |line| {
            let (t, m) = table(line);
            assert_eq!(t, MAIN);
            assert_eq!(m.plan.patterns, patterns(ALL5));
            assert_eq!((m.plan.adds, m.plan.reps), (20_000, 5));
            let files = output(
                Some("bench/results/default.json"),
                Some("bench/results/default.svg"),
            );
            assert_eq!(m.output, files);
        },
    ),
    (
        "--compare --runtime tokio,tokio-multi-thread,smol-local,async-std-local --patterns \
         seq,all10,all50,all100,all1000,all5000 --adds 10000 --reps 5 --json \
         bench/results/compare.json --svg bench/results/compare.svg",
        |line| {
            let (t, m) = table(line);
            assert_eq!(t, COMPARE);
            assert_eq!(
                m.runtimes,
                [
                    RuntimeKind::Tokio,
                    RuntimeKind::TokioMultiThread,
                    RuntimeKind::SmolLocal,
                    RuntimeKind::AsyncStdLocal
                ]
            );
            assert_eq!(m.plan.patterns, patterns(ALL6));
            assert_eq!((m.plan.adds, m.plan.reps), (10_000, 5));
            let files = output(
                Some("bench/results/compare.json"),
                Some("bench/results/compare.svg"),
            );
            assert_eq!(m.output, files);
        },
    ),
    (
        "--compare --storage sqlite --patterns seq,all10,all100 --reps 5 --json \
         bench/results/compare-sqlite.json",
        |line| {
            let (t, m) = table(line);
            let storage = Storage::Sqlite;
            assert_eq!(
                t,
                Table::Compare {
                    server: None,
                    storage
                }
            );
            assert_eq!(m.plan.patterns, patterns("seq,all10,all100"));
            assert_eq!((m.plan.adds, m.plan.reps), (5_000, 5));
            let files = output(Some("bench/results/compare-sqlite.json"), None);
            assert_eq!(m.output, files);
        },
    ),
    // docs/performance.md and docs/runtimes.md.
    (
        "--runtime tokio,tokio-multi-thread,smol,async-std --patterns \
         seq,all10,all50,all100,all1000 --adds 10000 --reps 5 --json bench/results/runtimes.json",
        |line| {
            let (t, m) = table(line);
            assert_eq!(t, MAIN);
            assert_eq!(m.runtimes, RUNTIMES4);
            assert_eq!(m.plan.patterns, patterns(ALL5));
            assert_eq!((m.plan.adds, m.plan.reps), (10_000, 5));
            let files = output(Some("bench/results/runtimes.json"), None);
            assert_eq!(m.output, files);
        },
    ),
    ("--tls --reps 3 --json bench/results/tls.json", |line| {
        let (t, m) = table(line);
        assert_eq!(t, Table::Tls);
        assert_eq!((m.plan.adds, m.plan.reps), (20_000, 3));
        assert_eq!(m.output, output(Some("bench/results/tls.json"), None));
    }),
    (
        "--fleet 1,2,3 --reps 3 --json bench/results/fleet.json",
        |line| {
            let (sizes, m) = fleet(line);
            assert_eq!(sizes, [1, 2, 3]);
            assert_eq!((m.plan.adds, m.plan.reps), (500, 3));
            assert_eq!(m.output, output(Some("bench/results/fleet.json"), None));
        },
    ),
    // docs/tls.md.
    ("--tls --reps 3", |line| {
        let (t, m) = table(line);
        assert_eq!(t, Table::Tls);
        assert_eq!(m.plan.reps, 3);
    }),
    // docs/performance-method.md: profiling the client alone.
    (
        "--server HOST:PORT --client-only --batching on --patterns all100 --adds 20000 \
         --warmup 1000 --reps 1 --no-verify",
        |line| {
            let (t, m) = table(line);
            let server = Some("HOST:PORT".to_owned());
            assert_eq!(t, Table::Main { server });
            assert!(m.client_only && m.no_verify);
            assert_eq!(m.batching, Batching::On);
            assert_eq!(m.plan.patterns, patterns("all100"));
            assert_eq!((m.plan.adds, m.plan.warmup, m.plan.reps), (20_000, 1000, 1));
        },
    ),
    // docs/web.md.
    ("--web", |line| {
        let (bunqueue, plan, _) = web(line);
        assert!(!bunqueue);
        assert_eq!(plan, WebPlan::new(false, None));
    }),
    (
        "--web --compare --json bench/results/web.json --svg bench/results/web.svg",
        |line| {
            let (bunqueue, plan, out) = web(line);
            assert!(bunqueue);
            assert_eq!(plan, WebPlan::new(false, None));
            let files = output(
                Some("bench/results/web.json"),
                Some("bench/results/web.svg"),
            );
            assert_eq!(out, files);
        },
    ),
    ("--web --smoke", |line| {
        let (bunqueue, plan, _) = web(line);
        assert!(!bunqueue);
        assert_eq!(plan, WebPlan::new(true, None));
        assert_eq!(plan.connections, [1, 10]);
    }),
    (
        "--web --web-stacks multi_thread --web-connections 10,100",
        |line| {
            let (_, plan, _) = web(line);
            assert_eq!(plan.stacks, [Stack::AxumMultiThread]);
            assert_eq!(plan.connections, [10, 100]);
            assert!(!plan.smoke);
        },
    ),
    // .ci/run: the smoke runs.
    ("--smoke", |line| {
        let (t, m) = table(line);
        assert_eq!(t, MAIN);
        assert!(m.smoke);
        assert_eq!((m.plan.adds, m.plan.warmup, m.plan.reps), (300, 50, 1));
    }),
    (
        "--fleet 1,2 --smoke --adds 100 --patterns seq,all100",
        |line| {
            let (sizes, m) = fleet(line);
            assert_eq!(sizes, [1, 2]);
            assert!(m.smoke);
            assert_eq!(m.plan.patterns, patterns("seq,all100"));
            assert_eq!((m.plan.adds, m.plan.warmup, m.plan.reps), (100, 50, 1));
        },
    ),
    // docs/runtimes.md: system calls per sequential add.
    (
        "--server HOST:PORT --client-only --batching on --runtime smol --patterns seq \
         --adds 2000 --warmup 100 --reps 1 --no-verify",
        |line| {
            let m = client_alone(line);
            assert_eq!((m.plan.adds, m.plan.reps), (2000, 1));
            assert_eq!(m.runtimes, [RuntimeKind::Smol]);
        },
    ),
    // docs/runtimes.md: system calls per wave of 10 on tokio's multi_thread runtime.
    (
        "--server HOST:PORT --client-only --batching on --runtime tokio-multi-thread --patterns \
         all10 --adds 20000 --warmup 1000 --reps 1 --no-verify",
        |line| {
            let m = client_alone(line);
            assert_eq!(m.plan.patterns, patterns("all10"));
            assert_eq!((m.plan.adds, m.plan.warmup, m.plan.reps), (20_000, 1000, 1));
            assert_eq!(m.runtimes, [RuntimeKind::TokioMultiThread]);
        },
    ),
];

/// Command lines given outside the scanned docs: the renderings `scripts/perf-docs.sh` asks
/// for (by variable) and the smoke tests' runs.
const ELSEWHERE: &[(&str, Check)] = &[
    ("--render bench/results/default.json", |line| {
        let r = (Rendering::Markdown, "bench/results/default.json".into());
        assert_eq!(render(line), r);
    }),
    ("--render-headline bench/results/compare.json", |line| {
        let r = (Rendering::Headline, "bench/results/compare.json".into());
        assert_eq!(render(line), r);
    }),
    ("--render-svg bench/results/web.json", |line| {
        let r = (Rendering::Svg, "bench/results/web.json".into());
        assert_eq!(render(line), r);
    }),
    ("--smoke --json out.json --svg out.svg", |line| {
        let (t, m) = table(line);
        assert_eq!(t, MAIN);
        assert_eq!(m.output, output(Some("out.json"), Some("out.svg")));
    }),
    (
        "--smoke --patterns all1000 --json out.json --svg out.svg",
        |line| {
            let (t, m) = table(line);
            assert_eq!(t, MAIN);
            assert_eq!(m.plan.patterns, patterns("all1000"));
        },
    ),
    (
        "--smoke --client-only --patterns seq,all100 --json out.json --svg out.svg",
        |line| {
            let (t, m) = table(line);
            assert_eq!(t, MAIN);
            assert!(m.client_only && !m.no_verify);
        },
    ),
];

#[test]
fn documented_command_lines_parse_to_their_modes() {
    for (line, check) in DOCUMENTED.iter().chain(ELSEWHERE) {
        check(line);
    }
}

/// The arguments of every `autobatch-bench` command line in `text`: after `-p autobatch-bench`
/// (then `--`) or `release/autobatch-bench`, up to the end of the command (a backslash at the
/// end of a line continues it).
fn command_lines(text: &str) -> Vec<String> {
    let joined = text.replace("\\\n", " ");
    let mut found = Vec::new();
    for line in joined.lines() {
        for marker in ["-p autobatch-bench", "release/autobatch-bench"] {
            for (at, _) in line.match_indices(marker) {
                let rest = &line[at + marker.len()..];
                if rest.starts_with(" --example") {
                    continue;
                }
                let rest = rest.strip_prefix(" -- ").unwrap_or(rest);
                let rest = rest.trim_start();
                let rest = if rest.starts_with("--") { rest } else { "" };
                let end = rest.find(['`', ')', '"', '#', ';']).unwrap_or(rest.len());
                let args: Vec<&str> = rest[..end].split_whitespace().collect();
                found.push(args.join(" "));
            }
        }
    }
    found
}

/// README.md, docs/*.md, .ci/run and scripts/*.sh.
fn documents() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = vec![root.join("README.md"), root.join(".ci/run")];
    for (dir, ext) in [("docs", "md"), ("scripts", "sh")] {
        let entries = std::fs::read_dir(root.join(dir)).unwrap();
        let mut paths: Vec<PathBuf> = entries
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == ext))
            .collect();
        paths.sort();
        files.extend(paths);
    }
    files
}

#[test]
fn the_docs_give_exactly_the_command_lines_checked_above() {
    let checked: Vec<String> = DOCUMENTED
        .iter()
        .map(|(line, _)| line.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    let mut seen: Vec<String> = Vec::new();
    for path in documents() {
        let text = std::fs::read_to_string(&path).unwrap();
        for line in command_lines(&text) {
            assert!(
                checked.contains(&line),
                "{}: `autobatch-bench {line}` is not in DOCUMENTED",
                path.display()
            );
            seen.push(line);
        }
    }
    for line in checked {
        assert!(seen.contains(&line), "`{line}` is in no document any more");
    }
}

#[test]
fn command_lines_are_found_across_continuations_and_prose() {
    let text = "cargo run --release -p autobatch-bench -- --compare \\\n  --reps 5\n\
                (`cargo run --release -p autobatch-bench -- --web --compare`; more)\n\
                cargo run --release -p autobatch-bench -- --web   # a comment\n\
                `cargo run --release -p autobatch-bench` runs\n\
                cargo run --release -p autobatch-bench --example spawn_floor -- 1 2\n\
                section \"x (README: cargo run --release -p autobatch-bench -- --fleet 1,2,3)\"\n\
                valgrind \\\n  target/release/autobatch-bench --server h:1 \\\n  --reps 1\n";
    assert_eq!(
        command_lines(text),
        [
            "--compare --reps 5",
            "--web --compare",
            "--web",
            "",
            "--fleet 1,2,3",
            "--server h:1 --reps 1"
        ]
    );
}

#[test]
fn mode_flags_that_clash_are_refused_by_name() {
    let clash = |line: &str, flag: &'static str, with: &'static str| {
        let argv = std::iter::once("autobatch-bench").chain(line.split_whitespace());
        let args = Args::try_parse_from(argv).unwrap();
        assert_eq!(
            Mode::from_args(&args),
            Err(ModeError::Clash { flag, with }),
            "{line}"
        );
    };
    clash("--fleet 1 --compare", "--fleet", "--compare");
    clash("--compare --tls", "--tls", "--compare");
    clash("--tls --fleet 2", "--fleet", "--tls");
    clash("--web --fleet 1", "--web", "--fleet");
    clash("--web --tls", "--web", "--tls");
    clash("--fleet 1 --server h:1", "--fleet", "--server");
    clash("--tls --server h:1", "--tls", "--server");
    clash("--web --server h:1", "--web", "--server");
    clash("--fleet 1 --client-only", "--fleet", "--client-only");
    clash("--render a.json --smoke", "--render", "--smoke");
    clash("--reps 3 --render-svg a.json", "--render-svg", "--reps");
    clash(
        "--render a.json --render-headline b.json",
        "--render",
        "--render-headline",
    );
    let err = parse("--compare --tls").unwrap_err();
    assert_eq!(err, "--tls cannot be used with --compare");
}

#[test]
fn flags_without_the_flag_they_need_are_refused_by_name() {
    let needs = |line: &str| parse(line).unwrap_err();
    assert_eq!(needs("--storage sqlite"), "--storage needs --compare");
    assert_eq!(needs("--web-stacks bun"), "--web-stacks needs --web");
    assert_eq!(
        needs("--web-connections 1"),
        "--web-connections needs --web"
    );
    // Beside the flag they need, they are taken.
    let (bunqueue, plan, _) = web("--web --compare --web-stacks bun --web-connections 1");
    assert!(bunqueue);
    assert_eq!((plan.stacks, plan.connections), (vec![Stack::Bun], vec![1]));
}

#[test]
fn values_that_name_no_run_are_refused() {
    let err = |line: &str| parse(line).unwrap_err();
    assert_eq!(
        err("--patterns seq,all"),
        "unknown pattern \"all\" (expected seq or allN)"
    );
    assert_eq!(
        err("--fleet 0"),
        "--fleet needs at least one broker count above 0"
    );
    assert_eq!(
        err("--spawn-adds --runtime tokio,smol"),
        "--spawn-adds is for --runtime tokio or tokio-multi-thread, not smol"
    );
    // --spawn-adds on tokio's runtimes is taken, and repeats of a runtime are dropped.
    let (_, m) = table("--spawn-adds --runtime tokio-multi-thread,tokio,tokio-multi-thread");
    assert!(m.spawn_adds);
    let rts = [RuntimeKind::TokioMultiThread, RuntimeKind::Tokio];
    assert_eq!(m.runtimes, rts);
}

#[test]
fn defaults_follow_the_mode() {
    let (sizes, m) = fleet("--fleet 3,0,1,3");
    assert_eq!(sizes, [1, 3], "above 0, ascending, without repeats");
    assert_eq!((m.plan.adds, m.plan.reps), (500, 3));
    let (_, m) = table("--compare --smoke");
    assert_eq!((m.plan.adds, m.plan.reps), (300, 1), "--smoke wins");
    let (t, m) = table("--compare --server h:1 --storage sqlite");
    let server = Some("h:1".to_owned());
    let storage = Storage::Sqlite;
    assert_eq!(t, Table::Compare { server, storage });
    assert_eq!(m.plan.adds, 5_000);
    let (_, m) = table("--adds 0 --reps 0 --warmup 7");
    assert_eq!((m.plan.adds, m.plan.warmup, m.plan.reps), (1, 7, 1));
    let (_, m) = table("--adds 100000");
    assert_eq!(m.plan.warmup, 1000, "adds/20, at most 1000");
    let (_, plan, _) = web("--web --reps 3 --smoke");
    assert_eq!(plan.reps, 3);
}
