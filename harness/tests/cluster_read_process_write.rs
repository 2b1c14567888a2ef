//! Subscribe-mode transactions end to end (issue 38, item 4; Jepsen's
//! read-process-write, KIP-447): `epochal run` of
//! `tests/schedules/read_process_write.toml` — two subscribers whose turns
//! are transactions that poll, send fresh values and send the group's
//! offsets (AddOffsetsToTxn, TxnOffsetCommit), under a crash of the group's
//! coordinator and a pause of another broker — is valid, and the history
//! shows what was exercised: committed and aborted transactions that sent
//! offsets, and stable reads of the group's committed offsets, none of them
//! an offset only aborted transactions sent. Needs etcd and the workspace's
//! binaries built (`cargo build --workspace --bins`).

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use common::scenario::{latest, read_results, run_quietly, show};
use epochal::history::{Body, Intent, OpType, read_history};

#[test]
fn cluster_read_process_write_under_a_coordinator_crash_and_a_pause_is_valid() {
    let store = tempfile::tempdir().unwrap();
    let schedule =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/schedules/read_process_write.toml");
    let output = run_quietly(&schedule, store.path(), &[]);
    assert_eq!(output.status.code(), Some(0), "{}", show(&output));
    let dir = latest(store.path());
    let results = read_results(&dir);
    assert_eq!(results["verdict"], "valid");
    // The committed-offsets checker judged the transactions' offsets.
    let committed = results["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["checker"] == "committed-offsets")
        .expect("the committed-offsets checker ran");
    assert!(
        committed["counts"]["txn-offsets"].as_u64() > Some(10),
        "{committed}"
    );
    assert_eq!(
        committed["counts"]["aborted-offsets-read"], 0,
        "{committed}"
    );

    let ops = read_history(dir.join("history.jsonl")).expect("a valid history");
    // Per (partition, offset) of the group: whether a transaction that
    // committed (or may have) sent it, and whether one that did not did.
    let mut sent: BTreeMap<(String, i64), (bool, bool)> = BTreeMap::new();
    let (mut committed, mut aborted) = (0, 0);
    for op in ops.iter().filter(|op| op.kind != OpType::Invoke) {
        let Some(txn) = op.txn() else { continue };
        if txn.offsets.is_empty() {
            continue;
        }
        assert_eq!(txn.group.as_deref(), Some("subscribers"), "{op:?}");
        let never = op.kind == OpType::Fail || txn.intent == Intent::Abort && op.kind == OpType::Ok;
        if never {
            aborted += 1;
        } else if op.kind == OpType::Ok {
            committed += 1;
        }
        for (p, &offset) in &txn.offsets {
            let entry = sent.entry((p.to_string(), offset)).or_default();
            if never {
                entry.1 = true;
            } else {
                entry.0 = true;
            }
        }
    }
    assert!(
        committed >= 10,
        "{committed} committed transactions sent offsets"
    );
    assert!(aborted >= 1, "no aborted transaction sent offsets");
    let only_aborted: BTreeSet<&(String, i64)> = sent
        .iter()
        .filter(|(_, (may, never))| *never && !*may)
        .map(|(k, _)| k)
        .collect();
    let mut stable_reads = 0;
    for op in ops.iter().filter(|op| op.kind == OpType::Ok) {
        let Body::Committed(c) = &op.body else {
            continue;
        };
        if !c.stable {
            continue;
        }
        stable_reads += 1;
        let key = (c.partition.to_string(), c.offset.unwrap_or(-1));
        assert!(
            !only_aborted.contains(&key),
            "a read of the group's offset answered one only an aborted transaction sent: {op:?}"
        );
    }
    assert!(stable_reads > 0, "no stable read of the group's offsets");
}
