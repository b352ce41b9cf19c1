//! The text report a run prints: its header, the throughput table and the tables beside it,
//! and the goals judged on it.

use super::cells::*;
use super::goals::targets;
use super::RunInfo;
use crate::ids::*;
use crate::run::{Measurements, Plan, Sample};
use crate::table::{thousands, Align, Table};
use crate::workload::Pattern;

/// The whole text report.
pub fn render(info: &RunInfo, m: &Measurements) -> String {
    let mut out = header(info);
    out.push_str(&throughput(info, m));
    let sections = [
        info.tls.is_some().then(|| render_tls(m, &info.plan)),
        info.compare.then(|| render_compare(m, &info.plan)),
        render_ping_floor(m),
        (info.runtimes.len() > 1).then(|| render_runtimes(info, m)),
        render_costs(m, &info.plan.patterns, &cost_clients()),
        render_ceiling(m, &info.plan),
        render_client_floor(m, &info.plan),
        render_targets(info, m),
        Some(format!(
            "{} cells in {:.2} s wall time\n",
            m.samples.len(),
            m.wall.as_secs_f64()
        )),
    ];
    for section in sections.into_iter().flatten() {
        out.push('\n');
        out.push_str(&section);
    }
    out
}

/// What ran, against what, where, and how big, then a blank line.
fn header(info: &RunInfo) -> String {
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
    out
}

/// The throughput table, for autobatch: each pattern batching off and on.
fn throughput(info: &RunInfo, m: &Measurements) -> String {
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
    for &p in &info.plan.patterns {
        t.row(vec![
            p.label(),
            ops_cell(m.summary(AB_OFF, p)),
            ops_cell(m.summary(AB_ON, p)),
            ratio_cell(ratio_summary(m, AB_ON, AB_OFF, p)),
            format!("{} / {}", per_frame(AB_OFF, p), per_frame(AB_ON, p)),
        ]);
    }
    format!("autobatch ({}):\n{}", info.runtime, t.render())
}

/// `--compare`'s tables: every client's ops/s, then autobatch's and the official client's
/// ratios to bunqueue's TS client.
fn render_compare(m: &Measurements, plan: &Plan) -> String {
    let cols: Vec<&str> = [AB_OFF, AB_ON, TS_OFF, TS_ON, OFFICIAL]
        .into_iter()
        .filter(|id| m.has(id))
        .collect();
    let heads: Vec<String> = cols.iter().map(|id| short_name(id).to_owned()).collect();
    let mut header: Vec<(&str, Align)> = vec![("Pattern (ops/s)", Align::Left)];
    header.extend(heads.iter().map(|h| (h.as_str(), Align::Right)));
    let mut all = Table::new(&header);
    for &p in &plan.patterns {
        let mut row = vec![p.label()];
        row.extend(cols.iter().map(|id| ops_cell(m.summary(id, p))));
        all.row(row);
    }
    let mut vs_ts = Table::new(&[
        ("Pattern (ratio)", Align::Left),
        ("autobatch on ÷ TS on", Align::Right),
        ("autobatch off ÷ TS off", Align::Right),
        ("bunqueue-client ÷ TS on", Align::Right),
        ("TS on ÷ TS off", Align::Right),
    ]);
    for &p in &plan.patterns {
        vs_ts.row(vec![
            p.label(),
            ratio_cell(ratio_summary(m, AB_ON, TS_ON, p)),
            ratio_cell(ratio_summary(m, AB_OFF, TS_OFF, p)),
            ratio_cell(ratio_summary(m, OFFICIAL, TS_ON, p)),
            ratio_cell(ratio_summary(m, TS_ON, TS_OFF, p)),
        ]);
    }
    format!(
        "All clients, same server, same run:\n{}\n\
         Against bunqueue's TS client (>1x: faster than TS), pattern by pattern:\n{}",
        all.render(),
        vs_ts.render()
    )
}

/// Sequential adds against the loopback ping-pong floors, where they ran.
fn render_ping_floor(m: &Measurements) -> Option<String> {
    let f = m.summary(FLOOR, Pattern::Seq)?;
    let mut out = format!(
        "Loopback floor (one Ping frame per round trip, std TcpStream, TCP_NODELAY): {} round trips/s\n",
        ops_cell(Some(f))
    );
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
    Some(out)
}

/// The clients of the cost table, `(id, column heading)`, in its row order.
fn cost_clients() -> Vec<(String, String)> {
    [
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
    .collect()
}

/// The published goals that apply to the run, each met or missed.
fn render_targets(info: &RunInfo, m: &Measurements) -> Option<String> {
    let targets = targets(info, m);
    if targets.is_empty() {
        return None;
    }
    let mut out = String::from(
        "Targets (reported, not asserted; medians over repetitions, of paired ratios \
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
    Some(out)
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
