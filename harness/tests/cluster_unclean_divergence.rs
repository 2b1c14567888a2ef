//! KIP-101's unclean-election case (`suites/schedules/kip-101-unclean-election.toml`) end
//! to end: the real `epochal` binary, a real etcd, the proxies and two brokers,
//! A = b1 and B = b2, each writing while alone and elected uncleanly in turn.
//! When A comes back as B's follower, `high-watermark`, `kip-101` and `kip-279`
//! leave A's record at offset 0 in place where B holds its own: the in-sync
//! replicas diverge at offset 0. `current` answers an epoch below the leader's
//! first with the start of its first epoch, so A cuts to 0 and converges.
//! Every loss of A's acknowledged writes is excused by the unclean election
//! that followed it, in every setting.

use crate::common;

use common::scenario::{self, Run};
use epochal::observe::timeline::Timeline;
use serde_json::{Value, json};

/// Runs the schedule under `truncation`, which must end with the verdict
/// `expect` (see [`scenario::run_truncation`]) on the mail's premise.
fn run(truncation: &str, expect: i32) -> Run {
    // The mail's premise: unclean election on, min.isr=1.
    scenario::run_truncation(
        "kip-101-unclean-election.toml",
        truncation,
        &["unclean_leader_election = true", "min_insync_replicas = 1"],
        expect,
    )
}

impl Run {
    /// The mail's steps ran as written, whatever the setting: each broker
    /// wrote while alone, and leadership alternated A, B, A, B through
    /// unclean elections.
    fn check_alternating_unclean_elections(&self) {
        // B down; A:0; A down, B up; B:0; B down, A up; A:1; A down, B up;
        // B:1; A up. Nothing was left for the final heal to do.
        self.assert_nemesis(&[
            ("stop", &["b2"]),
            ("stop", &["b1"]),
            ("start", &["b2"]),
            ("stop", &["b2"]),
            ("start", &["b1"]),
            ("stop", &["b1"]),
            ("start", &["b2"]),
            ("start", &["b1"]),
        ]);

        // Four acks=all writes, each by the broker leading alone: (value,
        // node, offset, ISR just after the ack, leader epoch).
        let sends: Vec<(i64, String, i64, Value, i64)> = self
            .sends()
            .into_iter()
            .map(|send| {
                assert_eq!(send["acks"], "all", "{send}");
                (
                    send["values"][0].as_i64().unwrap(),
                    send["node"].as_str().unwrap().to_owned(),
                    send["offsets"][0].as_i64().unwrap(),
                    send["isr"].clone(),
                    send["leader_epoch"].as_i64().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            sends,
            vec![
                (1, "b1".into(), 0, json!([1]), 1), // A:0
                (2, "b2".into(), 0, json!([2]), 2), // B:0
                (3, "b1".into(), 1, json!([1]), 3), // A:1
                (4, "b2".into(), 1, json!([2]), 4), // B:1
            ]
        );

        // etcd's timeline: epoch 0 is the start with both up; dropping B
        // makes epoch 1 (the mail's LeaderEpoch0); epochs 2, 3, 4 are unclean
        // elections of B, A, B (each leader outside the ISR before it); A's
        // return adds it to epoch 4's ISR without a new epoch.
        let timeline: Timeline = serde_json::from_value(self.timeline()).unwrap();
        let states: Vec<(i32, i32, Vec<i32>)> = timeline
            .partition_states
            .iter()
            .filter(|s| s.topic == "t" && s.partition == 0)
            .map(|s| {
                let mut isr = s.isr.clone();
                isr.sort();
                (s.leader, s.leader_epoch, isr)
            })
            .collect();
        assert_eq!(
            states,
            vec![
                (1, 0, vec![1, 2]),
                (1, 1, vec![1]),
                (2, 2, vec![2]),
                (1, 3, vec![1]),
                (2, 4, vec![2]),
                (2, 4, vec![1, 2]),
            ]
        );
        let unclean: Vec<i32> = states
            .windows(2)
            .filter(|w| !w[0].2.contains(&w[1].0))
            .map(|w| w[1].1)
            .collect();
        assert_eq!(unclean, vec![2, 3, 4]);

        // B's final log is its own two writes, in its epochs 2 and 4.
        assert_eq!(self.records("b2"), vec![(0, 2), (1, 4)]);

        // A's lost writes are legitimate: lost-write excuses each by the
        // unclean election after it, and consumer lets the offsets be reused.
        let lost = self.checker("lost-write");
        assert_eq!(lost["verdict"], "valid", "{lost}");
        let excused: Vec<&str> = lost["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                assert_eq!(e["anomaly"], "lost-acks-all-write-excused", "{e}");
                e["summary"].as_str().unwrap()
            })
            .collect();
        assert_eq!(excused.len(), 2, "{lost}");
        assert!(
            excused[0].contains("value 1 acked at offset 0")
                && excused[0].contains("unclean election of b2 at leader epoch 2"),
            "{}",
            excused[0]
        );
        assert!(
            excused[1].contains("value 3 acked at offset 1")
                && excused[1].contains("unclean election of b2 at leader epoch 4"),
            "{}",
            excused[1]
        );
        let consumer = self.checker("consumer");
        assert_eq!(consumer["verdict"], "valid", "{consumer}");
    }

    /// The divergence checker names offset 0 and what each replica holds
    /// there; every other checker is valid.
    fn check_diverges_at_offset_0(&self) {
        self.others_valid(&["divergence"]);
        let divergence = self.checker("divergence");
        assert_eq!(divergence["verdict"], "invalid", "{divergence}");
        let evidence = divergence["evidence"].as_array().unwrap();
        assert_eq!(evidence.len(), 1, "{divergence}");
        assert_eq!(evidence[0]["anomaly"], "replica-divergence");
        assert_eq!(evidence[0]["details"]["offset"], 0, "{divergence}");
        assert_eq!(evidence[0]["details"]["replicas"], json!(["b1", "b2"]));
        assert_eq!(
            evidence[0]["summary"],
            "t-0 diverges at offset 0 (common end 2): b1 holds 1 (epoch 1), b2 holds 2 (epoch 2)"
        );
    }

    /// b1's OffsetsForLeaderEpoch exchanges and truncations, as its log
    /// records them after it came back.
    fn truncation_lines(&self) -> Vec<String> {
        self.broker_log("b1")
            .lines()
            .filter(|l| {
                l.contains("OffsetsForLeaderEpoch answered") || l.contains("follower truncated")
            })
            .map(|l| {
                let l = &l[l.find("topic=t").expect("a t-0 line")..];
                l.to_owned()
            })
            .collect()
    }
}

const ASKED_3_KIP_101: &str =
    "topic=t partition=0 asked=3 answer=EpochEndOffset { leader_epoch: -1, end_offset: 1 }";
const ASKED_3: &str =
    "topic=t partition=0 asked=3 answer=EpochEndOffset { leader_epoch: 2, end_offset: 1 }";
const CUT_2_TO_1: &str = "topic=t partition=0 from=2 to=1";

#[test]
fn cluster_unclean_divergence_high_watermark_keeps_both_of_a_s_writes() {
    let run = run("high-watermark", 1);
    run.check_alternating_unclean_elections();
    run.check_diverges_at_offset_0();
    // A asks nothing and cuts to its checkpointed HW, 2: nothing.
    assert!(
        run.truncation_lines().is_empty(),
        "{:?}",
        run.truncation_lines()
    );
    assert_eq!(run.records("b1"), vec![(0, 1), (1, 3)]);
}

#[test]
fn cluster_unclean_divergence_kip_101_answers_the_start_of_epoch_4() {
    let run = run("kip-101", 1);
    run.check_alternating_unclean_elections();
    run.check_diverges_at_offset_0();
    // The mail's step 5: A asks for its latest epoch (3); B, with epochs 2
    // and 4, answers the start of epoch 4 (1); A cuts to 1 and keeps offset 0.
    assert_eq!(
        run.truncation_lines(),
        vec![ASKED_3_KIP_101.to_owned(), CUT_2_TO_1.to_owned()]
    );
    assert_eq!(run.records("b1"), vec![(0, 1), (1, 4)]);
}

#[test]
fn cluster_unclean_divergence_kip_279_falls_back_to_the_hw_below_the_leader_s_first_epoch() {
    let run = run("kip-279", 1);
    run.check_alternating_unclean_elections();
    run.check_diverges_at_offset_0();
    // B answers (2, 1); A has no epoch 2, cuts to where its epoch 1 ends (1)
    // and asks about epoch 1, below B's first: UNDEFINED, so A falls back to
    // its HW and keeps offset 0.
    assert_eq!(
        run.truncation_lines(),
        vec![
            ASKED_3.to_owned(),
            CUT_2_TO_1.to_owned(),
            "topic=t partition=0 asked=1 answer=EpochEndOffset { leader_epoch: -1, end_offset: -1 }"
                .to_owned(),
        ]
    );
    assert_eq!(run.records("b1"), vec![(0, 1), (1, 4)]);
}

#[test]
fn cluster_unclean_divergence_current_cuts_to_0_and_converges() {
    let run = run("current", 0);
    run.check_alternating_unclean_elections();
    run.others_valid(&[]);
    // As kip-279 until epoch 1: B answers it with (1, start of its first
    // epoch) = (1, 0), A's epoch 1 matches, and A cuts to 0.
    assert_eq!(
        run.truncation_lines(),
        vec![
            ASKED_3.to_owned(),
            CUT_2_TO_1.to_owned(),
            "topic=t partition=0 asked=1 answer=EpochEndOffset { leader_epoch: 1, end_offset: 0 }"
                .to_owned(),
            "topic=t partition=0 from=1 to=0".to_owned(),
        ]
    );
    assert_eq!(run.records("b1"), vec![(0, 2), (1, 4)]);
    let divergence = run.checker("divergence");
    assert_eq!(
        divergence["counts"]["partitions-compared"], 1,
        "{divergence}"
    );
}
