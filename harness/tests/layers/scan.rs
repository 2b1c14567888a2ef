//! Reading one Rust source file: its tokens, then what it declares (`mod x;`
//! children, the names its `use`s bind) and every path in it that names
//! another module of the crate. Nothing here knows about other files.

use std::collections::{BTreeMap, BTreeSet};

// ---------------------------------------------------------------- tokens

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tok {
    Ident(String),
    /// `::`
    Colons,
    Punct(char),
    /// A string literal's text, unescaped as written (a `#[path = ".."]`
    /// names a file with one).
    Str(String),
}

/// The tokens of a source file that can name a module: identifiers, `::`,
/// punctuation and string literals. Comments, character literals, lifetimes
/// and numbers are dropped.
pub fn tokens(src: &str) -> Vec<Tok> {
    let c: Vec<char> = src.chars().collect();
    let n = c.len();
    let mut out = Vec::new();
    let mut i = 0;
    let ident_start = |ch: char| ch.is_alphabetic() || ch == '_';
    let ident_char = |ch: char| ch.is_alphanumeric() || ch == '_';
    while i < n {
        let ch = c[i];
        let next = c.get(i + 1).copied();
        if ch == '/' && next == Some('/') {
            while i < n && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && next == Some('*') {
            let mut depth = 0;
            while i < n {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if let Some(hashes) = raw_string_at(&c, i) {
            // r"..", r#".."#, br".." : up to the quote and as many #s.
            i += 1 + usize::from(c[i] == 'b') + hashes + 1;
            let start = i;
            while i < n && !(c[i] == '"' && (1..=hashes).all(|k| c.get(i + k) == Some(&'#'))) {
                i += 1;
            }
            out.push(Tok::Str(c[start..i.min(n)].iter().collect()));
            i += 1 + hashes;
        } else if ch == '"' || (ch == 'b' && next == Some('"')) {
            i += if ch == 'b' { 2 } else { 1 };
            let start = i;
            while i < n && c[i] != '"' {
                i += if c[i] == '\\' { 2 } else { 1 };
            }
            out.push(Tok::Str(c[start..i.min(n)].iter().collect()));
            i += 1;
        } else if ch == '\'' || (ch == 'b' && next == Some('\'')) {
            let start = if ch == 'b' { i + 1 } else { i };
            if c.get(start + 1) == Some(&'\\') {
                // '\n', '\'', '\u{..}'
                i = start + 3;
                while i < n && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if c.get(start + 2) == Some(&'\'') {
                i = start + 3;
            } else {
                // A lifetime or a label: drop the quote, keep nothing.
                i = start + 1;
                while i < n && ident_char(c[i]) {
                    i += 1;
                }
            }
        } else if ch == 'r' && next == Some('#') && c.get(i + 2).is_some_and(|&x| ident_start(x)) {
            i += 2; // a raw identifier: r#type is `type`
        } else if ident_start(ch) {
            let start = i;
            while i < n && ident_char(c[i]) {
                i += 1;
            }
            out.push(Tok::Ident(c[start..i].iter().collect()));
        } else if ch.is_ascii_digit() {
            while i < n
                && (ident_char(c[i])
                    || c[i] == '.' && c.get(i + 1).is_some_and(|d| d.is_ascii_digit()))
            {
                i += 1;
            }
        } else if ch == ':' && next == Some(':') {
            out.push(Tok::Colons);
            i += 2;
        } else {
            if !ch.is_whitespace() {
                out.push(Tok::Punct(ch));
            }
            i += 1;
        }
    }
    out
}

/// At `i`, the number of `#`s of a raw (byte) string literal that starts
/// there, if one does.
fn raw_string_at(c: &[char], i: usize) -> Option<usize> {
    let before_ok = i == 0 || !(c[i - 1].is_alphanumeric() || c[i - 1] == '_');
    let mut j = i;
    if c.get(j) == Some(&'b') {
        j += 1;
    }
    if !before_ok || c.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let mut hashes = 0;
    while c.get(j) == Some(&'#') {
        hashes += 1;
        j += 1;
    }
    (c.get(j) == Some(&'"')).then_some(hashes)
}

// ---------------------------------------------------------------- one file

/// One `use` leaf: the path, and the name it binds (`None`: a glob).
#[derive(Debug, Clone)]
struct UseLeaf {
    path: Vec<String>,
    name: Option<String>,
}

/// A reference in a file: the path as written, relative to `module` (the
/// file's module, or an inline module inside it).
#[derive(Debug, Clone)]
pub struct Ref {
    pub module: Vec<String>,
    pub path: Vec<String>,
    /// From a `pub use` at the file's top level.
    pub public_use: bool,
}

#[derive(Debug, Default)]
pub struct FileFacts {
    /// `mod x;` children.
    pub children: BTreeSet<String>,
    /// `#[path = "file.rs"] mod x;` children: `x` → the file, relative to
    /// the declaring file's folder.
    pub child_paths: BTreeMap<String, String>,
    /// Names the file's top level binds with `use`, to the path written.
    pub imports: BTreeMap<String, Vec<String>>,
    /// Every name any `use` in the file binds (for paths in code).
    pub imported_anywhere: BTreeSet<String>,
    pub refs: Vec<Ref>,
    /// Identifiers outside `use` declarations.
    pub code_idents: BTreeSet<String>,
}

/// Expands a use tree's tokens (`a::{b, c::d as e, self, *}`) under `prefix`.
fn use_tree(toks: &[Tok], pos: &mut usize, prefix: Vec<String>, out: &mut Vec<UseLeaf>) {
    let mut path = prefix;
    loop {
        match toks.get(*pos) {
            Some(Tok::Colons) => *pos += 1,
            Some(Tok::Punct('*')) => {
                *pos += 1;
                out.push(UseLeaf { path, name: None });
                return;
            }
            Some(Tok::Punct('{')) => {
                *pos += 1;
                loop {
                    match toks.get(*pos) {
                        Some(Tok::Punct('}')) | None => {
                            *pos += 1;
                            return;
                        }
                        Some(Tok::Punct(',')) => *pos += 1,
                        _ => use_tree(toks, pos, path.clone(), out),
                    }
                }
            }
            Some(Tok::Ident(id)) => {
                *pos += 1;
                if id == "self" && !path.is_empty() && !matches!(toks.get(*pos), Some(Tok::Colons))
                {
                    // `a::{self}` binds `a`.
                } else {
                    path.push(id.clone());
                }
                if !matches!(toks.get(*pos), Some(Tok::Colons)) {
                    let mut name = path.last().cloned();
                    if let (Some(Tok::Ident(kw)), Some(Tok::Ident(alias))) =
                        (toks.get(*pos), toks.get(*pos + 1))
                        && kw == "as"
                    {
                        name = Some(alias.clone());
                        *pos += 2;
                    }
                    out.push(UseLeaf { path, name });
                    return;
                }
            }
            _ => return,
        }
    }
}

/// The first pass: the file's `mod x;` children (with the file a `#[path]`
/// gives one) and every name a `use` binds, so that the second pass knows
/// which first segments start an in-crate path and the graph which file holds
/// which module.
pub fn declarations(toks: &[Tok]) -> FileFacts {
    let mut facts = FileFacts::default();
    // The file a `#[path = ".."]` names, until the item it is on.
    let mut path_attr: Option<String> = None;
    let mut i = 0;
    while i < toks.len() {
        match &toks[i] {
            Tok::Punct('#') => {
                if let [
                    Tok::Punct('['),
                    Tok::Ident(attr),
                    Tok::Punct('='),
                    Tok::Str(file),
                    Tok::Punct(']'),
                    ..,
                ] = &toks[i + 1..]
                    && attr == "path"
                {
                    path_attr = Some(file.clone());
                    i += 6;
                    continue;
                }
            }
            Tok::Punct(';' | '{' | '}') => path_attr = None,
            Tok::Ident(kw) if kw == "mod" => {
                if let (Some(Tok::Ident(name)), Some(Tok::Punct(';'))) =
                    (toks.get(i + 1), toks.get(i + 2))
                {
                    facts.children.insert(name.clone());
                    if let Some(file) = path_attr.take() {
                        facts.child_paths.insert(name.clone(), file);
                    }
                }
            }
            Tok::Ident(kw) if kw == "use" => {
                let mut pos = i + 1;
                let mut leaves = Vec::new();
                use_tree(toks, &mut pos, Vec::new(), &mut leaves);
                facts
                    .imported_anywhere
                    .extend(leaves.into_iter().filter_map(|l| l.name));
            }
            _ => {}
        }
        i += 1;
    }
    facts
}

/// The second pass: every `use` leaf and every in-crate path in code, each
/// with the module it is written in (inline modules tracked by their braces),
/// and the top-level `use`s as the file's own names. `module` is the file's
/// module path; a path in code starts in the crate when its first segment is
/// `crate`, `super`, `self`, `crate_name` (as a binary names its library), a
/// child module or a name a `use` binds.
pub fn references(toks: &[Tok], module: &[String], crate_name: &str, facts: &mut FileFacts) {
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < toks.len() {
        let current: Vec<String> = module
            .iter()
            .cloned()
            .chain(inline.iter().map(|(m, _)| m.clone()))
            .collect();
        match &toks[i] {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => {
                if inline.last().is_some_and(|&(_, d)| d == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
            }
            Tok::Ident(kw) if kw == "mod" => {
                if let (Some(Tok::Ident(name)), Some(Tok::Punct('{'))) =
                    (toks.get(i + 1), toks.get(i + 2))
                {
                    depth += 1;
                    inline.push((name.clone(), depth));
                    i += 3;
                    continue;
                }
            }
            Tok::Ident(kw) if kw == "use" => {
                let public = is_pub_before(toks, i);
                let mut pos = i + 1;
                let mut leaves = Vec::new();
                use_tree(toks, &mut pos, Vec::new(), &mut leaves);
                for leaf in leaves {
                    if depth == 0
                        && let Some(name) = &leaf.name
                    {
                        facts.imports.insert(name.clone(), leaf.path.clone());
                    }
                    facts.refs.push(Ref {
                        module: current.clone(),
                        path: leaf.path,
                        public_use: public && depth == 0,
                    });
                }
                i = pos;
                continue;
            }
            Tok::Ident(first)
                if matches!(toks.get(i + 1), Some(Tok::Colons))
                    && !matches!(
                        i.checked_sub(1).map(|k| &toks[k]),
                        Some(Tok::Colons | Tok::Punct('$'))
                    ) =>
            {
                let starts = ["crate", "super", "self", crate_name].contains(&first.as_str())
                    || facts.children.contains(first)
                    || facts.imported_anywhere.contains(first);
                let mut path = vec![first.clone()];
                let mut j = i + 1;
                while let (Some(Tok::Colons), Some(Tok::Ident(seg))) =
                    (toks.get(j), toks.get(j + 1))
                {
                    path.push(seg.clone());
                    j += 2;
                }
                if starts {
                    facts.refs.push(Ref {
                        module: current.clone(),
                        path,
                        public_use: false,
                    });
                }
                for seg in toks[i..j].iter() {
                    if let Tok::Ident(id) = seg {
                        facts.code_idents.insert(id.clone());
                    }
                }
                i = j;
                continue;
            }
            Tok::Ident(id) => {
                facts.code_idents.insert(id.clone());
            }
            _ => {}
        }
        i += 1;
    }
}

/// Whether the `use` at `i` is `pub` or `pub(...)`.
fn is_pub_before(toks: &[Tok], i: usize) -> bool {
    match i.checked_sub(1).map(|k| &toks[k]) {
        Some(Tok::Ident(p)) => p == "pub",
        Some(Tok::Punct(')')) => {
            let open = toks[..i].iter().rposition(|t| *t == Tok::Punct('('));
            open.and_then(|o| o.checked_sub(1))
                .is_some_and(|k| toks[k] == Tok::Ident("pub".into()))
        }
        _ => false,
    }
}
