//! The harness's list of broker settings and failpoints
//! (`src/schedule/broker_settings.rs`) against the broker's own, read from the
//! built `epochal-broker --list-settings` — the harness never links the broker
//! crate, so this is where the two lists meet. A setting or failpoint added on
//! either side alone, or a kind that differs, fails here.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use epochal::schedule::{BROKER_SETTINGS, FAILPOINTS, HARNESS_OWNED_SETTINGS, SettingKind};
use serde_json::Value;

/// The broker's listing: setting name → kind, and failpoint names.
fn broker_listing() -> (BTreeMap<String, String>, BTreeSet<String>) {
    let bin = common::bin_dir().join("epochal-broker");
    let output = Command::new(&bin)
        .arg("--list-settings")
        .env_remove("EPOCHAL_FAILPOINTS")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{} --list-settings: {output:?}",
        bin.display()
    );
    let mut settings = BTreeMap::new();
    let mut failpoints = BTreeSet::new();
    for line in String::from_utf8(output.stdout).unwrap().lines() {
        let line: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        if let Some(name) = line["setting"].as_str() {
            let kind = match line["kind"].as_str().unwrap() {
                "one-of" => {
                    let values: Vec<&str> = line["values"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|v| v.as_str().unwrap())
                        .collect();
                    format!("one-of {}", values.join(","))
                }
                other => other.to_string(),
            };
            assert!(
                settings.insert(name.to_string(), kind).is_none(),
                "{name} twice"
            );
        } else if let Some(name) = line["failpoint"].as_str() {
            assert!(failpoints.insert(name.to_string()), "{name} twice");
        } else {
            panic!("neither a setting nor a failpoint: {line}");
        }
    }
    assert!(!settings.is_empty(), "the broker listed no settings");
    (settings, failpoints)
}

/// The harness's kind in the broker's terms. A harness `Count` is any
/// non-negative integer; the broker's own minimum (e.g. a TTL of at least 1)
/// stays the broker's to enforce, so it is not compared.
fn in_broker_terms(kind: SettingKind) -> String {
    match kind {
        SettingKind::Bool => "bool".into(),
        SettingKind::Count => "count".into(),
        SettingKind::OneOf(values) => format!("one-of {}", values.join(",")),
    }
}

#[test]
fn the_harness_lists_exactly_the_broker_settings_and_failpoints() {
    let (broker, broker_failpoints) = broker_listing();

    let owned: BTreeSet<&str> = HARNESS_OWNED_SETTINGS.iter().copied().collect();
    let schedulable: BTreeSet<&str> = BROKER_SETTINGS.iter().map(|(name, _)| *name).collect();
    assert!(
        owned.is_disjoint(&schedulable),
        "a setting both harness-owned and schedulable: {:?}",
        owned.intersection(&schedulable).collect::<Vec<_>>()
    );
    let harness_names: BTreeSet<&str> = owned.union(&schedulable).copied().collect();
    let broker_names: BTreeSet<&str> = broker.keys().map(String::as_str).collect();
    assert_eq!(
        harness_names, broker_names,
        "BROKER_SETTINGS ∪ HARNESS_OWNED_SETTINGS (left) vs the broker's settings (right)"
    );

    let harness_kinds: BTreeMap<String, String> = BROKER_SETTINGS
        .iter()
        .map(|(name, kind)| (name.to_string(), in_broker_terms(*kind)))
        .collect();
    let broker_kinds: BTreeMap<String, String> = broker
        .into_iter()
        .filter(|(name, _)| !owned.contains(name.as_str()))
        .collect();
    assert_eq!(
        harness_kinds, broker_kinds,
        "kinds of the schedulable settings: harness (left) vs broker (right)"
    );

    let harness_failpoints: BTreeSet<String> = FAILPOINTS.iter().map(|f| f.to_string()).collect();
    assert_eq!(
        harness_failpoints, broker_failpoints,
        "FAILPOINTS (left) vs the broker's failpoints (right)"
    );
}
