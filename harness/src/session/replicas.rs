//! The replicas in `epochal up`'s closing summary: each replica as the reader
//! sees it, and whether the replicas of each partition hold the same
//! records, within the summary's bounds (shown.rs). An application may have
//! written millions of records to hundreds of topics: partitions whose
//! replicas differ come first, [`LIST_SHOWN`] partitions at most, each
//! replica with its first [`LIST_SHOWN`] records; the rest are counted, and
//! `epochal inspect` reads any data directory whole.

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::Write;

use super::shown::{self, LIST_SHOWN};
use crate::node::NodeId;
use crate::reader::{CompactReplica, read_data_dir};
use crate::run::RunReport;

/// One replica, reduced to what the summary prints and a digest of its
/// records to compare it with the partition's other replicas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replica {
    pub node: NodeId,
    /// `LEO 5 HW 5 epochs [(0, 0)] findings 0 records 5: 0@0:1 1@0:2 …`
    pub line: String,
    pub digest: u64,
}

impl Replica {
    pub fn of(node: NodeId, replica: &CompactReplica) -> Replica {
        let mut hasher = DefaultHasher::new();
        for r in &replica.records {
            (r.offset, r.epoch, r.value.as_ref().map(|v| v.as_bytes())).hash(&mut hasher);
        }
        let records: Vec<String> = replica
            .records
            .iter()
            .take(LIST_SHOWN)
            .map(|r| {
                let value = r
                    .value
                    .as_ref()
                    .map_or_else(|| "-".to_owned(), |v| shown::value(&v.to_string()));
                format!("{}@{}:{value}", r.offset, r.epoch)
            })
            .collect();
        let mut records = records.join(" ");
        if let Some(more) = shown::more(replica.records.len()) {
            records.push_str(&format!(" {more}"));
        }
        let epochs: Vec<String> = replica
            .leader_epochs
            .iter()
            .flatten()
            .map(|(epoch, start)| format!("({epoch}, {start})"))
            .collect();
        let line = format!(
            "LEO {} HW {} epochs [{}] findings {} records {}{}{records}",
            replica.log_end_offset,
            replica.high_watermark.map_or("-".into(), |h| h.to_string()),
            shown::listed(&epochs, ", "),
            replica.findings.len(),
            replica.records.len(),
            if replica.records.is_empty() { "" } else { ": " },
        );
        Replica {
            node,
            line,
            digest: hasher.finish(),
        }
    }
}

/// The replicas of each partition, by topic and partition number.
pub type ByPartition = BTreeMap<(String, i32), Vec<Replica>>;

/// Every replica the run's data directories hold, by partition; a data
/// directory the reader cannot read is a line of its own.
fn read(report: &RunReport) -> (ByPartition, Vec<String>) {
    let mut by_partition = ByPartition::new();
    let mut unread = Vec::new();
    for node in report.schedule.nodes() {
        match read_data_dir(&report.dir.data_dir(node)) {
            Ok(state) => {
                for replica in state.compact().replicas {
                    by_partition
                        .entry((replica.topic.clone(), replica.partition))
                        .or_default()
                        .push(Replica::of(node, &replica));
                }
            }
            Err(e) => unread.push(format!("{node}: {}", shown::line(&e.to_string()))),
        }
    }
    (by_partition, unread)
}

/// Writes the replicas section of the closing summary.
pub fn write(report: &RunReport, out: &mut impl Write) -> std::io::Result<()> {
    let (by_partition, unread) = read(report);
    write_partitions(&by_partition, out)?;
    for line in unread {
        writeln!(out, "  {line}")?;
    }
    Ok(())
}

/// The partitions, those whose replicas differ first, within the bounds.
pub fn write_partitions(by_partition: &ByPartition, out: &mut impl Write) -> std::io::Result<()> {
    let same = |replicas: &[Replica]| replicas.windows(2).all(|w| w[0].digest == w[1].digest);
    let identical = by_partition.values().filter(|r| same(r)).count();
    writeln!(
        out,
        "replicas (reader): records identical on every replica of {identical} of {} \
         partition(s)",
        by_partition.len()
    )?;
    let mut ordered: Vec<_> = by_partition.iter().collect();
    // Records only: epoch files may legitimately differ (a leader records
    // its epoch at election, before any batch; KAFKA-7415). The checkers
    // judge those.
    ordered.sort_by_key(|(_, replicas)| same(replicas));
    for ((topic, partition), replicas) in ordered.iter().take(LIST_SHOWN) {
        let nodes: Vec<String> = replicas.iter().map(|r| r.node.to_string()).collect();
        writeln!(
            out,
            "  {}-{partition}: records {} on {}",
            shown::escaped(topic),
            if same(replicas) {
                "identical"
            } else {
                "DIFFERENT"
            },
            shown::listed(&nodes, ", ")
        )?;
        for replica in replicas.iter().take(LIST_SHOWN) {
            writeln!(out, "    {}: {}", replica.node, replica.line)?;
        }
    }
    if let Some(more) = shown::more(ordered.len()) {
        writeln!(
            out,
            "  {more} partitions (`epochal inspect RUN/nodes/bN/data` reads a broker's whole)"
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reader::CompactRecord;

    fn replica(node: u32, values: &[&str]) -> Replica {
        let records = values
            .iter()
            .enumerate()
            .map(|(i, v)| CompactRecord {
                offset: i as i64,
                epoch: 0,
                value: Some((*v).into()),
            })
            .collect();
        let compact = CompactReplica {
            topic: "t".into(),
            partition: 0,
            log_end_offset: values.len() as i64,
            high_watermark: Some(values.len() as i64),
            recovery_point: None,
            leader_epochs: Some(vec![(0, 0)]),
            records,
            producer_snapshots: Vec::new(),
            findings: Vec::new(),
        };
        Replica::of(NodeId::new(node), &compact)
    }

    #[test]
    fn replicas_show_ten_records_cut_and_partitions_that_differ_first() {
        let long = format!("dup\u{1b}{}", "z".repeat(10_000));
        let values: Vec<&str> = std::iter::repeat_n(long.as_str(), 5000).collect();
        let same = replica(1, &values);
        assert!(
            same.line
                .starts_with("LEO 5000 HW 5000 epochs [(0, 0)] findings 0 records 5000: ")
        );
        assert!(same.line.ends_with(" and 4990 more"), "{}", same.line);
        assert!(same.line.len() < 1000, "{}", same.line);
        assert!(same.line.contains("0@0:dup\\u{1b}zzz"), "{}", same.line);

        let mut by_partition = BTreeMap::new();
        for p in 0..30 {
            let replicas = vec![replica(1, &["1", "2"]), replica(2, &["1", "2"])];
            by_partition.insert(("a".to_owned(), p), replicas);
        }
        by_partition.insert(
            ("z".to_owned(), 0),
            vec![replica(1, &["1"]), replica(2, &["2"])],
        );
        let mut out = Vec::new();
        write_partitions(&by_partition, &mut out).unwrap();
        let out = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[0],
            "replicas (reader): records identical on every replica of 30 of 31 partition(s)"
        );
        assert_eq!(lines[1], "  z-0: records DIFFERENT on b1, b2");
        assert_eq!(lines.len(), 1 + LIST_SHOWN * 3 + 1, "{out}");
        assert!(
            lines
                .last()
                .unwrap()
                .starts_with("  and 21 more partitions"),
            "{out}"
        );
    }
}
