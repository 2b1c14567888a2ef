//! The power table's settings as data (`suites/power/table.toml`): each a broker
//! setting the reference broker can be put in — an era that had a documented
//! bug (a positive control: campaigns on it should go invalid) or the fixed
//! settings (the negative control: any invalid run is a false alarm, or a bug)
//! — with the campaign flags its bug needs to be reachable at all (KAFKA-5435
//! needs idempotent producers, KAFKA-5600 committing consumers and an offsets
//! log of several segments). New era settings ([transactions], [groups])
//! join by adding a table, not code.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::super::{CampaignOptions, Kind, StopAfter};
use crate::duration::parse_duration;
use crate::schedule::Acks;

/// What a setting is a control for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Control {
    /// An era setting with a documented bug: detection is the point.
    Positive,
    /// The fixed settings: an invalid run is a false alarm (or a bug).
    Negative,
}

/// `suites/power/table.toml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PowerFile {
    /// The seeds of the full table, `1..10` (both ends included).
    pub seeds: String,
    /// How long each campaign fires faults, `60s`.
    pub duration: String,
    pub quick: Quick,
    #[serde(rename = "setting")]
    pub settings: Vec<PowerSetting>,
}

/// `[quick]`: the few settings, seeds and the duration CI runs so
/// the table cannot rot.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Quick {
    pub settings: Vec<String>,
    pub seeds: Vec<u64>,
    pub duration: String,
}

/// One `[[setting]]`.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct PowerSetting {
    pub name: String,
    pub control: Control,
    /// The bug (or fix) it stands for, with its KIP or JIRA.
    pub bug: String,
    /// `KEY=VALUE` broker settings, as `--set` takes them.
    pub set: Vec<String>,
    /// The campaign flags the bug needs, beyond `epochal campaign`'s defaults.
    #[serde(default)]
    pub campaign: CampaignFlags,
}

/// `[setting.campaign]`: the flags of `epochal campaign` a setting changes.
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct CampaignFlags {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acks: Option<Acks>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partitions: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub producers: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumers: Option<u32>,
    /// `--commits`: the background consumers commit and read back.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub commits: bool,
    /// `--subscribers N`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub subscribers: u32,
    /// `--crash-every N`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub crash_every: u32,
    /// Every producer idempotent (`[workload] idempotent`, KIP-98).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub idempotent: bool,
    /// `--kinds`: the fault kinds; empty is the campaign's default mix.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kinds: Vec<String>,
    /// `--transactional N`: transactional producers ([transactions]).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub transactional: u32,
    /// `--lives`: a client deleting and re-creating a topic of its own.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub lives: bool,
    /// `--request-timeout-ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_timeout_ms: Option<u64>,
    /// `--transaction-timeout-ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transaction_timeout_ms: Option<u64>,
    /// `--min-leader-changes`: the coverage minimum, when the setting's
    /// faults are not meant to move leaders (request-level faults).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_leader_changes: Option<u64>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Why `suites/power/table.toml` (or a command line over it) cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PowerFileError {
    #[error("{}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {source}", path.display())]
    Parse {
        path: PathBuf,
        #[source]
        source: Box<toml::de::Error>,
    },
    #[error("{}: {what}", path.display())]
    Invalid { path: PathBuf, what: String },
}

impl PowerFile {
    pub fn load(path: &Path) -> Result<PowerFile, PowerFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| PowerFileError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(path, &text)
    }

    /// Parses and checks: names unique, every `[quick]` setting declared,
    /// seeds and durations readable, every kind a fault kind.
    pub fn parse(path: &Path, text: &str) -> Result<PowerFile, PowerFileError> {
        let file: PowerFile = toml::from_str(text).map_err(|source| PowerFileError::Parse {
            path: path.to_owned(),
            source: Box::new(source),
        })?;
        let invalid = |what: String| PowerFileError::Invalid {
            path: path.to_owned(),
            what,
        };
        parse_seeds(&file.seeds).map_err(|e| invalid(format!("seeds: {e}")))?;
        for (key, d) in [
            ("duration", &file.duration),
            ("quick.duration", &file.quick.duration),
        ] {
            parse_duration(d).map_err(|e| invalid(format!("{key}: {e}")))?;
        }
        let mut names = std::collections::BTreeSet::new();
        for s in &file.settings {
            if !names.insert(s.name.as_str()) {
                return Err(invalid(format!("setting {:?} is declared twice", s.name)));
            }
            for kind in &s.campaign.kinds {
                kind.parse::<Kind>()
                    .map_err(|e| invalid(format!("setting {:?}: {e}", s.name)))?;
            }
        }
        if file.quick.seeds.is_empty() {
            return Err(invalid("quick.seeds is empty".into()));
        }
        for name in &file.quick.settings {
            if !names.contains(name.as_str()) {
                return Err(invalid(format!(
                    "quick names setting {name:?}, which is not declared"
                )));
            }
        }
        Ok(file)
    }

    /// The full table's seeds.
    pub fn seeds(&self) -> Vec<u64> {
        let (low, high) = parse_seeds(&self.seeds).expect("checked at load");
        (low..=high).collect()
    }

    pub fn duration(&self) -> Duration {
        parse_duration(&self.duration).expect("checked at load")
    }

    pub fn quick_duration(&self) -> Duration {
        parse_duration(&self.quick.duration).expect("checked at load")
    }

    pub fn setting(&self, name: &str) -> Option<&PowerSetting> {
        self.settings.iter().find(|s| s.name == name)
    }
}

/// A seed range that is not `LOW..HIGH` with LOW <= HIGH.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not a seed range like 1..10")]
pub struct SeedRangeError {
    pub text: String,
}

/// `1..10`, both ends included.
pub fn parse_seeds(s: &str) -> Result<(u64, u64), SeedRangeError> {
    let bad = || SeedRangeError { text: s.to_owned() };
    let (low, high) = s.split_once("..").ok_or_else(bad)?;
    let low: u64 = low.trim().parse().map_err(|_| bad())?;
    let high: u64 = high.trim().parse().map_err(|_| bad())?;
    if low > high {
        return Err(bad());
    }
    Ok((low, high))
}

impl PowerSetting {
    /// The campaign this setting runs for `seed`, stopping after `duration`.
    pub fn options(&self, seed: u64, duration: Duration) -> CampaignOptions {
        let mut o = CampaignOptions::new(seed, StopAfter::Duration(duration));
        let c = &self.campaign;
        o.acks = c.acks.unwrap_or(o.acks);
        o.partitions = c.partitions.unwrap_or(o.partitions);
        o.producers = c.producers.unwrap_or(o.producers);
        o.consumers = c.consumers.unwrap_or(o.consumers);
        o.commits = c.commits;
        o.subscribers = c.subscribers;
        o.crash_every = c.crash_every;
        o.transactional = c.transactional;
        o.lives = c.lives;
        o.request_timeout_ms = c.request_timeout_ms;
        o.transaction_timeout_ms = c.transaction_timeout_ms;
        if let Some(n) = c.min_leader_changes {
            o.minimums.leader_changes = n;
        }
        if !c.kinds.is_empty() {
            o.kinds = c
                .kinds
                .iter()
                .map(|k| k.parse().expect("checked at load"))
                .collect();
        }
        o
    }

    /// The flags as `epochal campaign` takes them, for a person to rerun one
    /// seed by hand.
    pub fn command(&self, seed: u64, duration: Duration) -> String {
        let mut out = format!(
            "epochal campaign --seed {seed} --duration {}s",
            duration.as_secs()
        );
        let c = &self.campaign;
        if let Some(acks) = c.acks {
            out += &format!(" --acks {acks}");
        }
        for (flag, n) in [
            ("partitions", c.partitions),
            ("producers", c.producers),
            ("consumers", c.consumers),
        ] {
            if let Some(n) = n {
                out += &format!(" --{flag} {n}");
            }
        }
        if c.commits {
            out += " --commits";
        }
        if c.subscribers > 0 {
            out += &format!(" --subscribers {}", c.subscribers);
        }
        if c.crash_every > 0 {
            out += &format!(" --crash-every {}", c.crash_every);
        }
        if c.transactional > 0 {
            out += &format!(" --transactional {}", c.transactional);
        }
        if c.lives {
            out += " --lives";
        }
        for (flag, n) in [
            ("request-timeout-ms", c.request_timeout_ms),
            ("transaction-timeout-ms", c.transaction_timeout_ms),
            ("min-leader-changes", c.min_leader_changes),
        ] {
            if let Some(n) = n {
                out += &format!(" --{flag} {n}");
            }
        }
        if !c.kinds.is_empty() {
            out += &format!(" --kinds {}", c.kinds.join(","));
        }
        for set in &self.set {
            out += &format!(" --set {set}");
        }
        if c.idempotent {
            out += "  (idempotent producers: [workload] idempotent = true)";
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
seeds = "1..3"
duration = "60s"
[quick]
settings = ["a"]
seeds = [1]
duration = "20s"
[[setting]]
name = "a"
control = "positive"
bug = "KIP-101"
set = ["truncation=high-watermark"]
[setting.campaign]
commits = true
kinds = ["pause", "crash"]
[[setting]]
name = "current"
control = "negative"
bug = "none"
set = ["truncation=current"]
"#;

    #[test]
    fn a_power_file_parses_into_campaigns() {
        let file = PowerFile::parse(Path::new("p.toml"), FILE).unwrap();
        assert_eq!(file.seeds(), vec![1, 2, 3]);
        assert_eq!(file.duration(), Duration::from_secs(60));
        let a = file.setting("a").unwrap();
        let o = a.options(2, Duration::from_secs(5));
        assert!(o.commits);
        assert_eq!(o.kinds, vec![Kind::Pause, Kind::Crash]);
        assert_eq!(o.seed, 2);
        assert_eq!(
            a.command(2, Duration::from_secs(60)),
            "epochal campaign --seed 2 --duration 60s --commits --kinds pause,crash \
             --set truncation=high-watermark"
        );
        assert_eq!(file.setting("current").unwrap().control, Control::Negative);
    }

    #[test]
    fn a_transactional_setting_carries_its_producers_timeouts_and_minimum() {
        let text = FILE.replace(
            "commits = true",
            "transactional = 2\nrequest_timeout_ms = 800\ntransaction_timeout_ms = 3000\n\
             min_leader_changes = 0",
        );
        let file = PowerFile::parse(Path::new("p.toml"), &text).unwrap();
        let a = file.setting("a").unwrap();
        let o = a.options(4, Duration::from_secs(60));
        assert_eq!(o.transactional, 2);
        assert_eq!(o.request_timeout_ms, Some(800));
        assert_eq!(o.transaction_timeout_ms, Some(3000));
        assert_eq!(o.minimums.leader_changes, 0);
        assert_eq!(
            o.minimums.faults,
            crate::campaign::Minimums::CAMPAIGN.faults
        );
        assert_eq!(
            a.command(4, Duration::from_secs(60)),
            "epochal campaign --seed 4 --duration 60s --transactional 2 \
             --request-timeout-ms 800 --transaction-timeout-ms 3000 --min-leader-changes 0 \
             --kinds pause,crash --set truncation=high-watermark"
        );
    }

    #[test]
    fn a_bad_power_file_says_what_is_wrong() {
        let e = |text: &str| {
            PowerFile::parse(Path::new("p.toml"), text)
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            e(&FILE.replace("settings = [\"a\"]", "settings = [\"b\"]")),
            "p.toml: quick names setting \"b\", which is not declared"
        );
        assert_eq!(
            e(&FILE.replace("\"1..3\"", "\"3..1\"")),
            "p.toml: seeds: \"3..1\" is not a seed range like 1..10"
        );
        assert!(
            e(&FILE.replace("\"pause\"", "\"paws\""))
                .starts_with("p.toml: setting \"a\": \"paws\""),
            "{}",
            e(&FILE.replace("\"pause\"", "\"paws\""))
        );
        let unknown = e(&FILE.replace("commits = true", "comits = true"));
        assert!(unknown.contains("comits"), "{unknown}");
        assert!(unknown.contains("line"), "names the line: {unknown}");
    }
}
