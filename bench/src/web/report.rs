//! The `--web` report: one table per connection count, then the published goals, each judged
//! beside the no-add baseline of the same run.

use crate::machine::MachineInfo;
use crate::stats::Summary;
use crate::table::{thousands, Align, Table};

use super::model::{Mode, Stack, WebCell, WebRun};

/// The median over repetitions of `f` for one cell.
fn median(
    run: &WebRun,
    s: Stack,
    m: Mode,
    c: usize,
    f: impl Fn(&WebCell) -> Option<f64>,
) -> Option<f64> {
    let xs: Vec<f64> = cells(run, s, m, c).filter_map(f).collect();
    Summary::of(&xs).map(|s| s.median)
}

fn cells(run: &WebRun, s: Stack, m: Mode, c: usize) -> impl Iterator<Item = &WebCell> {
    run.cells
        .iter()
        .filter(move |x| x.stack == s && x.mode == m && x.connections == c)
}

/// The median over repetitions of `f(a) / f(b)`, paired by repetition.
fn paired(
    run: &WebRun,
    a: (Stack, Mode),
    b: (Stack, Mode),
    c: usize,
    f: impl Fn(&WebCell) -> Option<f64>,
) -> Option<f64> {
    let xs: Vec<f64> = cells(run, a.0, a.1, c)
        .filter_map(|x| {
            let y = cells(run, b.0, b.1, c).find(|y| y.rep == x.rep)?;
            Some(f(x)? / f(y)?)
        })
        .collect();
    Summary::of(&xs).map(|s| s.median)
}

/// The add's own cost in the web process: CPU per request minus the no-add baseline's.
pub fn add_cost_us(run: &WebRun, s: Stack, m: Mode, c: usize) -> Option<f64> {
    let xs: Vec<f64> = cells(run, s, m, c)
        .filter_map(|x| {
            let base = cells(run, s, Mode::NoAdd, c).find(|y| y.rep == x.rep)?;
            Some(x.web_us()? - base.web_us()?)
        })
        .collect();
    Summary::of(&xs).map(|s| s.median)
}

fn rps(x: &WebCell) -> Option<f64> {
    Some(x.wrk.per_sec())
}

fn fmt(x: Option<f64>, digits: usize) -> String {
    x.map(|x| format!("{x:.digits$}"))
        .unwrap_or_else(|| "–".into())
}

fn ms(us: Option<f64>) -> String {
    us.map(|us| format!("{:.2}", us / 1000.0))
        .unwrap_or_else(|| "–".into())
}

/// The table of one connection count: a row per web server and handler measured.
fn table(run: &WebRun, c: usize) -> Table {
    let mut t = Table::new(&[
        ("Web server", Align::Left),
        ("handler", Align::Left),
        ("req/s", Align::Right),
        ("p50", Align::Right),
        ("p90", Align::Right),
        ("p99", Align::Right),
        ("max", Align::Right),
        ("frames", Align::Right),
        ("web µs", Align::Right),
        ("add µs", Align::Right),
        ("cs", Align::Right),
        ("server µs", Align::Right),
        ("202s / jobs", Align::Right),
    ]);
    for s in Stack::ALL {
        for m in Mode::ALL {
            if cells(run, s, m, c).next().is_none() {
                continue;
            }
            let med = |f: &dyn Fn(&WebCell) -> Option<f64>| median(run, s, m, c, f);
            let accepted: u64 = cells(run, s, m, c).map(|x| x.accepted).sum();
            let jobs: u64 = cells(run, s, m, c).map(|x| x.jobs).sum();
            t.row(vec![
                s.label().into(),
                m.label().into(),
                med(&rps).map(thousands).unwrap_or_else(|| "–".into()),
                ms(med(&|x| Some(x.wrk.p50_us as f64))),
                ms(med(&|x| Some(x.wrk.p90_us as f64))),
                ms(med(&|x| Some(x.wrk.p99_us as f64))),
                ms(med(&|x| Some(x.wrk.max_us as f64))),
                if m == Mode::NoAdd {
                    "–".into()
                } else {
                    fmt(med(&WebCell::frames_per_request), 3)
                },
                fmt(med(&WebCell::web_us), 1),
                if m == Mode::NoAdd {
                    "–".into()
                } else {
                    fmt(add_cost_us(run, s, m, c), 1)
                },
                fmt(med(&WebCell::switches_per_request), 2),
                fmt(med(&WebCell::server_us), 1),
                if m == Mode::NoAdd {
                    "–".into()
                } else {
                    format!("{accepted} / {jobs}")
                },
            ]);
        }
    }
    t
}

/// What was measured, on what, and how to read the columns.
fn header(run: &WebRun, machine: &MachineInfo) -> String {
    let plan = &run.plan;
    let mut out = format!(
        "autobatch-bench --web: POST /orders, one queue.add per request, under wrk\n\
         server:   {}\n\
         web:      the web_orders example (axum 0.8) on tokio multi_thread (2 workers) and \
         current_thread; Bun.serve with bunqueue's TS client {} (bench/web/orders.ts); each \
         with batching off, on, and without the add (the baseline)\n\
         load:     wrk, 1 thread, keep-alive connections; cells of {} s after {} s of warm-up, \
         {} rep{}, interleaved{}\n\
         machine:  {}\n\
         versions: {}\n",
        run.server,
        autobatch_tests::install::BUNQUEUE_VERSION,
        plan.duration.as_secs(),
        plan.warmup.as_secs(),
        plan.reps,
        if plan.reps == 1 { "" } else { "s" },
        if plan.smoke {
            " (SMOKE RUN: too short to mean anything)"
        } else {
            ""
        },
        machine.one_line(),
        machine.versions_line(),
    );
    out.push_str(
        "columns:  latencies in ms (wrk's p50/p90/p99 and the slowest response); frames = PUSH + \
         PUSHB frames per request, counted by a proxy on the wire; web/server µs = CPU time per \
         request; add µs = the web CPU beyond the no-add baseline; cs = the web process's \
         context switches per request; all medians over reps\n",
    );
    out
}

/// The whole report.
pub fn render(run: &WebRun, machine: &MachineInfo) -> String {
    let mut out = header(run, machine);
    for &c in &run.plan.connections {
        out.push_str(&format!(
            "\n{c} connection{}:\n",
            if c == 1 { "" } else { "s" }
        ));
        out.push_str(&table(run, c).render());
    }
    out.push('\n');
    out.push_str(&goals(run));
    out.push_str(&format!(
        "\n{} cells in {:.0} s wall time\n",
        run.cells.len(),
        run.wall_s
    ));
    out
}

/// The report in Markdown, for the docs (`--render` of the run's JSON document): the header
/// and the goals as text, a table per connection count.
pub fn markdown(run: &WebRun, machine: &MachineInfo) -> String {
    let mut out = format!("```text\n{}```\n", header(run, machine));
    for &c in &run.plan.connections {
        out.push_str(&format!(
            "\n{c} connection{}:\n\n",
            if c == 1 { "" } else { "s" }
        ));
        out.push_str(&table(run, c).render());
    }
    out.push_str(&format!(
        "\n```text\n{}\n{} cells in {:.0} s wall time\n```\n",
        goals(run),
        run.cells.len(),
        run.wall_s
    ));
    out
}

/// The README's headline: requests/s with batching on per connection count, for the example on
/// both tokio runtimes and for Bun with bunqueue's TS client, with batching's gain and the add
/// frames per request; then whether every 202 was a job.
pub fn headline(run: &WebRun) -> String {
    const MT: Stack = Stack::AxumMultiThread;
    const CT: Stack = Stack::AxumCurrentThread;
    let mut t = Table::new(&[
        ("Connections", Align::Left),
        ("req/s: autobatch, multi_thread", Align::Right),
        ("autobatch, current_thread", Align::Right),
        ("TS client on Bun", Align::Right),
        ("on ÷ off, multi_thread", Align::Right),
        ("add frames per request (autobatch · TS)", Align::Right),
    ]);
    let req_s = |s: Stack, c: usize| {
        median(run, s, Mode::On, c, rps)
            .map(thousands)
            .unwrap_or_else(|| "–".into())
    };
    for &c in run.plan.connections.iter().filter(|&&c| c >= 10) {
        let frames = |s: Stack| fmt(median(run, s, Mode::On, c, WebCell::frames_per_request), 3);
        t.row(vec![
            thousands(c as f64),
            req_s(MT, c),
            req_s(CT, c),
            req_s(Stack::Bun, c),
            fmt(paired(run, (MT, Mode::On), (MT, Mode::Off), c, rps), 2),
            format!("{} · {}", frames(MT), frames(Stack::Bun)),
        ]);
    }
    let (accepted, lost) = accepted_and_lost(run);
    format!(
        "{}\n{} of {} 202s were jobs on the server ({lost} lost) across {} cells; server: {}.\n",
        t.render(),
        thousands(accepted.saturating_sub(lost) as f64),
        thousands(accepted as f64),
        run.cells.len(),
        // The server's description without its address, which changes every run.
        run.server.split(" at ").next().unwrap_or(&run.server)
    )
}

/// 202s across the run, and how many of them are not jobs on the server.
fn accepted_and_lost(run: &WebRun) -> (u64, u64) {
    let accepted = run.cells.iter().map(|c| c.accepted).sum();
    let lost = run.cells.iter().map(WebCell::lost).sum();
    (accepted, lost)
}

/// A goal's verdict: `met` / `MISSED`, or nothing when it was not measured.
fn verdict(x: Option<f64>, ok: impl Fn(f64) -> bool) -> &'static str {
    match x {
        Some(x) if ok(x) => "met",
        Some(_) => "MISSED",
        None => "not measured",
    }
}

/// The published goals, judged on this run.
pub fn goals(run: &WebRun) -> String {
    const AXUM: Stack = Stack::AxumMultiThread;
    let mut out = String::from(
        "Published goals (axum on multi_thread, beside the no-add baseline of this run):\n",
    );
    for c in [10, 100, 1000] {
        let x = add_cost_us(run, AXUM, Mode::On, c);
        let ts = add_cost_us(run, Stack::Bun, Mode::On, c);
        out.push_str(&format!(
            "  the add's own web CPU, batching on, {c} connections: {} µs/request \
             (goal ≤ the TS client's in Bun, {} µs): {}\n",
            fmt(x, 1),
            fmt(ts, 1),
            verdict(x.zip(ts).map(|(x, ts)| x - ts), |d| d <= 0.0)
        ));
    }
    for (c, goal) in [(10, 1.0), (100, 1.4), (1000, 1.4)] {
        let x = paired(run, (AXUM, Mode::On), (AXUM, Mode::Off), c, rps);
        out.push_str(&format!(
            "  batching on ÷ off, req/s, {c} connections: {} (goal ≥ {goal:.1}): {}\n",
            fmt(x, 2),
            verdict(x, |x| x >= goal)
        ));
    }
    for c in [10, 100, 1000] {
        // The add may not cost axum the lead its web server has over Bun's without it.
        let x = paired(run, (AXUM, Mode::On), (Stack::Bun, Mode::On), c, rps);
        let base = paired(run, (AXUM, Mode::NoAdd), (Stack::Bun, Mode::NoAdd), c, rps);
        out.push_str(&format!(
            "  axum + autobatch ÷ Bun + TS client, both batching, req/s, {c} connections: {} \
             (goal ≥ the same without the add − 0.05, {} − 0.05): {}\n",
            fmt(x, 2),
            fmt(base, 2),
            verdict(x.zip(base).map(|(x, base)| x - base), |d| d >= -0.05)
        ));
    }
    let frames = median(run, AXUM, Mode::On, 100, WebCell::frames_per_request);
    out.push_str(&format!(
        "  add frames per request, batching on, 100 connections: {} (goal ≤ 0.05): {}\n",
        fmt(frames, 3),
        verdict(frames, |x| x <= 0.05)
    ));
    let (accepted, lost) = accepted_and_lost(run);
    out.push_str(&format!(
        "  every 202 is a job: {lost} lost of {accepted} across {} cells (goal 0): {}\n",
        run.cells.len(),
        if lost == 0 { "met" } else { "MISSED" }
    ));
    out.push_str(
        "  latency: p50/p90, wrk's p99 and the true maximum per cell above (wrk 4 does not \
         correct for coordinated omission)\n",
    );
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::web::model::WebPlan;
    use crate::web::wrk::WrkResult;

    /// A cell of 1 s that answered `requests` with `web_cpu_us` of web CPU.
    fn cell(stack: Stack, mode: Mode, requests: u64, web_cpu_us: f64) -> WebCell {
        WebCell {
            stack,
            mode,
            connections: 100,
            rep: 0,
            wrk: WrkResult {
                requests,
                duration_us: 1_000_000,
                ..WrkResult::default()
            },
            push_frames: 0,
            pushb_frames: if mode == Mode::NoAdd {
                0
            } else {
                requests / 40
            },
            web_cpu_us: Some(web_cpu_us),
            web_switches: 0,
            server_cpu_us: None,
            accepted: if mode == Mode::NoAdd { 0 } else { requests },
            jobs: if mode == Mode::NoAdd { 0 } else { requests },
            unanswered_bound: 100,
        }
    }

    fn run() -> WebRun {
        let mut plan = WebPlan::new(true, None);
        plan.connections = vec![100];
        plan.duration = Duration::from_secs(1);
        WebRun {
            plan,
            server: "bunqueue 2.9.5 at 127.0.0.1:1".into(),
            cells: vec![
                cell(Stack::AxumMultiThread, Mode::NoAdd, 10_000, 80_000.0),
                cell(Stack::AxumMultiThread, Mode::Off, 4_000, 52_000.0),
                cell(Stack::AxumMultiThread, Mode::On, 6_000, 66_000.0),
                cell(Stack::Bun, Mode::NoAdd, 10_000, 100_000.0),
                cell(Stack::Bun, Mode::On, 5_000, 70_000.0),
            ],
            wall_s: 4.0,
        }
    }

    #[test]
    fn a_run_read_back_from_its_json_renders_its_tables_and_goals() {
        let machine = MachineInfo {
            cores: 2,
            cpu_model: "test".into(),
            kernel: "linux".into(),
            date_utc: "2026-01-01T00:00:00Z".into(),
            versions: vec![("autobatch".into(), "0.1.0".into())],
        };
        let doc = serde_json::json!({ "mode": "web", "machine": machine.to_json(), "run": run() });
        let (back, machine) = crate::web::from_json(&doc).expect("a web document");
        let md = markdown(&back, &machine);
        // 6,000 req/s, 11 µs per request against the baseline's 8: the add costs 3 µs.
        assert!(
            md.contains("| axum + autobatch, multi_thread | batching on  |  6,000 |"),
            "{md}"
        );
        // Bun: 14 µs per request against its baseline's 10, so its add costs 4.
        assert!(
            md.contains(
                "batching on, 100 connections: 3.0 µs/request (goal ≤ the TS client's in Bun, \
                 4.0 µs): met"
            ),
            "{md}"
        );
        // 6,000 ÷ 5,000 with the add, 10,000 ÷ 10,000 without: 1.20 ≥ 1.00 − 0.05.
        assert!(
            md.contains(
                "100 connections: 1.20 (goal ≥ the same without the add − 0.05, 1.00 − 0.05): met"
            ),
            "{md}"
        );
        assert!(
            md.contains("batching on ÷ off, req/s, 100 connections: 1.50 (goal ≥ 1.4): met"),
            "{md}"
        );
        let head = headline(&back);
        assert!(head.contains("| 100 "), "{head}");
        assert!(head.contains("1.50"), "{head}");
        assert!(head.contains("0.025 · 0.025"), "{head}");
        assert!(
            head.contains("15,000 of 15,000 202s were jobs on the server (0 lost)"),
            "{head}"
        );
        assert!(head.ends_with("server: bunqueue 2.9.5.\n"), "{head}");
        let mut broken = doc.clone();
        broken["run"]["cells"][0]["stack"] = "nginx".into();
        let err = crate::web::from_json(&broken).unwrap_err();
        assert!(err.contains("`run`"), "{err}");
    }
}
