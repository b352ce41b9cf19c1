//! Import cycles between files, found by reading the source: which file uses what another
//! file defines.
//!
//! A crate's module tree is read from its roots (`lib.rs`, `main.rs`) through `mod name;`
//! declarations. Every `use` declaration and every path in code (`crate::x::Y`, `super::Z`,
//! `child::f`) is resolved, through re-exports and glob imports, to the file that defines what
//! it names; that file is a dependency. Declaring a module (`mod child;`) is not a dependency,
//! and neither is passing a submodule's items on (`pub use child::*`, `pub use child::Item`):
//! a parent depends on its child only when it uses the child's items itself. Items under
//! `#[cfg(test)]` and `tests` modules are left out. A cycle is a set of files that all reach
//! each other (a strongly connected component).
//!
//! ```
//! use std::collections::BTreeMap;
//! use autobatch_tests::layers::FileGraph;
//!
//! let files = BTreeMap::from([
//!     ("lib.rs".to_owned(), "mod a; mod b;".to_owned()),
//!     ("a.rs".to_owned(), "use crate::b::B; pub struct A;".to_owned()),
//!     ("b.rs".to_owned(), "pub struct B(crate::a::A);".to_owned()),
//! ]);
//! let cycles = FileGraph::from_sources(&files).unwrap().cycles();
//! assert_eq!(cycles[0].files, ["a.rs", "b.rs"]);
//! ```

mod graph;
mod lex;
mod parse;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

pub use graph::{Cycle, Edge, FileGraph};

/// Why a crate's sources could not be scanned.
#[derive(Debug)]
pub enum LayerError {
    /// Neither `lib.rs` nor `main.rs` is among the sources.
    NoRoot,
    /// A module file the tree needs is not among the sources.
    MissingFile {
        /// Its path relative to the source directory.
        path: String,
    },
    /// `mod name;` names a module with neither `name.rs` nor `name/mod.rs`.
    MissingModule {
        /// The declaring file.
        declared_in: String,
        /// The module's name.
        name: String,
    },
    /// A source directory or file could not be read.
    Io {
        /// What was being read.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

impl fmt::Display for LayerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LayerError::NoRoot => write!(f, "no lib.rs or main.rs among the sources"),
            LayerError::MissingFile { path } => write!(f, "module file {path} is missing"),
            LayerError::MissingModule { declared_in, name } => write!(
                f,
                "{declared_in} declares `mod {name};` but neither {name}.rs nor {name}/mod.rs exists"
            ),
            LayerError::Io { path, source } => write!(f, "reading {}: {source}", path.display()),
        }
    }
}

impl std::error::Error for LayerError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LayerError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// The graph of the crate whose sources are in `src_dir` (every `.rs` file under it, keyed by
/// its path relative to `src_dir` with `/` separators).
pub fn scan_dir(src_dir: &Path) -> Result<FileGraph, LayerError> {
    let mut files = BTreeMap::new();
    read_tree(src_dir, src_dir, &mut files)?;
    FileGraph::from_sources(&files)
}

fn read_tree(
    root: &Path,
    dir: &Path,
    files: &mut BTreeMap<String, String>,
) -> Result<(), LayerError> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| LayerError::Io { path, source }
    };
    for entry in std::fs::read_dir(dir).map_err(io(dir))? {
        let path = entry.map_err(io(dir))?.path();
        if path.is_dir() {
            read_tree(root, &path, files)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).map_err(io(&path))?;
            let relative = path.strip_prefix(root).unwrap_or(&path);
            let key = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect::<Vec<_>>()
                .join("/");
            files.insert(key, text);
        }
    }
    Ok(())
}
