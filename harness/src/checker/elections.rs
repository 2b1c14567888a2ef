//! The election rule, and the premise of the excuse it grants. Kafka elects a
//! partition's leader from its ISR; only with unclean leader election on, and
//! only when no ISR member is left, may it take a replica from outside, and
//! only then may acknowledged writes be lost ("Unclean leader election: What
//! if they all die?", Kafka's documentation, Replication). The lost-write,
//! offset-changed and consumer checkers excuse a loss that follows such an
//! election; this module decides whether an election etcd recorded earned
//! that excuse, and the checker `clean-election` names each that did not
//! (`election-outside-isr`): a leader from outside the previous state's ISR
//! while the run had unclean election off, or while a member of that ISR stayed
//! registered from the state before through the election, so the controller
//! had a live ISR member to choose.

use super::evidence::ElectionOutsideIsr;
use super::{Anomaly, CheckOutcome, CheckResult, Checker, Evidence, Need, RunData, RunIndex};
use crate::observe::timeline::{Timeline, UncleanElection};

pub const NAME: &str = "clean-election";

pub fn checker() -> Checker {
    Checker {
        name: NAME,
        guarantee: "A leader etcd records for a partition is a member of the ISR of the \
            state before it, unless unclean leader election is on and no member of that \
            ISR was registered: otherwise the election is itself an anomaly, and it \
            excuses no loss of an acknowledged write.",
        source: "Kafka documentation, Replication (\"Unclean leader election: What if they \
            all die?\"; unclean.leader.election.enable: \"Indicates whether to enable \
            replicas not in the ISR set to be elected as leader as a last resort\"); \
            KIP-101's guarantee, limited to clusters with unclean election off; \
            GUARANTEES.md, \"Excuses\".",
        not_checked: "Whether unclean election is on is read from the run's schedule, by \
            the setting the system file names (claims.unclean_election_setting); a system \
            that names none, or a run without its schedule, is judged by the \
            registrations alone. A member counts as registered only if its key stood \
            unchanged from the state before the election through the election; one that \
            registered (or registered again) in between is not counted, as a controller \
            may not have seen it yet. A timeline stored before registrations were \
            recorded is judged by the setting alone. Elections etcd never recorded (a \
            broker acting on its own) are the fencing checkers' question.",
        needs: &[Need::EtcdTimeline],
        check,
    }
}

/// Why an election from outside the ISR did not earn its excuse.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Unearned {
    /// The setting that turns unclean election on, which the run left off.
    pub off: Option<String>,
    /// Members of the previous ISR registered from the state before the
    /// election through it.
    pub registered: Vec<i32>,
}

/// The setting that turns unclean election on when the run leaves it off on
/// every node; `None` when it is on somewhere, or the harness cannot tell.
pub(crate) fn unclean_election_off(run: &RunData) -> Option<String> {
    let setting = run.claims.unclean_election_setting.as_ref()?;
    let schedule = run.schedule.as_ref()?;
    let on = |settings: &std::collections::BTreeMap<String, toml::Value>| {
        settings.get(setting) == Some(&toml::Value::Boolean(true))
    };
    let anywhere = on(&schedule.cluster.settings)
        || schedule
            .cluster
            .node
            .values()
            .any(|node| on(&node.settings));
    (!anywhere).then(|| setting.clone())
}

/// Whether `election` earned the excuse an unclean election grants: `None`
/// when it did. `off` is [`unclean_election_off`] of the run.
pub(crate) fn unearned(
    timeline: &Timeline,
    election: &UncleanElection,
    off: Option<&String>,
) -> Option<Unearned> {
    let (previous, elected) = (election.previous, election.elected);
    let registered: Vec<i32> = previous
        .isr
        .iter()
        .copied()
        .filter(|&member| {
            timeline.registered_throughout(member, previous.revision, elected.revision)
        })
        .collect();
    (off.is_some() || !registered.is_empty()).then(|| Unearned {
        off: off.cloned(),
        registered,
    })
}

fn check(index: &RunIndex) -> CheckOutcome {
    let run = index.run;
    let Some(timeline) = &run.timeline else {
        return Ok(CheckResult::unknown(
            NAME,
            "needs etcd's timeline, which the run did not record",
        ));
    };
    let off = unclean_election_off(run);
    let elections = timeline.unclean_elections();
    let evidence: Vec<Evidence> = elections
        .iter()
        .filter_map(|election| {
            let why = unearned(timeline, election, off.as_ref())?;
            Some(evidence(election, why))
        })
        .collect();
    let result = CheckResult::fold(
        NAME,
        evidence,
        |evidence| {
            format!(
                "{} leader(s) elected from outside the ISR with no unclean election allowed",
                evidence.len()
            )
        },
        None,
        || {
            "every leader etcd recorded came from the ISR before it, or from outside it \
             with unclean election on and no ISR member registered"
                .to_owned()
        },
    );
    Ok(result.with_count("elections-outside-isr", elections.len() as u64))
}

fn evidence(election: &UncleanElection, why: Unearned) -> Evidence {
    let (previous, elected) = (election.previous, election.elected);
    let mut reasons = Vec::new();
    if let Some(setting) = &why.off {
        reasons.push(format!("unclean election was off ({setting} not set)"));
    }
    if !why.registered.is_empty() {
        reasons.push(format!(
            "ISR member(s) {:?} stayed registered from revision {} through the election",
            why.registered, previous.revision
        ));
    }
    Evidence {
        anomaly: Anomaly::ElectionOutsideIsr,
        summary: format!(
            "{}-{} leader epoch {}: etcd recorded leader {} (revision {}) from outside the ISR \
             {:?} (revision {}), though {}",
            elected.topic,
            elected.partition,
            elected.leader_epoch,
            elected.leader,
            elected.revision,
            previous.isr,
            previous.revision,
            reasons.join(" and ")
        ),
        details: ElectionOutsideIsr {
            leader: elected.leader,
            leader_epoch: elected.leader_epoch,
            partition: elected.partition,
            previous_isr: previous.isr.clone(),
            previous_revision: previous.revision,
            registered_isr_members: why.registered,
            revision: elected.revision,
            topic: elected.topic.clone(),
            unclean_election_off: why.off,
        }
        .into(),
    }
}

#[cfg(test)]
mod tests;
