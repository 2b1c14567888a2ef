//! A follower whose fetch offset lies past its leader's log end
//! (`tests/schedules/hw_out_of_range.toml`), end to end with real processes.
//! b2 comes back with log end and HW 6 after b1 lost [4,6) to a power loss
//! and leads again with log end 4.
//!
//! Under `truncation = high-watermark` b2 truncates only to its HW, so its
//! first fetch is OFFSET_OUT_OF_RANGE. Kafka 0.10 answered that by cutting the
//! follower's log to the leader's log end and fetching on
//! (`ReplicaFetcherThread.handleOffsetOutOfRange`); it did not truncate to the
//! HW again and again, which would never change the fetch offset. The test
//! asserts b2 converges with b1 after one reset and that no truncation line
//! repeats more than three times in a row in its log. On `current` the same
//! schedule converges through OffsetsForLeaderEpoch, never out of range.

use crate::common;

use std::path::Path;

use common::scenario::{self, Run};

fn schedule() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/schedules/hw_out_of_range.toml")
}

/// The longest run of identical consecutive lines, among `broker.log` lines
/// that report a truncation, ignoring each line's timestamp.
fn longest_repeat_of_truncation_lines(log: &str) -> (usize, String) {
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("truncat") || l.contains("resetting"))
        // Drop the timestamp (the first field) so repeats compare equal.
        .map(|l| l.split_once(' ').map_or(l, |(_, rest)| rest))
        .collect();
    let mut best = (0, String::new());
    let mut i = 0;
    while i < lines.len() {
        let run = lines[i..].iter().take_while(|l| **l == lines[i]).count();
        if run > best.0 {
            best = (run, lines[i].to_owned());
        }
        i += run;
    }
    best
}

fn assert_converged(run: &Run) {
    let expected = vec![(0, 1), (1, 2), (2, 3), (3, 4), (4, 7), (5, 8)];
    assert_eq!(run.records("b1"), expected, "{:?}", run.sets);
    assert_eq!(run.records("b2"), expected, "{:?}", run.sets);
}

#[test]
fn cluster_hw_out_of_range_follower_resets_to_the_leaders_log_end_once() {
    let run = scenario::run(&schedule(), &["truncation=high-watermark"], 0);
    assert_converged(&run);
    let log = run.broker_log("b2");
    let resets: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("resetting as Kafka 0.10 did"))
        .collect();
    assert_eq!(resets.len(), 1, "{resets:#?}");
    assert!(
        resets[0].contains("log_end_offset=6") && resets[0].contains("leader_end=4"),
        "{}",
        resets[0]
    );
    assert!(
        !log.contains("fetch position rejected; truncating again"),
        "high-watermark never truncates again on a rejected fetch"
    );
    let (repeats, line) = longest_repeat_of_truncation_lines(&log);
    assert!(repeats <= 3, "{repeats} times in a row: {line}");
}

#[test]
fn cluster_hw_out_of_range_current_converges_without_a_reset() {
    let run = scenario::run(&schedule(), &["truncation=current"], 0);
    assert_converged(&run);
    let log = run.broker_log("b2");
    assert!(!log.contains("resetting as Kafka 0.10 did"));
    let (repeats, line) = longest_repeat_of_truncation_lines(&log);
    assert!(repeats <= 3, "{repeats} times in a row: {line}");
}
