//! A read served after a disk fault had already taken the value from one
//! member of the ISR, while another member still held it — and afterwards
//! etcd named an ISR of only members that had lost it. GUARANTEES.md's lost-write rule
//! excuses such a loss (the ISR as it then stood held no copy), but
//! [`Excuses::excuses_read`]'s main rule weighs only the faults after the
//! read, so a poll invoked a moment after a power loss completed was
//! reported as a truncated read (`suites/found/current-seed-2-concurrent-power-loss`:
//! b1 lost power while b2 still served the record; b1, dead but registered,
//! was then named the ISR's only member and came back with its cut log).

use std::collections::BTreeSet;

use super::{AckedValue, Excuses, cuts_value};
use crate::node::NodeId;

impl Excuses<'_> {
    /// Whether the record `read` names (at its offset of its partition, read
    /// by the poll invoked at its history index while etcd named leader
    /// epoch `epoch`) was later lost with an ISR that held no copy, counting
    /// the disk faults that completed before the read. Two conditions: when
    /// it was read, the ISR of the read's epoch (its last state) still had a
    /// member the faults had not cut — else the record was served after every
    /// in-sync copy was gone, which no excuse covers; and in a later leader
    /// epoch etcd named an ISR whose members had all been cut (and were not
    /// back since, as [`Excuses::back`] decides).
    pub(super) fn read_before_isr_lost_it(&self, read: &AckedValue<'_>, epoch: i32) -> bool {
        let (index, partition) = (read.index, read.partition.as_ref());
        let Some(states) = self.states.get(partition) else {
            return false;
        };
        let before = self.disk_losses.partition_point(|(i, _, _)| *i <= index);
        // (revision of the cut, revision the node was back from, node).
        let mut cut: Vec<(i64, Option<i64>, NodeId)> = Vec::new();
        for &(fault, _, done) in &self.disk_losses[..before] {
            let Some(revision) = done.etcd_revision else {
                continue;
            };
            for &node in &done.nodes {
                if cuts_value(done, node, read) {
                    cut.push((revision, self.back(node, partition, fault, revision), node));
                }
            }
        }
        let Some(last_cut) = cut.iter().map(|&(revision, ..)| revision).max() else {
            return false;
        };
        let lacking_at = |moment: i64| -> BTreeSet<NodeId> {
            cut.iter()
                .filter(|&&(revision, back, _)| {
                    revision <= moment && back.is_none_or(|back| moment < back)
                })
                .map(|&(.., node)| node)
                .collect()
        };
        let isr_of = |isr: &[i32]| -> Option<Vec<NodeId>> {
            isr.iter().map(|&b| NodeId::from_broker_id(b)).collect()
        };
        // When it was read: the read's epoch's last state, with every fault
        // before the read counted.
        let Some(at_read) = states.iter().rev().find(|s| s.leader_epoch == epoch) else {
            return false;
        };
        let lacking = lacking_at(last_cut.max(at_read.revision));
        let held_when_read =
            isr_of(&at_read.isr).is_some_and(|isr| isr.iter().any(|node| !lacking.contains(node)));
        if !held_when_read {
            return false;
        }
        states.iter().filter(|s| s.leader_epoch > epoch).any(|s| {
            let lacking = lacking_at(s.revision);
            isr_of(&s.isr)
                .is_some_and(|isr| !isr.is_empty() && isr.iter().all(|n| lacking.contains(n)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::Judgement;
    use super::super::tests::{acked_at_2_under, disk_fault, judge, state};
    use crate::history::Verb;

    /// A power loss that completed while the send was in flight — after its
    /// invoke, before its ok — took the value from b1, which had fetched it;
    /// etcd then named b1 the ISR's only member: excused, as when the fault
    /// follows the ok. Had the ISR kept b2, nothing would excuse it.
    #[test]
    fn a_power_loss_during_the_send_counts_like_one_after_its_ok() {
        let mut acked = acked_at_2_under(&[1, 2]);
        acked.invoked = 0;
        acked.index = 3;
        let fault = || vec![disk_fault(Verb::PowerLoss, 1, 2, 5, 0)];
        let shrunk = [state(1, 2, 0, &[2, 1]), state(7, 1, 1, &[1])];
        assert!(
            matches!(judge(&shrunk, fault(), &acked), Judgement::Excused(ref why)
                if why.contains("then etcd named the ISR [b1] (etcd revision 7)")),
            "{:?}",
            judge(&shrunk, fault(), &acked)
        );
        let kept = [state(1, 2, 0, &[2, 1]), state(7, 2, 0, &[2, 1])];
        assert_eq!(judge(&kept, fault(), &acked), Judgement::NotExcused);
        // A fault that completed before the send was invoked is not weighed.
        acked.invoked = 2;
        assert_eq!(judge(&shrunk, fault(), &acked), Judgement::NotExcused);
    }
}
