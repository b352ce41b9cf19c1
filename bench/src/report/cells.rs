//! The figures the report, the goals and the JSON document share (paired ratios between
//! contenders), and how one table cell prints them.

use crate::ids::*;
use crate::run::{Measurements, Sample};
use crate::stats::{paired_ratios, Summary};
use crate::table::{compact, ratio, thousands};
use crate::workload::Pattern;

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
pub(super) fn floor_ratio(m: &Measurements, a: &str, floor: &str) -> Option<Summary> {
    Summary::of(&paired_ratios(
        &m.series(a, Pattern::Seq),
        &m.series(floor, Pattern::Seq),
    ))
}

/// ops/s as `median (min–max)`, the median alone for one repetition, `–` for none.
pub(super) fn ops_cell(s: Option<Summary>) -> String {
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

/// A ratio as `median (min–max)`, the median alone for one repetition, `–` for none.
pub(super) fn ratio_cell(s: Option<Summary>) -> String {
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

/// A share as `median% (min–max%)`, the median alone for one repetition, `–` for none.
pub(super) fn pct_cell(s: Option<Summary>) -> String {
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

/// Microseconds with three significant digits or so, `median (min–max)` over repetitions.
pub(super) fn micros_cell(s: Summary) -> String {
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

/// Column heading of a contender.
pub fn short_name(id: &str) -> &'static str {
    match id {
        AB_OFF => "autobatch off",
        AB_ON => "autobatch on",
        AB_IDEMPOTENT => "autobatch idempotent",
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
