//! The workspace's file graphs, kept by a test. Every `.rs` file under a
//! crate's `src/` is read, the places where it names another module are
//! resolved to the file that defines what they name, and of that file graph:
//!
//! 1. in every crate (harness, broker, faults) it has no cycle: no file
//!    depends, through any chain, on itself;
//! 2. in each crate, each module names only modules of layers below its own
//!    ([`LAYERS`], [`BROKER_LAYERS`], [`FAULTS_LAYERS`], lowest first;
//!    modules that share a layer are peers and name neither each other). An
//!    entry is a top-level module or one below it that sits lower than its
//!    parent (the broker's `controller::metadata_store`, which everything
//!    that talks to etcd uses).
//!
//! What counts as naming a module: a `use` declaration, and a path in code
//! that starts at `crate::`, `super::`, `self::`, a child module, or a name a
//! `use` brought in. Test code counts too. A crate's library root is
//! `lib.rs`; each binary (`main.rs`, `bin/*.rs`) is a root of its own, where
//! `crate::` is the binary and the crate's name (`epochal::`,
//! `epochal_broker::`, `epochal_faults::`) the library. A path is resolved as
//! rustc resolves it, as far as files go: down the module tree to the
//! deepest file (a `#[path = ".."] mod x;` puts its file at `x`), then through
//! that file's own `use` of the next name, so a name a folder's `mod.rs`
//! re-exports is credited to the file that defines it. A `pub use` of a
//! file's own descendants is its public face, not a dependency: it adds no
//! edge unless the file's own code uses the name.
//!
//! What it cannot see, and why that is acceptable: a method call (`x.f()`)
//! names no path, so an `impl` block split over files is seen only through the
//! types and functions it names (we keep each type's methods in files that
//! are above or beside the type, never below); a macro's expansion is not
//! read (the only macros are local, such as the harness's `text_form!`,
//! `anomalies!`, `details!` and the broker's `broker_settings!`), though the
//! paths written in a macro's arguments are.
//!
//! The parts: [`scan`] reads one file (tokens, `use` trees, declarations,
//! paths), [`graph`] resolves paths to files and finds cycles and layer
//! breaks, and [`analyser_tests`] runs both on small made-up trees first, so a
//! passing run on a real tree means the tree is clean, not that the analyser
//! saw nothing.

mod analyser_tests;
mod graph;
mod scan;

use std::path::Path;

use graph::{Tree, analyse, cycles, layer_violations};

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
    // Each fault kind as one value, over the schedule's faults: the nemesis,
    // the campaigns, the checkers and the report ask a kind what it does,
    // so it sits below all of them; the history's `f` is its verb.
    &["fault"],
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

/// The broker's layers, lowest first, as [`LAYERS`] (an entry may be a
/// module below a top-level one: tests/layers/graph.rs,
/// `layer_violations`).
const BROKER_LAYERS: &[&[&str]] = &[
    // What names nothing of the broker: failpoints, the allocator, the
    // client connection the broker dials its peers with.
    &["failpoints", "huge_alloc", "client"],
    &["config"],
    // etcd: the metadata store, and the broker's lease session over it.
    &["controller::metadata_store"],
    &["controller::session"],
    // Topic configs (kept in etcd) and the state-change log.
    &["topic_config", "state_change_log"],
    // Replica files on disk; group membership.
    &["storage", "group"],
    &["controller"],
    &["replica"],
    &["offsets"],
    // What the controller told this broker, and its producer ids.
    &["server::metadata_cache", "server::producer_id_manager"],
    &["transactions"],
    &["server"],
    &["broker"],
    &["main"],
];

/// The faults crate's layers, lowest first: process signals and the proxy
/// name nothing of the crate; the Toxiproxy-compatible client speaks the
/// proxy's API types; the binary serves the proxy.
const FAULTS_LAYERS: &[&[&str]] = &[
    &["signal", "proxy"],
    &["toxiproxy_client"],
    &["bin/epochal-proxy"],
];

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

/// One crate's `src/`, by its folder in the workspace.
fn crate_src(folder: &str) -> Tree {
    read_tree(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(folder)
            .join("src"),
    )
}

/// The crate's file graph, and its cycles; panics when the graph has too
/// few edges to be the real tree.
fn cycles_of(folder: &str, crate_name: &str, at_least: usize) -> Vec<String> {
    let graph = analyse(&crate_src(folder), crate_name);
    assert!(
        graph.edges.len() >= at_least,
        "the analyser found too few edges to be reading {folder}/src: {}",
        graph.edges.len()
    );
    cycles(&graph)
}

// ---------------------------------------------------------------- the trees

#[test]
fn the_harness_has_no_file_level_import_cycle() {
    let cycles = cycles_of("harness", "epochal", 300);
    assert!(
        cycles.is_empty(),
        "file-level import cycles in harness/src:\n  {}",
        cycles.join("\n  ")
    );
}

#[test]
fn each_module_names_only_layers_below_its_own() {
    let graph = analyse(&crate_src("harness"), "epochal");
    let violations = layer_violations(&graph, LAYERS);
    assert!(
        violations.is_empty(),
        "harness/src breaks its layer order (tests/layers/main.rs, LAYERS):\n  {}",
        violations.join("\n  ")
    );
}

#[test]
fn the_broker_has_no_file_level_import_cycle() {
    let cycles = cycles_of("broker", "epochal_broker", 300);
    assert!(
        cycles.is_empty(),
        "file-level import cycles in broker/src:\n  {}",
        cycles.join("\n  ")
    );
}

#[test]
fn the_faults_crate_has_no_file_level_import_cycle() {
    let cycles = cycles_of("faults", "epochal_faults", 40);
    assert!(
        cycles.is_empty(),
        "file-level import cycles in faults/src:\n  {}",
        cycles.join("\n  ")
    );
}

#[test]
fn each_broker_module_names_only_layers_below_its_own() {
    let graph = analyse(&crate_src("broker"), "epochal_broker");
    let violations = layer_violations(&graph, BROKER_LAYERS);
    assert!(
        violations.is_empty(),
        "broker/src breaks its layer order (tests/layers/main.rs, BROKER_LAYERS):\n  {}",
        violations.join("\n  ")
    );
}

/// The broker's rule on its real tree, with one back-edge added: the
/// storage layer naming the request layer's shared state. The test above
/// passing means the tree has no such edge, not that none is seen.
#[test]
fn a_back_edge_added_to_the_broker_is_named() {
    let mut tree = crate_src("broker");
    let (_, storage) = tree
        .iter_mut()
        .find(|(file, _)| file == "storage/mod.rs")
        .expect("broker/src/storage/mod.rs");
    storage.push_str("\nuse crate::server::context::Broker;\n");
    let violations = layer_violations(&analyse(&tree, "epochal_broker"), BROKER_LAYERS);
    assert!(
        violations
            .iter()
            .any(|v| v.starts_with("storage/mod.rs (storage, layer 6) names server/context.rs")),
        "the added edge was not named: {violations:?}"
    );
}

#[test]
fn each_faults_module_names_only_layers_below_its_own() {
    let graph = analyse(&crate_src("faults"), "epochal_faults");
    let violations = layer_violations(&graph, FAULTS_LAYERS);
    assert!(
        violations.is_empty(),
        "faults/src breaks its layer order (tests/layers/main.rs, FAULTS_LAYERS):\n  {}",
        violations.join("\n  ")
    );
}
