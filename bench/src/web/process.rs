//! The web process of one cell: the `web_orders` example or Bun's `bench/web/orders.ts`,
//! started on a free port, read from `/proc` while it serves, stopped with SIGTERM.

use std::io::{self, BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::cpu::{self, Threads};

/// How long a web process may take to print its address, and to exit after SIGTERM.
const PATIENCE: Duration = Duration::from_secs(60);

/// CPU time and context switches of a process so far.
#[derive(Debug, Clone, Copy, Default)]
pub struct Usage {
    /// Nanoseconds on a CPU, every thread (`schedstat`).
    pub cpu: Option<Duration>,
    /// Voluntary plus involuntary context switches, every thread (`status`).
    pub switches: u64,
}

/// A running web process.
pub struct WebProcess {
    child: Child,
    addr: SocketAddr,
}

impl WebProcess {
    /// Runs `cmd` (which listens on a free port and prints `listening on ADDR`) and waits for
    /// the address.
    pub fn start(mut cmd: Command) -> io::Result<WebProcess> {
        let what = format!("{cmd:?}");
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let stdout = child.stdout.take().expect("piped");
        let (tx, rx) = mpsc::channel();
        // Reads the address, then keeps draining stdout so the process never blocks on it.
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(addr) = line.strip_prefix("listening on ") {
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(addr.trim().to_owned());
                    }
                }
            }
        });
        let addr = match rx.recv_timeout(PATIENCE) {
            Ok(a) => a,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(io::Error::other(format!(
                    "{what} printed no `listening on ADDR`"
                )));
            }
        };
        let addr = addr
            .parse()
            .map_err(|_| io::Error::other(format!("{what} listens on {addr:?}?")))?;
        Ok(WebProcess { child, addr })
    }

    /// Where it serves.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What it has used so far.
    pub fn usage(&self) -> Usage {
        let pid = self.pid();
        Usage {
            cpu: Threads::Processes(vec![pid]).now(),
            switches: switches(pid),
        }
    }

    /// SIGTERM, then waits for a clean exit: the web process finishes its requests and
    /// closes its client, so every add it answered is on the server afterwards.
    pub fn stop(mut self) -> io::Result<()> {
        let pid = self.pid().to_string();
        Command::new("kill").args(["-TERM", &pid]).status()?;
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait()? {
                return if status.success() {
                    Ok(())
                } else {
                    Err(io::Error::other(format!(
                        "the web process exited with {status} after SIGTERM"
                    )))
                };
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return Err(io::Error::other(
                    "the web process did not exit within 60 s of SIGTERM",
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for WebProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The difference between two readings: CPU time and switches.
pub fn used(before: Usage, after: Usage) -> (Option<Duration>, u64) {
    (
        cpu::delta(before.cpu, after.cpu),
        after.switches.saturating_sub(before.switches),
    )
}

/// Context switches of every thread of `pid` (threads that exited are not counted).
fn switches(pid: u32) -> u64 {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    dir.filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("status")).ok())
        .map(|s| parse_switches(&s))
        .sum()
}

fn parse_switches(status: &str) -> u64 {
    status
        .lines()
        .filter(|l| {
            l.starts_with("voluntary_ctxt_switches") || l.starts_with("nonvoluntary_ctxt_switches")
        })
        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum()
}

/// Builds `web_orders` in release (a no-op when it is fresh) and returns its path.
pub fn build_example(root: &Path) -> io::Result<PathBuf> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    eprintln!("building the web_orders example (release) …");
    let status = Command::new(cargo)
        .current_dir(root)
        .args([
            "build",
            "--release",
            "--quiet",
            "-p",
            "autobatch-tokio",
            "--example",
            "web_orders",
        ])
        .status()?;
    if !status.success() {
        return Err(io::Error::other(
            "cargo build --release -p autobatch-tokio --example web_orders failed",
        ));
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    Ok(target.join("release").join("examples").join("web_orders"))
}

/// Points `bench/web/node_modules` at the bunqueue install, so `orders.ts` resolves
/// `bunqueue/client` (bun looks upwards from the script; NODE_PATH is ignored for ESM).
pub fn link_node_modules(web_dir: &Path, node_modules: &Path) -> io::Result<()> {
    let link = web_dir.join("node_modules");
    if std::fs::read_link(&link).ok().as_deref() == Some(node_modules) {
        return Ok(());
    }
    if let Ok(meta) = std::fs::symlink_metadata(&link) {
        if !meta.file_type().is_symlink() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{} exists and is not a symlink", link.display()),
            ));
        }
        std::fs::remove_file(&link)?;
    }
    std::os::unix::fs::symlink(node_modules, &link)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn switches_sum_both_kinds() {
        let status = "Name:\tx\nvoluntary_ctxt_switches:\t12\nnonvoluntary_ctxt_switches:\t3\n";
        assert_eq!(parse_switches(status), 15);
        assert_eq!(parse_switches(""), 0);
    }
}
