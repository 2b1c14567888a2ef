//! `--shard I/N`: the N slices of a gate together hold exactly its cases,
//! each once, the same on every runner.

use std::collections::BTreeSet;
use std::path::Path;

use epochal::gate::{Shard, cases, load_suites};

fn names(shard: Shard) -> Vec<String> {
    let suites = load_suites(&[Path::new(env!("CARGO_MANIFEST_DIR")).join("../suites")]).unwrap();
    cases(&suites, shard)
        .iter()
        .map(|case| case.label())
        .collect()
}

#[test]
fn shards_together_run_exactly_the_unsharded_gate() {
    let all = names(Shard::ALL);
    assert!(all.len() >= 20, "{all:?}");
    let distinct: BTreeSet<&String> = all.iter().collect();
    assert_eq!(distinct.len(), all.len(), "a case named twice");
    for count in 1..=4 {
        let mut union = Vec::new();
        for index in 1..=count {
            let slice = names(format!("{index}/{count}").parse().unwrap());
            assert!(!slice.is_empty(), "{index}/{count} is empty");
            assert_eq!(slice, names(Shard { index, count }), "not deterministic");
            union.extend(slice);
        }
        union.sort();
        let mut expected = all.clone();
        expected.sort();
        assert_eq!(union, expected, "{count} shards");
    }
}

#[test]
fn a_bad_shard_is_refused() {
    for bad in ["0/2", "3/2", "1", "a/b", "1/0"] {
        assert!(bad.parse::<Shard>().is_err(), "{bad}");
    }
}
