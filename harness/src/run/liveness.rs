//! The liveness window (`[workload] liveness_ms`): after the final heal, with
//! every node up and every cut removed, each partition must take a write
//! again — one send with acks=all acknowledged — within the bound. Kafka
//! promises availability once a partition's replicas are back; a partition
//! that never elects a leader, or whose leader never acknowledges (a follower
//! looping on truncation, an ISR that never re-forms), is a bug the safety
//! checkers cannot see, because no write is lost when none is taken.
//!
//! Each attempt is an ordinary send in the history (the lost-write checker
//! holds an acknowledged probe to account like any write), on its own process,
//! with values from [`FIRST_PROBE_VALUE`]. Attempts go round the partitions
//! still waiting, each to the leader etcd names at that moment, until each
//! has one acknowledged or the window closes. The stuck partitions go to
//! `run.json`, and `run/check.rs` makes each a `stuck-partition` anomaly.
//!
//! A run whose clients use consumer groups holds the group coordinators to
//! the same promise ([`probe_groups`]): once the partitions answered, a
//! commit for the probe's own group ([`PROBE_GROUP`]) must be taken and read
//! back within a window of the same length, on a partition that took the
//! probe's write: a commit for a partition the cluster no longer holds (a
//! topic the system lost) is refused by a coordinator that serves, so with
//! every partition stuck the group is not judged, the partitions are the
//! finding. A group that never forms — the
//! offsets topic never made, its coordinator never elected or never done
//! loading — loses no write and breaks no offset, so only this can tell.
//! The probe's commit and read are not in the history: its group is no
//! workload's, and no checker judges it. A stuck group goes to `run.json`
//! and becomes a `stuck-group` anomaly.
//!
//! A run with the topic-lives workload holds topic deletion to it too
//! ([`probe_lives`]): its topic is deleted, created again and read within a
//! window of the same length (workload/lives.rs; these ops are in the
//! history, and the `topic-lives` checker reads the new life like any). A
//! step that never succeeds — a deletion that never completes, a name that
//! cannot be taken again, a new life with no leader — goes to `run.json`
//! and becomes a `stuck-topic` anomaly.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use crate::history::OpType;
use crate::run_dir::{Stuck, StuckGroup, StuckTopic};
use crate::runtime::Runtime;
use crate::schedule::{Acks, Compression, PartitionRef, Schedule};
use crate::workload::send_options::SendOptions;

use super::RunError;
use super::live::Live;

/// Probe values start here: above scripted values, below the background
/// producers' [`crate::schedule::Background::FIRST_VALUE`].
pub const FIRST_PROBE_VALUE: i64 = 900_000;
/// The scripted worker the probes are sent by.
const PROBE_WORKER: u64 = u64::MAX;
/// Pause between two rounds in which no partition was answered, so a cluster
/// with no leader yet is not asked hundreds of times a second.
const RETRY: Duration = Duration::from_millis(100);

/// Probes every partition until each acknowledges a write or `window`
/// passes; the partitions that did not, with the last answer each got.
pub(super) async fn probe<R: Runtime>(
    live: &mut Live<R>,
    schedule: &Schedule,
    window: Duration,
) -> Result<Vec<Stuck>, RunError> {
    let started = Instant::now();
    let deadline = started + window;
    let mut waiting: BTreeSet<PartitionRef> = schedule.cluster.partitions().collect();
    let mut last: std::collections::BTreeMap<PartitionRef, String> = Default::default();
    let options = SendOptions {
        acks: Acks::All,
        records_per_batch: 1,
        compression: Compression::None,
        key: None,
        value_bytes: None,
    };
    let mut value = FIRST_PROBE_VALUE;
    live.log.line(format!(
        "liveness: every partition must acknowledge a write within {} ms",
        window.as_millis()
    ));
    while !waiting.is_empty() && Instant::now() < deadline {
        let mut answered = false;
        for partition in waiting.clone() {
            let leader = live.view().await?.leader_of(&partition);
            let client = live.scripted_client(PROBE_WORKER);
            let op = client
                .send(&partition, vec![value], leader, options.clone())
                .await?;
            value += 1;
            // An ack that comes after the window closed is too late.
            if op.kind == OpType::Ok && Instant::now() <= deadline {
                live.log.line(format!(
                    "liveness: {partition} acknowledged a write after {} ms",
                    started.elapsed().as_millis()
                ));
                waiting.remove(&partition);
                answered = true;
            } else {
                let why = match op.error {
                    Some(e) => e,
                    None if op.kind == OpType::Ok => "acknowledged after the window closed".into(),
                    None => format!("{:?}", op.kind),
                };
                last.insert(partition, why);
            }
            if Instant::now() >= deadline {
                break;
            }
        }
        if !answered && !waiting.is_empty() {
            tokio::time::sleep(RETRY.min(deadline.saturating_duration_since(Instant::now()))).await;
        }
    }
    let stuck: Vec<Stuck> = waiting
        .into_iter()
        .map(|partition| Stuck {
            last_error: last.remove(&partition),
            partition,
            window_ms: window.as_millis() as u64,
        })
        .collect();
    for s in &stuck {
        live.log.line(format!(
            "liveness: {} acknowledged no write within {} ms (last: {})",
            s.partition,
            s.window_ms,
            s.last_error.as_deref().unwrap_or("no attempt")
        ));
    }
    Ok(stuck)
}

/// The group the liveness window commits for: no workload's group, so its
/// commits change no offset a checker judges.
pub const PROBE_GROUP: &str = "epochal-liveness";

/// In a run whose clients use groups, commits offset 0 of the first
/// partition that took the probe's write ([`group_probe_partition`]; `stuck`
/// are those that did not) for [`PROBE_GROUP`] and reads it back, asking
/// each node in turn for the coordinator, until one round trip succeeds or
/// `window` passes; the group, with the last answer, when none did.
pub(super) async fn probe_groups<R: Runtime>(
    live: &mut Live<R>,
    schedule: &Schedule,
    window: Duration,
    stuck: &[Stuck],
) -> Result<Vec<StuckGroup>, RunError> {
    if !schedule.uses_groups() {
        return Ok(Vec::new());
    }
    let Some(partition) = group_probe_partition(schedule.cluster.partitions(), stuck) else {
        if !stuck.is_empty() {
            live.log.line(format!(
                "liveness: group {PROBE_GROUP} not probed: no partition took a write to commit for"
            ));
        }
        return Ok(Vec::new());
    };
    let started = Instant::now();
    let deadline = tokio::time::Instant::now() + window;
    let nodes = schedule.nodes();
    live.log.line(format!(
        "liveness: group {PROBE_GROUP} must take a commit within {} ms",
        window.as_millis()
    ));
    let mut last = None;
    for attempt in 0.. {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            break;
        }
        let first = nodes[attempt % nodes.len()];
        let client = live.scripted_client(PROBE_WORKER);
        match client
            .commit_round_trip(PROBE_GROUP, &partition, 0, first, deadline)
            .await
        {
            Ok(()) => {
                live.log.line(format!(
                    "liveness: group {PROBE_GROUP} took a commit after {} ms",
                    started.elapsed().as_millis()
                ));
                return Ok(Vec::new());
            }
            // An attempt the window's own end cut short (its request's
            // deadline is the window's) says nothing about the cluster: the
            // answer before it is the evidence. Under load the last attempt
            // can start with a millisecond left and end "no answer within
            // 1 ms", which once stood in for CoordinatorNotAvailable.
            Err(e) if last.is_some() && tokio::time::Instant::now() >= deadline => {
                live.log.line(format!(
                    "liveness: last attempt cut short by the window: {e}"
                ));
            }
            Err(e) => last = Some(e.to_string()),
        }
        tokio::time::sleep(
            RETRY.min(deadline.saturating_duration_since(tokio::time::Instant::now())),
        )
        .await;
    }
    let stuck = StuckGroup {
        group: PROBE_GROUP.to_owned(),
        window_ms: window.as_millis() as u64,
        last_error: last,
    };
    live.log.line(format!(
        "liveness: group {} took no commit within {} ms (last: {})",
        stuck.group,
        stuck.window_ms,
        stuck.last_error.as_deref().unwrap_or("no attempt")
    ));
    Ok(vec![stuck])
}

/// In a run with the topic-lives workload, deletes its topic, creates it
/// again and reads the new life, each step retried until it succeeds,
/// all within `window`; the topic and the step that never did, if one
/// did not.
pub(super) async fn probe_lives<R: Runtime>(
    live: &mut Live<R>,
    schedule: &Schedule,
    window: Duration,
) -> Result<Vec<StuckTopic>, RunError> {
    if !schedule
        .workload
        .background
        .as_ref()
        .is_some_and(|b| b.lives)
    {
        return Ok(Vec::new());
    }
    let topic = crate::workload::lives::TOPIC;
    live.log.line(format!(
        "liveness: topic {topic} must be deleted, created and read within {} ms",
        window.as_millis()
    ));
    let started = Instant::now();
    let client = live.clients.client("epochal-lives");
    let nodes = schedule.nodes().len();
    let Some(stuck) = crate::workload::lives::probe(client, nodes, window).await? else {
        live.log.line(format!(
            "liveness: topic {topic} deleted, created and read after {} ms",
            started.elapsed().as_millis()
        ));
        return Ok(Vec::new());
    };
    let stuck = StuckTopic {
        topic: topic.to_owned(),
        step: stuck.step.f().to_owned(),
        window_ms: window.as_millis() as u64,
        last_error: stuck.last_error,
    };
    live.log.line(format!(
        "liveness: topic {} never passed {} within {} ms (last: {})",
        stuck.topic,
        stuck.step,
        stuck.window_ms,
        stuck.last_error.as_deref().unwrap_or("no answer")
    ));
    Ok(vec![stuck])
}

/// The partition the group probe commits for: the first of the schedule's
/// that took the partition probe's write. A commit names a partition, and a
/// coordinator answers UNKNOWN_TOPIC_OR_PARTITION for one the cluster does
/// not hold (Kafka's OffsetCommit does), so a partition the system lost —
/// its topic gone after a crash — would make a coordinator that serves look
/// stuck. None when every partition is stuck: those are the finding, and the
/// group is not judged.
fn group_probe_partition(
    partitions: impl IntoIterator<Item = PartitionRef>,
    stuck: &[Stuck],
) -> Option<PartitionRef> {
    partitions
        .into_iter()
        .find(|p| !stuck.iter().any(|s| s.partition == *p))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stuck(partition: u32) -> Stuck {
        Stuck {
            partition: PartitionRef::new("t", partition),
            window_ms: 30_000,
            last_error: Some("no leader to send to".to_owned()),
        }
    }

    fn partitions() -> Vec<PartitionRef> {
        (0..3).map(|p| PartitionRef::new("t", p)).collect()
    }

    #[test]
    fn the_group_probe_commits_for_a_partition_that_took_a_write() {
        assert_eq!(
            group_probe_partition(partitions(), &[]),
            Some(PartitionRef::new("t", 0))
        );
        assert_eq!(
            group_probe_partition(partitions(), &[stuck(0)]),
            Some(PartitionRef::new("t", 1))
        );
    }

    #[test]
    fn with_every_partition_stuck_the_group_is_not_probed() {
        // A system that lost the topic answers a commit for it
        // UNKNOWN_TOPIC_OR_PARTITION, as Kafka does, from a coordinator
        // that serves: the stuck partitions are the finding, not the group.
        assert_eq!(
            group_probe_partition(partitions(), &[stuck(0), stuck(1), stuck(2)]),
            None
        );
    }
}
