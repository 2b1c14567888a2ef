//! The controller's view of the cluster (Kafka's `ControllerContext`): the
//! live brokers, the topics' assignments and each partition's state, as the
//! controller last wrote or read them.

use std::collections::{BTreeMap, BTreeSet};

use super::metadata_store::{
    BrokerRegistration, Overrides, PartitionStateRecord, TopicAssignment, Versioned,
};
use crate::topic_config::UNCLEAN_LEADER_ELECTION;

/// A partition: (topic, partition index).
pub(super) type PartitionKey = (String, i32);

/// The controller's view of the cluster (Kafka's ControllerContext).
#[derive(Default, Debug)]
pub(super) struct ControllerContext {
    pub(super) brokers: BTreeMap<i32, Versioned<BrokerRegistration>>,
    pub(super) topics: BTreeMap<String, TopicAssignment>,
    pub(super) states: BTreeMap<(String, i32), Versioned<PartitionStateRecord>>,
    /// Topics' config overrides, for the per-topic unclean election.
    pub(super) topic_configs: BTreeMap<String, Overrides>,
    /// Topics being deleted (`topics.rs`).
    pub(super) deletions: BTreeMap<String, Deletion>,
}

/// A topic being deleted: its partitions, and the replicas that have not
/// yet said their log is gone.
#[derive(Debug)]
pub(super) struct Deletion {
    pub(super) partitions: Vec<i32>,
    pub(super) waiting: BTreeSet<i32>,
}

impl ControllerContext {
    /// Takes a partition state the watch delivered, unless the controller
    /// already holds that state or a later one; `true` when taken. The watch
    /// runs behind the controller's own writes: two elections of one
    /// partition in a row (a broker lost, then another) are written before
    /// the first one's event arrives, and taking that event would put the
    /// older state back. The controller then told brokers that registered
    /// next the older leader (found by campaign seed 2 under ci/stress.sh: a
    /// restarted broker made leader of epoch 9 while etcd and the real
    /// leader were at epoch 10, its follower truncated to it, and neither
    /// ever followed the real leader). Kafka's controller never reads its own
    /// writes back: its cache is updated as it writes, and ZooKeeper's
    /// zkVersion orders the rest.
    pub(super) fn observe_state(
        &mut self,
        key: PartitionKey,
        state: Versioned<PartitionStateRecord>,
    ) -> bool {
        // A topic the controller holds no assignment of is being deleted
        // (or was): its partitions' states are not taken back. At a takeover
        // the controller elected every partition, the topics marked for
        // deletion included, and began their deletion (which forgets their
        // states) before the watch delivered those elections; taking them
        // then kept a deleted partition's state after its keys were gone, and
        // when the name was created again its partition was never elected
        // (`elect_missing` skips a partition whose state it holds).
        // Found by a mutation run's topic-lives campaign
        // (suites/found/current-lives-no-leader-after-deletion).
        if !self.topics.contains_key(&key.0) {
            return false;
        }
        let held = self.states.get(&key).map(|v| v.mod_revision);
        if held.is_some_and(|held| held >= state.mod_revision) {
            return false;
        }
        self.states.insert(key, state);
        true
    }

    /// Whether `topic` may elect a replica outside its ISR: its
    /// `unclean.leader.election.enable`, else the broker's setting.
    pub(super) fn unclean(&self, topic: &str, default: bool) -> bool {
        self.topic_configs
            .get(topic)
            .and_then(|c| c.get(UNCLEAN_LEADER_ELECTION))
            .map_or(default, |v| v.trim().eq_ignore_ascii_case("true"))
    }

    /// The broker epoch (KIP-380) a control request to `broker` names: the
    /// revision of its registration's latest put (one per run, see
    /// `MetadataStore::register_broker`), -1 for a broker not registered.
    pub(super) fn broker_epoch(&self, broker: i32) -> i64 {
        self.brokers.get(&broker).map_or(-1, |b| b.mod_revision)
    }

    pub(super) fn replicas(&self, topic: &str, partition: i32) -> &[i32] {
        self.topics
            .get(topic)
            .and_then(|t| t.partitions.get(&partition))
            .map_or(&[], |r| r.as_slice())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(
        leader: i32,
        leader_epoch: i32,
        isr: &[i32],
        mod_revision: i64,
    ) -> Versioned<PartitionStateRecord> {
        Versioned {
            value: PartitionStateRecord {
                leader,
                leader_epoch,
                isr: isr.to_vec(),
                controller_epoch: 3,
            },
            create_revision: 8,
            mod_revision,
            version: mod_revision - 7,
        }
    }

    /// Campaign seed 2's order of events: the controller writes t-0's
    /// epoch 9 (revision 83) and epoch 10 (88) before the watch delivers 83.
    #[test]
    fn a_watched_state_older_than_the_one_held_is_not_taken() {
        let key: PartitionKey = ("t".into(), 0);
        let mut ctx = ControllerContext::default();
        ctx.topics.insert("t".into(), TopicAssignment::default());
        ctx.states.insert(key.clone(), state(3, 10, &[3], 88));
        // The controller's own earlier write, arriving late.
        assert!(!ctx.observe_state(key.clone(), state(1, 9, &[1, 3], 83)));
        // Its own latest write, arriving: already held.
        assert!(!ctx.observe_state(key.clone(), state(3, 10, &[3], 88)));
        assert_eq!(ctx.states[&key].value.leader_epoch, 10);
        assert_eq!(ctx.states[&key].mod_revision, 88);
        // A leader's later ISR change is taken.
        assert!(ctx.observe_state(key.clone(), state(3, 10, &[3, 2], 90)));
        assert_eq!(ctx.states[&key].value.isr, vec![3, 2]);
        // A partition not held yet is taken.
        let other: PartitionKey = ("t".into(), 1);
        assert!(ctx.observe_state(other.clone(), state(2, 4, &[2], 12)));
        assert_eq!(ctx.states[&other].value.leader, 2);
    }

    /// The mutation run's topic-lives campaign: the controller took over
    /// with topic `lives` marked for deletion, elected its partition
    /// (revision 399) and began the deletion before the watch delivered
    /// that election; the state must not come back.
    #[test]
    fn a_watched_state_of_a_topic_being_deleted_is_not_taken() {
        let key: PartitionKey = ("lives".into(), 0);
        let mut ctx = ControllerContext::default();
        // Held by no assignment: `begin_deletion` removed it.
        assert!(!ctx.observe_state(key.clone(), state(2, 3, &[2], 399)));
        assert!(ctx.states.is_empty());
        // Created again: its partitions are taken once more.
        ctx.topics
            .insert("lives".into(), TopicAssignment::default());
        assert!(ctx.observe_state(key.clone(), state(2, 0, &[2], 420)));
    }
}
