use std::time::Duration;

use super::cells::client_cpu_ratio;
use super::goals::*;
use super::*;
use crate::ids::*;
use crate::run::{Measurements, Sample};
use crate::workload::Pattern;

fn info(patterns: Vec<Pattern>) -> RunInfo {
    RunInfo {
        machine: MachineInfo {
            cores: 2,
            cpu_model: "test".into(),
            kernel: "test".into(),
            date_utc: "2026-01-01T00:00:00Z".into(),
            versions: Vec::new(),
        },
        server: "none".into(),
        runtime: "tokio".into(),
        runtimes: vec!["tokio".into()],
        plan: Plan {
            patterns,
            adds: 1000,
            warmup: 0,
            reps: 3,
            queue_prefix: "t".into(),
        },
        compare: false,
        tls: None,
        smoke: false,
    }
}

/// A cell of 1,000 adds that cost the client `us_per_add` µs each (`None`: no reading).
fn sample(id: &str, pattern: Pattern, rep: usize, us_per_add: Option<f64>) -> Sample {
    Sample {
        contender: id.into(),
        pattern,
        rep,
        adds: 1000,
        elapsed: Duration::from_millis(10),
        frames: None,
        client_cpu: us_per_add.map(|us| Duration::from_secs_f64(us * 1000.0 / 1e6)),
        server_cpu: None,
        warmup: 0,
        latency: None,
    }
}

fn measurements(samples: Vec<Sample>) -> Measurements {
    let mut contenders: Vec<(String, String)> = Vec::new();
    for s in &samples {
        if !contenders.iter().any(|(id, _)| *id == s.contender) {
            contenders.push((s.contender.clone(), s.contender.clone()));
        }
    }
    Measurements {
        contenders,
        samples,
        wall: Duration::from_secs(1),
    }
}

fn target(goal: Goal, measured: f64) -> Target {
    Target {
        name: "t".into(),
        measured,
        goal,
        detail: None,
    }
}

const ALL100: Pattern = Pattern::All(100);

#[test]
fn each_goal_is_met_on_its_own_side() {
    assert!(target(Goal::MaxRatio(2.0), 2.0).met());
    assert!(target(Goal::MaxRatio(2.0), 1.3).met());
    assert!(!target(Goal::MaxRatio(2.0), 2.01).met());
    assert!(target(Goal::MinRatio(1.5), 1.5).met());
    assert!(!target(Goal::MinRatio(1.5), 1.49).met());
    assert!(target(Goal::MinShare(0.9), 0.95).met());
    assert!(target(Goal::MaxMicros(0.9), 0.9).met());
    assert!(!target(Goal::MaxMicros(0.9), 0.91).met());
    assert_eq!(target(Goal::MaxRatio(2.0), 3.0).goal_value(), 2.0);
    assert_eq!(Goal::MaxRatio(2.0).kind(), "max_ratio");
}

#[test]
fn a_max_ratio_reads_as_a_ratio_with_its_detail() {
    let mut t = target(Goal::MaxRatio(2.0), 2.5);
    assert_eq!(t.describe(), "2.5x (goal ≤ 2.0x)");
    t.detail = Some("4.00 µs ÷ 1.60 µs".into());
    assert_eq!(t.describe(), "2.5x (goal ≤ 2.0x); 4.00 µs ÷ 1.60 µs");
}

#[test]
fn a_value_that_would_print_as_its_goal_gets_more_digits() {
    let t = target(Goal::MaxRatio(2.0), 2.0418);
    assert!(!t.met());
    assert_eq!(t.describe(), "2.042x (goal ≤ 2.0x)");
    assert_eq!(
        target(Goal::MinRatio(0.98), 0.9789).describe(),
        "0.979x (goal ≥ 0.98x)"
    );
    assert_eq!(
        target(Goal::MinShare(0.9), 0.8962).describe(),
        "89.6% (goal ≥ 90%)"
    );
    assert_eq!(
        target(Goal::MinShare(0.9), 0.94).describe(),
        "94% (goal ≥ 90%)"
    );
    assert_eq!(
        target(Goal::MaxMicros(0.9), 0.9001).describe(),
        "0.9001 µs (goal ≤ 0.90 µs)"
    );
}

#[test]
fn the_client_cpu_target_is_the_median_of_paired_ratios_to_the_client_floor() {
    // Per rep: 3/1, 4/2, 10/2 → 3, 2, 5: the median is 3, while the ratio of the
    // medians would be 4/2 = 2 (met): the pairing matters.
    let m = measurements(vec![
        sample(AB_ON, ALL100, 0, Some(3.0)),
        sample(CLIENT_FLOOR, ALL100, 0, Some(1.0)),
        sample(AB_ON, ALL100, 1, Some(4.0)),
        sample(CLIENT_FLOOR, ALL100, 1, Some(2.0)),
        sample(AB_ON, ALL100, 2, Some(10.0)),
        sample(CLIENT_FLOOR, ALL100, 2, Some(2.0)),
    ]);
    let targets = targets(&info(vec![ALL100]), &m);
    let cpu: Vec<&Target> = targets
        .iter()
        .filter(|t| t.name.contains("client CPU"))
        .collect();
    assert_eq!(cpu.len(), 1, "{targets:?}");
    let t = cpu[0];
    assert_eq!(t.goal, Goal::MaxRatio(CLIENT_CPU_FLOOR_RATIO_GOAL));
    assert!((t.measured - 3.0).abs() < 1e-9, "{}", t.measured);
    assert!(!t.met());
    let detail = t.detail.as_deref().unwrap_or_default();
    assert!(
        detail.contains("4.00 µs") && detail.contains("2.00 µs"),
        "{detail}"
    );
    // The absolute µs stay in the printed line.
    assert!(render(&info(vec![ALL100]), &m).contains("4.00 µs"));
}

#[test]
fn without_a_client_floor_the_issues_fixed_figure_is_reported() {
    let m = measurements(vec![sample(AB_ON, Pattern::All(1000), 0, Some(0.5))]);
    let targets = targets(&info(vec![Pattern::All(1000)]), &m);
    let t = targets
        .iter()
        .find(|t| t.name.contains("client CPU"))
        .expect("a client CPU target");
    assert_eq!(t.goal, Goal::MaxMicros(CLIENT_CPU_GOAL_US));
    assert!(t.met());
}

#[test]
fn small_waves_have_no_client_cpu_target() {
    let m = measurements(vec![
        sample(AB_ON, Pattern::All(50), 0, Some(3.0)),
        sample(CLIENT_FLOOR, Pattern::All(50), 0, Some(1.0)),
    ]);
    assert!(targets(&info(vec![Pattern::All(50)]), &m)
        .iter()
        .all(|t| !t.name.contains("client CPU")));
}

#[test]
fn other_runtimes_are_judged_by_their_worst_cell_against_tokio() {
    let mut i = info(vec![Pattern::Seq, ALL100]);
    i.runtimes = vec![
        "tokio".into(),
        "smol-local".into(),
        "tokio-multi-thread".into(),
    ];
    let smol = format!("{AB_ON}:smol-local");
    let multi = format!("{AB_ON}:tokio-multi-thread");
    // (contender, pattern, elapsed ms for 1,000 adds, client µs per add, frames)
    let cells: [(&str, Pattern, u64, f64, u64); 6] = [
        (AB_ON, Pattern::Seq, 10, 10.0, 1000),
        (&smol, Pattern::Seq, 12, 12.0, 1000),
        (&multi, Pattern::Seq, 10, 20.0, 1000),
        (AB_ON, ALL100, 10, 1.0, 20),
        (&smol, ALL100, 10, 1.0, 25),
        (&multi, ALL100, 10, 1.5, 20),
    ];
    let m = measurements(
        cells
            .iter()
            .map(|&(id, p, ms, us, frames)| Sample {
                elapsed: Duration::from_millis(ms),
                frames: Some(frames),
                ..sample(id, p, 0, Some(us))
            })
            .collect(),
    );
    let all = targets(&i, &m);
    let goal = |rt: &str, what: &str| {
        all.iter()
            .find(|t| t.name.starts_with(&format!("{rt}: {what}")))
            .unwrap_or_else(|| panic!("a {what} target for {rt}: {all:?}"))
    };
    // adds/s: the lowest cell, against 0.95x, naming the cells that batched differently.
    let smol_rate = goal("smol-local", "adds/s");
    assert!(
        (smol_rate.measured - 10.0 / 12.0).abs() < 1e-9,
        "{smol_rate:?}"
    );
    assert_eq!(smol_rate.goal, Goal::MinRatio(0.95));
    assert!(!smol_rate.met());
    let detail = smol_rate.detail.as_deref().unwrap();
    assert!(detail.contains("lowest at Sequential"), "{detail}");
    assert!(detail.contains("join_all(100) 40.0 vs 50.0"), "{detail}");
    let multi_rate = goal("tokio-multi-thread", "adds/s");
    assert!((multi_rate.measured - 1.0).abs() < 1e-9);
    assert!(multi_rate.met());
    // Client CPU per add: the highest cell, sequential included, against 1.1x.
    let multi_cpu = goal("tokio-multi-thread", "client CPU");
    assert!((multi_cpu.measured - 2.0).abs() < 1e-9, "{multi_cpu:?}");
    assert_eq!(multi_cpu.goal, Goal::MaxRatio(1.1));
    assert!(multi_cpu.detail.as_deref().unwrap().contains("Sequential"));
    let smol_cpu = goal("smol-local", "client CPU");
    assert!((smol_cpu.measured - 1.2).abs() < 1e-9, "{smol_cpu:?}");
    assert_eq!(
        all.iter()
            .filter(|t| t.name.contains("tokio current_thread"))
            .count(),
        4,
        "two goals for each runtime beside tokio's: {all:?}"
    );
    // Without tokio current_thread first there is nothing to hold them against.
    i.runtimes = vec!["smol-local".into(), "tokio".into()];
    assert!(targets(&i, &m)
        .iter()
        .all(|t| !t.name.contains("tokio current_thread")));
}

#[test]
fn batching_off_is_judged_against_the_unbatched_floor_of_the_same_run() {
    const ALL5000: Pattern = Pattern::All(5000);
    let m = measurements(vec![
        sample(AB_OFF, ALL5000, 0, Some(15.0)),
        sample(CLIENT_FLOOR_PUSH, ALL5000, 0, Some(10.0)),
        sample(AB_OFF, ALL5000, 1, Some(30.0)),
        sample(CLIENT_FLOOR_PUSH, ALL5000, 1, Some(10.0)),
        sample(AB_OFF, ALL5000, 2, Some(12.0)),
        sample(CLIENT_FLOOR_PUSH, ALL5000, 2, Some(10.0)),
        // The batched floor is far cheaper: batching off must not be held against it.
        sample(CLIENT_FLOOR, ALL5000, 0, Some(1.0)),
    ]);
    let targets = targets(&info(vec![ALL5000]), &m);
    let off: Vec<&Target> = targets
        .iter()
        .filter(|t| t.name.contains("batching off"))
        .collect();
    assert_eq!(off.len(), 1, "{targets:?}");
    let t = off[0];
    assert_eq!(t.goal, Goal::MaxRatio(CLIENT_CPU_FLOOR_RATIO_GOAL));
    assert!((t.measured - 1.5).abs() < 1e-9, "median of 1.5x, 3x, 1.2x");
    assert!(t.met());
    assert!(t.name.contains("unbatched client floor"), "{}", t.name);
}

#[test]
fn batching_off_without_its_floor_falls_back_to_the_issues_fixed_figure() {
    const ALL5000: Pattern = Pattern::All(5000);
    let m = measurements(vec![sample(AB_OFF, ALL5000, 0, Some(15.0))]);
    let all = targets(&info(vec![ALL5000]), &m);
    let t = all
        .iter()
        .find(|t| t.name.contains("batching off"))
        .expect("a batching-off target");
    assert_eq!(t.goal, Goal::MaxMicros(CLIENT_CPU_OFF_GOAL_US));
    assert!(!t.met());
    // Waves too small to keep the window full have none.
    let m = measurements(vec![sample(AB_OFF, ALL100, 0, Some(15.0))]);
    assert!(targets(&info(vec![ALL100]), &m)
        .iter()
        .all(|t| !t.name.contains("batching off")));
}

#[test]
fn cpu_ratios_pair_by_repetition_and_skip_missing_readings() {
    // Rep 1 of the floor has no reading: reps 0 and 2 pair, rep 1 is left out rather
    // than rep 1 of autobatch being divided by rep 2 of the floor.
    let m = measurements(vec![
        sample(AB_ON, ALL100, 0, Some(2.0)),
        sample(CLIENT_FLOOR, ALL100, 0, Some(1.0)),
        sample(AB_ON, ALL100, 1, Some(100.0)),
        sample(CLIENT_FLOOR, ALL100, 1, None),
        sample(AB_ON, ALL100, 2, Some(6.0)),
        sample(CLIENT_FLOOR, ALL100, 2, Some(2.0)),
    ]);
    let pairs = m.paired_of(AB_ON, CLIENT_FLOOR, ALL100, Sample::client_us_per_add);
    assert_eq!(pairs.len(), 2);
    let r = client_cpu_ratio(&m, AB_ON, CLIENT_FLOOR, ALL100).unwrap();
    assert_eq!(r.n, 2);
    assert!((r.median - 2.5).abs() < 1e-9, "{}", r.median);
    assert!(client_cpu_ratio(&m, AB_ON, CLIENT_FLOOR, Pattern::Seq).is_none());
}

#[test]
fn the_json_carries_the_client_floor_figures() {
    let m = measurements(vec![
        sample(AB_ON, ALL100, 0, Some(3.0)),
        sample(CLIENT_FLOOR, ALL100, 0, Some(1.5)),
    ]);
    let doc = to_json(&info(vec![ALL100]), &m);
    let rows = doc["client_cpu_vs_client_floor"].as_array().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["contender"], AB_ON);
    assert!((rows[0]["ratio"]["median"].as_f64().unwrap() - 2.0).abs() < 1e-9);
    assert!(
        (rows[0]["client_floor_cpu_us_per_add"]["median"]
            .as_f64()
            .unwrap()
            - 1.5)
            .abs()
            < 1e-9
    );
    let target = doc["targets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["goal_kind"] == "max_ratio")
        .expect("the client CPU target");
    assert_eq!(target["goal"], 2.0);
    assert_eq!(target["met"], true);
    assert!(target["detail"].as_str().unwrap().contains("1.50 µs"));
}
