//! What `epochal run` prints until the checkers give verdicts: the history's
//! counts per function and outcome, then each replica as the reader sees it
//! and whether the replicas of each partition hold the same records.

use std::collections::BTreeMap;

use crate::history::{OpType, Process};
use crate::reader::{CompactReplica, read_data_dir};

use super::{RunReport, RunStatus};

pub fn write_summary(report: &RunReport, out: &mut impl std::io::Write) -> std::io::Result<()> {
    writeln!(out, "run: {}", report.dir.path().display())?;
    match &report.status {
        RunStatus::Completed => writeln!(out, "status: completed")?,
        RunStatus::Unknown(why) => writeln!(out, "status: unknown: {why}")?,
    }
    match crate::history::read_history(report.dir.history()) {
        Ok(ops) => {
            let mut counts: BTreeMap<(String, String), usize> = BTreeMap::new();
            for op in ops.iter().filter(|op| op.kind != OpType::Invoke) {
                let who = match op.process {
                    Process::Nemesis => "nemesis",
                    Process::Client(_) => "client",
                };
                *counts
                    .entry((
                        format!("{who} {}", op.f()),
                        format!("{:?}", op.kind).to_lowercase(),
                    ))
                    .or_default() += 1;
            }
            writeln!(out, "history: {} ops", ops.len())?;
            for ((f, kind), n) in counts {
                writeln!(out, "  {f:<24} {kind:<5} {n}")?;
            }
        }
        Err(e) => writeln!(out, "history: unreadable: {e}")?,
    }
    let mut by_partition: BTreeMap<(String, i32), Vec<(crate::node::NodeId, CompactReplica)>> =
        BTreeMap::new();
    writeln!(out, "replicas (reader):")?;
    for node in report.schedule.nodes() {
        match read_data_dir(&report.dir.data_dir(node)) {
            Ok(state) => {
                for replica in state.compact().replicas {
                    let records: Vec<String> = replica
                        .records
                        .iter()
                        .map(|r| {
                            let value =
                                r.value.as_ref().and_then(|v| v.as_str().map(str::to_owned));
                            format!(
                                "{}@{}:{}",
                                r.offset,
                                r.epoch,
                                value.unwrap_or_else(|| "-".into())
                            )
                        })
                        .collect();
                    writeln!(
                        out,
                        "  {node} {}-{}: LEO {} HW {} epochs {:?} findings {} records [{}]",
                        replica.topic,
                        replica.partition,
                        replica.log_end_offset,
                        replica.high_watermark.map_or("-".into(), |h| h.to_string()),
                        replica.leader_epochs.clone().unwrap_or_default(),
                        replica.findings.len(),
                        records.join(" ")
                    )?;
                    by_partition
                        .entry((replica.topic.clone(), replica.partition))
                        .or_default()
                        .push((node, replica));
                }
            }
            Err(e) => writeln!(out, "  {node}: {e}")?,
        }
    }
    for ((topic, partition), replicas) in by_partition {
        let nodes: Vec<String> = replicas.iter().map(|(n, _)| n.to_string()).collect();
        // Records only: epoch files may legitimately differ (a leader records
        // its epoch at election, before any batch; KAFKA-7415). The checkers
        // judge those.
        let same = replicas
            .windows(2)
            .all(|w| w[0].1.records == w[1].1.records);
        writeln!(
            out,
            "  {topic}-{partition}: records {} on {}",
            if same { "identical" } else { "DIFFERENT" },
            nodes.join(", ")
        )?;
    }
    Ok(())
}
