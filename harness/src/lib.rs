//! epochal: the fault-injection conformance harness.
//!
//! The modules in layer order, lowest first; each names only modules before
//! it (`tests/layers/` keeps this, and that no file depends on itself):
//! the vocabulary (`text_form`, `random`, `duration`; `node`, a broker, `b1`
//! ⇄ id 1; `topic_partition`, `t-0`), `schedule` (TOML in, typed steps out)
//! and `system` (a system under test as data: systems/*.toml), `fault`
//! (each fault kind as one value: how the nemesis fires it, what undoes
//! it, how campaigns draw it, what it excuses), `history` (typed
//! Jepsen-style ops on disk), `reader` (every replica's files, read
//! independently of the broker), `store` and `run_dir` (where a run's files
//! go), `kafka_client` (the harness's own Kafka client),
//! `runtime` (starts the cluster), `observe` (reads it over connections no
//! fault touches), `workload` and `nemesis` (drive and break it), `checker`
//! (judges a run from its directory), `snapshot` and `report` (show it),
//! `run` (plays a schedule phase by phase), `campaign` (a run whose faults a
//! seed picks) and `session` (a run whose faults `epochal fault` sends, for
//! `epochal up`), `gate` (suites of runs) and `cli`, the binary's edge.

pub mod campaign;
pub mod checker;
pub mod cli;
pub mod duration;
pub mod fault;
pub mod gate;
pub mod history;
pub mod kafka_client;
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
pub mod session;
#[cfg(any(test, feature = "testing"))]
pub mod snapshot;
pub mod store;
pub mod system;
mod text_form;
mod toml_span;
pub mod topic_partition;
pub mod workload;
