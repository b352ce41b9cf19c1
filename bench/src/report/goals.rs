//! The project's published performance goals (docs/performance.md), judged on a run:
//! reported, never asserted.

use super::cells::{client_cpu_ratio, ratio_summary, short_name};
use super::RunInfo;
use crate::ids::*;
use crate::run::{Measurements, Sample};
use crate::runtime_kind::RuntimeKind;
use crate::stats::Summary;
use crate::table::ratio;
use crate::workload::Pattern;

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
    pub(super) fn describe(&self) -> String {
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

/// The published goals (docs/performance.md) that apply to this run.
pub fn targets(info: &RunInfo, m: &Measurements) -> Vec<Target> {
    let mut judged = Judged::default();
    judged.push(
        "sequential: batching on ÷ off ≥ 0.98 (sequential code pays nothing)".into(),
        ratio_summary(m, AB_ON, AB_OFF, Pattern::Seq),
        Goal::MinRatio(0.98),
        None,
    );
    let patterns = &info.plan.patterns;
    if info.compare {
        for &p in patterns
            .iter()
            .filter(|p| **p != Pattern::Seq && p.wave() <= 100)
        {
            ts_client_target(m, p, &mut judged);
        }
    }
    if patterns.contains(&Pattern::All(100)) {
        ceiling_target(m, &mut judged);
        judged.push(
            "join_all(100): idempotent adds ÷ plain adds ≥ 0.95 (ClientOptions::idempotent_adds \
             costs at most 5%)"
                .into(),
            ratio_summary(m, AB_IDEMPOTENT, AB_ON, Pattern::All(100)),
            Goal::MinRatio(0.95),
            None,
        );
    }
    for &p in patterns
        .iter()
        .filter(|p| **p != Pattern::Seq && p.wave() >= 100)
    {
        let fixed = CLIENT_CPU_GOAL_US;
        client_cpu_target(m, p, AB_ON, CLIENT_FLOOR, "on", fixed, &mut judged);
    }
    runtime_targets(info, m, &mut judged);
    // Batching off: one PUSH per add, the window kept full.
    let unbatched = patterns
        .iter()
        .filter(|p| p.wave() >= crate::client_floor::UNBATCHED_FLOOR_MIN_WAVE);
    for &p in unbatched {
        let fixed = CLIENT_CPU_OFF_GOAL_US;
        client_cpu_target(m, p, AB_OFF, CLIENT_FLOOR_PUSH, "off", fixed, &mut judged);
    }
    judged.0
}

/// The targets judged so far; a goal whose figure the run did not measure is left out.
#[derive(Default)]
struct Judged(Vec<Target>);

impl Judged {
    /// Judges `goal` on the median of `measured`, where there is one.
    fn push(
        &mut self,
        name: String,
        measured: Option<Summary>,
        goal: Goal,
        detail: Option<String>,
    ) {
        if let Some(s) = measured {
            self.0.push(Target {
                name,
                measured: s.median,
                goal,
                detail,
            });
        }
    }
}

/// `--compare`'s goal at `p`: autobatch at least 1.5x bunqueue's TS client, both batching.
fn ts_client_target(m: &Measurements, p: Pattern, judged: &mut Judged) {
    judged.push(
        format!(
            "{}: autobatch ≥ 1.5x the TS client, both batching",
            p.label()
        ),
        ratio_summary(m, AB_ON, TS_ON, p),
        Goal::MinRatio(1.5),
        // The wave ceiling bounds any client with these waves: where it is not 1.5x the
        // TS client either, no client meets the goal on this server.
        ratio_summary(m, CEILING_WAVES, TS_ON, p).map(|c| {
            format!(
                "the wave ceiling (the most any client reaches with these waves) is {} \
                 the TS client",
                ratio(c.median)
            )
        }),
    );
}

/// The goal at `join_all(100)`: autobatch at least 90% of the most any client reaches.
fn ceiling_target(m: &Measurements, judged: &mut Judged) {
    // A wave of `join_all` starts only when the last one is answered, so the server idles
    // for a turnaround per wave whatever the client: the wave ceiling, run beside the cell,
    // is the most any client reaches with the pattern. Without it, the server's pipelined ceiling.
    let all100 = Pattern::All(100);
    match ratio_summary(m, AB_ON, CEILING_WAVES, all100) {
        Some(r) => judged.push(
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
        None => judged.push(
            "join_all(100): autobatch (batching on) ≥ 90% of the server's ceiling".into(),
            ratio_summary(m, AB_ON, CEILING, all100),
            Goal::MinShare(0.9),
            None,
        ),
    }
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
    judged: &mut Judged,
) {
    let client_us = m.summary_of(client, p, Sample::client_us_per_add);
    let floor_us = m.summary_of(floor, p, Sample::client_us_per_add);
    match (client_cpu_ratio(m, client, floor, p), client_us, floor_us) {
        (Some(r), Some(client_us), Some(floor_us)) => judged.push(
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
        _ => judged.push(
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
fn runtime_targets(info: &RunInfo, m: &Measurements, judged: &mut Judged) {
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
            judged.push(
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
            judged.push(
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
