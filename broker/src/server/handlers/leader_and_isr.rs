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

use kafka_protocol::ResponseError;
use kafka_protocol::messages::leader_and_isr_response::LeaderAndIsrPartitionError;
use kafka_protocol::messages::{LeaderAndIsrRequest, LeaderAndIsrResponse};

use std::collections::BTreeMap;

use super::topic_name;
use crate::replica::fetcher::FetchTarget;
use crate::replica::leader_and_isr::Role;
use crate::replica::partition::LeaderAndIsrState;
use crate::replica::store::TopicPartition;
use crate::server::context::Broker;
use crate::state_change_log::{Outcome, StateChange};

/// `stale_broker_epoch`: why the broker-epoch check refused the request, if it did.
pub fn handle(
    broker: &Broker,
    req: LeaderAndIsrRequest,
    stale_broker_epoch: Option<String>,
) -> LeaderAndIsrResponse {
    let controller_id = req.controller_id.0;
    let controller_epoch = req.controller_epoch;
    // Where each leader is reached: `--peer` wins over the advertised address.
    let leader_addrs: BTreeMap<i32, String> = req
        .live_leaders
        .iter()
        .map(|l| {
            let id = l.broker_id.0;
            let addr = broker
                .config
                .peers
                .get(&id)
                .cloned()
                .unwrap_or_else(|| format!("{}:{}", l.host_name, l.port));
            (id, addr)
        })
        .collect();
    // v0-1 list partitions flat; v2+ group them by topic.
    let states: Vec<(TopicPartition, LeaderAndIsrState)> = req
        .ungrouped_partition_states
        .into_iter()
        .chain(req.topic_states.into_iter().flat_map(|t| {
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
        .collect();
    let record =
        |tp: &TopicPartition, s: &LeaderAndIsrState, outcome: Outcome, reason: Option<String>| {
            let change = StateChange {
                time_ms: StateChange::now_ms(),
                request: "LeaderAndIsr".into(),
                controller_id,
                controller_epoch,
                topic: tp.topic.clone(),
                partition: tp.partition,
                leader: s.leader,
                leader_epoch: s.leader_epoch,
                isr: s.isr.clone(),
                outcome,
                reason,
            };
            if let Err(e) = broker.state_changes.append(&change) {
                tracing::error!(%e, "could not append to the state-change log");
            }
        };
    let refused = match stale_broker_epoch {
        Some(reason) => {
            tracing::warn!(
                controller_id,
                controller_epoch,
                broker_epoch = req.broker_epoch,
                "rejected LeaderAndIsr addressed to another registration"
            );
            Some((ResponseError::StaleBrokerEpoch, reason))
        }
        None => broker
            .replicas
            .observe_controller_epoch(controller_epoch, broker.config.controller_epoch_fencing)
            .err()
            .map(|code| {
                let newest = broker.replicas.controller_epoch();
                tracing::warn!(
                    controller_id,
                    controller_epoch,
                    newest,
                    "rejected LeaderAndIsr from a stale controller"
                );
                let reason = format!(
                    "STALE_CONTROLLER_EPOCH: controller epoch {controller_epoch} is older than {newest}"
                );
                (code, reason)
            }),
    };
    if let Some((code, reason)) = refused {
        let errors = states
            .iter()
            .map(|(tp, s)| {
                record(tp, s, Outcome::Rejected, Some(reason.clone()));
                LeaderAndIsrPartitionError::default()
                    .with_topic_name(topic_name(&tp.topic))
                    .with_partition_index(tp.partition)
                    .with_error_code(code.code())
            })
            .collect();
        return LeaderAndIsrResponse::default()
            .with_error_code(code.code())
            .with_partition_errors(errors);
    }
    let decisions = broker.replicas.apply_leader_and_isr(states);
    let errors = decisions
        .into_iter()
        .map(|d| {
            let code = match &d.result {
                Ok(_) => 0,
                Err(e) => e.code(),
            };
            let outcome = if d.result.is_ok() { Outcome::Applied } else { Outcome::Rejected };
            match &d.result {
                Ok(Role::Leader) => broker.fetchers.stop(&d.tp),
                Ok(Role::Follower { leader, leader_epoch, truncate }) => {
                    match leader_addrs.get(leader).or_else(|| broker.config.peers.get(leader)) {
                        Some(addr) => broker.fetchers.follow(FetchTarget {
                            tp: d.tp.clone(),
                            leader: *leader,
                            leader_addr: addr.clone(),
                            leader_epoch: *leader_epoch,
                            truncate: *truncate,
                        }),
                        // No live leader (offline partition): nothing to fetch from.
                        None => broker.fetchers.stop(&d.tp),
                    }
                }
                Err(_) => {}
            }
            if d.result.is_ok() {
                tracing::info!(topic = %d.tp.topic, partition = d.tp.partition, leader = d.state.leader, leader_epoch = d.state.leader_epoch, isr = ?d.state.isr, "applied LeaderAndIsr");
            }
            record(&d.tp, &d.state, outcome, d.reason.clone());
            LeaderAndIsrPartitionError::default()
                .with_topic_name(topic_name(&d.tp.topic))
                .with_partition_index(d.tp.partition)
                .with_error_code(code)
        })
        .collect();
    LeaderAndIsrResponse::default().with_partition_errors(errors)
}
