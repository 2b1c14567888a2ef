//! A partition as the harness names it: `t-0` is topic `t`, partition 0, split
//! at the last `-` as Kafka names a replica's directory. Schedules, the
//! history, the reader's replicas, etcd's views and the checkers all key
//! partitions by this one type.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Ordered by topic, then partition number.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct PartitionRef {
    pub topic: String,
    pub partition: u32,
}

impl PartitionRef {
    pub fn new(topic: impl Into<String>, partition: u32) -> PartitionRef {
        PartitionRef {
            topic: topic.into(),
            partition,
        }
    }

    /// The partition number as the wire carries it.
    pub fn wire_partition(&self) -> i32 {
        i32::try_from(self.partition).expect("partition numbers fit in i32")
    }
}

/// Kafka's internal topic of committed offsets ([groups]).
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// Kafka's internal topic of transactional ids' states (KIP-98).
pub const TXN_STATE_TOPIC: &str = "__transaction_state";

/// The offsets partition of `group` among `partitions`: Kafka's
/// `GroupMetadataManager.partitionFor`, `Utils.abs(groupId.hashCode) %
/// offsets.topic.num.partitions`, with Java's `String.hashCode` over UTF-16
/// code units (`Utils.abs` maps `Integer.MIN_VALUE` to 0). The harness
/// works it out itself (it never depends on the broker crate) to hold a
/// lost commit to the fate of the partition it was written to.
pub fn offsets_partition_of(group: &str, partitions: u32) -> PartitionRef {
    let hash = group.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    });
    let abs = if hash == i32::MIN {
        0
    } else {
        hash.unsigned_abs()
    };
    PartitionRef::new(OFFSETS_TOPIC, abs % partitions.max(1))
}

/// Why a text is not a partition: not `TOPIC-N`, or `N` too large for a
/// partition number.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not a partition like \"t-0\"")]
pub struct PartitionRefError {
    pub text: String,
}

impl FromStr for PartitionRef {
    type Err = PartitionRefError;
    fn from_str(s: &str) -> Result<Self, PartitionRefError> {
        let bad = || PartitionRefError { text: s.to_owned() };
        let (topic, n) = s.rsplit_once('-').ok_or_else(bad)?;
        if topic.is_empty() || n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let partition = n.parse().map_err(|_| bad())?;
        Ok(Self::new(topic, partition))
    }
}

crate::text_form::text_form!(PartitionRef);

impl fmt::Display for PartitionRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_split_at_the_last_dash() {
        assert_eq!("t-0".parse(), Ok(PartitionRef::new("t", 0)));
        assert_eq!("a-b-3".parse(), Ok(PartitionRef::new("a-b", 3)));
        for bad in ["t", "-1", "t-", "t-+1", "t-x"] {
            assert!(bad.parse::<PartitionRef>().is_err(), "{bad}");
        }
        assert!(PartitionRef::new("t", 2) < PartitionRef::new("t", 10));
    }

    #[test]
    fn a_group_lands_on_the_offsets_partition_kafka_puts_it_on() {
        // Java's "test-group".hashCode() is 627841412 and "my-group"'s
        // -1906497762; "polygenelubricants" hashes to Integer.MIN_VALUE.
        assert_eq!(
            offsets_partition_of("test-group", 50).partition,
            627_841_412 % 50
        );
        assert_eq!(
            offsets_partition_of("my-group", 50).partition,
            1_906_497_762 % 50
        );
        assert_eq!(offsets_partition_of("polygenelubricants", 7).partition, 0);
        assert_eq!(offsets_partition_of("g", 0).topic, OFFSETS_TOPIC);
    }
}
