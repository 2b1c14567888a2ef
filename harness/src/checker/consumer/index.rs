//! The consumer checker's two large indexes, kept small: what was first seen
//! at each offset (so only offsets seen with two values are gathered and
//! sorted), and what each replica holds at each offset after the heal (its
//! payloads, read as a polled value only when compared). A long run has
//! millions of sightings and of replica records; a sorted list of full
//! sightings cost seconds and most of a gigabyte.

use std::collections::HashMap;

use crate::history::{RecordValue, value_text};
use crate::reader::Payload;
use crate::topic_partition::PartitionRef;

use super::RunData;

/// What was first seen at one offset, and whether another value was seen
/// there too.
#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    /// The first value when it is a number.
    number: i64,
    /// 0: nothing seen; 1: the number above; n ≥ 2: `FirstSeen::others[n - 2]`.
    first: u32,
    differ: bool,
}

/// One partition's slots: a list by offset up to the replicas' longest log
/// (where almost every offset seen is), a map for the rest.
struct Table {
    dense: Vec<Slot>,
    sparse: HashMap<i64, Slot>,
}

impl Table {
    fn slot(&mut self, offset: i64) -> &mut Slot {
        match usize::try_from(offset) {
            Ok(at) if at < self.dense.len() => &mut self.dense[at],
            _ => self.sparse.entry(offset).or_default(),
        }
    }

    fn get(&self, offset: i64) -> Option<&Slot> {
        match usize::try_from(offset) {
            Ok(at) if at < self.dense.len() => Some(&self.dense[at]),
            _ => self.sparse.get(&offset),
        }
    }
}

/// Per (partition, offset), the first value seen and whether another was.
pub(super) struct FirstSeen<'a> {
    run: &'a RunData,
    tables: Vec<(&'a PartitionRef, Table)>,
    /// Partition → its table, and the last one used (sightings come in runs
    /// of one partition: a send's values, a poll's records).
    by_partition: HashMap<&'a PartitionRef, usize>,
    last: Option<usize>,
    /// First values that are not numbers.
    others: Vec<RecordValue>,
    pub(super) any_differ: bool,
}

impl<'a> FirstSeen<'a> {
    pub(super) fn new(run: &'a RunData) -> FirstSeen<'a> {
        FirstSeen {
            run,
            tables: Vec::new(),
            by_partition: HashMap::new(),
            last: None,
            others: Vec::new(),
            any_differ: false,
        }
    }

    fn table(&mut self, partition: &'a PartitionRef) -> usize {
        if let Some(last) = self.last
            && self.tables[last].0 == partition
        {
            return last;
        }
        let at = match self.by_partition.get(partition) {
            Some(&at) => at,
            None => {
                let longest = self
                    .run
                    .holders(partition)
                    .iter()
                    .map(|(_, r)| usize::try_from(r.log_end_offset).unwrap_or(0))
                    .max()
                    .unwrap_or(0);
                let table = Table {
                    dense: vec![Slot::default(); longest],
                    sparse: HashMap::new(),
                };
                self.tables.push((partition, table));
                self.by_partition.insert(partition, self.tables.len() - 1);
                self.tables.len() - 1
            }
        };
        self.last = Some(at);
        at
    }

    pub(super) fn see(&mut self, partition: &'a PartitionRef, offset: i64, value: &RecordValue) {
        let at = self.table(partition);
        let slot = self.tables[at].1.slot(offset);
        match slot.first {
            0 => match value {
                RecordValue::Number(n) => {
                    slot.number = *n;
                    slot.first = 1;
                }
                other => {
                    self.others.push(other.clone());
                    slot.first = u32::try_from(self.others.len() + 1)
                        .expect("fewer than 4 G distinct non-numeric first values");
                }
            },
            1 => {
                if !matches!(value, RecordValue::Number(n) if *n == slot.number) {
                    slot.differ = true;
                    self.any_differ = true;
                }
            }
            n => {
                if self.others[n as usize - 2] != *value {
                    slot.differ = true;
                    self.any_differ = true;
                }
            }
        }
    }

    fn slot(&self, partition: &PartitionRef, offset: i64) -> Option<&Slot> {
        let &at = self.by_partition.get(partition)?;
        self.tables[at].1.get(offset)
    }

    /// Whether two values were seen at `offset` of `partition`.
    pub(super) fn differ(&self, partition: &PartitionRef, offset: i64) -> bool {
        self.slot(partition, offset).is_some_and(|s| s.differ)
    }

    /// The one value seen at `offset` of `partition`, when one was and no
    /// other was.
    pub(super) fn only(&self, partition: &PartitionRef, offset: i64) -> Option<RecordValue> {
        let slot = self.slot(partition, offset).filter(|s| !s.differ)?;
        match slot.first {
            0 => None,
            1 => Some(RecordValue::Number(slot.number)),
            n => Some(self.others[n as usize - 2].clone()),
        }
    }
}

/// What one replica holds at an offset: a plain decimal (all the workload
/// writes) read once here, so comparing a polled value with it touches no
/// payload; anything else as its payload, read as a polled value only when
/// compared or shown.
#[derive(Debug, Clone, Copy)]
enum Held<'a> {
    Number(i64),
    Null,
    Other(&'a Payload),
}

/// Offset → value of one replica's data records, the later of two records
/// at one offset winning as a map insert would.
pub(super) struct HeldValues<'a> {
    held: Vec<Held<'a>>,
    /// Each entry's offset, ascending; `None` when the offsets run from
    /// `first` without a gap (the common case: look up by subtraction).
    offsets: Option<Vec<i64>>,
    first: i64,
}

impl<'a> HeldValues<'a> {
    pub(super) fn new(mut held: Vec<(i64, Option<&'a Payload>)>) -> HeldValues<'a> {
        if !held.is_sorted_by(|a, b| a.0 < b.0) {
            // Stable, so of equal offsets the later record stays later.
            held.sort_by_key(|(offset, _)| *offset);
            held.dedup_by(|later, earlier| {
                let same = later.0 == earlier.0;
                if same {
                    std::mem::swap(later, earlier);
                }
                same
            });
        }
        let first = held.first().map_or(0, |&(offset, _)| offset);
        let contiguous = held.last().is_none_or(|last| {
            usize::try_from(last.0 - first).is_ok_and(|span| span + 1 == held.len())
        });
        let offsets = (!contiguous).then(|| held.iter().map(|&(offset, _)| offset).collect());
        let held = held
            .into_iter()
            .map(|(_, payload)| match payload {
                None => Held::Null,
                Some(payload) => match plain_number(payload.as_bytes()) {
                    Some(n) => Held::Number(n),
                    None => Held::Other(payload),
                },
            })
            .collect();
        HeldValues {
            held,
            offsets,
            first,
        }
    }

    fn find(&self, offset: i64) -> Option<Held<'a>> {
        let at = match &self.offsets {
            None => usize::try_from(offset.checked_sub(self.first)?).ok()?,
            Some(offsets) => offsets.binary_search(&offset).ok()?,
        };
        self.held.get(at).copied()
    }

    /// The value at `offset`, as a poll would record it.
    pub(super) fn get(&self, offset: i64) -> Option<RecordValue> {
        Some(match self.find(offset)? {
            Held::Number(n) => RecordValue::Number(n),
            Held::Null => RecordValue::Null,
            Held::Other(payload) => RecordValue::from_bytes(Some(payload.as_bytes())),
        })
    }

    /// Whether the value at `offset` is `value`: `get(offset) ==
    /// Some(value)`, without making the value.
    pub(super) fn holds(&self, offset: i64, value: &RecordValue) -> bool {
        let payload = match self.find(offset) {
            None => return false,
            Some(Held::Number(n)) => return *value == RecordValue::Number(n),
            Some(Held::Null) => return *value == RecordValue::Null,
            Some(Held::Other(payload)) => payload,
        };
        // As `RecordValue::from_bytes` reads it; checked as UTF-8 first,
        // since the lossy reading is slower even for text that is.
        let lossy;
        let text = match std::str::from_utf8(payload.as_bytes()) {
            Ok(text) => text,
            Err(_) => {
                lossy = String::from_utf8_lossy(payload.as_bytes());
                &*lossy
            }
        };
        match value_text(text).parse::<i64>() {
            Ok(n) => *value == RecordValue::Number(n),
            Err(_) => matches!(value, RecordValue::Text(t) if t == text),
        }
    }
}

/// `-`? and 1 to 18 ASCII digits, as a number (no overflow is possible);
/// `None` for anything else, which is then read as text.
fn plain_number(bytes: &[u8]) -> Option<i64> {
    let (negative, digits) = match bytes.split_first() {
        Some((b'-', digits)) => (true, digits),
        _ => (false, bytes),
    };
    if digits.is_empty() || digits.len() > 18 {
        return None;
    }
    let mut n = 0i64;
    for &b in digits {
        if !b.is_ascii_digit() {
            return None;
        }
        n = n * 10 + i64::from(b - b'0');
    }
    Some(if negative { -n } else { n })
}

#[cfg(test)]
mod tests {
    use super::HeldValues;
    use crate::history::RecordValue;
    use crate::reader::Payload;

    /// Whatever form a replica's values take, `get` and `holds` answer as
    /// `RecordValue::from_bytes` reads each payload, the later of two records
    /// at one offset winning, nothing where no record is.
    #[test]
    fn held_values_answer_as_a_poll_reads_each_payload() {
        let payloads: Vec<Option<Payload>> = [
            Some("7"),
            Some("-12"),
            None,
            Some("007"),
            Some("42 ....."),
            Some("not a number"),
            Some("-"),
            Some("123456789012345678901234"),
        ]
        .into_iter()
        .map(|text| text.map(|t| Payload::from(t.as_bytes().to_vec())))
        .collect();
        let probes: Vec<RecordValue> = payloads
            .iter()
            .map(|p| RecordValue::from_bytes(p.as_ref().map(Payload::as_bytes)))
            .chain([RecordValue::Number(8), RecordValue::Text("7".into())])
            .collect();
        // Contiguous from 5; with a gap; out of order with a repeat (the
        // later record at offset 9 wins).
        let layouts: [Vec<i64>; 3] = [
            (5..13).collect(),
            vec![0, 1, 2, 4, 5, 6, 8, 9],
            vec![9, 3, 1, 9, 2, 20, 11, 4],
        ];
        for offsets in layouts {
            let entries: Vec<(i64, Option<&Payload>)> = offsets
                .iter()
                .zip(&payloads)
                .map(|(&offset, payload)| (offset, payload.as_ref()))
                .collect();
            let held = HeldValues::new(entries.clone());
            for offset in -1..=21 {
                let want = entries
                    .iter()
                    .rev()
                    .find(|(o, _)| *o == offset)
                    .map(|(_, p)| RecordValue::from_bytes(p.map(Payload::as_bytes)));
                assert_eq!(held.get(offset), want, "{offsets:?} at {offset}");
                for probe in &probes {
                    assert_eq!(
                        held.holds(offset, probe),
                        want.as_ref() == Some(probe),
                        "{offsets:?} at {offset}: {probe}"
                    );
                }
            }
        }
    }
}
