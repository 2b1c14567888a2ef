//! The harness's layers, kept by a test. Every `.rs` file under `src/` is
//! read, the places where it names another module are resolved to the file
//! that defines what they name, and two things must hold of that file graph:
//!
//! 1. it has no cycle: no file depends, through any chain, on itself;
//! 2. each top-level module names only modules of layers below its own
//!    ([`LAYERS`], lowest first; modules that share a layer are peers and
//!    name neither each other).
//!
//! What counts as naming a module: a `use` declaration, and a path in code
//! that starts at `crate::`, `super::`, `self::`, a child module, or a name a
//! `use` brought in (`epochal::` from `main.rs`). Test code counts too. A
//! path is resolved as rustc resolves it, as far as files go: down the module
//! tree to the deepest file, then through that file's own `use` of the next
//! name, so a name a folder's `mod.rs` re-exports is credited to the file that
//! defines it. A `pub use` of a file's own descendants is its public face, not
//! a dependency: it adds no edge unless the file's own code uses the name.
//!
//! What it cannot see, and why that is acceptable: a method call (`x.f()`)
//! names no path, so an `impl` block split over files is seen only through the
//! types and functions it names (we keep each type's methods in files that
//! are above or beside the type, never below); a macro's expansion is not
//! read (the only macros are local: `text_form!`, `anomalies!`, `details!`).
//!
//! The analysis is tested on small made-up trees first (`analyser_*`), so a
//! passing run on the real tree means the tree is clean, not that the
//! analyser saw nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The harness's layers, lowest first. A module may name modules of lower
/// layers only; modules in one layer are independent peers. `main` is the
/// binary (`src/main.rs`), above the library it drives.
const LAYERS: &[&[&str]] = &[
    // Vocabulary without vocabulary below it.
    &["text_form", "random", "duration", "toml_span"],
    // The names everything else uses: brokers (`b1`), partitions (`t-0`).
    &["node", "topic_partition"],
    // TOML in, a checked schedule out.
    &["schedule", "system"],
    // Typed ops on disk (a fault op records a schedule's fault).
    &["history"],
    // The independent reader of replica files.
    &["reader"],
    // Run directories, and the store's file writing.
    &["store"],
    &["run_dir"],
    // The harness's own Kafka client (imports nothing of the crate).
    &["kafka_client"],
    // Clusters as processes or containers.
    &["runtime"],
    // Reading the cluster over connections no fault touches.
    &["observe"],
    // Driving and breaking the cluster.
    &["workload", "nemesis"],
    // Judging a run from its directory.
    &["checker"],
    // Showing a judged run.
    &["snapshot", "report"],
    // One run, phase by phase.
    &["run"],
    // A run whose faults a seed picks; delta debugging. A run whose faults a
    // person sends (`epochal up`).
    &["campaign", "session"],
    // Suites of runs.
    &["gate"],
    // The binary's edge.
    &["cli"],
    &["main"],
];

/// A source tree as the analyser reads it: paths relative to `src/`.
type Tree = Vec<(String, String)>;

/// The file graph: each file, and each edge with the paths that made it.
struct Graph {
    files: Vec<String>,
    /// `(from, to)` → the paths in `from` that name something in `to`.
    edges: BTreeMap<(usize, usize), BTreeSet<String>>,
}

// ---------------------------------------------------------------- tokens

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Ident(String),
    /// `::`
    Colons,
    Punct(char),
}

/// The tokens of a source file that can name a module: identifiers, `::` and
/// punctuation. Comments, string, byte-string, raw-string and character
/// literals, lifetimes and numbers are dropped.
fn tokens(src: &str) -> Vec<Tok> {
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
            while i < n && !(c[i] == '"' && (1..=hashes).all(|k| c.get(i + k) == Some(&'#'))) {
                i += 1;
            }
            i += 1 + hashes;
        } else if ch == '"' || (ch == 'b' && next == Some('"')) {
            i += if ch == 'b' { 2 } else { 1 };
            while i < n && c[i] != '"' {
                i += if c[i] == '\\' { 2 } else { 1 };
            }
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
struct Ref {
    module: Vec<String>,
    path: Vec<String>,
    /// From a `pub use` at the file's top level.
    public_use: bool,
}

#[derive(Debug, Default)]
struct FileFacts {
    /// `mod x;` children.
    children: BTreeSet<String>,
    /// Names the file's top level binds with `use`, to the path written.
    imports: BTreeMap<String, Vec<String>>,
    /// Every name any `use` in the file binds (for paths in code).
    imported_anywhere: BTreeSet<String>,
    refs: Vec<Ref>,
    /// Identifiers outside `use` declarations.
    code_idents: BTreeSet<String>,
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

/// What one file says about other modules. `module` is the file's module
/// path; `roots` the first segments that start an in-crate path
/// (`crate`, `super`, `self`; `epochal` in the binary).
fn read_file(src: &str, module: &[String]) -> FileFacts {
    let toks = tokens(src);
    let mut facts = FileFacts::default();
    declarations(&toks, &mut facts);
    references(&toks, module, &mut facts);
    facts
}

/// The first pass: the file's `mod x;` children and every name a `use`
/// binds, so the second knows which first segments start an in-crate path.
fn declarations(toks: &[Tok], facts: &mut FileFacts) {
    let mut i = 0;
    while i < toks.len() {
        match &toks[i] {
            Tok::Ident(kw) if kw == "mod" => {
                if let (Some(Tok::Ident(name)), Some(Tok::Punct(';'))) =
                    (toks.get(i + 1), toks.get(i + 2))
                {
                    facts.children.insert(name.clone());
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
}

/// The second pass: every `use` leaf and every in-crate path in code, each
/// with the module it is written in (inline modules tracked by their braces),
/// and the top-level `use`s as the file's own names.
fn references(toks: &[Tok], module: &[String], facts: &mut FileFacts) {
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
                let starts = ["crate", "super", "self", "epochal"].contains(&first.as_str())
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

// ---------------------------------------------------------------- the graph

/// A file's module path from its path under `src/`: `lib.rs` is the root,
/// `main.rs` the binary (`main`), `a/mod.rs` and `a.rs` are `a`.
fn module_of(file: &str) -> Vec<String> {
    match file {
        "lib.rs" => Vec::new(),
        "main.rs" => vec!["main".into()],
        _ => {
            let mut parts: Vec<String> = file
                .trim_end_matches(".rs")
                .split('/')
                .map(String::from)
                .collect();
            if parts.last().is_some_and(|p| p == "mod") {
                parts.pop();
            }
            parts
        }
    }
}

fn analyse(tree: &Tree) -> Graph {
    let files: Vec<String> = tree.iter().map(|(f, _)| f.clone()).collect();
    let modules: Vec<Vec<String>> = files.iter().map(|f| module_of(f)).collect();
    let by_module: BTreeMap<Vec<String>, usize> = modules
        .iter()
        .cloned()
        .enumerate()
        .map(|(i, m)| (m, i))
        .collect();
    let facts: Vec<FileFacts> = tree
        .iter()
        .zip(&modules)
        .map(|((_, src), m)| read_file(src, m))
        .collect();

    // An absolute path → the file that defines what it names.
    fn resolve(
        path: &[String],
        by_module: &BTreeMap<Vec<String>, usize>,
        facts: &[FileFacts],
        modules: &[Vec<String>],
        hops: usize,
    ) -> Option<usize> {
        let mut k = 0;
        while k < path.len() && by_module.contains_key(&path[..=k]) {
            k += 1;
        }
        let file = *by_module.get(&path[..k])?;
        if k < path.len()
            && hops < 16
            && let Some(written) = facts[file].imports.get(&path[k])
            && let Some(mut target) =
                absolute(&modules[file], &modules[file], &facts[file], written)
        {
            target.extend(path[k + 1..].iter().cloned());
            return resolve(&target, by_module, facts, modules, hops + 1).or(Some(file));
        }
        Some(file)
    }

    let mut edges: BTreeMap<(usize, usize), BTreeSet<String>> = BTreeMap::new();
    for (file, f) in facts.iter().enumerate() {
        for r in &f.refs {
            let Some(abs) = absolute(&modules[file], &r.module, f, &r.path) else {
                continue;
            };
            let abs: Vec<String> = abs.into_iter().filter(|s| s != "*").collect();
            let own = &modules[file];
            if r.public_use
                && abs.len() > own.len()
                && abs.starts_with(own)
                && !abs.last().is_some_and(|name| f.code_idents.contains(name))
            {
                continue; // the file's public face, not a dependency
            }
            let Some(to) = resolve(&abs, &by_module, &facts, &modules, 0) else {
                continue;
            };
            if to != file && !modules[to].is_empty() {
                edges
                    .entry((file, to))
                    .or_default()
                    .insert(r.path.join("::"));
            }
        }
    }
    Graph { files, edges }
}

/// A path as written in the file of module `file_module`, inside `module`
/// (the file's, or an inline module's), from the crate root; `None` when it
/// leaves the crate (std, a dependency).
fn absolute(
    file_module: &[String],
    module: &[String],
    facts: &FileFacts,
    path: &[String],
) -> Option<Vec<String>> {
    let in_main = file_module == ["main"];
    let (base, rest): (Vec<String>, &[String]) = match path.first()?.as_str() {
        "crate" if in_main => (file_module.to_vec(), &path[1..]),
        "crate" => (Vec::new(), &path[1..]),
        "epochal" if in_main => (Vec::new(), &path[1..]),
        "self" | "super" => (module.to_vec(), path),
        name if facts.children.contains(name) && module == file_module => {
            (file_module.to_vec(), path)
        }
        name => {
            // A name a top-level `use` brought in: what that `use` wrote.
            let written = facts.imports.get(name)?;
            if written.first().map(String::as_str) == Some(name) {
                return None; // `use serde;`: a crate, not a module of ours
            }
            let mut resolved = absolute(file_module, file_module, facts, written)?;
            resolved.extend(path[1..].iter().cloned());
            return Some(resolved);
        }
    };
    let mut base = base;
    let mut rest = rest;
    while let Some(seg) = rest.first() {
        match seg.as_str() {
            "self" => {}
            "super" => {
                base.pop()?;
            }
            _ => break,
        }
        rest = &rest[1..];
    }
    Some(base.into_iter().chain(rest.iter().cloned()).collect())
}

/// Every cycle, one per strongly connected component of more than one file,
/// written as `a.rs -> b.rs (the paths) -> ... -> a.rs`.
fn cycles(graph: &Graph) -> Vec<String> {
    let mut next: Vec<Vec<usize>> = vec![Vec::new(); graph.files.len()];
    for &(a, b) in graph.edges.keys() {
        next[a].push(b);
    }
    components(&next)
        .iter()
        .map(|component| describe_cycle(graph, &next, component))
        .collect()
}

/// The strongly connected components of more than one node (Tarjan).
fn components(next: &[Vec<usize>]) -> Vec<Vec<usize>> {
    struct State {
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        counter: usize,
        components: Vec<Vec<usize>>,
    }
    fn visit(v: usize, next: &[Vec<usize>], s: &mut State) {
        s.index[v] = Some(s.counter);
        s.low[v] = s.counter;
        s.counter += 1;
        s.stack.push(v);
        s.on_stack[v] = true;
        for &w in &next[v] {
            match s.index[w] {
                None => {
                    visit(w, next, s);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(iw) if s.on_stack[w] => s.low[v] = s.low[v].min(iw),
                Some(_) => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut component = Vec::new();
            loop {
                let w = s.stack.pop().expect("v is on the stack");
                s.on_stack[w] = false;
                component.push(w);
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                s.components.push(component);
            }
        }
    }
    let n = next.len();
    let mut s = State {
        index: vec![None; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        counter: 0,
        components: Vec::new(),
    };
    for v in 0..n {
        if s.index[v].is_none() {
            visit(v, next, &mut s);
        }
    }
    s.components
}

/// One concrete cycle through a component's first file (a breadth-first
/// search back to it inside the component), each edge with its paths; and
/// the component's files, when there are more than the cycle passes.
fn describe_cycle(graph: &Graph, next: &[Vec<usize>], component: &[usize]) -> String {
    let inside: BTreeSet<usize> = component.iter().copied().collect();
    let start = *component.iter().min().expect("not empty");
    let mut came_from: BTreeMap<usize, usize> = BTreeMap::new();
    let mut last = None;
    let mut queue = std::collections::VecDeque::from([start]);
    'search: while let Some(v) = queue.pop_front() {
        for &w in next[v].iter().filter(|w| inside.contains(w)) {
            if w == start {
                last = Some(v);
                break 'search;
            }
            if let std::collections::btree_map::Entry::Vacant(e) = came_from.entry(w) {
                e.insert(v);
                queue.push_back(w);
            }
        }
    }
    let mut walk = vec![start];
    let mut at = last.expect("a component's file reaches itself");
    while at != start {
        walk.push(at);
        at = came_from[&at];
    }
    walk.push(start);
    walk.reverse();
    let mut text = graph.files[walk[0]].clone();
    for pair in walk.windows(2) {
        let why: Vec<&str> = graph.edges[&(pair[0], pair[1])]
            .iter()
            .map(String::as_str)
            .collect();
        text += &format!(" -> {} ({})", graph.files[pair[1]], why.join(", "));
    }
    if component.len() > walk.len() - 1 {
        let mut all: Vec<&str> = component.iter().map(|&f| graph.files[f].as_str()).collect();
        all.sort();
        text += &format!(
            "; in all, these {} files reach each other: {}",
            all.len(),
            all.join(", ")
        );
    }
    text
}

/// Every edge that goes up or sideways between layers, and every top-level
/// module the list does not place (or places but does not exist).
fn layer_violations(graph: &Graph, layers: &[&[&str]]) -> Vec<String> {
    let layer_of = |module: &str| layers.iter().position(|l| l.contains(&module));
    let top = |file: usize| module_of(&graph.files[file]).first().cloned();
    let mut found = Vec::new();
    let tops: BTreeSet<String> = (0..graph.files.len()).filter_map(top).collect();
    for module in &tops {
        if layer_of(module).is_none() {
            found.push(format!("`{module}` is in no layer: place it in LAYERS"));
        }
    }
    for module in layers.iter().flat_map(|l| l.iter()) {
        if !tops.contains(*module) {
            found.push(format!(
                "LAYERS names `{module}`, which is no module of src/"
            ));
        }
    }
    for (&(a, b), why) in &graph.edges {
        let (Some(ta), Some(tb)) = (top(a), top(b)) else {
            continue;
        };
        if ta == tb {
            continue;
        }
        if let (Some(la), Some(lb)) = (layer_of(&ta), layer_of(&tb))
            && la <= lb
        {
            let why: Vec<&str> = why.iter().map(String::as_str).collect();
            found.push(format!(
                "{} ({ta}, layer {}) names {} ({tb}, layer {}): {}",
                graph.files[a],
                la + 1,
                graph.files[b],
                lb + 1,
                why.join(", ")
            ));
        }
    }
    found
}

/// Every `.rs` file under `dir`, relative to it, sorted.
fn read_tree(dir: &Path) -> Tree {
    fn walk(root: &Path, dir: &Path, out: &mut Tree) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .expect("src/ is readable")
            .map(|e| e.expect("an entry").path())
            .collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(root, &path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let relative = path
                    .strip_prefix(root)
                    .expect("under root")
                    .to_string_lossy()
                    .replace('\\', "/");
                out.push((
                    relative,
                    std::fs::read_to_string(&path).expect("a source file reads"),
                ));
            }
        }
    }
    let mut tree = Vec::new();
    walk(dir, dir, &mut tree);
    tree
}

fn harness_src() -> Tree {
    read_tree(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"))
}

// ---------------------------------------------------------------- the tree

#[test]
fn the_harness_has_no_file_level_import_cycle() {
    let graph = analyse(&harness_src());
    assert!(
        graph.edges.len() > 300,
        "the analyser found too few edges to be reading the tree: {}",
        graph.edges.len()
    );
    let cycles = cycles(&graph);
    assert!(
        cycles.is_empty(),
        "file-level import cycles in harness/src:\n  {}",
        cycles.join("\n  ")
    );
}

#[test]
fn each_module_names_only_layers_below_its_own() {
    let graph = analyse(&harness_src());
    let violations = layer_violations(&graph, LAYERS);
    assert!(
        violations.is_empty(),
        "harness/src breaks its layer order (tests/layers.rs, LAYERS):\n  {}",
        violations.join("\n  ")
    );
}

// ---------------------------------------------------------------- the analyser

fn tree(files: &[(&str, &str)]) -> Tree {
    files
        .iter()
        .map(|(f, s)| (f.to_string(), s.to_string()))
        .collect()
}

fn edge_list(graph: &Graph) -> Vec<String> {
    let mut edges: Vec<String> = graph
        .edges
        .keys()
        .map(|&(a, b)| format!("{} -> {}", graph.files[a], graph.files[b]))
        .collect();
    edges.sort();
    edges
}

#[test]
fn analyser_finds_two_files_that_name_each_other() {
    let graph = analyse(&tree(&[
        ("lib.rs", "pub mod a; pub mod b;"),
        ("a.rs", "use crate::b::B; pub struct A(B);"),
        ("b.rs", "pub struct B; fn f() -> crate::a::A { todo!() }"),
    ]));
    assert_eq!(edge_list(&graph), ["a.rs -> b.rs", "b.rs -> a.rs"]);
    let found = cycles(&graph);
    assert_eq!(found, ["a.rs -> b.rs (crate::b::B) -> a.rs (crate::a::A)"]);
}

#[test]
fn analyser_follows_super_self_children_and_imported_modules() {
    let graph = analyse(&tree(&[
        ("lib.rs", "pub mod x; pub mod y;"),
        (
            "x/mod.rs",
            "mod a; mod b; pub use a::A; pub struct S; fn f() { b::g(); }",
        ),
        ("x/a.rs", "pub struct A; fn f() -> super::S { todo!() }"),
        (
            "x/b.rs",
            "use super::A; pub fn g() {} #[cfg(test)] mod tests { use super::super::S; }",
        ),
        ("y.rs", "use crate::x; fn f() -> x::A { todo!() }"),
    ]));
    assert_eq!(
        edge_list(&graph),
        [
            // mod.rs calls b::g; re-exporting a::A is its public face.
            "x/a.rs -> x/mod.rs",
            "x/b.rs -> x/a.rs",
            "x/b.rs -> x/mod.rs",
            "x/mod.rs -> x/b.rs",
            // x::A is a's, re-exported by mod.rs: credited to a.
            "y.rs -> x/a.rs",
            "y.rs -> x/mod.rs",
        ]
    );
    // b uses S from mod.rs, and mod.rs calls b::g: a cycle.
    assert_eq!(cycles(&graph).len(), 1);
}

#[test]
fn analyser_counts_a_re_export_the_file_itself_uses() {
    let facade = analyse(&tree(&[
        ("lib.rs", "pub mod x;"),
        ("x/mod.rs", "mod a; pub use a::A; pub struct S;"),
        ("x/a.rs", "pub struct A(super::S);"),
    ]));
    assert!(cycles(&facade).is_empty(), "{:?}", edge_list(&facade));
    let user = analyse(&tree(&[
        ("lib.rs", "pub mod x;"),
        (
            "x/mod.rs",
            "mod a; pub use a::A; pub struct S; pub fn f(_: A) {}",
        ),
        ("x/a.rs", "pub struct A(super::S);"),
    ]));
    assert_eq!(
        cycles(&user),
        ["x/mod.rs -> x/a.rs (a::A) -> x/mod.rs (super::S)"]
    );
}

#[test]
fn analyser_ignores_comments_strings_and_other_crates() {
    let graph = analyse(&tree(&[
        ("lib.rs", "pub mod a; pub mod b;"),
        (
            "a.rs",
            r##"// use crate::b::B;
/* crate::b::B /* nested */ crate::b::B */
const S: &str = "crate::b::B";
const R: &str = r#"crate::b::B "quoted""#;
const C: char = '"';
fn f<'a>(x: &'a str) -> std::fmt::Result { let _ = serde::de::IgnoredAny; Ok(()) }"##,
        ),
        ("b.rs", "pub struct B;"),
    ]));
    assert!(graph.edges.is_empty(), "{:?}", edge_list(&graph));
}

#[test]
fn analyser_reports_a_back_edge_between_layers_and_unplaced_modules() {
    let graph = analyse(&tree(&[
        ("lib.rs", "pub mod low; pub mod high; pub mod stray;"),
        ("low.rs", "pub fn f() { crate::high::g() }"),
        ("high.rs", "pub fn g() {}"),
        ("stray.rs", ""),
        ("main.rs", "use epochal::high::g; fn main() { g() }"),
    ]));
    let found = layer_violations(&graph, &[&["low"], &["high"], &["gone"], &["main"]]);
    assert_eq!(
        found,
        [
            "`stray` is in no layer: place it in LAYERS",
            "LAYERS names `gone`, which is no module of src/",
            "low.rs (low, layer 1) names high.rs (high, layer 2): crate::high::g",
        ]
    );
    // Peers in one layer may not name each other either.
    let peers = layer_violations(&graph, &[&["low", "high", "stray"], &["main"]]);
    assert_eq!(
        peers,
        ["low.rs (low, layer 1) names high.rs (high, layer 1): crate::high::g"]
    );
}
