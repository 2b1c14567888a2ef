use super::*;

#[test]
fn each_name_parses_back_and_serialises_as_itself() {
    for &verb in Verb::ALL {
        assert_eq!(Verb::from_name(verb.name()), Some(verb));
        let json = serde_json::to_value(verb).unwrap();
        assert_eq!(json, serde_json::Value::String(verb.name().into()));
        assert_eq!(serde_json::from_value::<Verb>(json).unwrap(), verb);
    }
    for &kind in Kind::ALL {
        assert_eq!(kind.name().parse::<Kind>(), Ok(kind));
        assert_ne!(kind.verb().role(), Role::Undo);
    }
    assert_eq!(
        "resume".parse::<Kind>().unwrap_err().to_string(),
        "\"resume\" is not a fault kind (pause, crash, stop, power-loss, truncate-log, \
         isolate, majority-minority, one-way, bridge, node-from-etcd, node-from-clients, \
         hold-requests, delay-requests, drop-requests, duplicate-requests, node-from-database, \
         pause-database, crash-database)"
    );
    assert!(serde_json::from_str::<Verb>("\"unplug\"").is_err());
}

/// One fault of each verb, as a schedule writes it.
fn one_of_each() -> Vec<Fault> {
    [
        "pause = \"b1\"",
        "resume = \"b1\"",
        "crash = \"b1\"",
        "restart = \"b1\"",
        "stop = \"b1\"",
        "start = \"b1\"",
        "power-loss = \"b1\"",
        "truncate-log = { node = \"b1\", partition = \"t-0\", by_records = 2 }",
        "isolate = \"b1\"",
        "majority-minority = \"b1\"",
        "one-way = { from = \"b1\", to = \"b2\" }",
        "bridge = \"b1\"",
        "node-from-etcd = \"b1\"",
        "node-from-clients = \"b1\"",
        "hold-requests = { from = \"clients\", to = \"b1\", api = \"EndTxn\" }",
        "delay-requests = { from = \"b2\", to = \"b1\", api = \"Fetch\", ms = 200 }",
        "drop-requests = { from = \"clients\", to = \"b1\", api = \"Produce\" }",
        "duplicate-requests = { from = \"clients\", to = \"b1\", api = \"Produce\" }",
        "release-requests = { from = \"clients\", to = \"b1\", api = \"EndTxn\" }",
        "heal = \"cut-1\"",
        "node-from-database = \"b1\"",
    ]
    .iter()
    .map(|toml_text| toml::from_str(toml_text).unwrap_or_else(|e| panic!("{toml_text}: {e}")))
    .chain(
        [
            "pause-database",
            "resume-database",
            "crash-database",
            "restart-database",
        ]
        .iter()
        .map(|word| toml::Value::String((*word).into()).try_into().unwrap()),
    )
    .collect()
}

/// The schedule's TOML key for each fault is its verb's name, and exactly
/// one verb's spec recognises it.
#[test]
fn the_schedules_names_are_the_registrys() {
    let written = |fault: &Fault| -> String {
        match serde_json::to_value(fault).unwrap() {
            serde_json::Value::Object(map) => map.keys().next().unwrap().clone(),
            serde_json::Value::String(word) => word,
            other => panic!("{other}"),
        }
    };
    let faults = one_of_each();
    let mut verbs: Vec<Verb> = faults.iter().map(Verb::of).collect();
    verbs.sort();
    let mut all = Verb::ALL.to_vec();
    all.sort();
    assert_eq!(verbs, all, "one fault of each verb");
    for fault in faults.iter().chain([&Fault::Heal]) {
        assert_eq!(written(fault), Verb::of(fault).name());
        let recognised: Vec<&str> = Verb::ALL
            .iter()
            .filter(|v| (v.spec().is)(fault))
            .map(|v| v.name())
            .collect();
        assert_eq!(recognised, [Verb::of(fault).name()], "{fault:?}");
    }
}

/// An undo ends something and is never drawn; a fault is drawn, and
/// whatever undoes it is some undo's to end.
#[test]
fn every_fault_has_its_undo_and_every_undo_its_faults() {
    for &verb in Verb::ALL {
        let spec = verb.spec();
        let undo = spec.role == Role::Undo;
        assert_eq!(undo, spec.ends != Ends::Nothing, "{verb}");
        assert_eq!(undo, matches!(spec.draw, Draw::Never), "{verb}");
        if undo {
            assert_eq!(spec.undo, Undo::Never, "{verb}");
            continue;
        }
        let ended_by: Vec<Verb> = Verb::ALL
            .iter()
            .copied()
            .filter(|u| u.spec().ends.ends(spec.undo))
            .collect();
        assert_eq!(ended_by.is_empty(), spec.undo == Undo::Never, "{verb}");
    }
    let ends = |verb: Verb| -> Vec<&str> {
        Verb::ALL
            .iter()
            .filter(|f| verb.spec().ends.ends(f.spec().undo))
            .map(|f| f.name())
            .collect()
    };
    assert_eq!(ends(Verb::Restart), ["crash", "stop", "power-loss"]);
    assert_eq!(ends(Verb::Resume), ["pause"]);
    assert_eq!(ends(Verb::ReleaseRequests).len(), 4);
    // Six cuts (node-from-database among them) and four request faults.
    assert_eq!(ends(Verb::Heal).len(), 11);
    assert_eq!(ends(Verb::ResumeDatabase), ["pause-database"]);
    assert_eq!(ends(Verb::RestartDatabase), ["crash-database"]);
}

/// The database's verbs are words in a schedule and print back as such;
/// a table form of them, or a word no verb has, is refused naming the words.
#[test]
fn the_database_verbs_are_words() {
    for fault in [
        Fault::PauseDatabase,
        Fault::ResumeDatabase,
        Fault::CrashDatabase,
        Fault::RestartDatabase,
    ] {
        let written = toml::to_string(&crate::schedule::Step::Fault(fault.clone())).unwrap();
        let name = Verb::of(&fault).name();
        assert_eq!(written, format!("fault = \"{name}\"\n"));
        let step: crate::schedule::Step = toml::from_str(&written).unwrap();
        assert_eq!(step, crate::schedule::Step::Fault(fault));
        assert!(toml::from_str::<Fault>(&format!("{name} = \"b1\"")).is_err());
    }
    let e = toml::from_str::<crate::schedule::Step>("fault = \"pause-postgres\"")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("expected one of `heal`, `pause-database`"),
        "{e}"
    );
}
