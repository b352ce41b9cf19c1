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

/// The whole report.
pub fn render(run: &WebRun, machine: &MachineInfo) -> String {
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
    for &c in &plan.connections {
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
        out.push_str(&format!(
            "\n{c} connection{}:\n",
            if c == 1 { "" } else { "s" }
        ));
        out.push_str(&t.render());
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
        out.push_str(&format!(
            "  the add's own web CPU, batching on, {c} connections: {} µs/request (goal ≤ 2): {}\n",
            fmt(x, 1),
            verdict(x, |x| x <= 2.0)
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
    for (c, goal) in [(10, 1.1), (100, 1.2), (1000, 1.2)] {
        let x = paired(run, (AXUM, Mode::On), (Stack::Bun, Mode::On), c, rps);
        let base = paired(run, (AXUM, Mode::NoAdd), (Stack::Bun, Mode::NoAdd), c, rps);
        out.push_str(&format!(
            "  axum + autobatch ÷ Bun + TS client, both batching, req/s, {c} connections: {} \
             (goal ≥ {goal:.1}; without the add {}): {}\n",
            fmt(x, 2),
            fmt(base, 2),
            verdict(x, |x| x >= goal)
        ));
    }
    let frames = median(run, AXUM, Mode::On, 100, WebCell::frames_per_request);
    out.push_str(&format!(
        "  add frames per request, batching on, 100 connections: {} (goal ≤ 0.05): {}\n",
        fmt(frames, 3),
        verdict(frames, |x| x <= 0.05)
    ));
    let lost: u64 = run.cells.iter().map(WebCell::lost).sum();
    let accepted: u64 = run.cells.iter().map(|c| c.accepted).sum();
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
