//! The consumer and high-watermark checkers on run directories built by hand:
//! a history written through `HistoryWriter`, replica logs written as real
//! segment files by kafka-protocol's encoder, all loaded by `RunData::load`
//! (the reader's `read_data_dir` for every node). Each anomaly has a run that
//! must be rejected and a near-identical one that must be accepted.

use epochal::checker::{CheckResult, RunData, Verdict, consumer, high_watermark};
use epochal::history::{Body, HistoryWriter, OpType, Process};
use epochal::observe::timeline::{PartitionStateChange, Timeline};
use epochal::reader::read_data_dir;
use serde_json::{Value, json};

use crate::common;
use common::{plain_batch, write_log};

/// A run directory's history, written op by op.
struct Run {
    dir: tempfile::TempDir,
    history: HistoryWriter,
}

impl Run {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let history = HistoryWriter::create(dir.path().join("history.jsonl")).unwrap();
        Run { dir, history }
    }

    fn op(&mut self, process: u64, f: &str, invoke: Value, ok: Value) {
        let p = Process::Client(process);
        self.history
            .invoke(
                p,
                Body::from_value(f, OpType::Invoke, invoke.clone()).unwrap(),
            )
            .unwrap();
        let mut value = invoke;
        for (k, v) in ok.as_object().unwrap() {
            value[k] = v.clone();
        }
        self.history
            .append(
                p,
                OpType::Ok,
                Body::from_value(f, OpType::Ok, value).unwrap(),
                None,
            )
            .unwrap();
    }

    fn send(&mut self, acks: &str, values: Value, offsets: Value) {
        self.op(
            9,
            "send",
            json!({"partition": "t-0", "values": values, "acks": acks, "node": "b1"}),
            json!({"offsets": offsets}),
        );
    }

    fn poll(&mut self, process: u64, node: &str, from: i64, records: Value, hw: i64) {
        self.op(
            process,
            "poll",
            json!({"partition": "t-0", "from_offset": from, "node": node}),
            json!({"records": records, "high_watermark": hw}),
        );
    }

    /// Node `node`'s replica of t-0, as real segment bytes.
    fn replica(&self, node: &str, batches: &[Vec<u8>]) {
        let data = self.dir.path().join("nodes").join(node).join("data");
        write_log(&data, "t-0", batches);
        let read = read_data_dir(&data).unwrap();
        assert_eq!(read.all_findings().count(), 0, "{node}'s log is clean");
    }

    fn load(&self) -> RunData {
        RunData::load(&epochal::run_dir::RunDir::open(self.dir.path())).unwrap()
    }
}

fn consumer_check(run: &Run) -> CheckResult {
    consumer::checker().check_run(&run.load()).unwrap()
}

fn anomalies(result: &CheckResult) -> Vec<&str> {
    result.evidence.iter().map(|e| e.anomaly.name()).collect()
}

/// Both replicas hold values 1, 2, 3 at offsets 0, 1, 2.
fn healthy(run: &Run) {
    for node in ["b1", "b2"] {
        run.replica(
            node,
            &[plain_batch(0, false, &[(0, "1"), (1, "2"), (2, "3")])],
        );
    }
}

#[test]
fn consumer_accepts_a_consistent_run_on_real_segments() {
    let mut run = Run::new();
    healthy(&run);
    run.send("all", json!([1, 2, 3]), json!([0, 1, 2]));
    run.poll(0, "b1", 0, json!([[0, 1], [1, 2], [2, 3]]), 3);
    run.poll(1, "b1", 1, json!([[1, 2], [2, 3]]), 3);
    let result = consumer_check(&run);
    assert_eq!(result.verdict, Verdict::Valid, "{result:?}");
    assert_eq!(result.counts["records-read"], 5);
    let result = high_watermark::checker().check_run(&run.load()).unwrap();
    assert_eq!(result.verdict, Verdict::Valid, "{result:?}");
}

#[test]
fn consumer_inconsistent_offsets_between_an_acked_send_and_a_poll() {
    let mut run = Run::new();
    healthy(&run);
    run.send("all", json!([1, 7]), json!([0, 1]));
    run.poll(0, "b1", 0, json!([[0, 1], [1, 2]]), 2);
    let result = consumer_check(&run);
    assert_eq!(result.verdict, Verdict::Invalid);
    assert_eq!(anomalies(&result), vec!["inconsistent-offsets"]);
    let values = &result.evidence[0].details.json()["values"];
    assert_eq!(result.evidence[0].details.json()["offset"], json!(1));
    assert_eq!(
        *values,
        json!([
            {"value": 2, "polls": [3], "sends": []},
            {"value": 7, "polls": [], "sends": [1]},
        ])
    );
}

#[test]
fn consumer_inconsistent_offsets_between_two_polls() {
    let mut run = Run::new();
    healthy(&run);
    run.poll(0, "b1", 2, json!([[2, 3]]), 3);
    run.poll(1, "b2", 2, json!([[2, 4]]), 3);
    let result = consumer_check(&run);
    // b1 and b2 hold 3 at offset 2: the read of 4 is also a truncated read.
    assert_eq!(
        anomalies(&result),
        vec!["inconsistent-offsets", "truncated-read"]
    );
    assert_eq!(result.evidence[1].details.json()["value"], json!(4));
}

#[test]
fn consumer_an_acks1_send_reassigned_is_not_inconsistent_offsets() {
    let mut run = Run::new();
    healthy(&run);
    // Kafka lets an acks=1 write be lost and its offset reused.
    run.send("1", json!([9]), json!([2]));
    run.poll(0, "b1", 2, json!([[2, 3]]), 3);
    let result = consumer_check(&run);
    assert_eq!(result.verdict, Verdict::Valid, "{result:?}");
}

#[test]
fn poll_skip_from_the_from_offset() {
    let mut run = Run::new();
    healthy(&run);
    run.poll(0, "b1", 0, json!([[1, 2], [2, 3]]), 3);
    let result = consumer_check(&run);
    assert_eq!(anomalies(&result), vec!["poll-skip"]);
    // The skipped record is named with the value the replicas hold there.
    assert_eq!(
        result.evidence[0].details.json()["skipped"],
        json!([[0, 1]])
    );
    assert_eq!(result.evidence[0].details.json()["index"], json!(1));
}

#[test]
fn poll_skip_within_a_poll_and_its_control_record_exemption() {
    // b1 holds a data record at offset 1: reading 0 then 2 skipped it.
    let mut run = Run::new();
    healthy(&run);
    run.poll(0, "b1", 0, json!([[0, 1], [2, 3]]), 3);
    let result = consumer_check(&run);
    assert_eq!(anomalies(&result), vec!["int-poll-skip"]);
    assert_eq!(
        result.evidence[0].details.json()["skipped"],
        json!([[1, 2]])
    );

    // The same poll over a log whose offset 1 is a control record (a marker
    // the client drops) skipped nothing.
    let mut run = Run::new();
    for node in ["b1", "b2"] {
        run.replica(
            node,
            &[
                plain_batch(0, false, &[(0, "1")]),
                plain_batch(0, true, &[(1, "marker")]),
                plain_batch(0, false, &[(2, "3")]),
            ],
        );
    }
    run.poll(0, "b1", 0, json!([[0, 1], [2, 3]]), 3);
    let result = consumer_check(&run);
    assert_eq!(result.verdict, Verdict::Valid, "{result:?}");
}

#[test]
fn poll_nonmonotonic_within_a_poll() {
    let mut run = Run::new();
    healthy(&run);
    run.poll(0, "b1", 0, json!([[0, 1], [1, 2], [1, 2], [2, 3]]), 3);
    let result = consumer_check(&run);
    assert_eq!(anomalies(&result), vec!["int-nonmonotonic-poll"]);
    assert_eq!(result.evidence[0].details.json()["offset"], json!(1));
    assert_eq!(result.evidence[0].details.json()["after"], json!(1));
}

#[test]
fn consumer_truncated_read_against_the_final_replica_logs() {
    // b2 ends with another value at offset 2, b1 with nothing there.
    let mut run = Run::new();
    run.replica("b1", &[plain_batch(0, false, &[(0, "1"), (1, "2")])]);
    run.replica(
        "b2",
        &[
            plain_batch(0, false, &[(0, "1"), (1, "2")]),
            plain_batch(1, false, &[(2, "8")]),
        ],
    );
    run.poll(0, "b1", 1, json!([[1, 2], [2, 3]]), 3);
    let result = consumer_check(&run);
    assert_eq!(anomalies(&result), vec!["truncated-read"]);
    let e = &result.evidence[0];
    assert_eq!(e.details.json()["offset"], json!(2));
    assert_eq!(e.details.json()["value"], json!(3));
    assert_eq!(e.details.json()["polls"], json!([1]));
    assert_eq!(
        e.details.json()["replicas"],
        json!({
            "b1": {"value": null, "log_end_offset": 2, "findings": 0},
            "b2": {"value": 8, "log_end_offset": 3, "findings": 0},
        })
    );
    assert!(e.summary.contains("b1 holds nothing"), "{}", e.summary);
    assert!(e.summary.contains("b2 holds 8"), "{}", e.summary);

    // One replica still holding the read value does not excuse the other.
    let mut run = Run::new();
    run.replica("b1", &[plain_batch(0, false, &[(0, "1"), (1, "2")])]);
    run.replica("b2", &[plain_batch(0, false, &[(0, "1"), (1, "5")])]);
    run.poll(0, "b1", 1, json!([[1, 2]]), 2);
    let result = consumer_check(&run);
    assert_eq!(anomalies(&result), vec!["truncated-read"]);
    assert_eq!(
        result.evidence[0].details.json()["replicas"]["b1"]["value"],
        json!(2)
    );
    assert!(
        !result.evidence[0].summary.contains("b1"),
        "{}",
        result.evidence[0].summary
    );

    // Reading only what both still hold is fine.
    let mut run = Run::new();
    run.replica("b1", &[plain_batch(0, false, &[(0, "1"), (1, "2")])]);
    run.replica("b2", &[plain_batch(0, false, &[(0, "1"), (1, "2")])]);
    run.poll(0, "b1", 1, json!([[1, 2]]), 2);
    assert_eq!(consumer_check(&run).verdict, Verdict::Valid);
}

#[test]
fn consumer_truncated_read_is_unknown_without_replicas() {
    let mut run = Run::new();
    run.poll(0, "b1", 0, json!([[0, 1]]), 1);
    let result = consumer_check(&run);
    assert_eq!(result.verdict, Verdict::Unknown);
    assert!(result.message.contains("t-0"), "{}", result.message);
}

#[test]
fn watermark_regression_on_one_leader_from_a_stored_run() {
    let timeline = |epochs: &[(i32, i32)]| {
        let states: Vec<Value> = epochs
            .iter()
            .enumerate()
            .map(|(i, (leader, epoch))| {
                json!({"revision": i + 1, "topic": "t", "partition": 0, "leader": leader,
                       "leader_epoch": epoch, "isr": [1, 2], "controller_epoch": 1})
            })
            .collect();
        json!({"partition_states": states, "controllers": []}).to_string()
    };
    let build = |epochs: &[(i32, i32)], second_node: &str| {
        let mut run = Run::new();
        healthy(&run);
        std::fs::write(run.dir.path().join("timeline.json"), timeline(epochs)).unwrap();
        run.poll(0, "b1", 3, json!([]), 3);
        run.poll(1, second_node, 2, json!([[2, 3]]), 2);
        high_watermark::checker().check_run(&run.load()).unwrap()
    };
    let result = build(&[(1, 0)], "b1");
    assert_eq!(result.verdict, Verdict::Invalid, "{result:?}");
    assert_eq!(anomalies(&result), vec!["high-watermark-regressed"]);
    assert_eq!(
        result.evidence[0].details.json()["earlier"]["index"],
        json!(1)
    );
    assert_eq!(
        result.evidence[0].details.json()["later"]["index"],
        json!(3)
    );
    // A new leader lagging the old one (KIP-207) is counted, not invalid.
    let result = build(&[(1, 0), (2, 1)], "b2");
    assert_eq!(result.verdict, Verdict::Valid, "{result:?}");
    assert_eq!(result.counts["drops-across-leaders"], 1);
}

#[test]
fn watermark_checkers_are_listed() {
    let names: Vec<&str> = epochal::checker::all().iter().map(|c| c.name).collect();
    assert!(names.contains(&"consumer") && names.contains(&"high-watermark"));
}

/// Two acks=all sends at offset 0 under ISR [1] in leader epoch `acked_epoch`
/// (value 1, b1 leading alone) and epoch 2 (value 2); etcd's timeline: b1
/// leads epoch 1 with ISR [1], then b2 leads epoch 2 with ISR [2] — an unclean
/// election (b2 was not in [1]) when `unclean`, else a clean one from ISR [1, 2].
fn offset_reused_after_failover(unclean: bool, acked_epoch: i64) -> CheckResult {
    let mut run = Run::new();
    for node in ["b1", "b2"] {
        run.replica(node, &[plain_batch(2, false, &[(0, "2")])]);
    }
    for (value, epoch, isr) in [(1, acked_epoch, json!([1])), (2, 2, json!([2]))] {
        run.op(
            9,
            "send",
            json!({"partition": "t-0", "values": [value], "acks": "all", "node": "b1"}),
            json!({"offsets": [0], "isr": isr, "leader_epoch": epoch}),
        );
    }
    let state = PartitionStateChange::of_t0;
    let first_isr: &[i32] = if unclean { &[1] } else { &[1, 2] };
    let timeline = Timeline {
        partition_states: vec![state(5, 1, 1, first_isr), state(9, 2, 2, &[2])],
        controllers: vec![],
        registrations: Vec::new(),
    };
    std::fs::write(
        run.dir.path().join("timeline.json"),
        serde_json::to_string(&timeline).unwrap(),
    )
    .unwrap();
    consumer_check(&run)
}

#[test]
fn consumer_an_acks_all_send_lost_to_a_later_unclean_election_may_have_its_offset_reused() {
    // KIP-101's unclean-election case: b1's acked 1 at offset 0 is lost when
    // b2 is elected uncleanly in epoch 2, and b2 acks 2 at offset 0.
    let result = offset_reused_after_failover(true, 1);
    assert_eq!(result.verdict, Verdict::Valid, "{result:?}");
    assert_eq!(result.counts["acks-all-values-excused"], 1);

    // A clean failover excuses nothing: two acks=all values at one offset.
    let result = offset_reused_after_failover(false, 1);
    assert_eq!(
        anomalies(&result),
        vec!["inconsistent-offsets"],
        "{result:?}"
    );
    assert_eq!(result.counts.get("acks-all-values-excused"), None);

    // Acked in the unclean election's own epoch: the election came first.
    let result = offset_reused_after_failover(true, 2);
    assert_eq!(
        anomalies(&result),
        vec!["inconsistent-offsets"],
        "{result:?}"
    );
}

/// An ok acks=all send of `values` at `offsets`, with the ISR and leader epoch
/// etcd showed just after the ack (what lost-write's excuses need).
fn send_all_with_isr(run: &mut Run, values: Value, offsets: Value, isr: &[i64], epoch: i64) {
    run.op(
        9,
        "send",
        json!({"partition": "t-0", "values": values, "acks": "all", "node": "b1"}),
        json!({"offsets": offsets, "isr": isr, "leader_epoch": epoch}),
    );
}

/// A power loss of `node` that cut its t-0 back to `end_after`.
fn power_loss(run: &mut Run, node: &str, end_after: i64) {
    let target = json!({"target": node});
    run.history
        .invoke(
            Process::Nemesis,
            Body::from_value("power-loss", OpType::Invoke, target.clone()).unwrap(),
        )
        .unwrap();
    let mut value = target;
    value["nodes"] = json!([node]);
    value["cut"] = json!([{"node": node, "cuts": [{
        "replica": "t-0", "log_end_offset_before": 2, "log_end_offset_after": end_after,
        "bytes_removed": 69, "segments_deleted": [],
    }]}]);
    run.history
        .append(
            Process::Nemesis,
            OpType::Info,
            Body::from_value("power-loss", OpType::Info, value).unwrap(),
            None,
        )
        .unwrap();
}

/// KIP-101 scenario 2's acks: value 2 acked at offset 1 under ISR {b1}, b1's
/// power loss cuts offset 1, and value 3 is acked at offset 1 afterwards.
/// GUARANTEES.md's rule excuses losing 2, so 3 reusing its offset is no anomaly; without
/// the power loss (or with one that did not reach offset 1) it is.
#[test]
fn consumer_an_acks_all_send_lost_to_a_whole_isr_power_loss_may_have_its_offset_reused() {
    let build = |cut_to: Option<i64>| {
        let mut run = Run::new();
        for node in ["b1", "b2"] {
            run.replica(node, &[plain_batch(0, false, &[(0, "1"), (1, "3")])]);
        }
        send_all_with_isr(&mut run, json!([1]), json!([0]), &[1, 2], 0);
        send_all_with_isr(&mut run, json!([2]), json!([1]), &[1], 1);
        if let Some(end_after) = cut_to {
            power_loss(&mut run, "b1", end_after);
        }
        send_all_with_isr(&mut run, json!([3]), json!([1]), &[1], 2);
        run
    };

    let result = consumer_check(&build(Some(1)));
    assert_eq!(result.verdict, Verdict::Valid, "{result:?}");
    assert_eq!(result.counts["acks-all-values-excused"], 1, "{result:?}");

    for cut_to in [None, Some(2)] {
        let result = consumer_check(&build(cut_to));
        assert_eq!(result.verdict, Verdict::Invalid, "{cut_to:?}: {result:?}");
        assert_eq!(anomalies(&result), vec!["inconsistent-offsets"]);
        assert_eq!(result.evidence[0].details.json()["offset"], json!(1));
        assert!(!result.counts.contains_key("acks-all-values-excused"));
    }
}
