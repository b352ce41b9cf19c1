//! A hand-written SVG chart of the table: grouped bars per pattern, one bar per contender,
//! labelled medians, min–max whiskers, a y axis with gridlines, a title and a legend. It is drawn
//! from the run's JSON document (`--json`), so that `--render-svg` redraws a committed chart
//! from its committed document and `scripts/perf-docs.sh` keeps the two in step.

use std::fmt::Write;

use serde_json::Value;

use crate::chart::{esc, nice_axis, text_width, Legend};
use crate::ids::*;
use crate::machine::MachineInfo;
use crate::render_error::RenderError;
use crate::report::short_name;
use crate::table::{compact, ratio, thousands};
use crate::workload::Pattern;

const W: f64 = 960.0;
const H: f64 = 560.0;
const LEFT: f64 = 86.0;
const RIGHT: f64 = 24.0;
const LEGEND_TOP: f64 = 80.0;
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

/// Median and spread of one contender's adds per second in one pattern.
#[derive(Debug, Clone, Copy)]
struct Bar {
    median: f64,
    min: f64,
    max: f64,
    reps: u64,
}

/// One pattern: its bars, one per series (`None` where that contender did not run it), and
/// the ratio printed under it.
struct Group {
    label: String,
    bars: Vec<Option<Bar>>,
    note: Option<f64>,
}

/// What the chart shows, read from a run's JSON document.
struct Chart {
    compare: bool,
    subtitle: String,
    machine: String,
    series: Vec<&'static str>,
    groups: Vec<Group>,
}

fn bad(what: &str) -> RenderError {
    RenderError::new(what.to_owned())
}

fn bar_of(doc: &Value, id: &str, pattern: &str) -> Option<Bar> {
    let s = doc["summary"]
        .as_array()?
        .iter()
        .find(|s| s["contender"].as_str() == Some(id) && s["pattern"].as_str() == Some(pattern))?;
    let s = &s["ops_per_sec"];
    Some(Bar {
        median: s["median"].as_f64()?,
        min: s["min"].as_f64()?,
        max: s["max"].as_f64()?,
        reps: s["n"].as_u64()?,
    })
}

fn ratio_of(doc: &Value, a: &str, b: &str, pattern: &str) -> Option<f64> {
    doc["ratios"].as_array()?.iter().find_map(|r| {
        (r["numerator"].as_str() == Some(a)
            && r["denominator"].as_str() == Some(b)
            && r["pattern"].as_str() == Some(pattern))
        .then(|| r["ratio"]["median"].as_f64())
        .flatten()
    })
}

impl Chart {
    fn from_json(doc: &Value) -> Result<Chart, RenderError> {
        let compare = doc["mode"].as_str() == Some("compare");
        let plan = &doc["plan"];
        let machine = MachineInfo::from_json(&doc["machine"]).ok_or_else(|| bad("no `machine`"))?;
        let patterns: Vec<&str> = plan["patterns"]
            .as_array()
            .ok_or_else(|| bad("no `plan.patterns`"))?
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let series: Vec<&'static str> = [AB_OFF, AB_ON, TS_OFF, TS_ON, OFFICIAL]
            .into_iter()
            .filter(|id| patterns.iter().any(|p| bar_of(doc, id, p).is_some()))
            .collect();
        let versus = if compare { TS_ON } else { AB_OFF };
        let mut groups = Vec::new();
        for p in &patterns {
            let label = Pattern::parse(p)
                .ok_or_else(|| bad("an unknown pattern"))?
                .label();
            groups.push(Group {
                label,
                bars: series.iter().map(|id| bar_of(doc, id, p)).collect(),
                note: ratio_of(doc, AB_ON, versus, p),
            });
        }
        let subtitle = format!(
            "{} · autobatch on {} · {} adds/cell, median of {} reps (whiskers: min–max)",
            doc["server"].as_str().ok_or_else(|| bad("no `server`"))?,
            doc["runtime"].as_str().ok_or_else(|| bad("no `runtime`"))?,
            thousands(
                plan["adds_per_cell"]
                    .as_f64()
                    .ok_or_else(|| bad("no `plan.adds_per_cell`"))?
            ),
            plan["reps"].as_u64().ok_or_else(|| bad("no `plan.reps`"))?
        );
        let machine = machine.one_line();
        Ok(Chart {
            compare,
            subtitle,
            machine,
            series,
            groups,
        })
    }
}

/// The chart of a default, `--compare` or `--tls` run's JSON document.
pub fn render(doc: &Value) -> Result<String, RenderError> {
    let chart = Chart::from_json(doc)?;
    let ymax_data = chart
        .groups
        .iter()
        .flat_map(|g| g.bars.iter().flatten())
        .map(|b| b.max)
        .fold(0.0, f64::max);
    let (ymax, step) = nice_axis(ymax_data * 1.08);
    let mut s = String::new();
    let top = header(&mut s, &chart) + 18.0;
    let plot = Plot { top, ymax, step };
    axes(&mut s, &plot);
    bars(&mut s, &chart, &plot);
    s.push_str("</svg>\n");
    Ok(s)
}

/// The plot area's top and its y scale.
struct Plot {
    top: f64,
    ymax: f64,
    step: f64,
}

impl Plot {
    fn height(&self) -> f64 {
        H - self.top - BOTTOM
    }

    fn y(&self, v: f64) -> f64 {
        self.top + self.height() * (1.0 - v / self.ymax)
    }
}

/// The root element, title, subtitles and legend; returns where the legend ends.
fn header(s: &mut String, chart: &Chart) -> f64 {
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="Helvetica, Arial, sans-serif">"#
    );
    let _ = writeln!(s, r##"<rect width="100%" height="100%" fill="#ffffff"/>"##);
    let title = if chart.compare {
        "add() throughput: autobatch vs bunqueue's own clients"
    } else {
        "add() throughput: autobatch, batching off vs on"
    };
    let lines = [
        (30, 20, r##" font-weight="bold" fill="#222""##, title),
        (52, 12, r##" fill="#555""##, chart.subtitle.as_str()),
        (68, 11, r##" fill="#777""##, chart.machine.as_str()),
    ];
    for (y, size, style, text) in lines {
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{y}" text-anchor="middle" font-size="{size}"{style}>{}</text>"#,
            W / 2.0,
            esc(text)
        );
    }
    let items: Vec<(&'static str, String)> = chart
        .series
        .iter()
        .map(|id| (color(id), short_name(id).to_owned()))
        .collect();
    let legend = Legend {
        items: &items,
        size: 12.0,
        canvas: W,
        margin: RIGHT,
    };
    legend.draw(s, LEGEND_TOP)
}

/// Gridlines, the y axis, its ticks and its title.
fn axes(s: &mut String, plot: &Plot) {
    let mut v = 0.0;
    while v <= plot.ymax + plot.step / 2.0 {
        let yy = plot.y(v);
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
        v += plot.step;
    }
    let _ = writeln!(
        s,
        r##"<line x1="{LEFT}" y1="{:.1}" x2="{LEFT}" y2="{:.1}" stroke="#333"/>"##,
        plot.top,
        plot.top + plot.height()
    );
    let _ = writeln!(
        s,
        r##"<text transform="translate(22,{:.1}) rotate(-90)" text-anchor="middle" font-size="13" fill="#333">adds per second (higher is better)</text>"##,
        plot.top + plot.height() / 2.0
    );
}

/// A bar, its whisker, and where its label's box is wanted.
fn bar(s: &mut String, plot: &Plot, id: &str, x: f64, w: f64, b: &Bar) {
    let top = plot.y(b.median);
    let _ = writeln!(
        s,
        r#"<rect x="{x:.1}" y="{top:.1}" width="{w:.1}" height="{:.1}" fill="{}"><title>{}: {} ops/s (min {}, max {})</title></rect>"#,
        (plot.y(0.0) - top).max(0.0),
        color(id),
        esc(short_name(id)),
        thousands(b.median),
        thousands(b.min),
        thousands(b.max)
    );
    let cx = x + w / 2.0;
    if b.reps > 1 {
        let (lo, hi) = (plot.y(b.min), plot.y(b.max));
        let _ = writeln!(
            s,
            r##"<line x1="{cx:.1}" y1="{lo:.1}" x2="{cx:.1}" y2="{hi:.1}" stroke="#222" stroke-width="1"/><line x1="{:.1}" y1="{lo:.1}" x2="{:.1}" y2="{lo:.1}" stroke="#222"/><line x1="{:.1}" y1="{hi:.1}" x2="{:.1}" y2="{hi:.1}" stroke="#222"/>"##,
            cx - 4.0,
            cx + 4.0,
            cx - 4.0,
            cx + 4.0
        );
    }
}

/// The value labels of one group, each above its whisker, raised above any label it would
/// otherwise overlap: `(centre x, median)` per bar, at font size `size`.
fn value_labels(s: &mut String, plot: &Plot, labels: &[(f64, Bar)], size: f64) {
    // Boxes already placed: (x0, x1, y0 = top, y1 = bottom).
    let mut placed: Vec<(f64, f64, f64, f64)> = Vec::new();
    for (cx, b) in labels {
        let text = compact(b.median);
        let half = text_width(&text, size, false) / 2.0;
        let mut y = plot.y(b.max).min(plot.y(b.median)) - 5.0;
        while let Some(&(_, _, above, _)) = placed.iter().find(|(x0, x1, y0, y1)| {
            cx - half < *x1 && *x0 < cx + half && y - 0.8 * size < *y1 && *y0 < y + 0.2 * size
        }) {
            y = above - 0.2 * size - 1.0;
        }
        placed.push((cx - half, cx + half, y - 0.8 * size, y + 0.2 * size));
        let _ = writeln!(
            s,
            r##"<text x="{cx:.1}" y="{y:.1}" text-anchor="middle" font-size="{size}" fill="#222">{text}</text>"##,
        );
    }
}

/// How the patterns' names under the groups are drawn: as large as lets the widest fit its
/// group, down to a floor, and every other one a line lower when even that is too wide.
struct GroupNames {
    size: f64,
    stagger: f64,
}

impl GroupNames {
    fn fit(chart: &Chart, gw: f64) -> GroupNames {
        let widest = |size: f64| {
            chart
                .groups
                .iter()
                .map(|g| text_width(&g.label, size, true))
                .fold(0.0, f64::max)
        };
        let room = gw - 6.0;
        let size = (14.0 * room / widest(14.0).max(1.0))
            .clamp(9.0, 14.0)
            .floor();
        let stagger = if widest(size) > room { size + 2.0 } else { 0.0 };
        GroupNames { size, stagger }
    }
}

/// Every group: its bars, their labels, the pattern's name and the ratio under it, and once,
/// at the foot, what that ratio is.
fn bars(s: &mut String, chart: &Chart, plot: &Plot) {
    let plot_w = W - LEFT - RIGHT;
    let gw = plot_w / chart.groups.len().max(1) as f64;
    let inner = gw * 0.8;
    let bw = inner / chart.series.len().max(1) as f64;
    let size = if bw < 34.0 { 9.0 } else { 11.0 };
    let base = plot.top + plot.height();
    let names = GroupNames::fit(chart, gw);
    for (g, group) in chart.groups.iter().enumerate() {
        let gx = LEFT + g as f64 * gw + (gw - inner) / 2.0;
        let mut labels = Vec::new();
        for (i, (id, b)) in chart.series.iter().zip(&group.bars).enumerate() {
            let Some(b) = b else { continue };
            let x = gx + i as f64 * bw + bw * 0.06;
            bar(s, plot, id, x, bw * 0.88, b);
            labels.push((x + bw * 0.44, *b));
        }
        value_labels(s, plot, &labels, size);
        let label_x = LEFT + g as f64 * gw + gw / 2.0;
        let label_y = base + 22.0 + if g % 2 == 1 { names.stagger } else { 0.0 };
        let _ = writeln!(
            s,
            r##"<text x="{label_x:.1}" y="{label_y:.1}" text-anchor="middle" font-size="{:.1}" font-weight="bold" fill="#222">{}</text>"##,
            names.size,
            esc(&group.label)
        );
        if let Some(r) = group.note {
            let _ = writeln!(
                s,
                r##"<text x="{label_x:.1}" y="{:.1}" text-anchor="middle" font-size="12" fill="#2171b5">{}</text>"##,
                base + 42.0 + names.stagger / 2.0,
                ratio(r)
            );
        }
    }
    if chart.groups.iter().any(|g| g.note.is_some()) {
        let what = if chart.compare {
            "autobatch on ÷ TS client on"
        } else {
            "autobatch on ÷ off"
        };
        let _ = writeln!(
            s,
            r##"<text x="{LEFT}" y="{:.1}" font-size="11" fill="#2171b5">under each pattern: {what}, median of the ratios of each repetition</text>"##,
            H - 10.0
        );
    }
}

#[cfg(test)]
mod tests {
    use super::render;
    use crate::chart::check::collisions;

    fn committed(name: &str) -> serde_json::Value {
        let path = format!("{}/results/{name}.json", env!("CARGO_MANIFEST_DIR"));
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
    }

    #[test]
    fn chart_text_of_every_committed_run_fits_and_never_overlaps() {
        for name in [
            "default",
            "compare",
            "compare-seq",
            "compare-sqlite",
            "compare-idle",
            "tls",
            "runtimes",
        ] {
            let svg = render(&committed(name)).unwrap();
            assert_eq!(collisions(&svg), Vec::<String>::new(), "{name}");
        }
    }

    #[test]
    fn chart_of_many_patterns_keeps_its_text_apart() {
        let mut doc = committed("compare");
        let extra = ["all2", "all3", "all20", "all200", "all500", "all2000"];
        let summary = doc["summary"].as_array().unwrap().clone();
        for p in extra {
            doc["plan"]["patterns"]
                .as_array_mut()
                .unwrap()
                .push(p.into());
            for s in summary.iter().filter(|s| s["pattern"] == "all1000") {
                let mut s = s.clone();
                s["pattern"] = p.into();
                doc["summary"].as_array_mut().unwrap().push(s);
            }
        }
        let svg = render(&doc).unwrap();
        assert_eq!(collisions(&svg), Vec::<String>::new());
    }
}
