//! Where bun and bunqueue are installed, and the error to give when they are not.

use std::io;
use std::path::{Path, PathBuf};

/// bun version pinned by `scripts/bunqueue.sh`.
pub const BUN_VERSION: &str = "1.4.5";
/// bunqueue version pinned by `scripts/bunqueue.sh`.
pub const BUNQUEUE_VERSION: &str = "2.9.5";
/// Environment variable that overrides the install directory.
pub const DIR_ENV: &str = "AUTOBATCH_BUNQUEUE_DIR";

/// The workspace root (the parent of this crate's manifest directory).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests crate has a parent directory")
        .to_path_buf()
}

/// The install directory: `$AUTOBATCH_BUNQUEUE_DIR`, else `<workspace root>/.bunqueue`.
pub fn bunqueue_dir() -> PathBuf {
    match std::env::var_os(DIR_ENV) {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => workspace_root().join(".bunqueue"),
    }
}

/// A located install of bun and bunqueue (`npm install --prefix DIR bun bunqueue`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BunqueueInstall {
    /// The `--prefix` directory.
    pub dir: PathBuf,
    /// `DIR/node_modules/.bin/bun`.
    pub bun: PathBuf,
    /// `DIR/node_modules/bunqueue/dist/cli/index.js`, the server entry point.
    pub cli: PathBuf,
    /// `DIR/node_modules`.
    pub node_modules: PathBuf,
}

impl BunqueueInstall {
    /// Locate the install in [`bunqueue_dir`].
    pub fn locate() -> io::Result<Self> {
        Self::locate_in(&bunqueue_dir())
    }

    /// Locate the install in `dir`. The error names the exact command that installs it, and
    /// flags a version other than the pinned ones.
    pub fn locate_in(dir: &Path) -> io::Result<Self> {
        let node_modules = dir.join("node_modules");
        let me = Self {
            dir: dir.to_path_buf(),
            bun: node_modules.join(".bin").join("bun"),
            cli: node_modules.join("bunqueue/dist/cli/index.js"),
            node_modules,
        };
        for (what, path) in [("bun", &me.bun), ("the bunqueue CLI", &me.cli)] {
            if !path.is_file() {
                return Err(missing(
                    dir,
                    &format!("{what} not found at {}", path.display()),
                ));
            }
        }
        for (pkg, want) in [("bun", BUN_VERSION), ("bunqueue", BUNQUEUE_VERSION)] {
            let pj = me.node_modules.join(pkg).join("package.json");
            let found = std::fs::read_to_string(&pj)
                .ok()
                .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
                .and_then(|v| v.get("version")?.as_str().map(str::to_owned));
            if found.as_deref() != Some(want) {
                return Err(missing(
                    dir,
                    &format!(
                        "{pkg} {want} expected in {}, found {}",
                        pj.display(),
                        found.as_deref().unwrap_or("nothing")
                    ),
                ));
            }
        }
        Ok(me)
    }
}

fn missing(dir: &Path, what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!(
            "bunqueue install missing or wrong: {what}.\n\
             Install it with:\n    {root}/scripts/bunqueue.sh install\n\
             (which runs: npm install --prefix {dir} --no-audit --no-fund bun@{BUN_VERSION} bunqueue@{BUNQUEUE_VERSION}).\n\
             The location can be overridden with {DIR_ENV}=<dir>.",
            root = workspace_root().display(),
            dir = dir.display(),
        ),
    )
}
