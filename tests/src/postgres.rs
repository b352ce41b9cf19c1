//! A throwaway PostgreSQL server for bunqueue's multi-broker mode.
//!
//! [`Postgres::start`] runs `initdb` into a fresh temporary directory, starts `postgres` in
//! the foreground as a child process on a free 127.0.0.1 port (its Unix socket in the same
//! directory, so it never touches `/var/run/postgresql`), waits until it accepts connections
//! and creates one database. Dropping the value stops the server (fast shutdown, SIGKILL after
//! [`PG_STOP_TIMEOUT`]) and removes the directory; this also happens when a test panics, and
//! the child is tied to the test process like every other child of the harness (it gets
//! SIGKILL when the test process dies).
//!
//! PostgreSQL refuses to run as root: when the harness runs as root (CI), `initdb` and
//! `postgres` run as the OS user `postgres` (the Debian package creates it), and the temporary
//! directory is handed to that user.
//!
//! The binaries are found in `$AUTOBATCH_PG_BIN`, else `/usr/lib/postgresql/15/bin`, else the
//! newest `/usr/lib/postgresql/N/bin` with N ≥ 15 (Debian's layout). Nothing skips when they
//! are missing: starting fails with the command that installs them.

use std::ffi::CString;
use std::fs::OpenOptions;
use std::io;
use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::spawn::{signal, spawn_tied};

/// Environment variable naming the directory that holds `initdb`, `postgres`, `pg_isready`
/// and `createdb`.
pub const PG_BIN_ENV: &str = "AUTOBATCH_PG_BIN";
/// The oldest PostgreSQL major version bunqueue 2.9.5 supports.
pub const PG_MIN_MAJOR: u32 = 15;
/// How long [`Postgres::start`] waits for the server to accept connections.
pub const PG_STARTUP_TIMEOUT: Duration = Duration::from_secs(60);
/// How long [`Postgres::stop`] waits after the fast-shutdown signal before SIGKILL.
pub const PG_STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// The database [`Postgres::start`] creates.
pub const PG_DATABASE: &str = "bunqueue";

/// How to run the server.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PostgresOptions {
    /// `fsync` and `synchronous_commit`. Off by default: the database of a test is never
    /// crashed itself (only brokers are), so what a test checks does not depend on it, and
    /// it keeps tests fast on a shared disk. The bench turns it on (PostgreSQL's defaults).
    pub fsync: bool,
    /// `max_connections` (each bunqueue broker keeps a pool of
    /// `BUNQUEUE_POSTGRES_POOL_SIZE`, 4 by default).
    pub max_connections: u32,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        PostgresOptions {
            fsync: false,
            max_connections: 100,
        }
    }
}

impl PostgresOptions {
    /// Sets [`fsync`](Self::fsync).
    pub fn fsync(mut self, on: bool) -> Self {
        self.fsync = on;
        self
    }
}

/// A running throwaway PostgreSQL server on 127.0.0.1 with one database, [`PG_DATABASE`],
/// owned by the superuser `postgres` (trust authentication: no password).
#[derive(Debug)]
pub struct Postgres {
    bin: PathBuf,
    port: u16,
    child: Option<Child>,
    log_path: PathBuf,
    version: String,
    // Holds the data directory, the socket and the log; removed on drop, after the server.
    dir: tempfile::TempDir,
}

impl Postgres {
    /// Start a server with [`PostgresOptions::default`].
    pub fn start() -> io::Result<Postgres> {
        Self::start_with(PostgresOptions::default())
    }

    /// `initdb`, start, wait until it accepts connections, create [`PG_DATABASE`].
    ///
    /// Fails with [`io::ErrorKind::NotFound`] and the install command when the binaries are
    /// missing, and with the server log when it does not come up.
    pub fn start_with(opts: PostgresOptions) -> io::Result<Postgres> {
        let bin = pg_bin_dir()?;
        let user = PgUser::current_or_postgres()?;
        let dir = tempfile::Builder::new()
            .prefix("autobatch-postgres-")
            .tempdir()?;
        user.own(dir.path())?;
        let log_path = dir.path().join("postgres.log");
        let data = dir.path().join("data");

        let mut initdb = user.command(bin.join("initdb"));
        initdb
            .arg("-D")
            .arg(&data)
            .args(["-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-locale"])
            .arg("--no-sync")
            .stdin(Stdio::null());
        let out = initdb
            .output()
            .map_err(|e| io::Error::new(e.kind(), format!("running initdb: {e}")))?;
        if !out.status.success() {
            return Err(io::Error::other(format!(
                "initdb failed with {}:\n{}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        let version = std::fs::read_to_string(data.join("PG_VERSION"))
            .map(|s| s.trim().to_owned())
            .unwrap_or_default();

        let mut pg = Postgres {
            bin,
            port: 0,
            child: None,
            log_path,
            version,
            dir,
        };
        let mut attempts = 0;
        loop {
            pg.port = free_port()?;
            match pg.launch(&user, &opts) {
                Ok(()) => break,
                Err(e) if e.kind() == io::ErrorKind::AddrInUse && attempts < 3 => attempts += 1,
                Err(e) => return Err(e),
            }
        }
        pg.client_tool("createdb", &[PG_DATABASE])?;
        Ok(pg)
    }

    /// The TCP port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's major version (`PG_VERSION` of the data directory), e.g. `15`.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The connection URL of [`PG_DATABASE`], `postgres://postgres@127.0.0.1:PORT/bunqueue`,
    /// as `BUNQUEUE_POSTGRES_URL` takes it.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{PG_DATABASE}", self.port)
    }

    /// The server log so far (lossy UTF-8).
    pub fn log(&self) -> String {
        std::fs::read(&self.log_path)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }

    /// The directory holding the data directory, the socket and the log.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The postmaster's pid (its backends are its children), `None` once stopped.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Fast shutdown (SIGINT: open sessions are ended, nothing is kept), SIGKILL after
    /// [`PG_STOP_TIMEOUT`]. `None` if it was not running. Called by `Drop`.
    pub fn stop(&mut self) -> io::Result<Option<ExitStatus>> {
        let Some(mut child) = self.child.take() else {
            return Ok(None);
        };
        if child.try_wait()?.is_none() {
            let _ = signal(child.id(), libc::SIGINT);
            let deadline = Instant::now() + PG_STOP_TIMEOUT;
            while child.try_wait()?.is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            if child.try_wait()?.is_none() {
                let _ = child.kill();
            }
        }
        child.wait().map(Some)
    }

    fn launch(&mut self, user: &PgUser, opts: &PostgresOptions) -> io::Result<()> {
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log_path)?;
        let log_len = log.metadata()?.len() as usize;
        let onoff = |b: bool| if b { "on" } else { "off" };
        let mut cmd = user.command(self.bin.join("postgres"));
        cmd.arg("-D")
            .arg(self.dir.path().join("data"))
            .args(["-p", &self.port.to_string()])
            .arg("-k")
            .arg(self.dir.path())
            .args(["-c", "listen_addresses=127.0.0.1"])
            .args(["-c", &format!("max_connections={}", opts.max_connections)])
            .args(["-c", &format!("fsync={}", onoff(opts.fsync))])
            .args(["-c", &format!("synchronous_commit={}", onoff(opts.fsync))])
            .args(["-c", &format!("full_page_writes={}", onoff(opts.fsync))])
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log));
        let child = spawn_tied(cmd)
            .map_err(|e| io::Error::new(e.kind(), format!("spawning postgres: {e}")))?;
        self.child = Some(child);
        let deadline = Instant::now() + PG_STARTUP_TIMEOUT;
        loop {
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().transpose()) {
                let status = status?;
                self.child = None;
                let log = self.log();
                let this_start = log.get(log_len..).unwrap_or(&log);
                let kind = if this_start.contains("could not bind")
                    || this_start.contains("Address already in use")
                {
                    io::ErrorKind::AddrInUse
                } else {
                    io::ErrorKind::Other
                };
                return Err(io::Error::new(
                    kind,
                    format!("postgres exited early with {status}:\n{this_start}"),
                ));
            }
            if self.client_tool("pg_isready", &["-q", "-t", "2"]).is_ok() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                let _ = self.stop();
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "postgres did not accept connections within {PG_STARTUP_TIMEOUT:?}:\n{}",
                        self.log()
                    ),
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Runs `sql` with `psql` on [`PG_DATABASE`] and returns its rows, one per line, fields
    /// separated by `|` (`psql -At`): counts read straight from the database, past every
    /// broker.
    pub fn query(&self, sql: &str) -> io::Result<String> {
        let out = Command::new(self.bin.join("psql"))
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                "postgres",
            ])
            .args(["-d", PG_DATABASE, "-At", "-v", "ON_ERROR_STOP=1", "-c", sql])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| io::Error::new(e.kind(), format!("running psql: {e}")))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
        } else {
            Err(io::Error::other(format!(
                "psql failed with {}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )))
        }
    }

    /// Runs a client program (`createdb`, `pg_isready`) against this server over TCP.
    fn client_tool(&self, tool: &str, args: &[&str]) -> io::Result<()> {
        let out = Command::new(self.bin.join(tool))
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                "postgres",
            ])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| io::Error::new(e.kind(), format!("running {tool}: {e}")))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(io::Error::other(format!(
                "{tool} failed with {}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )))
        }
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// The directory holding PostgreSQL's binaries (see the module docs).
pub fn pg_bin_dir() -> io::Result<PathBuf> {
    if let Some(d) = std::env::var_os(PG_BIN_ENV).filter(|d| !d.is_empty()) {
        let d = PathBuf::from(d);
        return if d.join("initdb").is_file() {
            Ok(d)
        } else {
            Err(pg_missing(&format!(
                "{PG_BIN_ENV}={} holds no initdb",
                d.display()
            )))
        };
    }
    let root = Path::new("/usr/lib/postgresql");
    let preferred = root.join(PG_MIN_MAJOR.to_string()).join("bin");
    if preferred.join("initdb").is_file() {
        return Ok(preferred);
    }
    let newest = std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|v| *v >= PG_MIN_MAJOR)
        .filter(|v| root.join(v.to_string()).join("bin/initdb").is_file())
        .max();
    match newest {
        Some(v) => Ok(root.join(v.to_string()).join("bin")),
        None => Err(pg_missing(&format!(
            "no {}/N/bin/initdb with N >= {PG_MIN_MAJOR}",
            root.display()
        ))),
    }
}

fn pg_missing(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!(
            "PostgreSQL {PG_MIN_MAJOR}+ not found ({what}).\n\
             Install it with:\n    apt-get install -y postgresql\n\
             (scripts/test.sh does this when /usr/lib/postgresql/{PG_MIN_MAJOR}/bin/initdb is missing),\n\
             or point {PG_BIN_ENV} at a directory holding initdb, postgres, pg_isready and createdb."
        ),
    )
}

/// Who runs `initdb` and `postgres`: this process's user, or `postgres` when we are root.
#[derive(Debug, Clone, Copy)]
struct PgUser {
    ids: Option<(libc::uid_t, libc::gid_t)>,
}

impl PgUser {
    fn current_or_postgres() -> io::Result<PgUser> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Ok(PgUser { ids: None });
        }
        let name = CString::new("postgres").expect("no NUL");
        // SAFETY: getpwnam returns a pointer into static storage or null; we copy the two
        // ids out at once. Tests call this from several threads only rarely, and each call
        // reads the same entry.
        let pw = unsafe { libc::getpwnam(name.as_ptr()) };
        if pw.is_null() {
            return Err(pg_missing(
                "running as root, and there is no OS user 'postgres' to run PostgreSQL as",
            ));
        }
        // SAFETY: pw is non-null and points to a valid passwd entry.
        let (uid, gid) = unsafe { ((*pw).pw_uid, (*pw).pw_gid) };
        Ok(PgUser {
            ids: Some((uid, gid)),
        })
    }

    fn command(&self, program: PathBuf) -> Command {
        let mut cmd = Command::new(program);
        if let Some((uid, gid)) = self.ids {
            use std::os::unix::process::CommandExt;
            // std switches group then user before running the spawner's pre_exec hook, so
            // the parent-death signal it sets is kept.
            cmd.uid(uid).gid(gid).env("HOME", "/tmp");
        }
        // Our working directory may not be readable by that user.
        cmd.current_dir("/").env_remove("PGDATA");
        cmd
    }

    fn own(&self, dir: &Path) -> io::Result<()> {
        match self.ids {
            Some((uid, gid)) => std::os::unix::fs::chown(dir, Some(uid), Some(gid)),
            None => Ok(()),
        }
    }
}

fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
        .local_addr()?
        .port())
}
