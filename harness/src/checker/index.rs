//! The run's derived views, built once per check and borrowed by every
//! checker that needs them: the acknowledged sends (one pass over a history
//! that may be hundreds of megabytes), each partition's final log with its
//! values indexed, and the ok polls. Checkers share these through
//! [`RunIndex`], never by importing one another; what one checker alone uses
//! stays in its own file.
//!
//! A view is built the first time a checker asks (checkers run on two
//! threads; the other waits for it rather than building it again), so a run
//! whose checkers need none of it pays nothing.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::OnceLock;

use crate::history::{Acked, Op, OpType, PolledRecord, Process, Send};
use crate::node::NodeId;
use crate::reader::ReplicaState;
use crate::schedule::Acks;
use crate::topic_partition::PartitionRef;

use super::CheckError;
use super::RunData;
use super::evidence::AckedWrite;
use super::final_log::{FinalLog, NoFinalLog};

/// Anomalies a checker reports one by one; its counts cover them all.
pub(crate) const EVIDENCE_MAX: usize = 50;

/// One run and the views of it the checkers share (see the module doc).
pub struct RunIndex<'a> {
    pub run: &'a RunData,
    acked: OnceLock<AckedSends<'a>>,
    final_logs: OnceLock<Logs<'a>>,
    database_logs: OnceLock<Logs<'a>>,
    polls: OnceLock<Vec<OkPoll<'a>>>,
    txns: OnceLock<super::txn_index::TxnView<'a>>,
}

impl<'a> RunIndex<'a> {
    pub fn new(run: &'a RunData) -> Self {
        RunIndex {
            run,
            acked: OnceLock::new(),
            final_logs: OnceLock::new(),
            database_logs: OnceLock::new(),
            polls: OnceLock::new(),
            txns: OnceLock::new(),
        }
    }

    /// The run's transactions, their reads and the final logs' outcomes
    /// (txn_index.rs), built the first time a transaction checker asks.
    pub(crate) fn txns(&self) -> &super::txn_index::TxnView<'a> {
        self.txns.get_or_init(|| {
            super::txn_index::TxnView::of(self.run, |partition| {
                self.final_log(partition)
                    .map(|indexed| indexed.log.replica)
                    .map_err(Clone::clone)
            })
        })
    }

    /// Every send that ended ok, in history order.
    pub(crate) fn acked_sends(&self) -> &AckedSends<'a> {
        self.acked.get_or_init(|| acked_sends(&self.run.history))
    }

    /// Every poll that ended ok, in history order.
    pub(crate) fn ok_polls(&self) -> &[OkPoll<'a>] {
        self.polls.get_or_init(|| ok_polls(&self.run.history))
    }

    /// The final log of `partition` with its values indexed, or why it has
    /// none; built for every partition a replica holds or a client's send
    /// named, the first time any is asked for.
    pub(crate) fn final_log(
        &self,
        partition: &PartitionRef,
    ) -> Result<&IndexedLog<'a>, &NoFinalLog> {
        self.log(LogOf::Final, partition)
    }

    /// `partition`'s log of the kind asked for: the final log, or the
    /// system's database's (built for the partitions above and every one
    /// the database holds).
    pub(crate) fn log(
        &self,
        of: LogOf,
        partition: &PartitionRef,
    ) -> Result<&IndexedLog<'a>, &NoFinalLog> {
        let (logs, choose): (_, fn(&'a RunData, &PartitionRef) -> _) = match of {
            LogOf::Final => (&self.final_logs, FinalLog::of),
            LogOf::Database => (&self.database_logs, FinalLog::of_database),
        };
        let logs = logs.get_or_init(|| {
            let mut partitions = self.run.partitions();
            partitions.extend(
                self.acked_sends()
                    .sends
                    .iter()
                    .filter(|(op, _, _)| op.process != Process::Nemesis)
                    .map(|(_, send, _)| send.partition.clone()),
            );
            if of == LogOf::Database
                && let Some(Ok(database)) = &self.run.database
            {
                partitions.extend(
                    database
                        .data
                        .replicas
                        .iter()
                        .map(ReplicaState::partition_ref),
                );
            }
            partitions
                .into_iter()
                .map(|partition| {
                    let indexed = choose(self.run, &partition).map(|log| IndexedLog {
                        by_value: ValueIndex::of(log.replica),
                        held: OnceLock::new(),
                        log,
                    });
                    (partition, indexed)
                })
                .collect()
        });
        match logs.get(partition) {
            Some(Ok(indexed)) => Ok(indexed),
            Some(Err(why)) => Err(why),
            None => Err(&NoFinalLog::NotInTheRun),
        }
    }
}

/// Each partition's log of one kind, indexed, or why it has none.
type Logs<'a> = BTreeMap<PartitionRef, Result<IndexedLog<'a>, NoFinalLog>>;

/// Which log of a partition a checker holds acknowledged writes against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LogOf {
    /// The final log (final_log.rs): the final leader's replica, or the
    /// final read over the protocol.
    Final,
    /// The system's database, as read after the run.
    Database,
}

impl LogOf {
    /// `the final log (…)` or `the database (…)`: where a value was looked
    /// for, as the evidence says it.
    pub(crate) fn place(self, log: &FinalLog<'_>) -> String {
        match self {
            LogOf::Final => format!("the final log ({})", log.chosen),
            LogOf::Database => format!("the database ({})", log.chosen),
        }
    }
}

/// One poll that ended ok, with the index of its invoke.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct OkPoll<'a> {
    pub invoke_index: u64,
    pub index: u64,
    pub process: Process,
    pub partition: &'a PartitionRef,
    pub from_offset: i64,
    pub node: Option<NodeId>,
    pub records: &'a [PolledRecord],
    pub high_watermark: i64,
    /// Records an answer returned at or above its own high watermark.
    pub above_high_watermark: &'a [(i64, i64)],
    /// The leader epoch etcd named just after the poll.
    pub leader_epoch: Option<i32>,
    /// Whether the consumer read committed data only (KIP-98): it skips
    /// aborted transactions' records and stops at the last stable offset.
    pub read_committed: bool,
}

/// Every ok poll, in history order.
pub(crate) fn ok_polls(history: &[Op]) -> Vec<OkPoll<'_>> {
    let mut invoked: HashMap<Process, u64> = HashMap::new();
    let mut polls = Vec::new();
    for op in history {
        let Some(poll) = op.poll() else {
            continue;
        };
        if op.kind == OpType::Invoke {
            invoked.insert(op.process, op.index);
            continue;
        }
        let invoke_index = invoked.remove(&op.process).unwrap_or(op.index);
        let Some((_, read)) = op.read() else {
            continue;
        };
        polls.push(OkPoll {
            invoke_index,
            index: op.index,
            process: op.process,
            partition: &poll.partition,
            from_offset: i64::try_from(poll.from_offset).unwrap_or(i64::MAX),
            node: poll.node,
            records: &read.records,
            high_watermark: read.high_watermark,
            above_high_watermark: &read.above_high_watermark,
            leader_epoch: read.leader_epoch,
            read_committed: poll.read_committed(),
        });
    }
    polls
}

/// One value of a `send` that ended ok. The partition is borrowed from the
/// history and the ISR shared by the send's values: a long run acknowledges
/// millions of values, and a copy of each per value was most of the cost.
#[derive(Debug, Clone)]
pub(crate) struct AckedValue<'a> {
    /// The index of the `ok` completion.
    pub index: u64,
    /// The index of the send's invoke: a disk fault that completed after it
    /// may have cut the value from a replica that had fetched it, even
    /// before the ok (for a read, the poll's invoke, as `index`).
    pub invoked: u64,
    pub partition: Cow<'a, PartitionRef>,
    pub value: i64,
    pub acks: Acks,
    /// `None` for acks=0 (the broker names no offset).
    pub offset: Option<i64>,
    /// The ISR etcd showed just after the ack, as broker ids (borrowed from
    /// the history: a copy per send was 7-9% of a long run's check).
    pub isr: Option<&'a [u32]>,
    pub leader_epoch: Option<i32>,
}

impl AckedValue<'_> {
    pub(crate) fn describe(&self) -> String {
        format!(
            "value {} acked{} in {} (history index {}, acks={}, ISR {}, leader epoch {})",
            self.value,
            self.offset
                .map(|o| format!(" at offset {o}"))
                .unwrap_or_default(),
            self.partition,
            self.index,
            self.acks,
            self.isr.map_or("unknown".into(), |isr| format!("{isr:?}")),
            self.leader_epoch
                .map_or("unknown".into(), |e| e.to_string()),
        )
    }

    /// The evidence's particulars; the ISR as broker ids, as etcd lists it.
    pub(crate) fn details(&self) -> AckedWrite {
        AckedWrite {
            acked_offset: self.offset,
            acks: self.acks,
            history_index: self.index,
            isr: self.isr.map(<[u32]>::to_vec),
            leader_epoch: self.leader_epoch,
            partition: self.partition.clone().into_owned(),
            value: self.value,
        }
    }
}

/// Every `send` that ended ok, in history order (the nemesis's too: the
/// values below leave them out), found in one pass over the history (a long run's history is hundreds of megabytes, and each pass
/// over it costs more than what is done with the sends).
pub(crate) struct AckedSends<'a> {
    pub sends: Vec<(&'a Op, &'a Send, &'a Acked)>,
    /// Each send's invoke index, in the order of `sends`.
    invoked: Vec<u64>,
    /// The history index of the first whose ok does not name one offset per
    /// value.
    mismatched: Option<u64>,
}

pub(crate) fn acked_sends(history: &[Op]) -> AckedSends<'_> {
    let mut sends = Vec::new();
    let mut invoked = Vec::new();
    let mut mismatched = None;
    // Each process's latest invoke: a process runs one op at a time.
    let mut open: std::collections::HashMap<Process, u64> = std::collections::HashMap::new();
    for op in history {
        if op.kind == crate::history::OpType::Invoke {
            open.insert(op.process, op.index);
        }
        let Some((send, ack)) = op.acked_send() else {
            continue;
        };
        invoked.push(open.get(&op.process).copied().unwrap_or(op.index));
        if op.process != Process::Nemesis
            && let Some(offsets) = &ack.offsets
            && offsets.len() != send.values.len()
        {
            mismatched.get_or_insert(op.index);
        }
        sends.push((op, send, ack));
    }
    AckedSends {
        sends,
        invoked,
        mismatched,
    }
}

impl<'a> AckedSends<'a> {
    /// Every value of every send, in history order; `Err` when a send's ok
    /// does not name one offset per value, so a caller sees either every
    /// value or none.
    pub(crate) fn values(&self) -> Result<impl Iterator<Item = AckedValue<'a>> + '_, CheckError> {
        if let Some(index) = self.mismatched {
            return Err(CheckError::MismatchedSend { index });
        }
        let clients = self
            .sends
            .iter()
            .zip(&self.invoked)
            .filter(|((op, _, _), _)| op.process != Process::Nemesis);
        Ok(clients.flat_map(|(&(op, send, ack), &invoked)| {
            let isr = ack.isr.as_deref();
            send.values
                .iter()
                .enumerate()
                .map(move |(i, &value)| AckedValue {
                    index: op.index,
                    invoked,
                    partition: Cow::Borrowed(&send.partition),
                    value,
                    acks: send.acks,
                    offset: ack.offsets.as_ref().map(|o| o[i]),
                    isr,
                    leader_epoch: ack.leader_epoch,
                })
        }))
    }
}

/// A replica's data records by value, each value as text the way the
/// workload wrote it (and as `Payload` prints it). Two sorted lists rather
/// than a map of owned strings, since a long run's replica holds millions of
/// records and only a few lookups ever miss: values whose text is an integer
/// as `i64` prints it (every value the workload writes) by that integer, so
/// sorting and looking up compare integers, not text; any other text
/// borrowed from the replica. A text is in one list only, so looking up an
/// acknowledged value (an `i64`) in the first is looking up its text.
pub(crate) struct ValueIndex<'a> {
    /// The numeric values' offsets, by value, each value's in log order.
    numbers: Numbers,
    /// (text, offset), by text, each text's offsets in log order.
    texts: Vec<(Cow<'a, str>, i64)>,
}

/// The integer `text` is the decimal of, as `i64::to_string` would print
/// it: no sign but a leading `-`, no leading zero, no `-0`.
pub(crate) fn canonical_number(text: &str) -> Option<i64> {
    let digits = text.strip_prefix('-').unwrap_or(text).as_bytes();
    let first = *digits.first()?;
    let leading_zero = first == b'0' && (digits.len() > 1 || text.len() > digits.len());
    if leading_zero || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    text.parse().ok()
}

impl<'a> ValueIndex<'a> {
    /// Intact data batches only, null values left out, as
    /// `CompactReplica::offsets_by_value` reads a replica; records of an
    /// aborted transaction left out too (KIP-98: no read_committed reader
    /// ever sees them, and the log keeps them only until cleaned), so a
    /// value is held only where it was written for good.
    pub(crate) fn of(replica: &'a ReplicaState) -> ValueIndex<'a> {
        let mut numbers = Vec::new();
        let mut texts = Vec::new();
        let txns = replica.transactions();
        for (batch, record) in replica.records() {
            if batch.is_control() || (batch.is_transactional() && txns.aborted(record.offset)) {
                continue;
            }
            let Some(value) = record.value.as_ref() else {
                continue;
            };
            // A padded value (`value_bytes`) is indexed by the value alone.
            let text = match value.as_str() {
                Some(text) => Cow::Borrowed(crate::history::value_text(text)),
                None => Cow::Owned(value.to_string()),
            };
            match canonical_number(&text) {
                Some(number) => numbers.push((number, record.offset)),
                None => texts.push((text, record.offset)),
            }
        }
        texts.sort_by(|a, b| a.0.cmp(&b.0));
        ValueIndex {
            numbers: Numbers::of(numbers),
            texts,
        }
    }

    /// The offsets holding the value whose text is `value.to_string()`, in
    /// log order.
    pub(crate) fn offsets(&self, value: i64) -> impl Iterator<Item = i64> + '_ {
        self.numbers.offsets(value).iter().copied()
    }

    pub(crate) fn contains(&self, value: i64) -> bool {
        self.offsets(value).next().is_some()
    }

    /// Each value at two or more offsets, with those offsets in log order,
    /// in value (text) order.
    pub(crate) fn repeated(&self) -> Vec<(Cow<'_, str>, Vec<i64>)> {
        let numbers = self
            .numbers
            .groups()
            .filter(|(_, offsets)| offsets.len() > 1)
            .map(|(value, offsets)| (Cow::Owned(value.to_string()), offsets.to_vec()));
        let texts = self
            .texts
            .chunk_by(|a, b| a.0 == b.0)
            .filter(|group| group.len() > 1)
            .map(|group| {
                let offsets = group.iter().map(|(_, offset)| *offset).collect();
                (Cow::Borrowed(group[0].0.as_ref()), offsets)
            });
        let mut repeated: Vec<(Cow<'_, str>, Vec<i64>)> = numbers.chain(texts).collect();
        // Texts are unique across both lists, so this is the text order.
        repeated.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        repeated
    }
}

/// A replica's numeric values and their offsets, grouped by value. The
/// workload's values count up from one counter shared by every partition,
/// so a partition's values span a range a few times their count: then they
/// are bucketed by value in one pass (a counting sort, stable, so each
/// value's offsets stay in log order) and a lookup is two reads, where a
/// sorted list costs a binary search whose lower levels miss the cache on a
/// long log. That search grew a million-op check's lost-write and
/// offset-changed by a log factor (issue 22: 10× the ops must cost ≤ 12× the
/// time). Values too spread out for that (a hand-written history, say) are
/// sorted and searched.
enum Numbers {
    /// For value `min + k`: `offsets[starts[k]..starts[k + 1]]`.
    Dense {
        min: i64,
        starts: Vec<u32>,
        offsets: Vec<i64>,
    },
    /// (value, offset), by value, each value's offsets in log order.
    Sorted { values: Vec<i64>, offsets: Vec<i64> },
}

/// Values may span this many times their count and still be bucketed: a
/// bucket costs 4 bytes, a sorted entry 8 more than a bucketed one.
const DENSE_SPAN_PER_VALUE: u64 = 4;

impl Numbers {
    /// `pairs`: (value, offset) in log order.
    fn of(mut pairs: Vec<(i64, i64)>) -> Numbers {
        if let Some(dense) = Self::dense(&pairs) {
            return dense;
        }
        // Stable, so one value's offsets stay in log order.
        pairs.sort_by_key(|&(value, _)| value);
        let (values, offsets) = pairs.into_iter().unzip();
        Numbers::Sorted { values, offsets }
    }

    fn dense(pairs: &[(i64, i64)]) -> Option<Numbers> {
        let min = pairs.iter().map(|&(value, _)| value).min()?;
        let max = pairs.iter().map(|&(value, _)| value).max()?;
        let span = u64::try_from(i128::from(max) - i128::from(min) + 1).ok()?;
        let count = u32::try_from(pairs.len()).ok()?;
        if span > DENSE_SPAN_PER_VALUE * u64::from(count) {
            return None;
        }
        let span = usize::try_from(span).ok()?;
        let bucket = |value: i64| (value - min) as usize;
        // Counted one bucket up, summed, so `starts[k]` is where bucket k
        // begins; each value then placed at its bucket's cursor, which leaves
        // `starts[k]` at bucket k's end, shifted back below.
        let mut starts = vec![0u32; span + 1];
        for &(value, _) in pairs {
            starts[bucket(value) + 1] += 1;
        }
        for k in 1..=span {
            starts[k] += starts[k - 1];
        }
        let mut offsets = vec![0i64; pairs.len()];
        for &(value, offset) in pairs {
            let cursor = &mut starts[bucket(value)];
            offsets[*cursor as usize] = offset;
            *cursor += 1;
        }
        starts.copy_within(0..span, 1);
        starts[0] = 0;
        Some(Numbers::Dense {
            min,
            starts,
            offsets,
        })
    }

    /// The offsets holding `value`, in log order.
    fn offsets(&self, value: i64) -> &[i64] {
        match self {
            Numbers::Dense {
                min,
                starts,
                offsets,
            } => {
                let Some(k) = value
                    .checked_sub(*min)
                    .and_then(|k| usize::try_from(k).ok())
                    .filter(|&k| k + 1 < starts.len())
                else {
                    return &[];
                };
                &offsets[starts[k] as usize..starts[k + 1] as usize]
            }
            Numbers::Sorted { values, offsets } => {
                let start = values.partition_point(|&v| v < value);
                let end = start + values[start..].partition_point(|&v| v == value);
                &offsets[start..end]
            }
        }
    }

    /// Each value held, with its offsets, in value order.
    fn groups(&self) -> Box<dyn Iterator<Item = (i64, &[i64])> + '_> {
        match self {
            Numbers::Dense {
                min,
                starts,
                offsets,
            } => Box::new(
                starts
                    .windows(2)
                    .enumerate()
                    .filter(|(_, w)| w[1] > w[0])
                    .map(move |(k, w)| (*min + k as i64, &offsets[w[0] as usize..w[1] as usize])),
            ),
            Numbers::Sorted { values, offsets } => {
                let mut start = 0;
                Box::new(std::iter::from_fn(move || {
                    let &value = values.get(start)?;
                    let end = start + values[start..].partition_point(|&v| v == value);
                    let group = (value, &offsets[start..end]);
                    start = end;
                    Some(group)
                }))
            }
        }
    }
}

/// A final log with its values indexed; what each holder has is indexed
/// only when a missing value needs naming where it is missing.
pub(crate) struct IndexedLog<'a> {
    pub log: FinalLog<'a>,
    pub by_value: ValueIndex<'a>,
    held: OnceLock<Vec<(NodeId, ValueIndex<'a>)>>,
}

impl IndexedLog<'_> {
    /// Nodes whose replica of the partition does not hold the value anywhere.
    pub(crate) fn lacking(&self, value: i64) -> Vec<NodeId> {
        self.held
            .get_or_init(|| {
                self.log
                    .holders
                    .iter()
                    .map(|(node, replica)| (*node, ValueIndex::of(replica)))
                    .collect()
            })
            .iter()
            .filter(|(_, values)| !values.contains(value))
            .map(|(node, _)| *node)
            .collect()
    }
}

/// `; excused by: …` naming each excuse used, or nothing.
pub(crate) fn excused_by(excuses: &BTreeSet<String>) -> String {
    if excuses.is_empty() {
        return String::new();
    }
    let named: Vec<&str> = excuses.iter().map(String::as_str).collect();
    format!("; excused by: {}", named.join(", "))
}

/// One line from each reason a value could not be judged, with the first
/// value it held back; `None` when every value was judged.
pub(crate) fn unknown_message(unknown: BTreeMap<String, String>) -> Option<String> {
    if unknown.is_empty() {
        return None;
    }
    Some(
        unknown
            .into_iter()
            .map(|(why, first)| format!("{why} (first: {first})"))
            .collect::<Vec<_>>()
            .join("; "),
    )
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::Numbers;
    use crate::random::SplitMix64;

    /// What either form must answer: each value's offsets in log order.
    fn expected(pairs: &[(i64, i64)]) -> BTreeMap<i64, Vec<i64>> {
        let mut by_value: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
        for &(value, offset) in pairs {
            by_value.entry(value).or_default().push(offset);
        }
        by_value
    }

    fn assert_answers(numbers: &Numbers, pairs: &[(i64, i64)], probes: &[i64]) {
        let expected = expected(pairs);
        let groups: BTreeMap<i64, Vec<i64>> = numbers
            .groups()
            .map(|(value, offsets)| (value, offsets.to_vec()))
            .collect();
        assert_eq!(groups, expected);
        for &value in probes {
            let want = expected.get(&value).cloned().unwrap_or_default();
            assert_eq!(numbers.offsets(value), want.as_slice(), "value {value}");
        }
    }

    #[test]
    fn numbers_bucketed_or_sorted_give_each_value_its_offsets_in_log_order() {
        let mut random = SplitMix64::new(22);
        for round in 0..200 {
            // Dense rounds draw from a span near the count; sparse ones from
            // one far wider (and near the ends of i64, to test the span's
            // arithmetic).
            let dense = round % 2 == 0;
            let len = random.index(60) + usize::from(!dense) * 2;
            let base: i64 = if dense { -5 } else { i64::MAX - 1_000_000 };
            let width = if dense { 2 * len as u64 + 1 } else { 1_000_000 };
            let mut pairs: Vec<(i64, i64)> = (0..len)
                .map(|offset| (base + random.between(0, width) as i64, offset as i64))
                .collect();
            if !dense {
                // Both ends drawn, so the values span the whole width.
                pairs[0].0 = if round % 4 == 1 { i64::MIN } else { base };
                pairs[1].0 = base + width as i64;
            }
            let numbers = Numbers::of(pairs.clone());
            assert_eq!(
                matches!(numbers, Numbers::Dense { .. }),
                dense && len > 0,
                "round {round}: {len} values within {width}"
            );
            let mut probes: Vec<i64> = pairs.iter().map(|&(v, _)| v).collect();
            probes.extend([
                i64::MIN,
                i64::MAX,
                0,
                base - 1,
                (base + width as i64).saturating_add(1),
            ]);
            assert_answers(&numbers, &pairs, &probes);
        }
    }
}
