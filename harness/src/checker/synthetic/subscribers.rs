//! The synthetic run's subscribed consumers and final read ([groups]): each
//! subscriber joins group `g` once (a `rebalance` op that assigns it one
//! partition), reads the group's committed offset, then polls from its
//! position and commits after each poll that moved it, re-reading the
//! committed offset every [`REFETCH_EVERY`] commits, as a member taking up
//! its partition again would. The run ends with a final read of every
//! partition from offset 0. The generator hands each partition's log in as
//! a [`LogView`].

use crate::history::{Body, Commit, Committed, Poll, PolledRecord, Read, Rebalance, RecordValue};
use crate::node::NodeId;
use crate::topic_partition::PartitionRef;

/// The group the subscribers join.
const GROUP: &str = "g";
/// A subscriber re-reads its group's committed offset after this many
/// commits.
const REFETCH_EVERY: u64 = 16;

/// A transaction marker's offset in a partition's values (`LogView::values`,
/// the generator's log): it holds no data, and no consumer returns it.
pub(super) const NO_VALUE: i64 = i64::MIN;

/// What a subscriber sees of one partition.
pub(super) struct LogView<'a> {
    pub partition: &'a PartitionRef,
    pub leader: NodeId,
    pub leader_epoch: i32,
    /// The value at each offset ([`NO_VALUE`] at a marker's).
    pub values: &'a [i64],
}

impl LogView<'_> {
    /// A read of offsets `from..end`.
    fn read(&self, from: usize, end: usize) -> Read {
        Read {
            records: (from..end)
                .filter(|&o| self.values[o] != NO_VALUE)
                .map(|o| PolledRecord(o as i64, RecordValue::Number(self.values[o])))
                .collect(),
            high_watermark: self.values.len() as i64,
            leader_epoch: Some(self.leader_epoch),
            above_high_watermark: Vec::new(),
        }
    }
}

/// Where a subscriber is in its round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Join,
    Fetch,
    Poll,
    Commit(i64),
}

/// One subscriber: its partition, its position and what it does next.
struct Subscriber {
    partition: usize,
    position: u64,
    phase: Phase,
    commits: u64,
}

/// Every subscriber, and their group's committed offsets.
pub(super) struct Subscribers {
    members: Vec<Subscriber>,
    /// The group's committed offset of each partition (-1: none).
    committed: Vec<i64>,
    poll_records_max: usize,
}

impl Subscribers {
    /// `count` subscribers over `partitions` partitions, the i-th given
    /// partition i mod `partitions`.
    pub fn new(count: u64, partitions: u32, poll_records_max: usize) -> Subscribers {
        Subscribers {
            members: (0..count)
                .map(|s| Subscriber {
                    partition: (s % u64::from(partitions)) as usize,
                    position: 0,
                    phase: Phase::Join,
                    commits: 0,
                })
                .collect(),
            committed: vec![-1; partitions as usize],
            poll_records_max,
        }
    }

    fn member(s: usize) -> String {
        format!("m-{s}")
    }

    /// The invoke of subscriber `s`'s next op.
    pub fn invoke(&self, s: usize, logs: &[LogView]) -> Body {
        let sub = &self.members[s];
        let log = &logs[sub.partition];
        let coordinator = Some(logs[0].leader);
        match sub.phase {
            Phase::Join => Body::Rebalance(Rebalance {
                group: GROUP.into(),
                topics: vec![log.partition.topic.clone()],
                node: coordinator,
                generation: None,
                member: None,
                partitions: None,
                leader: None,
                members: None,
            }),
            Phase::Fetch => Body::Committed(Committed {
                group: GROUP.into(),
                partition: log.partition.clone(),
                node: coordinator,
                offset: None,
                leader: None,
                stable: false,
            }),
            Phase::Poll => {
                let mut poll = Poll::new(log.partition.clone(), sub.position, Some(log.leader));
                poll.group = Some(GROUP.into());
                Body::Poll(poll)
            }
            Phase::Commit(offset) => Body::Commit(Commit {
                group: GROUP.into(),
                partition: log.partition.clone(),
                offset,
                node: coordinator,
                generation: Some(1),
                member: Some(Self::member(s)),
                deleted: false,
            }),
        }
    }

    /// Subscriber `s`'s op `body` completed (always ok): its completion.
    pub fn complete(&mut self, s: usize, body: Body, logs: &[LogView]) -> Body {
        let p = self.members[s].partition;
        match body {
            Body::Rebalance(mut round) => {
                round.generation = Some(1);
                round.member = Some(Self::member(s));
                round.partitions = Some(vec![logs[p].partition.clone()]);
                round.leader = Some(Self::member(0));
                self.members[s].phase = Phase::Fetch;
                Body::Rebalance(round)
            }
            Body::Committed(mut read) => {
                let committed = self.committed[p];
                read.offset = Some(committed);
                read.leader = read.node;
                let sub = &mut self.members[s];
                sub.position = u64::try_from(committed).unwrap_or(0);
                sub.phase = Phase::Poll;
                Body::Committed(read)
            }
            Body::Poll(mut poll) => {
                let log = &logs[p];
                let from = poll.from_offset as usize;
                let end = (from + self.poll_records_max).min(log.values.len());
                poll.read = Some(log.read(from, end));
                let sub = &mut self.members[s];
                if end > from {
                    sub.position = end as u64;
                    sub.phase = Phase::Commit(end as i64);
                }
                Body::Poll(poll)
            }
            Body::Commit(commit) => {
                self.committed[p] = commit.offset;
                let sub = &mut self.members[s];
                sub.commits += 1;
                sub.phase = if sub.commits.is_multiple_of(REFETCH_EVERY) {
                    Phase::Fetch
                } else {
                    Phase::Poll
                };
                Body::Commit(commit)
            }
            other => unreachable!("a subscriber does not {}", other.f()),
        }
    }
}

/// A fresh consumer's read of `log` from offset 0 to its end: the invoke
/// and the completion.
pub(super) fn final_read(log: &LogView) -> (Body, Body) {
    let mut poll = Poll::new(log.partition.clone(), 0, Some(log.leader));
    poll.final_read = true;
    let invoke = Body::Poll(poll.clone());
    poll.read = Some(log.read(0, log.values.len()));
    (invoke, Body::Poll(poll))
}
