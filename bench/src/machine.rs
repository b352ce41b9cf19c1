//! What the numbers were measured on: machine, date and versions.

use std::time::{SystemTime, UNIX_EPOCH};

/// The machine, the date and the versions of everything measured.
#[derive(Debug, Clone)]
pub struct MachineInfo {
    /// `std::thread::available_parallelism()`.
    pub cores: usize,
    /// `model name` from `/proc/cpuinfo` (or "unknown").
    pub cpu_model: String,
    /// Kernel release from `/proc/sys/kernel/osrelease` (or the target OS name).
    pub kernel: String,
    /// When the run started, UTC, ISO 8601.
    pub date_utc: String,
    /// `(component, version)` pairs.
    pub versions: Vec<(String, String)>,
}

impl MachineInfo {
    /// Collect the information for this process.
    pub fn collect() -> MachineInfo {
        let cores = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_owned())
            })
            .unwrap_or_else(|| "unknown".into());
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| format!("{} {}", std::env::consts::OS, s.trim()))
            .unwrap_or_else(|_| std::env::consts::OS.into());
        let secs = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        MachineInfo {
            cores,
            cpu_model,
            kernel,
            date_utc: iso8601_utc(secs),
            versions: vec![
                ("autobatch".into(), env!("CARGO_PKG_VERSION").into()),
                ("rustc".into(), env!("AUTOBATCH_BENCH_RUSTC").into()),
                (
                    "bunqueue".into(),
                    autobatch_tests::install::BUNQUEUE_VERSION.into(),
                ),
                ("bun".into(), autobatch_tests::install::BUN_VERSION.into()),
                (
                    "bunqueue-client (Rust)".into(),
                    crate::official::VERSION.into(),
                ),
            ],
        }
    }

    /// One line: `2 cores, AMD EPYC, linux 6.1 | 2025-01-01T00:00:00Z`.
    pub fn one_line(&self) -> String {
        format!(
            "{} cores ({}), {} | {}",
            self.cores, self.cpu_model, self.kernel, self.date_utc
        )
    }

    /// `autobatch 0.1.0, rustc 1.x, ...`.
    pub fn versions_line(&self) -> String {
        self.versions
            .iter()
            .map(|(k, v)| {
                if v.starts_with(k.as_str()) {
                    v.clone()
                } else {
                    format!("{k} {v}")
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Read back from [`MachineInfo::to_json`]'s form; `None` when a field is missing.
    pub fn from_json(v: &serde_json::Value) -> Option<MachineInfo> {
        let text = |k: &str| v.get(k)?.as_str().map(str::to_owned);
        Some(MachineInfo {
            cores: usize::try_from(v.get("cores")?.as_u64()?).ok()?,
            cpu_model: text("cpu_model")?,
            kernel: text("kernel")?,
            date_utc: text("date_utc")?,
            versions: v
                .get("versions")?
                .as_object()?
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("?").to_owned()))
                .collect(),
        })
    }

    /// As JSON.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "cores": self.cores,
            "cpu_model": self.cpu_model,
            "kernel": self.kernel,
            "date_utc": self.date_utc,
            "versions": self
                .versions
                .iter()
                .map(|(k, v)| (k.clone(), serde_json::Value::from(v.as_str())))
                .collect::<serde_json::Map<_, _>>(),
        })
    }
}

/// Seconds since the Unix epoch as `YYYY-MM-DDTHH:MM:SSZ` (proleptic Gregorian, UTC).
pub fn iso8601_utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::iso8601_utc;

    #[test]
    fn dates() {
        assert_eq!(iso8601_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(iso8601_utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(iso8601_utc(1_735_689_599), "2024-12-31T23:59:59Z");
    }
}
