//! `--render FILE.json`: a run's tables again, in Markdown, from the JSON document the run
//! wrote (`--json`), so that the figures in the docs come from the bench's own output and are
//! never typed by hand. `scripts/perf-docs.sh` splices them into `docs/performance.md`.
//!
//! It reads only what every mode writes (`server`, `machine`, `plan`, `summary`, `ratios`,
//! `targets`), so it renders default, `--compare`, `--tls` and `--fleet` runs alike; a `--web`
//! run (`"mode": "web"`) is read back whole and rendered by the web report.

use std::fmt::Write as _;

use serde_json::Value;

pub use crate::render_error::RenderError;
use crate::table::{compact, ratio, thousands, Align, Table};

fn field<'a>(v: &'a Value, key: &str) -> Result<&'a Value, RenderError> {
    v.get(key)
        .ok_or_else(|| RenderError::new(format!("no `{key}`")))
}

fn text<'a>(v: &'a Value, key: &str) -> Result<&'a str, RenderError> {
    field(v, key)?
        .as_str()
        .ok_or_else(|| RenderError::new(format!("`{key}` is not a string")))
}

fn list<'a>(v: &'a Value, key: &str) -> Result<&'a [Value], RenderError> {
    field(v, key)?
        .as_array()
        .map(Vec::as_slice)
        .ok_or_else(|| RenderError::new(format!("`{key}` is not a list")))
}

/// A `--web` document's run, read back whole; `None` for every other mode.
fn web_run(
    doc: &Value,
) -> Result<Option<(crate::web::WebRun, crate::machine::MachineInfo)>, RenderError> {
    if doc.get("mode").and_then(Value::as_str) != Some("web") {
        return Ok(None);
    }
    crate::web::from_json(doc)
        .map(Some)
        .map_err(RenderError::new)
}

/// `median (min–max)` of a summary object, through `fmt` for each number.
fn spread(s: &Value, fmt: impl Fn(f64) -> String) -> String {
    let n = |k: &str| s.get(k).and_then(Value::as_f64);
    match (n("median"), n("min"), n("max"), n("n")) {
        (Some(med), Some(lo), Some(hi), Some(reps)) if reps > 1.0 => {
            format!("{} ({}–{})", fmt(med), fmt(lo), fmt(hi))
        }
        (Some(med), ..) => fmt(med),
        _ => "–".into(),
    }
}

/// The SVG chart of one run's JSON document: the web chart for a `--web` run, the bar chart
/// of the throughput table for every other.
///
/// # Errors
///
/// [`RenderError`] naming the first key the document lacks.
pub fn svg(doc: &Value) -> Result<String, RenderError> {
    match web_run(doc)? {
        Some((run, _)) => Ok(crate::web::render_svg(&run)),
        None => crate::svg::render(doc),
    }
}

/// The Markdown rendering of one run's JSON document.
///
/// # Errors
///
/// [`RenderError`] naming the first key the document lacks.
pub fn markdown(doc: &Value) -> Result<String, RenderError> {
    if let Some((run, machine)) = web_run(doc)? {
        return Ok(crate::web::markdown(&run, &machine));
    }
    let mut out = preamble(doc)?;
    let cells = Cells::of(list(doc, "summary")?)?;
    let _ = writeln!(out, "Adds per second:\n");
    out.push_str(&cells.ops_table());
    if let Some(cpu) = cells.cpu_table() {
        let _ = writeln!(out, "\nClient CPU per add (µs):\n");
        out.push_str(&cpu);
    }
    let ratios = list(doc, "ratios")?;
    if !ratios.is_empty() {
        let _ = writeln!(
            out,
            "\nRatios of adds per second, paired by repetition (cells run back to back):\n"
        );
        out.push_str(&ratios_table(ratios, &cells)?);
    }
    let targets = list(doc, "targets")?;
    if !targets.is_empty() {
        let _ = writeln!(out, "\nPublished goals, judged on this run:\n");
        out.push_str(&goals_list(targets)?);
    }
    Ok(out)
}

/// The list above the tables: server, machine, versions and the run's sizes.
fn preamble(doc: &Value) -> Result<String, RenderError> {
    let mut out = String::new();
    let machine = field(doc, "machine")?;
    let plan = field(doc, "plan")?;
    let num = |v: &Value, k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
    let _ = writeln!(out, "- server: {}", text(doc, "server")?);
    let _ = writeln!(
        out,
        "- machine: {} cores ({}), {}; run {}",
        num(machine, "cores"),
        text(machine, "cpu_model")?,
        text(machine, "kernel")?,
        text(machine, "date_utc")?
    );
    if let Some(versions) = machine.get("versions").and_then(Value::as_object) {
        let v: Vec<String> = versions
            .iter()
            .map(|(k, v)| format!("{k} {}", v.as_str().unwrap_or("?")))
            .collect();
        let _ = writeln!(out, "- versions: {}", v.join(", "));
    }
    let _ = writeln!(
        out,
        "- cells: {} timed adds each after {} warm-up adds, {} repetitions interleaved; \
         figures are medians (min–max over repetitions)\n",
        thousands(num(plan, "adds_per_cell") as f64),
        thousands(num(plan, "warmup_adds") as f64),
        num(plan, "reps")
    );
    Ok(out)
}

/// A document's `summary`: its cells, with the patterns and contenders in the order they
/// first appear.
struct Cells<'a> {
    summary: &'a [Value],
    patterns: Vec<&'a str>,
    /// `(id, label)`.
    contenders: Vec<(&'a str, &'a str)>,
}

impl<'a> Cells<'a> {
    fn of(summary: &'a [Value]) -> Result<Cells<'a>, RenderError> {
        let mut patterns: Vec<&str> = Vec::new();
        let mut contenders: Vec<(&str, &str)> = Vec::new();
        for s in summary {
            let p = text(s, "pattern")?;
            if !patterns.contains(&p) {
                patterns.push(p);
            }
            let c = (text(s, "contender")?, text(s, "label")?);
            if !contenders.iter().any(|(id, _)| *id == c.0) {
                contenders.push(c);
            }
        }
        Ok(Cells {
            summary,
            patterns,
            contenders,
        })
    }

    /// The summary object `key` of contender `c` at pattern `p`.
    fn cell(&self, c: &str, p: &str, key: &str) -> Option<&'a Value> {
        self.summary
            .iter()
            .find(|s| s["contender"] == c && s["pattern"] == p)
            .and_then(|s| s.get(key))
    }

    /// The contender's label, or its id where it has none.
    fn label(&self, id: &str) -> String {
        self.contenders
            .iter()
            .find(|(c, _)| *c == id)
            .map_or(id.to_string(), |(_, l)| (*l).to_string())
    }

    /// A table of `key` for every contender in `rows`, a column per pattern.
    fn table(&self, rows: &[(&str, &str)], key: &str, fmt: impl Fn(f64) -> String) -> String {
        let mut header = vec![("Contender", Align::Left)];
        header.extend(self.patterns.iter().map(|p| (*p, Align::Right)));
        let mut t = Table::new(&header);
        for (id, label) in rows {
            let mut row = vec![(*label).to_string()];
            row.extend(self.patterns.iter().map(|p| {
                self.cell(id, p, key)
                    .map_or("–".into(), |s| spread(s, &fmt))
            }));
            t.row(row);
        }
        t.render()
    }

    /// Adds per second of every contender.
    fn ops_table(&self) -> String {
        self.table(&self.contenders, "ops_per_sec", compact)
    }

    /// Client CPU per add of the contenders that read it, if any did. Yardsticks that read no
    /// client CPU (the ping-pong floors, the server's ceiling) have no row.
    fn cpu_table(&self) -> Option<String> {
        let key = "client_cpu_us_per_add";
        let has_cpu = self
            .summary
            .iter()
            .any(|s| s.get(key).is_some_and(|v| v.get("median").is_some()));
        if !has_cpu {
            return None;
        }
        let measured_cpu = |id: &str| {
            self.patterns.iter().any(|p| {
                self.cell(id, p, key)
                    .is_some_and(|s| s.get("median").is_some())
            })
        };
        let rows: Vec<(&str, &str)> = self
            .contenders
            .iter()
            .copied()
            .filter(|(id, _)| measured_cpu(id))
            .collect();
        Some(self.table(&rows, key, |x| format!("{x:.2}")))
    }
}

/// Every ratio of the document, labelled by its contenders.
fn ratios_table(ratios: &[Value], cells: &Cells) -> Result<String, RenderError> {
    let mut t = Table::new(&[
        ("Ratio", Align::Left),
        ("Pattern", Align::Left),
        ("median (min–max)", Align::Right),
    ]);
    for r in ratios {
        t.row(vec![
            format!(
                "{} ÷ {}",
                cells.label(text(r, "numerator")?),
                cells.label(text(r, "denominator")?)
            ),
            text(r, "pattern")?.to_string(),
            spread(field(r, "ratio")?, ratio),
        ]);
    }
    Ok(t.render())
}

/// The goals judged on the run, one line each, met or missed.
fn goals_list(targets: &[Value]) -> Result<String, RenderError> {
    let mut out = String::new();
    for g in targets {
        let met = field(g, "met")?.as_bool().unwrap_or(false);
        let measured = field(g, "measured")?.as_f64().unwrap_or(f64::NAN);
        let _ = write!(
            out,
            "- {} {}: measured {}",
            if met { "met" } else { "**missed**" },
            text(g, "name")?,
            compact_measure(measured)
        );
        match g.get("detail").and_then(Value::as_str) {
            Some(d) => {
                let _ = writeln!(out, " ({d})");
            }
            None => out.push('\n'),
        }
    }
    Ok(out)
}

/// The README's headline table of a `--compare` run: adds per second of every client, batching
/// off and on, per pattern, and autobatch's ratio to bunqueue's TS client (both batching).
///
/// # Errors
///
/// [`RenderError`] naming the first key the document lacks, or a contender it did not run.
pub fn headline(doc: &Value) -> Result<String, RenderError> {
    if let Some((run, _)) = web_run(doc)? {
        return Ok(crate::web::headline(&run));
    }
    use crate::ids::{AB_OFF, AB_ON, OFFICIAL, TS_OFF, TS_ON};
    let summary = list(doc, "summary")?;
    let ratios = list(doc, "ratios")?;
    let median = |v: Option<&Value>| v.and_then(|s| s.get("median")).and_then(Value::as_f64);
    let ops = |c: &str, p: &str| {
        median(
            summary
                .iter()
                .find(|s| s["contender"] == c && s["pattern"] == p)
                .and_then(|s| s.get("ops_per_sec")),
        )
    };
    let mut patterns: Vec<&str> = Vec::new();
    for s in summary {
        let p = text(s, "pattern")?;
        if !patterns.contains(&p) {
            patterns.push(p);
        }
    }
    let columns = [AB_OFF, AB_ON, TS_OFF, TS_ON, OFFICIAL];
    for c in columns {
        if !summary.iter().any(|s| s["contender"] == c) {
            return Err(RenderError::new(format!(
                "no contender `{c}`: not a --compare run"
            )));
        }
    }
    let mut t = Table::new(&[
        ("Pattern (adds/s)", Align::Left),
        ("autobatch off", Align::Right),
        ("autobatch on", Align::Right),
        ("TS client off", Align::Right),
        ("TS client on", Align::Right),
        ("bunqueue-client (Rust)", Align::Right),
        ("autobatch on ÷ TS on", Align::Right),
    ]);
    for p in patterns {
        let label = match p.strip_prefix("all") {
            Some(n) => format!("`join_all({n})`"),
            None => "Sequential `await`".to_string(),
        };
        let mut row = vec![label];
        row.extend(
            columns
                .iter()
                .map(|c| ops(c, p).map_or("–".into(), thousands)),
        );
        let on_vs_ts = ratios
            .iter()
            .find(|r| r["numerator"] == AB_ON && r["denominator"] == TS_ON && r["pattern"] == p);
        row.push(median(on_vs_ts.and_then(|r| r.get("ratio"))).map_or("–".into(), ratio));
        t.row(row);
    }
    Ok(t.render())
}

/// A goal's measured value: ratios and shares below 10 with two decimals, µs likewise.
fn compact_measure(x: f64) -> String {
    if x.abs() < 10.0 {
        format!("{x:.2}")
    } else {
        compact(x)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc() -> Value {
        json!({
            "server": "embedded autobatch-broker",
            "machine": {"cores": 2, "cpu_model": "test", "kernel": "linux", "date_utc": "now",
                        "versions": {"autobatch": "0.1.0"}},
            "plan": {"adds_per_cell": 1000, "warmup_adds": 50, "reps": 3},
            "summary": [
                {"contender": "autobatch-off", "label": "batching off", "pattern": "seq",
                 "ops_per_sec": {"median": 4000.0, "min": 3900.0, "max": 4100.0, "n": 3}},
                {"contender": "autobatch-on", "label": "batching on", "pattern": "seq",
                 "ops_per_sec": {"median": 4100.0, "min": 4000.0, "max": 4200.0, "n": 3},
                 "client_cpu_us_per_add": {"median": 1.5, "min": 1.0, "max": 2.0, "n": 3}}
            ],
            "ratios": [{"numerator": "autobatch-on", "denominator": "autobatch-off",
                        "pattern": "seq", "ratio": {"median": 1.02, "min": 0.99, "max": 1.05, "n": 3}}],
            "targets": [{"name": "sequential: on ÷ off ≥ 0.98", "measured": 1.02, "goal": 0.98,
                         "met": true, "detail": null}]
        })
    }

    #[test]
    fn renders_every_section_from_the_document() {
        let md = markdown(&doc()).unwrap();
        assert!(md.contains("| batching on "), "{md}");
        assert!(md.contains("4.1k (4.0k–4.2k)"), "{md}");
        assert!(md.contains("1.50 (1.00–2.00)"), "{md}");
        assert!(md.contains("batching on ÷ batching off"), "{md}");
        assert!(
            md.contains("- met sequential: on ÷ off ≥ 0.98: measured 1.02"),
            "{md}"
        );
    }

    #[test]
    fn the_headline_needs_every_client_of_a_compare_run() {
        let e = headline(&doc()).unwrap_err();
        assert!(e.to_string().contains("`ts-off`"), "{e}");
        let mut d = doc();
        let summary = d["summary"].as_array_mut().unwrap();
        for id in ["ts-off", "ts-on", "official"] {
            summary.push(json!({"contender": id, "label": id, "pattern": "seq",
                                "ops_per_sec": {"median": 3000.0, "n": 1}}));
        }
        d["ratios"]
            .as_array_mut()
            .unwrap()
            .push(json!({"numerator": "autobatch-on",
            "denominator": "ts-on", "pattern": "seq", "ratio": {"median": 1.37, "n": 1}}));
        let md = headline(&d).unwrap();
        assert!(md.contains("| Sequential `await` |"), "{md}");
        assert!(md.contains("4,100"), "{md}");
        assert!(md.contains("1.37x"), "{md}");
    }

    #[test]
    fn a_document_without_a_summary_is_refused_by_name() {
        let mut d = doc();
        d.as_object_mut().unwrap().remove("summary");
        let e = markdown(&d).unwrap_err();
        assert!(e.to_string().contains("`summary`"), "{e}");
    }
}
