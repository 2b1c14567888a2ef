//! The background workload on a real cluster: producers and consumers run
//! beside the steps, their ops interleave in one valid history, the
//! `N more writes acknowledged` await counts real acks after a fault, and an
//! await for acks that cannot come ends the run unknown with every op
//! completed.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use common::scenario::{latest, read_results, run_quietly, show};
use epochal::history::{Op, OpType, Process, read_history};

fn schedule(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/schedules")
        .join(name)
}

fn client(op: &Op) -> Option<u64> {
    match op.process {
        Process::Client(p) => Some(p),
        Process::Nemesis => None,
    }
}

/// Every invoke has its completion: no worker was cut off mid-request.
fn assert_every_op_completed(ops: &[Op]) {
    let mut open: BTreeMap<u64, &Op> = BTreeMap::new();
    for op in ops {
        let Some(p) = client(op) else { continue };
        if op.kind == OpType::Invoke {
            assert!(open.insert(p, op).is_none(), "two invokes on {p}");
        } else {
            assert!(
                open.remove(&p).is_some(),
                "completion without invoke: {op:?}"
            );
        }
    }
    assert!(open.is_empty(), "left in flight: {open:?}");
}

#[test]
fn cluster_background_workers_interleave_and_the_ack_await_counts_acks_after_a_crash() {
    let store = tempfile::tempdir().unwrap();
    let output = run_quietly(&schedule("background_crash.toml"), store.path(), &[]);
    assert_eq!(output.status.code(), Some(0), "{}", show(&output));
    let dir = latest(store.path());
    let ops = read_history(dir.join("history.jsonl")).expect("a valid history");
    assert_every_op_completed(&ops);

    // Four workers at least (more if a send ended info and its worker went
    // on as a new process), and their ops overlap in time: some op was
    // invoked while another process had one in flight.
    let processes: BTreeSet<u64> = ops.iter().filter_map(client).collect();
    assert!(processes.len() >= 4, "{processes:?}");
    let mut in_flight = BTreeSet::new();
    let mut overlapped = false;
    for op in ops.iter().filter(|op| client(op).is_some()) {
        let p = client(op).unwrap();
        if op.kind == OpType::Invoke {
            overlapped |= !in_flight.is_empty();
            in_flight.insert(p);
        } else {
            in_flight.remove(&p);
        }
    }
    assert!(overlapped, "no two client ops were ever in flight together");

    // Each value sent once, counting up from 1000000.
    let sent: Vec<i64> = ops
        .iter()
        .filter(|op| op.f() == "send" && op.kind == OpType::Invoke)
        .map(|op| op.value()["values"][0].as_i64().unwrap())
        .collect();
    let distinct: BTreeSet<i64> = sent.iter().copied().collect();
    assert_eq!(distinct.len(), sent.len());
    assert!(sent.iter().all(|&v| v >= 1_000_000), "{sent:?}");

    // The awaits held the faults apart by real acks: at least 30 sends
    // invoked after the crash were acknowledged before the restart (all by b2
    // or b3, as b1 was dead), and at least 30 after the restart. (An ok is
    // recorded after the etcd read that follows its ack, so a send b1 acked
    // just before its crash may complete after the crash op.)
    let at = |f: &str| {
        ops.iter()
            .position(|op| op.process == Process::Nemesis && op.f() == f && op.kind == OpType::Info)
            .unwrap_or_else(|| panic!("no {f}"))
    };
    let (crash, restart) = (at("crash"), at("restart"));
    // Sends both invoked and acknowledged within the range.
    let acked = |range: std::ops::Range<usize>| -> Vec<&Op> {
        let ops = &ops[range];
        let invoked: BTreeSet<i64> = ops
            .iter()
            .filter(|op| op.f() == "send" && op.kind == OpType::Invoke)
            .map(|op| op.value()["values"][0].as_i64().unwrap())
            .collect();
        ops.iter()
            .filter(|op| op.f() == "send" && op.kind == OpType::Ok)
            .filter(|op| invoked.contains(&op.value()["values"][0].as_i64().unwrap()))
            .collect()
    };
    let during = acked(crash..restart);
    assert!(
        during.len() >= 30,
        "{} acked while b1 was down",
        during.len()
    );
    assert!(during.iter().all(|op| op.value()["node"] != "b1"));
    let after = acked(restart..ops.len());
    assert!(after.len() >= 30, "{} acked after the restart", after.len());
    // An ack carries the ISR and leader epoch etcd showed just after it.
    assert!(
        during
            .iter()
            .all(|op| op.value()["isr"].is_array() && op.value()["leader_epoch"].is_i64())
    );

    // The consumers read records, both partitions, and the run is valid.
    let read: BTreeSet<String> = ops
        .iter()
        .filter(|op| op.f() == "poll" && op.kind == OpType::Ok)
        .filter(|op| {
            op.value()["records"]
                .as_array()
                .is_some_and(|r| !r.is_empty())
        })
        .map(|op| op.value()["partition"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(read, BTreeSet::from(["t-0".to_owned(), "t-1".to_owned()]));
    let results = read_results(&dir);
    assert_eq!(results["verdict"], "valid", "{results:#}");
    let log = std::fs::read_to_string(dir.join("harness.log")).unwrap();
    assert!(log.contains("background workload stopped"), "{log}");
}

#[test]
fn cluster_background_ack_await_that_cannot_be_met_ends_the_run_unknown() {
    let store = tempfile::tempdir().unwrap();
    let output = run_quietly(&schedule("background_stalled.toml"), store.path(), &[]);
    assert_eq!(output.status.code(), Some(2), "{}", show(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("more writes acknowledged"), "{stdout}");
    let dir = latest(store.path());
    let log = std::fs::read_to_string(dir.join("harness.log")).unwrap();
    assert!(
        log.contains("step 4: \"5 more writes acknowledged\" not within 4s"),
        "{log}"
    );
    // The history is whole: the workers finished their requests, and no send
    // made after b3 had stopped (the stop op's completion) was acknowledged.
    let ops = read_history(dir.join("history.jsonl")).expect("a valid history");
    assert_every_op_completed(&ops);
    let stop = ops
        .iter()
        .position(|op| {
            op.process == Process::Nemesis && op.f() == "stop" && op.kind == OpType::Info
        })
        .unwrap();
    // (Sends invoked after the stop: one acked just before it may complete
    // after it, its ok being recorded after an etcd read.)
    let invoked: BTreeSet<i64> = ops[stop..]
        .iter()
        .filter(|op| op.f() == "send" && op.kind == OpType::Invoke)
        .map(|op| op.value()["values"][0].as_i64().unwrap())
        .collect();
    let failed = ops[stop..]
        .iter()
        .filter(|op| op.f() == "send" && op.kind != OpType::Invoke)
        .filter(|op| invoked.contains(&op.value()["values"][0].as_i64().unwrap()))
        .inspect(|op| assert_ne!(op.kind, OpType::Ok, "{op:?}"))
        .count();
    assert!(failed > 0);
    assert!(dir.join("results.json").exists());
}

#[test]
fn cluster_background_of_subscribers_only_polls_and_commits_what_the_steps_wrote() {
    let store = tempfile::tempdir().unwrap();
    let output = run_quietly(
        &schedule("background_subscribers_only.toml"),
        store.path(),
        &[],
    );
    assert_eq!(output.status.code(), Some(0), "{}", show(&output));
    let dir = latest(store.path());
    let ops = read_history(dir.join("history.jsonl")).expect("a valid history");
    assert_every_op_completed(&ops);
    // Nobody but the steps' client sent; both subscribers committed.
    let senders: BTreeSet<u64> = ops
        .iter()
        .filter(|op| op.kind == OpType::Ok && op.send().is_some())
        .filter_map(client)
        .collect();
    assert_eq!(senders.len(), 1, "{senders:?}");
    let committers: BTreeSet<u64> = ops
        .iter()
        .filter(|op| op.kind == OpType::Ok && op.f() == "commit")
        .filter_map(client)
        .collect();
    assert_eq!(committers.len(), 2, "{committers:?}");
    assert_eq!(read_results(&dir)["verdict"], "valid");
}
