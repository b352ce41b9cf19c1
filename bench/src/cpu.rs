//! CPU time, per thread, from Linux's `/proc/…/schedstat` (nanoseconds on a CPU).
//!
//! The bench measures two costs beside throughput: the client's CPU time per add and the
//! server's. Both come from the per-thread `schedstat` files because they have nanosecond
//! resolution (`/proc/PID/stat` counts 10 ms ticks, longer than a whole cell) and need no
//! `unsafe` (getrusage would). Their one blind spot is a thread that exits between two
//! readings: its time vanishes from the sum. Threads that come and go inside a measured
//! region (the official client's per-wave threads) therefore read their own time
//! ([`this_thread`]) before they exit.
//!
//! * The client, in this process: every thread of this process except the embedded broker's
//!   ([`BROKER_THREAD_PREFIX`]), so the default run, whose broker lives in-process, is measured
//!   like `--compare`, whose server is another process.
//! * The server: every thread of its process (bunqueue's bun), or the embedded broker's
//!   threads here.

use std::fs;
use std::path::Path;
use std::time::Duration;

/// The name every thread of the embedded broker starts with (`autobatch-broker` and its
/// runtime's `autobatch-broker-rt`; Linux keeps 15 bytes of a thread's name).
pub const BROKER_THREAD_PREFIX: &str = "autobatch-broke";

/// Which threads a reading sums.
#[derive(Debug, Clone)]
pub enum Threads {
    /// This process, less the embedded broker's threads: the client.
    Client,
    /// The embedded broker's threads in this process.
    EmbeddedBroker,
    /// Every thread of these processes (a bunqueue server, a fleet's brokers).
    Processes(Vec<u32>),
    /// Every thread of these processes and of their children at the time of reading (a
    /// PostgreSQL server: the postmaster and its backends).
    Trees(Vec<u32>),
}

impl Threads {
    /// CPU time used so far by these threads; `None` where `/proc` cannot tell (not Linux,
    /// or a kernel without schedstats).
    pub fn now(&self) -> Option<Duration> {
        match self {
            Threads::Client => sum_tasks(Path::new("/proc/self/task"), |comm| {
                !comm.starts_with(BROKER_THREAD_PREFIX)
            }),
            Threads::EmbeddedBroker => sum_tasks(Path::new("/proc/self/task"), |comm| {
                comm.starts_with(BROKER_THREAD_PREFIX)
            }),
            Threads::Processes(pids) => sum_processes(pids),
            Threads::Trees(roots) => {
                let mut pids = roots.clone();
                pids.extend(children_of(roots));
                sum_processes(&pids)
            }
        }
    }
}

fn sum_processes(pids: &[u32]) -> Option<Duration> {
    pids.iter().try_fold(Duration::ZERO, |acc, pid| {
        let dir = format!("/proc/{pid}/task");
        Some(acc + sum_tasks(Path::new(&dir), |_| true)?)
    })
}

/// The processes whose parent is one of `parents` (one level: PostgreSQL's backends are the
/// postmaster's children).
fn children_of(parents: &[u32]) -> Vec<u32> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let pid: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // `pid (comm) state ppid …`: comm may hold spaces and parentheses, so read after the last ')'.
        let ppid: u32 = stat
            .rsplit_once(')')?
            .1
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()?;
        parents.contains(&ppid).then_some(pid)
    })
    .collect()
}

/// CPU time the calling thread has used so far.
pub fn this_thread() -> Option<Duration> {
    read_schedstat(Path::new("/proc/thread-self/schedstat"))
}

/// The time between two readings, `None` if either is missing.
pub fn delta(before: Option<Duration>, after: Option<Duration>) -> Option<Duration> {
    Some(after?.saturating_sub(before?))
}

fn sum_tasks(dir: &Path, keep: impl Fn(&str) -> bool) -> Option<Duration> {
    let mut total = Duration::ZERO;
    for entry in fs::read_dir(dir).ok()? {
        let Ok(entry) = entry else { continue };
        let task = entry.path();
        // A thread can exit between the listing and the read: it is simply not counted.
        let Ok(comm) = fs::read_to_string(task.join("comm")) else {
            continue;
        };
        if !keep(comm.trim_end()) {
            continue;
        }
        if let Some(t) = read_schedstat(&task.join("schedstat")) {
            total += t;
        }
    }
    Some(total)
}

/// The first field of a `schedstat` file: nanoseconds spent on a CPU.
fn read_schedstat(path: &Path) -> Option<Duration> {
    let text = fs::read_to_string(path).ok()?;
    parse_schedstat(&text)
}

fn parse_schedstat(text: &str) -> Option<Duration> {
    let ns: u64 = text.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(ns))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedstat_first_field_is_nanoseconds_on_cpu() {
        assert_eq!(
            parse_schedstat("599451 2956883 2\n"),
            Some(Duration::from_nanos(599_451))
        );
        assert_eq!(parse_schedstat(""), None);
        assert_eq!(parse_schedstat("x 1 2"), None);
    }

    #[test]
    fn a_tree_holds_its_children() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let me = std::process::id();
        assert!(children_of(&[me]).contains(&child.id()));
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!children_of(&[me]).contains(&child.id()));
    }

    #[test]
    fn busy_work_shows_in_this_threads_and_the_clients_time() {
        let (Some(t0), Some(c0)) = (this_thread(), Threads::Client.now()) else {
            return; // no schedstats on this kernel: nothing to check
        };
        let mut x = 0u64;
        while delta(Some(t0), this_thread()).unwrap() < Duration::from_millis(20) {
            x = x.wrapping_mul(31).wrapping_add(7);
        }
        std::hint::black_box(x);
        // Other tests' threads may exit between two readings of the sum, taking their time
        // out of it, so `c1 - c0` can fall short (or below zero): hold the sum against this
        // thread's own total, read first, which the later sum must include.
        let t1 = this_thread().unwrap();
        let c1 = Threads::Client.now().unwrap();
        assert!(t1 - t0 >= Duration::from_millis(20), "{t0:?} → {t1:?}");
        assert!(
            c1 >= t1,
            "the client's {c1:?} lacks this thread's {t1:?} (from {c0:?})"
        );
        // No broker threads run in this test process.
        assert_eq!(Threads::EmbeddedBroker.now(), Some(Duration::ZERO));
    }
}
