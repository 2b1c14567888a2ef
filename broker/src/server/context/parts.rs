//! The parts of [`Broker`] a handler that needs several of them is given,
//! each borrowed out of the broker here and nowhere else: a handler's
//! signature names what it may touch, and none is handed the whole broker.
//! A handler that needs one part is given it by dispatch.rs directly
//! (`&broker.replicas`, `&broker.store`); the transaction coordinator's
//! handlers are given the broker as a [`crate::transactions::TxnHost`],
//! which exposes only the coordinator's parts. The fields read only here
//! (the control lock, the state-change log, the advertised address) are
//! private to context.rs and this file, its child.

use super::Broker;
use crate::server::handlers::create_topics::{Defaults, TopicCreation};
use crate::server::handlers::fencing::Control;
use crate::server::handlers::find_coordinator::CoordinatorLookup;
use crate::server::handlers::leader_and_isr::Coordinators;
use crate::server::handlers::metadata::Advertised;
use crate::server::handlers::offset_commit::GroupWrites;

impl Broker {
    /// For LeaderAndIsr, StopReplica and UpdateMetadata.
    pub(in crate::server) fn control(&self) -> Control<'_> {
        Control {
            config: &self.config,
            replicas: &self.replicas,
            fetchers: &self.fetchers,
            state_changes: &self.state_changes,
            control_lock: &self.control,
        }
    }

    /// For LeaderAndIsr, which elects and resigns them.
    pub(in crate::server) fn coordinators(&self) -> Coordinators<'_> {
        Coordinators {
            offsets: &self.offsets,
            groups: &self.groups,
            transactions: &self.transactions,
        }
    }

    /// For OffsetCommit, TxnOffsetCommit, DeleteGroups and OffsetDelete.
    pub(in crate::server) fn group_writes(&self) -> GroupWrites<'_> {
        GroupWrites {
            offsets: &self.offsets,
            groups: &self.groups,
            replicas: &self.replicas,
            metadata: &self.metadata,
            commit_acks: self.config.offsets_commit_acks.acks(),
        }
    }

    /// For CreateTopics.
    pub(in crate::server) fn topic_creation(&self) -> TopicCreation<'_> {
        TopicCreation {
            store: &self.store,
            metadata: &self.metadata,
            defaults: Defaults::of(&self.config),
            topic_configs: self.replicas.topic_configs(),
        }
    }

    /// For Metadata: topic creation when the broker auto-creates topics
    /// (`auto_create_topics_enable`), else none.
    pub(in crate::server) fn auto_topic_creation(&self) -> Option<TopicCreation<'_>> {
        self.config
            .auto_create_topics_enable
            .then(|| self.topic_creation())
    }

    /// For FindCoordinator.
    pub(in crate::server) fn coordinator_lookup(&self) -> CoordinatorLookup<'_> {
        CoordinatorLookup {
            metadata: &self.metadata,
            store: &self.store,
            config: &self.config,
            offsets_partitions: self.offsets.partitions(),
            txn_partitions: self.transactions.partitions(),
        }
    }

    /// For Metadata and DescribeCluster.
    pub(in crate::server) fn advertised(&self) -> Advertised<'_> {
        Advertised {
            node_id: self.config.node_id,
            host: &self.advertised_host,
            port: self.advertised_port,
            cluster_id: &self.cluster_id,
        }
    }
}
