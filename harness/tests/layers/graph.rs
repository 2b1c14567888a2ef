//! From files to a graph: which file holds which module, the file each path
//! names (as rustc resolves it, as far as files go), the file graph, its
//! cycles, and the edges that break a layer order.

use std::collections::{BTreeMap, BTreeSet};

use crate::scan::{FileFacts, declarations, references, tokens};

/// A source tree as the analyser reads it: paths relative to `src/`.
pub type Tree = Vec<(String, String)>;

/// The file graph: each file and its module, and each edge with the paths
/// that made it.
pub struct Graph {
    pub files: Vec<String>,
    pub modules: Vec<Vec<String>>,
    /// `(from, to)` → the paths in `from` that name something in `to`.
    pub edges: BTreeMap<(usize, usize), BTreeSet<String>>,
}

// ---------------------------------------------------------------- the graph

/// A file's module path from its path under `src/`: `lib.rs` is the library's
/// root, `a/mod.rs` and `a.rs` are `a`. A binary is a root of its own, one
/// segment no library module can have: `main.rs` is `main`, `bin/x.rs` and
/// `bin/x/main.rs` are `bin/x` (and `bin/x/y.rs` is `bin/x`, `y`).
fn module_of(file: &str) -> Vec<String> {
    let file = file.trim_end_matches(".rs");
    let mut parts: Vec<String> = match file.strip_prefix("bin/") {
        _ if file == "lib" => return Vec::new(),
        _ if file == "main" => return vec!["main".into()],
        Some(bin) => {
            let (name, rest) = bin.split_once('/').unwrap_or((bin, "main"));
            let root = format!("bin/{name}");
            if rest == "main" {
                return vec![root];
            }
            std::iter::once(root)
                .chain(rest.split('/').map(String::from))
                .collect()
        }
        None => file.split('/').map(String::from).collect(),
    };
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// Whether a module is a binary's root or inside one (see [`module_of`]).
fn in_binary(module: &[String]) -> bool {
    module
        .first()
        .is_some_and(|m| m == "main" || m.starts_with("bin/"))
}

/// Each file's module: [`module_of`] its path, except that a file a
/// `#[path = ".."] mod x;` names is the module `x` of the declaring file.
fn modules(files: &[String], facts: &[FileFacts]) -> Vec<Vec<String>> {
    let mut modules: Vec<Vec<String>> = files.iter().map(|f| module_of(f)).collect();
    for (declaring, f) in facts.iter().enumerate() {
        let folder = files[declaring].rsplit_once('/').map(|(d, _)| d);
        for (name, file) in &f.child_paths {
            let file = match folder {
                Some(folder) => format!("{folder}/{file}"),
                None => file.clone(),
            };
            if let Some(child) = files.iter().position(|g| *g == file) {
                modules[child] = modules[declaring]
                    .iter()
                    .cloned()
                    .chain([name.clone()])
                    .collect();
            }
        }
    }
    modules
}

/// The file graph of one crate's `src/`. `crate_name` is how its binaries
/// name its library (`epochal`, `epochal_broker`).
pub fn analyse(tree: &Tree, crate_name: &str) -> Graph {
    let files: Vec<String> = tree.iter().map(|(f, _)| f.clone()).collect();
    let toks: Vec<_> = tree.iter().map(|(_, src)| tokens(src)).collect();
    let mut facts: Vec<FileFacts> = toks.iter().map(|t| declarations(t)).collect();
    let modules = modules(&files, &facts);
    for ((t, m), f) in toks.iter().zip(&modules).zip(&mut facts) {
        references(t, m, crate_name, f);
    }
    let by_module: BTreeMap<Vec<String>, usize> = modules
        .iter()
        .cloned()
        .enumerate()
        .map(|(i, m)| (m, i))
        .collect();

    // An absolute path → the file that defines what it names.
    fn resolve(
        path: &[String],
        by_module: &BTreeMap<Vec<String>, usize>,
        facts: &[FileFacts],
        modules: &[Vec<String>],
        crate_name: &str,
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
            && let Some(mut target) = absolute(
                &modules[file],
                &modules[file],
                &facts[file],
                written,
                crate_name,
            )
        {
            target.extend(path[k + 1..].iter().cloned());
            return resolve(&target, by_module, facts, modules, crate_name, hops + 1)
                .or(Some(file));
        }
        Some(file)
    }

    let mut edges: BTreeMap<(usize, usize), BTreeSet<String>> = BTreeMap::new();
    for (file, f) in facts.iter().enumerate() {
        for r in &f.refs {
            let Some(abs) = absolute(&modules[file], &r.module, f, &r.path, crate_name) else {
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
            let Some(to) = resolve(&abs, &by_module, &facts, &modules, crate_name, 0) else {
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
    Graph {
        files,
        modules,
        edges,
    }
}

/// A path as written in the file of module `file_module`, inside `module`
/// (the file's, or an inline module's), from the crate root; `None` when it
/// leaves the crate (std, a dependency). In a binary, `crate` is the
/// binary's root and `crate_name` the library's.
fn absolute(
    file_module: &[String],
    module: &[String],
    facts: &FileFacts,
    path: &[String],
    crate_name: &str,
) -> Option<Vec<String>> {
    let binary = in_binary(file_module);
    let (base, rest): (Vec<String>, &[String]) = match path.first()?.as_str() {
        "crate" if binary => (file_module[..1].to_vec(), &path[1..]),
        "crate" => (Vec::new(), &path[1..]),
        name if binary && name == crate_name => (Vec::new(), &path[1..]),
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
            let mut resolved = absolute(file_module, file_module, facts, written, crate_name)?;
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
pub fn cycles(graph: &Graph) -> Vec<String> {
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
///
/// A layer's entry is a top-level module (`replica`) or a module below one
/// (`controller::metadata_store`): a file belongs to the longest entry its
/// module path starts with, so a module can sit lower than the rest of its
/// parent when nothing in it names the parent.
pub fn layer_violations(graph: &Graph, layers: &[&[&str]]) -> Vec<String> {
    let layer_of = |unit: &str| layers.iter().position(|l| l.contains(&unit));
    let unit = |file: usize| -> Option<String> {
        let path = &graph.modules[file];
        (1..=path.len())
            .rev()
            .map(|k| path[..k].join("::"))
            .find(|unit| layer_of(unit).is_some())
            .or_else(|| path.first().cloned())
    };
    let mut found = Vec::new();
    let units: BTreeSet<String> = (0..graph.files.len()).filter_map(unit).collect();
    for module in &units {
        if layer_of(module).is_none() {
            found.push(format!("`{module}` is in no layer: place it in LAYERS"));
        }
    }
    for module in layers.iter().flat_map(|l| l.iter()) {
        if !units.contains(*module) {
            found.push(format!(
                "LAYERS names `{module}`, which is no module of src/"
            ));
        }
    }
    for (&(a, b), why) in &graph.edges {
        let (Some(ua), Some(ub)) = (unit(a), unit(b)) else {
            continue;
        };
        if ua == ub {
            continue;
        }
        if let (Some(la), Some(lb)) = (layer_of(&ua), layer_of(&ub))
            && la <= lb
        {
            let why: Vec<&str> = why.iter().map(String::as_str).collect();
            found.push(format!(
                "{} ({ua}, layer {}) names {} ({ub}, layer {}): {}",
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
