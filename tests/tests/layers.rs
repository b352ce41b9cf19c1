//! Layers you can see: no import cycle between the files of the production code of `core`,
//! `driver`, `broker` and `bench` (see [`autobatch_tests::layers`] for what counts as a
//! dependency). Run alone with `cargo test -p autobatch-tests --test layers`.
//!
//! The scanner's own tests come first, on small crates written in memory.

use std::collections::BTreeMap;

use autobatch_tests::layers::{scan_dir, Cycle, FileGraph, LayerError};
use autobatch_tests::workspace_root;

/// The crates whose production code must have no import cycle.
const CRATES: &[&str] = &["core", "driver", "broker", "bench"];

fn cycles_of(files: &[(&str, &str)]) -> Vec<Vec<String>> {
    graph_of(files)
        .cycles()
        .into_iter()
        .map(|c| c.files)
        .collect()
}

fn graph_of(files: &[(&str, &str)]) -> FileGraph {
    let files: BTreeMap<String, String> = files
        .iter()
        .map(|(path, text)| (path.to_string(), text.to_string()))
        .collect();
    FileGraph::from_sources(&files).expect("the sources scan")
}

// ------------------------------------------------------------------------------ the scanner

#[test]
fn a_cycle_through_crate_paths_is_found() {
    let cycles = cycles_of(&[
        ("lib.rs", "mod a; mod b; mod c; mod leaf;"),
        ("a.rs", "use crate::b::B; pub struct A;"),
        ("b.rs", "pub struct B; fn f() { crate::c::g(); }"),
        ("c.rs", "pub fn g() -> crate::a::A { crate::a::A }"),
        ("leaf.rs", "pub struct Leaf;"),
    ]);
    assert_eq!(cycles, [["a.rs", "b.rs", "c.rs"]]);
}

#[test]
fn a_dag_has_no_cycle() {
    let graph = graph_of(&[
        ("lib.rs", "mod a; mod b; mod c;"),
        ("a.rs", "use crate::b::B; use crate::c::C;"),
        ("b.rs", "use crate::c::C; pub struct B;"),
        ("c.rs", "pub struct C;"),
    ]);
    assert!(graph.cycles().is_empty());
    let edges: Vec<(String, String)> = graph.edges().into_iter().map(|e| (e.from, e.to)).collect();
    let expected = [("a.rs", "b.rs"), ("a.rs", "c.rs"), ("b.rs", "c.rs")];
    let expected: Vec<(String, String)> = expected
        .iter()
        .map(|(f, t)| (f.to_string(), t.to_string()))
        .collect();
    assert_eq!(edges, expected);
}

#[test]
fn a_parent_passing_on_its_children_is_not_a_cycle() {
    // The children use their parent's items; the parent only declares and re-exports them.
    let cycles = cycles_of(&[
        ("lib.rs", "pub mod ops;"),
        (
            "ops/mod.rs",
            "mod job; mod control;\npub use job::*;\npub use control::Pause;\npub trait Op {}",
        ),
        (
            "ops/job.rs",
            "use super::Op; pub struct Push; impl Op for Push {}",
        ),
        (
            "ops/control.rs",
            "pub struct Pause; impl super::Op for Pause {}",
        ),
    ]);
    assert!(cycles.is_empty(), "{cycles:?}");
}

#[test]
fn a_parent_using_its_childs_items_is_a_cycle() {
    let files = [
        ("lib.rs", "pub mod ops;"),
        (
            "ops/mod.rs",
            "mod job;\npub use job::Push;\npub trait Op {}\npub fn all() -> Vec<Push> { vec![] }",
        ),
        (
            "ops/job.rs",
            "use super::Op; pub struct Push; impl Op for Push {}",
        ),
    ];
    assert_eq!(cycles_of(&files), [["ops/job.rs", "ops/mod.rs"]]);
}

#[test]
fn paths_resolve_through_re_exports_to_the_defining_file() {
    // `crate::Error` is defined in error.rs: the dependency is on error.rs, not on lib.rs.
    let cycles = cycles_of(&[
        (
            "lib.rs",
            "mod error; mod pump; mod client;\npub use error::Error;",
        ),
        ("error.rs", "pub enum Error { Lost(crate::client::Why) }"),
        ("client.rs", "pub struct Why; fn f(_: crate::pump::Pump) {}"),
        ("pump.rs", "use crate::Error; pub struct Pump;"),
    ]);
    assert_eq!(cycles, [["client.rs", "error.rs", "pump.rs"]]);
}

#[test]
fn glob_imports_are_followed() {
    // `prelude::Bee` is found through the glob to b.rs; the module passing b's items on to a
    // is in the ring too, as a uses it and it uses b.
    let graph = graph_of(&[
        ("lib.rs", "mod a; mod b; mod prelude;"),
        ("prelude.rs", "pub use crate::b::*;"),
        (
            "a.rs",
            "use crate::prelude; pub struct A; fn f() { prelude::Bee::new(); }",
        ),
        ("b.rs", "pub struct Bee; fn g(_: crate::a::A) {}"),
    ]);
    let a_to_b = graph
        .edges()
        .into_iter()
        .find(|e| e.from == "a.rs" && e.to == "b.rs")
        .expect("a.rs uses b.rs through the glob");
    assert_eq!(a_to_b.via, "prelude::Bee::new");
    let cycles: Vec<Vec<String>> = graph.cycles().into_iter().map(|c| c.files).collect();
    assert_eq!(cycles, [["a.rs", "b.rs", "prelude.rs"]]);
}

#[test]
fn test_code_comments_and_strings_do_not_count() {
    let cycles = cycles_of(&[
        ("lib.rs", "mod a; mod b;\n#[cfg(test)]\nmod tests;"),
        (
            "a.rs",
            r##"pub struct A;
            // crate::b::B is mentioned in a comment only
            /* and in crate::b::B a /* nested */ block comment */
            const S: &str = "crate::b::B"; const R: &str = r#"crate::b::B"#;
            #[cfg(test)]
            mod tests { use crate::b::B; }
            #[cfg(test)]
            fn helper() -> crate::b::B { crate::b::B }"##,
        ),
        ("b.rs", "pub struct B(crate::a::A);"),
        ("tests.rs", "use crate::a::A; use crate::b::B;"),
    ]);
    assert!(cycles.is_empty(), "{cycles:?}");
}

#[test]
fn super_and_inline_modules_resolve() {
    let cycles = cycles_of(&[
        ("lib.rs", "mod queue; mod events;"),
        (
            "queue.rs",
            "mod admin;\npub struct Queue;\nmod inner { pub fn f() { super::super::events::emit(); } }",
        ),
        ("queue/admin.rs", "impl super::Queue { fn g() {} }"),
        ("events.rs", "pub fn emit() {} fn h(_: &crate::queue::Queue) {}"),
    ]);
    assert_eq!(cycles, [["events.rs", "queue.rs"]]);
}

#[test]
fn external_paths_are_not_dependencies() {
    let cycles = cycles_of(&[
        ("lib.rs", "mod a; mod b;"),
        (
            "a.rs",
            "use std::sync::Arc; use serde::Serialize; pub struct A(Arc<u8>); fn f() { std::mem::drop(1); }",
        ),
        ("b.rs", "use crate::a::A; use ::serde::Deserialize;"),
    ]);
    assert!(cycles.is_empty(), "{cycles:?}");
}

#[test]
fn a_module_without_a_file_is_an_error() {
    let files = BTreeMap::from([("lib.rs".to_owned(), "mod gone;".to_owned())]);
    match FileGraph::from_sources(&files) {
        Err(LayerError::MissingModule { declared_in, name }) => {
            assert_eq!((declared_in.as_str(), name.as_str()), ("lib.rs", "gone"));
        }
        other => panic!("expected a missing module, got {other:?}"),
    }
    let files = BTreeMap::from([("a.rs".to_owned(), String::new())]);
    assert!(matches!(
        FileGraph::from_sources(&files),
        Err(LayerError::NoRoot)
    ));
}

// ------------------------------------------------------------------------------ the workspace

fn describe(cycle: &Cycle) -> String {
    let mut out = format!("  {}\n", cycle.files.join(" ↔ "));
    for e in &cycle.edges {
        out.push_str(&format!("    {} → {} ({})\n", e.from, e.to, e.via));
    }
    out
}

#[test]
fn production_code_has_no_import_cycle() {
    let root = workspace_root();
    let mut graph = FileGraph::default();
    for krate in CRATES {
        let src = root.join(krate).join("src");
        let crate_graph = scan_dir(&src).unwrap_or_else(|e| panic!("scanning {krate}: {e}"));
        graph.extend_prefixed(crate_graph, &format!("{krate}/src/"));
    }
    let cycles = graph.cycles();
    let files: usize = cycles.iter().map(|c| c.files.len()).sum();
    assert!(
        cycles.is_empty(),
        "{files} files in {} import cycles:\n{}",
        cycles.len(),
        cycles.iter().map(describe).collect::<String>()
    );
}
