//! epochal: the fault-injection conformance harness.
//!
//! Holds `runtime` (the process runtime; docker to come) and `reader` (its own
//! reader of Kafka-format replica state — never the broker's code). Will hold:
//! `schedule` (TOML schedules with awaits), `nemesis`, `workload`, `history`
//! (Jepsen-style ops), `checker`, `store`, `report`, `gate` and `cli`.

pub mod cli;
pub mod reader;
pub mod runtime;
