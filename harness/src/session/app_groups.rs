//! The application's consumer-group offsets as history ops (app.rs has the
//! rest): each partition of an OffsetCommit is a `commit` of the group's
//! offset — `ok` when its answer had no error, `fail` when the error proves
//! nothing was committed, else `info` (so is a commit never answered) — and
//! each partition an OffsetFetch answered is a `committed` read of it; an
//! OffsetDelete or DeleteGroups is a `commit` of -1 marked `deleted` for
//! each partition it deleted. The committed-offsets rule then holds the
//! group's coordinators to the application's own commits and deletions.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::app_op::{AppOp, node_of, origin};
use crate::history::{Body, Commit, Committed, OpType};
use crate::reader::app_frames::{Exchange, OffsetCommit, OffsetDeletion, OffsetFetch};
use crate::topic_partition::PartitionRef;

/// The errors an OffsetCommit answers without having committed anything:
/// the request was refused before the coordinator wrote (Kafka's
/// `OffsetCommit` handling: the group's coordinator, generation and member
/// checks, the topic and size checks come first).
const COMMIT_REFUSED: &[i16] = &[
    3,  // UNKNOWN_TOPIC_OR_PARTITION
    12, // OFFSET_METADATA_TOO_LARGE
    14, // COORDINATOR_LOAD_IN_PROGRESS
    15, // COORDINATOR_NOT_AVAILABLE
    16, // NOT_COORDINATOR
    22, // ILLEGAL_GENERATION
    24, // INVALID_GROUP_ID
    25, // UNKNOWN_MEMBER_ID
    27, // REBALANCE_IN_PROGRESS
    28, // INVALID_COMMIT_OFFSET_SIZE
    29, // TOPIC_AUTHORIZATION_FAILED
    30, // GROUP_AUTHORIZATION_FAILED
    82, // FENCED_INSTANCE_ID
];

/// Each partition of an OffsetCommit as a `commit`.
pub(super) fn commit_ops(
    exchange: &Exchange,
    commit: &OffsetCommit,
    (invoke_ns, complete_ns): (u64, Option<u64>),
    until_ns: u64,
) -> Vec<AppOp> {
    commit
        .partitions
        .iter()
        .map(|(topic, partition, offset, answer)| {
            let app = origin(exchange);
            let body = Body::Commit(Commit {
                group: commit.group.clone(),
                partition: PartitionRef::new(topic, *partition as u32),
                offset: *offset,
                node: node_of(&exchange.proxy),
                generation: (commit.generation >= 0).then_some(commit.generation),
                member: (!commit.member.is_empty()).then(|| commit.member.clone()),
                deleted: false,
            });
            let answer = answer.zip(complete_ns);
            settled(
                exchange,
                body,
                app,
                answer,
                COMMIT_REFUSED,
                (invoke_ns, until_ns),
            )
        })
        .collect()
}

/// Each partition an OffsetFetch answered as a `committed` read: `ok` with
/// the offset it answered, `fail` on an error (a read changes nothing).
pub(super) fn committed_ops(
    exchange: &Exchange,
    fetch: &OffsetFetch,
    (invoke_ns, complete_ns): (u64, u64),
) -> Vec<AppOp> {
    fetch
        .answered
        .iter()
        .map(|(group, topic, partition, offset, code)| {
            let mut app = origin(exchange);
            let code = if fetch.error_code == 0 {
                *code
            } else {
                fetch.error_code
            };
            let asked = Committed {
                group: group.clone(),
                partition: PartitionRef::new(topic, *partition as u32),
                node: node_of(&exchange.proxy),
                offset: None,
                leader: None,
                stable: fetch.require_stable,
            };
            let (kind, body, error) = if code == 0 {
                let answered = Committed {
                    offset: Some(*offset),
                    ..asked.clone()
                };
                (OpType::Ok, Body::Committed(answered), None)
            } else {
                app.insert("error_code".into(), json!(code));
                let error = Some(format!("the broker answered error {code}"));
                (OpType::Fail, Body::Committed(asked.clone()), error)
            };
            AppOp {
                invoke_ns,
                complete_ns,
                connection: (exchange.proxy.clone(), exchange.connection),
                kind,
                body,
                asked: Some(Body::Committed(asked)),
                error,
                app: Value::Object(app),
            }
        })
        .collect()
}

/// The errors an OffsetDelete or DeleteGroups answers having deleted
/// nothing: the coordinator's checks come before it writes a tombstone
/// (Kafka's `GroupCoordinator.handleDeleteOffsets` and
/// `handleDeleteGroups`).
const DELETION_REFUSED: &[i16] = &[
    3,  // UNKNOWN_TOPIC_OR_PARTITION
    14, // COORDINATOR_LOAD_IN_PROGRESS
    15, // COORDINATOR_NOT_AVAILABLE
    16, // NOT_COORDINATOR
    24, // INVALID_GROUP_ID
    30, // GROUP_AUTHORIZATION_FAILED
    68, // NON_EMPTY_GROUP
    69, // GROUP_ID_NOT_FOUND
    86, // GROUP_SUBSCRIBED_TO_TOPIC
];

/// Each partition an OffsetDelete names, or for DeleteGroups each partition
/// `known` says the group committed or read, as a `commit` of -1 marked
/// `deleted`: after it the coordinator answers -1 for it, as after a commit
/// of -1. `ok` when answered without error, `fail` when the error proves
/// nothing was deleted, else `info`.
pub(super) fn deletion_ops(
    exchange: &Exchange,
    deletion: &OffsetDeletion,
    known: &BTreeMap<String, BTreeSet<PartitionRef>>,
    (invoke_ns, complete_ns): (u64, Option<u64>),
    until_ns: u64,
) -> Vec<AppOp> {
    let mut named: Vec<(String, PartitionRef, Option<i16>)> = Vec::new();
    for (group, group_answer) in &deletion.groups {
        if deletion.whole_groups {
            for partition in known.get(group).into_iter().flatten() {
                named.push((group.clone(), partition.clone(), *group_answer));
            }
            continue;
        }
        for (topic, partition, answer) in &deletion.partitions {
            // The request's own error, else the partition's.
            let code = match group_answer {
                Some(0) | None => *answer,
                refused => *refused,
            };
            named.push((
                group.clone(),
                PartitionRef::new(topic, *partition as u32),
                code,
            ));
        }
    }
    named
        .into_iter()
        .map(|(group, partition, answer)| {
            let app = origin(exchange);
            let body = Body::Commit(Commit {
                group,
                partition,
                offset: -1,
                node: node_of(&exchange.proxy),
                generation: None,
                member: None,
                deleted: true,
            });
            let answer = answer.zip(complete_ns);
            settled(
                exchange,
                body,
                app,
                answer,
                DELETION_REFUSED,
                (invoke_ns, until_ns),
            )
        })
        .collect()
}

/// A change to a group's offsets (a commit or a deletion) as an op: `ok`
/// when answered without error, `fail` when the error is one of `refused`
/// (nothing changed), else `info`, as is one never answered (then it ends
/// at `until_ns`).
fn settled(
    exchange: &Exchange,
    body: Body,
    mut app: serde_json::Map<String, Value>,
    answer: Option<(i16, u64)>,
    refused: &[i16],
    (invoke_ns, until_ns): (u64, u64),
) -> AppOp {
    let (kind, at, error) = match answer {
        Some((0, at)) => (OpType::Ok, at, None),
        Some((code, at)) => {
            app.insert("error_code".into(), json!(code));
            let kind = if refused.contains(&code) {
                OpType::Fail
            } else {
                OpType::Info
            };
            (kind, at, Some(format!("the broker answered error {code}")))
        }
        None => (
            OpType::Info,
            until_ns.max(invoke_ns),
            Some("no answer recorded".to_owned()),
        ),
    };
    AppOp {
        invoke_ns,
        complete_ns: at,
        connection: (exchange.proxy.clone(), exchange.connection),
        kind,
        body,
        asked: None,
        error,
        app: Value::Object(app),
    }
}
