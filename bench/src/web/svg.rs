//! The `--web` chart: requests per second per connection count, one bar per web server and
//! handler (median over reps), the no-add baseline drawn as an outline behind each stack's bars.

use std::fmt::Write;

use crate::stats::Summary;
use crate::table::thousands;

use super::model::{Mode, Stack, WebRun};

const W: f64 = 960.0;
const H: f64 = 520.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 24.0;
const TOP: f64 = 96.0;
const BOTTOM: f64 = 70.0;

fn color(s: Stack, m: Mode) -> &'static str {
    match (s, m) {
        (Stack::AxumMultiThread, Mode::Off) => "#9ecae1",
        (Stack::AxumMultiThread, _) => "#2171b5",
        (Stack::AxumCurrentThread, Mode::Off) => "#a1d99b",
        (Stack::AxumCurrentThread, _) => "#31a354",
        (Stack::Bun, Mode::Off) => "#fdd0a2",
        (Stack::Bun, _) => "#e6550d",
    }
}

fn rps(run: &WebRun, s: Stack, m: Mode, c: usize) -> Option<f64> {
    let xs: Vec<f64> = run
        .cells
        .iter()
        .filter(|x| x.stack == s && x.mode == m && x.connections == c)
        .map(|x| x.wrk.per_sec())
        .collect();
    Summary::of(&xs).map(|s| s.median)
}

/// The chart.
pub fn render(run: &WebRun) -> String {
    let conns = &run.plan.connections;
    let all = conns.iter().flat_map(|&c| {
        Stack::ALL
            .into_iter()
            .flat_map(move |s| Mode::ALL.into_iter().map(move |m| (s, m, c)))
    });
    let ymax = all
        .filter_map(|(s, m, c)| rps(run, s, m, c))
        .fold(1.0, f64::max);
    let step = nice_step(ymax);
    let ymax = (ymax / step).ceil() * step;
    let plot_w = W - LEFT - RIGHT;
    let plot_h = H - TOP - BOTTOM;
    let y = |v: f64| TOP + plot_h * (1.0 - v / ymax);
    let group_w = plot_w / conns.len().max(1) as f64;
    let bar_w = group_w * 0.8 / 6.0;

    let mut svg = String::new();
    let _ = write!(
        svg,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
<text x="{}" y="28" font-size="17" text-anchor="middle">POST /orders, one queue.add per request: requests/s under wrk</text>
<text x="{}" y="48" text-anchor="middle" fill="#555">{}{}</text>
"##,
        W / 2.0,
        W / 2.0,
        esc(&run.server),
        if run.plan.smoke { " — SMOKE RUN" } else { "" }
    );
    let mut v = 0.0;
    while v <= ymax + 1e-9 {
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT}" x2="{}" y1="{yy:.1}" y2="{yy:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            W - RIGHT,
            LEFT - 6.0,
            y(v) + 4.0,
            thousands(v),
            yy = y(v)
        );
        v += step;
    }
    for (gi, &c) in conns.iter().enumerate() {
        let gx = LEFT + gi as f64 * group_w + group_w * 0.1;
        let mut i = 0;
        for s in Stack::ALL {
            let base = rps(run, s, Mode::NoAdd, c);
            for m in [Mode::Off, Mode::On] {
                let x = gx + i as f64 * bar_w;
                if let Some(b) = base {
                    let _ = writeln!(
                        svg,
                        r##"<rect x="{x:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="none" stroke="#888" stroke-dasharray="3,2"/>"##,
                        y(b),
                        bar_w - 2.0,
                        y(0.0) - y(b)
                    );
                }
                if let Some(r) = rps(run, s, m, c) {
                    let _ = writeln!(
                        svg,
                        r#"<rect x="{x:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{}"><title>{}, {}: {} req/s</title></rect>"#,
                        y(r),
                        bar_w - 2.0,
                        y(0.0) - y(r),
                        color(s, m),
                        s.label(),
                        m.label(),
                        thousands(r)
                    );
                }
                i += 1;
            }
        }
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{c} connection{}</text>"#,
            gx + 3.0 * bar_w,
            H - BOTTOM + 18.0,
            if c == 1 { "" } else { "s" }
        );
    }
    let mut lx = LEFT;
    for s in Stack::ALL {
        for m in [Mode::Off, Mode::On] {
            let label = format!("{} {}", short(s), m.label());
            let _ = writeln!(
                svg,
                r#"<rect x="{lx:.1}" y="64" width="12" height="12" fill="{}"/><text x="{:.1}" y="75">{}</text>"#,
                color(s, m),
                lx + 16.0,
                esc(&label)
            );
            lx += 16.0 + label.len() as f64 * 6.2 + 14.0;
        }
    }
    let _ = writeln!(
        svg,
        r##"<text x="{LEFT}" y="{}" fill="#555">dashed outline: the same web server without the add (baseline)</text>"##,
        H - 16.0
    );
    svg.push_str("</svg>\n");
    svg
}

fn short(s: Stack) -> &'static str {
    match s {
        Stack::AxumMultiThread => "axum mt",
        Stack::AxumCurrentThread => "axum ct",
        Stack::Bun => "Bun+TS",
    }
}

fn nice_step(max: f64) -> f64 {
    let raw = max / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag)
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
