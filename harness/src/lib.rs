//! epochal: the fault-injection conformance harness.
//!
//! Will hold: `schedule` (TOML schedules with awaits), `runtime` (process and
//! docker), `nemesis`, `workload`, `history` (Jepsen-style ops), `reader` (its own
//! reader of Kafka-format replica state — never the broker's code), `checker`,
//! `store`, `report`, `gate` and `cli`.

pub mod cli;
pub mod reader;
pub mod workload;
