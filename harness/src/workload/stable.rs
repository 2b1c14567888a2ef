//! A client's look at a partition's last stable offset and high watermark
//! (the history's `stable-offsets` op, history/stable_op.rs): the run's end
//! takes these in a transactional run (run/stable.rs).

use crate::history::{Body, Op, OpType, StableOffsets, WriteError};
use crate::node::NodeId;
use crate::topic_partition::PartitionRef;

use super::client::RecordingClient;

impl RecordingClient {
    /// Asks `node`, the partition's leader, for the partition's last stable
    /// offset and high watermark, and records the op. A look changes
    /// nothing: a failed one is definite.
    pub async fn stable_offsets(
        &mut self,
        partition: &PartitionRef,
        node: Option<NodeId>,
    ) -> Result<Op, WriteError> {
        let mut look = StableOffsets::new(partition.clone(), node);
        let process = self.invoke(Body::StableOffsets(look.clone()))?;
        let Some(node) = node else {
            return self.complete(
                process,
                OpType::Fail,
                Body::StableOffsets(look),
                Some("no leader to ask".into()),
            );
        };
        let deadline = self.shared.request_timeout;
        let result = match self.connection(node, deadline).await {
            Ok(client) => {
                client
                    .stable_offsets(&partition.topic, partition.wire_partition(), deadline)
                    .await
            }
            Err(e) => Err(e),
        };
        match result {
            Ok((lso, hw)) => {
                look.last_stable_offset = Some(lso);
                look.high_watermark = Some(hw);
                self.complete(process, OpType::Ok, Body::StableOffsets(look), None)
            }
            Err(e) => {
                self.connections.remove(&node);
                self.complete(
                    process,
                    OpType::Fail,
                    Body::StableOffsets(look),
                    Some(e.to_string()),
                )
            }
        }
    }
}
