//! Looking one fault ahead: which partition shapes each pair has led to.
//!
//! Novelty (pairs.rs) sees only the pair a fault reaches now, so a state
//! several faults deep is reached no oftener than chance allows: every step
//! toward it is a pair already covered long before the state is. Here each
//! pick first notes the shape every partition is in (how often each shape
//! has been seen) and, for the fault fired just before, which shape its pair
//! led to. A guided pick with look-ahead (`--lookahead`) then breaks ties in
//! novelty by how rare the shapes the candidate's pairs have led to are —
//! steering toward states the campaign seldom stands in, as a greybox
//! fuzzer's power schedule favours inputs that reach rare paths (Böhme et al.,
//! "Coverage-based Greybox Fuzzing as Markov Chain", CCS 2016). Nothing here
//! names a state as interesting; rarity is measured, in the run and in the
//! prior map of earlier seeds.

use std::collections::BTreeMap;

use super::pairs::Coverage;
use crate::schedule::PartitionRef;

impl Coverage {
    /// Notes the shapes the partitions are in before a pick.
    pub fn saw(&mut self, shapes: &BTreeMap<PartitionRef, String>) {
        for shape in shapes.values() {
            *self.shapes.entry(shape.clone()).or_default() += 1;
        }
    }

    /// Notes, for each pair the last fault reached, the shape its partition
    /// was in at the next pick (a partition no longer shown is left out).
    pub fn followed(
        &mut self,
        fired: &[(PartitionRef, String)],
        shapes: &BTreeMap<PartitionRef, String>,
    ) {
        for (p, pair) in fired {
            if let Some(shape) = shapes.get(p) {
                *self
                    .next
                    .entry(pair.clone())
                    .or_default()
                    .entry(shape.clone())
                    .or_default() += 1;
            }
        }
    }
}

/// How rare what `pair` leads to is, in this run and the prior together:
/// over the shapes it was followed by, weighed by how often, the mean of
/// `1 / (1 + times that shape was seen)`; a pair nobody has seen followed
/// counts as rare as can be (1).
pub fn rarity_ahead(run: &Coverage, prior: &Coverage, pair: &str) -> f64 {
    let mut after: BTreeMap<&str, u64> = BTreeMap::new();
    for map in [run, prior] {
        for (shape, n) in map.next.get(pair).into_iter().flatten() {
            *after.entry(shape).or_default() += n;
        }
    }
    let total: u64 = after.values().sum();
    if total == 0 {
        return 1.0;
    }
    let seen = |shape: &str| {
        run.shapes.get(shape).copied().unwrap_or(0) + prior.shapes.get(shape).copied().unwrap_or(0)
    };
    after
        .iter()
        .map(|(shape, &n)| n as f64 / total as f64 / (1.0 + seen(shape) as f64))
        .sum()
}

/// [`rarity_ahead`] summed over a candidate's pairs.
pub fn ahead(run: &Coverage, prior: &Coverage, pairs: &[(PartitionRef, String)]) -> f64 {
    pairs
        .iter()
        .map(|(_, pair)| rarity_ahead(run, prior, pair))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shapes(shape: &str) -> BTreeMap<PartitionRef, String> {
        BTreeMap::from([(PartitionRef::new("t", 0), shape.to_owned())])
    }

    #[test]
    fn a_pair_that_led_to_a_seldom_seen_shape_is_rarer_ahead_than_one_that_led_home() {
        let p = PartitionRef::new("t", 0);
        let mut run = Coverage::default();
        for _ in 0..20 {
            run.saw(&shapes("common"));
        }
        run.saw(&shapes("rare"));
        run.followed(&[(p.clone(), "a".into())], &shapes("rare"));
        run.followed(&[(p.clone(), "b".into())], &shapes("common"));
        let prior = Coverage::default();
        let a = rarity_ahead(&run, &prior, "a");
        let b = rarity_ahead(&run, &prior, "b");
        assert!(a > b, "a {a} b {b}");
        assert_eq!(rarity_ahead(&run, &prior, "never fired"), 1.0);
    }

    #[test]
    fn the_prior_counts_beside_the_run_and_merges_its_counts() {
        let p = PartitionRef::new("t", 0);
        let mut prior = Coverage::default();
        for _ in 0..9 {
            prior.saw(&shapes("s"));
        }
        prior.followed(&[(p, "a".into())], &shapes("s"));
        let run = Coverage::default();
        assert!((rarity_ahead(&run, &prior, "a") - 0.1).abs() < 1e-9);
        let mut merged = Coverage::default();
        merged.merge(&prior);
        merged.merge(&prior);
        assert_eq!(merged.shapes["s"], 18);
        assert_eq!(merged.next["a"]["s"], 2);
    }
}
