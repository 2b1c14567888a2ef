//! Lost acknowledged writes, by DESIGN.md's rule ("Lost write, precisely"): a
//! value acknowledged with acks=all while the ISR was S is lost illegitimately
//! unless, after its acknowledgement, an unclean leader election happened or
//! every member of S lost it in disk faults (power loss, truncate-log) — or
//! the ISR *as it stood later* did: at a disk fault's revision (etcd read just
//! after its cut) or any later partition state, etcd names an ISR every
//! member of which had lost the value in disk faults since the ack (a dead
//! sole ISR member stays the ISR; an ISR that held the value nowhere is past
//! Kafka's promise — no loss while an in-sync replica survives). Lost means not in the
//! partition's final log (see [`super::final_log`]). acks=1 and acks=0 writes
//! may be lost; they are counted, never invalid.
//!
//! The acknowledged values and the excuses are shared with the
//! offset-changed checker.

use std::borrow::Cow;
use std::cell::OnceCell;
use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::history::{Acked, Op, Process, Send};
use crate::node::NodeId;
use crate::reader::ReplicaState;
use crate::schedule::Acks;
use crate::topic_partition::PartitionRef;

pub(crate) use super::excuses::{Excuses, Judgement};
use super::final_log::FinalLog;
use super::{CheckResult, Checker, Evidence, RunData};

pub const NAME: &str = "lost-write";

/// Anomalies reported one by one; the counts cover them all.
pub(crate) const EVIDENCE_MAX: usize = 50;

pub fn checker() -> Checker {
    Checker {
        name: NAME,
        guarantee: "A write acknowledged with acks=all is not lost while at least one replica of the \
            in-sync set it was acknowledged under stays alive: absent an unclean leader election \
            after the acknowledgement, or disk faults (power loss, truncate-log) that took it from \
            every member of that ISR or of the ISR as it last stood, the value is in the \
            partition's final log.",
        source: "Kafka documentation, Design §4.7 Replication (\"a committed message will not be \
            lost, as long as there is at least one in sync replica alive\"; acks=all waits for the \
            full ISR; unclean.leader.election.enable trades this for availability); KIP-101 and \
            KIP-279 (leader-epoch truncation closes the ways a clean failover lost committed data); \
            DESIGN.md \"Lost write, precisely\".",
        not_checked: "Writes that ended info or fail (they may or may not have happened). Whether a \
            disk fault is what actually removed the value (a power-loss or truncate-log op after \
            the ack naming every ISR member is an excuse; when the op records its cut, the cut \
            must reach the acked offset), and whether a node that lost it fetched it back before \
            the last ISR member lost it too. acks=1 and acks=0 losses are only counted. A value's position (see \
            offset-changed) and duplicates (see duplicates). Writes whose ack recorded no ISR or \
            leader epoch, or partitions whose final log cannot be chosen, make the verdict \
            unknown rather than valid. Records in damaged (non-intact) batches count as absent. \
            The ISR and leader epoch are etcd's just after the ack, not at it: an election in \
            between makes the rule stricter (an unclean election at that very epoch does not \
            excuse).",
        check,
    }
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
    pub(crate) fn details(&self) -> Value {
        json!({
            "value": self.value,
            "partition": self.partition,
            "acked_offset": self.offset,
            "history_index": self.index,
            "acks": self.acks,
            "isr": self.isr,
            "leader_epoch": self.leader_epoch,
        })
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
    pub(crate) fn values(&self) -> Result<impl Iterator<Item = AckedValue<'a>> + '_, String> {
        if let Some(index) = self.mismatched {
            return Err(format!(
                "history index {index}: send ok has a different number of offsets and values"
            ));
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
    /// `CompactReplica::offsets_by_value` reads a replica.
    pub(crate) fn of(replica: &'a ReplicaState) -> ValueIndex<'a> {
        let mut numbers = Vec::new();
        let mut texts = Vec::new();
        for (batch, record) in replica.records() {
            if batch.is_control() {
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
    held: OnceCell<Vec<(NodeId, ValueIndex<'a>)>>,
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

/// Final logs per partition, chosen and indexed once.
pub(crate) struct FinalLogs<'a> {
    run: &'a RunData,
    logs: BTreeMap<PartitionRef, Result<IndexedLog<'a>, String>>,
}

impl<'a> FinalLogs<'a> {
    pub(crate) fn new(run: &'a RunData) -> Self {
        FinalLogs {
            run,
            logs: BTreeMap::new(),
        }
    }

    /// The final log of `partition`, indexed.
    pub(crate) fn get(&mut self, partition: &PartitionRef) -> Result<&IndexedLog<'a>, &String> {
        // Looked up before inserting: an entry would copy the name for each
        // of millions of values.
        if !self.logs.contains_key(partition) {
            let indexed = FinalLog::of(self.run, partition).map(|log| IndexedLog {
                by_value: ValueIndex::of(log.replica),
                held: OnceCell::new(),
                log,
            });
            self.logs.insert(partition.clone(), indexed);
        }
        self.logs[partition].as_ref()
    }
}

fn check(run: &RunData) -> Result<CheckResult, String> {
    let sends = acked_sends(&run.history);
    let acked = sends.values()?;
    let excused_by_run = Excuses::of(run);
    let mut acked_count = 0usize;
    let mut logs = FinalLogs::new(run);
    let mut evidence = Vec::new();
    // Legitimate losses, listed after any violation (they never make it invalid).
    let mut reported = Vec::new();
    let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
    // Why not → the first value it held back.
    let mut unknown: BTreeMap<String, String> = BTreeMap::new();
    let mut excuses: BTreeSet<String> = BTreeSet::new();
    for a in acked {
        // Counted here, entered in `counts` at the end: a map entry a value
        // costs more than the lookup below.
        acked_count += 1;
        let indexed = match logs.get(&a.partition) {
            Ok(found) => found,
            Err(why) => {
                *counts
                    .entry(match a.acks {
                        Acks::All => "unchecked-acks-all",
                        Acks::Leader => "unchecked-acks-1",
                        Acks::None => "unchecked-acks-0",
                    })
                    .or_default() += 1;
                if a.acks == Acks::All {
                    unknown.entry(why.clone()).or_insert_with(|| a.describe());
                }
                continue;
            }
        };
        let log = &indexed.log;
        if indexed.by_value.contains(a.value) {
            continue;
        }
        // Losses Kafka allows are reported by value too, not only counted.
        let mut report = |anomaly: &str, why: &str| {
            if reported.len() < EVIDENCE_MAX {
                reported.push(Evidence {
                    anomaly: anomaly.into(),
                    summary: format!(
                        "{} is not in the final log ({}): allowed, {why}",
                        a.describe(),
                        log.chosen
                    ),
                    details: a.details(),
                });
            }
        };
        match a.acks {
            Acks::Leader => {
                *counts.entry("lost-acks-1").or_default() += 1;
                report("lost-acks-1-write", "acks=1 waits for the leader alone");
            }
            Acks::None => {
                *counts.entry("lost-acks-0").or_default() += 1;
                report("lost-acks-0-write", "acks=0 waits for nothing");
            }
            Acks::All => match excused_by_run.judge(&a) {
                Judgement::Excused(why) => {
                    *counts.entry("lost-acks-all-excused").or_default() += 1;
                    report("lost-acks-all-write-excused", &why);
                    excuses.insert(why);
                }
                Judgement::Undetermined(why) => {
                    *counts.entry("lost-acks-all-undetermined").or_default() += 1;
                    unknown.entry(why).or_insert_with(|| a.describe());
                }
                Judgement::NotExcused => {
                    *counts.entry("lost-acks-all").or_default() += 1;
                    if evidence.len() >= EVIDENCE_MAX {
                        continue;
                    }
                    let lacking = indexed.lacking(a.value);
                    let mut details = a.details();
                    details["final_log"] = json!(log.chosen);
                    details["final_log_node"] = json!(log.node);
                    // Damage in the final log is often why a value is missing.
                    details["final_log_findings"] = json!(log.replica.findings.len());
                    details["lacking"] = json!(lacking);
                    evidence.push(Evidence {
                        anomaly: "lost-acknowledged-write".into(),
                        summary: format!(
                            "{} is not in the final log ({}); missing on {}; no unclean election \
                             after the ack and no power loss of its whole ISR",
                            a.describe(),
                            log.chosen,
                            lacking
                                .iter()
                                .map(NodeId::to_string)
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                        details,
                    });
                }
            },
        }
    }
    if acked_count > 0 {
        counts.insert("acknowledged", acked_count as u64);
    }
    let lost = counts.get("lost-acks-all").copied().unwrap_or(0);
    let mut result = CheckResult::fold(
        NAME,
        evidence,
        |_| format!("{lost} acknowledged acks=all value(s) lost without excuse"),
        unknown_message(unknown),
        || {
            format!(
                "{} acknowledged value(s) checked; no acks=all write lost without excuse{}",
                acked_count,
                excused_by(&excuses)
            )
        },
    );
    result.evidence.extend(reported);
    for (name, n) in counts {
        result = result.with_count(name, n);
    }
    Ok(result)
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
