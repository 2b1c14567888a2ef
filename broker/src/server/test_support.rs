//! A broker for handler unit tests, built as `crate::broker::run` builds one
//! but with no listener, no background tasks and an etcd client that is never
//! dialled: node 1 on a fresh data directory, the only replica (and so the
//! leader, ISR {1}) of the partitions a test names, with the cluster view
//! the controller would have announced for them. A group's offsets
//! partition or a transactional id's state partition can be made this
//! broker's, loaded, so the coordinators answer.

use std::sync::Arc;

use clap::Parser;

use super::context::Broker;
use super::metadata_cache::{ClusterView, PartitionMetadata};
use crate::config::{ConfigArgs, OffsetsLoad};
use crate::controller::metadata_store::MetadataStore;
use crate::replica::manager::ReplicaManager;
use crate::replica::partition::LeaderAndIsrState;
use crate::state_change_log::StateChangeLog;
use crate::storage::{LogConfig, LogManager, TopicPartition};
use crate::transactions::state::TxnMetadata;

pub struct TestBroker {
    pub broker: Broker,
    /// Holds the data directory for the broker's lifetime.
    _dir: tempfile::TempDir,
}

fn led(leader_epoch: i32) -> LeaderAndIsrState {
    LeaderAndIsrState {
        controller_epoch: 1,
        leader: 1,
        leader_epoch,
        isr: vec![1],
        partition_epoch: 0,
        replicas: vec![1],
    }
}

impl TestBroker {
    /// Broker 1, leader of every partition of `topics` (name, partition
    /// count), which the cluster view holds too. Must run inside a tokio
    /// runtime (the etcd client is made there, never used).
    pub async fn leading(topics: &[(&str, i32)]) -> TestBroker {
        let dir = tempfile::tempdir().expect("a data directory");
        let config = ConfigArgs::parse_from([
            "epochal-broker",
            "--node-id",
            "1",
            "--data-dir",
            dir.path().to_str().expect("a UTF-8 path"),
            "--etcd",
            "http://127.0.0.1:9",
        ])
        .resolve()
        .expect("the test broker's settings");
        let logs = LogManager::open(dir.path(), LogConfig::default()).expect("the logs");
        let replicas = Arc::new(ReplicaManager::new(1, 1, config.truncation, logs, None));
        let store = MetadataStore::connect(&config.etcd)
            .await
            .expect("a lazy etcd client");
        let state_changes = StateChangeLog::open(dir.path()).expect("the state-change log");
        let broker = Broker::new(
            config,
            replicas,
            store,
            state_changes,
            ("127.0.0.1".into(), 9092),
        );
        let test = TestBroker { broker, _dir: dir };
        for (topic, partitions) in topics {
            for p in 0..*partitions {
                test.lead(TopicPartition::new(*topic, p));
            }
        }
        test
    }

    /// Makes this broker the leader of `tp` (epoch 0) and adds it to the
    /// cluster view.
    pub fn lead(&self, tp: TopicPartition) {
        let decisions = self
            .broker
            .replicas
            .apply_leader_and_isr(vec![(tp.clone(), led(0))]);
        assert!(decisions[0].result.is_ok(), "{:?}", decisions[0]);
        let mut view: ClusterView = self.broker.metadata.snapshot();
        view.topics.entry(tp.topic).or_default().insert(
            tp.partition,
            PartitionMetadata {
                leader: 1,
                leader_epoch: 0,
                replicas: vec![1],
                isr: vec![1],
                offline_replicas: Vec::new(),
            },
        );
        self.broker.metadata.replace(view);
    }

    /// Sets `topic`'s config overrides, as the config watch would.
    pub fn configure(&self, topic: &str, overrides: &[(&str, &str)]) {
        let overrides = overrides
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        self.broker
            .replicas
            .topic_configs()
            .set_at(topic, 1, Some(overrides));
    }

    /// Makes this broker the transaction coordinator of `transactional_id`,
    /// whose state is `current`, as if read from its partition.
    pub fn coordinate_txn(&self, transactional_id: &str, current: TxnMetadata) {
        let tp = self.broker.transactions.partition_of(transactional_id);
        let partition = tp.partition;
        self.lead(tp);
        self.broker.transactions.elected(partition, 0);
        let ids = [(transactional_id.to_owned(), current)].into();
        assert!(self.broker.transactions.finish(partition, 0, ids));
    }

    /// Makes this broker `group`'s coordinator, its offsets partition read.
    pub fn coordinate(&self, group: &str) {
        let tp = self.broker.offsets.partition_of(group);
        let partition = tp.partition;
        self.lead(tp);
        self.broker.offsets.elected(partition, 0);
        crate::offsets::load(
            &self.broker.offsets,
            &self.broker.replicas,
            partition,
            0,
            OffsetsLoad::Current,
        );
    }
}
