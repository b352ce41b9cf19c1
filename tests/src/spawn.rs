//! Spawning child processes that cannot outlive the test process.
//!
//! Every child is spawned with `PR_SET_PDEATHSIG = SIGKILL` (Linux), so a test binary that is
//! itself killed (Ctrl-C, a CI timeout, SIGKILL) does not leave bunqueue servers or bun peers
//! behind. The kernel delivers that signal when the *thread* that forked the child exits, not
//! the process, so all children are forked from one dedicated thread that lives until the
//! process exits. That keeps a server alive when the test thread that started it ends while
//! another thread still uses it (e.g. a server shared through a `static`).

use std::io;
use std::process::{Child, Command};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};

type Request = (Command, mpsc::Sender<io::Result<Child>>);

fn spawner() -> &'static Mutex<mpsc::Sender<Request>> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<Request>>> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Request>();
        std::thread::Builder::new()
            .name("autobatch-tests-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
            })
            .expect("spawn the child-spawner thread");
        Mutex::new(tx)
    })
}

/// Spawn `cmd` so that the child gets SIGKILL when this process dies.
pub(crate) fn spawn_tied(mut cmd: Command) -> io::Result<Child> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: only async-signal-safe calls (prctl, getppid) run between fork and exec.
        let parent = libc::pid_t::try_from(std::process::id()).unwrap_or(0);
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                    return Err(io::Error::last_os_error());
                }
                // The parent may have died between fork and prctl.
                if libc::getppid() != parent {
                    return Err(io::Error::other("parent exited before the child started"));
                }
                Ok(())
            });
        }
    }
    let (tx, rx) = mpsc::channel();
    spawner()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .send((cmd, tx))
        .map_err(|_| io::Error::other("child-spawner thread is gone"))?;
    rx.recv()
        .map_err(|_| io::Error::other("child-spawner thread dropped the request"))?
}

/// Send `sig` to `pid`.
pub(crate) fn signal(pid: u32, sig: libc::c_int) -> io::Result<()> {
    let pid = libc::pid_t::try_from(pid).map_err(|_| io::Error::other("pid out of range"))?;
    // SAFETY: kill(2) has no memory-safety preconditions.
    if unsafe { libc::kill(pid, sig) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
