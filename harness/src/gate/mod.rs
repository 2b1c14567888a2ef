//! Suites and the release gate. A suite is a TOML file of scenarios; each names
//! a schedule, the settings it runs under, the verdict it must reach on each
//! (`valid`, or `invalid` with the anomaly expected: a bug reproduction that
//! must keep reproducing) and path assertions that prove the fault bit — a
//! pass that never exercised the fault proves nothing.
//!
//! ```toml
//! [[scenario]]
//! name = "kip-101-scenario-1"
//! schedule = "schedules/kip-101-scenario-1.toml"  # relative to the suite file
//!
//! [[scenario.setting]]
//! set = ["truncation=high-watermark"]
//! expect = "invalid"
//! anomaly = "lost-acknowledged-write"
//!
//! [[scenario.setting]]
//! set = ["truncation=current"]
//! expect = "valid"
//! # snapshot = false                        # this setting's run is not snapshotted
//!
//! [[scenario.path]]
//! acked_at_least = 2                          # values acknowledged (ok sends)
//! [[scenario.path]]
//! resent_acked_at_least = 1                   # idempotent sends acked after a resend
//! [[scenario.path]]
//! committed_reads_at_least = 1                # committed reads after an acked commit
//! [[scenario.path]]
//! fault = "crash"                             # a nemesis op that completed without error
//! [[scenario.path]]
//! isr_shrink = "t-0"                          # etcd's timeline shows the ISR shrink
//! [[scenario.path]]
//! leaders = { partition = "t-0", sequence = ["b1@0", "b2@1"] }   # leader@epoch, in order, exactly
//! ```
//!
//! `epochal gate` runs every scenario under every setting it names and meets
//! the gate only when each run reaches its expected verdict, names the
//! expected anomaly, and passes its path assertions. An unknown fails the
//! gate, and so does an unexpected pass of a bug reproduction. A directory
//! given to the gate contributes every `*.toml` in it with `[[scenario]]`
//! tables (the schedules beside them have none).

mod merge;
mod output;
mod path;
mod run;
mod suite;

pub use merge::{MergeError, merge};
pub use output::{junit, write_table};
pub use run::{Case, CaseResult, GateOptions, Shard, cases, judge, run_gate};
pub use suite::{
    CampaignCase, Expect, LeaderSequence, LoadedSuite, PathAssertion, Scenario, Setting, Suite,
    SuiteError, load_suites, setting_dir, setting_label,
};
