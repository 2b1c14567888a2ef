//! A partition's final log: the one replica whose records the data checkers
//! hold acknowledged writes against. It is the final leader's replica (the
//! last state in etcd's timeline), because that is the log consumers read
//! after the heal; with no timeline, or no leader at the end, any replica
//! will do when they all hold the same records, and otherwise there is none.
//!
//! A system that keeps its durable state in a database has a second log per
//! partition beside it: the database as the harness read it after the run
//! ([`FinalLog::of_database`]), which the database twins of lost-write and
//! offset-changed hold acknowledged writes against.

use crate::node::NodeId;
use crate::reader::{CompactRecord, ReplicaState};
use crate::topic_partition::PartitionRef;

use super::RunData;

/// Why a partition has no final log: the data checkers cannot hold its
/// acknowledged writes against any replica.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NoFinalLog {
    #[error("no node holds a replica of {0}")]
    NoReplica(PartitionRef),
    #[error(
        "the final leader of {partition}, {leader} (etcd revision {revision}), left no replica in the run directory"
    )]
    LeaderLeftNoReplica {
        partition: PartitionRef,
        leader: NodeId,
        revision: i64,
    },
    #[error("no final log for {partition}: {why}, and its replicas disagree")]
    ReplicasDisagree {
        partition: PartitionRef,
        /// `no timeline`, `the timeline has no state for it` or `it ended with no leader`.
        why: &'static str,
    },
    #[error("no replica of the partition and no send to it")]
    NotInTheRun,
    #[error("the system's final state is read over the protocol, and the run has no final read")]
    NoFinalRead,
    #[error("the final read (through {via}) has no {partition}: see final-read/final-read.json")]
    NotInFinalRead {
        partition: PartitionRef,
        via: NodeId,
    },
    #[error("the system names no database ([final_state] database)")]
    NoDatabase,
    #[error(transparent)]
    DatabaseNotRead(crate::checker::context::DatabaseUnread),
    #[error("the database holds no {0} and no client sent to it")]
    NotInDatabase(PartitionRef),
}

/// A partition's final log and how it was chosen.
pub(crate) struct FinalLog<'a> {
    /// The node whose replica is the final log; `None` for the database,
    /// which no broker holds.
    pub node: Option<NodeId>,
    pub replica: &'a ReplicaState,
    /// Why this replica: `b1, the final leader (etcd revision 12)` or
    /// `every replica agrees`.
    pub chosen: String,
    /// Every node holding a replica of the partition, in node order.
    pub holders: Vec<(NodeId, &'a ReplicaState)>,
}

impl<'a> FinalLog<'a> {
    /// For a system whose replicas cannot be read: the final read over the
    /// protocol is the final log (Jepsen's final read), and its one holder.
    fn from_final_read(
        run: &'a RunData,
        partition: &PartitionRef,
    ) -> Result<FinalLog<'a>, NoFinalLog> {
        let read = run.final_read.as_ref().ok_or(NoFinalLog::NoFinalRead)?;
        let replica = read
            .data
            .replica(&partition.topic, partition.wire_partition())
            .ok_or_else(|| NoFinalLog::NotInFinalRead {
                partition: partition.clone(),
                via: read.via,
            })?;
        Ok(FinalLog {
            node: Some(read.via),
            replica,
            chosen: format!("the final read over the protocol through {}", read.via),
            holders: run.holders(partition),
        })
    }

    /// The system's database's log of `partition`, as read after the run
    /// (a partition it holds no record of, but a client sent to, is an
    /// empty log: context.rs adds it); it has no holders among the brokers.
    pub(crate) fn of_database(
        run: &'a RunData,
        partition: &PartitionRef,
    ) -> Result<FinalLog<'a>, NoFinalLog> {
        let database = match &run.database {
            None => return Err(NoFinalLog::NoDatabase),
            Some(Err(why)) => return Err(NoFinalLog::DatabaseNotRead(why.clone())),
            Some(Ok(database)) => database,
        };
        let replica = database
            .data
            .replica(&partition.topic, partition.wire_partition())
            .ok_or_else(|| NoFinalLog::NotInDatabase(partition.clone()))?;
        Ok(FinalLog {
            node: None,
            replica,
            chosen: format!(
                "{} {}, read after the run",
                database.summary.engine, database.summary.source
            ),
            holders: Vec::new(),
        })
    }

    /// Chooses the final log of `partition`, or says why there is none.
    pub(crate) fn of(
        run: &'a RunData,
        partition: &PartitionRef,
    ) -> Result<FinalLog<'a>, NoFinalLog> {
        if !run.sees.replica_files {
            return Self::from_final_read(run, partition);
        }
        let holders = run.holders(partition);
        if holders.is_empty() {
            return Err(NoFinalLog::NoReplica(partition.clone()));
        }
        let last = run.timeline.as_ref().and_then(|t| {
            t.states_of(&partition.topic, partition.partition)
                .last()
                .copied()
        });
        // A state naming no broker (-1) has no leader whose log could be final.
        if let Some(state) = last
            && let Some(leader) = NodeId::from_broker_id(state.leader)
        {
            let Some(&(node, replica)) = holders.iter().find(|(node, _)| *node == leader) else {
                return Err(NoFinalLog::LeaderLeftNoReplica {
                    partition: partition.clone(),
                    leader,
                    revision: state.revision,
                });
            };
            return Ok(FinalLog {
                node: Some(node),
                replica,
                chosen: format!(
                    "{leader}, the final leader (etcd revision {})",
                    state.revision
                ),
                holders,
            });
        }
        let why = match (&run.timeline, last) {
            (None, _) => "no timeline",
            (Some(_), None) => "the timeline has no state for it",
            (Some(_), Some(_)) => "it ended with no leader",
        };
        let records: Vec<Vec<CompactRecord>> = holders
            .iter()
            .map(|(_, replica)| replica.compact().records)
            .collect();
        if records.windows(2).all(|w| w[0] == w[1]) {
            let (node, replica) = holders[0];
            return Ok(FinalLog {
                node: Some(node),
                replica,
                chosen: format!("every replica agrees ({why})"),
                holders,
            });
        }
        Err(NoFinalLog::ReplicasDisagree {
            partition: partition.clone(),
            why,
        })
    }
}
