//! The power table: per setting, how many seeds went invalid, how soon, and
//! with which anomaly kinds; the false alarms on the negative control. The
//! same figures are written as JSON (`power.json`) and one line of it is
//! appended to a history file, so a night whose detection rate drops beside
//! the last is visible — a weakened nemesis shows as a drop.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::detect::Detection;
use super::settings::{Control, PowerSetting};
use crate::checker::{Anomaly, Verdict};

/// One seed's campaign on one setting.
#[derive(Debug, Clone, Serialize)]
pub struct SeedOutcome {
    pub seed: u64,
    /// `None` when the run could not be made (`error` says why).
    pub verdict: Option<Verdict>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The forbidden kinds its evidence names.
    pub anomalies: Vec<Anomaly>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detection: Option<Detection>,
    /// Faults the campaign fired (its realised schedule's).
    pub faults: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_dir: Option<PathBuf>,
    /// Wall time of the whole run: set-up, faults, heal, checks.
    pub wall_s: f64,
    /// State-fault pairs the campaign reached (its `coverage.json`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pairs: Option<usize>,
}

/// One setting's row.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub setting: PowerSetting,
    /// How to run one of its seeds by hand.
    pub command: String,
    pub seeds: Vec<SeedOutcome>,
    pub runs: usize,
    pub invalid: usize,
    pub unknown: usize,
    pub valid: usize,
    pub errors: usize,
    /// Over the invalid seeds, nearest rank; `None` with none invalid.
    pub median_s: Option<f64>,
    pub p90_s: Option<f64>,
    /// Seeds whose evidence named each kind.
    pub kinds: BTreeMap<String, usize>,
}

impl Row {
    pub fn new(setting: PowerSetting, command: String, seeds: Vec<SeedOutcome>) -> Row {
        let count = |v: Verdict| seeds.iter().filter(|s| s.verdict == Some(v)).count();
        let mut times: Vec<f64> = seeds
            .iter()
            .filter_map(|s| s.detection.as_ref().map(|d| d.evidence_s))
            .collect();
        times.sort_by(f64::total_cmp);
        let mut kinds = BTreeMap::new();
        for s in &seeds {
            for a in &s.anomalies {
                *kinds.entry(a.name().to_owned()).or_insert(0) += 1;
            }
        }
        Row {
            runs: seeds.len(),
            invalid: count(Verdict::Invalid),
            unknown: count(Verdict::Unknown),
            valid: count(Verdict::Valid),
            errors: seeds.iter().filter(|s| s.verdict.is_none()).count(),
            median_s: nearest_rank(&times, 0.5),
            p90_s: nearest_rank(&times, 0.9),
            kinds,
            setting,
            command,
            seeds,
        }
    }

    /// Whether the row meets what its control asks for: a positive control
    /// invalid in at least `min_detected` seeds, a negative one in none.
    pub fn met(&self, min_detected: usize) -> bool {
        match self.setting.control {
            Control::Positive => self.invalid >= min_detected,
            Control::Negative => self.invalid == 0,
        }
    }
}

/// The `q` quantile of sorted `values` by nearest rank (the smallest value
/// with at least `q` of them at or below it).
pub fn nearest_rank(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q * sorted.len() as f64).ceil().max(1.0) as usize;
    Some(sorted[rank.min(sorted.len()) - 1])
}

/// The whole table, as `power.json` holds it.
#[derive(Debug, Clone, Serialize)]
pub struct PowerTable {
    /// UTC, as the store stamps runs.
    pub date: String,
    /// `git rev-parse HEAD` where it ran, when it could be read.
    pub commit: Option<String>,
    pub machine: String,
    pub quick: bool,
    pub seeds: Vec<u64>,
    pub duration_s: u64,
    pub jobs: usize,
    pub rows: Vec<Row>,
    /// Invalid seeds on the negative controls.
    pub false_alarms: usize,
    pub wall_s: f64,
}

impl PowerTable {
    /// Prints the table: one line per setting.
    pub fn render(&self, previous: Option<&Summary>) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "power: {} seeds ({}) x {} s per setting{}; {}",
            self.seeds.len(),
            seeds_text(&self.seeds),
            self.duration_s,
            if self.quick { " (quick)" } else { "" },
            self.date
        );
        let _ = writeln!(
            out,
            "{:<18} {:<8} {:>9} {:>8} {:>7} {:>7} {:>7}  anomaly kinds (seeds)",
            "setting", "control", "invalid", "unknown", "errors", "median", "p90"
        );
        for row in &self.rows {
            let secs = |s: Option<f64>| s.map_or("-".to_owned(), |s| format!("{s:.1}s"));
            let kinds: Vec<String> = row.kinds.iter().map(|(k, n)| format!("{k} {n}")).collect();
            let before = previous
                .and_then(|p| p.rows.get(&row.setting.name))
                .map(|(i, n)| format!("  (previous: {i}/{n})"))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "{:<18} {:<8} {:>9} {:>8} {:>7} {:>7} {:>7}  {}{before}",
                row.setting.name,
                match row.setting.control {
                    Control::Positive => "positive",
                    Control::Negative => "negative",
                },
                format!("{}/{}", row.invalid, row.runs),
                row.unknown,
                row.errors,
                secs(row.median_s),
                secs(row.p90_s),
                if kinds.is_empty() {
                    "-".to_owned()
                } else {
                    kinds.join(", ")
                }
            );
        }
        let _ = writeln!(
            out,
            "false alarms on the negative controls: {}",
            self.false_alarms
        );
        out
    }

    pub fn summary(&self) -> Summary {
        Summary {
            date: self.date.clone(),
            commit: self.commit.clone(),
            quick: self.quick,
            duration_s: self.duration_s,
            rows: self
                .rows
                .iter()
                .map(|r| (r.setting.name.clone(), (r.invalid, r.runs)))
                .collect(),
            false_alarms: self.false_alarms,
        }
    }
}

/// One line of the power history: each setting's invalid seeds of its runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub date: String,
    pub commit: Option<String>,
    pub quick: bool,
    pub duration_s: u64,
    pub rows: BTreeMap<String, (usize, usize)>,
    pub false_alarms: usize,
}

/// The last line of a history file that ran as this table did (quick or
/// full, same duration), if any.
pub fn previous(history: &str, quick: bool, duration_s: u64) -> Option<Summary> {
    history
        .lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<Summary>(l).ok())
        .find(|s| s.quick == quick && s.duration_s == duration_s)
}

/// `1..10` for a run of consecutive seeds, else the list.
fn seeds_text(seeds: &[u64]) -> String {
    let consecutive = seeds.windows(2).all(|w| w[1] == w[0] + 1);
    match (seeds.first(), seeds.last()) {
        (Some(a), Some(b)) if consecutive && seeds.len() > 2 => format!("{a}..{b}"),
        _ => seeds
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(","),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_quantiles() {
        let v = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(nearest_rank(&v, 0.5), Some(3.0));
        assert_eq!(nearest_rank(&v, 0.9), Some(5.0));
        assert_eq!(nearest_rank(&[7.0], 0.9), Some(7.0));
        assert_eq!(nearest_rank(&[], 0.5), None);
        let ten: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(nearest_rank(&ten, 0.5), Some(5.0));
        assert_eq!(nearest_rank(&ten, 0.9), Some(9.0));
    }

    #[test]
    fn the_history_gives_the_last_comparable_summary() {
        let line = |date: &str, quick: bool, n: usize| {
            serde_json::to_string(&Summary {
                date: date.into(),
                commit: None,
                quick,
                duration_s: 60,
                rows: BTreeMap::from([("a".to_owned(), (n, 10))]),
                false_alarms: 0,
            })
            .unwrap()
        };
        let history = [
            line("d1", false, 7),
            line("d2", true, 1),
            line("d3", false, 6),
        ]
        .join("\n");
        let p = previous(&history, false, 60).unwrap();
        assert_eq!((p.date.as_str(), p.rows["a"]), ("d3", (6, 10)));
        assert_eq!(previous(&history, true, 20), None);
        assert_eq!(seeds_text(&[1, 2, 3]), "1..3");
        assert_eq!(seeds_text(&[3, 7]), "3,7");
    }
}
