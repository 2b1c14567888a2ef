//! Schedules as a user writes them: every example in docs/schedules.md parses
//! and survives print → parse; mistakes are named with file, line and key.

use epochal::schedule::{Fault, Invalid, Schedule, ScheduleError, Step, Target};

fn doc_examples() -> Vec<String> {
    let doc = include_str!("../../docs/schedules.md");
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in doc.lines() {
        match (&mut current, line.trim()) {
            (None, "```toml") => current = Some(String::new()),
            (Some(block), "```") => {
                blocks.push(std::mem::take(block));
                current = None;
            }
            (Some(block), _) => {
                block.push_str(line);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    blocks
}

const BASE: &str = r#"[cluster]
brokers = 3

[[cluster.topic]]
name = "t"
partitions = 1
replication_factor = 3
"#;

fn parse(src: &str) -> Result<Schedule, ScheduleError> {
    Schedule::parse("s.toml", src)
}

#[test]
fn every_doc_example_parses_and_round_trips() {
    let examples = doc_examples();
    assert!(examples.len() >= 5, "found {} examples", examples.len());
    for (i, src) in examples.iter().enumerate() {
        let schedule = parse(src).unwrap_or_else(|e| panic!("example {i}: {e}\n{src}"));
        let printed = schedule.to_toml();
        let again =
            parse(&printed).unwrap_or_else(|e| panic!("example {i} printed: {e}\n{printed}"));
        assert_eq!(again, schedule, "example {i} printed as:\n{printed}");
    }
}

#[test]
fn the_acceptance_scenario_reads_as_written() {
    let s = parse(&doc_examples()[0]).unwrap();
    assert_eq!(s.steps.len(), 8);
    assert_eq!(
        s.steps[2],
        Step::Fault(Fault::Crash(Target::LeaderOf("t-0".parse().unwrap())))
    );
    let Step::Await {
        condition,
        timeout_ms,
    } = &s.steps[0]
    else {
        panic!("step 1 is an await: {:?}", s.steps[0]);
    };
    assert_eq!(*timeout_ms, Some(20000));
    assert_eq!(condition.to_string(), "leader of t-0 is b1");
}

fn syntax(src: &str) -> (usize, Option<String>, String) {
    match parse(src).unwrap_err() {
        e @ ScheduleError::Syntax { .. } => {
            let text = e.to_string();
            assert!(text.starts_with("s.toml:"), "{text}");
            let ScheduleError::Syntax { line, key, .. } = e else {
                unreachable!()
            };
            (line, key, text)
        }
        other => panic!("expected a syntax error, got {other}"),
    }
}

#[test]
fn a_typo_in_a_step_key_names_its_line_and_key() {
    let src = format!("{BASE}\n[[step]]\nfualt = {{ crash = \"b1\" }}\n");
    let (line, key, text) = syntax(&src);
    assert_eq!(line, 10, "{text}");
    assert_eq!(key.as_deref(), Some("fualt"), "{text}");
    assert!(text.contains("fualt"));
}

#[test]
fn a_coverage_minimum_that_is_no_whole_number_names_its_line_and_key() {
    let src = format!("{BASE}\n[workload]\nmin_faults = 2\nmin_ops_per_fault = -1\n");
    let (line, key, text) = syntax(&src);
    assert_eq!(line, 11, "{text}");
    assert_eq!(key.as_deref(), Some("min_ops_per_fault"), "{text}");
    let src = format!("{BASE}\n[workload]\nmin_leader_changes = \"two\"\n");
    let (line, key, text) = syntax(&src);
    assert_eq!(line, 10, "{text}");
    assert_eq!(key.as_deref(), Some("min_leader_changes"), "{text}");
    let src = format!("{BASE}\n[workload]\nmin_ops_per_faults = 1\n");
    let (line, key, text) = syntax(&src);
    assert_eq!(
        (line, key.as_deref()),
        (10, Some("min_ops_per_faults")),
        "{text}"
    );
    let parsed = parse(&format!(
        "{BASE}\n[workload]\nmin_acked_during_faults = 40\nmin_leader_changes = 2\n"
    ))
    .unwrap();
    assert_eq!(parsed.workload.min_acked_during_faults, Some(40));
    assert_eq!(parsed.workload.min_leader_changes, Some(2));
    assert_eq!(parsed.workload.min_ops_per_fault, None);
}

#[test]
fn a_typo_inside_an_inline_table_names_its_line_and_key() {
    let src = format!(
        "{BASE}\n[[step]]\nawait = \"b1 in ISR of t-0\"\n\n[[step]]\nproduce = {{ partiton = \"t-0\", values = [1] }}\n"
    );
    let (line, key, text) = syntax(&src);
    assert_eq!(line, 13, "{text}");
    assert_eq!(key.as_deref(), Some("partiton"), "{text}");
}

#[test]
fn an_unknown_fault_verb_and_a_bad_target_are_named() {
    let (line, key, text) = syntax(&format!(
        "{BASE}\n[[step]]\nfault = {{ explode = \"b1\" }}\n"
    ));
    assert_eq!(line, 10, "{text}");
    assert!(text.contains("explode"), "{text}");
    assert_eq!(key.as_deref(), Some("explode"), "{text}");
    let (line, key, text) = syntax(&format!(
        "{BASE}\n[[step]]\nfaults = [{{ stop = \"b1\" }}, \"heel\"]\n"
    ));
    assert_eq!(line, 10, "{text}");
    assert_eq!(key.as_deref(), Some("faults"), "{text}");
    assert!(text.contains("heel"), "{text}");
    let (line, _, text) = syntax(&format!(
        "{BASE}\n[[step]]\nfault = {{ crash = \"the leader\" }}\n"
    ));
    assert_eq!(line, 10, "{text}");
    assert!(text.contains("not a target"), "{text}");
}

fn invalid(src: &str) -> (Option<usize>, Invalid, String) {
    match parse(src).unwrap_err() {
        ScheduleError::Invalid { line, what, .. } => {
            let text = what.to_string();
            (line, what, text)
        }
        other => panic!("expected a validation error, got {other}"),
    }
}

#[test]
fn an_unknown_node_is_named() {
    let (line, what, text) = invalid(&format!("{BASE}\n[[step]]\nfault = {{ pause = \"b4\" }}\n"));
    assert_eq!(line, Some(9));
    assert_eq!(
        what,
        Invalid::UnknownNode {
            node: "b4".into(),
            brokers: 3
        },
        "{text}"
    );
    let (_, what, _) = invalid(&format!("{BASE}\n[[step]]\nawait = \"controller is b0\"\n"));
    assert!(matches!(what, Invalid::UnknownNode { node, .. } if node == "b0"));
    let (_, what, _) = invalid(&format!("{BASE}\n[cluster.node.b7]\nfailpoints = {{}}\n"));
    assert!(matches!(what, Invalid::UnknownNode { node, .. } if node == "b7"));
}

#[test]
fn an_unknown_partition_or_topic_is_named() {
    let (_, what, _) = invalid(&format!(
        "{BASE}\n[[step]]\nproduce = {{ partition = \"t-1\", values = [1] }}\n"
    ));
    assert!(
        matches!(what, Invalid::UnknownPartition { partition, partitions: 1, .. } if partition == "t-1")
    );
    let (_, what, _) = invalid(&format!(
        "{BASE}\n[[step]]\nawait = \"leader of u-0 is b1\"\n"
    ));
    assert!(matches!(what, Invalid::UnknownTopic { topic, .. } if topic == "u"));
}

#[test]
fn an_unknown_or_harness_owned_setting_is_named_with_its_line() {
    let (line, what, text) = invalid(&format!("{BASE}\n[cluster.settings]\nmin_isr = 2\n"));
    assert_eq!(line, Some(10), "{text}");
    assert!(matches!(what, Invalid::UnknownSetting { setting, .. } if setting == "min_isr"));
    let (line, what, text) = invalid(&format!(
        "{BASE}\n[cluster.node.b2]\nsettings = {{ segment_bytes = 10, data_dir = \"/tmp\" }}\n"
    ));
    assert_eq!(line, Some(10), "{text}");
    assert!(matches!(what, Invalid::HarnessOwnedSetting { setting, .. } if setting == "data_dir"));
    let (_, what, _) = invalid(&format!(
        "{BASE}\n[cluster.node.b2]\nfailpoints = {{ leader-before-append = \"stop\" }}\n"
    ));
    assert!(
        matches!(what, Invalid::UnknownFailpoint { failpoint, .. } if failpoint == "leader-before-append")
    );
}

#[test]
fn a_member_step_names_a_member_an_earlier_step_subscribed() {
    let subscribe = "\n[[step]]\nsubscribe = { member = \"c1\", group = \"g\" }\n";
    let (line, what, text) = invalid(&format!("{BASE}\n[[step]]\npoll = {{ member = \"c1\" }}\n"));
    assert_eq!(line, Some(9), "{text}");
    assert!(
        matches!(&what, Invalid::BadStep { step: 1, why } if why.contains("no earlier step subscribed")),
        "{text}"
    );
    let (line, what, text) = invalid(&format!(
        "{BASE}{subscribe}\n[[step]]\nunsubscribe = \"c1\"\n\n[[step]]\npoll = {{ member = \"c1\" }}\n"
    ));
    assert_eq!(line, Some(15), "{text}");
    assert!(matches!(&what, Invalid::BadStep { step: 3, .. }), "{text}");
    let (_, what, text) = invalid(&format!("{BASE}{subscribe}{subscribe}"));
    assert!(
        matches!(&what, Invalid::BadStep { step: 2, why } if why.contains("already subscribed")),
        "{text}"
    );
    let (_, what, text) = invalid(&format!(
        "{BASE}\n[[step]]\nsubscribe = {{ member = \"c1\", group = \"g\", topics = [\"u\"] }}\n"
    ));
    assert!(
        matches!(&what, Invalid::BadStep { why, .. } if why.contains("topic u")),
        "{text}"
    );
    let parsed = parse(&format!(
        "{BASE}{subscribe}\n[[step]]\npoll = {{ member = \"c1\" }}\n\n[[step]]\nunsubscribe = \"c1\"\n{subscribe}"
    ))
    .unwrap();
    assert!(matches!(&parsed.steps[1], Step::Poll(p) if p.member == "c1"));
    assert!(matches!(&parsed.steps[2], Step::Unsubscribe(m) if m == "c1"));
}

#[test]
fn a_step_must_be_exactly_one_thing() {
    let (line, what, _) = invalid(&format!(
        "{BASE}\n[[step]]\nfault = \"heal\"\nawait = \"b1 is stopped\"\n"
    ));
    assert_eq!(line, Some(9));
    assert!(matches!(what, Invalid::BadStep { step: 1, .. }));
    let (_, what, _) = invalid(&format!(
        "{BASE}\n[[step]]\nfault = \"heal\"\ntimeout_ms = 5\n"
    ));
    assert!(matches!(what, Invalid::BadStep { .. }));
}

#[test]
fn a_topic_cannot_have_more_replicas_than_brokers() {
    let src = BASE.replace("replication_factor = 3", "replication_factor = 4");
    let (_, what, _) = invalid(&src);
    assert!(matches!(what, Invalid::BadTopic { .. }));
}

#[test]
fn a_setting_of_the_wrong_type_or_value_is_named() {
    let (line, what, text) = invalid(&format!(
        "{BASE}\n[cluster.settings]\ntruncation = \"kip-102\"\n"
    ));
    assert_eq!(line, Some(10), "{text}");
    assert!(
        matches!(what, Invalid::BadSettingValue { setting, .. } if setting == "truncation"),
        "{text}"
    );
    let (_, what, _) = invalid(&format!(
        "{BASE}\n[cluster.node.b1]\nsettings = {{ unclean_leader_election = \"yes\" }}\n"
    ));
    assert!(
        matches!(what, Invalid::BadSettingValue { setting, .. } if setting == "unclean_leader_election")
    );
    let (_, what, _) = invalid(&format!(
        "{BASE}\n[cluster.settings]\nmin_insync_replicas = -1\n"
    ));
    assert!(matches!(what, Invalid::BadSettingValue { .. }));
}

#[test]
fn a_typo_in_a_table_header_a_bad_value_and_a_missing_key_are_located() {
    let (line, key, text) = syntax(&format!("{BASE}\n[[stpe]]\nfault = \"heal\"\n"));
    assert_eq!((line, key.as_deref()), (9, Some("stpe")), "{text}");
    let (line, key, text) = syntax(&format!("{BASE}\n[workload]\nacks = \"al\"\n"));
    assert_eq!((line, key.as_deref()), (10, Some("acks")), "{text}");
    let (line, key, text) = syntax(&format!("{BASE}\n[[step]]\nawait = \"leader of t-0 is\"\n"));
    assert_eq!((line, key.as_deref()), (10, Some("await")), "{text}");
    assert!(text.contains("not a condition"), "{text}");
    let (line, key, text) = syntax(&format!(
        "{BASE}\n[[step]]\nproduce = {{ partition = \"t-0\" }}\n"
    ));
    assert_eq!((line, key.as_deref()), (10, Some("produce")), "{text}");
    assert!(text.contains("missing field `values`"), "{text}");
}

#[test]
fn background_workload_mistakes_are_named_with_their_line() {
    // An acknowledgement await with nobody producing could never be met.
    let (line, what, text) = invalid(&format!(
        "{BASE}\n[[step]]\nawait = \"10 more writes acknowledged\"\n"
    ));
    assert_eq!(line, Some(9));
    assert!(matches!(what, Invalid::BadStep { step: 1, .. }), "{text}");
    assert!(text.contains("no producers"), "{text}");
    let (line, what, _) = invalid(&format!(
        "{BASE}\n[workload.background]\nconsumers = 1\n\n[[step]]\nawait = \"10 more writes acknowledged\"\n"
    ));
    assert_eq!(line, Some(12));
    assert!(matches!(what, Invalid::BadStep { step: 1, .. }));
    // A partition the cluster does not have, and a background of nobody.
    let (line, what, _) = invalid(&format!(
        "{BASE}\n[workload.background]\nproducers = 1\npartitions = [\"t-3\"]\n"
    ));
    assert_eq!(line, Some(9));
    assert!(matches!(what, Invalid::UnknownPartition { partition, .. } if partition == "t-3"));
    let (line, what, _) = invalid(&format!("{BASE}\n[workload.background]\ninterval_ms = 5\n"));
    assert_eq!(line, Some(9));
    assert_eq!(what, Invalid::EmptyBackground);
    // Subscribers alone, or transactional producers alone, are a background:
    // a group that polls what scripted steps produce, or writers of their own.
    for only in ["subscribers = 2", "transactional = 1"] {
        let s = parse(&format!("{BASE}\n[workload.background]\n{only}\n")).unwrap();
        assert!(s.workload.background.is_some(), "{only}");
    }
    // A misspelt key is a syntax error at its line.
    let (line, key, _) = syntax(&format!("{BASE}\n[workload.background]\nproducer = 1\n"));
    assert_eq!((line, key.as_deref()), (10, Some("producer")));
    // And a well-formed one reads back with its defaults filled in.
    let s = parse(&format!(
        "{BASE}\n[workload.background]\nproducers = 2\n\n[[step]]\nawait = \"25 more writes acknowledged\"\n"
    ))
    .unwrap();
    let b = s.workload.background.as_ref().unwrap();
    assert_eq!((b.producers, b.consumers, b.interval_ms), (2, 0, 20));
    assert!(
        matches!(&s.steps[0], Step::Await { condition, .. } if condition.to_string() == "25 more writes acknowledged"),
        "{:?}",
        s.steps[0]
    );
    assert_eq!(parse(&s.to_toml()).unwrap(), s);
}

#[test]
fn a_truncate_log_with_two_cuts_or_a_fraction_out_of_range_is_named() {
    let (line, _, text) = syntax(&format!(
        "{BASE}\n[[step]]\nfault = {{ truncate-log = {{ node = \"b1\", partition = \"t-0\", by_records = 2, fraction = 0.5 }} }}\n"
    ));
    assert_eq!(line, 10, "{text}");
    assert!(
        text.contains("exactly one of to_offset, by_bytes, by_records, fraction"),
        "{text}"
    );
    for fraction in ["0.0", "1.5", "-0.5", "nan"] {
        let (line, _, text) = syntax(&format!(
            "{BASE}\n[[step]]\nfault = {{ truncate-log = {{ node = \"b1\", partition = \"t-0\", fraction = {fraction} }} }}\n"
        ));
        assert_eq!(line, 10, "{text}");
        assert!(text.contains("above 0 and at most 1"), "{fraction}: {text}");
    }
}

#[test]
fn a_cut_takes_an_id_and_on_heal_and_heal_can_name_one() {
    use epochal::schedule::{Cut, Fault, OnHeal, Target};
    let src = format!(
        "{BASE}\n[[step]]\nfault = {{ isolate = {{ target = \"b1\", id = \"cut-1\", on_heal = \"reset\" }} }}\n\n[[step]]\nfault = {{ one-way = {{ from = \"b1\", to = \"b2\", id = \"cut-2\" }} }}\n\n[[step]]\nfault = {{ heal = \"cut-1\" }}\n\n[[step]]\nfault = \"heal\"\n"
    );
    let s = parse(&src).unwrap();
    let faults: Vec<&Fault> = s.steps.iter().flat_map(|st| st.faults()).collect();
    assert_eq!(
        faults[0],
        &Fault::Isolate(Cut {
            target: Target::Node(epochal::node::NodeId::new(1)),
            id: Some("cut-1".into()),
            on_heal: OnHeal::Reset,
        })
    );
    let Fault::OneWay(w) = faults[1] else {
        panic!("{:?}", faults[1])
    };
    assert_eq!(w.options(), (Some("cut-2"), OnHeal::Resume));
    assert_eq!(faults[2], &Fault::HealCut("cut-1".into()));
    assert_eq!(faults[3], &Fault::Heal);
    // Printed back as a table (keys in order) when an option is set.
    let text = s.to_toml();
    assert!(
        text.contains(r#"isolate = { id = "cut-1", on_heal = "reset", target = "b1" }"#),
        "{text}"
    );
    assert!(text.contains(r#"fault = { heal = "cut-1" }"#), "{text}");
    assert!(text.contains(r#"fault = "heal""#), "{text}");
    assert_eq!(parse(&text).unwrap(), s);
}

#[test]
fn a_heal_of_a_cut_no_earlier_step_names_is_refused_with_its_line() {
    let (line, _, text) = invalid(&format!(
        "{BASE}\n[[step]]\nfault = {{ isolate = {{ target = \"b1\", id = \"a\" }} }}\n\n[[step]]\nfault = {{ heal = \"b\" }}\n"
    ));
    assert_eq!(line, Some(12), "{text}");
    assert!(text.contains("heal names the cut \"b\""), "{text}");
    let (_, key, text) = syntax(&format!(
        "{BASE}\n[[step]]\nfault = {{ isolate = {{ target = \"b1\", on_heel = \"reset\" }} }}\n"
    ));
    assert!(text.contains("on_heel"), "{text}");
    assert_eq!(key.as_deref(), Some("on_heel"), "{text}");
    let (_, _, text) = syntax(&format!(
        "{BASE}\n[[step]]\nfault = {{ bridge = {{ target = \"b1\", on_heal = \"later\" }} }}\n"
    ));
    assert!(text.contains("later"), "{text}");
}
