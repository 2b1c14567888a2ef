//! The history's fault ops: what the nemesis fired ([`FaultOp`]), its aim
//! as the schedule wrote it ([`Aim`]) and, on the completion, what it
//! resolved to and did ([`Done`]); op.rs reads and writes them as the body
//! of their lines.

use serde::{Deserialize, Serialize};

use crate::fault::Verb;
use crate::node::NodeId;
use crate::schedule::{Api, Fault, OnHeal, PartitionRef, Payload, Sender, Target};

/// A fault the nemesis fired: its verb, its aim as written, and (on the
/// completion, when it worked) what it resolved to and did.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultOp {
    pub verb: Verb,
    pub aim: Aim,
    pub done: Option<Done>,
}

impl FaultOp {
    /// The invoke of `fault`.
    pub fn of(fault: &Fault) -> FaultOp {
        FaultOp {
            verb: Verb::of(fault),
            aim: Aim::of(fault),
            done: None,
        }
    }
}

/// What a fault names, as the schedule wrote it (resolved only when it fires).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Aim {
    /// A request fault's link and API (first: untagged, a one-way's
    /// `from`/`to` would read it otherwise).
    Requests {
        from: Sender,
        to: Target,
        api: Api,
        /// `delay-requests`' delay.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ms: Option<u64>,
    },
    OneWay {
        from: Target,
        to: Target,
        /// The cut's name, when the schedule gave one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// `reset`, when the schedule asked for it (`resume` is the default).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        on_heal: Option<OnHeal>,
    },
    TruncateLog {
        node: Target,
        partition: PartitionRef,
        to_offset: Option<u64>,
        by_bytes: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by_records: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fraction: Option<f64>,
    },
    Target {
        target: Target,
        /// Partition faults: as for `OneWay`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        on_heal: Option<OnHeal>,
    },
    /// A heal of one named cut.
    HealCut { heal: String },
    /// `heal` of everything, and the database's faults, name nobody.
    Nobody {},
}

/// `on_heal` for the history: only when it is not the default.
fn not_default(on_heal: OnHeal) -> Option<OnHeal> {
    (on_heal != OnHeal::Resume).then_some(on_heal)
}

impl Aim {
    pub fn of(fault: &Fault) -> Aim {
        match fault.payload() {
            Payload::Heal | Payload::Database => Aim::Nobody {},
            Payload::HealCut(id) => Aim::HealCut {
                heal: id.to_owned(),
            },
            Payload::Requests(r) => Aim::Requests {
                from: r.from.clone(),
                to: r.to.clone(),
                api: r.api,
                ms: None,
            },
            Payload::DelayedRequests(d) => Aim::Requests {
                from: d.from.clone(),
                to: d.to.clone(),
                api: d.api,
                ms: Some(d.ms),
            },
            Payload::OneWay(w) => Aim::OneWay {
                from: w.from.clone(),
                to: w.to.clone(),
                id: w.id.clone(),
                on_heal: not_default(w.on_heal),
            },
            Payload::Cut(c) => Aim::Target {
                target: c.target.clone(),
                id: c.id.clone(),
                on_heal: not_default(c.on_heal),
            },
            Payload::TruncateLog(t) => {
                let (to_offset, by_bytes, by_records, fraction) = t.cut.keys();
                Aim::TruncateLog {
                    node: t.node.clone(),
                    partition: t.partition.clone(),
                    to_offset,
                    by_bytes,
                    by_records,
                    fraction,
                }
            }
            Payload::Target(target) => Aim::Target {
                target: target.clone(),
                id: None,
                on_heal: None,
            },
        }
    }
}

/// What a fault that worked resolved to and did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Done {
    /// The nodes its target resolved to when it fired (for one-way: from, to).
    pub nodes: Vec<NodeId>,
    /// Partitions: the links now cut, `b2->b1`, `b1->etcd`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocked: Option<Vec<String>>,
    /// A heal of one named cut: the proxy streams that flow again
    /// (`b2-b1:Upstream`); streams another cut still holds are not listed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub healed: Option<Vec<String>>,
    /// Disk faults: what was cut, per node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut: Option<Vec<NodeCut>>,
    /// Disk faults (power loss, truncate-log): etcd's revision read just
    /// after the logs were cut, so the checkers can tell which ISR the loss
    /// left (a dead sole ISR member is still its leader: nothing changes it
    /// until the node returns or an unclean election replaces it). Restart
    /// and start: read just after the node was started, so the checkers know
    /// from when on it may have fetched back what a disk fault took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etcd_revision: Option<i64>,
    /// Restart and start: when the node was started (wall clock, ms since
    /// the Unix epoch), so the checkers can find the first decision it
    /// applied afterwards in its state-change log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_time_ms: Option<u64>,
    /// Restart and start: the nodes whose process ended by itself before
    /// it served (the system's failure to recover, `restart-failed`), each
    /// with what the runtime saw; they stay down.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exited: Option<Vec<ExitedAtStart>>,
    /// Stop: the nodes etcd still named registered a second after their
    /// process exited from a clean stop (nemesis/deregister.rs); absent
    /// when every one was gone, or none could be held to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registered_after_stop: Option<Vec<NodeId>>,
}

/// A node whose process ended by itself during its start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitedAtStart {
    pub node: NodeId,
    /// The runtime's words: the exit status and where its output went.
    pub error: String,
}

/// One node's logs after a disk fault: `power-loss` cuts every replica
/// (`cuts`), `truncate-log` one (`cut`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeCut {
    pub node: NodeId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuts: Option<Vec<ReplicaCut>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut: Option<ReplicaCut>,
}

impl NodeCut {
    /// Every replica cut on this node.
    pub fn replicas(&self) -> impl Iterator<Item = &ReplicaCut> {
        self.cuts.iter().flatten().chain(self.cut.iter())
    }
}

/// What a disk fault did to one replica.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaCut {
    /// The replica directory, e.g. `t-0`.
    pub replica: String,
    /// The log end offset the reader found before the cut and after it.
    pub log_end_offset_before: i64,
    pub log_end_offset_after: i64,
    /// Bytes removed from `.log` files (index files not counted).
    pub bytes_removed: u64,
    /// `.log` files deleted whole, relative to the data directory, in log
    /// order. Their index siblings went with them.
    pub segments_deleted: Vec<std::path::PathBuf>,
}
