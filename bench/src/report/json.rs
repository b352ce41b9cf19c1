//! The machine-readable document a run writes with `--json`.

use serde_json::{json, Value};

use super::cells::{client_cpu_ratio, floor_ratio, ratio_summary};
use super::goals::targets;
use super::RunInfo;
use crate::ids::*;
use crate::run::{Measurements, Sample};
use crate::stats::Summary;
use crate::workload::Pattern;

/// A summary over repetitions as an object, `null` where there is none.
fn summary_json(s: Option<Summary>) -> Value {
    match s {
        Some(s) => json!({
            "median": s.median, "min": s.min, "max": s.max, "q1": s.q1, "q3": s.q3, "n": s.n,
        }),
        None => Value::Null,
    }
}

/// The machine-readable document for `--json`.
pub fn to_json(info: &RunInfo, m: &Measurements) -> Value {
    let plan = &info.plan;
    json!({
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
        "contenders": m.contenders.iter().map(|(id, l)| json!({"id": id, "label": l})).collect::<Vec<_>>(),
        "samples": m.samples.iter().map(sample).collect::<Vec<_>>(),
        "summary": summaries(m, &plan.patterns),
        "ratios": ratios(m, &plan.patterns),
        "floor": floor_shares(m),
        "client_cpu_vs_client_floor": client_cpu_vs_floor(m, &plan.patterns),
        "targets": targets(info, m).iter().map(|t| json!({
            "name": t.name, "measured": t.measured, "goal": t.goal_value(),
            "goal_kind": t.goal.kind(), "detail": t.detail, "met": t.met(),
        })).collect::<Vec<_>>(),
        "wall_s": m.wall.as_secs_f64(),
    })
}

/// One cell as measured.
fn sample(s: &Sample) -> Value {
    json!({
        "contender": s.contender, "pattern": s.pattern.name(), "rep": s.rep,
        "adds": s.adds, "elapsed_s": s.elapsed.as_secs_f64(), "ops_per_sec": s.ops_per_sec(),
        "frames_sent": s.frames,
        "client_cpu_us_per_add": s.client_us_per_add(),
        "server_cpu_us_per_add": s.server_us_per_add(),
        "latency_p50_us": s.latency.map(|l| l.p50.as_secs_f64() * 1e6),
        "latency_p99_us": s.latency.map(|l| l.p99.as_secs_f64() * 1e6),
    })
}

/// Every contender's ops/s and CPU per add over repetitions, pattern by pattern.
fn summaries(m: &Measurements, patterns: &[Pattern]) -> Vec<Value> {
    let mut summary = Vec::new();
    for (id, label) in &m.contenders {
        for &p in patterns {
            if let Some(s) = m.summary(id, p) {
                summary.push(json!({
                    "contender": id, "label": label, "pattern": p.name(),
                    "ops_per_sec": summary_json(Some(s)),
                    "client_cpu_us_per_add": summary_json(m.summary_of(id, p, Sample::client_us_per_add)),
                    "server_cpu_us_per_add": summary_json(m.summary_of(id, p, Sample::server_us_per_add)),
                }));
            }
        }
    }
    summary
}

/// The ratios of ops/s the report and the docs compare, `(numerator, denominator)`.
const RATIO_PAIRS: [(&str, &str); 15] = [
    (AB_ON, AB_OFF),
    (AB_ON, TS_ON),
    (AB_IDEMPOTENT, AB_ON),
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

/// [`RATIO_PAIRS`] that ran, paired by repetition, pattern by pattern.
fn ratios(m: &Measurements, patterns: &[Pattern]) -> Vec<Value> {
    let mut ratios = Vec::new();
    for (a, b) in RATIO_PAIRS {
        for &p in patterns {
            if let Some(s) = ratio_summary(m, a, b, p) {
                ratios.push(json!({
                    "numerator": a, "denominator": b, "pattern": p.name(),
                    "ratio": summary_json(Some(s)),
                }));
            }
        }
    }
    ratios
}

/// Each contender's sequential adds as a share of the ping-pong floors.
fn floor_shares(m: &Measurements) -> Vec<Value> {
    m.contenders
        .iter()
        .filter_map(|(id, _)| {
            floor_ratio(m, id, FLOOR).map(|s| {
                json!({
                    "contender": id,
                    "sequential_share_of_floor": summary_json(Some(s)),
                    "sequential_share_of_raw_push": summary_json(floor_ratio(m, id, FLOOR_PUSH)),
                })
            })
        })
        .collect()
}

/// The clients' CPU per add against the client floors', paired by repetition.
fn client_cpu_vs_floor(m: &Measurements, patterns: &[Pattern]) -> Vec<Value> {
    let mut rows = Vec::new();
    let floors = [
        (
            CLIENT_FLOOR,
            &[AB_ON, AB_OFF, TLS_ON, TS_ON, TS_OFF, OFFICIAL][..],
        ),
        (CLIENT_FLOOR_PUSH, &[AB_OFF, TS_OFF][..]),
    ];
    for (floor, ids) in floors {
        for &id in ids {
            for &p in patterns {
                if let Some(r) = client_cpu_ratio(m, id, floor, p) {
                    rows.push(json!({
                        "contender": id, "floor": floor, "pattern": p.name(),
                        "client_cpu_us_per_add": summary_json(m.summary_of(id, p, Sample::client_us_per_add)),
                        "client_floor_cpu_us_per_add": summary_json(m.summary_of(floor, p, Sample::client_us_per_add)),
                        "ratio": summary_json(Some(r)),
                    }));
                }
            }
        }
    }
    rows
}
