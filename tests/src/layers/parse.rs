//! What one file says about modules: the modules it declares, its `use` declarations, the
//! paths in its code, the names it defines. Items under `#[cfg(test)]` are left out: the scan
//! is about production code.

use super::lex::Tok;

/// A module path relative to the file's own module: `[]` is the file's module, `["inner"]` an
/// inline `mod inner { .. }` in it.
pub(crate) type Scope = Vec<String>;

/// What a `use` brings into scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Import {
    /// `use a::b::c;` or `use a::b::c as d;` (`name` is `c` or `d`).
    Named { path: Vec<String>, name: String },
    /// `use a::b::*;` (`path` is `a::b`).
    Glob { path: Vec<String> },
}

/// One `use` declaration's import, where it was written and whether it is exported.
#[derive(Debug, Clone)]
pub(crate) struct Use {
    pub scope: Scope,
    pub import: Import,
    /// `pub` or `pub(...)`: a re-export.
    pub exported: bool,
}

/// A path of two segments or more written in code (`crate::x::y`, `super::Z::new`, `child::f`).
#[derive(Debug, Clone)]
pub(crate) struct CodePath {
    pub scope: Scope,
    pub path: Vec<String>,
}

/// Everything the layer scan reads from one file.
#[derive(Debug, Default)]
pub(crate) struct FileFacts {
    /// `mod name;` declarations: (scope, name).
    pub declared: Vec<(Scope, String)>,
    /// Inline `mod name { .. }` modules, as scopes.
    pub inline: Vec<Scope>,
    /// Item names defined per scope (`fn`, `struct`, `enum`, `trait`, `type`, `const`,
    /// `static`, `union`).
    pub defined: Vec<(Scope, String)>,
    pub uses: Vec<Use>,
    pub paths: Vec<CodePath>,
    /// Every identifier outside `use` declarations, to tell a re-export that the file also
    /// uses from one it only passes on.
    pub mentioned: std::collections::BTreeSet<String>,
}

const ITEM_KEYWORDS: &[&str] = &[
    "fn", "struct", "enum", "trait", "type", "const", "static", "union",
];

/// Reads the facts of one file from its tokens.
pub(crate) fn facts(toks: &[Tok]) -> FileFacts {
    let mut p = Parser {
        toks,
        i: 0,
        facts: FileFacts::default(),
        // Each open brace: the inline module it opens, if any.
        braces: Vec::new(),
    };
    p.run();
    p.facts
}

struct Parser<'a> {
    toks: &'a [Tok],
    i: usize,
    facts: FileFacts,
    braces: Vec<Option<String>>,
}

impl Parser<'_> {
    fn ident(&self, k: usize) -> Option<&str> {
        match self.toks.get(k) {
            Some(Tok::Ident(s)) => Some(s),
            _ => None,
        }
    }

    fn punct(&self, k: usize, c: char) -> bool {
        self.toks.get(k) == Some(&Tok::Punct(c))
    }

    fn scope(&self) -> Scope {
        self.braces.iter().flatten().cloned().collect()
    }

    /// True when the next token is at the top level of the innermost module (not inside a
    /// function, impl or type body).
    fn at_module_level(&self) -> bool {
        self.braces.last().is_none_or(Option::is_some)
    }

    fn run(&mut self) {
        let mut exported = false;
        while self.i < self.toks.len() {
            let i = self.i;
            if self.punct(i, '#') {
                let inner = self.punct(i + 1, '!');
                let is_test = self.attribute();
                if is_test && inner && self.braces.is_empty() {
                    // `#![cfg(test)]` at the top: the whole file is test code.
                    self.facts = FileFacts::default();
                    return;
                }
                if is_test && !inner {
                    self.skip_item();
                    exported = false;
                }
                continue;
            }
            match &self.toks[i] {
                Tok::Punct('{') => {
                    self.braces.push(None);
                    exported = false;
                    self.i += 1;
                }
                Tok::Punct('}') => {
                    self.braces.pop();
                    exported = false;
                    self.i += 1;
                }
                Tok::Punct(';') => {
                    exported = false;
                    self.i += 1;
                }
                Tok::Ident(w) if w == "pub" => {
                    exported = true;
                    self.i += 1;
                    if self.punct(self.i, '(') {
                        self.skip_balanced();
                    }
                }
                Tok::Ident(w) if w == "use" => {
                    self.i += 1;
                    let scope = self.scope();
                    let mut imports = Vec::new();
                    self.use_tree(&[], &mut imports);
                    for import in imports {
                        self.facts.uses.push(Use {
                            scope: scope.clone(),
                            import,
                            exported,
                        });
                    }
                    exported = false;
                }
                Tok::Ident(w) if w == "mod" && self.ident(i + 1).is_some() => {
                    let name = self.ident(i + 1).unwrap_or_default().to_owned();
                    if self.punct(i + 2, '{') {
                        let mut scope = self.scope();
                        scope.push(name.clone());
                        self.facts.inline.push(scope);
                        self.braces.push(Some(name));
                        self.i += 3;
                    } else {
                        self.facts.declared.push((self.scope(), name));
                        self.i += 2;
                    }
                    exported = false;
                }
                Tok::Ident(w) if ITEM_KEYWORDS.contains(&w.as_str()) => {
                    if let Some(name) = self.ident(i + 1) {
                        if self.at_module_level() && name != "_" && !self.punct(i + 2, '!') {
                            self.facts.defined.push((self.scope(), name.to_owned()));
                        }
                    }
                    exported = false;
                    self.i += 1;
                }
                Tok::Ident(_) => self.code_path(),
                Tok::Punct('$') if self.ident(i + 1) == Some("crate") => {
                    // `$crate::x` in a macro body is `crate::x`.
                    self.i += 1;
                    self.code_path();
                }
                _ => self.i += 1,
            }
        }
    }

    /// Reads `#[..]` or `#![..]` at `self.i`; true when it is `cfg(test)` (or `cfg(all(test,
    /// ..))`, test-only as well).
    fn attribute(&mut self) -> bool {
        self.i += 1;
        if self.punct(self.i, '!') {
            self.i += 1;
        }
        let start = self.i;
        self.skip_balanced();
        let body = &self.toks[start..self.i];
        let word = |k: usize| match body.get(k) {
            Some(Tok::Ident(s)) => Some(s.as_str()),
            _ => None,
        };
        word(1) == Some("cfg")
            && (word(3) == Some("test") && body.get(4) == Some(&Tok::Punct(')'))
                || word(3) == Some("all") && word(5) == Some("test"))
    }

    /// Skips from an opening `(`, `[` or `{` at `self.i` past its matching close.
    fn skip_balanced(&mut self) {
        let mut depth = 0usize;
        while let Some(t) = self.toks.get(self.i) {
            self.i += 1;
            match t {
                Tok::Punct('(' | '[' | '{') => depth += 1,
                Tok::Punct(')' | ']' | '}') => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        return;
                    }
                }
                _ => {}
            }
        }
    }

    /// Skips the item after a `#[cfg(test)]`: up to its `;`, or through its `{ .. }` body.
    fn skip_item(&mut self) {
        while let Some(t) = self.toks.get(self.i) {
            match t {
                Tok::Punct(';') => {
                    self.i += 1;
                    return;
                }
                Tok::Punct('{') => {
                    self.skip_balanced();
                    return;
                }
                Tok::Punct('(' | '[') => self.skip_balanced(),
                Tok::Punct('#') => {
                    // A further attribute on the same item.
                    self.attribute();
                }
                _ => self.i += 1,
            }
        }
    }

    /// Reads a use tree at `self.i` under `prefix`, through its closing `;`, `,` or `}` (the
    /// closer itself is consumed only when it is `;`).
    fn use_tree(&mut self, prefix: &[String], out: &mut Vec<Import>) {
        let mut path = prefix.to_vec();
        if self.toks.get(self.i) == Some(&Tok::PathSep) {
            // `::name`: an external crate.
            path.push("::".to_owned());
            self.i += 1;
        }
        loop {
            match self.toks.get(self.i) {
                Some(Tok::Ident(w)) if w == "as" => {
                    let alias = self.ident(self.i + 1).unwrap_or("_").to_owned();
                    self.i += 2;
                    if alias != "_" {
                        out.push(named(path.clone(), alias));
                    }
                    break;
                }
                Some(Tok::Ident(w)) => {
                    path.push(w.clone());
                    self.i += 1;
                }
                Some(Tok::PathSep) => self.i += 1,
                Some(Tok::Punct('*')) => {
                    self.i += 1;
                    out.push(Import::Glob { path: path.clone() });
                    break;
                }
                Some(Tok::Punct('{')) => {
                    self.i += 1;
                    while !self.punct(self.i, '}') && self.i < self.toks.len() {
                        self.use_tree(&path, out);
                        if self.punct(self.i, ',') {
                            self.i += 1;
                        }
                    }
                    self.i += 1;
                    break;
                }
                _ => {
                    if path.len() > prefix.len() {
                        out.push(named(path.clone(), String::new()));
                    }
                    break;
                }
            }
        }
        if self.punct(self.i, ';') {
            self.i += 1;
        }
    }

    /// Records the path starting at `self.i` when it has two segments or more.
    fn code_path(&mut self) {
        let starts_path = self.i == 0 || self.toks[self.i - 1] != Tok::PathSep;
        let mut path = Vec::new();
        while let Some(w) = self.ident(self.i) {
            path.push(w.to_owned());
            if self.toks.get(self.i + 1) == Some(&Tok::PathSep) && self.ident(self.i + 2).is_some()
            {
                self.i += 2;
            } else {
                self.i += 1;
                break;
            }
        }
        self.facts.mentioned.extend(path.iter().cloned());
        if starts_path && path.len() >= 2 {
            self.facts.paths.push(CodePath {
                scope: self.scope(),
                path,
            });
        }
    }
}

/// `use a::b` imports `b`; `use a::{self}` imports `a`; an empty `name` means "the last
/// segment".
fn named(mut path: Vec<String>, name: String) -> Import {
    if path.last().is_some_and(|s| s == "self") {
        path.pop();
    }
    let name = if name.is_empty() {
        path.last().cloned().unwrap_or_default()
    } else {
        name
    };
    Import::Named { path, name }
}
