//! The documentation names only what the code has.
//!
//! Every `Type::member` and `ops::Name` in a code span or a Rust code block of README.md,
//! docs/**/*.md and the publishable crates' READMEs must exist in the sources of those crates:
//! `Type` a `pub struct|enum|trait|type` of core, driver, broker or an adapter, and `member` one
//! of its `pub fn`/`pub const`/fields/variants (in an `impl … Type` block, a trait impl, or the
//! type's own body), or an operation of `core/src/ops`. The sources are read as text, so the
//! check needs no build of what it checks and cannot drift from it.
//!
//! Table columns that list other clients' APIs (headers naming `bunqueue-client` or starting
//! with `TS`) are left out: those names belong to bunqueue's clients, not to autobatch.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};

/// Types named in the docs that are not autobatch's: standard library, runtimes, futures.
/// Anything else with an upper-case name must be a public type of the workspace.
const FOREIGN_TYPES: &[&str] = &[
    "Self",
    "Arc",
    "Pin",
    "Box",
    "Duration",
    "Instant",
    "Option",
    "Result",
    "String",
    "Vec",
    "StreamExt",
    "Stream",
    "TcpStream",
    "SocketAddr",
    "BTreeMap",
    "HashMap",
    "StatusCode",
];

/// Members named in the docs that come from a trait implemented outside the scanned sources
/// (a derive or a blanket impl), with the reason they exist.
/// (Derives are read from the sources: `#[derive(Default)]` gives a type `default`.)
const TRAIT_MEMBERS: &[(&str, &str, &str)] = &[];

/// Module paths whose items are the workspace's own: a path rooted anywhere else
/// (`std::`, `tokio::`, …) is not checked.
const OWN_ROOTS: &[&str] = &[
    "autobatch_core",
    "autobatch_driver",
    "autobatch_broker",
    "autobatch_tokio",
    "autobatch_smol",
    "autobatch_async_std",
    "ops",
    "wire",
    "session",
    "batch",
    "store",
];

// ---------------------------------------------------------------------------------------------
// The sources: which public types exist, and what each has.

/// What the sources declare: each public type's members, and the operations' names.
#[derive(Default, Debug)]
struct PublicApi {
    /// Type name → its public methods, constants, fields and variants (union over every type
    /// of that name: an adapter's `Client` alias shares the driver's `Client`'s members).
    types: HashMap<String, HashSet<String>>,
    /// Members found in `impl` blocks, kept apart until their type is known to be public.
    impl_members: HashMap<String, HashSet<String>>,
    /// Every identifier of `core/src/ops` outside comments and strings: an operation declared
    /// through a macro has its name there even when no `pub struct Name` is written out.
    ops_words: HashSet<String>,
}

impl PublicApi {
    /// Reads one source file.
    fn add_source(&mut self, src: &str, is_ops: bool) {
        let tokens = tokenize(&blank_comments_and_literals(src));
        if is_ops {
            self.ops_words.extend(tokens.iter().filter_map(|t| match t {
                Tok::Ident(s) => Some(s.clone()),
                Tok::Punct(_) => None,
            }));
        }
        // `#[derive(Default, Clone)]` gives the next type `default()` and `clone()`.
        let mut derived: Vec<String> = Vec::new();
        let mut i = 0;
        while i < tokens.len() {
            if tokens[i].is_punct('#') && at(&tokens, i + 2).is("derive") {
                let end = close_of(&tokens, i + 1);
                derived.extend(
                    tokens[i + 3..end]
                        .iter()
                        .filter_map(Tok::ident)
                        .map(str::to_lowercase),
                );
                i = end;
                continue;
            }
            if matches!(tokens[i], Tok::Punct('{' | '}' | ';')) {
                derived.clear();
            }
            if tokens[i].is("impl") && starts_item(&tokens, i) {
                if let Some((ty, members)) = read_impl(&tokens, i) {
                    self.impl_members.entry(ty).or_default().extend(members);
                }
            } else if tokens[i].is("pub") && !tokens.get(i + 1).is_some_and(|t| t.is_punct('(')) {
                if let (Some(kind), Some(Tok::Ident(name))) = (tokens.get(i + 1), tokens.get(i + 2))
                {
                    let members = match kind {
                        k if k.is("struct") || k.is("union") => {
                            Some(body_members(&tokens, i + 3, Body::Struct))
                        }
                        k if k.is("enum") => Some(body_members(&tokens, i + 3, Body::Enum)),
                        k if k.is("trait") => Some(body_members(&tokens, i + 3, Body::Trait)),
                        k if k.is("type") => Some(HashSet::new()),
                        _ => None,
                    };
                    if let Some(members) = members {
                        let entry = self.types.entry(name.clone()).or_default();
                        entry.extend(members);
                        entry.extend(derived.drain(..));
                    }
                }
            }
            i += 1;
        }
    }

    /// Joins the `impl` members to the public types they belong to.
    fn finish(mut self) -> PublicApi {
        for (ty, members) in std::mem::take(&mut self.impl_members) {
            if let Some(known) = self.types.get_mut(&ty) {
                known.extend(members);
            }
        }
        self
    }

    fn is_op(&self, name: &str) -> bool {
        self.ops_words.contains(name)
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Punct(char),
}

impl Tok {
    fn is(&self, word: &str) -> bool {
        matches!(self, Tok::Ident(s) if s == word)
    }
    fn is_punct(&self, c: char) -> bool {
        *self == Tok::Punct(c)
    }
    fn ident(&self) -> Option<&str> {
        match self {
            Tok::Ident(s) => Some(s),
            Tok::Punct(_) => None,
        }
    }
}

/// `src` with comments, string, byte-string and char literals replaced by spaces (newlines
/// kept), so that braces inside them do not count.
fn blank_comments_and_literals(src: &str) -> String {
    let c: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let blank = |out: &mut String, ch: char| out.push(if ch == '\n' { '\n' } else { ' ' });
    let mut i = 0;
    while i < c.len() {
        let next = c.get(i + 1).copied();
        if c[i] == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                blank(&mut out, c[i]);
                i += 1;
            }
        } else if c[i] == '/' && next == Some('*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
        } else if c[i] == 'r' && matches!(next, Some('"') | Some('#')) && raw_string_prefix(&c, i) {
            // A raw string: r"…", r#"…"#, ….
            let mut j = i + 1;
            let mut hashes = 0;
            while c.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if c.get(j) != Some(&'"') {
                out.push(c[i]);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= c.len() {
                    break;
                }
                if c[j] == '"' && (0..hashes).all(|h| c.get(j + 1 + h) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            for &ch in &c[i..j.min(c.len())] {
                blank(&mut out, ch);
            }
            i = j;
        } else if c[i] == '"' {
            blank(&mut out, c[i]);
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    blank(&mut out, c[i]);
                    i += 1;
                }
                if i < c.len() {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
            if i < c.len() {
                blank(&mut out, c[i]);
                i += 1;
            }
        } else if c[i] == '\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a): only the former is blanked.
            let close = if next == Some('\\') {
                (i + 3..c.len().min(i + 12)).find(|&j| c[j] == '\'')
            } else if c.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match close {
                Some(end) => {
                    for &ch in &c[i..=end] {
                        blank(&mut out, ch);
                    }
                    i = end + 1;
                }
                None => {
                    out.push(c[i]);
                    i += 1;
                }
            }
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// Whether the `r` at `i` starts a raw string (`r"…"`, `br"…"`), not the end of a name.
fn raw_string_prefix(c: &[char], i: usize) -> bool {
    let ident = |j: usize| c[j].is_alphanumeric() || c[j] == '_';
    match i {
        0 => true,
        1 => !ident(0) || c[0] == 'b',
        _ => !ident(i - 1) || (c[i - 1] == 'b' && !ident(i - 2)),
    }
}

/// The token at `i`, or a neutral one past the end.
fn at(tokens: &[Tok], i: usize) -> &Tok {
    static END: Tok = Tok::Punct(' ');
    tokens.get(i).unwrap_or(&END)
}

fn tokenize(src: &str) -> Vec<Tok> {
    let mut tokens = Vec::new();
    let mut chars = src.chars().peekable();
    while let Some(&ch) = chars.peek() {
        if ch.is_alphabetic() || ch == '_' {
            let mut word = String::new();
            while let Some(&ch) = chars.peek() {
                if ch.is_alphanumeric() || ch == '_' {
                    word.push(ch);
                    chars.next();
                } else {
                    break;
                }
            }
            tokens.push(Tok::Ident(word));
        } else if ch.is_whitespace() || ch.is_ascii_digit() {
            chars.next();
        } else {
            tokens.push(Tok::Punct(ch));
            chars.next();
        }
    }
    tokens
}

/// Whether the `impl` at `i` starts an item (not `impl Trait` in an argument or return type).
fn starts_item(tokens: &[Tok], i: usize) -> bool {
    i == 0
        || matches!(&tokens[i - 1], Tok::Punct('}' | ';' | ']' | '{'))
        || tokens[i - 1].is("unsafe")
        || tokens[i - 1].is("default")
}

/// The index just past the group opened at `open` (`{`, `(` or `[`).
fn close_of(tokens: &[Tok], open: usize) -> usize {
    let mut depth = 0i32;
    for (j, t) in tokens.iter().enumerate().skip(open) {
        match t {
            Tok::Punct('{' | '(' | '[') => depth += 1,
            Tok::Punct('}' | ')' | ']') => {
                depth -= 1;
                if depth == 0 {
                    return j + 1;
                }
            }
            _ => {}
        }
    }
    tokens.len()
}

/// Reads `impl<…> [Trait for] Type<…> [where …] { … }` at `i`: the type's last path segment
/// and the members the block gives it.
fn read_impl(tokens: &[Tok], i: usize) -> Option<(String, HashSet<String>)> {
    // The header runs to the first `{` outside angle brackets (a `where` clause has none).
    let mut j = i + 1;
    let mut angle = 0i32;
    let mut header = Vec::new();
    while j < tokens.len() {
        match &tokens[j] {
            Tok::Punct('<') => angle += 1,
            Tok::Punct('>') if !tokens[j - 1].is_punct('-') => angle -= 1,
            Tok::Punct('{') if angle <= 0 => break,
            Tok::Punct(';') if angle <= 0 => return None,
            _ => {}
        }
        header.push((angle, &tokens[j]));
        j += 1;
    }
    let open = j;
    // The self type: after a top-level `for`, else after the impl's own generics.
    let for_at = header.iter().position(|(a, t)| *a == 0 && t.is("for"));
    let is_trait_impl = for_at.is_some();
    let start = match for_at {
        Some(p) => p + 1,
        None => header.iter().position(|(a, _)| *a == 0).unwrap_or(0),
    };
    let mut ty = None;
    for (a, t) in &header[start..] {
        if *a != 0 || t.is("where") || t.is_punct('<') {
            break;
        }
        if let Tok::Ident(s) = t {
            if s != "dyn" {
                ty = Some(s.clone());
            }
        }
    }
    let members = impl_body_members(tokens, open, is_trait_impl);
    Some((ty?, members))
}

/// The members an `impl` block's body (opened at `open`) gives its type: `pub fn`, `pub const`,
/// every `fn`/`const`/`type` of a trait impl, and the `name:` entries of a setter macro.
fn impl_body_members(tokens: &[Tok], open: usize, is_trait_impl: bool) -> HashSet<String> {
    let end = close_of(tokens, open);
    let mut members = HashSet::new();
    let mut j = open + 1;
    while j < end.saturating_sub(1) {
        let t = &tokens[j];
        if matches!(t, Tok::Punct('{' | '(' | '[')) {
            j = close_of(tokens, j);
            continue;
        }
        // A macro invocation at item level: `setters! { name: Type, name = Type, … }`.
        if t.ident().is_some() && at(tokens, j + 1).is_punct('!') {
            if let Some(k) = (j + 2..end).find(|&k| matches!(tokens[k], Tok::Punct('{' | '('))) {
                let stop = close_of(tokens, k);
                for m in k + 1..stop.saturating_sub(1) {
                    if let Tok::Ident(name) = &tokens[m] {
                        let colon =
                            at(tokens, m + 1).is_punct(':') && !at(tokens, m + 2).is_punct(':');
                        let equals = at(tokens, m + 1).is_punct('=')
                            && !matches!(at(tokens, m + 2), Tok::Punct('=' | '>'));
                        let after = m > 0 && matches!(tokens[m - 1], Tok::Punct(':' | '['));
                        if (colon || equals) && !after {
                            members.insert(name.clone());
                        }
                    }
                }
                j = stop;
                continue;
            }
        }
        let public = t.is("pub") && !at(tokens, j + 1).is_punct('(');
        if public || (is_trait_impl && (t.is("fn") || t.is("const") || t.is("type"))) {
            let mut k = if public { j + 1 } else { j };
            while at(tokens, k).is("const") && at(tokens, k + 1).is("fn")
                || at(tokens, k).is("async")
                || at(tokens, k).is("unsafe")
            {
                k += 1;
            }
            if at(tokens, k).is("fn") || at(tokens, k).is("const") || at(tokens, k).is("type") {
                if let Some(name) = at(tokens, k + 1).ident() {
                    members.insert(name.to_owned());
                }
            }
        }
        j += 1;
    }
    members
}

#[derive(Clone, Copy)]
enum Body {
    Struct,
    Enum,
    Trait,
}

/// The members a type's own body gives it: a struct's `pub` fields, an enum's variants, a
/// trait's `fn`s, `const`s and `type`s. `from` is just past the type's name.
fn body_members(tokens: &[Tok], from: usize, body: Body) -> HashSet<String> {
    let mut members = HashSet::new();
    // Skip generics and a where clause to the body; a unit or tuple struct has none.
    let mut j = from;
    while j < tokens.len() && !tokens[j].is_punct('{') {
        if tokens[j].is_punct(';') || (tokens[j].is_punct('(') && matches!(body, Body::Struct)) {
            return members;
        }
        j += 1;
    }
    let end = close_of(tokens, j);
    let mut k = j + 1;
    let mut item_start = true;
    while k < end.saturating_sub(1) {
        let t = &tokens[k];
        match t {
            Tok::Punct('#') => {
                // An attribute: `#[…]`.
                k = close_of(tokens, k + 1);
                continue;
            }
            Tok::Punct('{' | '(' | '[') => {
                k = close_of(tokens, k);
                continue;
            }
            Tok::Punct(',') | Tok::Punct(';') => item_start = true,
            Tok::Ident(name) => match body {
                Body::Enum if item_start => {
                    members.insert(name.clone());
                    item_start = false;
                }
                Body::Struct if t.is("pub") && !at(tokens, k + 1).is_punct('(') => {
                    if let Some(field) = at(tokens, k + 1).ident() {
                        members.insert(field.to_owned());
                    }
                }
                Body::Trait if t.is("fn") || t.is("const") || t.is("type") => {
                    if let Some(member) = at(tokens, k + 1).ident() {
                        members.insert(member.to_owned());
                    }
                }
                _ => item_start = false,
            },
            _ => item_start = false,
        }
        k += 1;
    }
    members
}

// ---------------------------------------------------------------------------------------------
// The docs: which items they name.

/// One item the docs name, where.
#[derive(Debug, Clone, PartialEq)]
struct Mention {
    line: usize,
    path: String,
}

/// The `a::B::c` paths in the code spans and Rust code blocks of `markdown`, leaving out table
/// columns about other clients.
fn mentions(markdown: &str) -> Vec<Mention> {
    let mut found = Vec::new();
    let mut fence: Option<bool> = None; // Some(checked?) inside a fenced block
    let mut skipped_columns: Vec<bool> = Vec::new();
    let mut in_table = false;
    for (n, line) in markdown.lines().enumerate() {
        let line_no = n + 1;
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") {
            fence = match fence {
                Some(_) => None,
                None => {
                    let lang = trimmed.trim_start_matches('`').trim();
                    Some(lang.is_empty() || lang.starts_with("rust"))
                }
            };
            continue;
        }
        if let Some(checked) = fence {
            if checked {
                found.extend(paths(line).into_iter().map(|path| Mention {
                    line: line_no,
                    path,
                }));
            }
            continue;
        }
        let spans: Vec<String> = if trimmed.starts_with('|') {
            let cells = table_cells(trimmed);
            if !in_table {
                // The header row decides which columns are about other clients.
                in_table = true;
                skipped_columns = cells.iter().map(|c| is_other_client_header(c)).collect();
                continue;
            }
            cells
                .iter()
                .enumerate()
                .filter(|(i, _)| !skipped_columns.get(*i).copied().unwrap_or(false))
                .flat_map(|(_, c)| code_spans(c))
                .collect()
        } else {
            in_table = false;
            code_spans(line)
        };
        for span in spans {
            found.extend(paths(&span).into_iter().map(|path| Mention {
                line: line_no,
                path,
            }));
        }
    }
    found
}

fn is_other_client_header(cell: &str) -> bool {
    let cell = cell.trim();
    cell.contains("bunqueue-client") || cell.starts_with("TS ") || cell.starts_with("TS`")
}

/// A table row's cells, split on `|` that is not escaped as `\|`.
fn table_cells(row: &str) -> Vec<String> {
    let row = row.trim().trim_start_matches('|');
    let mut cells = vec![String::new()];
    let mut prev = '\0';
    for ch in row.chars() {
        if ch == '|' && prev != '\\' {
            cells.push(String::new());
        } else {
            cells.last_mut().expect("one cell at least").push(ch);
        }
        prev = ch;
    }
    if cells.last().is_some_and(|c| c.trim().is_empty()) {
        cells.pop();
    }
    cells
}

/// The contents of the `code spans` of a line of text.
fn code_spans(text: &str) -> Vec<String> {
    let mut spans = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            i += 1;
            continue;
        }
        let ticks = chars[i..].iter().take_while(|&&c| c == '`').count();
        let start = i + ticks;
        let mut j = start;
        let mut end = None;
        while j < chars.len() {
            if chars[j] == '`' {
                let run = chars[j..].iter().take_while(|&&c| c == '`').count();
                if run == ticks {
                    end = Some(j);
                    break;
                }
                j += run;
            } else {
                j += 1;
            }
        }
        match end {
            Some(e) => {
                spans.push(chars[start..e].iter().collect());
                i = e + ticks;
            }
            None => i = start,
        }
    }
    spans
}

/// The `a::b::C` paths in a piece of code.
fn paths(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let chars: Vec<char> = code.chars().collect();
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    let mut i = 0;
    while i < chars.len() {
        if !(chars[i].is_alphabetic() || chars[i] == '_') || (i > 0 && is_word(chars[i - 1])) {
            i += 1;
            continue;
        }
        let mut segments = Vec::new();
        let mut j = i;
        loop {
            let start = j;
            while j < chars.len() && is_word(chars[j]) {
                j += 1;
            }
            segments.push(chars[start..j].iter().collect::<String>());
            let more = chars.get(j) == Some(&':')
                && chars.get(j + 1) == Some(&':')
                && chars
                    .get(j + 2)
                    .is_some_and(|&c| c.is_alphabetic() || c == '_');
            if !more {
                break;
            }
            j += 2;
        }
        if segments.len() > 1 {
            out.push(segments.join("::"));
        }
        i = j.max(i + 1);
    }
    out
}

// ---------------------------------------------------------------------------------------------
// The check.

/// Why a mention names nothing, or `None` when it names something real (or not ours).
fn problem(api: &PublicApi, path: &str) -> Option<String> {
    let segments: Vec<&str> = path.split("::").collect();
    let root = segments[0];
    let starts_lower = root.chars().next().is_some_and(|c| c.is_lowercase());
    if starts_lower && !OWN_ROOTS.contains(&root) {
        return None; // std::…, tokio::…: not ours
    }
    if let Some(at) = segments.iter().position(|s| *s == "ops") {
        if let Some(op) = segments.get(at + 1) {
            if op.chars().next().is_some_and(char::is_uppercase) && !api.is_op(op) {
                return Some(format!("no operation `{op}` in core/src/ops"));
            }
        }
    }
    // The first upper-case segment followed by another names a type and its member.
    let at = segments
        .iter()
        .position(|s| s.chars().next().is_some_and(char::is_uppercase))?;
    let ty = segments[at];
    let member = segments.get(at + 1)?;
    if FOREIGN_TYPES.contains(&ty) {
        return None;
    }
    if TRAIT_MEMBERS
        .iter()
        .any(|(t, m, _)| *t == ty && m == member)
    {
        return None;
    }
    match api.types.get(ty) {
        Some(members) if members.contains(*member) => None,
        Some(_) => Some(format!(
            "`{ty}` has no pub fn, const, field or variant `{member}`"
        )),
        None if api.is_op(ty) => (!api.is_op(member))
            .then(|| format!("operation `{ty}` has no `{member}` in core/src/ops")),
        None => Some(format!(
            "`{ty}` is not a public type of the workspace (nor listed in FOREIGN_TYPES)"
        )),
    }
}

fn check(api: &PublicApi, file: &str, markdown: &str) -> Vec<String> {
    let mut seen = BTreeSet::new();
    mentions(markdown)
        .into_iter()
        .filter_map(|m| {
            let why = problem(api, &m.path)?;
            seen.insert(m.path.clone())
                .then(|| format!("{file}:{}: `{}`: {why}", m.line, m.path))
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Reading the workspace.

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the workspace")
        .to_owned()
}

fn files_under(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            files_under(&path, ext, out);
        } else if path.extension().is_some_and(|e| e == ext) {
            out.push(path);
        }
    }
}

const CRATES: &[&str] = &[
    "core",
    "driver",
    "broker",
    "runtime-tokio",
    "runtime-smol",
    "runtime-async-std",
];

fn workspace_api() -> PublicApi {
    let root = root();
    let mut api = PublicApi::default();
    for krate in CRATES {
        let mut sources = Vec::new();
        files_under(&root.join(krate).join("src"), "rs", &mut sources);
        for path in sources {
            let src = std::fs::read_to_string(&path).expect("a readable source file");
            let is_ops = path.starts_with(root.join("core/src/ops"));
            api.add_source(&src, is_ops);
        }
    }
    api.finish()
}

fn workspace_docs() -> Vec<PathBuf> {
    let root = root();
    let mut docs = vec![root.join("README.md")];
    files_under(&root.join("docs"), "md", &mut docs);
    docs.extend(
        CRATES
            .iter()
            .map(|k| root.join(k).join("README.md"))
            .filter(|p| p.exists()),
    );
    docs
}

#[test]
fn docs_name_only_what_the_code_has() {
    let api = workspace_api();
    assert!(
        api.types.get("Queue").is_some_and(|m| m.contains("add")),
        "the source scan found no `Queue::add`: the scanner itself is broken"
    );
    let root = root();
    let mut problems = Vec::new();
    let docs = workspace_docs();
    for path in &docs {
        let text = std::fs::read_to_string(path).expect("a readable doc");
        let name = path
            .strip_prefix(&root)
            .unwrap_or(path)
            .display()
            .to_string();
        problems.extend(check(&api, &name, &text));
    }
    assert!(
        problems.is_empty(),
        "{} names in {} docs do not exist in the code:\n{}",
        problems.len(),
        docs.len(),
        problems.join("\n")
    );
}

// ---------------------------------------------------------------------------------------------
// The scanner on small inputs.

fn api_of(src: &str) -> PublicApi {
    let mut api = PublicApi::default();
    api.add_source(src, false);
    api.finish()
}

const SOURCE: &str = r#"
/// A queue. `impl Fake { pub fn not_real() }` in a comment does not count.
pub struct Queue<R: Runtime> { client: Client<R>, pub name: String }

impl<R: Runtime> Queue<R> {
    pub async fn add(&self, name: &str, data: impl Serialize) -> Result<String, Error> {
        let s = "{ pub fn not_real_either() {";
        let c = '{';
        Ok(String::new())
    }
    pub fn get_state<'a>(&'a self) -> &'a str { "" }
    fn private_helper(&self) {}
    pub(crate) fn crate_only(&self) {}
    pub const MAX: usize = 1;
}

impl<R> fmt::Debug for Queue<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result { Ok(()) }
}

pub enum JobState { Waiting, Active { since: u64 }, #[doc = "x"] Unknown(String) }

pub trait Runtime: Send { type Socket; fn now(&self) -> Instant; const NAME: &'static str; }

#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Options { pub host: String }
impl Options {
    setters! {
        /// The timeout.
        command_timeout = Duration,
        #[doc = "Batching."]
        batching: Option<BatchConfig>,
    }
}
pub(crate) struct Hidden;
impl Hidden { pub fn visible_on_a_hidden_type(&self) {} }
"#;

#[test]
fn scanner_reads_methods_fields_variants_and_trait_items() {
    let api = api_of(SOURCE);
    let queue = &api.types["Queue"];
    for m in ["add", "get_state", "MAX", "name", "fmt"] {
        assert!(queue.contains(m), "Queue::{m} missing from {queue:?}");
    }
    for m in [
        "private_helper",
        "crate_only",
        "not_real",
        "not_real_either",
    ] {
        assert!(
            !queue.contains(m),
            "Queue::{m} should not be public: {queue:?}"
        );
    }
    let state: BTreeSet<&str> = api.types["JobState"].iter().map(String::as_str).collect();
    assert_eq!(state, BTreeSet::from(["Active", "Unknown", "Waiting"]));
    assert!(api.types["Runtime"].contains("now") && api.types["Runtime"].contains("NAME"));
    let options = &api.types["Options"];
    assert!(options.contains("command_timeout") && options.contains("batching"));
    assert!(
        options.contains("default") && options.contains("clone"),
        "derived: {options:?}"
    );
    assert!(
        !queue.contains("default"),
        "a derive applies to the next type only"
    );
    assert!(
        !api.types.contains_key("Hidden"),
        "a pub(crate) type is not public"
    );
}

#[test]
fn a_renamed_method_fails_the_check() {
    let api = api_of(SOURCE);
    let doc = "Add with `Queue::add(name, &data)`, then read `Queue::get_status(id)`.\n";
    let problems = check(&api, "README.md", doc);
    assert_eq!(
        problems,
        ["README.md:1: `Queue::get_status`: `Queue` has no pub fn, const, field or variant `get_status`"]
    );
    let renamed = SOURCE.replace("pub fn get_state", "pub fn read_state");
    let problems = check(&api_of(&renamed), "README.md", "`Queue::get_state(id)`");
    assert_eq!(problems.len(), 1, "{problems:?}");
}

#[test]
fn other_clients_columns_and_foreign_paths_are_not_checked() {
    let api = api_of(SOURCE);
    let doc = "\
| bunqueue-client 0.1.1 (Rust) | TS Queue 2.9.5 | autobatch | note |
|---|---|---|---|
| `Queue::wait_for_job(id)` | `Queue::waitJob` | `Queue::add` | `Duration::from_secs(1)`, `std::fs::File::open` |
| `x` | `y` | `Queue::nope` | |

After the table: `JobState::Waiting`, `JobState::Gone`.

```rust
let q = Queue::add_typo(1);
```

```sh
cargo run -- Queue::ignored
```
";
    let problems = check(&api, "d.md", doc);
    assert_eq!(problems.len(), 3, "{problems:#?}");
    assert!(problems[0].starts_with("d.md:4: `Queue::nope`"));
    assert!(problems[1].starts_with("d.md:6: `JobState::Gone`"));
    assert!(problems[2].starts_with("d.md:9: `Queue::add_typo`"));
}

#[test]
fn unknown_types_and_operations_fail() {
    let mut api = api_of(SOURCE);
    api.ops_words.insert("Pause".into());
    api.ops_words.insert("new".into());
    let doc = "`ops::Pause`, `ops::Pause::new(q)`, `ops::Paws`, `Qeueu::add`, `autobatch_core::ops::Resume`";
    let problems = check(&api, "d.md", doc);
    assert_eq!(problems.len(), 3, "{problems:#?}");
    assert!(problems[0].contains("`ops::Paws`: no operation `Paws`"));
    assert!(problems[1].contains("`Qeueu` is not a public type"));
    assert!(problems[2].contains("no operation `Resume`"));
}

#[test]
fn code_spans_and_escaped_pipes() {
    assert_eq!(code_spans("a `x::Y` b ``z`w`` c"), ["x::Y", "z`w"]);
    assert_eq!(
        table_cells(r"| `TlsRoots::WebPki \| System` | two |"),
        [r" `TlsRoots::WebPki \| System` ", " two "]
    );
    assert_eq!(
        paths("Client::connect(o).await?; a::b"),
        ["Client::connect", "a::b"]
    );
}
