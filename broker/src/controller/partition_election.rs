//! Partition leader election: given a partition's stored state, its replicas
//! (preferred first) and the brokers that are live, what the controller writes
//! next, if anything. Pure functions, so the rules are unit-tested apart from
//! etcd.
//!
//! The rules are ZooKeeper-era Kafka's: a leader that is gone is replaced by the
//! first live replica of the ISR in assignment order (with unclean election, by
//! any live replica when no ISR member is left); gone replicas leave the ISR, but
//! the ISR is never emptied — its last member stays so that it can be elected
//! cleanly when it returns; every change raises the leader epoch by exactly one
//! (ZooKeeper-era Kafka sometimes raised it by two).

use std::collections::{BTreeMap, BTreeSet};

use super::metadata_store::{BrokerRegistration, PartitionStateRecord, Versioned};
use crate::failpoints::{self, Failpoint};

/// Kafka's `LeaderAndIsr.NoLeader`.
pub const NO_LEADER: i32 = -1;

/// The state after brokers came or went, or None when nothing changes.
pub fn reelect(
    current: &PartitionStateRecord,
    replicas: &[i32],
    live: &BTreeSet<i32>,
    unclean: bool,
    controller_epoch: i32,
) -> Option<PartitionStateRecord> {
    let live_isr: Vec<i32> = current
        .isr
        .iter()
        .copied()
        .filter(|r| live.contains(r))
        .collect();
    let leader_live = current.leader != NO_LEADER && live.contains(&current.leader);
    let (leader, isr) = if leader_live {
        (current.leader, live_isr)
    } else if let Some(&leader) = replicas.iter().find(|r| live.contains(r))
        && !live_isr.contains(&leader)
        && failpoints::hit_or_return(Failpoint::ControllerElectionIgnoresIsr)
    {
        // The slip the failpoint puts in: the ISR filter forgotten.
        (leader, std::iter::once(leader).chain(live_isr).collect())
    } else if let Some(&leader) = replicas.iter().find(|r| live_isr.contains(r)) {
        (leader, live_isr)
    } else if let Some(&leader) = replicas.iter().find(|r| unclean && live.contains(r)) {
        // Unclean election: acknowledged writes may be lost, by choice.
        (leader, vec![leader])
    } else {
        (NO_LEADER, last_member(current))
    };
    changed(current, leader, isr, controller_epoch)
}

/// A broker restarted within its lease (KAFKA-1120's re-registration): the
/// process that held the ISR memberships is gone, and its successor may hold
/// less — after a power loss, nothing at all that was not flushed.
///
/// With `broker_epoch_fencing` (KIP-380, Kafka 2.2: the controller compares
/// the broker epoch of each registration, and a bounced broker goes through
/// `onBrokerFailure` then `onBrokerStartup`, its replicas taken offline and
/// removed from every ISR), the broker leaves the ISR of every partition it
/// was in, never emptying one, and a partition it led elects the first other
/// live ISR member in assignment order — or, with none live, has no leader
/// until one returns, as Kafka's `removeReplicasFromIsr` (leader set to
/// none, the bounced replica out of an ISR of several) followed by its
/// offline-partition election leaves it; it rejoins each ISR only once it
/// has caught up. It leads again at once only as the ISR's sole member.
/// Without it (this broker's behaviour before KIP-380), it keeps its ISR
/// memberships and only leadership moves on, back to it if no other ISR
/// member is live, so a restarted replica that lost data on disk stays
/// electable: the next leader failure can elect it with a log shorter than
/// what was acknowledged.
///
/// Either way a leader that restarted lost its in-memory state, so its
/// partitions move to a new epoch (KIP-101's returning leaders).
///
/// Keeping a bounced leader that was not the ISR's sole member leading when
/// no other member was live was this broker's own slip, found by the
/// campaign's targeted sequences (suites/found/current-sequences-seed-40):
/// the leader paused, a follower power-lost and restarted inside its
/// session, the last member paused; the restarted replica took over as
/// controller, saw its own bounce, and kept t-1's leadership with its cut
/// log, and the resumed members truncated to it.
pub fn restarted(
    current: &PartitionStateRecord,
    replicas: &[i32],
    live: &BTreeSet<i32>,
    broker: i32,
    broker_epoch_fencing: bool,
    controller_epoch: i32,
) -> Option<PartitionStateRecord> {
    let led = current.leader == broker;
    let member = current.isr.contains(&broker);
    let others: Vec<i32> = current
        .isr
        .iter()
        .copied()
        .filter(|r| *r != broker)
        .collect();
    // With broker epochs a member leaves the ISR unless it is the only one.
    let leaves = broker_epoch_fencing && member && !others.is_empty();
    let leader = if led {
        let live_other = replicas
            .iter()
            .copied()
            .find(|r| *r != broker && live.contains(r) && others.contains(r));
        match live_other {
            Some(other) => other,
            // Out of the ISR: not electable until it catches up again.
            None if leaves => NO_LEADER,
            None => broker,
        }
    } else {
        current.leader
    };
    let isr = if leaves { others } else { current.isr.clone() };
    // A leader that restarted moves on in a new epoch even when it stays
    // leader (no other ISR member live): its in-memory state is gone.
    if !led && isr == current.isr {
        return None;
    }
    Some(next_epoch(current, leader, isr, controller_epoch))
}

/// The brokers a controller taking over must treat as restarted while no
/// controller watched (say the restarted broker was the controller), as
/// (partition, broker) pairs in the order their registrations were written —
/// the order a watching controller would have handled them in.
///
/// With broker epochs (KIP-380), any ISR member whose registration was
/// written after the partition state naming it: put again within its lease
/// (a bounce) or created anew (its key gone with a clean stop's revoked lease
/// or a lapsed one, then registered again). Either way it has a new broker
/// epoch, and the ISR membership etcd holds belongs to the run before: a
/// watching controller would have taken it out of the ISR when its key went
/// (`reelect`) or when it was put again (`restarted`). Kafka's KRaft
/// controller never misses it (a broker registers with the active controller,
/// which fences a new incarnation and removes it from every ISR); a
/// ZooKeeper-era controller taking over read the ISR as it stood.
///
/// Found by a campaign on the fixed settings
/// (suites/found/lost-acks-unseen-stop): the controller b2 crashed and came
/// back, stopped cleanly, had its log cut and came back again, all before its
/// old session lapsed; taking over, it saw b1's bounce (a put-again key) but
/// not its own return (a key created anew), took b1 out of t-2's ISR [1, 2],
/// kept itself and led with the cut log, and b1 truncated acknowledged
/// writes to it. Handled in registration order, b2 leaves first and b1, the
/// ISR's last member, stays and leads with the writes.
///
/// A key created anew counts only for a member of an ISR of several (the
/// sole member of an ISR stays and leads again either way, as it did before:
/// bumping its epoch here would change no decision). Without broker epochs
/// (KAFKA-1120's era), only a partition's leader whose key was put again
/// counts, and `restarted` moves only its leadership.
pub fn restarted_unseen(
    states: &BTreeMap<(String, i32), Versioned<PartitionStateRecord>>,
    brokers: &BTreeMap<i32, Versioned<BrokerRegistration>>,
    broker_epoch_fencing: bool,
) -> Vec<((String, i32), i32)> {
    let mut restarted = Vec::new();
    for (key, state) in states {
        let named = if broker_epoch_fencing {
            state.value.isr.clone()
        } else {
            vec![state.value.leader]
        };
        for broker in named {
            let Some(reg) = brokers.get(&broker) else {
                continue;
            };
            let since = reg.mod_revision > state.mod_revision;
            let put_again = reg.version > 1;
            // A key created anew matters where its broker would leave an ISR
            // of several, and where it leads: a watching controller would
            // have taken the partition offline when the key went and elected
            // it again on its return, in a new epoch either way, so its new
            // run never appends in the epoch its old run led (two runs
            // writing one leader epoch, suites/found/current-seed-304-epoch-
            // reused). A sole member that does not lead is left as it was:
            // its return elects it in a new epoch as it is.
            let created_anew = broker_epoch_fencing
                && !put_again
                && (state.value.isr.len() > 1 || state.value.leader == broker);
            let again = since && (put_again || created_anew);
            if again {
                restarted.push((reg.mod_revision, key.clone(), broker));
            }
        }
    }
    // Stable: one broker's partitions keep their order.
    restarted.sort_by_key(|(revision, ..)| *revision);
    restarted
        .into_iter()
        .map(|(_, key, broker)| (key, broker))
        .collect()
}

/// The ISR when no member is live: Kafka drops members one at a time and never
/// the last, so the last leader (or the first member) stays.
fn last_member(current: &PartitionStateRecord) -> Vec<i32> {
    if current.isr.contains(&current.leader) {
        vec![current.leader]
    } else {
        current.isr.iter().copied().take(1).collect()
    }
}

/// The next state if the leader or the ISR changed, else None.
fn changed(
    current: &PartitionStateRecord,
    leader: i32,
    isr: Vec<i32>,
    controller_epoch: i32,
) -> Option<PartitionStateRecord> {
    if leader == current.leader && isr == current.isr {
        return None;
    }
    Some(next_epoch(current, leader, isr, controller_epoch))
}

/// `leader` and `isr` in the next leader epoch: every change raises it by
/// exactly one.
fn next_epoch(
    current: &PartitionStateRecord,
    leader: i32,
    isr: Vec<i32>,
    controller_epoch: i32,
) -> PartitionStateRecord {
    PartitionStateRecord {
        leader,
        leader_epoch: current.leader_epoch + 1,
        isr,
        controller_epoch,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(leader: i32, epoch: i32, isr: &[i32]) -> PartitionStateRecord {
        PartitionStateRecord {
            leader,
            leader_epoch: epoch,
            isr: isr.to_vec(),
            controller_epoch: 1,
        }
    }

    fn live(ids: &[i32]) -> BTreeSet<i32> {
        ids.iter().copied().collect()
    }

    #[test]
    fn a_lost_leader_is_replaced_from_the_isr_in_assignment_order_with_epoch_plus_one() {
        let s = state(1, 4, &[1, 3, 2]);
        let next = reelect(&s, &[1, 2, 3], &live(&[2, 3]), false, 7).unwrap();
        assert_eq!(
            next,
            PartitionStateRecord {
                leader: 2,
                leader_epoch: 5,
                isr: vec![3, 2],
                controller_epoch: 7,
            }
        );
    }

    #[test]
    fn a_lost_follower_leaves_the_isr_and_nothing_changes_when_all_are_live() {
        let s = state(1, 0, &[1, 2, 3]);
        let next = reelect(&s, &[1, 2, 3], &live(&[1, 2]), false, 1).unwrap();
        assert_eq!(
            (next.leader, next.leader_epoch, next.isr),
            (1, 1, vec![1, 2])
        );
        assert_eq!(reelect(&s, &[1, 2, 3], &live(&[1, 2, 3]), false, 1), None);
    }

    #[test]
    fn without_a_live_isr_member_the_partition_goes_offline_unless_unclean() {
        let s = state(1, 2, &[1]);
        let offline = reelect(&s, &[1, 2], &live(&[2]), false, 1).unwrap();
        assert_eq!(
            (offline.leader, offline.leader_epoch, offline.isr.clone()),
            (NO_LEADER, 3, vec![1])
        );
        assert_eq!(
            reelect(&offline, &[1, 2], &live(&[2]), false, 1),
            None,
            "stays offline"
        );
        let unclean = reelect(&s, &[1, 2], &live(&[2]), true, 1).unwrap();
        assert_eq!((unclean.leader, unclean.isr), (2, vec![2]));
        // The last ISR member returns: elected cleanly.
        let back = reelect(&offline, &[1, 2], &live(&[1, 2]), false, 1).unwrap();
        assert_eq!((back.leader, back.leader_epoch, back.isr), (1, 4, vec![1]));
    }

    fn versioned<T>(
        value: T,
        create_revision: i64,
        mod_revision: i64,
        version: i64,
    ) -> Versioned<T> {
        Versioned {
            value,
            create_revision,
            mod_revision,
            version,
        }
    }

    fn registration(
        id: i32,
        create_revision: i64,
        mod_revision: i64,
        version: i64,
    ) -> (i32, Versioned<BrokerRegistration>) {
        let reg = BrokerRegistration {
            id,
            host: "127.0.0.1".into(),
            port: 9092,
            incarnation: mod_revision as u64,
        };
        (id, versioned(reg, create_revision, mod_revision, version))
    }

    type States = BTreeMap<(String, i32), Versioned<PartitionStateRecord>>;
    type Brokers = BTreeMap<i32, Versioned<BrokerRegistration>>;

    /// suites/found/lost-acks-unseen-stop: t-2's state [1, 2] (led by b1)
    /// written at revision 50; no controller watched while b2 stopped cleanly
    /// (its key gone) and registered anew at 60, and b1 bounced (its key put
    /// again) at 70.
    fn unseen_returns() -> (States, Brokers) {
        let states = BTreeMap::from([(
            ("t".to_string(), 2),
            versioned(state(1, 4, &[1, 2]), 10, 50, 5),
        )]);
        let brokers = BTreeMap::from([
            registration(1, 40, 70, 2),
            registration(2, 60, 60, 1),
            registration(3, 30, 30, 1),
        ]);
        (states, brokers)
    }

    #[test]
    fn a_takeover_counts_a_key_created_anew_as_a_restart_in_registration_order() {
        let (states, brokers) = unseen_returns();
        let key = ("t".to_string(), 2);
        let found = restarted_unseen(&states, &brokers, true);
        assert_eq!(
            found,
            vec![(key.clone(), 2), (key, 1)],
            "b2 registered first"
        );
        // Applied in that order, b2 (whose log may be cut) leaves and b1,
        // the last member, stays and leads: the writes it holds survive.
        let live = live(&[1, 2, 3]);
        let s = &states[&("t".to_string(), 2)].value;
        let after_b2 = restarted(s, &[1, 2, 3], &live, 2, true, 3).unwrap();
        assert_eq!((after_b2.leader, after_b2.isr.clone()), (1, vec![1]));
        let after_b1 = restarted(&after_b2, &[1, 2, 3], &live, 1, true, 3).unwrap();
        assert_eq!((after_b1.leader, after_b1.isr), (1, vec![1]));
        // A registration older than the state is not a return.
        let mut older = brokers.clone();
        older.insert(2, registration(2, 45, 45, 1).1);
        older.insert(1, registration(1, 40, 40, 1).1);
        assert!(restarted_unseen(&states, &older, true).is_empty());
        // The sole member of an ISR registered anew that leads it stays
        // leader in a new epoch; one that does not lead is left as it was.
        let mut sole = states.clone();
        sole.insert(
            ("t".to_string(), 2),
            versioned(state(2, 4, &[2]), 10, 50, 5),
        );
        let key = ("t".to_string(), 2);
        assert_eq!(
            restarted_unseen(&sole, &brokers, true),
            vec![(key.clone(), 2)]
        );
        let led = &sole[&key].value;
        let next = restarted(led, &[1, 2, 3], &live, 2, true, 3).unwrap();
        assert_eq!((next.leader, next.leader_epoch, next.isr), (2, 5, vec![2]));
        sole.insert(key, versioned(state(-1, 4, &[2]), 10, 50, 5));
        assert!(restarted_unseen(&sole, &brokers, true).is_empty());
    }

    #[test]
    fn without_broker_epochs_a_takeover_counts_only_a_leader_put_again() {
        let (states, brokers) = unseen_returns();
        assert_eq!(
            restarted_unseen(&states, &brokers, false),
            vec![(("t".to_string(), 2), 1)],
            "b2's key created anew is not seen, as before KIP-380"
        );
    }

    #[test]
    fn a_restarted_leader_hands_over_and_keeps_its_isr_membership_without_broker_epochs() {
        let s = state(1, 3, &[1, 2]);
        let next = restarted(&s, &[1, 2], &live(&[1, 2]), 1, false, 1).unwrap();
        assert_eq!(
            (next.leader, next.leader_epoch, next.isr),
            (2, 4, vec![1, 2])
        );
        let alone = restarted(&state(1, 3, &[1]), &[1, 2], &live(&[1, 2]), 1, false, 1).unwrap();
        assert_eq!((alone.leader, alone.leader_epoch), (1, 4));
        assert_eq!(
            restarted(&s, &[1, 2], &live(&[1, 2]), 2, false, 1),
            None,
            "a follower restarting changes nothing"
        );
    }

    #[test]
    fn with_broker_epochs_a_restarted_replica_leaves_the_isr_but_never_empties_it() {
        // KIP-380: a bounced leader hands over and leaves the ISR.
        let s = state(1, 3, &[1, 2, 3]);
        let next = restarted(&s, &[1, 2, 3], &live(&[1, 2, 3]), 1, true, 1).unwrap();
        assert_eq!(
            (next.leader, next.leader_epoch, next.isr),
            (2, 4, vec![2, 3])
        );
        // A bounced follower leaves the ISR too; the leader stays.
        let next = restarted(&s, &[1, 2, 3], &live(&[1, 2, 3]), 3, true, 1).unwrap();
        assert_eq!(
            (next.leader, next.leader_epoch, next.isr),
            (1, 4, vec![1, 2])
        );
        // The only member stays, and leads again.
        let alone = restarted(&state(1, 3, &[1]), &[1, 2], &live(&[1, 2]), 1, true, 1).unwrap();
        assert_eq!((alone.leader, alone.isr), (1, vec![1]));
        // With no other member live, the bounced leader leaves the ISR all
        // the same, and the partition has no leader until a member returns
        // (suites/found/current-sequences-seed-40: electing it lost what it
        // had lost on disk).
        let others_dead = restarted(&s, &[1, 2, 3], &live(&[1]), 1, true, 1).unwrap();
        assert_eq!(
            (
                others_dead.leader,
                others_dead.leader_epoch,
                others_dead.isr.clone()
            ),
            (NO_LEADER, 4, vec![2, 3])
        );
        // The member that returns first is elected cleanly.
        let back = reelect(&others_dead, &[1, 2, 3], &live(&[1, 3]), false, 1).unwrap();
        assert_eq!((back.leader, back.isr), (3, vec![3]));
        // A broker outside the ISR that is not leader changes nothing.
        assert_eq!(
            restarted(
                &state(1, 3, &[1, 2]),
                &[1, 2, 3],
                &live(&[1, 2, 3]),
                3,
                true,
                1
            ),
            None
        );
    }
}
