//! OffsetsForLeaderEpoch: a follower asks the leader where one of its leader
//! epochs ended (KIP-101), and the leader answers from its epoch cache by the
//! rule of the configured `--truncation` release (KIP-101, KIP-279 or
//! KAFKA-7415). v2+ carries the asker's current leader epoch, checked as Fetch
//! checks it (KIP-320).

use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};

use crate::replica::manager::ReplicaManager;
use crate::replica::store::TopicPartition;

/// The leader's answer from its replica manager alone, which is all the
/// handler is given (tests drive two replica managers through this without a
/// server). A v0 response has no epoch field, so
/// whatever is put there is dropped on the wire: KIP-101's single offset.
pub fn answer(
    replicas: &ReplicaManager,
    req: OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let name = t.topic.0.to_string();
            let partitions = t
                .partitions
                .into_iter()
                .map(|p| {
                    let tp = TopicPartition::new(name.clone(), p.partition);
                    let base = EpochEndOffset::default().with_partition(p.partition);
                    match replicas.end_offset_for_epoch(&tp, p.current_leader_epoch, p.leader_epoch)
                    {
                        Ok(answer) => base
                            .with_leader_epoch(answer.leader_epoch)
                            .with_end_offset(answer.end_offset),
                        Err(e) => base
                            .with_error_code(e.code())
                            .with_leader_epoch(-1)
                            .with_end_offset(-1),
                    }
                })
                .collect();
            OffsetForLeaderTopicResult::default()
                .with_topic(t.topic)
                .with_partitions(partitions)
        })
        .collect();
    OffsetForLeaderEpochResponse::default().with_topics(topics)
}
