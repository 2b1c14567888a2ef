//! A system's database and the final read over the protocol agree: for a
//! system whose brokers keep their durable state in a database, the records
//! the brokers answered the final read with are the records the database
//! holds, offset for offset. Premise: nothing writes between the two reads
//! (the final read follows the final heal and quiesce, with the workload
//! stopped; the database is read once the brokers are killed), so a broker
//! that serves what the database holds answers exactly its rows. A record
//! answered that the database does not hold came from somewhere else (a
//! cache the database no longer backs); a row the brokers did not answer is
//! one a consumer can never read.

use std::collections::{BTreeMap, BTreeSet};

use crate::reader::ReplicaState;
use crate::topic_partition::PartitionRef;

use super::CheckOutcome;
use super::evidence::{DatabaseDivergence, HeldRecord};
use super::index::{EVIDENCE_MAX, unknown_message};
use super::{Anomaly, CheckResult, Checker, Details, Evidence, Need, RunIndex};

pub const NAME: &str = "database-divergence";

pub fn checker() -> Checker {
    Checker {
        name: NAME,
        guarantee: "The system's database, read after the run by the harness's own client, holds \
            the records the brokers answered the final read over the protocol with: the same \
            record (key, value, control or data) at every offset of every partition, and no \
            other.",
        source: "Jepsen's final read is what a consumer reads; for a system whose brokers are \
            stateless over a shared database (systems/tansu.toml, systems/nisshi.toml) that \
            read must come from the database, the one store it claims durability for. \
            GUARANTEES.md, \"A system's database\".",
        not_checked: "Timestamps, headers, producer ids and epochs, batch boundaries and leader \
            epochs (the database keeps records, not batches). Internal topics (`__` prefix). \
            Partitions the final read could not read to their high watermark, a run without a \
            final read, and a database that could not be read make the verdict unknown.",
        needs: &[Need::Database],
        check,
    }
}

/// What a log holds at each offset, in offset order (the later of two
/// records at one offset winning).
fn held(replica: Option<&ReplicaState>) -> BTreeMap<i64, HeldRecord> {
    replica
        .into_iter()
        .flat_map(ReplicaState::records)
        .map(|(batch, record)| {
            let held = HeldRecord {
                control: batch.is_control(),
                key: record.key.clone(),
                value: record.value.clone(),
            };
            (record.offset, held)
        })
        .collect()
}

/// Where two logs part, and how far.
struct Parted {
    offset: i64,
    database: Option<HeldRecord>,
    protocol: Option<HeldRecord>,
    database_only: u64,
    protocol_only: u64,
    differing: u64,
}

/// The first offset where `database` and `protocol` differ, with the counts
/// over every offset; `None` when they hold the same records.
fn compare(
    database: &BTreeMap<i64, HeldRecord>,
    protocol: &BTreeMap<i64, HeldRecord>,
) -> Option<Parted> {
    let offsets: BTreeSet<i64> = database.keys().chain(protocol.keys()).copied().collect();
    let mut parted: Option<Parted> = None;
    for offset in offsets {
        let (d, p) = (database.get(&offset), protocol.get(&offset));
        if d == p {
            continue;
        }
        let at = parted.get_or_insert_with(|| Parted {
            offset,
            database: d.cloned(),
            protocol: p.cloned(),
            database_only: 0,
            protocol_only: 0,
            differing: 0,
        });
        match (d, p) {
            (Some(_), None) => at.database_only += 1,
            (None, Some(_)) => at.protocol_only += 1,
            _ => at.differing += 1,
        }
    }
    parted
}

fn describe(held: Option<&HeldRecord>) -> String {
    match held {
        None => "nothing".into(),
        Some(h) if h.control => "a control record".into(),
        Some(h) => h
            .value
            .as_ref()
            .map_or("a null value".into(), ToString::to_string),
    }
}

fn check(index: &RunIndex) -> CheckOutcome {
    let run = index.run;
    let database = match &run.database {
        None => return Ok(CheckResult::unknown(NAME, "the system names no database")),
        Some(Err(why)) => return Ok(CheckResult::unknown(NAME, why.to_string())),
        Some(Ok(database)) => database,
    };
    let Some(read) = &run.final_read else {
        return Ok(CheckResult::unknown(
            NAME,
            "the run has no final read over the protocol to hold the database against",
        ));
    };
    let partitions: BTreeSet<PartitionRef> = database
        .data
        .replicas
        .iter()
        .chain(&read.data.replicas)
        .map(ReplicaState::partition_ref)
        .chain(read.failed.keys().cloned())
        .collect();
    let mut evidence = Vec::new();
    let mut unknown: BTreeMap<String, String> = BTreeMap::new();
    let (mut compared, mut records) = (0u64, 0u64);
    for partition in &partitions {
        if let Some(why) = read.failed.get(partition) {
            unknown
                .entry("the final read did not read a partition whole".into())
                .or_insert_with(|| format!("{partition}: {why}"));
            continue;
        }
        let (topic, number) = (&partition.topic, partition.wire_partition());
        let in_database = held(database.data.replica(topic, number));
        let answered = held(read.data.replica(topic, number));
        compared += 1;
        records += in_database.len() as u64;
        let Some(parted) = compare(&in_database, &answered) else {
            continue;
        };
        if evidence.len() >= EVIDENCE_MAX {
            continue;
        }
        evidence.push(Evidence::new(
            Anomaly::DatabaseDivergence,
            format!(
                "{partition} at offset {}: the database holds {}, the final read through {} \
                 answered {} ({} offset(s) in the database alone, {} answered alone, {} \
                 differing)",
                parted.offset,
                describe(parted.database.as_ref()),
                read.via,
                describe(parted.protocol.as_ref()),
                parted.database_only,
                parted.protocol_only,
                parted.differing,
            ),
            DatabaseDivergence {
                database: parted.database,
                database_only: parted.database_only,
                differing: parted.differing,
                offset: parted.offset,
                partition: partition.clone(),
                protocol: parted.protocol,
                protocol_only: parted.protocol_only,
                via: read.via,
            },
        ));
    }
    let result = CheckResult::fold(
        NAME,
        evidence,
        |evidence| {
            let parted: BTreeSet<&PartitionRef> = evidence
                .iter()
                .filter_map(|e| match &e.details {
                    Details::DatabaseDivergence(d) => Some(&d.partition),
                    _ => None,
                })
                .collect();
            format!(
                "{} partition(s) where the database and the final read over the protocol differ",
                parted.len()
            )
        },
        unknown_message(unknown),
        || {
            format!(
                "{compared} partition(s), {records} record(s): the database holds what the \
                 final read through {} answered",
                read.via
            )
        },
    );
    Ok(result
        .with_count("partitions-compared", compared)
        .with_count("database-records", records))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(records: &[(i64, &str)]) -> BTreeMap<i64, HeldRecord> {
        records
            .iter()
            .map(|&(offset, value)| {
                let held = HeldRecord {
                    control: false,
                    key: None,
                    value: Some(value.as_bytes().to_vec().into()),
                };
                (offset, held)
            })
            .collect()
    }

    #[test]
    fn logs_part_at_their_first_difference_and_every_difference_is_counted() {
        let database = log(&[(0, "1"), (1, "2"), (2, "3"), (4, "5")]);
        assert!(compare(&database, &database.clone()).is_none());
        let protocol = log(&[(0, "1"), (1, "9"), (2, "3"), (3, "4")]);
        let parted = compare(&database, &protocol).unwrap();
        assert_eq!(parted.offset, 1);
        assert_eq!(describe(parted.database.as_ref()), "2");
        assert_eq!(describe(parted.protocol.as_ref()), "9");
        assert_eq!(
            (parted.differing, parted.protocol_only, parted.database_only),
            (1, 1, 1)
        );
        let nothing = compare(&BTreeMap::new(), &protocol).unwrap();
        assert_eq!((nothing.offset, nothing.protocol_only), (0, 4));
        assert_eq!(describe(nothing.database.as_ref()), "nothing");
    }
}
