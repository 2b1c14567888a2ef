//! Request faults end to end (issue 38, item 3): `epochal run` of
//! `tests/schedules/requests.toml` — a real etcd, the epochal-proxy, three
//! reference brokers and the harness's idempotent producer — holds, delays,
//! drops and duplicates the clients' Produce requests to the leader in turn.
//! What each did is read from what the run left: the history's sends, the
//! proxy's log, and every replica's log on disk.

use crate::common;

use std::collections::HashMap;
use std::path::Path;

use common::scenario::{inspect_t0, latest, read_results, run_quietly, show};
use epochal::history::{Op, OpType, Process, read_history};
use serde_json::Value;

/// Each send's values, its completion's type and how long it took (ns).
fn sends(ops: &[Op]) -> Vec<(Value, OpType, u64)> {
    let mut invoked: HashMap<Process, u64> = HashMap::new();
    let mut out = Vec::new();
    for op in ops.iter().filter(|op| op.f() == "send") {
        if op.kind == OpType::Invoke {
            invoked.insert(op.process, op.time_ns);
        } else {
            let took = op.time_ns - invoked[&op.process];
            out.push((op.value()["values"].clone(), op.kind, took));
        }
    }
    out
}

/// `text` without its terminal colour codes (`ESC [ ... m`), as the
/// proxy's log writes its fields.
fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            chars.by_ref().find(|&c| c == 'm');
        } else {
            out.push(c);
        }
    }
    out
}

#[test]
fn cluster_requests_hold_delay_drop_and_duplicate_the_leaders_produce_requests() {
    let store = tempfile::tempdir().unwrap();
    let schedule = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/schedules/requests.toml");
    let output = run_quietly(&schedule, store.path(), &[]);
    assert_eq!(output.status.code(), Some(0), "{}", show(&output));
    let dir = latest(store.path());
    assert_eq!(read_results(&dir)["verdict"], "valid");

    let ops = read_history(dir.join("history.jsonl")).expect("a valid history");
    let sends = sends(&ops);
    let kinds: Vec<(Value, OpType)> = sends.iter().map(|(v, k, _)| (v.clone(), *k)).collect();
    let v = |n: i64| serde_json::json!([n]);
    assert_eq!(
        kinds,
        [
            (v(1), OpType::Ok),
            // Held until the send's deadline: its outcome unknown.
            (v(2), OpType::Info),
            (v(3), OpType::Ok),
            (v(4), OpType::Ok),
            // Dropped, every resend too.
            (v(5), OpType::Info),
            // Sent twice, answered once.
            (v(6), OpType::Ok),
            (v(7), OpType::Ok),
        ],
        "{sends:?}"
    );
    let delayed_ns = sends[3].2;
    assert!(
        delayed_ns >= 500_000_000,
        "the delayed send was answered after {} ms",
        delayed_ns / 1_000_000
    );

    // The history names each fault's link and API as written, and where it
    // resolved.
    let hold = ops
        .iter()
        .find(|op| {
            op.process == Process::Nemesis && op.kind == OpType::Info && op.f() == "hold-requests"
        })
        .expect("the hold fired");
    assert_eq!(hold.value()["api"], "Produce", "{:?}", hold.value());
    assert_eq!(hold.value()["from"], "clients", "{:?}", hold.value());
    assert_eq!(
        hold.value()["nodes"],
        serde_json::json!(["b1"]),
        "{:?}",
        hold.value()
    );

    // The proxy did each: held, dropped, duplicated.
    let proxy = plain(&std::fs::read_to_string(dir.join("nodes/proxy.log")).unwrap());
    for what in ["request held", "request dropped", "request duplicated"] {
        assert!(proxy.contains(what), "proxy.log lacks {what:?}:\n{proxy}");
    }

    // Every replica: 2 delivered late, at release; 5 never; 6 once.
    let values = |node: &str| -> Vec<String> {
        let records = inspect_t0(&dir, node);
        let mut values: Vec<String> = records
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r[2].as_str().unwrap().to_owned())
            .collect();
        values.sort();
        values
    };
    for node in ["b1", "b2", "b3"] {
        assert_eq!(values(node), ["1", "2", "3", "4", "6", "7"], "{node}");
    }
}

/// Every client's EndTxn held for 3 s under transactional producers: the
/// held EndTxn (and each resend of it, on a fresh connection once its client
/// gave up) waits at the proxy, a transaction that sent one cannot end until
/// the release, and then ends committed or aborted as it meant to: the run
/// is valid, with no transaction left hanging.
#[test]
fn cluster_requests_a_held_end_txn_ends_its_transaction_only_after_the_release() {
    let store = tempfile::tempdir().unwrap();
    let schedule =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/schedules/requests_end_txn.toml");
    let output = run_quietly(&schedule, store.path(), &[]);
    assert_eq!(output.status.code(), Some(0), "{}", show(&output));
    let dir = latest(store.path());
    let results = read_results(&dir);
    assert_eq!(results["verdict"], "valid");

    let ops = read_history(dir.join("history.jsonl")).expect("a valid history");
    let nemesis = |f: &'static str, kind: OpType| {
        ops.iter()
            .filter(move |op| op.process == Process::Nemesis && op.kind == kind && op.f() == f)
            .map(|op| op.time_ns)
    };
    // The step holds EndTxn on the links to b1, b2 and b3, three ops one
    // after another: every EndTxn is held only once the last is in force (an
    // EndTxn to b3 sent after b1's hold took effect but before b3's was
    // answered 6 ms later, before the release, in a loaded CI run).
    let held_from = nemesis("hold-requests", OpType::Info)
        .max()
        .expect("no hold-requests info");
    let released_at = nemesis("release-requests", OpType::Invoke)
        .min()
        .expect("no release-requests invoke");
    // A transaction with a send ends with an EndTxn: none sent while every
    // EndTxn was held was answered before the release, and some transaction
    // was under way across the hold.
    let mut invoked: HashMap<Process, (u64, bool)> = HashMap::new();
    let mut across = 0;
    for op in ops.iter().filter(|op| op.f() == "txn") {
        let sends = op.value()["ops"]
            .as_array()
            .unwrap()
            .iter()
            .any(|micro| micro[0] == "send");
        if op.kind == OpType::Invoke {
            invoked.insert(op.process, (op.time_ns, sends));
            continue;
        }
        let (started, sends) = invoked[&op.process];
        // Its EndTxn went out (`commit_ns`) once the hold was in force: its
        // answer cannot have come before the release. (One sent just before
        // the hold passed the proxy and may be answered during it.)
        let end_sent = op.value()["commit_ns"].as_u64();
        if sends && op.kind == OpType::Ok && end_sent.is_some_and(|sent| sent >= held_from) {
            assert!(
                op.time_ns >= released_at,
                "a transaction whose EndTxn was sent while EndTxn was held ended before the release: {op:?}"
            );
        }
        if started < held_from && op.time_ns > released_at {
            across += 1;
        }
    }
    assert!(across > 0, "no transaction was under way across the hold");
    let proxy = plain(&std::fs::read_to_string(dir.join("nodes/proxy.log")).unwrap());
    assert!(
        proxy
            .lines()
            .any(|line| line.contains("request held") && line.contains("api_key=26")),
        "proxy.log shows no EndTxn held:\n{proxy}"
    );
    assert!(proxy.contains("held request released"), "{proxy}");
}
