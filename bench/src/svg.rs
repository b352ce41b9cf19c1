//! A hand-written SVG chart of the table: grouped bars per pattern, one bar per contender,
//! labelled medians, min–max whiskers, a y axis with gridlines, a title and a legend.

use std::fmt::Write;

use crate::ids::*;
use crate::report::{ratio_summary, short_name, RunInfo};
use crate::run::Measurements;
use crate::table::{compact, ratio, thousands};

const W: f64 = 960.0;
const H: f64 = 560.0;
const LEFT: f64 = 86.0;
const RIGHT: f64 = 24.0;
const TOP: f64 = 112.0;
const BOTTOM: f64 = 78.0;

fn color(id: &str) -> &'static str {
    match id {
        AB_OFF => "#9ecae1",
        AB_ON => "#2171b5",
        TS_OFF => "#fdd0a2",
        TS_ON => "#e6550d",
        OFFICIAL => "#969696",
        _ => "#74c476",
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A "nice" axis maximum and tick step covering `max`.
fn nice_axis(max: f64) -> (f64, f64) {
    let max = max.max(1.0);
    let raw = max / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    ((max / step).ceil() * step, step)
}

/// Render the chart.
pub fn render(info: &RunInfo, m: &Measurements) -> String {
    let series: Vec<&str> = [AB_OFF, AB_ON, TS_OFF, TS_ON, OFFICIAL]
        .into_iter()
        .filter(|id| m.has(id))
        .collect();
    let patterns = &info.plan.patterns;
    let ymax_data = series
        .iter()
        .flat_map(|id| patterns.iter().filter_map(|p| m.summary(id, *p)))
        .map(|s| s.max)
        .fold(0.0, f64::max);
    let (ymax, step) = nice_axis(ymax_data * 1.08);
    let plot_w = W - LEFT - RIGHT;
    let plot_h = H - TOP - BOTTOM;
    let y = |v: f64| TOP + plot_h * (1.0 - v / ymax);

    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="Helvetica, Arial, sans-serif">"#
    );
    let _ = writeln!(s, r##"<rect width="100%" height="100%" fill="#ffffff"/>"##);
    let title = if info.compare {
        "add() throughput: autobatch vs bunqueue's own clients"
    } else {
        "add() throughput: autobatch, batching off vs on"
    };
    let _ = writeln!(
        s,
        r##"<text x="{}" y="30" text-anchor="middle" font-size="20" font-weight="bold" fill="#222">{}</text>"##,
        W / 2.0,
        esc(title)
    );
    let sub = format!(
        "{} · autobatch on {} · {} adds/cell, median of {} reps (whiskers: min–max)",
        info.server,
        info.runtime,
        thousands(info.plan.adds as f64),
        info.plan.reps
    );
    let _ = writeln!(
        s,
        r##"<text x="{}" y="52" text-anchor="middle" font-size="12" fill="#555">{}</text>"##,
        W / 2.0,
        esc(&sub)
    );
    let _ = writeln!(
        s,
        r##"<text x="{}" y="68" text-anchor="middle" font-size="11" fill="#777">{}</text>"##,
        W / 2.0,
        esc(&info.machine.one_line())
    );

    // Legend.
    // Legend items as wide as their text (about 6.6 px per character at 12 px).
    let widths: Vec<f64> = series
        .iter()
        .map(|id| 20.0 + short_name(id).chars().count() as f64 * 6.6 + 22.0)
        .collect();
    let mut x = W / 2.0 - widths.iter().sum::<f64>() / 2.0;
    for (id, w) in series.iter().zip(&widths) {
        let item_x = x;
        x += w;
        let x = item_x;
        let _ = writeln!(
            s,
            r##"<rect x="{x:.1}" y="80" width="14" height="14" fill="{}"/><text x="{:.1}" y="92" font-size="12" fill="#333">{}</text>"##,
            color(id),
            x + 20.0,
            esc(short_name(id))
        );
    }

    // Grid and y axis.
    let mut v = 0.0;
    while v <= ymax + step / 2.0 {
        let yy = y(v);
        let _ = writeln!(
            s,
            r##"<line x1="{LEFT}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}" stroke="{}" stroke-width="1"/>"##,
            W - RIGHT,
            if v == 0.0 { "#333" } else { "#e5e5e5" }
        );
        let _ = writeln!(
            s,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="end" font-size="11" fill="#555">{}</text>"##,
            LEFT - 8.0,
            yy + 4.0,
            compact(v)
        );
        v += step;
    }
    let _ = writeln!(
        s,
        r##"<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{:.1}" stroke="#333"/>"##,
        TOP + plot_h
    );
    let _ = writeln!(
        s,
        r##"<text transform="translate(22,{:.1}) rotate(-90)" text-anchor="middle" font-size="13" fill="#333">adds per second (higher is better)</text>"##,
        TOP + plot_h / 2.0
    );

    // Bars.
    let gw = plot_w / patterns.len().max(1) as f64;
    let inner = gw * 0.8;
    let bw = inner / series.len().max(1) as f64;
    for (g, p) in patterns.iter().enumerate() {
        let gx = LEFT + g as f64 * gw + (gw - inner) / 2.0;
        for (i, id) in series.iter().enumerate() {
            let Some(sm) = m.summary(id, *p) else {
                continue;
            };
            let x = gx + i as f64 * bw + bw * 0.06;
            let w = bw * 0.88;
            let top = y(sm.median);
            let _ = writeln!(
                s,
                r#"<rect x="{x:.1}" y="{top:.1}" width="{w:.1}" height="{:.1}" fill="{}"><title>{}: {} ops/s (min {}, max {})</title></rect>"#,
                (TOP + plot_h - top).max(0.0),
                color(id),
                esc(short_name(id)),
                thousands(sm.median),
                thousands(sm.min),
                thousands(sm.max)
            );
            let cx = x + w / 2.0;
            if sm.n > 1 {
                let _ = writeln!(
                    s,
                    r##"<line x1="{cx:.1}" y1="{:.1}" x2="{cx:.1}" y2="{:.1}" stroke="#222" stroke-width="1"/><line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#222"/><line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#222"/>"##,
                    y(sm.min),
                    y(sm.max),
                    cx - 4.0,
                    y(sm.min),
                    cx + 4.0,
                    y(sm.min),
                    cx - 4.0,
                    y(sm.max),
                    cx + 4.0,
                    y(sm.max)
                );
            }
            let label_y = y(sm.max).min(top) - 5.0;
            let _ = writeln!(
                s,
                r##"<text x="{cx:.1}" y="{label_y:.1}" text-anchor="middle" font-size="{}" fill="#222">{}</text>"##,
                if bw < 34.0 { 9 } else { 11 },
                compact(sm.median)
            );
        }
        let label_x = LEFT + g as f64 * gw + gw / 2.0;
        let _ = writeln!(
            s,
            r##"<text x="{label_x:.1}" y="{:.1}" text-anchor="middle" font-size="14" font-weight="bold" fill="#222">{}</text>"##,
            TOP + plot_h + 22.0,
            esc(&p.label())
        );
        let note = if info.compare {
            ratio_summary(m, AB_ON, TS_ON, *p)
                .map(|r| format!("autobatch on ÷ TS on: {}", ratio(r.median)))
        } else {
            ratio_summary(m, AB_ON, AB_OFF, *p).map(|r| format!("on ÷ off: {}", ratio(r.median)))
        };
        if let Some(note) = note {
            let _ = writeln!(
                s,
                r##"<text x="{label_x:.1}" y="{:.1}" text-anchor="middle" font-size="12" fill="#2171b5">{}</text>"##,
                TOP + plot_h + 42.0,
                esc(&note)
            );
        }
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::nice_axis;

    #[test]
    fn axis_is_nice() {
        assert_eq!(nice_axis(145_000.0), (150_000.0, 50_000.0));
        assert_eq!(nice_axis(9_000.0), (10_000.0, 2_000.0));
    }
}
