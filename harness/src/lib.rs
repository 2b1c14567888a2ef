//! epochal: the fault-injection conformance harness.
//!
//! The vocabulary first: `node` (a broker, `b1` ⇄ id 1), `topic_partition`
//! (`t-0`), `schedule` (TOML in, typed steps out), `history` (typed Jepsen-style
//! ops on disk), `run_dir` (what a run directory holds). Then the parts of a
//! run, in the order data flows: `runtime` starts the cluster, `observe` reads
//! it over connections no fault touches, `nemesis` breaks it, `workload` drives
//! it through op-recording clients, `run` plays a schedule phase by phase,
//! `reader` reads every replica's files independently of the broker, `checker`
//! judges, `gate` runs suites and `cli` is the binary's edge.

pub mod campaign;
pub mod checker;
pub mod cli;
pub mod gate;
pub mod history;
pub mod nemesis;
pub mod node;
pub mod observe;
pub mod random;
pub mod reader;
pub mod report;
pub mod run;
pub mod run_dir;
pub mod runtime;
pub mod schedule;
pub mod snapshot;
pub mod store;
mod text_form;
pub mod topic_partition;
pub mod workload;
