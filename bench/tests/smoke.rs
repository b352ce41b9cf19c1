//! CI smoke: the binary's `--smoke` run end to end against the embedded broker (no bun
//! needed), checking that it measures every cell and writes readable JSON and SVG. No
//! performance thresholds: the numbers of a few hundred adds mean nothing.

use std::process::Command;

/// What one `--smoke` run printed and wrote.
struct Run {
    stdout: String,
    stderr: String,
    /// The `--json` document.
    doc: serde_json::Value,
    /// The `--svg` chart.
    chart: String,
}

/// Runs `autobatch-bench --smoke` with `args`, writing its JSON and SVG into a directory of
/// its own (`name`, removed afterwards); fails the test if the run does.
fn smoke(name: &str, args: &[&str]) -> Run {
    let dir = std::env::temp_dir().join(format!("autobatch-bench-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (json, svg) = (dir.join("out.json"), dir.join("out.svg"));
    let out = Command::new(env!("CARGO_BIN_EXE_autobatch-bench"))
        .arg("--smoke")
        .args(args)
        .arg("--json")
        .arg(&json)
        .arg("--svg")
        .arg(&svg)
        .output()
        .expect("run autobatch-bench");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "exit {}\n{stdout}\n{stderr}",
        out.status
    );
    let run = Run {
        doc: serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap(),
        chart: std::fs::read_to_string(&svg).unwrap(),
        stdout,
        stderr,
    };
    let _ = std::fs::remove_dir_all(&dir);
    run
}

#[test]
fn smoke_run_measures_every_cell_and_writes_json_and_svg() {
    let Run {
        stdout,
        stderr,
        doc,
        chart,
    } = smoke("smoke", &[]);
    for row in [
        "Sequential `await`",
        "join_all(10)",
        "join_all(50)",
        "join_all(100)",
    ] {
        assert!(stdout.contains(row), "no {row} row in:\n{stdout}");
    }
    assert!(
        stderr.contains("[1/"),
        "no progress line on stderr:\n{stderr}"
    );

    let samples = doc["samples"].as_array().unwrap();
    // 4 patterns x batching off/on, the two sequential floors, and the 3 concurrent cells of
    // the ceiling, the wave ceiling and the client floor (the unbatched floor runs beside
    // waves of 1,000 and more only).
    assert_eq!(samples.len(), 19, "{samples:#?}");
    for s in samples {
        assert_eq!(s["adds"], 300);
        assert!(s["ops_per_sec"].as_f64().unwrap() > 0.0, "{s}");
        // The embedded broker's threads are in this process: every cell has its CPU time.
        assert!(s["server_cpu_us_per_add"].as_f64().unwrap() > 0.0, "{s}");
        if s["contender"] == "client-floor" {
            // One thread, its own CPU time; every reply decoded into 50 ids (6 frames).
            assert!(s["client_cpu_us_per_add"].as_f64().unwrap() > 0.0, "{s}");
            assert_eq!(s["frames_sent"], 6, "{s}");
        }
        if s["contender"].as_str().unwrap().starts_with("autobatch-") {
            assert!(s["client_cpu_us_per_add"].as_f64().unwrap() > 0.0, "{s}");
            let (p50, p99) = (s["latency_p50_us"].as_f64(), s["latency_p99_us"].as_f64());
            assert!(p50.unwrap() > 0.0 && p50 <= p99, "{s}");
        }
    }
    assert_eq!(
        samples
            .iter()
            .filter(|s| s["contender"] == "ceiling")
            .count(),
        3,
        "the ceiling runs beside each concurrent cell"
    );
    assert_eq!(
        samples
            .iter()
            .filter(|s| s["contender"] == "ceiling-waves")
            .count(),
        3,
        "the wave ceiling runs beside each concurrent cell"
    );
    assert_eq!(
        samples
            .iter()
            .filter(|s| s["contender"] == "client-floor")
            .count(),
        3,
        "the client floor runs beside each concurrent cell"
    );
    assert!(
        doc["targets"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["goal_kind"] == "max_ratio"),
        "the client CPU target is judged against the client floor: {}",
        doc["targets"]
    );
    for table in [
        "What each add costs",
        "Share of the server's ceiling",
        "against the client floor",
        "Targets",
    ] {
        assert!(stdout.contains(table), "no {table:?} in:\n{stdout}");
    }
    let on_100 = samples
        .iter()
        .find(|s| s["contender"] == "autobatch-on" && s["pattern"] == "all100")
        .unwrap();
    assert!(
        on_100["frames_sent"].as_u64().unwrap() < 300,
        "batching on sent one frame per add: {on_100}"
    );
    assert!(doc["machine"]["cores"].as_u64().unwrap() >= 1);
    assert!(doc["machine"]["date_utc"].as_str().unwrap().ends_with('Z'));

    assert!(chart.starts_with("<svg") && chart.trim_end().ends_with("</svg>"));
    assert!(chart.contains("join_all(100)"));
}

#[test]
fn batching_off_in_large_waves_is_judged_against_the_unbatched_floor() {
    let Run { stdout, doc, .. } = smoke("unbatched", &["--patterns", "all1000"]);
    let floor = doc["samples"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["contender"] == "client-floor-push")
        .expect("the unbatched floor ran beside join_all(1000)");
    // One PUSH per add, each answered, on one thread whose CPU time is counted.
    assert_eq!(floor["frames_sent"], 300, "{floor}");
    assert!(floor["client_cpu_us_per_add"].as_f64().unwrap() > 0.0);
    let target = doc["targets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"].as_str().unwrap().contains("batching off"))
        .expect("a batching-off target");
    assert_eq!(target["goal_kind"], "max_ratio", "{target}");
    assert!(
        stdout.contains("against the unbatched client floor"),
        "{stdout}"
    );
}

#[test]
fn client_only_runs_nothing_but_autobatch() {
    let Run { doc, .. } = smoke(
        "client-only",
        &["--client-only", "--patterns", "seq,all100"],
    );
    let ids: Vec<&str> = doc["contenders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["autobatch-off", "autobatch-on"]);
    assert_eq!(doc["samples"].as_array().unwrap().len(), 4);
}
