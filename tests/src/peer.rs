//! Running the TypeScript peers in `tests/peers` with the pinned bun and bunqueue's own client.
//!
//! # Module resolution
//!
//! The peers `import { Queue, Worker } from 'bunqueue/client'`. bun resolves a bare specifier
//! by walking up from the *importing file's* directory looking for `node_modules`; it ignores
//! `NODE_PATH` for ESM imports, and the working directory does not matter. When it finds
//! nothing, bun's auto-install silently fetches the package from the registry into its global
//! cache (`~/.bun/install/cache`) — a different install, a network dependency, and no error.
//!
//! So the harness
//! 1. makes `tests/peers/node_modules` a symlink to `<bunqueue dir>/node_modules` (created
//!    atomically, replaced when it points elsewhere; git-ignored by `tests/peers/.gitignore`),
//!    and
//! 2. runs `bun --no-install run <script>`, so a missing module is a loud
//!    `Cannot find module` error instead of a download.
//!
//! `import.meta.resolve('bunqueue/client')` then gives
//! `<bunqueue dir>/node_modules/bunqueue/dist/client/index.js` (bun's `"bun"` export condition).

use std::fs::File;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::install::{workspace_root, BunqueueInstall};
use crate::spawn::spawn_tied;

/// Default for [`TsPeer::timeout`].
pub const DEFAULT_PEER_TIMEOUT: Duration = Duration::from_secs(120);

/// The directory holding the peer scripts, `<workspace root>/tests/peers`.
pub fn peers_dir() -> PathBuf {
    workspace_root().join("tests").join("peers")
}

/// Make `tests/peers/node_modules` a symlink to the install's `node_modules` (see the module
/// docs). Idempotent and safe to call concurrently.
pub fn ensure_peer_node_modules(install: &BunqueueInstall) -> io::Result<()> {
    let link = peers_dir().join("node_modules");
    let target = &install.node_modules;
    if std::fs::read_link(&link).ok().as_deref() == Some(target.as_path()) {
        return Ok(());
    }
    if let Ok(meta) = std::fs::symlink_metadata(&link) {
        if !meta.file_type().is_symlink() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!(
                    "{} exists and is not a symlink; remove it so the peers resolve \
                     'bunqueue/client' from {}",
                    link.display(),
                    target.display()
                ),
            ));
        }
    }
    // Create under a unique name, then rename over the old link: atomic for concurrent tests.
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = peers_dir().join(format!(".node_modules.{}.{n}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(target, &tmp)?;
    std::fs::rename(&tmp, &link).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// A TypeScript script from `tests/peers`, run with the installed bun:
/// `bun --no-install run tests/peers/<script> args...` with the working directory
/// `tests/peers`.
///
/// ```no_run
/// # use autobatch_tests::TsPeer;
/// # let addr: std::net::SocketAddr = "127.0.0.1:6789".parse().unwrap();
/// let out = TsPeer::new("produce.ts")
///     .target(addr)
///     .options(&serde_json::json!({"queue": "q", "steps": [{"kind": "seq", "n": 10}]}))
///     .run()
///     .unwrap();
/// let summary = out.json().unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct TsPeer {
    script: String,
    args: Vec<String>,
    env: Vec<(String, String)>,
    timeout: Duration,
}

impl TsPeer {
    /// The script `tests/peers/<script>` (e.g. `"produce.ts"`).
    pub fn new(script: impl Into<String>) -> TsPeer {
        TsPeer {
            script: script.into(),
            args: Vec::new(),
            env: Vec::new(),
            timeout: DEFAULT_PEER_TIMEOUT,
        }
    }

    /// Append one argument.
    pub fn arg(mut self, arg: impl Into<String>) -> TsPeer {
        self.args.push(arg.into());
        self
    }

    /// Append arguments.
    pub fn args<I, S>(mut self, args: I) -> TsPeer
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Append `HOST PORT` (the first two arguments of every peer script).
    pub fn target(self, addr: SocketAddr) -> TsPeer {
        self.arg(addr.ip().to_string()).arg(addr.port().to_string())
    }

    /// Append a JSON document as one argument (the options of every peer script).
    pub fn options(self, opts: &serde_json::Value) -> TsPeer {
        self.arg(opts.to_string())
    }

    /// Set an environment variable for the script. (`BQ_TOKEN` and `BUNQUEUE_TOKEN`, which
    /// bunqueue's client would pick up, are removed unless set here.)
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> TsPeer {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Kill the script and fail if it runs longer than this (default
    /// [`DEFAULT_PEER_TIMEOUT`]).
    pub fn timeout(mut self, timeout: Duration) -> TsPeer {
        self.timeout = timeout;
        self
    }

    /// The command line that [`spawn`](Self::spawn) runs, for messages.
    pub fn command_line(&self) -> String {
        let mut s = format!("bun --no-install run {}", self.script);
        for a in &self.args {
            s.push(' ');
            if a.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./:".contains(c))
            {
                s.push_str(a);
            } else {
                s.push('\'');
                s.push_str(&a.replace('\'', r"'\''"));
                s.push('\'');
            }
        }
        s
    }

    /// Start the script and return at once. stdout and stderr go to files in a temporary
    /// directory (no pipe can fill up and block the script).
    pub fn spawn(&self) -> io::Result<PeerProcess> {
        let install = BunqueueInstall::locate()?;
        let script = peers_dir().join(&self.script);
        if !script.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("peer script {} not found", script.display()),
            ));
        }
        ensure_peer_node_modules(&install)?;
        let dir = tempfile::Builder::new()
            .prefix("autobatch-peer-")
            .tempdir()?;
        let stdout_path = dir.path().join("stdout");
        let stderr_path = dir.path().join("stderr");
        let mut cmd = Command::new(&install.bun);
        cmd.arg("--no-install")
            .arg("run")
            .arg(&script)
            .args(&self.args)
            .current_dir(peers_dir())
            .env_remove("BQ_TOKEN")
            .env_remove("BUNQUEUE_TOKEN")
            .env("NO_COLOR", "1")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(File::create(&stdout_path)?)
            .stderr(File::create(&stderr_path)?);
        let child = spawn_tied(cmd)?;
        Ok(PeerProcess {
            child: Some(child),
            command_line: self.command_line(),
            started: Instant::now(),
            timeout: self.timeout,
            stdout_path,
            stderr_path,
            _dir: dir,
        })
    }

    /// Run the script to completion (bounded by the timeout) and return its output, whatever
    /// its exit status. Use [`PeerOutput::json`] / [`PeerOutput::success`] to check it.
    pub fn run(&self) -> io::Result<PeerOutput> {
        self.spawn()?.wait()
    }

    /// Run the script, require exit status 0, and parse its whole stdout as one JSON document.
    pub fn run_json(&self) -> io::Result<serde_json::Value> {
        self.run()?.success()?.json()
    }
}

/// A running peer script (see [`TsPeer::spawn`]). Killed on drop.
#[derive(Debug)]
pub struct PeerProcess {
    child: Option<Child>,
    command_line: String,
    started: Instant,
    timeout: Duration,
    stdout_path: PathBuf,
    stderr_path: PathBuf,
    _dir: tempfile::TempDir,
}

impl PeerProcess {
    /// The script's pid.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Wait for the script to exit (killing it and failing with its stderr once the timeout,
    /// counted from spawn, has passed) and collect its output.
    pub fn wait(mut self) -> io::Result<PeerOutput> {
        let mut child = self.child.take().expect("child present until wait");
        let deadline = self.started + self.timeout;
        let status = loop {
            if let Some(s) = child.try_wait()? {
                break s;
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "peer `{}` still running after {:?}; killed.\n---- stderr ----\n{}\n---- stdout ----\n{}",
                        self.command_line,
                        self.timeout,
                        read_lossy(&self.stderr_path),
                        read_lossy(&self.stdout_path)
                    ),
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        Ok(PeerOutput {
            command_line: self.command_line.clone(),
            status,
            stdout: read_lossy(&self.stdout_path),
            stderr: read_lossy(&self.stderr_path),
            elapsed: self.started.elapsed(),
        })
    }

    /// What the script has written to stdout so far: for scripts that announce when they are
    /// ready before the test goes on.
    pub fn stdout_so_far(&self) -> String {
        read_lossy(&self.stdout_path)
    }

    /// SIGKILL the script.
    pub fn kill(&mut self) -> io::Result<()> {
        match self.child.as_mut() {
            Some(c) => {
                c.kill()?;
                c.wait().map(|_| ())
            }
            None => Ok(()),
        }
    }
}

impl Drop for PeerProcess {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// What a peer script produced.
#[derive(Debug, Clone)]
pub struct PeerOutput {
    /// The command line, for messages.
    pub command_line: String,
    /// Exit status.
    pub status: ExitStatus,
    /// Everything written to stdout.
    pub stdout: String,
    /// Everything written to stderr.
    pub stderr: String,
    /// Time from spawn to exit.
    pub elapsed: Duration,
}

impl PeerOutput {
    /// `Ok(self)` if the exit status is 0, else an error with stderr and stdout.
    pub fn success(self) -> io::Result<PeerOutput> {
        if self.status.success() {
            Ok(self)
        } else {
            Err(io::Error::other(format!(
                "peer `{}` failed with {}\n---- stderr ----\n{}\n---- stdout ----\n{}",
                self.command_line,
                self.status,
                self.stderr,
                truncate(&self.stdout, 4000)
            )))
        }
    }

    /// stdout parsed as one JSON document.
    pub fn json(&self) -> io::Result<serde_json::Value> {
        serde_json::from_str(self.stdout.trim()).map_err(|e| self.bad_json(e))
    }

    /// stdout parsed as one JSON document per non-empty line.
    pub fn json_lines(&self) -> io::Result<Vec<serde_json::Value>> {
        self.stdout
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).map_err(|e| self.bad_json(e)))
            .collect()
    }

    fn bad_json(&self, e: serde_json::Error) -> io::Error {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "peer `{}` did not print valid JSON ({e})\n---- stdout ----\n{}\n---- stderr ----\n{}",
                self.command_line,
                truncate(&self.stdout, 4000),
                self.stderr
            ),
        )
    }
}

fn read_lossy(p: &Path) -> String {
    std::fs::read(p)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}
