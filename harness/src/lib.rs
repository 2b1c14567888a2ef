//! epochal: the fault-injection conformance harness.
//!
//! Holds `runtime` (the process runtime; docker to come), `schedule` (TOML
//! schedules with awaits), `history` (Jepsen-style ops, streamed and validated),
//! `workload` (its own Kafka client), `reader` (its own reader of Kafka-format
//! replica state — never the broker's code) and `cli`; will hold `nemesis`,
//! `checker`, `store`, `report` and `gate`.

pub mod checker;
pub mod cli;
pub mod gate;
pub mod history;
pub mod nemesis;
pub mod observe;
pub mod reader;
pub mod report;
pub mod run;
pub mod runtime;
pub mod schedule;
pub mod snapshot;
pub mod store;
pub mod timeline;
pub mod workload;
