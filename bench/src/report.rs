//! Turning [`Measurements`] into the printed tables, the targets and the JSON document.

use crate::machine::MachineInfo;
use crate::run::{Measurements, Plan, Sample};
use crate::runtime_kind::RuntimeKind;
use crate::stats::{paired_ratios, Summary};
use crate::table::{compact, ratio, thousands, Align, Table};
use crate::workload::Pattern;

use crate::ids::*;

/// What was run, against what, where.
#[derive(Debug, Clone)]
pub struct RunInfo {
    /// Machine, date, versions.
    pub machine: MachineInfo,
    /// The server measured against, in words.
    pub server: String,
    /// The autobatch runtime adapter (the first of `runtimes`).
    pub runtime: String,
    /// Every runtime measured (`--runtime a,b,…`); the others' contenders are `id:runtime`.
    pub runtimes: Vec<String>,
    /// Sizes.
    pub plan: Plan,
    /// `--compare` run.
    pub compare: bool,
    /// `--tls` run: the TLS server, in words.
    pub tls: Option<String>,
    /// `--smoke` run.
    pub smoke: bool,
}

/// One of the project's published performance goals (docs/performance.md), judged on this
/// run: reported, never asserted.
#[derive(Debug, Clone)]
pub struct Target {
    /// What is compared.
    pub name: String,
    /// Measured value: a ratio (0.9 means 90%), or microseconds for [`Goal::MaxMicros`].
    pub measured: f64,
    /// The goal for that value.
    pub goal: Goal,
    /// Figures printed beside the measured value (the absolute µs behind a ratio, say).
    pub detail: Option<String>,
}

/// What a [`Target`] asks of its measured value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Goal {
    /// A ratio of at least this (`1.5` = 1.5x).
    MinRatio(f64),
    /// A share of at least this (`0.9` = 90 %).
    MinShare(f64),
    /// At most this many microseconds.
    MaxMicros(f64),
    /// A ratio of at most this (`2.0` = no more than twice the reference).
    MaxRatio(f64),
}

impl Goal {
    /// The goal's kind, as the JSON document names it.
    pub fn kind(self) -> &'static str {
        match self {
            Goal::MinRatio(_) => "min_ratio",
            Goal::MinShare(_) => "min_share",
            Goal::MaxMicros(_) => "max_micros",
            Goal::MaxRatio(_) => "max_ratio",
        }
    }
}

impl Target {
    /// Whether the measured median reaches the goal.
    pub fn met(&self) -> bool {
        match self.goal {
            Goal::MinRatio(g) | Goal::MinShare(g) => self.measured >= g,
            Goal::MaxMicros(g) | Goal::MaxRatio(g) => self.measured <= g,
        }
    }

    /// The goal's number, as the JSON document gives it.
    pub fn goal_value(&self) -> f64 {
        match self.goal {
            Goal::MinRatio(g) | Goal::MinShare(g) | Goal::MaxMicros(g) | Goal::MaxRatio(g) => g,
        }
    }

    /// `measured (goal …)`, in the goal's unit, then the detail. A value that would print as
    /// the goal itself gets more digits, so "MISS" never stands beside "2.0x (goal ≤ 2.0x)".
    fn describe(&self) -> String {
        let m = self.measured;
        let (value, goal) = match self.goal {
            Goal::MinRatio(g) | Goal::MaxRatio(g) => {
                let (v, gs) = (ratio(m), ratio(g));
                (if v == gs { format!("{m:.3}x") } else { v }, gs)
            }
            Goal::MinShare(g) => {
                let (v, gs) = (format!("{:.0}%", m * 100.0), format!("{:.0}%", g * 100.0));
                (
                    if v == gs {
                        format!("{:.1}%", m * 100.0)
                    } else {
                        v
                    },
                    gs,
                )
            }
            Goal::MaxMicros(g) => {
                let (v, gs) = (format!("{m:.2} µs"), format!("{g:.2} µs"));
                (if v == gs { format!("{m:.4} µs") } else { v }, gs)
            }
        };
        let op = match self.goal {
            Goal::MinRatio(_) | Goal::MinShare(_) => "≥",
            Goal::MaxRatio(_) | Goal::MaxMicros(_) => "≤",
        };
        let head = format!("{value} (goal {op} {goal})");
        match &self.detail {
            Some(d) => format!("{head}; {d}"),
            None => head,
        }
    }
}

/// The published goal for the client's CPU time per add at 100 concurrent adds and more: about
/// twice the floor of encoding, decoding and socket I/O as once measured (0.43 µs per add).
/// Judged only when no client floor ran beside the cells (CPU times on the project's VM swing
/// 2–3x between runs, so a fixed figure is a poor yardstick).
pub const CLIENT_CPU_GOAL_US: f64 = 0.9;

/// The published client-CPU goal for batching off at 5,000 concurrent adds, as a fixed figure.
/// Judged only when no unbatched client floor ran beside the cell.
pub const CLIENT_CPU_OFF_GOAL_US: f64 = 1.2;

/// The published client-CPU goal as a ratio: autobatch (batching on) may spend at most this
/// many times the client floor's CPU per add, measured in the same run.
pub const CLIENT_CPU_FLOOR_RATIO_GOAL: f64 = 2.0;

/// The paired ratio `a / b` over repetitions (same rep, run back to back).
pub fn ratio_summary(m: &Measurements, a: &str, b: &str, p: Pattern) -> Option<Summary> {
    Summary::of(&paired_ratios(&m.series(a, p), &m.series(b, p)))
}

/// The paired ratio of the client CPU per add of `a` over `b` (same rep, run back to back);
/// repetitions where either lacks a CPU reading are left out, never misaligned.
pub fn client_cpu_ratio(m: &Measurements, a: &str, b: &str, p: Pattern) -> Option<Summary> {
    let (x, y): (Vec<f64>, Vec<f64>) = m
        .paired_of(a, b, p, Sample::client_us_per_add)
        .into_iter()
        .unzip();
    Summary::of(&paired_ratios(&x, &y))
}

/// Floor ratio: sequential adds of `a` over the `floor` contender, paired by repetition.
fn floor_ratio(m: &Measurements, a: &str, floor: &str) -> Option<Summary> {
    Summary::of(&paired_ratios(
        &m.series(a, Pattern::Seq),
        &m.series(floor, Pattern::Seq),
    ))
}

fn ops_cell(s: Option<Summary>) -> String {
    match s {
        Some(s) if s.n > 1 => format!(
            "{} ({}–{})",
            thousands(s.median),
            compact(s.min),
            compact(s.max)
        ),
        Some(s) => thousands(s.median),
        None => "–".into(),
    }
}

fn ratio_cell(s: Option<Summary>) -> String {
    match s {
        Some(s) if s.n > 1 => format!(
            "{} ({}–{})",
            ratio(s.median),
            ratio(s.min).trim_end_matches('x'),
            ratio(s.max)
        ),
        Some(s) => ratio(s.median),
        None => "–".into(),
    }
}

fn pct_cell(s: Option<Summary>) -> String {
    match s {
        Some(s) if s.n > 1 => format!(
            "{:.0}% ({:.0}–{:.0}%)",
            s.median * 100.0,
            s.min * 100.0,
            s.max * 100.0
        ),
        Some(s) => format!("{:.0}%", s.median * 100.0),
        None => "–".into(),
    }
}

/// The published goals (docs/performance.md) that apply to this run.
pub fn targets(info: &RunInfo, m: &Measurements) -> Vec<Target> {
    let mut t = Vec::new();
    let mut push = |name: String, s: Option<Summary>, goal: Goal, detail: Option<String>| {
        if let Some(s) = s {
            t.push(Target {
                name,
                measured: s.median,
                goal,
                detail,
            });
        }
    };
    push(
        "sequential: batching on ÷ off ≥ 0.98 (sequential code pays nothing)".into(),
        ratio_summary(m, AB_ON, AB_OFF, Pattern::Seq),
        Goal::MinRatio(0.98),
        None,
    );
    let concurrent = info.plan.patterns.iter().filter(|p| **p != Pattern::Seq);
    if info.compare {
        for p in concurrent.clone().filter(|p| p.wave() <= 100) {
            push(
                format!(
                    "{}: autobatch ≥ 1.5x the TS client, both batching",
                    p.label()
                ),
                ratio_summary(m, AB_ON, TS_ON, *p),
                Goal::MinRatio(1.5),
                // The wave ceiling bounds any client with these waves: where it is not 1.5x the
                // TS client either, no client meets the goal on this server.
                ratio_summary(m, CEILING_WAVES, TS_ON, *p).map(|c| {
                    format!(
                        "the wave ceiling (the most any client reaches with these waves) is {} \
                         the TS client",
                        ratio(c.median)
                    )
                }),
            );
        }
    }
    if info.plan.patterns.contains(&Pattern::All(100)) {
        // A wave of `join_all` starts only when the last one is answered, so the server idles
        // for a turnaround per wave whatever the client: the wave ceiling, run beside the cell,
        // is the most any client reaches with the pattern. Without it, the server's pipelined ceiling.
        let all100 = Pattern::All(100);
        match ratio_summary(m, AB_ON, CEILING_WAVES, all100) {
            Some(r) => push(
                "join_all(100): autobatch (batching on) ≥ 90% of the wave ceiling (the server's \
                 ceiling in waves of 100: the most any client reaches with them)"
                    .into(),
                Some(r),
                Goal::MinShare(0.9),
                ratio_summary(m, CEILING_WAVES, CEILING, all100).map(|c| {
                    format!(
                        "the wave ceiling is {:.0}% of the server's ceiling, autobatch {}",
                        c.median * 100.0,
                        ratio_summary(m, AB_ON, CEILING, all100)
                            .map_or("–".into(), |a| format!("{:.0}%", a.median * 100.0))
                    )
                }),
            ),
            None => push(
                "join_all(100): autobatch (batching on) ≥ 90% of the server's ceiling".into(),
                ratio_summary(m, AB_ON, CEILING, all100),
                Goal::MinShare(0.9),
                None,
            ),
        }
    }
    for &p in concurrent.filter(|p| p.wave() >= 100) {
        client_cpu_target(
            m,
            p,
            AB_ON,
            CLIENT_FLOOR,
            "on",
            CLIENT_CPU_GOAL_US,
            &mut push,
        );
    }
    runtime_targets(info, m, &mut push);
    // Batching off: one PUSH per add, the window kept full.
    let unbatched = info
        .plan
        .patterns
        .iter()
        .filter(|p| p.wave() >= crate::client_floor::UNBATCHED_FLOOR_MIN_WAVE);
    for &p in unbatched {
        let fixed = CLIENT_CPU_OFF_GOAL_US;
        client_cpu_target(m, p, AB_OFF, CLIENT_FLOOR_PUSH, "off", fixed, &mut push);
    }
    t
}

/// The client-CPU goal for `client` (batching `mode`) at `p`: at most
/// [`CLIENT_CPU_FLOOR_RATIO_GOAL`] times `floor`'s CPU per add, paired by repetition, where that
/// floor ran beside the cells; else (`--tls`, `--client-only`) the published fixed figure
/// `fixed_us`, all there is to hold the absolute time against.
fn client_cpu_target(
    m: &Measurements,
    p: Pattern,
    client: &str,
    floor: &str,
    mode: &str,
    fixed_us: f64,
    push: &mut impl FnMut(String, Option<Summary>, Goal, Option<String>),
) {
    let client_us = m.summary_of(client, p, Sample::client_us_per_add);
    let floor_us = m.summary_of(floor, p, Sample::client_us_per_add);
    match (client_cpu_ratio(m, client, floor, p), client_us, floor_us) {
        (Some(r), Some(client_us), Some(floor_us)) => push(
            format!(
                "{}: client CPU per add, batching {mode} ≤ {} the {} measured in this run",
                p.label(),
                ratio(CLIENT_CPU_FLOOR_RATIO_GOAL),
                short_name(floor)
            ),
            Some(r),
            Goal::MaxRatio(CLIENT_CPU_FLOOR_RATIO_GOAL),
            Some(format!(
                "{} {:.2} µs, {} {:.2} µs per add (medians)",
                short_name(client),
                client_us.median,
                short_name(floor),
                floor_us.median
            )),
        ),
        _ => push(
            format!(
                "{}: client CPU per add, batching {mode} ≤ {fixed_us} µs (the published fixed \
                 figure: no {} in this run)",
                p.label(),
                short_name(floor)
            ),
            client_us,
            Goal::MaxMicros(fixed_us),
            None,
        ),
    }
}

/// The runtime goals, when several runtimes ran and the first is tokio's `current_thread`:
/// every other runtime at par with it (docs/runtimes.md), in the cell furthest from it —
/// adds/s at least 0.95x and client CPU per add at most 1.1x, batching on, with the same adds
/// per frame.
fn runtime_targets(
    info: &RunInfo,
    m: &Measurements,
    push: &mut impl FnMut(String, Option<Summary>, Goal, Option<String>),
) {
    if info.runtimes.len() < 2 || info.runtimes[0] != RuntimeKind::Tokio.name() {
        return;
    }
    for rt in &info.runtimes[1..] {
        let on = format!("{AB_ON}:{rt}");
        let patterns = &info.plan.patterns;
        let worst = |ratio: &dyn Fn(Pattern) -> Option<Summary>, lowest: bool| {
            patterns
                .iter()
                .filter_map(|&p| ratio(p).map(|r| (p, r)))
                .min_by(|a, b| {
                    let order = a.1.median.total_cmp(&b.1.median);
                    if lowest {
                        order
                    } else {
                        order.reverse()
                    }
                })
        };
        if let Some((p, r)) = worst(&|p| ratio_summary(m, &on, AB_ON, p), true) {
            push(
                format!("{rt}: adds/s ≥ 0.95x tokio current_thread's in every cell, batching on"),
                Some(r),
                Goal::MinRatio(0.95),
                Some(format!(
                    "lowest at {}; adds per frame {}",
                    p.label(),
                    frames_differ(info, m, &on)
                )),
            );
        }
        if let Some((p, r)) = worst(&|p| client_cpu_ratio(m, &on, AB_ON, p), false) {
            push(
                format!(
                    "{rt}: client CPU per add ≤ 1.1x tokio current_thread's in every cell, \
                     batching on"
                ),
                Some(r),
                Goal::MaxRatio(1.1),
                Some(format!("highest at {}", p.label())),
            );
        }
    }
}

/// The cells where `on` put a different number of adds in a frame than tokio's
/// `current_thread`, or that it put the same in every cell.
fn frames_differ(info: &RunInfo, m: &Measurements, on: &str) -> String {
    let per_frame = |id: &str, p| m.adds_per_frame(id, p).map(|x| (x * 10.0).round() / 10.0);
    let f = |x: Option<f64>| x.map_or("–".into(), |x| format!("{x:.1}"));
    let differ: Vec<String> = info
        .plan
        .patterns
        .iter()
        .filter(|&&p| per_frame(on, p) != per_frame(AB_ON, p))
        .map(|&p| {
            format!(
                "{} {} vs {}",
                p.label(),
                f(per_frame(on, p)),
                f(per_frame(AB_ON, p))
            )
        })
        .collect();
    if differ.is_empty() {
        "the same as tokio's in every cell".to_owned()
    } else {
        format!("differ: {}", differ.join(", "))
    }
}

/// Client CPU per add beside the client floor's, pattern by pattern, with the paired ratios.
fn render_client_floor(m: &Measurements, plan: &Plan) -> Option<String> {
    let batched = floor_table(m, plan, CLIENT_FLOOR, &[AB_ON, TS_ON]).map(|t| {
        format!(
            "Client CPU per add against the client floor (core's encoder and decoder on a \
             blocking socket, PUSHB of {}, {} in flight, run beside each cell; ratios paired by \
             repetition):\n{t}",
            crate::ceiling::JOBS_PER_FRAME,
            crate::ceiling::IN_FLIGHT,
        )
    });
    let unbatched = floor_table(m, plan, CLIENT_FLOOR_PUSH, &[AB_OFF, TS_OFF]).map(|t| {
        format!(
            "Batching off against the unbatched client floor (the same, one PUSH per add, {} in \
             flight):\n{t}",
            crate::client_floor::PUSH_WINDOW,
        )
    });
    match (batched, unbatched) {
        (Some(a), Some(b)) => Some(format!("{a}\n{b}")),
        (a, b) => a.or(b),
    }
}

/// One floor's CPU per add beside each of `clients` that ran, as paired ratios to it, for the
/// patterns the floor ran in; `None` when it ran in none.
fn floor_table(m: &Measurements, plan: &Plan, floor: &str, clients: &[&str]) -> Option<String> {
    let cols: Vec<&str> = clients.iter().copied().filter(|id| m.has(id)).collect();
    let floor_head = format!("{} µs/add", short_name(floor));
    let heads: Vec<String> = cols
        .iter()
        .map(|id| format!("{} ÷ floor", short_name(id)))
        .collect();
    let mut header: Vec<(&str, Align)> = vec![
        ("Pattern", Align::Left),
        (floor_head.as_str(), Align::Right),
    ];
    header.extend(heads.iter().map(|h| (h.as_str(), Align::Right)));
    let mut t = Table::new(&header);
    let mut any = false;
    for &p in plan.patterns.iter().filter(|p| **p != Pattern::Seq) {
        let Some(floor_us) = m.summary_of(floor, p, Sample::client_us_per_add) else {
            continue;
        };
        let mut row = vec![p.label(), micros_cell(floor_us)];
        row.extend(
            cols.iter()
                .map(|id| ratio_cell(client_cpu_ratio(m, id, floor, p))),
        );
        t.row(row);
        any = true;
    }
    any.then(|| t.render())
}

/// The cost side of each cell: the client's and the server's CPU time per add, and add
/// latency, for each of `clients` (`(id, label)`) that took part.
pub fn render_costs(
    m: &Measurements,
    patterns: &[Pattern],
    clients: &[(String, String)],
) -> Option<String> {
    let mut t = Table::new(&[
        ("Pattern", Align::Left),
        ("Client", Align::Left),
        ("client CPU µs/add", Align::Right),
        ("server CPU µs/add", Align::Right),
        ("latency p50 µs", Align::Right),
        ("latency p99 µs", Align::Right),
    ]);
    let mut any = false;
    for &p in patterns {
        for (id, label) in clients {
            if !m.has(id) || m.summary(id, p).is_none() {
                continue;
            }
            let micros = |f: fn(&Sample) -> Option<f64>| {
                m.summary_of(id, p, f)
                    .map(micros_cell)
                    .unwrap_or_else(|| "–".into())
            };
            t.row(vec![
                p.label(),
                label.clone(),
                micros(Sample::client_us_per_add),
                micros(Sample::server_us_per_add),
                micros(|s| Some(s.latency?.p50.as_secs_f64() * 1e6)),
                micros(|s| Some(s.latency?.p99.as_secs_f64() * 1e6)),
            ]);
            any = true;
        }
    }
    any.then(|| {
        format!(
            "What each add costs (medians over reps, min–max; client CPU over the timed adds, \
             every thread the client ran on; server CPU over the whole cell, warm-up included, \
             per add; latency from an add's call to its reply):\n{}",
            t.render()
        )
    })
}

/// The same client on every runtime measured, batching on, side by side; ratios are to the
/// first runtime, paired by repetition.
fn render_runtimes(info: &RunInfo, m: &Measurements) -> String {
    let first = &info.runtimes[0];
    let mut t = Table::new(&[
        ("Pattern (batching on)", Align::Left),
        ("Runtime", Align::Left),
        ("ops/s", Align::Right),
        ("÷ first", Align::Right),
        ("adds per frame", Align::Right),
        ("client CPU µs/add", Align::Right),
    ]);
    for &p in &info.plan.patterns {
        for rt in &info.runtimes {
            let on = if rt == first {
                AB_ON.to_owned()
            } else {
                format!("{AB_ON}:{rt}")
            };
            t.row(vec![
                p.label(),
                rt.clone(),
                ops_cell(m.summary(&on, p)),
                if rt == first {
                    "1".into()
                } else {
                    ratio_cell(ratio_summary(m, &on, AB_ON, p))
                },
                m.adds_per_frame(&on, p)
                    .map(|x| format!("{x:.1}"))
                    .unwrap_or_else(|| "–".into()),
                m.summary_of(&on, p, Sample::client_us_per_add)
                    .map(micros_cell)
                    .unwrap_or_else(|| "–".into()),
            ]);
        }
    }
    format!(
        "Runtimes side by side (the same client, cells interleaved; ÷ first = ops/s over \
         {first}'s, paired by repetition):\n{}",
        t.render()
    )
}

/// The concurrent cells as a share of the server's ceiling measured beside them.
fn render_ceiling(m: &Measurements, plan: &Plan) -> Option<String> {
    let cols: Vec<&str> = [
        AB_OFF,
        AB_ON,
        TS_OFF,
        TS_ON,
        OFFICIAL,
        CLIENT_FLOOR,
        CEILING_WAVES,
    ]
    .into_iter()
    .filter(|id| m.has(id))
    .collect();
    let heads: Vec<String> = cols.iter().map(|id| short_name(id).to_owned()).collect();
    let mut header: Vec<(&str, Align)> = vec![
        ("Pattern", Align::Left),
        ("server ceiling ops/s", Align::Right),
    ];
    header.extend(heads.iter().map(|h| (h.as_str(), Align::Right)));
    let mut t = Table::new(&header);
    let mut any = false;
    for &p in plan.patterns.iter().filter(|p| **p != Pattern::Seq) {
        let Some(c) = m.summary(CEILING, p) else {
            continue;
        };
        let mut row = vec![p.label(), ops_cell(Some(c))];
        row.extend(
            cols.iter()
                .map(|id| pct_cell(ratio_summary(m, id, CEILING, p))),
        );
        t.row(row);
        any = true;
    }
    any.then(|| {
        format!(
            "Share of the server's ceiling (pre-encoded PUSHB of {}, {} in flight, one \
             connection, run beside each cell; paired by repetition):\n{}",
            crate::ceiling::JOBS_PER_FRAME,
            crate::ceiling::IN_FLIGHT,
            t.render()
        )
    })
}

fn micros_cell(s: Summary) -> String {
    let f = |x: f64| {
        if x >= 100.0 {
            format!("{x:.0}")
        } else if x >= 10.0 {
            format!("{x:.1}")
        } else {
            format!("{x:.2}")
        }
    };
    if s.n > 1 {
        format!("{} ({}–{})", f(s.median), f(s.min), f(s.max))
    } else {
        f(s.median)
    }
}

/// The whole text report.
pub fn render(info: &RunInfo, m: &Measurements) -> String {
    let mut out = String::new();
    let plan = &info.plan;
    out.push_str(&format!(
        "autobatch-bench: add() throughput{}\n",
        if info.compare {
            " against bunqueue's own clients"
        } else if info.tls.is_some() {
            ", batching off and on, over TLS and plain TCP"
        } else {
            ", batching off and on"
        }
    ));
    out.push_str(&format!("server:   {}\n", info.server));
    if let Some(tls) = &info.tls {
        out.push_str(&format!("TLS:      {tls}\n"));
    }
    out.push_str(&format!("client:   autobatch on {}\n", info.runtime));
    out.push_str(&format!("machine:  {}\n", info.machine.one_line()));
    out.push_str(&format!("versions: {}\n", info.machine.versions_line()));
    out.push_str(&format!(
        "cells:    {} timed adds each (after {} warm-up adds), {} rep{} interleaved{}; \
         ops/s = median (min–max over reps); ratios = median (min–max) of per-rep ratios \
         between cells run back to back\n\n",
        thousands(plan.adds as f64),
        plan.warmup,
        plan.reps,
        if plan.reps == 1 { "" } else { "s" },
        if info.smoke {
            " (SMOKE RUN: too small to mean anything)"
        } else {
            ""
        }
    ));

    // The throughput table, for autobatch.
    let mut t = Table::new(&[
        ("Pattern", Align::Left),
        ("Without batching ops/s", Align::Right),
        ("With auto-batch ops/s", Align::Right),
        ("Improvement", Align::Right),
        ("Adds per frame off / on", Align::Right),
    ]);
    let per_frame = |id: &str, p: Pattern| {
        m.adds_per_frame(id, p)
            .map(|x| format!("{x:.1}"))
            .unwrap_or_else(|| "–".into())
    };
    for &p in &plan.patterns {
        t.row(vec![
            p.label(),
            ops_cell(m.summary(AB_OFF, p)),
            ops_cell(m.summary(AB_ON, p)),
            ratio_cell(ratio_summary(m, AB_ON, AB_OFF, p)),
            format!("{} / {}", per_frame(AB_OFF, p), per_frame(AB_ON, p)),
        ]);
    }
    out.push_str(&format!("autobatch ({}):\n", info.runtime));
    out.push_str(&t.render());

    if info.tls.is_some() {
        out.push('\n');
        out.push_str(&render_tls(m, plan));
    }

    if info.compare {
        out.push('\n');
        let cols: Vec<&str> = [AB_OFF, AB_ON, TS_OFF, TS_ON, OFFICIAL]
            .into_iter()
            .filter(|id| m.has(id))
            .collect();
        let heads: Vec<String> = cols.iter().map(|id| short_name(id).to_owned()).collect();
        let mut header: Vec<(&str, Align)> = vec![("Pattern (ops/s)", Align::Left)];
        header.extend(heads.iter().map(|h| (h.as_str(), Align::Right)));
        let mut t = Table::new(&header);
        for &p in &plan.patterns {
            let mut row = vec![p.label()];
            row.extend(cols.iter().map(|id| ops_cell(m.summary(id, p))));
            t.row(row);
        }
        out.push_str("All clients, same server, same run:\n");
        out.push_str(&t.render());
        out.push('\n');

        let mut t = Table::new(&[
            ("Pattern (ratio)", Align::Left),
            ("autobatch on ÷ TS on", Align::Right),
            ("autobatch off ÷ TS off", Align::Right),
            ("bunqueue-client ÷ TS on", Align::Right),
            ("TS on ÷ TS off", Align::Right),
        ]);
        for &p in &plan.patterns {
            t.row(vec![
                p.label(),
                ratio_cell(ratio_summary(m, AB_ON, TS_ON, p)),
                ratio_cell(ratio_summary(m, AB_OFF, TS_OFF, p)),
                ratio_cell(ratio_summary(m, OFFICIAL, TS_ON, p)),
                ratio_cell(ratio_summary(m, TS_ON, TS_OFF, p)),
            ]);
        }
        out.push_str("Against bunqueue's TS client (>1x: faster than TS), pattern by pattern:\n");
        out.push_str(&t.render());
    }

    if let Some(f) = m.summary(FLOOR, Pattern::Seq) {
        out.push('\n');
        out.push_str(&format!(
            "Loopback floor (one Ping frame per round trip, std TcpStream, TCP_NODELAY): {} round trips/s\n",
            ops_cell(Some(f))
        ));
        if let Some(fp) = m.summary(FLOOR_PUSH, Pattern::Seq) {
            out.push_str(&format!(
                "Raw PUSH ping-pong (same loop, one pre-encoded PUSH per round trip):       {} round trips/s \
                 = {} of the Ping floor (the server's cost of a PUSH)\n",
                ops_cell(Some(fp)),
                pct_cell(floor_ratio(m, FLOOR_PUSH, FLOOR))
            ));
        }
        let mut t = Table::new(&[
            ("Sequential adds", Align::Left),
            ("ops/s", Align::Right),
            ("% of Ping floor", Align::Right),
            ("% of raw PUSH", Align::Right),
        ]);
        for id in [AB_OFF, AB_ON, TS_OFF, TS_ON, OFFICIAL] {
            if m.has(id) {
                t.row(vec![
                    m.label(id),
                    ops_cell(m.summary(id, Pattern::Seq)),
                    pct_cell(floor_ratio(m, id, FLOOR)),
                    pct_cell(floor_ratio(m, id, FLOOR_PUSH)),
                ]);
            }
        }
        out.push_str(&t.render());
    }

    if info.runtimes.len() > 1 {
        out.push('\n');
        out.push_str(&render_runtimes(info, m));
    }

    let clients: Vec<(String, String)> = [
        AB_OFF,
        AB_ON,
        TLS_OFF,
        TLS_ON,
        TS_OFF,
        TS_ON,
        OFFICIAL,
        CLIENT_FLOOR,
        CLIENT_FLOOR_PUSH,
    ]
    .into_iter()
    .map(|id| (id.to_owned(), short_name(id).to_owned()))
    .collect();
    if let Some(costs) = render_costs(m, &plan.patterns, &clients) {
        out.push('\n');
        out.push_str(&costs);
    }
    if let Some(ceiling) = render_ceiling(m, plan) {
        out.push('\n');
        out.push_str(&ceiling);
    }
    if let Some(floor) = render_client_floor(m, plan) {
        out.push('\n');
        out.push_str(&floor);
    }

    let targets = targets(info, m);
    if !targets.is_empty() {
        out.push_str(
            "\nTargets (reported, not asserted; medians over repetitions, of paired ratios \
             where two cells are compared):\n",
        );
        for t in &targets {
            out.push_str(&format!(
                "  [{}] {}: {}\n",
                if t.met() { " ok " } else { "MISS" },
                t.name,
                t.describe()
            ));
        }
    }
    out.push_str(&format!(
        "\n{} cells in {:.2} s wall time\n",
        m.samples.len(),
        m.wall.as_secs_f64()
    ));
    out
}

/// The TLS table: each pattern over plain TCP and over TLS, batching off and on, with the
/// paired ratio TLS ÷ plain (1.00x: TLS costs nothing; 0.80x: 20 % fewer adds per second).
fn render_tls(m: &Measurements, plan: &Plan) -> String {
    let mut t = Table::new(&[
        ("Pattern", Align::Left),
        ("Plain, off", Align::Right),
        ("TLS, off", Align::Right),
        ("TLS ÷ plain, off", Align::Right),
        ("Plain, on", Align::Right),
        ("TLS, on", Align::Right),
        ("TLS ÷ plain, on", Align::Right),
        ("TLS on ÷ TLS off", Align::Right),
    ]);
    for &p in &plan.patterns {
        t.row(vec![
            p.label(),
            ops_cell(m.summary(AB_OFF, p)),
            ops_cell(m.summary(TLS_OFF, p)),
            ratio_cell(ratio_summary(m, TLS_OFF, AB_OFF, p)),
            ops_cell(m.summary(AB_ON, p)),
            ops_cell(m.summary(TLS_ON, p)),
            ratio_cell(ratio_summary(m, TLS_ON, AB_ON, p)),
            ratio_cell(ratio_summary(m, TLS_ON, TLS_OFF, p)),
        ]);
    }
    format!(
        "TLS vs plain TCP (ops/s; same client, twin servers, cells interleaved):\n{}",
        t.render()
    )
}

/// Column heading of a contender.
pub fn short_name(id: &str) -> &'static str {
    match id {
        AB_OFF => "autobatch off",
        AB_ON => "autobatch on",
        TS_OFF => "TS client off",
        TS_ON => "TS client on",
        OFFICIAL => "bunqueue-client (Rust)",
        FLOOR => "ping floor",
        FLOOR_PUSH => "raw PUSH ping-pong",
        TLS_OFF => "autobatch TLS off",
        TLS_ON => "autobatch TLS on",
        CEILING => "server ceiling",
        CLIENT_FLOOR => "client floor",
        CLIENT_FLOOR_PUSH => "unbatched client floor",
        CEILING_WAVES => "wave ceiling",
        _ => "?",
    }
}

fn summary_json(s: Option<Summary>) -> serde_json::Value {
    match s {
        Some(s) => serde_json::json!({
            "median": s.median, "min": s.min, "max": s.max, "q1": s.q1, "q3": s.q3, "n": s.n,
        }),
        None => serde_json::Value::Null,
    }
}

/// The machine-readable document for `--json`.
pub fn to_json(info: &RunInfo, m: &Measurements) -> serde_json::Value {
    let plan = &info.plan;
    let mut summary = Vec::new();
    for (id, label) in &m.contenders {
        for &p in &plan.patterns {
            if let Some(s) = m.summary(id, p) {
                summary.push(serde_json::json!({
                    "contender": id, "label": label, "pattern": p.name(),
                    "ops_per_sec": summary_json(Some(s)),
                    "client_cpu_us_per_add": summary_json(m.summary_of(id, p, Sample::client_us_per_add)),
                    "server_cpu_us_per_add": summary_json(m.summary_of(id, p, Sample::server_us_per_add)),
                }));
            }
        }
    }
    let mut ratios = Vec::new();
    let pairs: &[(&str, &str)] = &[
        (AB_ON, AB_OFF),
        (AB_ON, TS_ON),
        (AB_OFF, TS_OFF),
        (OFFICIAL, TS_ON),
        (TS_ON, TS_OFF),
        (TLS_OFF, AB_OFF),
        (TLS_ON, AB_ON),
        (TLS_ON, TLS_OFF),
        (AB_ON, CEILING),
        (AB_OFF, CEILING),
        (TS_ON, CEILING),
        (CLIENT_FLOOR, CEILING),
        (CEILING_WAVES, CEILING),
        (AB_ON, CEILING_WAVES),
    ];
    for &(a, b) in pairs {
        for &p in &plan.patterns {
            if let Some(s) = ratio_summary(m, a, b, p) {
                ratios.push(serde_json::json!({
                    "numerator": a, "denominator": b, "pattern": p.name(),
                    "ratio": summary_json(Some(s)),
                }));
            }
        }
    }
    let floor: Vec<_> = m
        .contenders
        .iter()
        .filter_map(|(id, _)| {
            floor_ratio(m, id, FLOOR).map(|s| {
                serde_json::json!({
                    "contender": id,
                    "sequential_share_of_floor": summary_json(Some(s)),
                    "sequential_share_of_raw_push": summary_json(floor_ratio(m, id, FLOOR_PUSH)),
                })
            })
        })
        .collect();
    let mut client_cpu_vs_floor = Vec::new();
    let floors = [
        (
            CLIENT_FLOOR,
            &[AB_ON, AB_OFF, TLS_ON, TS_ON, TS_OFF, OFFICIAL][..],
        ),
        (CLIENT_FLOOR_PUSH, &[AB_OFF, TS_OFF][..]),
    ];
    for (floor, ids) in floors {
        for &id in ids {
            for &p in &plan.patterns {
                if let Some(r) = client_cpu_ratio(m, id, floor, p) {
                    client_cpu_vs_floor.push(serde_json::json!({
                        "contender": id, "floor": floor, "pattern": p.name(),
                        "client_cpu_us_per_add": summary_json(m.summary_of(id, p, Sample::client_us_per_add)),
                        "client_floor_cpu_us_per_add": summary_json(m.summary_of(floor, p, Sample::client_us_per_add)),
                        "ratio": summary_json(Some(r)),
                    }));
                }
            }
        }
    }
    serde_json::json!({
        "tool": "autobatch-bench",
        "machine": info.machine.to_json(),
        "server": info.server,
        "runtime": info.runtime,
        "mode": if info.compare { "compare" } else if info.tls.is_some() { "tls" } else { "default" },
        "tls_server": info.tls,
        "smoke": info.smoke,
        "plan": {
            "patterns": plan.patterns.iter().map(|p| p.name()).collect::<Vec<_>>(),
            "adds_per_cell": plan.adds,
            "warmup_adds": plan.warmup,
            "reps": plan.reps,
        },
        "contenders": m.contenders.iter().map(|(id, l)| serde_json::json!({"id": id, "label": l})).collect::<Vec<_>>(),
        "samples": m.samples.iter().map(|s| serde_json::json!({
            "contender": s.contender, "pattern": s.pattern.name(), "rep": s.rep,
            "adds": s.adds, "elapsed_s": s.elapsed.as_secs_f64(), "ops_per_sec": s.ops_per_sec(),
            "frames_sent": s.frames,
            "client_cpu_us_per_add": s.client_us_per_add(),
            "server_cpu_us_per_add": s.server_us_per_add(),
            "latency_p50_us": s.latency.map(|l| l.p50.as_secs_f64() * 1e6),
            "latency_p99_us": s.latency.map(|l| l.p99.as_secs_f64() * 1e6),
        })).collect::<Vec<_>>(),
        "summary": summary,
        "ratios": ratios,
        "floor": floor,
        "client_cpu_vs_client_floor": client_cpu_vs_floor,
        "targets": targets(info, m).iter().map(|t| serde_json::json!({
            "name": t.name, "measured": t.measured, "goal": t.goal_value(),
            "goal_kind": t.goal.kind(), "detail": t.detail, "met": t.met(),
        })).collect::<Vec<_>>(),
        "wall_s": m.wall.as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn info(patterns: Vec<Pattern>) -> RunInfo {
        RunInfo {
            machine: MachineInfo {
                cores: 2,
                cpu_model: "test".into(),
                kernel: "test".into(),
                date_utc: "2026-01-01T00:00:00Z".into(),
                versions: Vec::new(),
            },
            server: "none".into(),
            runtime: "tokio".into(),
            runtimes: vec!["tokio".into()],
            plan: Plan {
                patterns,
                adds: 1000,
                warmup: 0,
                reps: 3,
                queue_prefix: "t".into(),
            },
            compare: false,
            tls: None,
            smoke: false,
        }
    }

    /// A cell of 1,000 adds that cost the client `us_per_add` µs each (`None`: no reading).
    fn sample(id: &str, pattern: Pattern, rep: usize, us_per_add: Option<f64>) -> Sample {
        Sample {
            contender: id.into(),
            pattern,
            rep,
            adds: 1000,
            elapsed: Duration::from_millis(10),
            frames: None,
            client_cpu: us_per_add.map(|us| Duration::from_secs_f64(us * 1000.0 / 1e6)),
            server_cpu: None,
            warmup: 0,
            latency: None,
        }
    }

    fn measurements(samples: Vec<Sample>) -> Measurements {
        let mut contenders: Vec<(String, String)> = Vec::new();
        for s in &samples {
            if !contenders.iter().any(|(id, _)| *id == s.contender) {
                contenders.push((s.contender.clone(), s.contender.clone()));
            }
        }
        Measurements {
            contenders,
            samples,
            wall: Duration::from_secs(1),
        }
    }

    fn target(goal: Goal, measured: f64) -> Target {
        Target {
            name: "t".into(),
            measured,
            goal,
            detail: None,
        }
    }

    const ALL100: Pattern = Pattern::All(100);

    #[test]
    fn each_goal_is_met_on_its_own_side() {
        assert!(target(Goal::MaxRatio(2.0), 2.0).met());
        assert!(target(Goal::MaxRatio(2.0), 1.3).met());
        assert!(!target(Goal::MaxRatio(2.0), 2.01).met());
        assert!(target(Goal::MinRatio(1.5), 1.5).met());
        assert!(!target(Goal::MinRatio(1.5), 1.49).met());
        assert!(target(Goal::MinShare(0.9), 0.95).met());
        assert!(target(Goal::MaxMicros(0.9), 0.9).met());
        assert!(!target(Goal::MaxMicros(0.9), 0.91).met());
        assert_eq!(target(Goal::MaxRatio(2.0), 3.0).goal_value(), 2.0);
        assert_eq!(Goal::MaxRatio(2.0).kind(), "max_ratio");
    }

    #[test]
    fn a_max_ratio_reads_as_a_ratio_with_its_detail() {
        let mut t = target(Goal::MaxRatio(2.0), 2.5);
        assert_eq!(t.describe(), "2.5x (goal ≤ 2.0x)");
        t.detail = Some("4.00 µs ÷ 1.60 µs".into());
        assert_eq!(t.describe(), "2.5x (goal ≤ 2.0x); 4.00 µs ÷ 1.60 µs");
    }

    #[test]
    fn a_value_that_would_print_as_its_goal_gets_more_digits() {
        let t = target(Goal::MaxRatio(2.0), 2.0418);
        assert!(!t.met());
        assert_eq!(t.describe(), "2.042x (goal ≤ 2.0x)");
        assert_eq!(
            target(Goal::MinRatio(0.98), 0.9789).describe(),
            "0.979x (goal ≥ 0.98x)"
        );
        assert_eq!(
            target(Goal::MinShare(0.9), 0.8962).describe(),
            "89.6% (goal ≥ 90%)"
        );
        assert_eq!(
            target(Goal::MinShare(0.9), 0.94).describe(),
            "94% (goal ≥ 90%)"
        );
        assert_eq!(
            target(Goal::MaxMicros(0.9), 0.9001).describe(),
            "0.9001 µs (goal ≤ 0.90 µs)"
        );
    }

    #[test]
    fn the_client_cpu_target_is_the_median_of_paired_ratios_to_the_client_floor() {
        // Per rep: 3/1, 4/2, 10/2 → 3, 2, 5: the median is 3, while the ratio of the
        // medians would be 4/2 = 2 (met): the pairing matters.
        let m = measurements(vec![
            sample(AB_ON, ALL100, 0, Some(3.0)),
            sample(CLIENT_FLOOR, ALL100, 0, Some(1.0)),
            sample(AB_ON, ALL100, 1, Some(4.0)),
            sample(CLIENT_FLOOR, ALL100, 1, Some(2.0)),
            sample(AB_ON, ALL100, 2, Some(10.0)),
            sample(CLIENT_FLOOR, ALL100, 2, Some(2.0)),
        ]);
        let targets = targets(&info(vec![ALL100]), &m);
        let cpu: Vec<&Target> = targets
            .iter()
            .filter(|t| t.name.contains("client CPU"))
            .collect();
        assert_eq!(cpu.len(), 1, "{targets:?}");
        let t = cpu[0];
        assert_eq!(t.goal, Goal::MaxRatio(CLIENT_CPU_FLOOR_RATIO_GOAL));
        assert!((t.measured - 3.0).abs() < 1e-9, "{}", t.measured);
        assert!(!t.met());
        let detail = t.detail.as_deref().unwrap_or_default();
        assert!(
            detail.contains("4.00 µs") && detail.contains("2.00 µs"),
            "{detail}"
        );
        // The absolute µs stay in the printed line.
        assert!(render(&info(vec![ALL100]), &m).contains("4.00 µs"));
    }

    #[test]
    fn without_a_client_floor_the_issues_fixed_figure_is_reported() {
        let m = measurements(vec![sample(AB_ON, Pattern::All(1000), 0, Some(0.5))]);
        let targets = targets(&info(vec![Pattern::All(1000)]), &m);
        let t = targets
            .iter()
            .find(|t| t.name.contains("client CPU"))
            .expect("a client CPU target");
        assert_eq!(t.goal, Goal::MaxMicros(CLIENT_CPU_GOAL_US));
        assert!(t.met());
    }

    #[test]
    fn small_waves_have_no_client_cpu_target() {
        let m = measurements(vec![
            sample(AB_ON, Pattern::All(50), 0, Some(3.0)),
            sample(CLIENT_FLOOR, Pattern::All(50), 0, Some(1.0)),
        ]);
        assert!(targets(&info(vec![Pattern::All(50)]), &m)
            .iter()
            .all(|t| !t.name.contains("client CPU")));
    }

    #[test]
    fn other_runtimes_are_judged_by_their_worst_cell_against_tokio() {
        let mut i = info(vec![Pattern::Seq, ALL100]);
        i.runtimes = vec![
            "tokio".into(),
            "smol-local".into(),
            "tokio-multi-thread".into(),
        ];
        let smol = format!("{AB_ON}:smol-local");
        let multi = format!("{AB_ON}:tokio-multi-thread");
        // (contender, pattern, elapsed ms for 1,000 adds, client µs per add, frames)
        let cells: [(&str, Pattern, u64, f64, u64); 6] = [
            (AB_ON, Pattern::Seq, 10, 10.0, 1000),
            (&smol, Pattern::Seq, 12, 12.0, 1000),
            (&multi, Pattern::Seq, 10, 20.0, 1000),
            (AB_ON, ALL100, 10, 1.0, 20),
            (&smol, ALL100, 10, 1.0, 25),
            (&multi, ALL100, 10, 1.5, 20),
        ];
        let m = measurements(
            cells
                .iter()
                .map(|&(id, p, ms, us, frames)| Sample {
                    elapsed: Duration::from_millis(ms),
                    frames: Some(frames),
                    ..sample(id, p, 0, Some(us))
                })
                .collect(),
        );
        let all = targets(&i, &m);
        let goal = |rt: &str, what: &str| {
            all.iter()
                .find(|t| t.name.starts_with(&format!("{rt}: {what}")))
                .unwrap_or_else(|| panic!("a {what} target for {rt}: {all:?}"))
        };
        // adds/s: the lowest cell, against 0.95x, naming the cells that batched differently.
        let smol_rate = goal("smol-local", "adds/s");
        assert!(
            (smol_rate.measured - 10.0 / 12.0).abs() < 1e-9,
            "{smol_rate:?}"
        );
        assert_eq!(smol_rate.goal, Goal::MinRatio(0.95));
        assert!(!smol_rate.met());
        let detail = smol_rate.detail.as_deref().unwrap();
        assert!(detail.contains("lowest at Sequential"), "{detail}");
        assert!(detail.contains("join_all(100) 40.0 vs 50.0"), "{detail}");
        let multi_rate = goal("tokio-multi-thread", "adds/s");
        assert!((multi_rate.measured - 1.0).abs() < 1e-9);
        assert!(multi_rate.met());
        // Client CPU per add: the highest cell, sequential included, against 1.1x.
        let multi_cpu = goal("tokio-multi-thread", "client CPU");
        assert!((multi_cpu.measured - 2.0).abs() < 1e-9, "{multi_cpu:?}");
        assert_eq!(multi_cpu.goal, Goal::MaxRatio(1.1));
        assert!(multi_cpu.detail.as_deref().unwrap().contains("Sequential"));
        let smol_cpu = goal("smol-local", "client CPU");
        assert!((smol_cpu.measured - 1.2).abs() < 1e-9, "{smol_cpu:?}");
        assert_eq!(
            all.iter()
                .filter(|t| t.name.contains("tokio current_thread"))
                .count(),
            4,
            "two goals for each runtime beside tokio's: {all:?}"
        );
        // Without tokio current_thread first there is nothing to hold them against.
        i.runtimes = vec!["smol-local".into(), "tokio".into()];
        assert!(targets(&i, &m)
            .iter()
            .all(|t| !t.name.contains("tokio current_thread")));
    }

    #[test]
    fn batching_off_is_judged_against_the_unbatched_floor_of_the_same_run() {
        const ALL5000: Pattern = Pattern::All(5000);
        let m = measurements(vec![
            sample(AB_OFF, ALL5000, 0, Some(15.0)),
            sample(CLIENT_FLOOR_PUSH, ALL5000, 0, Some(10.0)),
            sample(AB_OFF, ALL5000, 1, Some(30.0)),
            sample(CLIENT_FLOOR_PUSH, ALL5000, 1, Some(10.0)),
            sample(AB_OFF, ALL5000, 2, Some(12.0)),
            sample(CLIENT_FLOOR_PUSH, ALL5000, 2, Some(10.0)),
            // The batched floor is far cheaper: batching off must not be held against it.
            sample(CLIENT_FLOOR, ALL5000, 0, Some(1.0)),
        ]);
        let targets = targets(&info(vec![ALL5000]), &m);
        let off: Vec<&Target> = targets
            .iter()
            .filter(|t| t.name.contains("batching off"))
            .collect();
        assert_eq!(off.len(), 1, "{targets:?}");
        let t = off[0];
        assert_eq!(t.goal, Goal::MaxRatio(CLIENT_CPU_FLOOR_RATIO_GOAL));
        assert!((t.measured - 1.5).abs() < 1e-9, "median of 1.5x, 3x, 1.2x");
        assert!(t.met());
        assert!(t.name.contains("unbatched client floor"), "{}", t.name);
    }

    #[test]
    fn batching_off_without_its_floor_falls_back_to_the_issues_fixed_figure() {
        const ALL5000: Pattern = Pattern::All(5000);
        let m = measurements(vec![sample(AB_OFF, ALL5000, 0, Some(15.0))]);
        let all = targets(&info(vec![ALL5000]), &m);
        let t = all
            .iter()
            .find(|t| t.name.contains("batching off"))
            .expect("a batching-off target");
        assert_eq!(t.goal, Goal::MaxMicros(CLIENT_CPU_OFF_GOAL_US));
        assert!(!t.met());
        // Waves too small to keep the window full have none.
        let m = measurements(vec![sample(AB_OFF, ALL100, 0, Some(15.0))]);
        assert!(targets(&info(vec![ALL100]), &m)
            .iter()
            .all(|t| !t.name.contains("batching off")));
    }

    #[test]
    fn cpu_ratios_pair_by_repetition_and_skip_missing_readings() {
        // Rep 1 of the floor has no reading: reps 0 and 2 pair, rep 1 is left out rather
        // than rep 1 of autobatch being divided by rep 2 of the floor.
        let m = measurements(vec![
            sample(AB_ON, ALL100, 0, Some(2.0)),
            sample(CLIENT_FLOOR, ALL100, 0, Some(1.0)),
            sample(AB_ON, ALL100, 1, Some(100.0)),
            sample(CLIENT_FLOOR, ALL100, 1, None),
            sample(AB_ON, ALL100, 2, Some(6.0)),
            sample(CLIENT_FLOOR, ALL100, 2, Some(2.0)),
        ]);
        let pairs = m.paired_of(AB_ON, CLIENT_FLOOR, ALL100, Sample::client_us_per_add);
        assert_eq!(pairs.len(), 2);
        let r = client_cpu_ratio(&m, AB_ON, CLIENT_FLOOR, ALL100).unwrap();
        assert_eq!(r.n, 2);
        assert!((r.median - 2.5).abs() < 1e-9, "{}", r.median);
        assert!(client_cpu_ratio(&m, AB_ON, CLIENT_FLOOR, Pattern::Seq).is_none());
    }

    #[test]
    fn the_json_carries_the_client_floor_figures() {
        let m = measurements(vec![
            sample(AB_ON, ALL100, 0, Some(3.0)),
            sample(CLIENT_FLOOR, ALL100, 0, Some(1.5)),
        ]);
        let doc = to_json(&info(vec![ALL100]), &m);
        let rows = doc["client_cpu_vs_client_floor"].as_array().unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0]["contender"], AB_ON);
        assert!((rows[0]["ratio"]["median"].as_f64().unwrap() - 2.0).abs() < 1e-9);
        assert!(
            (rows[0]["client_floor_cpu_us_per_add"]["median"]
                .as_f64()
                .unwrap()
                - 1.5)
                .abs()
                < 1e-9
        );
        let target = doc["targets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["goal_kind"] == "max_ratio")
            .expect("the client CPU target");
        assert_eq!(target["goal"], 2.0);
        assert_eq!(target["met"], true);
        assert!(target["detail"].as_str().unwrap().contains("1.50 µs"));
    }
}
