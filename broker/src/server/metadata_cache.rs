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
    /// Each topic's id (KIP-516) as UpdateMetadata v7 announced it, in its
    /// hyphenated form; a topic with none (the zero UUID) is not here.
    pub topic_ids: BTreeMap<String, String>,
}

#[derive(Default)]
pub struct MetadataCache {
    view: RwLock<ClusterView>,
    /// Woken at every [`MetadataCache::replace`].
    replaced: tokio::sync::Notify,
}

impl MetadataCache {
    pub fn new() -> Self {
        Self {
            view: RwLock::new(ClusterView {
                controller_id: -1,
                ..Default::default()
            }),
            replaced: tokio::sync::Notify::new(),
        }
    }

    pub fn snapshot(&self) -> ClusterView {
        self.view.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Replace the view with the controller's announcement (UpdateMetadata
    /// carries the full state in this broker's controller).
    pub fn replace(&self, view: ClusterView) {
        *self.view.write().unwrap_or_else(|p| p.into_inner()) = view;
        self.replaced.notify_waiters();
    }

    /// `topic`'s id, if the view holds one.
    pub fn topic_id(&self, topic: &str) -> Option<String> {
        let view = self.view.read().unwrap_or_else(|p| p.into_inner());
        view.topic_ids.get(topic).cloned()
    }

    /// The topic whose id is `id`, if the view holds it.
    pub fn topic_named(&self, id: &str) -> Option<String> {
        let view = self.view.read().unwrap_or_else(|p| p.into_inner());
        view.topic_ids
            .iter()
            .find(|(_, held)| held.as_str() == id)
            .map(|(topic, _)| topic.clone())
    }

    /// Whether the view holds `topic`.
    pub fn holds(&self, topic: &str) -> bool {
        let view = self.view.read().unwrap_or_else(|p| p.into_inner());
        view.topics.contains_key(topic)
    }

    /// Waits until `done` holds of this cache (checked now and after every
    /// [`MetadataCache::replace`]) or `deadline` passes; whether it held.
    pub async fn wait_until(
        &self,
        deadline: tokio::time::Instant,
        done: impl Fn(&MetadataCache) -> bool,
    ) -> bool {
        loop {
            // Made before the check, so a replace in between still wakes it.
            let replaced = self.replaced.notified();
            if done(self) {
                return true;
            }
            if tokio::time::timeout_at(deadline, replaced).await.is_err() {
                return done(self);
            }
        }
    }

    /// How many of `topic`'s partitions have a leader (0 for an unknown topic).
    pub fn partitions_led(&self, topic: &str) -> i32 {
        let view = self.view.read().unwrap_or_else(|p| p.into_inner());
        view.topics
            .get(topic)
            .map_or(0, |ps| ps.values().filter(|p| p.leader >= 0).count() as i32)
    }
}
