//! A text dump of a data directory in the shape of Kafka's DumpLogSegments
//! (`--deep-iteration --print-data-log`), so people who know that tool can
//! read it at a glance: one `baseOffset: …` line per batch, one `| offset: …`
//! line per record, then the checkpoints and the findings. Producer-state
//! snapshots are dumped as DumpLogSegments dumps a `.snapshot` file, one
//! `producerId: …` line per entry, after a line saying whether the file
//! would load.

use std::io::{self, Write};

use super::{Batch, DataDirState, OffsetEntry, ProducerSnapshot, Record};

pub fn write_dump(state: &DataDirState, out: &mut impl Write) -> io::Result<()> {
    writeln!(out, "Data directory {}", state.path.display())?;
    for replica in &state.replicas {
        for segment in &replica.segments {
            writeln!(out, "Dumping {}", segment.file.display())?;
            writeln!(out, "Log starting offset: {}", segment.base_offset)?;
            for batch in &segment.batches {
                write_batch(batch, out)?;
                for record in &batch.records {
                    write_record(batch, record, out)?;
                }
            }
        }
        let epoch_file = replica.dir.join("leader-epoch-checkpoint");
        match &replica.leader_epochs {
            Some(entries) => {
                writeln!(out, "Dumping {}", epoch_file.display())?;
                for entry in entries {
                    writeln!(
                        out,
                        "epoch: {} startOffset: {}",
                        entry.epoch, entry.start_offset
                    )?;
                }
            }
            None => writeln!(out, "No readable {}", epoch_file.display())?,
        }
        for snapshot in &replica.producer_snapshots {
            write_producer_snapshot(snapshot, out)?;
        }
        writeln!(
            out,
            "{}-{}: logEndOffset: {} highWatermark: {} recoveryPoint: {}",
            replica.topic,
            replica.partition,
            replica.log_end_offset,
            optional(replica.high_watermark),
            optional(replica.recovery_point),
        )?;
    }
    write_offsets(
        "replication-offset-checkpoint",
        state.high_watermarks.as_deref(),
        out,
    )?;
    write_offsets(
        "recovery-point-offset-checkpoint",
        state.recovery_points.as_deref(),
        out,
    )?;
    writeln!(
        out,
        "Clean shutdown marker: {}",
        if state.clean_shutdown {
            "present"
        } else {
            "absent"
        }
    )?;
    let findings: Vec<_> = state.all_findings().collect();
    writeln!(out, "Findings: {}", findings.len())?;
    for finding in findings {
        writeln!(out, "  {finding}")?;
    }
    Ok(())
}

fn write_batch(batch: &Batch, out: &mut impl Write) -> io::Result<()> {
    let last_sequence = sequence_at(batch, batch.last_offset);
    let timestamp_type = if batch.is_log_append_time() {
        "LogAppendTime"
    } else {
        "CreateTime"
    };
    writeln!(
        out,
        "baseOffset: {} lastOffset: {} count: {} baseSequence: {} lastSequence: {} \
         producerId: {} producerEpoch: {} partitionLeaderEpoch: {} isTransactional: {} \
         isControl: {} position: {} {}: {} size: {} magic: {} compresscodec: {} crc: {} isvalid: {}",
        batch.base_offset,
        batch.last_offset,
        batch.records_count,
        batch.base_sequence,
        last_sequence,
        batch.producer_id,
        batch.producer_epoch,
        batch.partition_leader_epoch,
        batch.is_transactional(),
        batch.is_control(),
        batch.position,
        timestamp_type,
        batch.max_timestamp,
        batch.size_bytes,
        batch.magic,
        batch.codec.name(),
        batch.crc,
        batch.crc_valid,
    )
}

fn write_record(batch: &Batch, record: &Record, out: &mut impl Write) -> io::Result<()> {
    let size = |payload: &Option<super::Payload>| payload.as_ref().map_or(-1, |p| p.len() as i64);
    let header_keys: Vec<String> = record.headers.iter().map(|h| h.key.to_string()).collect();
    write!(
        out,
        "| offset: {} CreateTime: {} keySize: {} valueSize: {} sequence: {} headerKeys: [{}]",
        record.offset,
        record.timestamp,
        size(&record.key),
        size(&record.value),
        sequence_at(batch, record.offset),
        header_keys.join(","),
    )?;
    if let Some(key) = &record.key {
        write!(out, " key: {key}")?;
    }
    match &record.value {
        Some(value) => writeln!(out, " payload: {value}"),
        None => writeln!(out, " payload: null"),
    }
}

fn write_producer_snapshot(snapshot: &ProducerSnapshot, out: &mut impl Write) -> io::Result<()> {
    writeln!(out, "Dumping {}", snapshot.file.display())?;
    writeln!(
        out,
        "Snapshot offset: {} version: {} entries: {} size: {} isvalid: {}",
        snapshot.offset,
        snapshot
            .version
            .map_or_else(|| "none".to_owned(), |version| version.to_string()),
        snapshot.entries.len(),
        snapshot.size_bytes,
        snapshot.intact,
    )?;
    for entry in &snapshot.entries {
        write!(
            out,
            "producerId: {} producerEpoch: {} coordinatorEpoch: {} currentTxnFirstOffset: {}",
            entry.producer_id,
            entry.producer_epoch,
            entry.coordinator_epoch,
            entry.current_txn_first_offset,
        )?;
        // As Kafka, which restores batch metadata only for `lastOffset >= 0`.
        if entry.has_batch() {
            write!(
                out,
                " firstSequence: {} lastSequence: {} lastOffset: {} offsetDelta: {} timestamp: {}",
                entry.first_sequence(),
                entry.last_sequence,
                entry.last_offset,
                entry.offset_delta,
                entry.timestamp,
            )?;
        }
        writeln!(out)?;
    }
    Ok(())
}

/// The producer sequence of `offset`, or -1 for a batch without one.
fn sequence_at(batch: &Batch, offset: i64) -> i64 {
    if batch.base_sequence < 0 {
        return -1;
    }
    i64::from(batch.base_sequence) + (offset - batch.base_offset)
}

fn write_offsets(
    name: &str,
    entries: Option<&[OffsetEntry]>,
    out: &mut impl Write,
) -> io::Result<()> {
    let Some(entries) = entries else {
        return writeln!(out, "No readable {name}");
    };
    writeln!(out, "Dumping {name}")?;
    for entry in entries {
        writeln!(out, "{} {} {}", entry.topic, entry.partition, entry.offset)?;
    }
    Ok(())
}

fn optional(offset: Option<i64>) -> String {
    offset.map_or_else(|| "none".to_owned(), |offset| offset.to_string())
}
