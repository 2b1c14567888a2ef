//! Phase 2: from a started cluster to a ready one. Topics are created through
//! b1's client proxy, then the run waits until etcd shows a controller, every
//! broker registered and every partition led with its full ISR, and until each
//! leader has applied the LeaderAndIsr that made it leader (so the first
//! produce finds a leader, not NOT_LEADER).

use std::time::Duration;

use crate::kafka_client::KafkaClient;
use crate::node::NodeId;
use crate::observe::await_ready_from;
use crate::runtime::Runtime;
use crate::schedule::{Condition, Schedule};

use super::RunError;
use super::live::Live;

/// Bound on the cluster coming up (and on each topic's creation).
pub(super) const READY_TIMEOUT: Duration = Duration::from_secs(60);

pub(super) async fn setup<R: Runtime>(
    live: &mut Live<R>,
    schedule: &Schedule,
) -> Result<(), RunError> {
    let source = live.observer.source();
    await_ready_from(&source, live.runtime.nodes(), READY_TIMEOUT).await?;
    if !schedule.cluster.topics.is_empty() {
        let first = NodeId::new(1);
        let address = live.runtime.client_address(first)?;
        let timeout = READY_TIMEOUT;
        let mut client = KafkaClient::connect(&address, "epochal", live.clients.request_timeout)
            .await
            .map_err(|source| RunError::Connect {
                topic: schedule.cluster.topics[0].name.clone(),
                node: first,
                source,
            })?;
        for topic in &schedule.cluster.topics {
            client
                .create_topic(
                    &topic.name,
                    topic.partitions as i32,
                    topic.replication_factor as i16,
                    timeout.as_millis() as i32,
                    timeout + Duration::from_secs(5),
                )
                .await
                .map_err(|source| RunError::CreateTopic {
                    topic: topic.name.clone(),
                    source,
                })?;
            live.log.line(format!(
                "created topic {} ({} partitions, replication factor {})",
                topic.name, topic.partitions, topic.replication_factor
            ));
        }
    }
    let view = await_ready_from(&source, live.runtime.nodes(), READY_TIMEOUT).await?;
    // Every leader serving, not only named in etcd (observe/, LeaderIs).
    for (partition, state) in &view.partitions {
        let condition = Condition::LeaderIs {
            partition: partition.clone(),
            node: state.leader.expect("ready: every partition led"),
        };
        live.observer
            .await_condition(&live.runtime, &condition, READY_TIMEOUT)
            .await
            .map_err(RunError::NotReady)?;
    }
    live.log.line(format!(
        "cluster ready: controller {}, {} partitions",
        view.controller
            .map_or_else(|| "b0".to_owned(), |c| c.to_string()),
        view.partitions.len()
    ));
    Ok(())
}
