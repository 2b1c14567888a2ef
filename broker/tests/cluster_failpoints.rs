//! Acceptance (issue 6): `EPOCHAL_FAILPOINTS` is read at start. Unset, nothing is
//! armed and the broker runs as usual; a name the broker does not define stops it
//! at start with an error naming that name; an armed `stop` makes the broker
//! SIGSTOP itself at that exact point until it is sent SIGCONT.

use crate::common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::cluster::Cluster;
use common::kafka_client::batch;
use nix::sys::signal::Signal;

const TIMEOUT: Duration = Duration::from_secs(30);

#[test]
fn cluster_failpoints_an_unknown_name_is_a_startup_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_epochal-broker"))
        .args(["--node-id", "1", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("b1"))
        // Never reached: the failpoints are checked before anything connects.
        .args(["--etcd", "http://127.0.0.1:9"])
        .env(
            "EPOCHAL_FAILPOINTS",
            "leader-after-append=off;controller-befor-event=stop",
        )
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the broker did not exit within {TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stderr = std::io::read_to_string(child.stderr.take().unwrap()).unwrap();
    assert!(!status.success(), "{stderr}");
    assert!(
        stderr.contains("unknown failpoint `controller-befor-event`"),
        "{stderr}"
    );
    assert!(!dir.path().join("b1").join("listening").exists());
}

#[test]
fn cluster_failpoints_unset_arms_nothing_and_stop_pauses_the_leader_after_its_append() {
    // Broker 1 unset (the helper removes the variable); broker 2 armed to stop
    // once after a leader append.
    let cluster = Cluster::start_with_env(
        2,
        &["--lease-ttl-s", "10"],
        |_| vec![],
        |id| {
            if id == 2 {
                vec![(
                    "EPOCHAL_FAILPOINTS",
                    "leader-after-append=1*stop".to_string(),
                )]
            } else {
                vec![]
            }
        },
    );
    assert!(!cluster.broker(1).log().contains("failpoint armed"));
    assert!(cluster.broker(2).log().contains("failpoint armed"));

    // Each broker leads one single-replica partition (placement starts at
    // broker index p): broker 1 answers at once, unset.
    assert_eq!(cluster.client(1).create_topic("f", 2, 1), 0);
    let s0 = cluster.await_state("p0 led", TIMEOUT, "f", 0, |s| s.leader > 0);
    let s1 = cluster.await_state("p1 led", TIMEOUT, "f", 1, |s| s.leader > 0);
    let (on_1, on_2) = if s0.leader == 1 { (0, 1) } else { (1, 0) };
    assert_eq!(if on_1 == 0 { s1.leader } else { s0.leader }, 2);
    let (code, offset) = cluster
        .client(1)
        .produce("f", on_1, batch(&[b"a"]), 1)
        .unwrap();
    assert_eq!((code, offset), (0, 0));

    // Broker 2 appends, then stops itself before answering.
    let addr = cluster.broker(2).addr.clone();
    let producer = std::thread::spawn(move || {
        let mut c = common::kafka_client::KafkaClient::connect(&addr).unwrap();
        c.produce("f", on_2, batch(&[b"b"]), 1).unwrap()
    });
    common::await_some_or(
        "broker 2 to stop at leader-after-append",
        TIMEOUT,
        || (cluster.broker(2).proc_state() == Some('T')).then_some(()),
        || cluster.logs(),
    );
    assert!(!producer.is_finished(), "answered while stopped");
    cluster.broker(2).signal(Signal::SIGCONT);
    common::await_some_or(
        "the produce answer after SIGCONT",
        TIMEOUT,
        || producer.is_finished().then_some(()),
        || cluster.logs(),
    );
    assert_eq!(producer.join().unwrap(), (0, 0));
    // `1*`: the next append passes straight through.
    let (code, offset) = cluster
        .client(2)
        .produce("f", on_2, batch(&[b"c"]), 1)
        .unwrap();
    assert_eq!((code, offset), (0, 1));
    assert!(cluster.broker(2).log().contains("failpoint: resumed"));
}
