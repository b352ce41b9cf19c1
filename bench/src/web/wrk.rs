//! Driving `wrk` (the OS package; `scripts/web-deps.sh` installs it) with `bench/web/post.lua`
//! and reading the JSON line its `done` hook prints.

use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// What one wrk run reports (latencies in microseconds, as wrk records them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize, Serialize)]
pub struct WrkResult {
    /// Responses received (any status).
    pub requests: u64,
    /// How long wrk ran.
    pub duration_us: u64,
    /// Connections that could not be opened.
    pub connect_errors: u64,
    /// Reads that failed (a connection closed under a request).
    pub read_errors: u64,
    /// Writes that failed.
    pub write_errors: u64,
    /// Responses with a status above 399.
    pub status_errors: u64,
    /// Requests not answered within wrk's `--timeout`.
    pub timeouts: u64,
    /// Median latency.
    pub p50_us: u64,
    /// 90th percentile.
    pub p90_us: u64,
    /// 99th percentile.
    pub p99_us: u64,
    /// The slowest response.
    pub max_us: u64,
}

impl WrkResult {
    /// Responses below 400: the endpoint answers only 202 or an error, so these are its 202s.
    pub fn accepted(&self) -> u64 {
        self.requests.saturating_sub(self.status_errors)
    }

    /// Everything that was not a clean 2xx.
    pub fn failures(&self) -> u64 {
        self.status_errors
            + self.connect_errors
            + self.read_errors
            + self.write_errors
            + self.timeouts
    }

    /// Responses per second.
    pub fn per_sec(&self) -> f64 {
        self.requests as f64 / (self.duration_us.max(1) as f64 / 1e6)
    }
}

/// Runs wrk against `POST http://addr/orders` with `connections` keep-alive connections on one
/// wrk thread for `duration` (whole seconds, at least one).
pub fn run(
    script: &Path,
    addr: SocketAddr,
    connections: usize,
    duration: Duration,
) -> io::Result<WrkResult> {
    let secs = duration.as_secs().max(1);
    let out = Command::new("wrk")
        .args(["-t", "1", "-c", &connections.to_string()])
        .args(["-d", &format!("{secs}s"), "--timeout", "30s", "-s"])
        .arg(script)
        .arg(format!("http://{addr}/orders"))
        .output()
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot run wrk ({e}); install it with scripts/web-deps.sh"),
            )
        })?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "wrk failed ({}): {}{}",
            out.status,
            stdout,
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    parse(&stdout)
}

/// The JSON line among wrk's output.
fn parse(stdout: &str) -> io::Result<WrkResult> {
    stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .and_then(|l| serde_json::from_str(l).ok())
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("wrk printed no result line:\n{stdout}"),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_done_line_is_read_after_wrks_own_report() {
        let out = "Running 1s test @ http://127.0.0.1:1/orders\n  1 threads\n\
                   {\"requests\":10,\"duration_us\":1000000,\"connect_errors\":0,\"read_errors\":0,\
                   \"write_errors\":0,\"status_errors\":2,\"timeouts\":0,\"p50_us\":100,\
                   \"p90_us\":200,\"p99_us\":300,\"max_us\":400}\n";
        let r = parse(out).unwrap();
        assert_eq!(r.accepted(), 8);
        assert_eq!(r.failures(), 2);
        assert_eq!(r.per_sec(), 10.0);
        assert!(parse("no json here").is_err());
    }
}
