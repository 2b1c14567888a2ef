//! What this broker believes about the cluster for answering Metadata: live
//! brokers, every partition's leader, epoch, replicas and ISR, and the
//! controller's id. Filled only from the controller's UpdateMetadata requests,
//! as in Kafka, so clients see what the controller last announced.

use std::collections::BTreeMap;
use std::sync::RwLock;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerEndpoint {
    pub id: i32,
    pub host: String,
    pub port: i32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionMetadata {
    pub leader: i32,
    pub leader_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    pub offline_replicas: Vec<i32>,
}

#[derive(Clone, Debug, Default)]
pub struct ClusterView {
    pub controller_id: i32,
    pub brokers: BTreeMap<i32, BrokerEndpoint>,
    pub topics: BTreeMap<String, BTreeMap<i32, PartitionMetadata>>,
}

#[derive(Default)]
pub struct MetadataCache {
    view: RwLock<ClusterView>,
}

impl MetadataCache {
    pub fn new() -> Self {
        Self {
            view: RwLock::new(ClusterView {
                controller_id: -1,
                ..Default::default()
            }),
        }
    }

    pub fn snapshot(&self) -> ClusterView {
        self.view.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Replace the view with the controller's announcement (UpdateMetadata
    /// carries the full state in this broker's controller).
    pub fn replace(&self, view: ClusterView) {
        *self.view.write().unwrap_or_else(|p| p.into_inner()) = view;
    }

    /// How many of `topic`'s partitions have a leader (0 for an unknown topic).
    pub fn partitions_led(&self, topic: &str) -> i32 {
        let view = self.view.read().unwrap_or_else(|p| p.into_inner());
        view.topics
            .get(topic)
            .map_or(0, |ps| ps.values().filter(|p| p.leader >= 0).count() as i32)
    }
}
