use super::*;
use crate::checker::excuses::{Excuses, Judgement};
use crate::checker::index::AckedValue;
use crate::observe::timeline::{PartitionStateChange, RegistrationChange};
use crate::schedule::{Acks, Schedule};
use crate::system::Claims;
use crate::topic_partition::PartitionRef;

fn state(revision: i64, leader: i32, epoch: i32, isr: &[i32]) -> PartitionStateChange {
    PartitionStateChange::of_t0(revision, leader, epoch, isr)
}

fn registration(revision: i64, broker_id: i32, registered: bool) -> RegistrationChange {
    RegistrationChange {
        revision,
        broker_id,
        registered,
    }
}

/// b1 leads [1, 2] at revision 10; b3 (outside) is elected at revision 20.
/// Every broker registered at revisions 1..3; `more` adds changes.
fn timeline(more: &[RegistrationChange]) -> Timeline {
    let mut registrations = vec![
        registration(1, 1, true),
        registration(2, 2, true),
        registration(3, 3, true),
    ];
    registrations.extend_from_slice(more);
    Timeline {
        partition_states: vec![state(10, 1, 0, &[1, 2]), state(20, 3, 1, &[3])],
        controllers: vec![],
        registrations,
    }
}

/// A run of the reference broker's claims with `unclean` as the schedule's
/// unclean_leader_election (none: not set).
fn run(timeline: Timeline, unclean: Option<bool>) -> RunData {
    let setting = unclean.map_or(String::new(), |on| {
        format!("\n[cluster.settings]\nunclean_leader_election = {on}\n")
    });
    let text = format!(
        "[cluster]\nbrokers = 3\n\n[[cluster.topic]]\nname = \"t\"\npartitions = 1\n\
         replication_factor = 3\n{setting}"
    );
    RunData {
        schedule: Some(Schedule::parse("s.toml", &text).unwrap()),
        timeline: Some(timeline),
        claims: Claims {
            unclean_elections: true,
            unclean_election_setting: Some("unclean_leader_election".into()),
            recovers: true,
        },
        ..RunData::default()
    }
}

/// Value 7 acknowledged at offset 0 under [1, 2] in leader epoch 0.
fn acked() -> AckedValue<'static> {
    AckedValue {
        index: 5,
        invoked: 4,
        partition: std::borrow::Cow::Owned(PartitionRef::new("t", 0)),
        value: 7,
        acks: Acks::All,
        offset: Some(0),
        isr: Some(&[1, 2]),
        leader_epoch: Some(0),
    }
}

fn outcome(run: &RunData) -> (CheckResult, Judgement) {
    let index = RunIndex::new(run);
    let result = check(&index).unwrap();
    (result, Excuses::of(run).judge(&acked()))
}

#[test]
fn with_unclean_election_off_an_election_outside_the_isr_is_an_anomaly_and_excuses_nothing() {
    // b1 and b2 gone before the election: only the setting is missing.
    let gone = [registration(12, 1, false), registration(13, 2, false)];
    for unclean in [None, Some(false)] {
        let (result, judgement) = outcome(&run(timeline(&gone), unclean));
        assert_eq!(
            result.verdict,
            crate::checker::Verdict::Invalid,
            "{result:?}"
        );
        let evidence = &result.evidence[0];
        assert_eq!(evidence.anomaly, Anomaly::ElectionOutsideIsr);
        assert!(
            evidence.summary.contains("unclean election was off"),
            "{}",
            evidence.summary
        );
        assert_eq!(judgement, Judgement::NotExcused);
    }
}

#[test]
fn with_unclean_election_on_a_registered_isr_member_refuses_the_excuse() {
    // b1 gone, b2 registered from before the state through the election.
    let (result, judgement) = outcome(&run(timeline(&[registration(12, 1, false)]), Some(true)));
    assert_eq!(
        result.verdict,
        crate::checker::Verdict::Invalid,
        "{result:?}"
    );
    assert!(
        result.evidence[0]
            .summary
            .contains("ISR member(s) [2] stayed registered"),
        "{}",
        result.evidence[0].summary
    );
    assert_eq!(judgement, Judgement::NotExcused);
}

#[test]
fn with_unclean_election_on_and_every_isr_member_gone_the_election_excuses_the_loss() {
    let gone = [registration(12, 1, false), registration(13, 2, false)];
    let (result, judgement) = outcome(&run(timeline(&gone), Some(true)));
    assert_eq!(result.verdict, crate::checker::Verdict::Valid, "{result:?}");
    assert!(
        matches!(&judgement, Judgement::Excused(why) if why.contains("unclean election of b3")),
        "{judgement:?}"
    );
    // A member that registered again in between may not have been seen by
    // the controller: not counted as registered throughout.
    let bounced = [registration(12, 1, false), registration(15, 2, true)];
    let (result, _) = outcome(&run(timeline(&bounced), Some(true)));
    assert_eq!(result.verdict, crate::checker::Verdict::Valid, "{result:?}");
}

#[test]
fn a_system_that_names_no_setting_is_judged_by_registrations_alone() {
    let gone = [registration(12, 1, false), registration(13, 2, false)];
    let mut data = run(timeline(&gone), None);
    data.claims.unclean_election_setting = None;
    let (result, judgement) = outcome(&data);
    assert_eq!(result.verdict, crate::checker::Verdict::Valid, "{result:?}");
    assert!(matches!(judgement, Judgement::Excused(_)), "{judgement:?}");
}
