//! LeaderAndIsr: the controller's decisions for the partitions this broker
//! replicates. Two request-level checks come first: the broker epoch (KIP-380:
//! a request addressed to an older registration of this broker is rejected
//! whole, STALE_BROKER_EPOCH, with broker-epoch fencing on; the dispatcher
//! makes it, since it may wait for the session), then the controller epoch
//! (KAFKA-532: a request from an older controller than the newest seen is
//! rejected whole, STALE_CONTROLLER_EPOCH, when fencing is on); then each
//! partition is applied or rejected by the leader-epoch rule. Every partition's outcome is appended to
//! state-change.log. An applied partition this broker follows gets a fetcher
//! (replacing any earlier one); one it leads has its fetcher stopped.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::leader_and_isr_request::{
    LeaderAndIsrLiveLeader, LeaderAndIsrPartitionState, LeaderAndIsrTopicState,
};
use kafka_protocol::messages::leader_and_isr_response::LeaderAndIsrPartitionError;
use kafka_protocol::messages::{LeaderAndIsrRequest, LeaderAndIsrResponse};

use super::fencing::{self, Control, Refusal};
use super::topic_name;
use crate::config::BrokerConfig;
use crate::group::GroupCoordinator;
use crate::offsets::{self, OFFSETS_TOPIC, OffsetsManager};
use crate::replica::fetcher::FetchTarget;
use crate::replica::leader_and_isr::Role;
use crate::replica::partition::LeaderAndIsrState;
use crate::replica::store::TopicPartition;
use crate::state_change_log::{Outcome, StateChange, StateChangeLog};
use crate::transactions::{self, TXN_STATE_TOPIC, TxnCoordinator};

/// The coordinators a LeaderAndIsr elects or resigns when it makes this
/// broker leader or follower of one of their partitions (an offsets or a
/// transaction-state partition).
pub struct Coordinators<'a> {
    pub offsets: &'a Arc<OffsetsManager>,
    pub groups: &'a GroupCoordinator,
    pub transactions: &'a Arc<TxnCoordinator>,
}

/// `stale_broker_epoch`: why the broker-epoch check refused the request, if it did.
pub fn handle(
    control: &Control<'_>,
    coordinators: &Coordinators<'_>,
    req: LeaderAndIsrRequest,
    stale_broker_epoch: Option<String>,
) -> LeaderAndIsrResponse {
    let recorder = Recorder {
        state_changes: control.state_changes,
        controller_id: req.controller_id.0,
        controller_epoch: req.controller_epoch,
    };
    let leader_addrs = leader_addresses(control.config, &req.live_leaders);
    let broker_epoch = req.broker_epoch;
    let states = partition_states(req.ungrouped_partition_states, req.topic_states);
    let _control = control.lock();
    if let Some(refusal) = fencing::refusal(
        control,
        recorder.controller_epoch,
        broker_epoch,
        stale_broker_epoch,
    ) {
        recorder.log_refusal(&refusal, broker_epoch);
        return refuse_whole(&recorder, &states, &refusal);
    }
    let errors = control
        .replicas
        .apply_leader_and_isr(states)
        .into_iter()
        .map(|d| {
            let code = match &d.result {
                Ok(_) => 0,
                Err(e) => e.code(),
            };
            let outcome = if d.result.is_ok() { Outcome::Applied } else { Outcome::Rejected };
            if let Ok(role) = &d.result {
                start_or_stop_fetcher(control, &d.tp, role, &leader_addrs);
                coordinate_or_resign(control, coordinators, &d.tp, role, d.state.leader_epoch);
                tracing::info!(topic = %d.tp.topic, partition = d.tp.partition, leader = d.state.leader, leader_epoch = d.state.leader_epoch, isr = ?d.state.isr, "applied LeaderAndIsr");
            }
            recorder.record(&d.tp, &d.state, outcome, d.reason.clone());
            partition_error(&d.tp, code)
        })
        .collect();
    LeaderAndIsrResponse::default().with_partition_errors(errors)
}

/// Where each live leader is reached: `--peer` wins over the address the
/// controller sent.
fn leader_addresses(
    config: &BrokerConfig,
    live_leaders: &[LeaderAndIsrLiveLeader],
) -> BTreeMap<i32, String> {
    live_leaders
        .iter()
        .map(|l| {
            let id = l.broker_id.0;
            let addr = config
                .peers
                .get(&id)
                .cloned()
                .unwrap_or_else(|| format!("{}:{}", l.host_name, l.port));
            (id, addr)
        })
        .collect()
}

/// Every partition's state in the request, in request order: v0-1 list
/// partitions flat, v2+ group them by topic.
fn partition_states(
    ungrouped: Vec<LeaderAndIsrPartitionState>,
    topics: Vec<LeaderAndIsrTopicState>,
) -> Vec<(TopicPartition, LeaderAndIsrState)> {
    ungrouped
        .into_iter()
        .chain(topics.into_iter().flat_map(|t| {
            let name = t.topic_name;
            t.partition_states.into_iter().map(move |mut p| {
                p.topic_name = name.clone();
                p
            })
        }))
        .map(|p| {
            (
                TopicPartition {
                    topic: p.topic_name.0.to_string(),
                    partition: p.partition_index,
                },
                LeaderAndIsrState {
                    controller_epoch: p.controller_epoch,
                    leader: p.leader.0,
                    leader_epoch: p.leader_epoch,
                    isr: p.isr.iter().map(|b| b.0).collect(),
                    partition_epoch: p.partition_epoch,
                    replicas: p.replicas.iter().map(|b| b.0).collect(),
                },
            )
        })
        .collect()
}

/// A request refused whole: each partition recorded as rejected and answered
/// the refusal's code, as is the request.
fn refuse_whole(
    recorder: &Recorder,
    states: &[(TopicPartition, LeaderAndIsrState)],
    refusal: &Refusal,
) -> LeaderAndIsrResponse {
    let code = refusal.code().code();
    let reason = refusal.reason();
    let errors = states
        .iter()
        .map(|(tp, s)| {
            recorder.record(tp, s, Outcome::Rejected, Some(reason.clone()));
            partition_error(tp, code)
        })
        .collect();
    LeaderAndIsrResponse::default()
        .with_error_code(code)
        .with_partition_errors(errors)
}

/// A coordinator's partition this broker now leads is loaded (a task of its
/// own; its groups or transactional ids answer COORDINATOR_LOAD_IN_PROGRESS
/// meanwhile); one it now follows is forgotten (NOT_COORDINATOR), as Kafka's
/// `onElection` and `onResignation` do for both coordinators.
fn coordinate_or_resign(
    control: &Control<'_>,
    coordinators: &Coordinators<'_>,
    tp: &TopicPartition,
    role: &Role,
    leader_epoch: i32,
) {
    let partition = tp.partition;
    let replicas = control.replicas.clone();
    match (tp.topic.as_str(), role) {
        (OFFSETS_TOPIC, Role::Leader) => {
            coordinators.offsets.elected(partition, leader_epoch);
            let offsets = coordinators.offsets.clone();
            let how = control.config.offsets_load;
            tokio::task::spawn_blocking(move || {
                offsets::load(&offsets, &replicas, partition, leader_epoch, how);
            });
        }
        (OFFSETS_TOPIC, Role::Follower { .. }) => {
            coordinators.offsets.resigned(partition);
            let partitions = coordinators.offsets.partitions();
            coordinators
                .groups
                .unload_partition(partition as u32, partitions);
        }
        (TXN_STATE_TOPIC, Role::Leader) => {
            coordinators.transactions.elected(partition, leader_epoch);
            let coordinator = coordinators.transactions.clone();
            tokio::task::spawn_blocking(move || {
                transactions::load::load(&coordinator, &replicas, partition, leader_epoch);
            });
        }
        (TXN_STATE_TOPIC, Role::Follower { .. }) => coordinators.transactions.resigned(partition),
        _ => {}
    }
}

/// An applied partition's fetcher: stopped where this broker leads, pointed
/// at the leader where it follows (stopped too when no leader is live).
fn start_or_stop_fetcher(
    control: &Control<'_>,
    tp: &TopicPartition,
    role: &Role,
    leader_addrs: &BTreeMap<i32, String>,
) {
    match role {
        Role::Leader => control.fetchers.stop(tp),
        Role::Follower {
            leader,
            leader_epoch,
            truncate,
        } => match leader_addrs
            .get(leader)
            .or_else(|| control.config.peers.get(leader))
        {
            Some(addr) => control.fetchers.follow(FetchTarget {
                tp: tp.clone(),
                leader: *leader,
                leader_addr: addr.clone(),
                leader_epoch: *leader_epoch,
                truncate: *truncate,
            }),
            // No live leader (offline partition): nothing to fetch from.
            None => control.fetchers.stop(tp),
        },
    }
}

fn partition_error(tp: &TopicPartition, code: i16) -> LeaderAndIsrPartitionError {
    LeaderAndIsrPartitionError::default()
        .with_topic_name(topic_name(&tp.topic))
        .with_partition_index(tp.partition)
        .with_error_code(code)
}

/// Writes this request's partitions to state-change.log.
struct Recorder<'a> {
    state_changes: &'a StateChangeLog,
    controller_id: i32,
    controller_epoch: i32,
}

impl Recorder<'_> {
    fn record(
        &self,
        tp: &TopicPartition,
        s: &LeaderAndIsrState,
        outcome: Outcome,
        reason: Option<String>,
    ) {
        let change = StateChange {
            time_ms: StateChange::now_ms(),
            request: "LeaderAndIsr".into(),
            controller_id: self.controller_id,
            controller_epoch: self.controller_epoch,
            topic: tp.topic.clone(),
            partition: tp.partition,
            leader: s.leader,
            leader_epoch: s.leader_epoch,
            isr: s.isr.clone(),
            outcome,
            reason,
        };
        if let Err(e) = self.state_changes.append(&change) {
            tracing::error!(%e, "could not append to the state-change log");
        }
    }

    /// The warning a refused request leaves in the broker's log.
    fn log_refusal(&self, refusal: &Refusal, broker_epoch: i64) {
        let (controller_id, controller_epoch) = (self.controller_id, self.controller_epoch);
        match refusal {
            Refusal::StaleBrokerEpoch { .. } => tracing::warn!(
                controller_id,
                controller_epoch,
                broker_epoch,
                "rejected LeaderAndIsr addressed to another registration"
            ),
            Refusal::StaleControllerEpoch { newest, .. } => tracing::warn!(
                controller_id,
                controller_epoch,
                newest,
                "rejected LeaderAndIsr from a stale controller"
            ),
        }
    }
}
