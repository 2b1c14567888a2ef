//! The cluster as etcd records it, read over a direct connection no fault
//! touches: the controller, the registered brokers, and every partition's
//! replicas, leader and ISR, all from one read at one revision. Readiness is
//! judged from this view, never from a broker's own answers.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::node::NodeId;
use crate::topic_partition::PartitionRef;

/// Everything under `/epochal` the harness needs to call a cluster ready
/// (key layout: broker/README.md, "etcd key layout").
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterView {
    pub revision: i64,
    pub controller: Option<NodeId>,
    pub brokers: BTreeSet<NodeId>,
    pub partitions: BTreeMap<PartitionRef, PartitionView>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PartitionView {
    pub replicas: Vec<NodeId>,
    /// `None` before the controller elected one, or when it recorded -1.
    pub leader: Option<NodeId>,
    pub isr: Vec<NodeId>,
    /// The leader epoch recorded with the leader (-1 before the first election).
    pub leader_epoch: i32,
    /// The controller epoch of the controller that wrote this state.
    pub controller_epoch: i32,
}

impl ClusterView {
    /// Reads the whole `/epochal` prefix in one range read.
    pub async fn read(client: &mut etcd_client::Client) -> Result<Self, etcd_client::Error> {
        let response = client
            .get(
                "/epochal/",
                Some(etcd_client::GetOptions::new().with_prefix()),
            )
            .await?;
        let mut view = ClusterView {
            revision: response.header().map_or(0, |h| h.revision()),
            ..ClusterView::default()
        };
        let mut states = Vec::new();
        for kv in response.kvs() {
            let (Ok(key), Ok(value)) = (kv.key_str(), kv.value_str()) else {
                continue;
            };
            let json: Option<Value> = serde_json::from_str(value).ok();
            let parts: Vec<&str> = key.trim_start_matches("/epochal/").split('/').collect();
            match parts.as_slice() {
                ["controller"] => {
                    view.controller = json
                        .as_ref()
                        .and_then(|j| j.get("broker_id"))
                        .and_then(Value::as_i64)
                        .and_then(|id| NodeId::from_broker_id(i32::try_from(id).ok()?));
                }
                ["brokers", "ids", id] => {
                    if let Some(id) = id.parse().ok().and_then(NodeId::from_broker_id) {
                        view.brokers.insert(id);
                    }
                }
                ["brokers", "topics", topic] => {
                    let assignment = json.as_ref().and_then(|j| j.get("partitions"));
                    for (p, replicas) in assignment.and_then(Value::as_object).into_iter().flatten()
                    {
                        let Ok(p) = p.parse() else { continue };
                        view.partitions
                            .entry(PartitionRef::new(*topic, p))
                            .or_default()
                            .replicas = ids(replicas);
                    }
                }
                ["brokers", "topics", topic, "partitions", p, "state"] => {
                    if let (Ok(p), Some(json)) = (p.parse::<u32>(), json) {
                        states.push((topic.to_string(), p, json));
                    }
                }
                _ => {}
            }
        }
        for (topic, p, state) in states {
            let partition = view
                .partitions
                .entry(PartitionRef::new(topic, p))
                .or_default();
            partition.leader = state
                .get("leader")
                .and_then(Value::as_i64)
                .and_then(|l| NodeId::from_broker_id(i32::try_from(l).ok()?));
            partition.isr = state.get("isr").map(ids).unwrap_or_default();
            let int = |key: &str| state.get(key).and_then(Value::as_i64).unwrap_or(-1) as i32;
            partition.leader_epoch = int("leader_epoch");
            partition.controller_epoch = int("controller_epoch");
        }
        Ok(view)
    }

    pub fn partition(&self, partition: &PartitionRef) -> Option<&PartitionView> {
        self.partitions.get(partition)
    }

    /// The partition's leader as etcd names it now.
    pub fn leader_of(&self, partition: &PartitionRef) -> Option<NodeId> {
        self.partition(partition).and_then(|p| p.leader)
    }

    /// Ready: a controller, all `brokers` registered, and every partition with a
    /// leader and its full replica set in the ISR. `Err` names what is missing.
    pub fn ready(&self, brokers: &BTreeSet<NodeId>) -> Result<(), NotReady> {
        if self.controller.is_none() {
            return Err(NotReady::NoController);
        }
        if let Some(&missing) = brokers.difference(&self.brokers).next() {
            return Err(NotReady::NotRegistered { broker: missing });
        }
        for (p, partition) in &self.partitions {
            if partition.leader.is_none() {
                return Err(NotReady::NoLeader {
                    partition: p.clone(),
                });
            }
            let isr: BTreeSet<_> = partition.isr.iter().collect();
            let replicas: BTreeSet<_> = partition.replicas.iter().collect();
            if replicas.is_empty() || isr != replicas {
                return Err(NotReady::IsrNotReplicas {
                    partition: p.clone(),
                    isr: partition.isr.clone(),
                    replicas: partition.replicas.clone(),
                });
            }
        }
        Ok(())
    }
}

/// The first thing etcd's view lacks for a ready cluster.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotReady {
    #[error("no controller")]
    NoController,
    #[error("broker {} not registered", broker.id())]
    NotRegistered { broker: NodeId },
    #[error("{partition} has no leader")]
    NoLeader { partition: PartitionRef },
    /// Printed as broker ids, as etcd lists them.
    #[error(
        "{partition} ISR {:?} is not its replicas {:?}",
        NodeId::ids(isr),
        NodeId::ids(replicas)
    )]
    IsrNotReplicas {
        partition: PartitionRef,
        isr: Vec<NodeId>,
        replicas: Vec<NodeId>,
    },
}

fn ids(value: &Value) -> Vec<NodeId> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_i64)
        .filter_map(|id| NodeId::from_broker_id(i32::try_from(id).ok()?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(ids: &[u32]) -> Vec<NodeId> {
        ids.iter().map(|&n| NodeId::new(n)).collect()
    }

    fn partition(leader: Option<u32>, isr: &[u32]) -> PartitionView {
        PartitionView {
            replicas: nodes(&[1, 2, 3]),
            leader: leader.map(NodeId::new),
            isr: nodes(isr),
            ..PartitionView::default()
        }
    }

    #[test]
    fn ready_names_the_first_thing_missing() {
        let all: BTreeSet<NodeId> = nodes(&[1, 2, 3]).into_iter().collect();
        let missing = |view: &ClusterView| view.ready(&all).unwrap_err();
        let mut view = ClusterView::default();
        assert_eq!(missing(&view), NotReady::NoController);
        assert_eq!(missing(&view).to_string(), "no controller");
        view.controller = Some(NodeId::new(1));
        view.brokers = nodes(&[1, 2]).into_iter().collect();
        assert_eq!(
            missing(&view),
            NotReady::NotRegistered {
                broker: NodeId::new(3)
            }
        );
        assert_eq!(missing(&view).to_string(), "broker 3 not registered");
        view.brokers = all.clone();
        view.partitions
            .insert(PartitionRef::new("t", 0), partition(None, &[1, 2, 3]));
        assert_eq!(missing(&view).to_string(), "t-0 has no leader");
        view.partitions
            .insert(PartitionRef::new("t", 0), partition(Some(1), &[1, 3]));
        assert_eq!(
            missing(&view).to_string(),
            "t-0 ISR [1, 3] is not its replicas [1, 2, 3]"
        );
        view.partitions
            .insert(PartitionRef::new("t", 0), partition(Some(1), &[3, 2, 1]));
        assert_eq!(view.ready(&all), Ok(()));
    }
}
