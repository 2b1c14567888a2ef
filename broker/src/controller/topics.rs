//! The controller's handling of topics' own keys: a topic's assignment
//! (new topics, added partitions), its configs (the per-topic unclean
//! election), and its deletion.
//!
//! Topic deletion follows ZooKeeper-era Kafka's
//! `TopicDeletionManager` does it: DeleteTopics marks the topic in etcd
//! (`/admin/delete_topics/<t>`); the controller stops announcing its
//! partitions and sends every replica StopReplica with delete; once each
//! replica has answered that its log is gone, the topic's keys are removed
//! in one transaction and the topic is deleted. A replica on a broker that
//! is down keeps the deletion waiting (Kafka marks it ineligible) and is told
//! again when the broker registers, so no broker keeps a deleted topic's log
//! for a later topic of the same name to find. A new controller finds the
//! marks in etcd and carries the deletions on.

use std::collections::BTreeSet;

use kafka_protocol::messages::stop_replica_request::{
    StopReplicaPartitionState, StopReplicaTopicState,
};
use kafka_protocol::messages::{BrokerId, StopReplicaRequest, StopReplicaResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::channel::ControlRequest;
use super::context::Deletion;
use super::controller::{Controller, Resignation};
use super::metadata_store::{TopicAssignment, TopicConfigRecord};

/// The leader epoch StopReplica names for a partition being deleted
/// (Kafka's `LeaderAndIsr.EpochDuringDelete`).
const EPOCH_DURING_DELETE: i32 = -2;

impl Controller {
    /// A topic's assignment was written: a new topic, or partitions added
    /// (CreatePartitions); the new partitions get leaders and their replicas
    /// are told.
    pub(super) async fn on_topic(
        &mut self,
        key: &str,
        topic: &str,
        value: &[u8],
    ) -> Result<(), Resignation> {
        let assignment: TopicAssignment = match serde_json::from_slice(value) {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(%key, %e, "ignoring malformed topic assignment");
                return Ok(());
            }
        };
        // A known topic changes only by partitions added (CreatePartitions).
        let held = self.ctx.topics.get(topic).map_or(0, |a| a.partitions.len());
        if assignment.partitions.len() <= held {
            return Ok(());
        }
        tracing::info!(%topic, partitions = assignment.partitions.len(), held, "new partitions");
        self.ctx.topics.insert(topic.to_owned(), assignment);
        let changed = self.elect_missing(topic).await?;
        let targets: BTreeSet<i32> = changed
            .iter()
            .flat_map(|p| self.ctx.replicas(topic, *p).to_vec())
            .filter(|b| self.ctx.brokers.contains_key(b))
            .collect();
        for b in targets {
            self.send_leader_and_isr(b, |(t, _)| t == topic, true);
        }
        self.broadcast_metadata();
        Ok(())
    }

    /// A topic's configs were written (or removed, `None`).
    pub(super) async fn on_topic_configs(
        &mut self,
        key: &str,
        topic: &str,
        value: Option<&[u8]>,
    ) -> Result<(), Resignation> {
        let configs = match value.map(serde_json::from_slice::<TopicConfigRecord>) {
            None => None,
            Some(Ok(r)) => Some(r.config),
            Some(Err(e)) => {
                tracing::warn!(%key, %e, "ignoring malformed topic configs");
                return Ok(());
            }
        };
        let was = self
            .ctx
            .unclean(topic, self.settings.unclean_leader_election);
        match configs {
            Some(c) => self.ctx.topic_configs.insert(topic.to_owned(), c),
            None => self.ctx.topic_configs.remove(topic),
        };
        // Unclean election just allowed: an offline partition of the
        // topic may take a live replica now, as Kafka's controller
        // elects at once when the topic's config turns it on.
        if !was
            && self
                .ctx
                .unclean(topic, self.settings.unclean_leader_election)
        {
            let changed = self.reelect_where(|(t, _)| t == topic).await?;
            if !changed.is_empty() {
                self.send_changed(&changed, None);
                self.broadcast_metadata();
            }
        }
        Ok(())
    }

    /// `topic` was marked for deletion: its partitions leave what brokers are
    /// told, and each replica is told to delete its log.
    pub(super) async fn begin_deletion(&mut self, topic: &str) -> Result<(), Resignation> {
        if let Some(assignment) = self.ctx.topics.remove(topic) {
            let replicas: BTreeSet<i32> =
                assignment.partitions.values().flatten().copied().collect();
            tracing::info!(%topic, ?replicas, "deleting topic");
            self.ctx.states.retain(|(t, _), _| t != topic);
            self.ctx.topic_configs.remove(topic);
            self.ctx.deletions.insert(
                topic.to_owned(),
                Deletion {
                    partitions: assignment.partitions.keys().copied().collect(),
                    waiting: replicas,
                },
            );
            self.broadcast_metadata();
        }
        let live: Vec<i32> = self.ctx.brokers.keys().copied().collect();
        for broker in live {
            self.send_deletions(broker);
        }
        self.finish_deletions().await
    }

    /// Sends `broker` StopReplica for every deletion still waiting on it.
    pub(super) fn send_deletions(&self, broker: i32) {
        let topic_states: Vec<StopReplicaTopicState> = self
            .ctx
            .deletions
            .iter()
            .filter(|(_, d)| d.waiting.contains(&broker))
            .map(|(topic, d)| {
                StopReplicaTopicState::default()
                    .with_topic_name(TopicName(StrBytes::from_string(topic.clone())))
                    .with_partition_states(
                        d.partitions
                            .iter()
                            .map(|p| {
                                StopReplicaPartitionState::default()
                                    .with_partition_index(*p)
                                    .with_leader_epoch(EPOCH_DURING_DELETE)
                                    .with_delete_partition(true)
                            })
                            .collect(),
                    )
            })
            .collect();
        if topic_states.is_empty() {
            return;
        }
        let request = StopReplicaRequest::default()
            .with_controller_id(BrokerId(self.settings.node_id))
            .with_controller_epoch(self.epoch)
            .with_broker_epoch(self.ctx.broker_epoch(broker))
            .with_topic_states(topic_states);
        self.channel
            .send(broker, ControlRequest::StopReplica(request));
    }

    /// A replica's answer: each topic all of whose partitions it deleted no
    /// longer waits on it. A request refused whole (a stale epoch) is sent
    /// again when the broker registers anew.
    pub(super) fn on_stop_replica(&mut self, broker: i32, response: &StopReplicaResponse) {
        if crate::failpoints::hit_or_return(
            crate::failpoints::Failpoint::ControllerDropsStopReplicaAnswer,
        ) {
            return;
        }
        if response.error_code != 0 {
            tracing::warn!(
                broker,
                error_code = response.error_code,
                "StopReplica refused"
            );
            return;
        }
        let failed: BTreeSet<&str> = response
            .partition_errors
            .iter()
            .filter(|e| e.error_code != 0)
            .map(|e| e.topic_name.as_str())
            .collect();
        let answered: BTreeSet<&str> = response
            .partition_errors
            .iter()
            .map(|e| e.topic_name.as_str())
            .collect();
        for topic in answered.difference(&failed) {
            if let Some(d) = self.ctx.deletions.get_mut(*topic) {
                d.waiting.remove(&broker);
            }
        }
        if !failed.is_empty() {
            tracing::warn!(
                broker,
                ?failed,
                "a replica could not delete its log; asking again"
            );
            self.send_deletions(broker);
        }
    }

    /// Removes from etcd every topic no replica still holds.
    pub(super) async fn finish_deletions(&mut self) -> Result<(), Resignation> {
        let done: Vec<String> = self
            .ctx
            .deletions
            .iter()
            .filter(|(_, d)| d.waiting.is_empty())
            .map(|(t, _)| t.clone())
            .collect();
        for topic in done {
            self.store
                .finish_deletion(&topic, self.create_revision)
                .await?;
            self.ctx.deletions.remove(&topic);
            tracing::info!(%topic, "topic deleted");
        }
        Ok(())
    }
}
