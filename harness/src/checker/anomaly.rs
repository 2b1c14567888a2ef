//! Every kind of anomaly a checker can name, in one table: its name on disk
//! (`results.json`, a suite's `anomaly = "..."`), the checker that reports it,
//! whether Kafka forbids it (the run is invalid) or allows it (reported and
//! counted, the run stays valid), and what it means in one line. Suites,
//! the gate, the report and `epochal anomalies` read this table; nothing
//! matches an anomaly by its text. A new kind is one line here.
//!
//! A kind's checker is the one that names it over the final log; the
//! database twins of lost-write and offset-changed (`database-lost-write`,
//! `database-offset-changed`) report the same kinds over a system's
//! database, their evidence saying so.

use std::fmt;
use std::str::FromStr;

/// Declares [`Anomaly`] and its table from one list, so a kind's name,
/// checker, severity and meaning cannot drift apart.
macro_rules! anomalies {
    ($( $variant:ident = $name:literal, $checker:literal, $forbidden:literal, $meaning:literal; )*) => {
        /// One kind of anomaly (see the module doc).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Anomaly {
            $( #[doc = $meaning] $variant, )*
        }

        impl Anomaly {
            /// Every kind, in table order.
            pub const ALL: &'static [Anomaly] = &[$(Anomaly::$variant),*];

            /// The name written to disk and in suites.
            pub fn name(self) -> &'static str {
                match self { $(Anomaly::$variant => $name,)* }
            }

            /// The checker that reports it (`checker::all()`'s names, and
            /// `liveness` for the run's own liveness window).
            pub fn checker(self) -> &'static str {
                match self { $(Anomaly::$variant => $checker,)* }
            }

            /// Whether Kafka's guarantees forbid it: evidence of a forbidden
            /// kind makes the run invalid; an allowed kind is reported and
            /// counted and the verdict stays valid.
            pub fn forbidden(self) -> bool {
                match self { $(Anomaly::$variant => $forbidden,)* }
            }

            /// What it means, in one line.
            pub fn meaning(self) -> &'static str {
                match self { $(Anomaly::$variant => $meaning,)* }
            }
        }
    };
}

anomalies! {
    LostAcknowledgedWrite = "lost-acknowledged-write", "lost-write", true,
        "an acks=all write is missing from the final log with no unclean election or whole-ISR disk fault to excuse it";
    LostAcksAllWriteExcused = "lost-acks-all-write-excused", "lost-write", false,
        "an acks=all write is missing, excused by an unclean election or a disk fault of every ISR member";
    LostAcks1Write = "lost-acks-1-write", "lost-write", false,
        "an acks=1 write is missing from the final log (acks=1 waits for the leader alone)";
    LostAcks0Write = "lost-acks-0-write", "lost-write", false,
        "an acks=0 write is missing from the final log (acks=0 waits for nothing)";
    AcknowledgedOffsetChanged = "acknowledged-offset-changed", "offset-changed", true,
        "an acks=all write is in the final log at an offset other than the one acknowledged";
    AppWriteLost = "app-write-lost", "app-writes", true,
        "an application's record acknowledged with acks=all is not in the final log at the offset its acknowledgement named, with the bytes it sent";
    ReplicaDivergence = "replica-divergence", "divergence", true,
        "after heal, replicas hold different records below their common end";
    DatabaseDivergence = "database-divergence", "database-divergence", true,
        "the system's database, read after the run, and the final read over the protocol hold different records for a partition: the brokers answered a record the database does not hold, or the database holds one they did not answer";
    EpochFileNotMonotonic = "epoch-file-not-monotonic", "epoch-file", true,
        "a leader-epoch-checkpoint entry does not rise above the one before it";
    EpochFileDisagreesWithBatch = "epoch-file-disagrees-with-batch", "epoch-file", true,
        "batches carry a leader epoch other than the one the epoch file names for their offsets";
    EpochEntryNotAtBatchStart = "epoch-entry-not-at-batch-start", "epoch-file", true,
        "an epoch file entry starts at an offset that is no batch's base offset";
    EpochFileUnreadable = "epoch-file-unreadable", "epoch-file", true,
        "a replica's leader-epoch-checkpoint cannot be read or parsed";
    ElectionOutsideIsr = "election-outside-isr", "clean-election", true,
        "etcd recorded a leader from outside the ISR while unclean election was off, or while an ISR member stayed registered: no excuse for what it lost";
    TwoLeadersInEtcd = "two-leaders-in-etcd", "one-leader-per-epoch", true,
        "etcd recorded two leaders for one partition and leader epoch";
    TwoLeadersApplied = "two-leaders-applied", "one-leader-per-epoch", true,
        "brokers applied LeaderAndIsr naming two leaders for one partition and leader epoch";
    TwoWritersInOneEpoch = "two-writers-in-one-epoch", "one-leader-per-epoch", true,
        "replicas hold different records stamped with the same leader epoch at the same offset";
    StaleControllerEpochApplied = "stale-controller-epoch-applied", "stale-controller-fenced", true,
        "a broker applied a decision of an older controller epoch after a newer one (KAFKA-532)";
    UncommittedDecisionApplied = "uncommitted-decision-applied", "stale-controller-fenced", true,
        "a broker applied a leader and leader epoch that etcd never recorded for the partition";
    LeaderEpochRegressed = "leader-epoch-regressed", "stale-controller-fenced", true,
        "a broker applied a LeaderAndIsr whose leader epoch is below one it applied before for the partition: a decision reached it late and was taken";
    EtcdLeaderEpochRegressed = "etcd-leader-epoch-regressed", "stale-controller-fenced", true,
        "etcd recorded a partition state whose leader epoch is below one it recorded for the partition before";
    DecisionOutOfOrder = "decision-out-of-order", "stale-controller-fenced", true,
        "a broker applied a partition state that etcd recorded only before one the broker had already applied";
    AckBeforeIsrHeld = "ack-before-isr-held", "isr-acks", true,
        "an acks=all write was acknowledged though a member of the ISR etcd named just after had not fetched past its offset: the leader counted on a replica that did not hold it";
    ConsumedOffsetRegressed = "consumed-offset-regressed", "high-watermark", true,
        "a poll returned a record below the offset it fetched from";
    ReadAboveHighWatermark = "read-above-high-watermark", "high-watermark", true,
        "a fetch answer to a consumer held a record at or above the high watermark it reported: an uncommitted record served";
    HighWatermarkRegressed = "high-watermark-regressed", "high-watermark", true,
        "a leader's high watermark went backwards for consumers within one leader epoch";
    InconsistentOffsets = "inconsistent-offsets", "consumer", true,
        "one offset of a partition was seen holding two different values";
    IntNonmonotonicPoll = "int-nonmonotonic-poll", "consumer", true,
        "one poll returned an offset at or below one it returned before";
    NonmonotonicPoll = "nonmonotonic-poll", "consumer", true,
        "a consumer's poll began at or below an offset its previous poll of the partition returned, within one assignment";
    PollSkip = "poll-skip", "consumer", true,
        "a poll's first record is past its fetch offset, or past where the consumer's previous poll ended, with records in between it never returned";
    IntPollSkip = "int-poll-skip", "consumer", true,
        "one poll skipped records between two offsets it returned";
    TruncatedRead = "truncated-read", "consumer", true,
        "a poll read a record that the final logs no longer hold at that offset";
    Duplicate = "duplicate", "duplicates", false,
        "a value is at more than one offset without idempotence (at-least-once allows it)";
    IdempotentDuplicate = "idempotent-duplicate", "duplicates", true,
        "a value only idempotent producers sent is at more offsets than it was sent (KIP-98)";
    StuckPartition = "stuck-partition", "liveness", true,
        "a partition acknowledged no write within the liveness window after the final heal";
    StuckGroup = "stuck-group", "liveness", true,
        "a consumer group's coordinator took no offset commit, answered back by an offset fetch, within the liveness window after the final heal";
    StopKeptRegistration = "stop-kept-registration", "clean-stop", true,
        "a broker stopped cleanly was still registered a second after its process exited, so its leaderships waited for its lease";
    StuckTopic = "stuck-topic", "liveness", true,
        "a topic could not be deleted, created again and read within the liveness window after the final heal";
    ResurrectedRecord = "resurrected-record", "topic-lives", true,
        "a read of a topic returned a record acknowledged before the topic was last created: a deleted topic's data served as its successor's";
    CommittedOffsetRegressed = "committed-offset-regressed", "committed-offsets", true,
        "a read of a group's committed offset answered less than a commit acknowledged before it, with no commit moving it back";
    StaleCommittedRead = "stale-committed-read", "committed-offsets", false,
        "a read of a committed offset answered below an acknowledged commit by a coordinator etcd no longer named leader of the group's offsets partition (a deposed coordinator's cache, as Kafka's serves until it resigns)";
    Unseen = "unseen", "unseen", true,
        "an acknowledged write the final log holds was returned by no poll, not even the final read of the whole partition";
    NonmonotonicSend = "nonmonotonic-send", "send-order", true,
        "an acks=all write got an offset at or below one acknowledged before it was sent";
    ResumeSkip = "resume-skip", "committed-offsets", true,
        "a subscribed consumer polled from past records its group never consumed (at-least-once: a member resumes at most at its group's last commit)";
    NoRecovery = "no-recovery", "liveness", true,
        "after the final heal, on a system that claims to recover, the cluster made no progress toward settling (a partition without a leader or its full ISR, or a replica short of its leader's log end) for the last half of the quiesce's bound";
    RestartFailed = "restart-failed", "liveness", true,
        "a broker started again on its own data after a crash or stop ended by itself before it served";
    AbortedRead = "aborted-read", "transactions", true,
        "a read_committed read returned a value written by an aborted or failed transaction, by a failed send, or held by the final log inside an aborted transaction (G1a)";
    PrecommittedRead = "precommitted-read", "transactions", true,
        "a read_committed read returned a transaction's write before that transaction's EndTxn was sent, or a write the final log holds in a transaction no marker ended";
    TornTransaction = "torn-transaction", "transactions", true,
        "a committed transaction's writes are not all in the final log as committed: some are missing, aborted or left open";
    AbortedCommitted = "aborted-committed", "transactions", true,
        "a write of a transaction that aborted or failed is in the final log as committed: every later read_committed consumer returns it";
    WriteCycle = "write-cycle", "txn-cycles", false,
        "committed transactions' writes order them in a cycle through write-write dependencies (G0, or G1c through a ww edge): allowed, Kafka does not isolate transactions' writes";
    ReadCycle = "read-cycle", "txn-cycles", true,
        "committed transactions read each other's writes in a cycle of write-read dependencies alone (G1c, circular information flow)";
    HangingTransaction = "hanging-transaction", "hanging-transactions", true,
        "a final log holds a transaction no marker ended though its producer's ops all finished a transaction timeout before the run's end: the last stable offset, and every read_committed consumer, stays stuck there";
}

impl fmt::Display for Anomaly {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is no anomaly kind; says the closest kind and every kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown anomaly `{given}`{}; the kinds are: {}",
    .closest.map(|c| format!(" (did you mean `{c}`?)")).unwrap_or_default(),
    Anomaly::ALL.iter().map(|a| a.name()).collect::<Vec<_>>().join(", ")
)]
pub struct UnknownAnomaly {
    pub given: String,
    pub closest: Option<Anomaly>,
}

impl FromStr for Anomaly {
    type Err = UnknownAnomaly;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Anomaly::ALL
            .iter()
            .copied()
            .find(|a| a.name() == s)
            .ok_or_else(|| UnknownAnomaly {
                given: s.to_owned(),
                closest: closest(s),
            })
    }
}

/// The kind whose name is fewest edits from `s`, if any is close enough to
/// be a slip (at most a third of the name's length away).
fn closest(s: &str) -> Option<Anomaly> {
    Anomaly::ALL
        .iter()
        .map(|&a| (edit_distance(s, a.name()), a))
        .min()
        .filter(|&(distance, a)| distance <= a.name().len().div_ceil(3))
        .map(|(_, a)| a)
}

/// Levenshtein distance over bytes (names are ASCII).
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, &x) in a.iter().enumerate() {
        let mut current = vec![i + 1; b.len() + 1];
        for (j, &y) in b.iter().enumerate() {
            let substitute = previous[j] + usize::from(x != y);
            current[j + 1] = substitute.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        previous = current;
    }
    previous[b.len()]
}

impl serde::Serialize for Anomaly {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for Anomaly {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

/// The table `epochal anomalies` prints: one row a kind.
pub fn table() -> String {
    let mut out = String::from("| anomaly | checker | verdict | meaning |\n|---|---|---|---|\n");
    for a in Anomaly::ALL {
        let verdict = if a.forbidden() {
            "invalid"
        } else {
            "allowed (counted)"
        };
        out.push_str(&format!(
            "| `{}` | `{}` | {verdict} | {} |\n",
            a.name(),
            a.checker(),
            a.meaning()
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_parses_back_to_its_kind_and_names_are_distinct() {
        let mut names = std::collections::BTreeSet::new();
        for &a in Anomaly::ALL {
            assert_eq!(a.name().parse::<Anomaly>(), Ok(a));
            assert!(names.insert(a.name()), "{a} twice");
            let json = serde_json::to_string(&a).unwrap();
            assert_eq!(json, format!("\"{}\"", a.name()));
            assert_eq!(serde_json::from_str::<Anomaly>(&json).unwrap(), a);
        }
    }

    #[test]
    fn a_typo_names_the_closest_kind() {
        let error = "lost-acknowledged-writes".parse::<Anomaly>().unwrap_err();
        assert_eq!(error.closest, Some(Anomaly::LostAcknowledgedWrite));
        let text = error.to_string();
        assert!(
            text.contains("did you mean `lost-acknowledged-write`?"),
            "{text}"
        );
        assert!(
            text.contains("replica-divergence"),
            "lists the kinds: {text}"
        );
        let far = "split-brain".parse::<Anomaly>().unwrap_err();
        assert_eq!(far.closest, None, "nothing close: no guess");
    }
}
