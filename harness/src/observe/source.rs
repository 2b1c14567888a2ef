//! Where a [`ClusterView`] comes from. The reference broker keeps its
//! decisions in etcd, which the harness reads directly (etcd.rs); any other
//! Kafka-compatible system is seen as a Kafka client sees it: Metadata, asked
//! of each broker on its own port (bypassing every fault proxy), once per
//! look. Both give the same view — leaders, ISRs, leader epochs, brokers — so
//! readiness, routing and awaits work the same way on either; only etcd's
//! revision history (the timeline) has no Metadata counterpart.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::join_all;

use super::error::ObserveError;
use super::etcd::{ClusterView, PartitionView};
use crate::kafka_client::{ClientError, KafkaClient, Metadata};
use crate::node::NodeId;
use crate::system::KafkaNodeIds;
use crate::topic_partition::PartitionRef;

/// A source of cluster views; cheap to clone.
#[derive(Clone)]
pub enum ViewSource {
    /// The reference broker's key layout in etcd (boxed: the client is
    /// large beside a list of addresses).
    Etcd(Box<etcd_client::Client>),
    /// Metadata from the brokers themselves.
    Metadata(MetadataSource),
}

impl From<etcd_client::Client> for ViewSource {
    fn from(client: etcd_client::Client) -> Self {
        ViewSource::Etcd(Box::new(client))
    }
}

/// Every broker's own address, and what its node ids mean.
#[derive(Clone, Debug)]
pub struct MetadataSource {
    /// Each broker and the address it serves on directly, in node order.
    pub brokers: Vec<(NodeId, String)>,
    pub ids: KafkaNodeIds,
    /// Bound on connecting to one broker and on its answer.
    pub timeout: Duration,
    /// Brokers that did not answer the last look, shared by every clone.
    /// Each look waits for its slowest broker, and a paused one never
    /// answers (its port still accepts), so it would cost every look the
    /// whole timeout: a broker that missed the last look gets
    /// [`SUSPECT_TIMEOUT`] until it answers again, unless every broker
    /// missed it (one node, just resumed, may take longer to answer, and
    /// no other can answer for it).
    pub suspects: Arc<Mutex<BTreeSet<NodeId>>>,
}

/// Bound on the answer of a broker that did not answer the last look: a
/// Metadata answer on loopback takes well under a millisecond.
pub const SUSPECT_TIMEOUT: Duration = Duration::from_millis(25);

impl ViewSource {
    /// One look at the cluster.
    pub async fn read(&self) -> Result<ClusterView, ObserveError> {
        match self {
            ViewSource::Etcd(client) => Ok(ClusterView::read(&mut (**client).clone()).await?),
            ViewSource::Metadata(source) => source.read().await,
        }
    }

    /// Whether views come from etcd (which also keeps a timeline).
    pub fn is_etcd(&self) -> bool {
        matches!(self, ViewSource::Etcd(_))
    }
}

impl MetadataSource {
    /// Asks every broker at once; the view is built from the answers (see
    /// [`view_of`]). No answer at all is an error naming each broker's.
    pub fn new(brokers: Vec<(NodeId, String)>, ids: KafkaNodeIds, timeout: Duration) -> Self {
        MetadataSource {
            brokers,
            ids,
            timeout,
            suspects: Arc::default(),
        }
    }

    fn suspects(&self) -> std::sync::MutexGuard<'_, BTreeSet<NodeId>> {
        self.suspects
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub async fn read(&self) -> Result<ClusterView, ObserveError> {
        let mut suspects = self.suspects().clone();
        if self.brokers.iter().all(|(node, _)| suspects.contains(node)) {
            suspects.clear();
        }
        let asks = self.brokers.iter().map(|(node, address)| {
            let timeout = match suspects.contains(node) {
                true => SUSPECT_TIMEOUT,
                false => self.timeout,
            };
            async move {
                let answer = async {
                    let mut client =
                        KafkaClient::connect(address, "epochal-observer", timeout).await?;
                    client.metadata(None, timeout).await
                };
                let answer = tokio::time::timeout(timeout, answer).await.unwrap_or(Err(
                    ClientError::Timeout {
                        deadline_ms: timeout.as_millis().try_into().unwrap_or(u64::MAX),
                    },
                ));
                (*node, answer)
            }
        });
        let answers: Vec<(NodeId, Result<Metadata, ClientError>)> = join_all(asks).await;
        *self.suspects() = answers
            .iter()
            .filter(|(_, a)| a.is_err())
            .map(|(node, _)| *node)
            .collect();
        let errors: Vec<String> = answers
            .iter()
            .filter_map(|(node, a)| a.as_ref().err().map(|e| format!("{node}: {e}")))
            .collect();
        let answered: Vec<(NodeId, Metadata)> = answers
            .into_iter()
            .filter_map(|(node, a)| Some((node, a.ok()?)))
            .collect();
        if answered.is_empty() {
            return Err(ObserveError::NoMetadata(errors.join("; ")));
        }
        Ok(view_of(&answered, self.ids))
    }
}

/// The view the brokers' Metadata answers give, `answered` in node order.
///
/// With [`KafkaNodeIds::Own`], broker N is node N: the first answer's
/// leaders, ISRs and controller are the view (a client's metadata is one
/// broker's word too), and a broker counts as registered when that answer
/// lists it. With [`KafkaNodeIds::Shared`] every broker answers as the same
/// node, so ids say nothing: every broker that answered is registered, and
/// each partition's leader is the first of them that knows it (where a
/// client whose bootstrap list is every broker, in order, would send), its
/// replicas and ISR that broker alone.
pub fn view_of(answered: &[(NodeId, Metadata)], ids: KafkaNodeIds) -> ClusterView {
    let mut view = ClusterView::default();
    let Some((first, metadata)) = answered.first() else {
        return view;
    };
    let node = |id: i32| NodeId::from_broker_id(id);
    match ids {
        KafkaNodeIds::Own => {
            view.controller = node(metadata.controller_id);
            view.brokers = metadata
                .brokers
                .iter()
                .filter_map(|b| node(b.node_id))
                .collect();
            for topic in metadata.topics.iter().filter(|t| t.error_code == 0) {
                for p in topic.partitions.iter().filter(|p| p.error_code == 0) {
                    let Ok(index) = u32::try_from(p.partition) else {
                        continue;
                    };
                    let state = PartitionView {
                        replicas: p.replicas.iter().filter_map(|&r| node(r)).collect(),
                        leader: node(p.leader),
                        isr: p.isr.iter().filter_map(|&r| node(r)).collect(),
                        leader_epoch: p.leader_epoch,
                        controller_epoch: -1,
                    };
                    view.partitions
                        .insert(PartitionRef::new(&topic.name, index), state);
                }
            }
        }
        KafkaNodeIds::Shared => {
            view.controller = Some(*first);
            view.brokers = answered.iter().map(|(n, _)| *n).collect();
            for (broker, metadata) in answered {
                for topic in metadata.topics.iter().filter(|t| t.error_code == 0) {
                    for p in topic.partitions.iter().filter(|p| p.error_code == 0) {
                        let Ok(index) = u32::try_from(p.partition) else {
                            continue;
                        };
                        view.partitions
                            .entry(PartitionRef::new(&topic.name, index))
                            .or_insert_with(|| PartitionView {
                                replicas: vec![*broker],
                                leader: Some(*broker),
                                isr: vec![*broker],
                                leader_epoch: p.leader_epoch,
                                controller_epoch: -1,
                            });
                    }
                }
            }
        }
    }
    view
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka_client::{MetadataBroker, MetadataPartition, MetadataTopic};

    fn metadata(node_id: i32, leader: i32, isr: Vec<i32>) -> Metadata {
        Metadata {
            brokers: vec![MetadataBroker {
                node_id,
                host: "127.0.0.1".into(),
                port: 9092,
            }],
            controller_id: node_id,
            topics: vec![MetadataTopic {
                name: "t".into(),
                error_code: 0,
                partitions: vec![MetadataPartition {
                    partition: 0,
                    error_code: 0,
                    leader,
                    leader_epoch: 4,
                    replicas: isr.clone(),
                    isr,
                }],
            }],
        }
    }

    #[test]
    fn own_ids_map_to_brokers_and_shared_ids_to_the_first_broker_that_answered() {
        let t0 = PartitionRef::new("t", 0);
        let b = NodeId::new;
        let own = view_of(&[(b(2), metadata(2, 3, vec![3, 2]))], KafkaNodeIds::Own);
        assert_eq!(own.controller, Some(b(2)));
        assert_eq!(own.leader_of(&t0), Some(b(3)));
        assert_eq!(own.partition(&t0).unwrap().isr, [b(3), b(2)]);
        assert_eq!(own.partition(&t0).unwrap().leader_epoch, 4);

        // Every broker says it is node 111 and leads everything.
        let answered = [
            (b(2), metadata(111, 111, vec![111])),
            (b(3), metadata(111, 111, vec![111])),
        ];
        let shared = view_of(&answered, KafkaNodeIds::Shared);
        assert_eq!(shared.brokers, [b(2), b(3)].into());
        assert_eq!(shared.leader_of(&t0), Some(b(2)));
        assert_eq!(shared.partition(&t0).unwrap().isr, [b(2)]);
        assert!(shared.ready(&[b(2), b(3)].into()).is_ok());
        assert!(shared.ready(&[b(1), b(2), b(3)].into()).is_err());
    }
}
