//! The `--web` chart: requests per second per connection count, one bar per web server and
//! handler (median over reps), the no-add baseline drawn as an outline behind each stack's bars.

use std::fmt::Write;

use crate::chart::{esc, nice_axis, Legend};
use crate::stats::Summary;
use crate::table::thousands;

use super::model::{Mode, Stack, WebRun};

const W: f64 = 960.0;
const H: f64 = 520.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 24.0;
const LEGEND_TOP: f64 = 62.0;
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
    let (ymax, step) = nice_axis(ymax);
    let mut svg = String::new();
    let top = header(&mut svg, run) + 16.0;
    let plot_w = W - LEFT - RIGHT;
    let plot_h = H - top - BOTTOM;
    let y = |v: f64| top + plot_h * (1.0 - v / ymax);
    let group_w = plot_w / conns.len().max(1) as f64;
    let bar_w = group_w * 0.8 / 6.0;

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
    let _ = writeln!(
        svg,
        r##"<text x="{LEFT}" y="{}" fill="#555">dashed outline: the same web server without the add (baseline)</text>"##,
        H - 16.0
    );
    svg.push_str("</svg>\n");
    svg
}

/// The root element, title, subtitle and legend; returns where the legend ends.
fn header(svg: &mut String, run: &WebRun) -> f64 {
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
    let items: Vec<(&'static str, String)> = Stack::ALL
        .into_iter()
        .flat_map(|s| {
            [Mode::Off, Mode::On].map(|m| (color(s, m), format!("{} {}", short(s), m.label())))
        })
        .collect();
    let legend = Legend {
        items: &items,
        size: 12.0,
        canvas: W,
        margin: RIGHT,
    };
    legend.draw(svg, LEGEND_TOP)
}

fn short(s: Stack) -> &'static str {
    match s {
        Stack::AxumMultiThread => "axum mt",
        Stack::AxumCurrentThread => "axum ct",
        Stack::Bun => "Bun+TS",
    }
}

#[cfg(test)]
mod tests {
    use crate::chart::check::collisions;

    #[test]
    fn chart_text_of_the_committed_web_run_fits_and_never_overlaps() {
        let path = format!("{}/results/web.json", env!("CARGO_MANIFEST_DIR"));
        let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        let (run, _) = crate::web::from_json(&doc).unwrap();
        assert_eq!(collisions(&super::render(&run)), Vec::<String>::new());
    }
}
