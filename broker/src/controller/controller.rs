//! The controller: the one broker that decides partition leadership. It loads
//! the cluster's state from etcd when it takes over, elects a leader for every
//! partition that has none or whose leader is gone, writes each decision by
//! compare-and-swap, and sends it to the replicas as LeaderAndIsr and to every
//! live broker as UpdateMetadata. It then follows etcd: a broker's registration
//! vanishing moves leadership off it and drops it from every ISR; a broker
//! registering gets its partitions' state (and may bring an offline partition
//! back); a broker that re-registered within its lease (KAFKA-1120) leaves
//! every ISR with broker-epoch fencing (KIP-380) or keeps its memberships
//! without, and if it led a partition, that partition gets a new epoch.
//! It resigns the moment its own session stops being live (or moves to a new
//! lease), without waiting for etcd to say so — checked between events, so an
//! event already taken off the queue is handled first, as a paused controller
//! of KAFKA-532 would. With controller-epoch fencing it also resigns when a
//! write is fenced or a broker answers STALE_CONTROLLER_EPOCH; without, it
//! writes whatever it decided.
//!
//! Events (etcd watch notifications, brokers' replies) are handled one at a time
//! on one task, as Kafka's controller event thread does, so a decision is never
//! made from a half-updated view. The controller never writes to a log; it only
//! tells brokers what to do.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use etcd_client::{EventType, WatchOptions};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::leader_and_isr_request::{
    LeaderAndIsrLiveLeader, LeaderAndIsrPartitionState, LeaderAndIsrTopicState,
};
use kafka_protocol::messages::update_metadata_request::{
    UpdateMetadataBroker, UpdateMetadataEndpoint, UpdateMetadataPartitionState,
    UpdateMetadataTopicState,
};
use kafka_protocol::messages::{BrokerId, LeaderAndIsrRequest, TopicName, UpdateMetadataRequest};
use kafka_protocol::protocol::StrBytes;
use tokio::sync::{mpsc, watch};

use super::channel::{ControlReply, ControlRequest, ControlResponse, ControllerChannel};
use super::metadata_store::{
    BrokerRegistration, ControllerFence, KeyKind, MetadataStore, PartitionStateRecord, ROOT,
    StoreError, Versioned, classify, wire_topic_id,
};
use super::partition_election;
use super::session::Session;
use crate::failpoints::{self, Failpoint};

/// How often the controller checks that its own session is still live.
const LIVENESS_CHECK: Duration = Duration::from_millis(50);
/// A partition write that keeps losing its compare-and-swap to leaders' ISR
/// writes is re-read and re-decided at most this many times.
const WRITE_ATTEMPTS_MAX: usize = 10;

use super::context::{ControllerContext, PartitionKey};

/// What the controller needs to know about the broker it runs in.
#[derive(Clone, Debug)]
pub struct ControllerSettings {
    pub node_id: i32,
    /// `--peer` overrides: broker id → address to reach it by.
    pub peers: BTreeMap<i32, String>,
    pub controller_epoch_fencing: bool,
    /// KIP-380: a bounced broker leaves every ISR (partition_election::restarted).
    pub broker_epoch_fencing: bool,
    pub unclean_leader_election: bool,
}

/// Why a controller stopped.
#[derive(Debug)]
pub enum Resignation {
    Shutdown,
    /// Another controller holds the key or a newer epoch is stored.
    Moved(String),
    Store(StoreError),
}

impl fmt::Display for Resignation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Resignation::Shutdown => write!(f, "broker shutting down"),
            Resignation::Moved(why) => write!(f, "controller moved: {why}"),
            Resignation::Store(e) => write!(f, "etcd error: {e}"),
        }
    }
}

impl From<StoreError> for Resignation {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::ControllerMoved(why) => Resignation::Moved(why),
            other => Resignation::Store(other),
        }
    }
}

pub struct Controller {
    pub(super) store: MetadataStore,
    pub(super) settings: Arc<ControllerSettings>,
    session: Arc<Session>,
    pub(super) epoch: i32,
    /// Create revision of the controller key this controller won.
    pub(super) create_revision: i64,
    /// The lease the controller key was won under; it dies with it.
    lease: i64,
    pub(super) ctx: ControllerContext,
    pub(super) channel: ControllerChannel,
    replies: mpsc::UnboundedReceiver<ControlReply>,
}

impl Controller {
    pub fn new(
        store: MetadataStore,
        settings: Arc<ControllerSettings>,
        session: Arc<Session>,
        epoch: i32,
        create_revision: i64,
    ) -> Self {
        let (tx, replies) = mpsc::unbounded_channel();
        let channel = ControllerChannel::new(settings.node_id, tx);
        let lease = session.lease().id;
        Self {
            store,
            settings,
            session,
            epoch,
            create_revision,
            lease,
            ctx: ControllerContext::default(),
            channel,
            replies,
        }
    }

    fn fence(&self) -> Option<ControllerFence> {
        self.settings
            .controller_epoch_fencing
            .then_some(ControllerFence {
                controller_epoch: self.epoch,
            })
    }

    /// Run until the controller resigns.
    pub async fn run(mut self, mut shutdown: watch::Receiver<bool>) -> Resignation {
        let revision = match self.take_over().await {
            Ok(r) => r,
            Err(e) => return e,
        };
        let mut stream = match self
            .store
            .client()
            .watch(
                format!("{ROOT}/"),
                Some(
                    WatchOptions::new()
                        .with_prefix()
                        .with_start_revision(revision + 1),
                ),
            )
            .await
        {
            Ok(s) => s,
            Err(e) => return Resignation::Store(e.into()),
        };
        loop {
            if !self.session.is_live() {
                return Resignation::Moved("own etcd session not live: fenced".into());
            }
            // A broker resumed after its lease expired may have registered
            // again under a new lease before this check runs: the controller
            // key died with the old one all the same.
            if self.session.lease().id != self.lease {
                return Resignation::Moved("own etcd lease replaced: fenced".into());
            }
            tokio::select! {
                _ = shutdown.changed() => return Resignation::Shutdown,
                _ = tokio::time::sleep(LIVENESS_CHECK) => {}
                msg = stream.message() => {
                    let resp = match msg {
                        Ok(Some(resp)) => resp,
                        Ok(None) => return Resignation::Moved("etcd watch ended".into()),
                        Err(e) => return Resignation::Store(e.into()),
                    };
                    if resp.canceled() {
                        // A cancelled watch (e.g. compacted past our revision) would
                        // leave the controller blind; resign and let the election
                        // start a fresh one from a new snapshot.
                        return Resignation::Moved(format!("etcd watch cancelled: {}", resp.cancel_reason()));
                    }
                    for event in resp.events() {
                        let Some(kv) = event.kv() else { continue };
                        let key = kv.key_str().unwrap_or_default().to_string();
                        let deleted = event.event_type() == EventType::Delete;
                        // Taken off the queue, not yet handled: where a paused
                        // ("GC") controller of KAFKA-532 sits on a stale event.
                        failpoints::hit(Failpoint::ControllerBeforeEvent);
                        if deleted && matches!(classify(&key), KeyKind::Broker(_)) {
                            failpoints::hit(Failpoint::ControllerBeforeBrokerLoss);
                        }
                        if let Err(r) = self.on_key_event(&key, kv, deleted).await {
                            return r;
                        }
                    }
                }
                Some(reply) = self.replies.recv() => {
                    if let Err(r) = self.on_reply(reply) {
                        return r;
                    }
                    if let Err(r) = self.finish_deletions().await {
                        return r;
                    }
                }
            }
        }
    }

    /// Load everything, check we still hold the key, elect where needed and tell
    /// every live broker the full state (a new controller does not trust what
    /// brokers were told before). Returns the snapshot revision to watch from.
    async fn take_over(&mut self) -> Result<i64, Resignation> {
        let snap = self.store.snapshot().await?;
        match &snap.controller {
            Some(c) if c.create_revision == self.create_revision => {}
            _ => {
                return Err(Resignation::Moved(
                    "controller key changed before takeover".into(),
                ));
            }
        }
        if snap.controller_epoch.as_ref().map(|e| e.value) != Some(self.epoch) {
            return Err(Resignation::Moved(
                "controller epoch changed before takeover".into(),
            ));
        }
        self.ctx.brokers = snap.brokers;
        self.ctx.topics = snap.topics.into_iter().map(|(t, v)| (t, v.value)).collect();
        self.ctx.states = snap.partition_states;
        self.ctx.topic_configs = snap
            .topic_configs
            .into_iter()
            .map(|(t, r)| (t, r.config))
            .collect();
        let ids: Vec<i32> = self.ctx.brokers.keys().copied().collect();
        for id in &ids {
            self.connect(*id);
        }
        tracing::info!(epoch = self.epoch, brokers = ?ids, topics = self.ctx.topics.len(), "controller took over");
        let topics: Vec<String> = self.ctx.topics.keys().cloned().collect();
        for t in &topics {
            self.elect_missing(t).await?;
        }
        // Brokers that restarted while there was no controller come first
        // (KIP-380): a broker back from a power loss with a cut log may still be
        // listed in the ISR, and re-electing before this would elect it in a
        // gone leader's place — and the state that election writes is newer than
        // the broker's re-registration, so the restart would never be seen.
        let fencing = self.settings.broker_epoch_fencing;
        let restarted =
            partition_election::restarted_unseen(&self.ctx.states, &self.ctx.brokers, fencing);
        for (key, broker) in restarted {
            self.decide_and_write(&key, |current, replicas, live, epoch| {
                partition_election::restarted(current, replicas, live, broker, fencing, epoch)
            })
            .await?;
        }
        // Brokers may have come and gone while there was no controller.
        self.reelect_all().await?;
        for id in &ids {
            self.send_leader_and_isr(*id, |_| true, false);
        }
        self.broadcast_metadata();
        for topic in &snap.deletions {
            self.begin_deletion(topic).await?;
        }
        Ok(snap.revision)
    }

    fn connect(&mut self, id: i32) {
        let Some(reg) = self.ctx.brokers.get(&id) else {
            return;
        };
        let addr = self
            .settings
            .peers
            .get(&id)
            .cloned()
            .unwrap_or_else(|| format!("{}:{}", reg.value.host, reg.value.port));
        self.channel.add_broker(id, addr);
    }

    async fn on_key_event(
        &mut self,
        key: &str,
        kv: &etcd_client::KeyValue,
        deleted: bool,
    ) -> Result<(), Resignation> {
        match classify(key) {
            KeyKind::Controller if deleted || kv.create_revision() != self.create_revision => {
                return Err(Resignation::Moved(
                    "controller key deleted or replaced".into(),
                ));
            }
            KeyKind::ControllerEpoch if !deleted => {
                let stored: i32 = serde_json::from_slice(kv.value()).unwrap_or(i32::MAX);
                if stored != self.epoch {
                    return Err(Resignation::Moved(format!(
                        "controller epoch is now {stored}"
                    )));
                }
            }
            KeyKind::Broker(id) if deleted => {
                tracing::info!(broker = id, "broker registration gone");
                self.ctx.brokers.remove(&id);
                self.channel.remove_broker(id);
                let changed = self.reelect_all().await?;
                self.send_changed(&changed, None);
                self.broadcast_metadata();
            }
            KeyKind::Broker(id) => {
                let reg: BrokerRegistration = match serde_json::from_slice(kv.value()) {
                    Ok(r) => r,
                    Err(e) => {
                        tracing::warn!(%key, %e, "ignoring malformed registration");
                        return Ok(());
                    }
                };
                let known = self
                    .ctx
                    .brokers
                    .get(&id)
                    .map(|v| (v.create_revision, v.value.incarnation));
                // Same key (create revision), new process: restarted within its
                // lease. ZooKeeper-era Kafka saw no session change here (KAFKA-1120).
                let restarted = known.is_some_and(|(rev, inc)| {
                    rev == kv.create_revision() && inc != reg.incarnation
                });
                if known
                    .is_some_and(|(rev, inc)| rev == kv.create_revision() && inc == reg.incarnation)
                {
                    return Ok(());
                }
                tracing::info!(
                    broker = id,
                    broker_epoch = kv.mod_revision(),
                    restarted,
                    "broker registered"
                );
                self.ctx.brokers.insert(
                    id,
                    Versioned {
                        value: reg,
                        create_revision: kv.create_revision(),
                        mod_revision: kv.mod_revision(),
                        version: kv.version(),
                    },
                );
                if restarted {
                    // Requests queued for the broker's earlier run (a takeover
                    // sends every registered broker its state, the dead one
                    // too, and a failed send is retried) must not reach the new
                    // run ahead of the election below. They name the earlier
                    // run's broker epoch, which the new run refuses (KIP-380);
                    // one already on its way when the new run registered is
                    // refused that way, and the rest are dropped here, as
                    // Kafka's controller removes a failed broker's channel
                    // before a started one is added again.
                    self.channel.remove_broker(id);
                }
                self.connect(id);
                let changed = if restarted {
                    self.reelect_restarted(id).await?
                } else {
                    self.reelect_all().await?
                };
                // The broker first: its partitions' state, whatever changed.
                self.send_leader_and_isr(id, |_| true, false);
                self.send_changed(&changed, Some(id));
                self.broadcast_metadata();
                // Deleted topics it still holds a replica of.
                self.send_deletions(id);
            }
            KeyKind::Topic(topic) if !deleted => self.on_topic(key, &topic, kv.value()).await?,
            KeyKind::TopicDeletion(topic) if !deleted => self.begin_deletion(&topic).await?,
            KeyKind::TopicConfig(topic) => {
                let value = (!deleted).then(|| kv.value());
                self.on_topic_configs(key, &topic, value).await?
            }
            KeyKind::PartitionState(topic, partition) if !deleted => {
                if let Ok(state) = serde_json::from_slice::<PartitionStateRecord>(kv.value()) {
                    let state = Versioned {
                        value: state,
                        create_revision: kv.create_revision(),
                        mod_revision: kv.mod_revision(),
                        version: kv.version(),
                    };
                    if self.ctx.observe_state((topic, partition), state) {
                        self.broadcast_metadata();
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Elect a leader for every partition of `topic` without state: the first
    /// live replica in assignment order, ISR = the live replicas, leader epoch 0.
    /// Returns the partitions written.
    pub(super) async fn elect_missing(&mut self, topic: &str) -> Result<Vec<i32>, Resignation> {
        let Some(assignment) = self.ctx.topics.get(topic).cloned() else {
            return Ok(vec![]);
        };
        let mut written = Vec::new();
        for (partition, replicas) in &assignment.partitions {
            if self
                .ctx
                .states
                .contains_key(&(topic.to_string(), *partition))
            {
                continue;
            }
            let live: Vec<i32> = replicas
                .iter()
                .copied()
                .filter(|r| self.ctx.brokers.contains_key(r))
                .collect();
            let Some(&leader) = live.first() else {
                tracing::warn!(%topic, partition, ?replicas, "no live replica: partition stays offline");
                continue;
            };
            let state = PartitionStateRecord {
                leader,
                leader_epoch: 0,
                isr: live,
                controller_epoch: self.epoch,
            };
            match self
                .store
                .write_partition_state(topic, *partition, &state, 0, self.fence().as_ref())
                .await
            {
                Ok(v) => {
                    failpoints::hit(Failpoint::ControllerAfterWrite);
                    tracing::info!(%topic, partition, leader, "elected initial leader");
                    self.ctx.states.insert((topic.to_string(), *partition), v);
                    written.push(*partition);
                }
                Err(StoreError::VersionMismatch { .. }) => {
                    // Someone (a previous controller) wrote it first: adopt theirs.
                    let snap = self.store.snapshot().await?;
                    if let Some(v) = snap.partition_states.get(&(topic.to_string(), *partition)) {
                        self.ctx
                            .states
                            .insert((topic.to_string(), *partition), v.clone());
                        written.push(*partition);
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(written)
    }

    /// Re-decide every partition against the live brokers (a broker came or
    /// went); returns the partitions written.
    async fn reelect_all(&mut self) -> Result<BTreeSet<PartitionKey>, Resignation> {
        self.reelect_where(|_| true).await
    }

    /// [`reelect_all`](Self::reelect_all) for the partitions `which` picks.
    pub(super) async fn reelect_where(
        &mut self,
        which: impl Fn(&PartitionKey) -> bool,
    ) -> Result<BTreeSet<PartitionKey>, Resignation> {
        let keys: Vec<PartitionKey> = self
            .ctx
            .states
            .keys()
            .filter(|k| which(k))
            .cloned()
            .collect();
        let mut changed = BTreeSet::new();
        for key in keys {
            let unclean = self
                .ctx
                .unclean(&key.0, self.settings.unclean_leader_election);
            if self
                .decide_and_write(&key, |current, replicas, live, epoch| {
                    partition_election::reelect(current, replicas, live, unclean, epoch)
                })
                .await?
            {
                changed.insert(key);
            }
        }
        Ok(changed)
    }

    /// A broker restarted within its lease: the partitions it led get a new
    /// leader epoch; with broker epochs (KIP-380) it also leaves every ISR.
    async fn reelect_restarted(
        &mut self,
        broker: i32,
    ) -> Result<BTreeSet<PartitionKey>, Resignation> {
        let keys: Vec<PartitionKey> = self.ctx.states.keys().cloned().collect();
        let fencing = self.settings.broker_epoch_fencing;
        let mut changed = BTreeSet::new();
        for key in keys {
            if self
                .decide_and_write(&key, |current, replicas, live, epoch| {
                    partition_election::restarted(current, replicas, live, broker, fencing, epoch)
                })
                .await?
            {
                changed.insert(key);
            }
        }
        Ok(changed)
    }

    /// Decide one partition's next state with `decide` and write it by
    /// compare-and-swap. A lost compare (a leader's ISR write got in first) is
    /// re-read and re-decided from the fresh state; a moved controller epoch
    /// resigns. Returns whether a new state was written.
    async fn decide_and_write(
        &mut self,
        key: &PartitionKey,
        decide: impl Fn(
            &PartitionStateRecord,
            &[i32],
            &BTreeSet<i32>,
            i32,
        ) -> Option<PartitionStateRecord>,
    ) -> Result<bool, Resignation> {
        let live: BTreeSet<i32> = self.ctx.brokers.keys().copied().collect();
        let replicas = self.ctx.replicas(&key.0, key.1).to_vec();
        for _ in 0..WRITE_ATTEMPTS_MAX {
            let Some(current) = self.ctx.states.get(key).cloned() else {
                return Ok(false);
            };
            // Jun Rao's rule in KAFKA-532: write a partition's state only if the
            // controller epoch stored with it is not above ours. The revision
            // compare below makes the check atomic with the write: the state we
            // checked is the state we replace. A partition a newer controller has
            // not rewritten still carries an older epoch, so a stale controller
            // may write it; the brokers' STALE_CONTROLLER_EPOCH is what stops its
            // LeaderAndIsr then.
            if self.settings.controller_epoch_fencing && current.value.controller_epoch > self.epoch
            {
                return Err(Resignation::Moved(format!(
                    "{}-{} was written by controller epoch {}, ours is {}",
                    key.0, key.1, current.value.controller_epoch, self.epoch
                )));
            }
            let Some(next) = decide(&current.value, &replicas, &live, self.epoch) else {
                return Ok(false);
            };
            match self
                .store
                .write_partition_state(
                    &key.0,
                    key.1,
                    &next,
                    current.mod_revision,
                    self.fence().as_ref(),
                )
                .await
            {
                Ok(v) => {
                    failpoints::hit(Failpoint::ControllerAfterWrite);
                    tracing::info!(
                        topic = %key.0,
                        partition = key.1,
                        leader = next.leader,
                        leader_epoch = next.leader_epoch,
                        isr = ?next.isr,
                        "partition state changed"
                    );
                    self.ctx.states.insert(key.clone(), v);
                    return Ok(true);
                }
                Err(StoreError::VersionMismatch { .. }) => {
                    match self.store.partition_state(&key.0, key.1).await? {
                        Some(fresh) => {
                            self.ctx.states.insert(key.clone(), fresh);
                        }
                        None => return Ok(false),
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
        tracing::warn!(topic = %key.0, partition = key.1, "partition state kept changing under the controller; giving up this round");
        Ok(false)
    }

    /// Send the changed partitions' state to their live replicas (except
    /// `skip`, which was sent everything already).
    pub(super) fn send_changed(&self, changed: &BTreeSet<PartitionKey>, skip: Option<i32>) {
        let targets: BTreeSet<i32> = changed
            .iter()
            .flat_map(|(t, p)| self.ctx.replicas(t, *p).to_vec())
            .filter(|b| self.ctx.brokers.contains_key(b) && Some(*b) != skip)
            .collect();
        for b in targets {
            self.send_leader_and_isr(b, |k| changed.contains(k), false);
        }
    }

    /// Send `broker` the state of every partition it replicates that `include` selects.
    pub(super) fn send_leader_and_isr(
        &self,
        broker: i32,
        include: impl Fn(&PartitionKey) -> bool,
        is_new: bool,
    ) {
        let mut by_topic: BTreeMap<&str, Vec<LeaderAndIsrPartitionState>> = BTreeMap::new();
        let mut leaders = BTreeSet::new();
        for (key, v) in &self.ctx.states {
            if !include(key) {
                continue;
            }
            let (topic, partition) = key;
            let replicas = self.ctx.replicas(topic, *partition);
            if !replicas.contains(&broker) {
                continue;
            }
            leaders.insert(v.value.leader);
            by_topic.entry(topic).or_default().push(
                LeaderAndIsrPartitionState::default()
                    .with_topic_name(TopicName(StrBytes::from_string(topic.clone())))
                    .with_partition_index(*partition)
                    .with_controller_epoch(v.value.controller_epoch)
                    .with_leader(BrokerId(v.value.leader))
                    .with_leader_epoch(v.value.leader_epoch)
                    .with_isr(v.value.isr.iter().copied().map(BrokerId).collect())
                    .with_partition_epoch(v.version as i32 - 1)
                    .with_replicas(replicas.iter().copied().map(BrokerId).collect())
                    .with_is_new(is_new),
            );
        }
        if by_topic.is_empty() {
            return;
        }
        let live_leaders = leaders
            .into_iter()
            .filter_map(|id| self.ctx.brokers.get(&id))
            .map(|b| {
                LeaderAndIsrLiveLeader::default()
                    .with_broker_id(BrokerId(b.value.id))
                    .with_host_name(StrBytes::from_string(b.value.host.clone()))
                    .with_port(b.value.port)
            })
            .collect();
        let request = LeaderAndIsrRequest::default()
            .with_controller_id(BrokerId(self.settings.node_id))
            .with_controller_epoch(self.epoch)
            .with_broker_epoch(self.ctx.broker_epoch(broker))
            .with_topic_states(
                by_topic
                    .into_iter()
                    .map(|(t, ps)| {
                        LeaderAndIsrTopicState::default()
                            .with_topic_name(TopicName(StrBytes::from_string(t.to_string())))
                            .with_partition_states(ps)
                    })
                    .collect(),
            )
            .with_live_leaders(live_leaders);
        self.channel
            .send(broker, ControlRequest::LeaderAndIsr(request));
    }

    /// Tell every live broker the full partition state and the live brokers.
    pub(super) fn broadcast_metadata(&self) {
        let mut by_topic: BTreeMap<&str, Vec<UpdateMetadataPartitionState>> = BTreeMap::new();
        for ((topic, partition), v) in &self.ctx.states {
            let replicas = self.ctx.replicas(topic, *partition);
            let offline = replicas
                .iter()
                .copied()
                .filter(|r| !self.ctx.brokers.contains_key(r))
                .map(BrokerId)
                .collect();
            by_topic.entry(topic).or_default().push(
                UpdateMetadataPartitionState::default()
                    .with_topic_name(TopicName(StrBytes::from_string(topic.clone())))
                    .with_partition_index(*partition)
                    .with_controller_epoch(v.value.controller_epoch)
                    .with_leader(BrokerId(v.value.leader))
                    .with_leader_epoch(v.value.leader_epoch)
                    .with_isr(v.value.isr.iter().copied().map(BrokerId).collect())
                    .with_zk_version(v.version as i32 - 1)
                    .with_replicas(replicas.iter().copied().map(BrokerId).collect())
                    .with_offline_replicas(offline),
            );
        }
        let live_brokers: Vec<UpdateMetadataBroker> = self
            .ctx
            .brokers
            .values()
            .map(|b| {
                UpdateMetadataBroker::default()
                    .with_id(BrokerId(b.value.id))
                    .with_endpoints(vec![
                        UpdateMetadataEndpoint::default()
                            .with_host(StrBytes::from_string(b.value.host.clone()))
                            .with_port(b.value.port)
                            .with_listener(StrBytes::from_static_str("PLAINTEXT"))
                            .with_security_protocol(0),
                    ])
            })
            .collect();
        let topic_states: Vec<UpdateMetadataTopicState> = by_topic
            .into_iter()
            .map(|(t, ps)| {
                UpdateMetadataTopicState::default()
                    .with_topic_name(TopicName(StrBytes::from_string(t.to_string())))
                    .with_topic_id(wire_topic_id(
                        self.ctx.topics.get(t).and_then(|a| a.topic_id.as_deref()),
                    ))
                    .with_partition_states(ps)
            })
            .collect();
        for id in self.channel.brokers() {
            let request = UpdateMetadataRequest::default()
                .with_controller_id(BrokerId(self.settings.node_id))
                .with_controller_epoch(self.epoch)
                .with_broker_epoch(self.ctx.broker_epoch(id))
                .with_topic_states(topic_states.clone())
                .with_live_brokers(live_brokers.clone());
            self.channel
                .send(id, ControlRequest::UpdateMetadata(request));
        }
    }

    /// A broker's answer. With fencing on, a request refused whole with
    /// STALE_CONTROLLER_EPOCH means a newer controller has spoken to that broker:
    /// resign (KAFKA-532). A per-partition STALE_CONTROLLER_EPOCH is only the
    /// leader-epoch rule refusing a state the broker already has, as in Kafka.
    fn on_reply(&mut self, reply: ControlReply) -> Result<(), Resignation> {
        let stale = ResponseError::StaleControllerEpoch.code();
        let request_error = reply.response.error_code();
        match reply.response {
            ControlResponse::LeaderAndIsr(r) => {
                let failed: Vec<_> = r
                    .partition_errors
                    .iter()
                    .filter(|e| e.error_code != 0)
                    .collect();
                if r.error_code != 0 || !failed.is_empty() {
                    tracing::warn!(
                        broker = reply.broker_id,
                        error_code = r.error_code,
                        ?failed,
                        "LeaderAndIsr not fully applied"
                    );
                }
            }
            ControlResponse::UpdateMetadata(r) => {
                if r.error_code != 0 {
                    tracing::warn!(
                        broker = reply.broker_id,
                        error_code = r.error_code,
                        "UpdateMetadata rejected"
                    );
                }
            }
            ControlResponse::StopReplica(r) => self.on_stop_replica(reply.broker_id, &r),
        }
        if self.settings.controller_epoch_fencing && request_error == stale {
            return Err(Resignation::Moved(format!(
                "broker {} answered STALE_CONTROLLER_EPOCH to controller epoch {}",
                reply.broker_id, self.epoch
            )));
        }
        Ok(())
    }
}
