//! The analyser on small made-up trees: each shape it must see (or must not
//! mistake for a dependency), so a clean real tree means something.

use crate::graph::{Graph, Tree, analyse, cycles, layer_violations};

fn tree(files: &[(&str, &str)]) -> Tree {
    files
        .iter()
        .map(|(f, s)| (f.to_string(), s.to_string()))
        .collect()
}

/// A made-up crate whose binaries name its library `epochal`.
fn harness_like(files: &[(&str, &str)]) -> Graph {
    analyse(&tree(files), "epochal")
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
    let graph = harness_like(&[
        ("lib.rs", "pub mod a; pub mod b;"),
        ("a.rs", "use crate::b::B; pub struct A(B);"),
        ("b.rs", "pub struct B; fn f() -> crate::a::A { todo!() }"),
    ]);
    assert_eq!(edge_list(&graph), ["a.rs -> b.rs", "b.rs -> a.rs"]);
    let found = cycles(&graph);
    assert_eq!(found, ["a.rs -> b.rs (crate::b::B) -> a.rs (crate::a::A)"]);
}

#[test]
fn analyser_follows_super_self_children_and_imported_modules() {
    let graph = harness_like(&[
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
    ]);
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
    let facade = harness_like(&[
        ("lib.rs", "pub mod x;"),
        ("x/mod.rs", "mod a; pub use a::A; pub struct S;"),
        ("x/a.rs", "pub struct A(super::S);"),
    ]);
    assert!(cycles(&facade).is_empty(), "{:?}", edge_list(&facade));
    let user = harness_like(&[
        ("lib.rs", "pub mod x;"),
        (
            "x/mod.rs",
            "mod a; pub use a::A; pub struct S; pub fn f(_: A) {}",
        ),
        ("x/a.rs", "pub struct A(super::S);"),
    ]);
    assert_eq!(
        cycles(&user),
        ["x/mod.rs -> x/a.rs (a::A) -> x/mod.rs (super::S)"]
    );
}

#[test]
fn analyser_ignores_comments_strings_and_other_crates() {
    let graph = harness_like(&[
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
    ]);
    assert!(graph.edges.is_empty(), "{:?}", edge_list(&graph));
}

#[test]
fn analyser_reports_a_back_edge_between_layers_and_unplaced_modules() {
    let graph = harness_like(&[
        ("lib.rs", "pub mod low; pub mod high; pub mod stray;"),
        ("low.rs", "pub fn f() { crate::high::g() }"),
        ("high.rs", "pub fn g() {}"),
        ("stray.rs", ""),
        ("main.rs", "use epochal::high::g; fn main() { g() }"),
    ]);
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

/// A module below a top-level one may be a layer of its own, lower than its
/// parent: a file belongs to the longest entry its path starts with.
#[test]
fn analyser_places_a_module_below_its_parent_in_a_lower_layer() {
    let graph = harness_like(&[
        ("lib.rs", "pub mod ctl; pub mod mid;"),
        (
            "ctl/mod.rs",
            "pub mod store; pub fn run() { crate::mid::m() }",
        ),
        ("ctl/store.rs", "pub fn put() {}"),
        ("mid.rs", "pub fn m() { crate::ctl::store::put() }"),
    ]);
    let layers: &[&[&str]] = &[&["ctl::store"], &["mid"], &["ctl"]];
    assert!(layer_violations(&graph, layers).is_empty());
    // The store naming its parent goes up.
    let graph = harness_like(&[
        ("lib.rs", "pub mod ctl; pub mod mid;"),
        ("ctl/mod.rs", "pub mod store; pub fn run() {}"),
        ("ctl/store.rs", "pub fn put() { super::run() }"),
        ("mid.rs", ""),
    ]);
    assert_eq!(
        layer_violations(&graph, layers),
        ["ctl/store.rs (ctl::store, layer 1) names ctl/mod.rs (ctl, layer 3): super::run"]
    );
}

/// A tree shaped like the broker's: a binary at `main.rs` and one under
/// `bin/` naming the library by the crate's name, a test file a `#[path]`
/// attaches below the file that declares it, a `mod.rs` folder and a file
/// with children. Clean as given; one call back from the lower file to the
/// higher one makes a cycle.
#[test]
fn analyser_finds_a_back_edge_added_to_a_broker_like_tree() {
    let files = [
        ("lib.rs", "pub mod config; pub mod replica; pub mod server;"),
        (
            "config.rs",
            "mod settings; pub use settings::Setting; pub struct ConfigError;",
        ),
        (
            "config/settings.rs",
            "pub struct Setting(super::ConfigError);",
        ),
        ("replica/mod.rs", "pub mod leader; pub mod manager;"),
        (
            "replica/leader.rs",
            r#"use super::manager::{DEBUGGING_REPLICA_ID, ReplicaManager};
pub fn read(_: &ReplicaManager) -> i32 { DEBUGGING_REPLICA_ID }
#[cfg(test)]
#[path = "leader_tests.rs"]
mod tests;"#,
        ),
        (
            "replica/leader_tests.rs",
            "use super::*; fn t() { read(&ReplicaManager); }",
        ),
        (
            "replica/manager.rs",
            "pub struct ReplicaManager; pub const DEBUGGING_REPLICA_ID: i32 = -2;",
        ),
        (
            "server.rs",
            "use crate::replica::leader; use crate::config::Setting;
             pub fn serve(_: Setting) { leader::read(&crate::replica::manager::ReplicaManager); }",
        ),
        (
            "main.rs",
            "use epochal_broker::server::serve; fn main() { serve(todo!()) }",
        ),
        (
            "bin/tool.rs",
            "fn main() { epochal_broker::server::serve(todo!()); crate::helper() } fn helper() {}",
        ),
    ];
    let clean = analyse(&tree(&files), "epochal_broker");
    assert_eq!(
        edge_list(&clean),
        [
            // The binaries name the library; `crate::` in one is itself.
            "bin/tool.rs -> server.rs",
            "config/settings.rs -> config.rs",
            "main.rs -> server.rs",
            "replica/leader.rs -> replica/manager.rs",
            // `super` in the `#[path]` file is leader.rs, not replica/mod.rs.
            "replica/leader_tests.rs -> replica/leader.rs",
            "server.rs -> config/settings.rs",
            "server.rs -> replica/leader.rs",
            "server.rs -> replica/manager.rs",
        ]
    );
    assert!(cycles(&clean).is_empty(), "{:?}", cycles(&clean));

    let mut back = files;
    back[6].1 = "pub struct ReplicaManager; pub const DEBUGGING_REPLICA_ID: i32 = -2;
                 pub fn debug() -> i32 { super::leader::read(&ReplicaManager) }";
    assert_eq!(
        cycles(&analyse(&tree(&back), "epochal_broker")),
        ["replica/leader.rs -> replica/manager.rs \
          (super::manager::DEBUGGING_REPLICA_ID, super::manager::ReplicaManager) \
          -> replica/leader.rs (super::leader::read)"]
    );
}
