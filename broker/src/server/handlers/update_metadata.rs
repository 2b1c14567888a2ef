//! UpdateMetadata: the controller's announcement of live brokers and every
//! partition's leadership, which replaces the metadata cache. Fenced by the
//! broker epoch (KIP-380) and the controller epoch (KAFKA-532) like
//! LeaderAndIsr; each partition's outcome goes to state-change.log.

use std::collections::BTreeMap;

use kafka_protocol::messages::{UpdateMetadataRequest, UpdateMetadataResponse};

use super::fencing::{self, Control};
use crate::server::metadata_cache::{
    BrokerEndpoint, ClusterView, MetadataCache, PartitionMetadata,
};
use crate::state_change_log::{Outcome, StateChange};

/// `stale_broker_epoch`: why the broker-epoch check refused the request, if it did.
pub fn handle(
    control: &Control<'_>,
    metadata: &MetadataCache,
    req: UpdateMetadataRequest,
    stale_broker_epoch: Option<String>,
) -> UpdateMetadataResponse {
    let _control = control.lock();
    let (stale, reason) = fencing::refusal(
        control,
        req.controller_epoch,
        req.broker_epoch,
        stale_broker_epoch,
    )
    .map(|refusal| (refusal.code(), refusal.reason()))
    .unzip();
    let mut view = ClusterView {
        controller_id: req.controller_id.0,
        ..Default::default()
    };
    for b in &req.live_brokers {
        if let Some(ep) = b.endpoints.first() {
            view.brokers.insert(
                b.id.0,
                BrokerEndpoint {
                    id: b.id.0,
                    host: ep.host.to_string(),
                    port: ep.port,
                },
            );
        }
    }
    for t in req.topic_states.iter() {
        let topic = t.topic_name.0.to_string();
        if !t.topic_id.is_nil() {
            view.topic_ids.insert(topic.clone(), t.topic_id.to_string());
        }
        let parts: &mut BTreeMap<i32, PartitionMetadata> =
            view.topics.entry(topic.clone()).or_default();
        for p in &t.partition_states {
            parts.insert(
                p.partition_index,
                PartitionMetadata {
                    leader: p.leader.0,
                    leader_epoch: p.leader_epoch,
                    replicas: p.replicas.iter().map(|b| b.0).collect(),
                    isr: p.isr.iter().map(|b| b.0).collect(),
                    offline_replicas: p.offline_replicas.iter().map(|b| b.0).collect(),
                },
            );
            let change = StateChange {
                time_ms: StateChange::now_ms(),
                request: "UpdateMetadata".into(),
                controller_id: req.controller_id.0,
                controller_epoch: req.controller_epoch,
                topic: topic.clone(),
                partition: p.partition_index,
                leader: p.leader.0,
                leader_epoch: p.leader_epoch,
                isr: p.isr.iter().map(|b| b.0).collect(),
                outcome: if stale.is_some() {
                    Outcome::Rejected
                } else {
                    Outcome::Applied
                },
                reason: reason.clone(),
            };
            if let Err(e) = control.state_changes.append(&change) {
                tracing::error!(%e, "could not append to the state-change log");
            }
        }
    }
    if let Some(code) = stale {
        tracing::warn!(
            controller_epoch = req.controller_epoch,
            broker_epoch = req.broker_epoch,
            reason = reason.as_deref().unwrap_or_default(),
            "rejected UpdateMetadata"
        );
        return UpdateMetadataResponse::default().with_error_code(code.code());
    }
    metadata.replace(view);
    UpdateMetadataResponse::default()
}
