//! The data checkers (lost-write, offset-changed, divergence, epoch-file,
//! duplicates) on run directories built from real segment files — written by
//! kafka-protocol's encoder (`common::segments`), read back through
//! `RunData::load` and so through `read_data_dir` — with histories written by
//! `HistoryWriter` and etcd timelines as `timeline.json`. Each checker meets a
//! run it must reject and one it must accept, damaged data directories
//! included.

use std::fs;
use std::path::Path;

use epochal::checker::Anomaly;
use epochal::checker::{self, CheckResult, Checker, RunData, Verdict};
use epochal::history::{Body, HistoryWriter, OpType, Process};
use epochal::node::NodeId;
use epochal::observe::timeline::{PartitionStateChange, Timeline};
use serde_json::{Value, json};

use crate::common;
use common::segments::{
    SpecBatch, SpecCodec, SpecDataDir, SpecRecord, SpecReplica, SpecSegment, write_fixture,
};

// ---- building runs -----------------------------------------------------------

/// One batch of integer values (as the workload writes them: decimal text)
/// starting at `base`.
fn values(epoch: i32, base: i64, values: &[i64]) -> SpecBatch {
    SpecBatch {
        epoch,
        codec: SpecCodec::None,
        producer: None,
        records: values
            .iter()
            .enumerate()
            .map(|(i, v)| SpecRecord {
                offset: base + i as i64,
                key: None,
                value: Some(v.to_string().into_bytes()),
                headers: Vec::new(),
            })
            .collect(),
    }
}

/// `t-0` on one node: one segment holding `batches`, and its epoch file.
fn write_node(run: &Path, node: &str, batches: Vec<SpecBatch>, epochs: &[(i32, i64)]) {
    let spec = SpecDataDir {
        name: "checker",
        replicas: vec![SpecReplica {
            topic: "t",
            partition: 0,
            segments: vec![SpecSegment {
                base_offset: 0,
                batches,
            }],
            epochs: epochs.to_vec(),
        }],
        high_watermarks: vec![],
        recovery_points: vec![],
        clean_shutdown: false,
    };
    write_fixture(&spec, &run.join("nodes").join(node).join("data"));
}

const SEGMENT: &str = "data/t-0/00000000000000000000.log";
const EPOCHS: &str = "data/t-0/leader-epoch-checkpoint";

/// Every acked value kept: [1, 2] at 0..=1 and [3] at 2, epoch 0.
fn full() -> Vec<SpecBatch> {
    vec![values(0, 0, &[1, 2]), values(0, 2, &[3])]
}

/// Value 3 gone: offset 2 holds 4, written in epoch 1.
fn lost() -> Vec<SpecBatch> {
    vec![values(0, 0, &[1, 2]), values(1, 2, &[4])]
}

fn everywhere(run: &Path, batches: fn() -> Vec<SpecBatch>, epochs: &[(i32, i64)]) {
    for node in ["b1", "b2", "b3"] {
        write_node(run, node, batches(), epochs);
    }
}

struct History {
    writer: HistoryWriter,
    client: u64,
}

impl History {
    fn new(run: &Path) -> Self {
        History {
            writer: HistoryWriter::create(run.join("history.jsonl")).unwrap(),
            client: 0,
        }
    }

    /// A send of `values` to `t-0` that ended ok; returns the ok's index.
    fn send(
        &mut self,
        values: &[i64],
        acks: &str,
        offsets: &[i64],
        isr: &[u32],
        epoch: i32,
    ) -> u64 {
        let process = Process::Client(self.client);
        self.client += 1;
        let mut value = json!({"partition": "t-0", "values": values, "acks": acks, "node": "b1"});
        self.writer
            .invoke(
                process,
                Body::from_value("send", OpType::Invoke, value.clone()).unwrap(),
            )
            .unwrap();
        value["offsets"] = if acks == "0" {
            Value::Null
        } else {
            json!(offsets)
        };
        value["isr"] = json!(isr);
        value["leader_epoch"] = json!(epoch);
        self.writer
            .append(
                process,
                OpType::Ok,
                Body::from_value("send", OpType::Ok, value).unwrap(),
                None,
            )
            .unwrap()
            .index
    }

    /// A power loss of `nodes`, as the nemesis records it; `cut` is its
    /// `cut` field when given.
    fn power_loss(&mut self, nodes: &[&str], cut: Option<Value>) {
        // One node is named; several are what a `random minority` resolved to.
        let target = match nodes {
            [node] => json!({"target": node}),
            _ => json!({"target": "random minority"}),
        };
        self.writer
            .invoke(
                Process::Nemesis,
                Body::from_value("power-loss", OpType::Invoke, target.clone()).unwrap(),
            )
            .unwrap();
        let mut value = target;
        value["nodes"] = json!(nodes);
        if let Some(cut) = cut {
            value["cut"] = cut;
        }
        self.writer
            .append(
                Process::Nemesis,
                OpType::Info,
                Body::from_value("power-loss", OpType::Info, value).unwrap(),
                None,
            )
            .unwrap();
    }
}

fn state(revision: i64, leader: i32, leader_epoch: i32, isr: &[i32]) -> PartitionStateChange {
    PartitionStateChange::of_t0(revision, leader, leader_epoch, isr)
}

fn write_timeline(run: &Path, states: Vec<PartitionStateChange>) {
    let timeline = Timeline {
        partition_states: states,
        controllers: vec![],
        registrations: Vec::new(),
    };
    fs::write(
        run.join("timeline.json"),
        serde_json::to_string(&timeline).unwrap(),
    )
    .unwrap();
}

/// b1 leads epoch 0 with ISR [1,2,3]; b2 takes over cleanly in epoch 1.
fn clean_failover(run: &Path) {
    write_timeline(
        run,
        vec![state(1, 1, 0, &[1, 2, 3]), state(2, 2, 1, &[2, 3])],
    );
}

/// The ISR shrinks to [1], then b2 (not in it) is elected in epoch 1.
fn unclean_failover(run: &Path) {
    write_timeline(
        run,
        vec![
            state(1, 1, 0, &[1, 2, 3]),
            state(2, 1, 0, &[1]),
            state(3, 2, 1, &[2]),
            state(4, 2, 1, &[2, 3]),
        ],
    );
}

fn check(run: &Path, checker: Checker) -> CheckResult {
    let data = RunData::load(&epochal::run_dir::RunDir::open(run)).unwrap();
    let result = checker.check_run(&data).unwrap();
    assert!(!checker.guarantee.is_empty() && !checker.source.is_empty());
    assert!(!checker.not_checked.is_empty());
    result
}

fn count(result: &CheckResult, name: &str) -> u64 {
    result.counts.get(name).copied().unwrap_or(0)
}

/// Flips the last byte of `file` (inside the last batch's last record), so
/// that batch's CRC no longer matches.
fn corrupt_last_byte(file: &Path) {
    let mut bytes = fs::read(file).unwrap();
    *bytes.last_mut().unwrap() ^= 0xff;
    fs::write(file, bytes).unwrap();
}

fn lost_write(run: &Path) -> CheckResult {
    check(run, checker::lost_write::checker())
}

fn offset_changed(run: &Path) -> CheckResult {
    check(run, checker::offset_changed::checker())
}

fn divergence(run: &Path) -> CheckResult {
    check(run, checker::divergence::checker())
}

fn epoch_file(run: &Path) -> CheckResult {
    check(run, checker::epoch_file::checker())
}

fn duplicates(run: &Path) -> CheckResult {
    check(run, checker::duplicates::checker())
}

/// The usual run: [1, 2] acked with acks=all at 0..=1, then [3] with `acks`
/// at 2, both in epoch 0 under ISR [1,2,3]; every node ends with `batches`.
fn run_with(acks: &str, batches: fn() -> Vec<SpecBatch>) -> (tempfile::TempDir, History) {
    let dir = tempfile::tempdir().unwrap();
    everywhere(dir.path(), batches, &[(0, 0), (1, 2)]);
    let mut history = History::new(dir.path());
    history.send(&[1, 2], "all", &[0, 1], &[1, 2, 3], 0);
    history.send(&[3], acks, &[2], &[1, 2, 3], 0);
    (dir, history)
}

// ---- lost-write ----------------------------------------------------------------

#[test]
fn lost_acks_1_write_is_counted_and_valid() {
    let (dir, _history) = run_with("1", lost);
    clean_failover(dir.path());
    let result = lost_write(dir.path());
    assert_eq!(result.verdict, Verdict::Valid, "{result:?}");
    assert_eq!(count(&result, "lost-acks-1"), 1);
    assert_eq!(count(&result, "lost-acks-all"), 0);
    assert_eq!(count(&result, "acknowledged"), 3);
    let (dir, _history) = run_with("0", lost);
    clean_failover(dir.path());
    let result = lost_write(dir.path());
    assert_eq!(result.verdict, Verdict::Valid, "{result:?}");
    assert_eq!(count(&result, "lost-acks-0"), 1);
}

#[test]
fn lost_acks_all_write_without_unclean_election_is_invalid_naming_value_and_offset() {
    let (dir, _history) = run_with("all", lost);
    clean_failover(dir.path());
    let result = lost_write(dir.path());
    assert_eq!(result.verdict, Verdict::Invalid, "{result:?}");
    assert_eq!(result.evidence.len(), 1);
    let evidence = &result.evidence[0];
    assert_eq!(evidence.anomaly, Anomaly::LostAcknowledgedWrite);
    assert!(
        evidence.summary.contains("value 3 acked at offset 2"),
        "{}",
        evidence.summary
    );
    assert_eq!(evidence.details.json()["value"], 3);
    assert_eq!(evidence.details.json()["acked_offset"], 2);
    assert_eq!(evidence.details.json()["history_index"], 3);
    assert_eq!(evidence.details.json()["isr"], json!([1, 2, 3]));
    assert_eq!(
        evidence.details.json()["lacking"],
        json!(["b1", "b2", "b3"])
    );
    assert_eq!(evidence.details.json()["final_log_node"], "b2");
    assert_eq!(count(&result, "lost-acks-all"), 1);
}

#[test]
fn lost_write_evidence_is_bounded_but_every_loss_is_counted() {
    let (dir, mut history) = run_with("all", lost);
    let many: Vec<i64> = (100..160).collect();
    let offsets: Vec<i64> = (3..63).collect();
    history.send(&many, "all", &offsets, &[1, 2, 3], 0);
    clean_failover(dir.path());
    let result = lost_write(dir.path());
    assert_eq!(result.verdict, Verdict::Invalid);
    assert_eq!(count(&result, "lost-acks-all"), 61);
    assert_eq!(result.evidence.len(), 50);
    assert!(result.message.starts_with("61 "), "{}", result.message);
}

#[test]
fn lost_acks_all_write_after_an_unclean_election_is_valid_and_counted() {
    let (dir, _history) = run_with("all", lost);
    unclean_failover(dir.path());
    let result = lost_write(dir.path());
    assert_eq!(result.verdict, Verdict::Valid, "{result:?}");
    assert_eq!(count(&result, "lost-acks-all-excused"), 1);
    // Reported by value, as allowed.
    assert_eq!(result.evidence.len(), 1);
    assert_eq!(result.evidence[0].anomaly, Anomaly::LostAcksAllWriteExcused);
    assert!(
        result
            .message
            .contains("unclean election of b2 at leader epoch 1"),
        "{}",
        result.message
    );
}

#[test]
fn lost_acks_all_write_acked_after_the_unclean_election_is_not_excused_by_it() {
    let dir = tempfile::tempdir().unwrap();
    everywhere(dir.path(), lost, &[(0, 0), (1, 2)]);
    let mut history = History::new(dir.path());
    // Acked in epoch 1, the unclean election's own epoch: it came before.
    history.send(&[3], "all", &[2], &[2, 3], 1);
    unclean_failover(dir.path());
    let result = lost_write(dir.path());
    assert_eq!(result.verdict, Verdict::Invalid, "{result:?}");
    assert_eq!(result.evidence[0].details.json()["value"], 3);
}

#[test]
fn lost_acks_all_write_is_excused_only_by_a_power_loss_of_its_whole_isr() {
    // Every ISR member lost power after the ack.
    let (dir, mut history) = run_with("all", lost);
    history.power_loss(&["b1", "b2"], None);
    history.power_loss(&["b3"], None);
    clean_failover(dir.path());
    let result = lost_write(dir.path());
    assert_eq!(result.verdict, Verdict::Valid, "{result:?}");
    assert_eq!(count(&result, "lost-acks-all-excused"), 1);

    // b3 kept power.
    let (dir, mut history) = run_with("all", lost);
    history.power_loss(&["b1", "b2"], None);
    clean_failover(dir.path());
    let result = lost_write(dir.path());
    assert_eq!(result.verdict, Verdict::Invalid, "{result:?}");

    // All three lost power, but b3's cut stopped above the acked offset:
    // the value survived it there.
    let (dir, mut history) = run_with("all", lost);
    let cut = |node: &str, after: i64| {
        json!({"node": node, "cuts": [{"replica": "t-0", "log_end_offset_before": 3,
            "log_end_offset_after": after, "bytes_removed": 70, "segments_deleted": []}]})
    };
    history.power_loss(
        &["b1", "b2", "b3"],
        Some(json!([cut("b1", 2), cut("b2", 0), cut("b3", 3)])),
    );
    clean_failover(dir.path());
    let result = lost_write(dir.path());
    assert_eq!(result.verdict, Verdict::Invalid, "{result:?}");

    // A power loss before the ack excuses nothing.
    let dir = tempfile::tempdir().unwrap();
    everywhere(dir.path(), lost, &[(0, 0), (1, 2)]);
    let mut history = History::new(dir.path());
    history.power_loss(&["b1", "b2", "b3"], None);
    history.send(&[3], "all", &[2], &[1, 2, 3], 0);
    clean_failover(dir.path());
    assert_eq!(lost_write(dir.path()).verdict, Verdict::Invalid);
}

#[test]
fn lost_acks_all_write_with_no_timeline_is_unknown() {
    // The replicas agree, so the final log is known, but an unclean
    // election cannot be ruled out.
    let (dir, _history) = run_with("all", lost);
    let result = lost_write(dir.path());
    assert_eq!(result.verdict, Verdict::Unknown, "{result:?}");
    assert!(result.message.contains("no timeline"), "{}", result.message);

    // A timeline of another partition says nothing about this one.
    let (dir, _history) = run_with("all", lost);
    let mut other = state(1, 1, 0, &[1]);
    other.topic = "u".into();
    write_timeline(dir.path(), vec![other]);
    let result = lost_write(dir.path());
    assert_eq!(result.verdict, Verdict::Unknown, "{result:?}");
    assert!(
        result.message.contains("no timeline of t-0"),
        "{}",
        result.message
    );

    // The replicas disagree and nobody says which is final.
    let (dir, _history) = run_with("all", lost);
    write_node(dir.path(), "b1", full(), &[(0, 0)]);
    let result = lost_write(dir.path());
    assert_eq!(result.verdict, Verdict::Unknown, "{result:?}");
    assert!(result.message.contains("disagree"), "{}", result.message);

    // Kept everywhere: nothing to excuse, valid without a timeline.
    let (dir, _history) = run_with("all", full);
    assert_eq!(lost_write(dir.path()).verdict, Verdict::Valid);
}

#[test]
fn lost_write_in_a_damaged_final_leader_log_is_invalid() {
    let (dir, _history) = run_with("all", full);
    clean_failover(dir.path());
    assert_eq!(lost_write(dir.path()).verdict, Verdict::Valid);
    // b2, the final leader, has a corrupt batch where value 3 is.
    corrupt_last_byte(&dir.path().join("nodes/b2").join(SEGMENT));
    let data = RunData::load(&epochal::run_dir::RunDir::open(dir.path())).unwrap();
    assert!(data.replicas[&NodeId::new(2)].all_findings().count() > 0);
    let result = lost_write(dir.path());
    assert_eq!(result.verdict, Verdict::Invalid, "{result:?}");
    assert_eq!(result.evidence[0].details.json()["lacking"], json!(["b2"]));
}

// ---- offset-changed ------------------------------------------------------------

/// Value 3 moved: 4 at 2 (epoch 1), then 3 at 3.
fn moved() -> Vec<SpecBatch> {
    vec![
        values(0, 0, &[1, 2]),
        values(1, 2, &[4]),
        values(1, 3, &[3]),
    ]
}

#[test]
fn offset_changed_acks_all_value_is_invalid_naming_both_offsets() {
    let (dir, _history) = run_with("all", moved);
    clean_failover(dir.path());
    let result = offset_changed(dir.path());
    assert_eq!(result.verdict, Verdict::Invalid, "{result:?}");
    let evidence = &result.evidence[0];
    assert_eq!(evidence.anomaly, Anomaly::AcknowledgedOffsetChanged);
    assert_eq!(evidence.details.json()["value"], 3);
    assert_eq!(evidence.details.json()["acked_offset"], 2);
    assert_eq!(evidence.details.json()["found_at"], json!([3]));
    assert_eq!(
        evidence.details.json()["final_log_at_acked_offset"],
        json!({"epoch": 1, "value": "4"})
    );
    // Not lost: the lost-write checker has nothing to say.
    assert_eq!(lost_write(dir.path()).verdict, Verdict::Valid);
}

#[test]
fn offset_changed_accepts_values_at_their_offsets_and_counts_acks_1_moves() {
    let (dir, _history) = run_with("all", full);
    clean_failover(dir.path());
    let result = offset_changed(dir.path());
    assert_eq!(result.verdict, Verdict::Valid, "{result:?}");
    assert_eq!(count(&result, "checked"), 3);

    let (dir, _history) = run_with("1", moved);
    clean_failover(dir.path());
    let result = offset_changed(dir.path());
    assert_eq!(result.verdict, Verdict::Valid, "{result:?}");
    assert_eq!(count(&result, "offset-changed-acks-1"), 1);

    let (dir, _history) = run_with("all", moved);
    unclean_failover(dir.path());
    let result = offset_changed(dir.path());
    assert_eq!(result.verdict, Verdict::Valid, "{result:?}");
    assert_eq!(count(&result, "offset-changed-acks-all-excused"), 1);
}

// ---- divergence ----------------------------------------------------------------

#[test]
fn divergence_names_the_first_differing_offset_and_each_replica() {
    let dir = tempfile::tempdir().unwrap();
    write_node(dir.path(), "b1", full(), &[(0, 0)]);
    write_node(dir.path(), "b2", lost(), &[(0, 0), (1, 2)]);
    write_node(dir.path(), "b3", lost(), &[(0, 0), (1, 2)]);
    History::new(dir.path());
    let result = divergence(dir.path());
    assert_eq!(result.verdict, Verdict::Invalid, "{result:?}");
    let evidence = &result.evidence[0];
    assert_eq!(evidence.anomaly, Anomaly::ReplicaDivergence);
    assert_eq!(evidence.details.json()["offset"], 2);
    assert_eq!(
        evidence.details.json()["holds"]["b1"],
        json!({"epoch": 0, "control": false, "value": "3"})
    );
    assert_eq!(
        evidence.details.json()["holds"]["b2"],
        json!({"epoch": 1, "control": false, "value": "4"})
    );
    assert!(
        evidence.summary.contains("diverges at offset 2"),
        "{}",
        evidence.summary
    );
}

#[test]
fn divergence_in_the_batch_epoch_alone_is_divergence() {
    let dir = tempfile::tempdir().unwrap();
    write_node(dir.path(), "b1", full(), &[(0, 0)]);
    write_node(
        dir.path(),
        "b2",
        vec![values(0, 0, &[1, 2]), values(1, 2, &[3])],
        &[(0, 0), (1, 2)],
    );
    History::new(dir.path());
    let result = divergence(dir.path());
    assert_eq!(result.verdict, Verdict::Invalid, "{result:?}");
    assert_eq!(result.evidence[0].details.json()["offset"], 2);
}

#[test]
fn divergence_in_a_damaged_middle_batch_is_reported_but_a_torn_tail_is_not() {
    let three = || {
        vec![
            values(0, 0, &[1, 2]),
            values(0, 2, &[3]),
            values(0, 3, &[5]),
        ]
    };
    let dir = tempfile::tempdir().unwrap();
    for node in ["b1", "b2", "b3"] {
        write_node(dir.path(), node, three(), &[(0, 0)]);
    }
    History::new(dir.path());
    assert_eq!(divergence(dir.path()).verdict, Verdict::Valid);

    // b3's last batch torn: it only ends earlier.
    let segment = dir.path().join("nodes/b3").join(SEGMENT);
    let length = fs::metadata(&segment).unwrap().len();
    fs::OpenOptions::new()
        .write(true)
        .open(&segment)
        .unwrap()
        .set_len(length - 5)
        .unwrap();
    let data = RunData::load(&epochal::run_dir::RunDir::open(dir.path())).unwrap();
    assert_eq!(data.replicas[&NodeId::new(3)].replicas[0].log_end_offset, 3);
    let result = divergence(dir.path());
    assert_eq!(result.verdict, Verdict::Valid, "{result:?}");

    // b2's middle batch (value 3 at offset 2) corrupt: b2 holds nothing there.
    let segment = dir.path().join("nodes/b2").join(SEGMENT);
    let clean = epochal::reader::read_data_dir(&dir.path().join("nodes/b2/data")).unwrap();
    let middle = clean.replicas[0].batches().nth(1).unwrap().clone();
    let mut bytes = fs::read(&segment).unwrap();
    let at = (middle.position + middle.size_bytes - 1) as usize;
    bytes[at] ^= 0xff;
    fs::write(&segment, bytes).unwrap();
    let result = divergence(dir.path());
    assert_eq!(result.verdict, Verdict::Invalid, "{result:?}");
    assert_eq!(result.evidence[0].details.json()["offset"], 2);
    assert_eq!(result.evidence[0].details.json()["holds"]["b2"], "nothing");
}

#[test]
fn divergence_names_a_replica_outside_the_final_isr_that_conflicts_with_the_final_log() {
    let dir = tempfile::tempdir().unwrap();
    // b1 led epoch 0 and was left out; b2, the final leader, and b3 agree.
    write_node(dir.path(), "b1", full(), &[(0, 0)]);
    write_node(dir.path(), "b2", lost(), &[(0, 0), (1, 2)]);
    write_node(dir.path(), "b3", lost(), &[(0, 0), (1, 2)]);
    History::new(dir.path());
    clean_failover(dir.path());
    let result = divergence(dir.path());
    assert_eq!(result.verdict, Verdict::Invalid, "{result:?}");
    assert_eq!(count(&result, "replicas-outside-final-isr"), 1);
    assert_eq!(count(&result, "partitions-compared"), 1);
    assert_eq!(result.evidence.len(), 1, "{:?}", result.evidence);
    let evidence = &result.evidence[0];
    assert_eq!(evidence.anomaly, Anomaly::ReplicaDivergence);
    assert_eq!(evidence.details.json()["offset"], 2);
    assert_eq!(evidence.details.json()["outside_final_isr"], true);
    assert_eq!(evidence.details.json()["replicas"], json!(["b2", "b1"]));
    assert_eq!(
        evidence.details.json()["holds"]["b1"],
        json!({"epoch": 0, "control": false, "value": "3"})
    );
    assert!(
        evidence.summary.contains("b1, outside the final ISR"),
        "{}",
        evidence.summary
    );
}

#[test]
fn divergence_a_replica_outside_the_final_isr_that_only_lags_is_named_behind() {
    let dir = tempfile::tempdir().unwrap();
    // b1 stopped after offset 1 and never rejoined; what it holds agrees.
    write_node(dir.path(), "b1", vec![values(0, 0, &[1, 2])], &[(0, 0)]);
    write_node(dir.path(), "b2", lost(), &[(0, 0), (1, 2)]);
    write_node(dir.path(), "b3", lost(), &[(0, 0), (1, 2)]);
    History::new(dir.path());
    clean_failover(dir.path());
    let result = divergence(dir.path());
    assert_eq!(result.verdict, Verdict::Valid, "{result:?}");
    assert_eq!(count(&result, "replicas-outside-final-isr-behind"), 1);
    assert!(
        result
            .message
            .contains("behind: b1 t-0 (LEO 2, the final log's 3)"),
        "{}",
        result.message
    );
}

// ---- epoch-file ----------------------------------------------------------------

#[test]
fn epoch_file_disagreeing_with_a_batch_is_invalid() {
    let dir = tempfile::tempdir().unwrap();
    everywhere(dir.path(), lost, &[(0, 0), (1, 2)]);
    // b3 says epoch 2 began at 2, but the batch there was written in epoch 1.
    write_node(dir.path(), "b3", lost(), &[(0, 0), (2, 2)]);
    History::new(dir.path());
    let result = epoch_file(dir.path());
    assert_eq!(result.verdict, Verdict::Invalid, "{result:?}");
    assert_eq!(result.evidence.len(), 1);
    let evidence = &result.evidence[0];
    assert_eq!(evidence.anomaly, Anomaly::EpochFileDisagreesWithBatch);
    assert_eq!(evidence.details.json()["node"], "b3");
    assert_eq!(evidence.details.json()["first_base_offset"], 2);
    assert_eq!(evidence.details.json()["batch_epoch"], 1);
    assert_eq!(evidence.details.json()["file_epoch"], 2);
}

#[test]
fn epoch_file_out_of_order_or_unreadable_is_invalid() {
    let dir = tempfile::tempdir().unwrap();
    everywhere(dir.path(), lost, &[(0, 0), (1, 2)]);
    write_node(dir.path(), "b2", lost(), &[(1, 0), (0, 2)]);
    // b3's file is damaged: it promises three entries and holds two.
    History::new(dir.path());
    fs::write(dir.path().join("nodes/b3").join(EPOCHS), "0\n3\n0 0\n1 2\n").unwrap();
    let result = epoch_file(dir.path());
    assert_eq!(result.verdict, Verdict::Invalid, "{result:?}");
    let anomalies: Vec<&str> = result.evidence.iter().map(|e| e.anomaly.name()).collect();
    assert!(
        anomalies.contains(&"epoch-file-not-monotonic"),
        "{anomalies:?}"
    );
    assert!(
        anomalies.contains(&"epoch-file-unreadable"),
        "{anomalies:?}"
    );
}

#[test]
fn epoch_file_entry_inside_a_batch_is_invalid() {
    let dir = tempfile::tempdir().unwrap();
    // Epoch 1 claims to start at 1, inside the batch 0..=1 of epoch 0.
    everywhere(dir.path(), lost, &[(0, 0), (1, 1)]);
    History::new(dir.path());
    let result = epoch_file(dir.path());
    assert_eq!(result.verdict, Verdict::Invalid, "{result:?}");
    assert_eq!(
        result.evidence[0].anomaly,
        Anomaly::EpochEntryNotAtBatchStart
    );
}

#[test]
fn epoch_file_accepts_superseded_epochs_and_entries_past_a_truncated_log_end() {
    let dir = tempfile::tempdir().unwrap();
    everywhere(dir.path(), lost, &[(0, 0), (1, 2)]);
    // An epoch 1 whose leader wrote nothing, superseded by epoch 2 at 2.
    write_node(
        dir.path(),
        "b2",
        vec![values(0, 0, &[1, 2]), values(2, 2, &[4])],
        &[(0, 0), (1, 2), (2, 2)],
    );
    // b3 lost its last batch to a power loss; its file still names epoch 1
    // at 2 and a later epoch 3 at 7.
    write_node(dir.path(), "b3", lost(), &[(0, 0), (1, 2), (3, 7)]);
    let segment = dir.path().join("nodes/b3").join(SEGMENT);
    let clean = epochal::reader::read_data_dir(&dir.path().join("nodes/b3/data")).unwrap();
    let last = clean.replicas[0].batches().last().unwrap().clone();
    fs::OpenOptions::new()
        .write(true)
        .open(&segment)
        .unwrap()
        .set_len(last.position)
        .unwrap();
    History::new(dir.path());
    let data = RunData::load(&epochal::run_dir::RunDir::open(dir.path())).unwrap();
    assert_eq!(data.replicas[&NodeId::new(3)].replicas[0].log_end_offset, 2);
    let result = epoch_file(dir.path());
    assert_eq!(result.verdict, Verdict::Valid, "{result:?}");
    assert_eq!(count(&result, "epoch-files-checked"), 3);
}

// ---- duplicates ----------------------------------------------------------------

#[test]
fn duplicates_are_reported_and_counted_but_valid() {
    let (dir, _history) = run_with("all", || {
        vec![
            values(0, 0, &[1, 2]),
            values(0, 2, &[3]),
            values(0, 3, &[3]),
        ]
    });
    clean_failover(dir.path());
    let result = duplicates(dir.path());
    assert_eq!(result.verdict, Verdict::Valid, "{result:?}");
    assert_eq!(count(&result, "duplicates"), 1);
    assert_eq!(result.evidence[0].details.json()["value"], "3");
    assert_eq!(result.evidence[0].details.json()["offsets"], json!([2, 3]));

    let (dir, _history) = run_with("all", full);
    clean_failover(dir.path());
    let result = duplicates(dir.path());
    assert_eq!(result.verdict, Verdict::Valid, "{result:?}");
    assert_eq!(count(&result, "duplicates"), 0);
    assert!(result.evidence.is_empty());
}

#[test]
fn duplicates_without_a_final_log_are_found_in_every_replica() {
    let dir = tempfile::tempdir().unwrap();
    write_node(dir.path(), "b1", full(), &[(0, 0)]);
    write_node(
        dir.path(),
        "b2",
        vec![values(0, 0, &[1, 2]), values(0, 2, &[2])],
        &[(0, 0)],
    );
    History::new(dir.path());
    let result = duplicates(dir.path());
    assert_eq!(result.verdict, Verdict::Valid, "{result:?}");
    assert_eq!(count(&result, "duplicates"), 1);
    assert_eq!(result.evidence[0].details.json()["log"], "b2");
}

// ---- registration --------------------------------------------------------------

#[test]
fn checker_all_holds_the_data_checkers() {
    let names: Vec<&str> = checker::all().iter().map(|c| c.name).collect();
    for name in [
        "lost-write",
        "offset-changed",
        "divergence",
        "epoch-file",
        "duplicates",
    ] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
}
