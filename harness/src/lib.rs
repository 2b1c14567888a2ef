//! epochal: the fault-injection conformance harness.
//!
//! Holds `schedule` (TOML schedules with awaits), `history` (Jepsen-style ops,
//! streamed and validated), `reader` (its own reader of Kafka-format replica
//! state — never the broker's code) and `cli`; will hold `runtime` (process and
//! docker), `nemesis`, `workload`, `checker`, `store`, `report` and `gate`.

pub mod cli;
pub mod history;
pub mod reader;
pub mod schedule;
