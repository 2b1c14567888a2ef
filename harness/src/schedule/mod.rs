//! Schedules: a TOML file naming the cluster (brokers, topics, broker settings and
//! failpoints per node), the workload's defaults, and the steps of a run — faults,
//! client operations, and `await`s on observed conditions, each bounded. This
//! module parses and validates a schedule and prints it back; it runs nothing.
//!
//! docs/schedules.md is the user's reference, with examples the tests parse.

mod broker_settings;
pub mod condition;
mod document;
pub mod model;
mod parse;
mod payload;
pub mod requests;
pub mod step;
mod target;

pub use broker_settings::{BROKER_SETTINGS, FAILPOINTS, HARNESS_OWNED_SETTINGS, SettingKind};
pub use condition::{Checkpoint, Compare, Condition, Offset};
pub use document::Schedule;
pub use epochal_faults::proxy::OnHeal;
pub use model::{
    Acks, Background, Cluster, CommitStep, CommittedStep, Compression, Consume, Cut, Fault,
    MemberPoll, NodeConfig, OneWay, PartitionRef, Produce, SubscribeStep, Target, Topic, Truncate,
    TruncateLog, TxnIntent, TxnStep, TxnStepOp, Workload,
};
pub use parse::{Invalid, ScheduleError, step_line};
pub use payload::Payload;
pub use requests::{Api, DelayedRequests, Requests, Sender};
pub use step::Step;

use std::path::Path;

use crate::node::NodeId;

impl Schedule {
    /// Reads, parses and validates a schedule file.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, ScheduleError> {
        let path = path.as_ref();
        let src = std::fs::read_to_string(path).map_err(|source| ScheduleError::Io {
            file: path.to_owned(),
            source,
        })?;
        Self::parse(path, &src)
    }

    /// Parses and validates schedule text; `file` only names it in errors.
    pub fn parse(file: impl AsRef<Path>, src: &str) -> Result<Self, ScheduleError> {
        parse::parse(file.as_ref(), src)
    }

    /// The schedule as TOML, parseable back to an equal schedule. Each step
    /// is written as a person writes one, its fault or condition on one line
    /// (`fault = { one-way = { from = "b1", to = "b2" } }`), not as the
    /// nested tables a serializer would make of it: a campaign's realised
    /// schedule is meant to be read and cut down by hand.
    pub fn to_toml(&self) -> String {
        let head = Schedule {
            steps: Vec::new(),
            ..self.clone()
        };
        let mut out = toml::to_string(&head).expect("a schedule always serializes to TOML");
        for step in &self.steps {
            let table = toml::Value::try_from(step).expect("a step always serializes to TOML");
            out.push_str("\n[[step]]\n");
            for (key, value) in table.as_table().into_iter().flatten() {
                out.push_str(&format!("{key} = {value}\n"));
            }
        }
        out
    }

    /// The cluster's nodes, `b1` .. `bN`.
    pub fn nodes(&self) -> Vec<NodeId> {
        NodeId::all(self.cluster.brokers).collect()
    }

    /// Whether the run's clients run transactions: background
    /// transactional producers, or a `txn` step.
    pub fn runs_transactions(&self) -> bool {
        self.workload
            .background
            .as_ref()
            .is_some_and(|b| b.transactional > 0)
            || self.steps.iter().any(|s| matches!(s, Step::Txn(_)))
    }

    /// Whether the run's clients use consumer groups: background consumers
    /// that commit, subscribers, or a group step.
    pub fn uses_groups(&self) -> bool {
        self.workload
            .background
            .as_ref()
            .is_some_and(|b| (b.commits && b.consumers > 0) || b.subscribers > 0)
            || self.steps.iter().any(|s| {
                matches!(
                    s,
                    Step::Commit(_) | Step::Committed(_) | Step::Subscribe(_) | Step::Poll(_)
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_print_one_line_each_and_parse_back() {
        let src = r#"[cluster]
brokers = 3

[[cluster.topic]]
name = "t"
partitions = 1
replication_factor = 3

[[step]]
fault = { one-way = { from = "b1", to = "b2" } }

[[step]]
await = "leader of t-0 is b2"
timeout_ms = 5000

[[step]]
faults = [{ pause = "b1" }, { majority-minority = "b2,b3" }]

[[step]]
fault = "heal"
"#;
        let schedule = Schedule::parse("s.toml", src).unwrap();
        let text = schedule.to_toml();
        assert!(
            text.contains("\n[[step]]\nfault = { one-way = { from = \"b1\", to = \"b2\" } }\n"),
            "{text}"
        );
        assert!(text.contains("\n[[step]]\nfault = \"heal\"\n"), "{text}");
        assert!(!text.contains("[step."), "{text}");
        assert_eq!(Schedule::parse("s.toml", &text).unwrap(), schedule);
    }

    const CLUSTER: &str = "[cluster]\nbrokers = 1\n\n[[cluster.topic]]\nname = \"t\"\npartitions = 1\nreplication_factor = 1\n";

    #[test]
    fn idempotent_is_off_by_default_and_printed_back_only_when_on() {
        let plain = Schedule::parse("s.toml", CLUSTER).unwrap();
        assert!(!plain.workload.idempotent);
        assert!(
            !plain.to_toml().contains("idempotent"),
            "{}",
            plain.to_toml()
        );
        let src = format!("{CLUSTER}\n[workload]\nidempotent = true\n");
        let on = Schedule::parse("s.toml", &src).unwrap();
        assert!(on.workload.idempotent);
        let text = on.to_toml();
        assert!(text.contains("idempotent = true"), "{text}");
        assert_eq!(Schedule::parse("s.toml", &text).unwrap(), on);
    }

    #[test]
    fn a_bad_idempotent_names_the_key_and_other_acks_are_refused() {
        let src = format!("{CLUSTER}\n[workload]\nidempotent = \"yes\"\n");
        let e = Schedule::parse("s.toml", &src).unwrap_err();
        assert!(e.to_string().contains("`idempotent`"), "{e}");
        let src = format!("{CLUSTER}\n[workload]\nacks = \"1\"\nidempotent = true\n");
        let e = Schedule::parse("s.toml", &src).unwrap_err();
        assert!(
            e.to_string()
                .contains("`idempotent = true` needs acks = \"all\"; [workload] sets acks = \"1\""),
            "{e}"
        );
        assert_eq!(e.line(), Some(11));
        let src = format!(
            "{CLUSTER}\n[workload]\nidempotent = true\n\n[[step]]\nproduce = {{ partition = \"t-0\", values = [1], acks = \"0\" }}\n"
        );
        let e = Schedule::parse("s.toml", &src).unwrap_err();
        assert!(e.to_string().contains("step 1 sets acks = \"0\""), "{e}");
        // Without idempotence any acks goes, as before.
        let src = src.replace("idempotent = true", "idempotent = false");
        Schedule::parse("s.toml", &src).unwrap();
    }
}
