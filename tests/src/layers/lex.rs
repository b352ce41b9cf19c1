//! Rust source as a flat list of the tokens the layer scan needs: identifiers, `::` and single
//! punctuation. Comments, string and char literals, lifetimes and numbers are dropped, so a
//! path written inside a string or a comment is never taken for a dependency.

/// One token of Rust source, as far as the layer scan cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Tok {
    /// An identifier or keyword (`r#` raw identifiers without their prefix).
    Ident(String),
    /// `::`.
    PathSep,
    /// Any other single punctuation character.
    Punct(char),
}

/// Splits `src` into tokens. Never fails: an unterminated literal or comment ends the input.
pub(crate) fn tokens(src: &str) -> Vec<Tok> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c.is_whitespace() {
            i += 1;
        } else if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            i = skip_block_comment(&chars, i);
        } else if c == '"' {
            i = skip_quoted(&chars, i + 1, '"');
        } else if c == '\'' {
            i = skip_char_or_lifetime(&chars, i);
        } else if c.is_ascii_digit() {
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            i = after_word(&chars, i, word, &mut out);
        } else if c == ':' && next == Some(':') {
            out.push(Tok::PathSep);
            i += 2;
        } else {
            out.push(Tok::Punct(c));
            i += 1;
        }
    }
    out
}

/// What follows an identifier-like word: a string prefix (`b"`, `r#"`, `br"`, `b'`), a raw
/// identifier (`r#type`), or the word itself. Returns where lexing continues.
fn after_word(chars: &[char], i: usize, word: String, out: &mut Vec<Tok>) -> usize {
    let at = |k: usize| chars.get(k).copied();
    match word.as_str() {
        "b" if at(i) == Some('"') => skip_quoted(chars, i + 1, '"'),
        "b" if at(i) == Some('\'') => skip_quoted(chars, i + 1, '\''),
        "r" | "br" if at(i) == Some('"') || at(i) == Some('#') => {
            let mut hashes = 0;
            while at(i + hashes) == Some('#') {
                hashes += 1;
            }
            if at(i + hashes) == Some('"') {
                skip_raw_string(chars, i + hashes + 1, hashes)
            } else if word == "r" && hashes == 1 {
                // A raw identifier: lexed on the next turn as a plain word.
                i + 1
            } else {
                out.push(Tok::Ident(word));
                i
            }
        }
        _ => {
            out.push(Tok::Ident(word));
            i
        }
    }
}

fn skip_block_comment(chars: &[char], mut i: usize) -> usize {
    let mut depth = 0usize;
    while i < chars.len() {
        if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
            depth += 1;
            i += 2;
        } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
            depth -= 1;
            i += 2;
            if depth == 0 {
                return i;
            }
        } else {
            i += 1;
        }
    }
    i
}

/// Skips a literal whose body starts at `i` and ends at an unescaped `close`.
fn skip_quoted(chars: &[char], mut i: usize, close: char) -> usize {
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            c if c == close => return i + 1,
            _ => i += 1,
        }
    }
    i
}

/// Skips a raw string whose body starts at `i` and ends at `"` followed by `hashes` `#`.
fn skip_raw_string(chars: &[char], mut i: usize, hashes: usize) -> usize {
    while i < chars.len() {
        if chars[i] == '"' && (1..=hashes).all(|k| chars.get(i + k) == Some(&'#')) {
            return i + 1 + hashes;
        }
        i += 1;
    }
    i
}

/// `'x'`, `'\n'`, `'\u{1F600}'` are char literals; `'a` and `'static` are lifetimes.
fn skip_char_or_lifetime(chars: &[char], i: usize) -> usize {
    match (chars.get(i + 1), chars.get(i + 2)) {
        (Some('\\'), _) => skip_quoted(chars, i + 1, '\''),
        (Some(_), Some('\'')) => i + 3,
        _ => {
            let mut k = i + 1;
            while k < chars.len() && (chars[k].is_alphanumeric() || chars[k] == '_') {
                k += 1;
            }
            k
        }
    }
}
