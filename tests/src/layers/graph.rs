//! The module tree of a crate, the resolution of paths to the file that defines what they
//! name, and the file-level dependency graph with its cycles.

use std::collections::{BTreeMap, BTreeSet};

use super::lex::tokens;
use super::parse::{facts, FileFacts, Import, Scope};
use super::LayerError;

/// A dependency between two files and the first path that makes it, to explain a cycle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge {
    /// The file that uses.
    pub from: String,
    /// The file that defines what is used.
    pub to: String,
    /// The path in `from` that names it (`crate::pump::Cmd`).
    pub via: String,
}

/// Files that depend on each other in a ring: every file reaches every other one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cycle {
    /// The files, sorted.
    pub files: Vec<String>,
    /// The dependencies between them.
    pub edges: Vec<Edge>,
}

/// Which file depends on which, in the production code of one or more crates.
#[derive(Debug, Clone, Default)]
pub struct FileGraph {
    /// from → (to → via).
    edges: BTreeMap<String, BTreeMap<String, String>>,
}

impl FileGraph {
    /// The graph of one crate's sources, `files` keyed by their path relative to the source
    /// directory (`lib.rs`, `ops/mod.rs`, `queue/cron.rs`). The crate roots are `lib.rs` and
    /// `main.rs`, whichever are there; files no root declares are not read.
    pub fn from_sources(files: &BTreeMap<String, String>) -> Result<FileGraph, LayerError> {
        let roots: Vec<&str> = ["lib.rs", "main.rs"]
            .into_iter()
            .filter(|r| files.contains_key(*r))
            .collect();
        if roots.is_empty() {
            return Err(LayerError::NoRoot);
        }
        let mut graph = FileGraph::default();
        for root in roots {
            let tree = Tree::build(files, root)?;
            tree.add_edges(&mut graph);
        }
        Ok(graph)
    }

    /// Adds another graph's dependencies, each file name prefixed with `prefix` (to tell
    /// crates apart: `driver/src/`).
    pub fn extend_prefixed(&mut self, other: FileGraph, prefix: &str) {
        for (from, tos) in other.edges {
            for (to, via) in tos {
                self.add(format!("{prefix}{from}"), format!("{prefix}{to}"), via);
            }
        }
    }

    /// Every dependency, in order.
    pub fn edges(&self) -> Vec<Edge> {
        self.edges
            .iter()
            .flat_map(|(from, tos)| {
                tos.iter().map(move |(to, via)| Edge {
                    from: from.clone(),
                    to: to.clone(),
                    via: via.clone(),
                })
            })
            .collect()
    }

    /// The import cycles: each set of two files or more that all reach each other (a strongly
    /// connected component), sorted.
    pub fn cycles(&self) -> Vec<Cycle> {
        let mut tarjan = Tarjan::default();
        let nodes: BTreeSet<&str> = self
            .edges
            .iter()
            .flat_map(|(from, tos)| {
                std::iter::once(from.as_str()).chain(tos.keys().map(|t| t.as_str()))
            })
            .collect();
        for node in nodes {
            if !tarjan.index.contains_key(node) {
                tarjan.visit(self, node);
            }
        }
        let mut cycles: Vec<Cycle> = tarjan
            .components
            .into_iter()
            .filter(|c| c.len() > 1)
            .map(|mut files| {
                files.sort();
                let inside: BTreeSet<&String> = files.iter().collect();
                let edges = self
                    .edges()
                    .into_iter()
                    .filter(|e| inside.contains(&e.from) && inside.contains(&e.to))
                    .collect();
                Cycle { files, edges }
            })
            .collect();
        cycles.sort_by(|a, b| a.files.cmp(&b.files));
        cycles
    }

    fn add(&mut self, from: String, to: String, via: String) {
        if from != to {
            self.edges.entry(from).or_default().entry(to).or_insert(via);
        }
    }
}

/// Tarjan's strongly connected components, recursive (the graphs are a few dozen files).
#[derive(Default)]
struct Tarjan<'g> {
    next: usize,
    index: BTreeMap<&'g str, usize>,
    low: BTreeMap<&'g str, usize>,
    stack: Vec<&'g str>,
    on_stack: BTreeSet<&'g str>,
    components: Vec<Vec<String>>,
}

impl<'g> Tarjan<'g> {
    fn visit(&mut self, graph: &'g FileGraph, node: &'g str) {
        self.index.insert(node, self.next);
        self.low.insert(node, self.next);
        self.next += 1;
        self.stack.push(node);
        self.on_stack.insert(node);
        for to in graph.edges.get(node).into_iter().flat_map(|t| t.keys()) {
            let to = to.as_str();
            if !self.index.contains_key(to) {
                self.visit(graph, to);
                let low = self.low[node].min(self.low[to]);
                self.low.insert(node, low);
            } else if self.on_stack.contains(to) {
                let low = self.low[node].min(self.index[to]);
                self.low.insert(node, low);
            }
        }
        if self.low[node] == self.index[node] {
            let mut component = Vec::new();
            while let Some(top) = self.stack.pop() {
                self.on_stack.remove(top);
                component.push(top.to_owned());
                if top == node {
                    break;
                }
            }
            self.components.push(component);
        }
    }
}

// ------------------------------------------------------------------------------ module tree

/// One module of a crate: a file, or an inline `mod x { .. }` inside one.
#[derive(Debug, Default)]
struct Module {
    file: String,
    parent: Option<usize>,
    children: BTreeMap<String, usize>,
    defined: BTreeSet<String>,
    /// name → (module the `use` is written in, path).
    imports: BTreeMap<String, (usize, Vec<String>)>,
    globs: Vec<(usize, Vec<String>)>,
}

/// What a path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Res {
    Module(usize),
    /// An item defined in this module.
    Item(usize),
}

/// A name looked up in one module.
enum Lookup {
    Found(Res),
    /// Brought in from another crate (or the standard library).
    External,
    Missing,
}

/// Deep enough for any real chain of re-exports; stops `use a::*` / `use b::*` loops.
const MAX_DEPTH: usize = 24;

/// A crate's modules, the facts of each file, and which module each file's scopes are.
struct Tree {
    modules: Vec<Module>,
    files: BTreeMap<String, (FileFacts, BTreeMap<Scope, usize>)>,
}

impl Tree {
    fn build(sources: &BTreeMap<String, String>, root: &str) -> Result<Tree, LayerError> {
        let mut tree = Tree {
            modules: vec![Module {
                file: root.to_owned(),
                ..Module::default()
            }],
            files: BTreeMap::new(),
        };
        let mut pending = vec![(root.to_owned(), 0usize)];
        while let Some((file, module)) = pending.pop() {
            let text = sources
                .get(&file)
                .ok_or_else(|| LayerError::MissingFile { path: file.clone() })?;
            let facts = facts(&tokens(text));
            let mut scopes = BTreeMap::from([(Scope::new(), module)]);
            for scope in &facts.inline {
                let parent = scopes[&scope[..scope.len() - 1]];
                let id = tree.child(parent, &scope[scope.len() - 1], &file);
                scopes.insert(scope.clone(), id);
            }
            for (scope, name) in &facts.declared {
                let Some(path) = child_file(sources, &file, scope, name)? else {
                    continue;
                };
                let id = tree.child(scopes[scope], name, &path);
                pending.push((path, id));
            }
            tree.files.insert(file, (facts, scopes));
        }
        tree.fill_names();
        Ok(tree)
    }

    fn child(&mut self, parent: usize, name: &str, file: &str) -> usize {
        let id = self.modules.len();
        self.modules.push(Module {
            file: file.to_owned(),
            parent: Some(parent),
            ..Module::default()
        });
        self.modules[parent].children.insert(name.to_owned(), id);
        id
    }

    fn fill_names(&mut self) {
        for (facts, scopes) in self.files.values() {
            for (scope, name) in &facts.defined {
                self.modules[scopes[scope]].defined.insert(name.clone());
            }
            for u in &facts.uses {
                let m = scopes[&u.scope];
                match &u.import {
                    Import::Named { path, name } => {
                        self.modules[m]
                            .imports
                            .entry(name.clone())
                            .or_insert((m, path.clone()));
                    }
                    Import::Glob { path } => self.modules[m].globs.push((m, path.clone())),
                }
            }
        }
    }

    fn add_edges(&self, graph: &mut FileGraph) {
        for (file, (facts, scopes)) in &self.files {
            for u in &facts.uses {
                let m = scopes[&u.scope];
                let (path, name) = match &u.import {
                    Import::Named { path, name } => (path, Some(name)),
                    Import::Glob { path } => (path, None),
                };
                let Some(res) = self.resolve(m, path, 0) else {
                    continue;
                };
                // A module passing on what its own submodules define depends on them only
                // if it also uses the name itself.
                let passes_on = u.exported && self.within(self.module_of(res), m);
                if passes_on && !name.is_some_and(|n| facts.mentioned.contains(n)) {
                    continue;
                }
                graph.add(file.clone(), self.file_of(res), path.join("::"));
            }
            for p in &facts.paths {
                if let Some(res) = self.resolve(scopes[&p.scope], &p.path, 0) {
                    graph.add(file.clone(), self.file_of(res), p.path.join("::"));
                }
            }
        }
    }

    fn module_of(&self, res: Res) -> usize {
        match res {
            Res::Module(m) | Res::Item(m) => m,
        }
    }

    fn file_of(&self, res: Res) -> String {
        self.modules[self.module_of(res)].file.clone()
    }

    /// True when `m` is `ancestor` or inside it.
    fn within(&self, mut m: usize, ancestor: usize) -> bool {
        loop {
            if m == ancestor {
                return true;
            }
            match self.modules[m].parent {
                Some(p) => m = p,
                None => return false,
            }
        }
    }

    /// What `path`, written in module `from`, names; `None` when it is outside the crate.
    fn resolve(&self, from: usize, path: &[String], depth: usize) -> Option<Res> {
        if depth > MAX_DEPTH {
            return None;
        }
        let first = path.first()?;
        let (mut cur, rest) = match first.as_str() {
            "::" => return None,
            "crate" => (0, &path[1..]),
            "self" => (from, &path[1..]),
            "super" => {
                let mut m = from;
                let mut k = 0;
                while path.get(k).is_some_and(|s| s == "super") {
                    m = self.modules[m].parent?;
                    k += 1;
                }
                (m, &path[k..])
            }
            _ => match self.lookup(from, first, depth) {
                Lookup::Found(Res::Module(m)) => (m, &path[1..]),
                Lookup::Found(item) => return Some(item),
                Lookup::External | Lookup::Missing => return None,
            },
        };
        for seg in rest {
            match self.lookup(cur, seg, depth) {
                Lookup::Found(Res::Module(m)) => cur = m,
                Lookup::Found(item) => return Some(item),
                Lookup::External => return None,
                // Not seen declared (made by a macro, say): taken as defined where named.
                Lookup::Missing => return Some(Res::Item(cur)),
            }
        }
        Some(Res::Module(cur))
    }

    fn lookup(&self, m: usize, name: &str, depth: usize) -> Lookup {
        let module = &self.modules[m];
        if let Some(&child) = module.children.get(name) {
            return Lookup::Found(Res::Module(child));
        }
        if let Some((at, path)) = module.imports.get(name) {
            return match self.resolve(*at, path, depth + 1) {
                Some(res) => Lookup::Found(res),
                None => Lookup::External,
            };
        }
        if module.defined.contains(name) {
            return Lookup::Found(Res::Item(m));
        }
        for (at, path) in &module.globs {
            if let Some(Res::Module(g)) = self.resolve(*at, path, depth + 1) {
                if g != m && depth < MAX_DEPTH {
                    match self.lookup(g, name, depth + 1) {
                        Lookup::Missing => {}
                        found => return found,
                    }
                }
            }
        }
        Lookup::Missing
    }
}

/// The file of `mod name;` declared in `file` (inside its inline modules `scope`): `name.rs`
/// or `name/mod.rs` in the declaring module's directory. `None` for a `tests.rs` (test code).
fn child_file(
    sources: &BTreeMap<String, String>,
    file: &str,
    scope: &[String],
    name: &str,
) -> Result<Option<String>, LayerError> {
    let (dir, stem) = match file.rsplit_once('/') {
        Some((dir, base)) => (format!("{dir}/"), base.trim_end_matches(".rs")),
        None => (String::new(), file.trim_end_matches(".rs")),
    };
    let mut base = if matches!(stem, "lib" | "main" | "mod") {
        dir
    } else {
        format!("{dir}{stem}/")
    };
    for inner in scope {
        base.push_str(inner);
        base.push('/');
    }
    let flat = format!("{base}{name}.rs");
    let nested = format!("{base}{name}/mod.rs");
    if name == "tests" {
        return Ok(None);
    }
    if sources.contains_key(&flat) {
        Ok(Some(flat))
    } else if sources.contains_key(&nested) {
        Ok(Some(nested))
    } else {
        Err(LayerError::MissingModule {
            declared_in: file.to_owned(),
            name: name.to_owned(),
        })
    }
}
