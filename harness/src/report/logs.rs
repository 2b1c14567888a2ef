//! The final replica logs, side by side per partition: each offset a row,
//! each replica a column (value and batch leader epoch), as the reader found
//! them on disk after the run. Marked on it:
//!
//! - `diverge`: replicas hold different records at one offset (the first
//!   such row is labelled: where the logs part);
//! - `lost`: an acknowledged value the lost-write checker found in no final
//!   log (its evidence, so its excuses apply);
//! - `truncated`: any other record the history saw — acknowledged at an
//!   offset, or read there by a poll — that the final log no longer holds.
//!
//! A long log shows the rows that matter with two rows of context each,
//! every run of rows where nothing is marked folded into one line.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use crate::checker::final_log::FinalLog;
use crate::checker::{Details, Report, RunData};
use crate::history::op::RecordValue;
use crate::node::NodeId;
use crate::reader::ReplicaState;
use crate::topic_partition::PartitionRef;

use super::html::{escape, log_anchor, op_anchor};

/// Every row is shown for a log up to this many offsets.
const ALL_ROWS: usize = 400;
/// Rows of context around a marked row.
const CONTEXT: i64 = 2;
/// Marked rows shown per partition, at most.
const MARKED_LIMIT: usize = 600;

/// One replica's record at an offset: batch leader epoch and value.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Cell {
    epoch: i32,
    value: RecordValue,
    control: bool,
}

/// What the history saw at an offset: the value, how, and the op.
#[derive(Debug, Clone)]
struct Seen {
    value: RecordValue,
    how: &'static str,
    index: u64,
}

/// A replica's records by offset, sorted, the later of two at one offset
/// winning (as a fetch from it would return).
fn cells(replica: &ReplicaState) -> Vec<(i64, Cell)> {
    let mut held: Vec<(i64, Cell)> = replica
        .records()
        .map(|(batch, record)| {
            (
                record.offset,
                Cell {
                    epoch: batch.partition_leader_epoch,
                    value: shown(record.value.as_ref().map(|p| p.as_bytes())),
                    control: batch.is_control(),
                },
            )
        })
        .collect();
    held.sort_by_key(|(offset, _)| *offset);
    held.reverse();
    held.dedup_by_key(|(offset, _)| *offset);
    held.reverse();
    held
}

/// A record's value as a person reads it: text as the workload wrote it,
/// and binary values (the offsets topic's commits and group metadata) as
/// their first bytes in hex and their length, never as mangled text.
fn shown(bytes: Option<&[u8]>) -> RecordValue {
    const SHOWN: usize = 16;
    match bytes {
        Some(b) if std::str::from_utf8(b).map_or(true, |t| t.chars().any(char::is_control)) => {
            let hex: String = b.iter().take(SHOWN).map(|x| format!("{x:02x}")).collect();
            let more = if b.len() > SHOWN { "…" } else { "" };
            RecordValue::Text(format!("0x{hex}{more} ({} bytes)", b.len()))
        }
        other => RecordValue::from_bytes(other),
    }
}

fn at(list: &[(i64, Cell)], offset: i64) -> Option<&Cell> {
    list.binary_search_by_key(&offset, |(o, _)| *o)
        .ok()
        .map(|i| &list[i].1)
}

/// Every offset the history saw a value at, per partition: acks first (an
/// ack is the stronger claim), then reads.
fn seen(run: &RunData) -> BTreeMap<String, BTreeMap<i64, Seen>> {
    let mut seen: BTreeMap<String, BTreeMap<i64, Seen>> = BTreeMap::new();
    for op in &run.history {
        if let Some((send, acked)) = op.acked_send() {
            let partition = seen.entry(send.partition.to_string()).or_default();
            for (value, offset) in send.values.iter().zip(acked.offsets.iter().flatten()) {
                partition.entry(*offset).or_insert(Seen {
                    value: RecordValue::Number(*value),
                    how: "acknowledged",
                    index: op.index,
                });
            }
        }
    }
    for op in &run.history {
        if let Some((poll, read)) = op.read() {
            let partition = seen.entry(poll.partition.to_string()).or_default();
            for record in &read.records {
                partition.entry(record.offset()).or_insert(Seen {
                    value: record.value().clone(),
                    how: "read",
                    index: op.index,
                });
            }
        }
    }
    seen
}

/// Lost acknowledged writes the checkers named: partition → offset →
/// (value, history index).
fn lost(report: &Report) -> BTreeMap<String, BTreeMap<i64, (i64, u64)>> {
    let mut lost: BTreeMap<String, BTreeMap<i64, _>> = BTreeMap::new();
    for evidence in report.results.iter().flat_map(|r| &r.evidence) {
        if let Details::LostWrite(d) = &evidence.details
            && let Some(offset) = d.acked_offset
        {
            lost.entry(d.partition.to_string())
                .or_default()
                .insert(offset, (d.value, d.history_index));
        }
    }
    lost
}

/// The section: every partition any replica holds, in order.
pub fn section(run: &RunData, report: &Report) -> String {
    let mut partitions: BTreeSet<PartitionRef> = BTreeSet::new();
    for dir in run.replicas.values() {
        for replica in &dir.replicas {
            partitions.insert(replica.partition_ref());
        }
    }
    let seen = seen(run);
    let lost = lost(report);
    let empty_seen = BTreeMap::new();
    let empty_lost = BTreeMap::new();
    let mut out = String::new();
    for partition in &partitions {
        let name = partition.to_string();
        partition_table(
            run,
            partition,
            seen.get(&name).unwrap_or(&empty_seen),
            lost.get(&name).unwrap_or(&empty_lost),
            &mut out,
        );
    }
    if partitions.is_empty() {
        out.push_str("<p>No replica left a log in this run directory.</p>");
    }
    out
}

/// One partition's final logs side by side, then its replicas' epoch files
/// and findings.
fn partition_table(
    run: &RunData,
    partition: &PartitionRef,
    seen: &BTreeMap<i64, Seen>,
    lost: &BTreeMap<i64, (i64, u64)>,
    out: &mut String,
) {
    let name = partition.to_string();
    let holders = run.holders(partition);
    let (final_node, chosen) = match FinalLog::of(run, partition) {
        Ok(log) => (log.node, log.chosen),
        Err(why) => (None, why.to_string()),
    };
    let logs: Vec<(NodeId, Vec<(i64, Cell)>)> =
        holders.iter().map(|(n, r)| (*n, cells(r))).collect();
    let mut offsets: Vec<i64> = logs
        .iter()
        .flat_map(|(_, c)| c.iter().map(|(o, _)| *o))
        .collect();
    offsets.extend(seen.keys());
    offsets.extend(lost.keys());
    offsets.sort_unstable();
    offsets.dedup();
    let table = Table {
        name: &name,
        marks: Marks::of(&logs, final_node, &offsets, seen, lost),
        logs: &logs,
        final_node,
        seen,
        lost,
    };
    table.head(&chosen, out);
    table.body(&offsets, out);
    epoch_files(&holders, out);
}

/// What each offset is marked with, and the first offset where the replicas
/// differ.
struct Marks {
    marks: BTreeMap<i64, &'static str>,
    first_divergence: Option<i64>,
}

impl Marks {
    /// Marks each offset: `diverge` where the replicas differ, `truncated`
    /// where the final log lacks what the history saw, `lost` where
    /// lost-write named an acknowledged value lost (the later mark wins).
    fn of(
        logs: &[(NodeId, Vec<(i64, Cell)>)],
        final_node: Option<NodeId>,
        offsets: &[i64],
        seen: &BTreeMap<i64, Seen>,
        lost: &BTreeMap<i64, (i64, u64)>,
    ) -> Marks {
        let final_cells = logs
            .iter()
            .find(|(n, _)| Some(*n) == final_node)
            .map(|(_, c)| c.as_slice());
        let mut marks: BTreeMap<i64, &'static str> = BTreeMap::new();
        let mut first_divergence = None;
        for &offset in offsets {
            let held: Vec<&Cell> = logs.iter().filter_map(|(_, c)| at(c, offset)).collect();
            if held.windows(2).any(|w| w[0] != w[1]) {
                marks.insert(offset, "diverge");
                first_divergence.get_or_insert(offset);
            }
            if let (Some(s), Some(final_cells)) = (seen.get(&offset), final_cells)
                && at(final_cells, offset).is_none_or(|c| c.value != s.value)
            {
                marks.insert(offset, "truncated");
            }
            if lost.contains_key(&offset) {
                marks.insert(offset, "lost");
            }
        }
        Marks {
            marks,
            first_divergence,
        }
    }
}

/// One partition's table, ready to write.
struct Table<'a> {
    name: &'a str,
    /// Each replica's records, a column each.
    logs: &'a [(NodeId, Vec<(i64, Cell)>)],
    /// The node whose replica is the final log, if one could be chosen.
    final_node: Option<NodeId>,
    seen: &'a BTreeMap<i64, Seen>,
    lost: &'a BTreeMap<i64, (i64, u64)>,
    marks: Marks,
}

impl Table<'_> {
    /// Writes the partition's heading, the final log chosen, where the
    /// replicas first differ, and the table's header row (a column per
    /// replica).
    fn head(&self, chosen: &str, out: &mut String) {
        let name = self.name;
        let _ = write!(
            out,
            r#"<h3 id="{}">{}</h3><p class="chosen">final log: {}</p>"#,
            escape(&format!("partition-{name}")),
            escape(name),
            escape(chosen)
        );
        if let Some(offset) = self.marks.first_divergence {
            let _ = write!(
                out,
                r##"<p class="diverge-note">the replicas first differ at offset <a href="#{}">{offset}</a></p>"##,
                log_anchor(name, offset)
            );
        }
        let _ = write!(
            out,
            r#"<table class="log" data-partition="{}"><thead><tr><th>offset</th>"#,
            escape(name)
        );
        for (node, _) in self.logs {
            let role = if Some(*node) == self.final_node {
                " (final)"
            } else {
                ""
            };
            let _ = write!(out, "<th>{node}{role}</th>");
        }
        out.push_str("<th>the history saw</th></tr></thead><tbody>");
    }

    /// Which rows to show: all of a short log, else the marked ones (up to a
    /// bound) with context, and the ends of each replica's log; the rest fold.
    fn shown_rows(&self, offsets: &[i64]) -> BTreeSet<i64> {
        if offsets.len() <= ALL_ROWS {
            return offsets.iter().copied().collect();
        }
        let mut keep: BTreeSet<i64> = BTreeSet::new();
        for &offset in self.marks.marks.keys().take(MARKED_LIMIT) {
            keep.extend(offset - CONTEXT..=offset + CONTEXT);
        }
        keep.extend(offsets.iter().take(3));
        keep.extend(offsets.iter().rev().take(3));
        for (_, c) in self.logs {
            if let Some((last, _)) = c.last() {
                keep.insert(*last);
            }
        }
        keep
    }

    /// Writes the shown rows, a fold line for each run of rows not shown,
    /// and how many marked rows went past the bound; closes the table.
    fn body(&self, offsets: &[i64], out: &mut String) {
        let shown = self.shown_rows(offsets);
        let columns = self.logs.len() + 2;
        let mut folded = 0usize;
        for &offset in offsets {
            if !shown.contains(&offset) {
                folded += 1;
                continue;
            }
            if folded > 0 {
                let _ = write!(
                    out,
                    r#"<tr class="fold"><td colspan="{columns}">… {folded} offsets where nothing is marked …</td></tr>"#
                );
                folded = 0;
            }
            self.row(offset, out);
        }
        if folded > 0 {
            let _ = write!(
                out,
                r#"<tr class="fold"><td colspan="{columns}">… {folded} offsets where nothing is marked …</td></tr>"#
            );
        }
        let marks = &self.marks.marks;
        if marks.len() > MARKED_LIMIT {
            let _ = write!(
                out,
                r#"<tr class="fold"><td colspan="{columns}">{} more marked offsets not shown</td></tr>"#,
                marks.len() - MARKED_LIMIT
            );
        }
        out.push_str("</tbody></table>");
    }

    /// Writes one offset's row: its mark, each replica's record, and what the
    /// history saw there.
    fn row(&self, offset: i64, out: &mut String) {
        let mark = self.marks.marks.get(&offset).copied().unwrap_or("");
        let lost_value = self.lost.get(&offset);
        let data_value = lost_value
            .map(|(v, _)| format!(r#" data-value="{}""#, escape(&v.to_string())))
            .unwrap_or_default();
        let first = if self.marks.first_divergence == Some(offset) {
            " first-divergence"
        } else {
            ""
        };
        let _ = write!(
            out,
            r#"<tr id="{}" class="{mark}{first}"{data_value}><td class="offset">{offset}</td>"#,
            log_anchor(self.name, offset)
        );
        for (_, c) in self.logs {
            match at(c, offset) {
                Some(cell) => {
                    let control = if cell.control { " control" } else { "" };
                    let _ = write!(
                        out,
                        r#"<td class="rec{control}">{} <span class="epoch">e{}</span></td>"#,
                        escape(&cell.value.to_string()),
                        cell.epoch
                    );
                }
                None => out.push_str(r#"<td class="absent">—</td>"#),
            }
        }
        out.push_str("<td class=\"saw\">");
        if let Some((value, index)) = lost_value {
            let _ = write!(
                out,
                "<strong>lost:</strong> acknowledged {}",
                escape(&value.to_string())
            );
            let _ = write!(
                out,
                r##" (<a class="op-link" href="#{}">op {index}</a>)"##,
                op_anchor(*index)
            );
        } else if let Some(s) = self.seen.get(&offset) {
            let _ = write!(
                out,
                r##"{} {} (<a class="op-link" href="#{}">op {}</a>)"##,
                s.how,
                escape(&s.value.to_string()),
                op_anchor(s.index),
                s.index
            );
        }
        out.push_str("</td></tr>");
    }
}

/// Each replica's leader-epoch file and checkpoints, and what the reader
/// found wrong in its files.
fn epoch_files(holders: &[(NodeId, &ReplicaState)], out: &mut String) {
    out.push_str(
        r#"<table class="epochs"><thead><tr><th>replica</th><th>leader-epoch-checkpoint (epoch@start offset)</th><th>log end</th><th>high watermark</th><th>recovery point</th><th>findings</th></tr></thead><tbody>"#,
    );
    for (node, replica) in holders {
        let epochs = match &replica.leader_epochs {
            Some(entries) => entries
                .iter()
                .map(|e| format!("{}@{}", e.epoch, e.start_offset))
                .collect::<Vec<_>>()
                .join(", "),
            None => "absent or unreadable".into(),
        };
        let opt = |v: Option<i64>| v.map_or("—".to_owned(), |v| v.to_string());
        let findings = replica
            .findings
            .iter()
            .map(|f| escape(&format!("{}: {:?}", f.file.display(), f.kind)))
            .collect::<Vec<_>>()
            .join("<br>");
        let _ = write!(
            out,
            r#"<tr><td>{node} {}</td><td class="epoch-file">{}</td><td>{}</td><td>{}</td><td>{}</td><td class="findings">{}</td></tr>"#,
            escape(&replica.dir.display().to_string()),
            escape(&epochs),
            replica.log_end_offset,
            opt(replica.high_watermark),
            opt(replica.recovery_point),
            if findings.is_empty() {
                "none".into()
            } else {
                findings
            },
        );
    }
    out.push_str("</tbody></table>");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_values_show_as_hex_and_text_as_written() {
        assert_eq!(shown(Some(b"17")), RecordValue::Number(17));
        assert_eq!(shown(None), RecordValue::Null);
        assert_eq!(
            shown(Some(&[0, 3, 0xff])),
            RecordValue::Text("0x0003ff (3 bytes)".into())
        );
    }
}
