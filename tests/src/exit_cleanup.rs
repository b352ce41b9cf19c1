//! Temporary directories removed when the test process exits.
//!
//! A server or PKI shared by a whole test binary lives in a `static` and is never dropped, so
//! its `TempDir` (the server's log, the certificates) would stay behind in `/tmp` after every
//! run. Each one is registered here when it is made; an `atexit` hook removes whatever is left
//! (a directory already removed by its owner's `Drop` is skipped).

use std::path::{Path, PathBuf};
use std::sync::{Mutex, Once};

static DIRS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Removes `dir` when the process exits, if it is still there.
pub(crate) fn remove_at_exit(dir: &Path) {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        // SAFETY: `remove_all` is an `extern "C"` function that never unwinds (it handles a
        // poisoned lock and ignores removal errors); registering it has no other precondition.
        unsafe {
            libc::atexit(remove_all);
        }
    });
    DIRS.lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(dir.to_owned());
}

extern "C" fn remove_all() {
    let dirs = std::mem::take(&mut *DIRS.lock().unwrap_or_else(|e| e.into_inner()));
    for dir in dirs {
        let _ = std::fs::remove_dir_all(dir);
    }
}
