//! The final read (`[workload] final_read`, [groups]): after the final heal
//! and the quiesce, a fresh consumer assigns each partition, seeks to its
//! beginning and reads to the high watermark — one poll per partition,
//! marked `final_read` in the history. Jepsen's Kafka workload ends the same
//! way, so that an acknowledged write no consumer ever returned can be
//! called `unseen`: the consumers did not merely stop short of it.
//!
//! A poll that fails (no leader yet, a connection refused) is tried again,
//! each attempt an op of its own, until one succeeds or [`FINAL_READ_TIMEOUT`]
//! passes; a partition read by none is left out of the `unseen` rule (the
//! checker says so) and named in the harness log.

use std::time::{Duration, Instant};

use crate::history::{OpType, Poll};
use crate::runtime::Runtime;
use crate::schedule::{PartitionRef, Schedule};

use super::RunError;
use super::live::Live;

/// The worker the final reads are made by (beside the liveness probes').
const FINAL_READ_WORKER: u64 = u64::MAX - 1;
/// How long the final read of every partition may take.
const FINAL_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// Pause before a partition's next attempt.
const RETRY: Duration = Duration::from_millis(100);

/// Reads every partition of the schedule's topics from offset 0 to its high
/// watermark; the partitions that no attempt read.
pub(super) async fn read_all<R: Runtime>(
    live: &mut Live<R>,
    schedule: &Schedule,
) -> Result<Vec<PartitionRef>, RunError> {
    let deadline = Instant::now() + FINAL_READ_TIMEOUT;
    let mut unread = Vec::new();
    for topic in &schedule.cluster.topics {
        for p in 0..topic.partitions {
            let partition = PartitionRef::new(&topic.name, p);
            let mut read = None;
            while read.is_none() && Instant::now() < deadline {
                let leader = live.view().await?.leader_of(&partition);
                let mut poll = Poll::new(partition.clone(), 0, leader);
                poll.final_read = true;
                let op = live
                    .scripted_client(FINAL_READ_WORKER)
                    .poll_as(poll)
                    .await?;
                if op.kind == OpType::Ok {
                    read = op.read().map(|(_, r)| r.records.len());
                } else {
                    tokio::time::sleep(RETRY).await;
                }
            }
            match read {
                Some(records) => live.log.line(format!(
                    "final read: {partition}: {records} records from offset 0"
                )),
                None => {
                    live.log.line(format!(
                        "final read: {partition} could not be read within {FINAL_READ_TIMEOUT:?}"
                    ));
                    unread.push(partition);
                }
            }
        }
    }
    Ok(unread)
}
