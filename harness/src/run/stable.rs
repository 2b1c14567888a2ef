//! Phase 4, in a run whose clients ran transactions: after the quiesce, the
//! run waits, bounded, for every partition's last stable offset to reach its
//! high watermark — every transaction ended by a marker — and records each
//! partition's last look as a `stable-offsets` op (history/stable_op.rs).
//!
//! Why: the coordinator ends every transaction it knows of, at the latest by
//! aborting it once the transaction timeout passes (KIP-98); a transaction no
//! coordinator knows of — a produce that arrived after its transaction
//! aborted, KAFKA-14402, fixed by KIP-890 in 3.6.0 — is ended by nobody and
//! holds the last stable offset for good. A run that stopped right after its
//! workers could not tell the two apart: a transaction its producer left
//! open in the run's last seconds might yet be aborted, so the hanging
//! checker called it unknown. Waiting out the transaction timeout and the
//! coordinator's scan for timed-out transactions turns that unknown into a
//! verdict, and the recorded look says what a read_committed consumer saw
//! then.
//!
//! The wait asks each leader directly (unrecorded) until the offsets meet or
//! the bound passes; then one recorded look per partition, through the
//! clients' own connections. Systems whose brokers the harness cannot reach
//! directly answer as they can: a look that fails is recorded `fail` and
//! judged by nobody.

use std::time::{Duration, Instant};

use crate::kafka_client::KafkaClient;
use crate::observe::ClusterView;
use crate::runtime::Runtime;
use crate::schedule::{PartitionRef, Schedule};

use super::RunError;
use super::live::Live;

/// The worker the looks are recorded by (beside the final read's and the
/// liveness probes').
const STABLE_WORKER: u64 = u64::MAX - 2;
/// Kafka's `transaction.abort.timed.out.transaction.cleanup.interval.ms`
/// default (10 s): how long after a transaction's timeout its coordinator may
/// take to notice it (the reference broker looks every second).
const ABORT_SCAN: Duration = Duration::from_secs(10);
/// How often the wait looks again.
const POLL: Duration = Duration::from_millis(200);
/// Each unrecorded look's deadline.
const LOOK_TIMEOUT: Duration = Duration::from_secs(2);

/// Awaits every partition's last stable offset at its high watermark, for
/// at most the transaction timeout and the coordinator's abort scan, then
/// records each partition's last look. Nothing to do in a run without
/// transactions.
pub(super) async fn await_stable<R: Runtime>(
    live: &mut Live<R>,
    schedule: &Schedule,
) -> Result<(), RunError> {
    if !schedule.runs_transactions() {
        return Ok(());
    }
    let bound = schedule.workload.transaction_timeout() + ABORT_SCAN;
    let started = Instant::now();
    let partitions: Vec<PartitionRef> = schedule
        .cluster
        .topics
        .iter()
        .flat_map(|t| (0..t.partitions).map(|p| PartitionRef::new(&t.name, p)))
        .collect();
    let mut unstable = partitions.clone();
    while !unstable.is_empty() && started.elapsed() < bound {
        let view = live.view().await?;
        let mut still = Vec::new();
        for partition in unstable {
            if !stable(live, &view, &partition).await {
                still.push(partition);
            }
        }
        unstable = still;
        if !unstable.is_empty() {
            tokio::time::sleep(POLL).await;
        }
    }
    let waited = started.elapsed().as_millis();
    match unstable.as_slice() {
        [] => live.log.line(format!(
            "stable: every partition's last stable offset at its high watermark after {waited} ms"
        )),
        open => {
            let names: Vec<String> = open.iter().map(|p| p.to_string()).collect();
            live.log.line(format!(
                "stable: after {waited} ms (the transaction timeout and {} s of the \
                 coordinator's abort scan), a transaction still holds the last stable offset \
                 of {}",
                ABORT_SCAN.as_secs(),
                names.join(", ")
            ));
        }
    }
    let view = live.view().await?;
    for partition in &partitions {
        let leader = view.leader_of(partition);
        live.scripted_client(STABLE_WORKER)
            .stable_offsets(partition, leader)
            .await?;
    }
    Ok(())
}

/// Whether the partition's leader answers a last stable offset equal to its
/// high watermark (an unanswered look counts as not yet).
async fn stable<R: Runtime>(live: &Live<R>, view: &ClusterView, partition: &PartitionRef) -> bool {
    let Some(address) = view
        .leader_of(partition)
        .and_then(|leader| live.runtime.observe_address(leader))
    else {
        return false;
    };
    let Ok(mut client) = KafkaClient::connect(&address, "epochal-observer", LOOK_TIMEOUT).await
    else {
        return false;
    };
    client
        .stable_offsets(&partition.topic, partition.wire_partition(), LOOK_TIMEOUT)
        .await
        .is_ok_and(|(lso, hw)| lso == hw)
}
