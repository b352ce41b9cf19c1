//! A real bunqueue 2.9.5 server as a child process.

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::install::BunqueueInstall;
use crate::msgpack::{read_frame, str_map_frame, top_level_map, Scalar};
use crate::spawn::{signal, spawn_tied};

/// How long [`BunqueueServer::start`] and [`BunqueueServer::restart`] wait for the server to
/// answer a Ping.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// How long [`BunqueueServer::stop`] waits after SIGTERM before it sends SIGKILL.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// How to run the server. `Default` is a memory-mode server without auth.
#[derive(Debug, Clone, Default)]
pub struct ServerOptions {
    /// SQLite mode: `--data-path FILE`. `None` runs in memory mode.
    pub data_path: Option<PathBuf>,
    /// Auth mode: `--auth-tokens T` (comma-separated list). The readiness check then
    /// authenticates with the first token before it pings.
    pub auth_tokens: Option<String>,
    /// Extra environment for the server (applied after the harness's own
    /// `RATE_LIMIT_MAX_REQUESTS=1000000000`, so it can override it).
    pub env: Vec<(String, String)>,
    /// TLS mode: `TLS_CERT_FILE` / `TLS_KEY_FILE` (bunqueue 2.9.5's names; they also put its
    /// HTTP port on TLS). The readiness check then pings over TLS, trusting `ca_pem`.
    pub tls: Option<ServerTls>,
}

/// A certificate for a bunqueue server ([`ServerOptions::tls`]); see
/// [`TestPki::server_tls`](crate::TestPki::server_tls).
#[derive(Debug, Clone)]
pub struct ServerTls {
    /// PEM certificate chain, for `TLS_CERT_FILE`.
    pub cert: PathBuf,
    /// PEM private key, for `TLS_KEY_FILE`.
    pub key: PathBuf,
    /// The CA the readiness check trusts (PEM).
    pub ca_pem: Vec<u8>,
}

impl ServerOptions {
    /// Memory mode, no auth.
    pub fn memory() -> Self {
        Self::default()
    }

    /// SQLite mode with the database at `path`.
    pub fn sqlite(path: impl Into<PathBuf>) -> Self {
        Self {
            data_path: Some(path.into()),
            ..Self::default()
        }
    }
}

/// A bunqueue server child process listening on 127.0.0.1.
///
/// The TCP and HTTP ports are picked once (free loopback ports) and kept across
/// [`restart`](Self::restart). The child's stdout and stderr go to a log file in a temporary
/// directory owned by this value; errors from starting include its tail. The child is killed
/// when this value is dropped (and, on Linux, when the test process dies).
#[derive(Debug)]
pub struct BunqueueServer {
    install: BunqueueInstall,
    opts: ServerOptions,
    tcp_port: u16,
    http_port: u16,
    child: Option<Child>,
    starts: u32,
    log_path: PathBuf,
    // Byte offset in the log where the current start's output begins.
    log_start: usize,
    // Kept for its Drop (removes the log directory).
    _log_dir: tempfile::TempDir,
}

impl BunqueueServer {
    /// Start a server and wait until it answers a Ping (at most [`STARTUP_TIMEOUT`]).
    ///
    /// Fails with [`io::ErrorKind::NotFound`] and the install command if bun or bunqueue is
    /// missing, and with the server log if it does not come up.
    pub fn start(opts: ServerOptions) -> io::Result<BunqueueServer> {
        let install = BunqueueInstall::locate()?;
        let log_dir = tempfile::Builder::new()
            .prefix("autobatch-bunqueue-")
            .tempdir()?;
        // A shared server lives in a static and is never dropped.
        crate::exit_cleanup::remove_at_exit(log_dir.path());
        let log_path = log_dir.path().join("server.log");
        let mut server = BunqueueServer {
            install,
            opts,
            tcp_port: 0,
            http_port: 0,
            child: None,
            starts: 0,
            log_path,
            log_start: 0,
            _log_dir: log_dir,
        };
        // A picked port can be taken by someone else before the server binds it: retry with
        // fresh ports in that case only.
        let mut attempts = 0;
        loop {
            (server.tcp_port, server.http_port) = free_port_pair()?;
            match server.launch() {
                Ok(()) => return Ok(server),
                Err(e) if is_addr_in_use(&e) && attempts < 3 => attempts += 1,
                Err(e) => return Err(e),
            }
        }
    }

    /// The TCP address, `127.0.0.1:port()`.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, self.tcp_port))
    }

    /// The TCP port.
    pub fn port(&self) -> u16 {
        self.tcp_port
    }

    /// The HTTP port (the server's separate HTTP API).
    pub fn http_port(&self) -> u16 {
        self.http_port
    }

    /// The pid of the running child, `None` after [`stop`](Self::stop) or
    /// [`kill`](Self::kill).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Whether a child is running (started and not yet stopped, killed or exited).
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.as_mut().map(Child::try_wait), Some(Ok(None)))
    }

    /// The options the server was started with.
    pub fn options(&self) -> &ServerOptions {
        &self.opts
    }

    /// The SQLite file, if running in SQLite mode.
    pub fn data_path(&self) -> Option<&Path> {
        self.opts.data_path.as_deref()
    }

    /// Path of the log file (stdout and stderr of every start, in order).
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// The whole log so far (lossy UTF-8).
    pub fn log(&self) -> String {
        std::fs::read(&self.log_path)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }

    /// Graceful stop: SIGTERM, then SIGKILL after [`STOP_TIMEOUT`]. Returns the exit status,
    /// or `None` if nothing was running. A suspended server is resumed first so that it can
    /// handle SIGTERM.
    pub fn stop(&mut self) -> io::Result<Option<ExitStatus>> {
        let Some(mut child) = self.child.take() else {
            return Ok(None);
        };
        if child.try_wait()?.is_none() {
            let _ = signal(child.id(), libc::SIGCONT);
            let _ = signal(child.id(), libc::SIGTERM);
            if let Some(status) = wait_timeout(&mut child, STOP_TIMEOUT)? {
                return Ok(Some(status));
            }
            let _ = child.kill();
        }
        child.wait().map(Some)
    }

    /// Abrupt stop: SIGKILL (the server gets no chance to flush anything) and reap.
    pub fn kill(&mut self) -> io::Result<Option<ExitStatus>> {
        let Some(mut child) = self.child.take() else {
            return Ok(None);
        };
        if child.try_wait()?.is_none() {
            child.kill()?;
        }
        child.wait().map(Some)
    }

    /// SIGSTOP: the server keeps its sockets but stops reading and answering (the kernel still
    /// accepts connections into the backlog).
    pub fn suspend(&self) -> io::Result<()> {
        signal(self.running_pid()?, libc::SIGSTOP)
    }

    /// SIGCONT: undo [`suspend`](Self::suspend).
    pub fn resume(&self) -> io::Result<()> {
        signal(self.running_pid()?, libc::SIGCONT)
    }

    /// Stop the server if it runs (gracefully, like [`stop`](Self::stop)) and start it again
    /// with the same ports, data path, tokens and environment; wait until it answers a Ping.
    /// Call [`kill`](Self::kill) first for a crash-restart.
    pub fn restart(&mut self) -> io::Result<()> {
        self.stop()?;
        // The old listening socket is gone once the process is reaped, but be tolerant of a
        // port that lingers for a moment.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match self.launch() {
                Ok(()) => return Ok(()),
                Err(e) if is_addr_in_use(&e) && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(200));
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn running_pid(&self) -> io::Result<u32> {
        self.pid()
            .ok_or_else(|| io::Error::other("bunqueue server is not running"))
    }

    /// Spawn the child and wait for readiness. On failure the child is killed.
    fn launch(&mut self) -> io::Result<()> {
        debug_assert!(self.child.is_none());
        self.starts += 1;
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log_path)?;
        writeln!(
            log,
            "==== autobatch-tests: start #{} on tcp {} / http {} ====",
            self.starts, self.tcp_port, self.http_port
        )?;
        self.log_start = log.metadata()?.len() as usize;
        let mut cmd = Command::new(&self.install.bun);
        cmd.arg(&self.install.cli)
            .arg("start")
            .args(["--host", "127.0.0.1"])
            .args(["--tcp-port", &self.tcp_port.to_string()])
            .args(["--http-port", &self.http_port.to_string()]);
        if let Some(p) = &self.opts.data_path {
            cmd.arg("--data-path").arg(p);
        }
        if let Some(t) = &self.opts.auth_tokens {
            cmd.args(["--auth-tokens", t]);
        }
        if let Some(tls) = &self.opts.tls {
            cmd.env("TLS_CERT_FILE", &tls.cert)
                .env("TLS_KEY_FILE", &tls.key);
        }
        cmd.env("RATE_LIMIT_MAX_REQUESTS", "1000000000")
            .env("NO_COLOR", "1")
            .envs(self.opts.env.iter().map(|(k, v)| (k, v)))
            .current_dir(self._log_dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log));
        let child = spawn_tied(cmd).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("spawning {}: {e}", self.install.bun.display()),
            )
        })?;
        self.child = Some(child);
        match self.wait_ready() {
            Ok(()) => Ok(()),
            Err(e) => {
                let _ = self.kill();
                Err(io::Error::new(
                    e.kind(),
                    format!(
                        "bunqueue did not come up on {}: {e}\n---- server log ({}) ----\n{}",
                        self.addr(),
                        self.log_path.display(),
                        tail(&self.log(), 8000)
                    ),
                ))
            }
        }
    }

    fn wait_ready(&mut self) -> io::Result<()> {
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        let token = self
            .opts
            .auth_tokens
            .as_deref()
            .map(|t| t.split(',').next().unwrap_or("").trim().to_owned());
        loop {
            if let Some(child) = self.child.as_mut() {
                if let Some(status) = child.try_wait()? {
                    let log = self.log();
                    let this_start = log.get(self.log_start..).unwrap_or(&log);
                    let kind = if log_says_addr_in_use(this_start) {
                        io::ErrorKind::AddrInUse
                    } else {
                        io::ErrorKind::Other
                    };
                    return Err(io::Error::new(
                        kind,
                        format!("server exited early with {status}"),
                    ));
                }
            }
            let ping = match &self.opts.tls {
                None => ping_addr(self.addr(), token.as_deref(), Duration::from_secs(2)),
                Some(tls) => ping_tls(self.addr(), &tls.ca_pem, token.as_deref()),
            };
            let last = match ping {
                Ok(()) => return Ok(()),
                Err(e) => e,
            };
            if Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("no Ping reply within {STARTUP_TIMEOUT:?} (last attempt: {last})"),
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for BunqueueServer {
    fn drop(&mut self) {
        let _ = self.kill();
    }
}

/// Connect to `addr`, authenticate with `token` if given, send `{cmd:"Ping", reqId:"1"}` and
/// check the reply is `{ok:true, reqId:"1", ...}`. Each socket operation is bounded by
/// `timeout`.
pub fn ping_addr(addr: SocketAddr, token: Option<&str>, timeout: Duration) -> io::Result<()> {
    let mut s = TcpStream::connect_timeout(&addr, timeout)?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    s.set_nodelay(true)?;
    if let Some(t) = token {
        s.write_all(&str_map_frame(&[
            ("cmd", "Auth"),
            ("token", t),
            ("reqId", "0"),
        ]))?;
        expect_ok(&read_frame(&mut s)?, "0", "Auth")?;
    }
    s.write_all(&str_map_frame(&[("cmd", "Ping"), ("reqId", "1")]))?;
    expect_ok(&read_frame(&mut s)?, "1", "Ping")
}

/// [`ping_addr`] over TLS, through [`RawClient::connect_tls`](crate::RawClient::connect_tls).
fn ping_tls(addr: SocketAddr, ca_pem: &[u8], token: Option<&str>) -> io::Result<()> {
    let mut c = crate::RawClient::connect_tls(addr, ca_pem, token)?;
    match c.call(&autobatch_core::wire::Command::Ping) {
        Ok(_) => Ok(()),
        Err(e) => Err(io::Error::other(format!("Ping over TLS: {e}"))),
    }
}

fn expect_ok(payload: &[u8], req_id: &str, what: &str) -> io::Result<()> {
    let bad = |why: String| io::Error::new(io::ErrorKind::InvalidData, format!("{what}: {why}"));
    let map =
        top_level_map(payload).ok_or_else(|| bad(format!("reply is not a map: {payload:02x?}")))?;
    let get = |k: &str| map.iter().find(|(key, _)| key == k).map(|(_, v)| v);
    if get("reqId") != Some(&Scalar::Str(req_id.into())) {
        return Err(bad(format!("reply with the wrong reqId: {map:?}")));
    }
    if get("ok") != Some(&Scalar::Bool(true)) {
        return Err(bad(format!("reply is not ok: {map:?}")));
    }
    Ok(())
}

fn free_port_pair() -> io::Result<(u16, u16)> {
    // Hold both listeners at once so the two ports differ.
    let a = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    let b = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    Ok((a.local_addr()?.port(), b.local_addr()?.port()))
}

fn wait_timeout(child: &mut Child, timeout: Duration) -> io::Result<Option<ExitStatus>> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(s) = child.try_wait()? {
            return Ok(Some(s));
        }
        if Instant::now() >= deadline {
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn is_addr_in_use(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::AddrInUse
}

fn log_says_addr_in_use(log: &str) -> bool {
    let l = log.to_ascii_lowercase();
    // bunqueue 2.9.5 prints "Failed to listen at 127.0.0.1" for a taken TCP port and
    // "Is port N in use?" for a taken HTTP port.
    l.contains("eaddrinuse")
        || l.contains("address already in use")
        || l.contains("failed to listen at")
        || l.contains("in use?")
}

fn tail(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut start = s.len() - max;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}
