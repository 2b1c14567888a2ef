//! How a shrink searches, apart from how candidates run: first cut by what
//! the evidence says, then delta debugging over what is left, each step
//! asking a [`Judge`] about a batch of candidates at once so they can run in
//! parallel (`epochal shrink --jobs N`).
//!
//! A failing campaign's anomaly has a first piece of evidence (the ack of a
//! lost write, the poll that went backwards: power/detect.rs); faults long
//! after it cannot have caused it, and most faults long before it did not.
//! So the search first looks for the shortest *prefix* of units that still
//! fails, galloping out from the first unit after the evidence (1, 2, 4, …
//! units past it, then bisecting the last step), then for the latest
//! *start* of that prefix that still fails (galloping back from its end),
//! and only then runs ddmin (Zeller and Hildebrandt, TSE 2002) over the
//! window left. Over a 60 s campaign's ~80 units ddmin alone spends most of
//! its runs on halves that drop the one fault that mattered; the window
//! cuts in O(log n) runs what it would take many levels to.
//!
//! Every search assumes failing is (nearly) monotone in the window — a
//! longer window around a failing one fails too — which holds as far as
//! replays reproduce; what each step keeps always failed in a real run.

/// One question to a judge: the candidates (each a sorted list of the
/// units it keeps) and where the search is, for the progress line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ask<'a> {
    /// `prefix end`, `prefix start`, `ddmin level 4`, ...
    pub phase: &'a str,
    /// Candidates this phase may still ask about after these (a bound).
    pub left: usize,
    /// The fewest units a failing candidate has kept so far.
    pub best: usize,
}

/// Runs candidates, each a set of kept units, and says which failed (in the
/// order asked). A batch may run in parallel.
pub trait Judge {
    fn judge(&mut self, ask: &Ask<'_>, candidates: &[Vec<usize>]) -> Vec<bool>;
}

/// The window of units `[start, end]` the evidence leaves: the shortest
/// prefix from unit 0 that fails, searched from `first_after_evidence`
/// outwards (the whole, `0..=last`, is known to fail), then the latest start
/// of it that fails.
pub fn window(
    units: usize,
    first_after_evidence: usize,
    jobs: usize,
    judge: &mut dyn Judge,
) -> (usize, usize) {
    let last = units.saturating_sub(1);
    let first = first_after_evidence.min(last);
    let end = gallop(
        first,
        last,
        jobs,
        "prefix end",
        units,
        &mut |e| (0..=e).collect(),
        judge,
    );
    // Units kept before the end: the fewest that fail, between 0 and end.
    let before = gallop(
        0,
        end,
        jobs,
        "prefix start",
        end + 1,
        &mut |d| (end - d..=end).collect(),
        judge,
    );
    (end - before, end)
}

/// The smallest `x` in `[low, high]` for which `candidate(x)` fails, given
/// that `high`'s does: probes `low`, `low + 1`, `low + 3`, `low + 7`, …
/// (`jobs` at a time) until one fails, then bisects between the last that
/// passed and the first that failed (`jobs` evenly spaced probes a round).
pub fn gallop(
    low: usize,
    high: usize,
    jobs: usize,
    phase: &str,
    best: usize,
    candidate: &mut dyn FnMut(usize) -> Vec<usize>,
    judge: &mut dyn Judge,
) -> usize {
    let jobs = jobs.max(1);
    // Galloping: the probes low + 2^k - 1 below high.
    let mut probes = Vec::new();
    let mut step = 1usize;
    while low + step - 1 < high {
        probes.push(low + step - 1);
        step *= 2;
    }
    let (mut passed, mut failed): (Option<usize>, usize) = (None, high);
    let mut asked = 0;
    'gallop: for batch in probes.chunks(jobs) {
        let candidates: Vec<Vec<usize>> = batch.iter().map(|&x| candidate(x)).collect();
        let left = probes.len() - asked;
        asked += batch.len();
        let results = judge.judge(&Ask { phase, left, best }, &candidates);
        for (&x, fails) in batch.iter().zip(results) {
            if fails {
                failed = x;
                break 'gallop;
            }
            passed = Some(x);
        }
    }
    // Bisect (passed, failed].
    let mut low = passed.map_or(low, |p| p + 1);
    while low < failed {
        let span = failed - low;
        let k = jobs.min(span);
        let mut points: Vec<usize> = (1..=k).map(|i| low + (span * i) / (k + 1)).collect();
        points.dedup();
        let candidates: Vec<Vec<usize>> = points.iter().map(|&x| candidate(x)).collect();
        let left = (usize::BITS - span.leading_zeros()) as usize;
        let results = judge.judge(&Ask { phase, left, best }, &candidates);
        let mut new_low = low;
        for (&x, fails) in points.iter().zip(results) {
            if fails {
                failed = x;
                break;
            }
            new_low = x + 1;
        }
        low = new_low;
    }
    failed
}

/// ddmin over `items`, a 1-minimal subset that still fails, asking about up
/// to `jobs` candidates at once (the first failing one, in ddmin's order,
/// wins, so the result is the sequential ddmin's). The whole is taken to
/// fail. `empty_passes`: a smaller candidate is already known to pass (the
/// window search saw one), so the empty one need not be asked about.
pub fn ddmin(
    items: Vec<usize>,
    jobs: usize,
    empty_passes: bool,
    judge: &mut dyn Judge,
) -> Vec<usize> {
    let jobs = jobs.max(1);
    let mut items = items;
    if !empty_passes {
        let none = judge.judge(
            &Ask {
                phase: "ddmin: no faults",
                left: 0,
                best: items.len(),
            },
            &[Vec::new()],
        );
        if none.first() == Some(&true) {
            return Vec::new();
        }
    }
    let mut n = 2usize;
    while items.len() >= 2 {
        let chunks = split(&items, n);
        let mut candidates: Vec<(Vec<usize>, bool)> =
            chunks.iter().map(|c| (c.clone(), false)).collect();
        if n > 2 {
            for i in 0..chunks.len() {
                let complement: Vec<usize> = chunks
                    .iter()
                    .enumerate()
                    .filter(|&(j, _)| j != i)
                    .flat_map(|(_, c)| c.iter().copied())
                    .collect();
                candidates.push((complement, true));
            }
        }
        let phase = format!("ddmin level {n}");
        let mut found = None;
        for (b, batch) in candidates.chunks(jobs).enumerate() {
            let sets: Vec<Vec<usize>> = batch.iter().map(|(c, _)| c.clone()).collect();
            let left = candidates.len() - b * jobs;
            let results = judge.judge(
                &Ask {
                    phase: &phase,
                    left,
                    best: items.len(),
                },
                &sets,
            );
            if let Some(i) = results.iter().position(|&f| f) {
                found = Some(batch[i].clone());
                break;
            }
        }
        match found {
            Some((subset, false)) => {
                items = subset;
                n = 2;
            }
            Some((complement, true)) => {
                items = complement;
                n = (n - 1).max(2);
            }
            None => {
                if n >= items.len() {
                    break;
                }
                n = (2 * n).min(items.len());
            }
        }
    }
    items
}

/// `items` in `n` contiguous chunks of near-equal size.
fn split(items: &[usize], n: usize) -> Vec<Vec<usize>> {
    let n = n.min(items.len()).max(1);
    let (size, extra) = (items.len() / n, items.len() % n);
    let mut chunks = Vec::with_capacity(n);
    let mut start = 0;
    for i in 0..n {
        let len = size + usize::from(i < extra);
        chunks.push(items[start..start + len].to_vec());
        start += len;
    }
    chunks
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A judge that fails a candidate holding every unit of `needed`,
    /// counting the candidates and batches it was asked.
    struct Needs {
        needed: Vec<usize>,
        asked: usize,
        batches: usize,
        widest: usize,
    }

    impl Judge for Needs {
        fn judge(&mut self, _: &Ask<'_>, candidates: &[Vec<usize>]) -> Vec<bool> {
            self.asked += candidates.len();
            self.batches += 1;
            self.widest = self.widest.max(candidates.len());
            candidates
                .iter()
                .map(|c| self.needed.iter().all(|u| c.contains(u)))
                .collect()
        }
    }

    fn needs(needed: &[usize]) -> Needs {
        Needs {
            needed: needed.to_vec(),
            asked: 0,
            batches: 0,
            widest: 0,
        }
    }

    #[test]
    fn the_window_is_found_from_the_evidence_in_few_runs() {
        // 80 units; the anomaly needs units 41 and 44; its evidence came
        // just before unit 43.
        let mut judge = needs(&[41, 44]);
        assert_eq!(window(80, 43, 1, &mut judge), (41, 44));
        assert!(judge.asked <= 10, "{} runs", judge.asked);
        // In parallel: the same window, fewer rounds.
        let mut parallel = needs(&[41, 44]);
        assert_eq!(window(80, 43, 3, &mut parallel), (41, 44));
        assert!(
            parallel.batches < judge.batches,
            "{} rounds",
            parallel.batches
        );
        assert!(parallel.widest <= 3);
    }

    #[test]
    fn gallop_finds_the_smallest_failing_point() {
        for target in 0..40 {
            for jobs in 1..4 {
                let mut judge = needs(&[target]);
                let x = gallop(0, 39, jobs, "t", 40, &mut |x| (0..=x).collect(), &mut judge);
                assert_eq!(x, target, "jobs {jobs}");
            }
        }
    }

    #[test]
    fn ddmin_in_batches_finds_what_sequential_ddmin_finds() {
        for jobs in 1..5 {
            let mut judge = needs(&[3, 11]);
            assert_eq!(
                ddmin((0..16).collect(), jobs, false, &mut judge),
                vec![3, 11]
            );
            assert!(judge.asked < 80, "{} tests", judge.asked);
        }
        let mut judge = needs(&[]);
        assert_eq!(
            ddmin(vec![1, 2, 3], 2, false, &mut judge),
            Vec::<usize>::new()
        );
        let mut judge = needs(&[4]);
        assert_eq!(ddmin(vec![1, 2, 3, 4, 5], 2, true, &mut judge), vec![4]);
    }
}
