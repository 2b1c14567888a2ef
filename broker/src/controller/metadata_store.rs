//! etcd in ZooKeeper's role: the key layout (documented in `broker/README.md`)
//! and every read and conditional write the brokers and the controller make.
//!
//! The rules this file enforces are the ones classic Kafka relied on ZooKeeper
//! for: registration keys live under the broker's lease (ephemeral znodes) and
//! the revision of each run's put is the broker epoch (as the CZXID of the znode
//! each run created was); the controller key is
//! won by create-if-absent under the winner's lease; the controller epoch is
//! bumped by a transaction that also checks the winner still holds the controller
//! key; partition state changes only by compare-and-swap on the key's revision
//! (the zkVersion check), optionally also refusing to replace a state whose
//! stored controller epoch exceeds the writer's (Jun Rao's rule in KAFKA-532). Nothing here decides anything; callers do.

use std::collections::BTreeMap;

use etcd_client::{Client, Compare, CompareOp, GetOptions, PutOptions, Txn, TxnOp, TxnOpResponse};
use serde::{Deserialize, Serialize};

pub mod acls;
pub mod broker_configs;
mod topics;
pub use topics::{StoredTopic, new_topic_id};

/// Every key lives under this root.
pub const ROOT: &str = "/epochal";
/// Kafka's InitialControllerEpoch (KAFKA-532): the first controller gets epoch 1.
pub const INITIAL_CONTROLLER_EPOCH: i32 = 1;

pub fn broker_key(id: i32) -> String {
    format!("{ROOT}/brokers/ids/{id}")
}
pub fn brokers_prefix() -> String {
    format!("{ROOT}/brokers/ids/")
}
pub fn controller_key() -> String {
    format!("{ROOT}/controller")
}
pub fn controller_epoch_key() -> String {
    format!("{ROOT}/controller_epoch")
}
pub fn topic_key(topic: &str) -> String {
    format!("{ROOT}/brokers/topics/{topic}")
}
pub fn partition_state_key(topic: &str, partition: i32) -> String {
    format!("{ROOT}/brokers/topics/{topic}/partitions/{partition}/state")
}
/// A topic marked for deletion (ZooKeeper's `/admin/delete_topics/<t>`).
pub fn topic_deletion_key(topic: &str) -> String {
    format!("{ROOT}/admin/delete_topics/{topic}")
}
/// A topic's config overrides (ZooKeeper's `/config/topics/<t>`).
pub fn topic_config_key(topic: &str) -> String {
    format!("{ROOT}/config/topics/{topic}")
}
pub fn topic_configs_prefix() -> String {
    format!("{ROOT}/config/topics/")
}
/// ZooKeeper's `/latest_producer_id_block` (KIP-98): the last block of producer
/// ids handed to a broker.
pub fn producer_id_block_key() -> String {
    format!("{ROOT}/latest_producer_id_block")
}

/// What a key under the root is, parsed from its path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyKind {
    Broker(i32),
    Controller,
    ControllerEpoch,
    Topic(String),
    PartitionState(String, i32),
    TopicConfig(String),
    TopicDeletion(String),
    ProducerIdBlock,
    Other,
}

pub fn classify(key: &str) -> KeyKind {
    let Some(rest) = key.strip_prefix(ROOT) else {
        return KeyKind::Other;
    };
    let parts: Vec<&str> = rest.trim_start_matches('/').split('/').collect();
    match parts.as_slice() {
        ["controller"] => KeyKind::Controller,
        ["controller_epoch"] => KeyKind::ControllerEpoch,
        ["latest_producer_id_block"] => KeyKind::ProducerIdBlock,
        ["brokers", "ids", id] => id.parse().map(KeyKind::Broker).unwrap_or(KeyKind::Other),
        ["brokers", "topics", topic] => KeyKind::Topic(topic.to_string()),
        ["config", "topics", topic] => KeyKind::TopicConfig(topic.to_string()),
        ["admin", "delete_topics", topic] => KeyKind::TopicDeletion(topic.to_string()),
        ["brokers", "topics", topic, "partitions", p, "state"] => p
            .parse()
            .map(|p| KeyKind::PartitionState(topic.to_string(), p))
            .unwrap_or(KeyKind::Other),
        _ => KeyKind::Other,
    }
}

/// A broker's registration value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerRegistration {
    pub id: i32,
    pub host: String,
    pub port: i32,
    /// Distinguishes two runs of the same broker id: a broker that restarts
    /// before its old lease expired takes its key over with a new incarnation.
    pub incarnation: u64,
}

/// The controller key's value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControllerRecord {
    pub broker_id: i32,
}

/// A topic's replica assignment (ZooKeeper's `/brokers/topics/<t>`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicAssignment {
    /// Partition → replicas, preferred leader first.
    pub partitions: BTreeMap<i32, Vec<i32>>,
    /// The topic's id (KIP-516), a random UUID given at creation
    /// ([`MetadataStore::create_topic`]) and kept with the assignment, as
    /// Kafka keeps `topic_id` in the znode; in its hyphenated form. A topic
    /// stored without one is announced with the zero UUID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic_id: Option<String>,
}

/// A topic id as the wire carries it: kafka-protocol's `Uuid` (`T` at every
/// caller, left generic so this crate needs no `uuid` dependency of its
/// own), parsed from its stored form; the zero UUID when there is none.
pub fn wire_topic_id<T: std::str::FromStr + Default>(id: Option<&str>) -> T {
    id.and_then(|id| id.parse().ok()).unwrap_or_default()
}

/// `{leader, leader_epoch, isr, controller_epoch}`, ZooKeeper's LeaderAndIsr znode.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionStateRecord {
    pub leader: i32,
    pub leader_epoch: i32,
    pub isr: Vec<i32>,
    pub controller_epoch: i32,
}

/// A topic's overrides: config name → value, as stored.
pub type Overrides = BTreeMap<String, String>;

/// The etcd value of a topic's configs, ZooKeeper's `/config/topics/<t>`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicConfigRecord {
    pub version: i32,
    pub config: Overrides,
}

impl TopicConfigRecord {
    pub fn new(config: Overrides) -> Self {
        TopicConfigRecord { version: 1, config }
    }
}

/// The producer-id block key's value, as Kafka's `ProducerIdBlockZNode` writes
/// it: `{"version":1,"broker":<id>,"block_start":"<first>","block_end":"<last>"}`
/// (the bounds are strings there too).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerIdBlockRecord {
    pub version: i32,
    pub broker: i32,
    pub block_start: String,
    pub block_end: String,
}

/// Producer ids `first..=last`, handed to broker `broker` alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProducerIdBlock {
    pub broker: i32,
    pub first: i64,
    pub last: i64,
}

/// Compare-and-swap attempts at the producer-id block before giving up: each
/// lost compare means another broker got a block meanwhile, so a broker
/// losing this many in a row is starved, not unlucky.
const PRODUCER_ID_BLOCK_ATTEMPTS: u32 = 16;

/// A value with the revisions a later compare-and-swap needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Versioned<T> {
    pub value: T,
    pub create_revision: i64,
    pub mod_revision: i64,
    /// Modifications since creation, starting at 1 (Kafka's zkVersion + 1).
    pub version: i64,
}

/// Everything under the root, read at one revision.
#[derive(Clone, Debug, Default)]
pub struct ClusterSnapshot {
    pub revision: i64,
    pub brokers: BTreeMap<i32, Versioned<BrokerRegistration>>,
    pub controller: Option<Versioned<ControllerRecord>>,
    pub controller_epoch: Option<Versioned<i32>>,
    pub topics: BTreeMap<String, Versioned<TopicAssignment>>,
    pub partition_states: BTreeMap<(String, i32), Versioned<PartitionStateRecord>>,
    /// Each topic's config overrides, where it has any.
    pub topic_configs: BTreeMap<String, TopicConfigRecord>,
    /// Topics marked for deletion.
    pub deletions: std::collections::BTreeSet<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("etcd: {0}")]
    Etcd(#[from] etcd_client::Error),
    #[error("malformed value at {key}: {reason}")]
    Malformed { key: String, reason: String },
    /// A value that is not the JSON record its key holds.
    #[error("malformed value at {key}: {source}")]
    Undecodable {
        key: String,
        #[source]
        source: serde_json::Error,
    },
    /// The producer-id block record's `block_end`, kept as a decimal string,
    /// does not parse.
    #[error("malformed value at {key}: block_end {text:?}: {source}")]
    BlockEnd {
        key: String,
        text: String,
        #[source]
        source: std::num::ParseIntError,
    },
    /// The compare of a conditional write failed: someone else changed the key.
    #[error("conditional write to {key} lost: the key changed since revision {expected_revision}")]
    VersionMismatch { key: String, expected_revision: i64 },
    /// A leader's ISR write found another version than the zkVersion it was
    /// told: someone (the controller) wrote the partition state since.
    #[error("conditional write to {key} lost: its version is no longer {expected_version}")]
    StaleVersion { key: String, expected_version: i64 },
    /// The writer no longer holds the controller key, or a newer controller epoch
    /// is stored (in the epoch key, or in the partition state it would replace).
    #[error("controller moved: {0}")]
    ControllerMoved(String),
    /// A call that did not answer within the time it was given.
    #[error("no answer within {} ms", .0.as_millis())]
    Timeout(std::time::Duration),
    /// The next producer-id block would pass `i64::MAX` (Kafka: "Exhausted all
    /// producerIds").
    #[error("producer ids exhausted: the last block ended at {last_block_end}")]
    ProducerIdsExhausted { last_block_end: i64 },
    /// The kernel's random source could not be read (a new topic id).
    #[error("reading /dev/urandom: {0}")]
    Random(String),
}

/// What a controller's write is fenced by, when fencing is on.
#[derive(Clone, Debug)]
pub struct ControllerFence {
    pub controller_epoch: i32,
}

#[derive(Clone)]
pub struct MetadataStore {
    client: Client,
}

fn decode<T: for<'de> Deserialize<'de>>(key: &str, value: &[u8]) -> Result<T, StoreError> {
    serde_json::from_slice(value).map_err(|source| StoreError::Undecodable {
        key: key.to_string(),
        source,
    })
}

fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).expect("metadata records always serialize")
}

fn versioned<T>(value: T, kv: &etcd_client::KeyValue) -> Versioned<T> {
    Versioned {
        value,
        create_revision: kv.create_revision(),
        mod_revision: kv.mod_revision(),
        version: kv.version(),
    }
}

impl MetadataStore {
    pub async fn connect(endpoints: &[String]) -> Result<Self, StoreError> {
        let options = etcd_client::ConnectOptions::new()
            .with_connect_timeout(std::time::Duration::from_secs(3))
            .with_timeout(std::time::Duration::from_secs(5));
        let client = Client::connect(endpoints, Some(options)).await?;
        Ok(Self { client })
    }

    pub fn client(&self) -> Client {
        self.client.clone()
    }

    pub async fn grant_lease(&self, ttl_s: u64) -> Result<i64, StoreError> {
        Ok(self
            .client
            .clone()
            .lease_grant(ttl_s as i64, None)
            .await?
            .id())
    }

    pub async fn revoke_lease(&self, lease: i64) -> Result<(), StoreError> {
        self.client.clone().lease_revoke(lease).await?;
        Ok(())
    }

    /// Broker `id`'s registration as etcd holds it now, with its key's mod
    /// revision (which every registration, a restart's included, moves);
    /// `None` when it is not registered.
    pub async fn broker_registration(
        &self,
        id: i32,
    ) -> Result<Option<(BrokerRegistration, i64)>, StoreError> {
        let key = broker_key(id);
        let resp = self.client.clone().get(key.clone(), None).await?;
        match resp.kvs().first() {
            Some(kv) => Ok(Some((decode(&key, kv.value())?, kv.mod_revision()))),
            None => Ok(None),
        }
    }

    /// Broker `id`'s epoch as etcd holds it now (the revision of its
    /// registration's latest put, see `register_broker`), `None` when it is
    /// not registered.
    pub async fn broker_epoch(&self, id: i32) -> Result<Option<i64>, StoreError> {
        let resp = self.client.clone().get(broker_key(id), None).await?;
        Ok(resp.kvs().first().map(|kv| kv.mod_revision()))
    }

    /// Register (or take over) this broker's key under `lease`; returns the broker
    /// epoch, the revision of this put. A put on an existing key keeps its create
    /// revision, which is how a broker restarted within its old lease keeps its
    /// session in the eyes of a controller that compares create revisions
    /// (KAFKA-1120); the broker epoch still changes with every run, as Kafka's
    /// (KIP-380: the czxid of the znode each run creates), so a control request
    /// queued for the earlier run names an epoch the new run refuses.
    pub async fn register_broker(
        &self,
        reg: &BrokerRegistration,
        lease: i64,
    ) -> Result<i64, StoreError> {
        let key = broker_key(reg.id);
        let txn = Txn::new().and_then(vec![
            TxnOp::put(
                key.clone(),
                encode(reg),
                Some(PutOptions::new().with_lease(lease)),
            ),
            TxnOp::get(key.clone(), None),
        ]);
        let resp = self.client.clone().txn(txn).await?;
        for op in resp.op_responses() {
            if let TxnOpResponse::Get(get) = op
                && let Some(kv) = get.kvs().first()
            {
                return Ok(kv.mod_revision());
            }
        }
        Err(StoreError::Malformed {
            key,
            reason: "registration vanished right after it was written".into(),
        })
    }

    /// Create-if-absent of the controller key under `lease`. Some(create revision) if won.
    pub async fn try_claim_controller(
        &self,
        broker_id: i32,
        lease: i64,
    ) -> Result<Option<i64>, StoreError> {
        let key = controller_key();
        let txn = Txn::new()
            .when(vec![Compare::create_revision(
                key.clone(),
                CompareOp::Equal,
                0,
            )])
            .and_then(vec![
                TxnOp::put(
                    key.clone(),
                    encode(&ControllerRecord { broker_id }),
                    Some(PutOptions::new().with_lease(lease)),
                ),
                TxnOp::get(key.clone(), None),
            ]);
        let resp = self.client.clone().txn(txn).await?;
        if !resp.succeeded() {
            return Ok(None);
        }
        for op in resp.op_responses() {
            if let TxnOpResponse::Get(get) = op
                && let Some(kv) = get.kvs().first()
            {
                return Ok(Some(kv.create_revision()));
            }
        }
        Ok(None)
    }

    /// Bump the controller epoch by one, in a transaction that also requires the
    /// caller to still hold the controller key (its create revision unchanged) and
    /// the epoch key to be unchanged since it was read — KAFKA-532's conditional
    /// increment. Returns the new epoch.
    pub async fn bump_controller_epoch(
        &self,
        controller_create_revision: i64,
    ) -> Result<i32, StoreError> {
        let epoch_key = controller_epoch_key();
        let mut client = self.client.clone();
        let current = client.get(epoch_key.clone(), None).await?;
        let (current_epoch, epoch_compare) = match current.kvs().first() {
            Some(kv) => {
                let epoch: i32 = decode(&epoch_key, kv.value())?;
                (
                    Some(epoch),
                    Compare::mod_revision(epoch_key.clone(), CompareOp::Equal, kv.mod_revision()),
                )
            }
            None => (
                None,
                Compare::create_revision(epoch_key.clone(), CompareOp::Equal, 0),
            ),
        };
        let next = current_epoch.map_or(INITIAL_CONTROLLER_EPOCH, |e| e + 1);
        let txn = Txn::new()
            .when(vec![
                Compare::create_revision(
                    controller_key(),
                    CompareOp::Equal,
                    controller_create_revision,
                ),
                epoch_compare,
            ])
            .and_then(vec![TxnOp::put(epoch_key, encode(&next), None)]);
        let resp = client.txn(txn).await?;
        if resp.succeeded() {
            Ok(next)
        } else {
            Err(StoreError::ControllerMoved(
                "controller key or epoch changed while bumping the epoch".into(),
            ))
        }
    }

    /// Read everything under the root at one revision.
    pub async fn snapshot(&self) -> Result<ClusterSnapshot, StoreError> {
        let resp = self
            .client
            .clone()
            .get(format!("{ROOT}/"), Some(GetOptions::new().with_prefix()))
            .await?;
        let mut snap = ClusterSnapshot {
            revision: resp.header().map_or(0, |h| h.revision()),
            ..Default::default()
        };
        for kv in resp.kvs() {
            let key = kv.key_str().unwrap_or_default().to_string();
            match classify(&key) {
                KeyKind::Broker(id) => {
                    snap.brokers
                        .insert(id, versioned(decode(&key, kv.value())?, kv));
                }
                KeyKind::Controller => {
                    snap.controller = Some(versioned(decode(&key, kv.value())?, kv))
                }
                KeyKind::ControllerEpoch => {
                    snap.controller_epoch = Some(versioned(decode(&key, kv.value())?, kv))
                }
                KeyKind::Topic(t) => {
                    snap.topics
                        .insert(t, versioned(decode(&key, kv.value())?, kv));
                }
                KeyKind::PartitionState(t, p) => {
                    snap.partition_states
                        .insert((t, p), versioned(decode(&key, kv.value())?, kv));
                }
                // Producer ids are no part of the controller's view.
                KeyKind::TopicConfig(t) => {
                    snap.topic_configs.insert(t, decode(&key, kv.value())?);
                }
                KeyKind::TopicDeletion(t) => {
                    snap.deletions.insert(t);
                }
                KeyKind::ProducerIdBlock | KeyKind::Other => {}
            }
        }
        Ok(snap)
    }

    pub async fn live_brokers(
        &self,
    ) -> Result<BTreeMap<i32, Versioned<BrokerRegistration>>, StoreError> {
        let resp = self
            .client
            .clone()
            .get(brokers_prefix(), Some(GetOptions::new().with_prefix()))
            .await?;
        let mut out = BTreeMap::new();
        for kv in resp.kvs() {
            let key = kv.key_str().unwrap_or_default().to_string();
            if let KeyKind::Broker(id) = classify(&key) {
                out.insert(id, versioned(decode(&key, kv.value())?, kv));
            }
        }
        Ok(out)
    }

    pub async fn controller_epoch(&self) -> Result<Option<i32>, StoreError> {
        let key = controller_epoch_key();
        let resp = self.client.clone().get(key.clone(), None).await?;
        resp.kvs()
            .first()
            .map(|kv| decode(&key, kv.value()))
            .transpose()
    }

    /// Write a partition's state by compare-and-swap: `expected_mod_revision` 0
    /// means "must not exist yet". With a fence, Jun Rao's rule in KAFKA-532: the
    /// controller epoch stored *in this partition's state* must not exceed the
    /// writer's. The caller checks it on the state it read at
    /// `expected_mod_revision`, and the revision compare makes that check atomic
    /// with the write; when the compare is lost, the state now stored is read back
    /// in the same transaction and a higher controller epoch there is reported as
    /// `ControllerMoved`. The global `/epochal/controller_epoch` key is *not*
    /// compared (that is KAFKA-6082's later fence, not what KAFKA-532 shipped).
    /// Returns the new state's version and mod revision.
    pub async fn write_partition_state(
        &self,
        topic: &str,
        partition: i32,
        state: &PartitionStateRecord,
        expected_mod_revision: i64,
        fence: Option<&ControllerFence>,
    ) -> Result<Versioned<PartitionStateRecord>, StoreError> {
        let key = partition_state_key(topic, partition);
        let txn = Txn::new()
            .when(vec![Compare::mod_revision(
                key.clone(),
                CompareOp::Equal,
                expected_mod_revision,
            )])
            .and_then(vec![
                TxnOp::put(key.clone(), encode(state), None),
                TxnOp::get(key.clone(), None),
            ])
            .or_else(vec![TxnOp::get(key.clone(), None)]);
        let resp = self.client.clone().txn(txn).await?;
        let ops = resp.op_responses();
        if resp.succeeded() {
            for op in ops {
                if let TxnOpResponse::Get(get) = op
                    && let Some(kv) = get.kvs().first()
                {
                    return Ok(versioned(state.clone(), kv));
                }
            }
            return Err(StoreError::Malformed {
                key,
                reason: "state vanished right after it was written".into(),
            });
        }
        if let Some(f) = fence {
            for op in ops {
                if let TxnOpResponse::Get(get) = op
                    && let Some(kv) = get.kvs().first()
                {
                    let stored: PartitionStateRecord = decode(&key, kv.value())?;
                    if stored.controller_epoch > f.controller_epoch {
                        return Err(StoreError::ControllerMoved(format!(
                            "{key}: stored controller epoch {}, writer's {}",
                            stored.controller_epoch, f.controller_epoch
                        )));
                    }
                }
            }
        }
        Err(StoreError::VersionMismatch {
            key,
            expected_revision: expected_mod_revision,
        })
    }
}

impl MetadataStore {
    /// Claims the next block of `block_size` producer ids for `broker`: reads
    /// the block key, and writes the block after it (the first block starts at
    /// 0) by compare-and-swap on the key's mod revision (create revision 0 when
    /// absent), retrying a lost compare a bounded number of times — Kafka's
    /// `ZkProducerIdManager.getNewProducerIdBlock`, which did the same with the
    /// znode's version. No two brokers, and no broker before and after a
    /// restart, ever get overlapping blocks.
    pub async fn claim_producer_id_block(
        &self,
        broker: i32,
        block_size: i64,
    ) -> Result<ProducerIdBlock, StoreError> {
        let key = producer_id_block_key();
        let mut client = self.client.clone();
        for _ in 0..PRODUCER_ID_BLOCK_ATTEMPTS {
            let current = client.get(key.clone(), None).await?;
            let (first, compare) = match current.kvs().first() {
                Some(kv) => {
                    let stored: ProducerIdBlockRecord = decode(&key, kv.value())?;
                    let last_block_end: i64 =
                        stored
                            .block_end
                            .parse()
                            .map_err(|source| StoreError::BlockEnd {
                                key: key.clone(),
                                text: stored.block_end.clone(),
                                source,
                            })?;
                    if last_block_end < 0 {
                        return Err(StoreError::Malformed {
                            key: key.clone(),
                            reason: format!("block_end {last_block_end} is negative"),
                        });
                    }
                    if last_block_end > i64::MAX - block_size {
                        return Err(StoreError::ProducerIdsExhausted { last_block_end });
                    }
                    (
                        last_block_end + 1,
                        Compare::mod_revision(key.clone(), CompareOp::Equal, kv.mod_revision()),
                    )
                }
                None => (
                    0,
                    Compare::create_revision(key.clone(), CompareOp::Equal, 0),
                ),
            };
            let block = ProducerIdBlock {
                broker,
                first,
                last: first + block_size - 1,
            };
            let record = ProducerIdBlockRecord {
                version: 1,
                broker,
                block_start: block.first.to_string(),
                block_end: block.last.to_string(),
            };
            let txn = Txn::new().when(vec![compare]).and_then(vec![TxnOp::put(
                key.clone(),
                encode(&record),
                None,
            )]);
            if client.txn(txn).await?.succeeded() {
                return Ok(block);
            }
            tracing::debug!(broker, "lost the producer-id block compare; re-reading");
        }
        Err(StoreError::VersionMismatch {
            key,
            expected_revision: -1,
        })
    }

    /// A leader's ISR write: compare-and-swap on the key's *version* (the
    /// zkVersion the leader was told in LeaderAndIsr, plus one). Returns the new
    /// version. No controller-epoch compare: a leader is not a controller.
    pub async fn write_partition_state_at_version(
        &self,
        topic: &str,
        partition: i32,
        state: &PartitionStateRecord,
        expected_version: i64,
    ) -> Result<i64, StoreError> {
        self.write_partition_state_checked(topic, partition, state, expected_version, &[])
            .await
    }

    /// [`Self::write_partition_state_at_version`], also requiring each
    /// `(broker, revision)`'s registration key unchanged since `revision`
    /// (its mod revision): the brokers an ISR expansion takes in have not
    /// registered again (KIP-903).
    pub async fn write_partition_state_checked(
        &self,
        topic: &str,
        partition: i32,
        state: &PartitionStateRecord,
        expected_version: i64,
        registrations: &[(i32, i64)],
    ) -> Result<i64, StoreError> {
        let key = partition_state_key(topic, partition);
        let mut compares = vec![Compare::version(
            key.clone(),
            CompareOp::Equal,
            expected_version,
        )];
        compares.extend(registrations.iter().map(|&(id, revision)| {
            Compare::mod_revision(broker_key(id), CompareOp::Equal, revision)
        }));
        let txn = Txn::new().when(compares).and_then(vec![
            TxnOp::put(key.clone(), encode(state), None),
            TxnOp::get(key.clone(), None),
        ]);
        let resp = self.client.clone().txn(txn).await?;
        if !resp.succeeded() {
            return Err(StoreError::StaleVersion {
                key,
                expected_version,
            });
        }
        for op in resp.op_responses() {
            if let TxnOpResponse::Get(get) = op
                && let Some(kv) = get.kvs().first()
            {
                return Ok(kv.version());
            }
        }
        Err(StoreError::Malformed {
            key,
            reason: "state vanished right after it was written".into(),
        })
    }

    /// One partition's stored state, if any.
    pub async fn partition_state(
        &self,
        topic: &str,
        partition: i32,
    ) -> Result<Option<Versioned<PartitionStateRecord>>, StoreError> {
        let key = partition_state_key(topic, partition);
        let resp = self.client.clone().get(key.clone(), None).await?;
        match resp.kvs().first() {
            Some(kv) => Ok(Some(versioned(decode(&key, kv.value())?, kv))),
            None => Ok(None),
        }
    }

    /// Delete the controller key if it is still the one created at
    /// `create_revision` (a controller resigning while it still holds the key).
    pub async fn release_controller(&self, create_revision: i64) -> Result<(), StoreError> {
        let key = controller_key();
        let txn = Txn::new()
            .when(vec![Compare::create_revision(
                key.clone(),
                CompareOp::Equal,
                create_revision,
            )])
            .and_then(vec![TxnOp::delete(key, None)]);
        self.client.clone().txn(txn).await?;
        Ok(())
    }

    /// The controller key's current value and revisions, if any.
    pub async fn controller(
        &self,
    ) -> Result<(Option<Versioned<ControllerRecord>>, i64), StoreError> {
        let key = controller_key();
        let resp = self.client.clone().get(key.clone(), None).await?;
        let revision = resp.header().map_or(0, |h| h.revision());
        let current = match resp.kvs().first() {
            Some(kv) => Some(versioned(decode(&key, kv.value())?, kv)),
            None => None,
        };
        Ok((current, revision))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_classify_back_to_what_they_name() {
        assert_eq!(classify(&broker_key(3)), KeyKind::Broker(3));
        assert_eq!(classify(&controller_key()), KeyKind::Controller);
        assert_eq!(classify(&controller_epoch_key()), KeyKind::ControllerEpoch);
        assert_eq!(classify(&topic_key("t")), KeyKind::Topic("t".into()));
        assert_eq!(
            classify(&partition_state_key("t.x", 7)),
            KeyKind::PartitionState("t.x".into(), 7)
        );
        assert_eq!(classify(&producer_id_block_key()), KeyKind::ProducerIdBlock);
        assert_eq!(classify("/elsewhere/x"), KeyKind::Other);
        assert_eq!(
            classify(&format!("{ROOT}/brokers/ids/nope")),
            KeyKind::Other
        );
    }
}
