//! The etcd timeline: from etcd's revision history of the partition-state and
//! controller keys, the authoritative sequence of (leader, leader epoch, ISR,
//! controller epoch) per partition, with revisions — evidence no broker can
//! rewrite. Test clusters run etcd with compaction off, so every revision is
//! still there when the run ends; [`read_timeline`] reads them all back with
//! one watch from revision 1. It only reads: it never writes to etcd.

use std::time::Duration;

use etcd_client::{Client, ConnectOptions, Error, EventType, WatchOptions};
use serde::{Deserialize, Serialize};

/// Everything the checkers need from etcd's history, in revision order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timeline {
    /// Every write of a partition's state key.
    pub partition_states: Vec<PartitionStateChange>,
    /// Every write or deletion of the controller key.
    pub controllers: Vec<ControllerChange>,
    /// Every write or deletion of a broker's registration key (absent from
    /// timelines stored before registrations were read).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub registrations: Vec<RegistrationChange>,
}

/// One change of `/epochal/brokers/ids/<id>`: a broker registered (a put: its
/// start, or a restart inside its lease) or gone (deleted: a clean stop, or
/// its lease lapsed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegistrationChange {
    pub revision: i64,
    pub broker_id: i32,
    pub registered: bool,
}

/// One write of `/epochal/brokers/topics/<t>/partitions/<p>/state`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionStateChange {
    pub revision: i64,
    pub topic: String,
    pub partition: u32,
    /// -1: no leader.
    pub leader: i32,
    pub leader_epoch: i32,
    pub isr: Vec<i32>,
    pub controller_epoch: i32,
}

/// One change of `/epochal/controller`: `broker_id` `None` when deleted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControllerChange {
    pub revision: i64,
    pub broker_id: Option<i32>,
    /// The controller epoch it claimed, when the value says.
    pub epoch: Option<i32>,
}

impl Timeline {
    /// Every recorded state of one partition, in revision order.
    pub fn states_of(&self, topic: &str, partition: u32) -> Vec<&PartitionStateChange> {
        self.partition_states
            .iter()
            .filter(|state| state.topic == topic && state.partition == partition)
            .collect()
    }

    /// Whether `broker`'s registration key stood, unchanged, from revision
    /// `from` through `to`: put at or before `from`, and neither deleted nor
    /// put again up to `to`. A controller that elected while it stood so had
    /// the broker as live all along, whenever it read.
    pub fn registered_throughout(&self, broker: i32, from: i64, to: i64) -> bool {
        let mut registered = false;
        for change in self.registrations.iter().filter(|c| c.broker_id == broker) {
            if change.revision <= from {
                registered = change.registered;
            } else if change.revision <= to {
                return false;
            }
        }
        registered
    }

    /// Every unclean leader election etcd recorded: a state whose leader (not
    /// -1) is not in the ISR of that partition's previous state. Kafka's
    /// documentation (`unclean.leader.election.enable`): "Indicates whether to
    /// enable replicas not in the ISR set to be elected as leader as a last
    /// resort, even though doing so may result in data loss." Only such an
    /// election may lose acknowledged acks=all writes ("Replication",
    /// "Unclean leader election: What if they all die?"). A partition's first
    /// state has no previous ISR and is never unclean here. In revision order.
    pub fn unclean_elections(&self) -> Vec<UncleanElection<'_>> {
        let mut last: std::collections::BTreeMap<(&str, u32), &PartitionStateChange> =
            Default::default();
        let mut elections = Vec::new();
        for state in &self.partition_states {
            let key = (state.topic.as_str(), state.partition);
            if let Some(previous) = last.insert(key, state)
                && state.leader != -1
                && !previous.isr.contains(&state.leader)
            {
                elections.push(UncleanElection {
                    previous,
                    elected: state,
                });
            }
        }
        elections
    }
}

#[cfg(any(test, feature = "testing"))]
impl PartitionStateChange {
    /// A state of `t-0` under controller epoch 1, for tests.
    pub fn of_t0(revision: i64, leader: i32, leader_epoch: i32, isr: &[i32]) -> Self {
        PartitionStateChange {
            revision,
            topic: "t".into(),
            partition: 0,
            leader,
            leader_epoch,
            isr: isr.to_vec(),
            controller_epoch: 1,
        }
    }
}

/// A leader elected from outside the previous ISR, with both states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UncleanElection<'a> {
    pub previous: &'a PartitionStateChange,
    pub elected: &'a PartitionStateChange,
}

const PREFIX: &str = "/epochal/";
const CONTROLLER_KEY: &str = "/epochal/controller";
const TOPICS_PREFIX: &str = "/epochal/brokers/topics/";
const REGISTRATIONS_PREFIX: &str = "/epochal/brokers/ids/";

/// How long [`read_timeline`] may take in all, connecting included.
pub const READ_TIMELINE_TIMEOUT: Duration = Duration::from_secs(30);

/// Reads the whole timeline from etcd at `endpoint`, within
/// [`READ_TIMELINE_TIMEOUT`].
pub async fn read_timeline(endpoint: &str) -> Result<Timeline, Error> {
    read_timeline_within(endpoint, READ_TIMELINE_TIMEOUT).await
}

/// Reads the whole timeline: the current revision R first, then one watch
/// over every key from revision 1, until an event at revision R or later has
/// come. Every revision after 1 is made by a write that changed at least one
/// key, so watching every key (not just `/epochal/`) guarantees an event at R
/// and the read knows when it is complete. A compacted history is an error,
/// never a partial timeline; so is a value that does not parse. Deletions of
/// partition-state keys are not recorded (topics are never deleted here).
pub async fn read_timeline_within(endpoint: &str, timeout: Duration) -> Result<Timeline, Error> {
    match tokio::time::timeout(timeout, read_all(endpoint, timeout)).await {
        Ok(result) => result,
        Err(_) => Err(Error::WatchError(format!(
            "reading etcd's history at {endpoint} took more than {timeout:?}"
        ))),
    }
}

async fn read_all(endpoint: &str, timeout: Duration) -> Result<Timeline, Error> {
    let options = ConnectOptions::new()
        .with_connect_timeout(timeout)
        .with_timeout(timeout);
    let mut client = Client::connect([endpoint], Some(options)).await?;
    let current = current_revision(&mut client).await?;
    // Revision 1 is the empty store: nothing was ever written.
    read_changes(&mut client, 1, current).await
}

/// etcd's current revision, from a count-only read.
pub async fn current_revision(client: &mut Client) -> Result<i64, Error> {
    let head = client
        .get(
            PREFIX,
            Some(etcd_client::GetOptions::new().with_count_only()),
        )
        .await?;
    head.header()
        .map(|header| header.revision())
        .ok_or_else(|| Error::WatchError("etcd's answer had no header".into()))
}

/// The changes of revisions `after + 1 ..= upto` (empty when `upto <= after`),
/// with one watch over every key from `after + 1`: every revision is made by
/// a write that changed at least one key, so an event at `upto` always comes
/// and the read knows when it is complete. A compacted history is an error.
pub async fn read_changes(client: &mut Client, after: i64, upto: i64) -> Result<Timeline, Error> {
    let mut timeline = Timeline::default();
    if upto <= after.max(1) {
        return Ok(timeline);
    }
    let mut stream = client
        .watch(
            "",
            Some(
                WatchOptions::new()
                    .with_all_keys()
                    .with_start_revision(after + 1),
            ),
        )
        .await?;
    let mut watch_id = None;
    let mut seen = after;
    while seen < upto {
        let Some(response) = stream.message().await? else {
            return Err(Error::WatchError(format!(
                "etcd ended the watch at revision {seen}, before {upto}"
            )));
        };
        watch_id.get_or_insert(response.watch_id());
        if response.canceled() || response.compact_revision() > 0 {
            return Err(Error::WatchError(format!(
                "etcd cancelled the watch from revision {} (compacted to {}): {}",
                after + 1,
                response.compact_revision(),
                response.cancel_reason()
            )));
        }
        for event in response.events() {
            let Some(kv) = event.kv() else { continue };
            let revision = kv.mod_revision();
            seen = seen.max(revision);
            if revision > upto {
                continue;
            }
            let key = String::from_utf8_lossy(kv.key());
            let deleted = event.event_type() == EventType::Delete;
            record(&mut timeline, &key, kv.value(), revision, deleted)?;
        }
    }
    if let Some(id) = watch_id {
        // Best effort: dropping the stream ends the watch in any case.
        let _ = stream.cancel(id).await;
    }
    Ok(timeline)
}

#[derive(Deserialize)]
struct StoredPartitionState {
    leader: i32,
    leader_epoch: i32,
    isr: Vec<i32>,
    controller_epoch: i32,
}

#[derive(Deserialize)]
struct StoredController {
    broker_id: i32,
    #[serde(default, alias = "controller_epoch")]
    epoch: Option<i32>,
}

fn bad_value(key: &str, revision: i64, error: serde_json::Error) -> Error {
    Error::WatchError(format!(
        "{key} at revision {revision}: unreadable value: {error}"
    ))
}

/// Adds one event to the timeline when its key is one the timeline holds.
fn record(
    timeline: &mut Timeline,
    key: &str,
    value: &[u8],
    revision: i64,
    deleted: bool,
) -> Result<(), Error> {
    if key == CONTROLLER_KEY {
        let (broker_id, epoch) = if deleted {
            (None, None)
        } else {
            let stored: StoredController =
                serde_json::from_slice(value).map_err(|e| bad_value(key, revision, e))?;
            (Some(stored.broker_id), stored.epoch)
        };
        timeline.controllers.push(ControllerChange {
            revision,
            broker_id,
            epoch,
        });
    } else if let Some(broker_id) = key
        .strip_prefix(REGISTRATIONS_PREFIX)
        .and_then(|id| id.parse().ok())
    {
        timeline.registrations.push(RegistrationChange {
            revision,
            broker_id,
            registered: !deleted,
        });
    } else if let Some((topic, partition)) = partition_state_key(key)
        && !deleted
    {
        let stored: StoredPartitionState =
            serde_json::from_slice(value).map_err(|e| bad_value(key, revision, e))?;
        timeline.partition_states.push(PartitionStateChange {
            revision,
            topic: topic.to_owned(),
            partition,
            leader: stored.leader,
            leader_epoch: stored.leader_epoch,
            isr: stored.isr,
            controller_epoch: stored.controller_epoch,
        });
    }
    Ok(())
}

/// `/epochal/brokers/topics/<topic>/partitions/<p>/state` → (topic, p).
fn partition_state_key(key: &str) -> Option<(&str, u32)> {
    let rest = key.strip_prefix(TOPICS_PREFIX)?.strip_suffix("/state")?;
    let (topic, partition) = rest.rsplit_once("/partitions/")?;
    if topic.is_empty() || topic.contains('/') {
        return None;
    }
    Some((topic, partition.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(
        revision: i64,
        partition: u32,
        leader: i32,
        epoch: i32,
        isr: &[i32],
    ) -> PartitionStateChange {
        PartitionStateChange {
            revision,
            topic: "t".into(),
            partition,
            leader,
            leader_epoch: epoch,
            isr: isr.to_vec(),
            controller_epoch: 1,
        }
    }

    #[test]
    fn partition_state_keys_parse_and_others_do_not() {
        assert_eq!(
            partition_state_key("/epochal/brokers/topics/a-b/partitions/12/state"),
            Some(("a-b", 12))
        );
        assert_eq!(partition_state_key("/epochal/brokers/topics/t"), None);
        assert_eq!(
            partition_state_key("/epochal/brokers/topics/t/partitions/x/state"),
            None
        );
        assert_eq!(partition_state_key("/epochal/brokers/ids/1"), None);
    }

    #[test]
    fn timeline_unclean_elections_are_leaders_outside_the_previous_isr() {
        let timeline = Timeline {
            partition_states: vec![
                state(2, 0, 1, 0, &[1, 2]),
                state(3, 1, 2, 0, &[2]),
                // Clean: 2 was in the ISR; an ISR shrink keeps the leader.
                state(4, 0, 2, 1, &[2]),
                // Offline, then 1 (not in [2]) elected: unclean.
                state(5, 0, -1, 2, &[2]),
                state(6, 0, 1, 3, &[1]),
                // Partition 1's first state had no previous ISR; this is clean.
                state(7, 1, 2, 0, &[2, 3]),
            ],
            controllers: vec![],
            registrations: Vec::new(),
        };
        assert_eq!(
            timeline
                .states_of("t", 0)
                .iter()
                .map(|s| s.revision)
                .collect::<Vec<_>>(),
            vec![2, 4, 5, 6]
        );
        assert!(timeline.states_of("u", 0).is_empty());
        let unclean = timeline.unclean_elections();
        assert_eq!(unclean.len(), 1, "{unclean:?}");
        assert_eq!(unclean[0].previous.revision, 5);
        assert_eq!(unclean[0].elected.revision, 6);
    }
}
