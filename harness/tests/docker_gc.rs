//! `epochal gc`: what a dead harness left in Docker goes, what a live one holds
//! stays (unless `--all`), and an epochal image that is not current goes while
//! the current one stays. Needs Docker; without it this test fails saying so.

use crate::common;

use std::process::Command;

use common::docker::require_docker;
use common::scenario::{epochal, show};

fn docker(args: &[&str]) -> String {
    let output = Command::new("docker").args(args).output().unwrap();
    assert!(
        output.status.success(),
        "docker {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

fn network_exists(name: &str) -> bool {
    !docker(&["network", "ls", "-q", "--filter", &format!("name=^{name}$")]).is_empty()
}

fn image_exists(tag: &str) -> bool {
    !docker(&["images", "-q", tag]).is_empty()
}

/// A network labelled as a run of harness session `session` would be.
fn leftover_network(name: &str, session: &str) {
    docker(&[
        "network",
        "create",
        "--label",
        "epochal.project=epochal",
        "--label",
        &format!("epochal.session={session}"),
        "--label",
        &format!("epochal.run={session}-1"),
        name,
    ]);
}

#[test]
fn docker_gc_removes_what_dead_harnesses_left_and_stale_images() {
    require_docker();
    let me = std::process::id();
    // A pid that was a process and is no more.
    let mut gone = Command::new("true").spawn().unwrap();
    gone.wait().unwrap();
    let dead_session = format!("{}-test", gone.id());
    let live_session = format!("{me}-test");
    let dead = format!("epochal-gc-test-dead-{me}");
    let live = format!("epochal-gc-test-live-{me}");
    leftover_network(&dead, &dead_session);
    leftover_network(&live, &live_session);
    // A stale broker image: labelled like ours, not the current hash.
    let stale = format!("epochal-broker:gc-test-{me}");
    let build = Command::new("sh")
        .args([
            "-c",
            &format!(
                "printf 'FROM scratch\\nLABEL epochal.project=epochal epochal.image=broker gc-test={me}\\n' \
                 | DOCKER_BUILDKIT=0 docker build -q -t {stale} -"
            ),
        ])
        .output()
        .unwrap();
    assert!(build.status.success(), "{}", show(&build));

    let output = epochal().arg("gc").output().unwrap();
    let live_kept = network_exists(&live);
    let _ = Command::new("docker")
        .args(["network", "rm", &live])
        .output();
    assert_eq!(output.status.code(), Some(0), "{}", show(&output));
    assert!(!network_exists(&dead), "{}", show(&output));
    assert!(live_kept, "a live harness's network was removed");
    assert!(!image_exists(&stale), "{}", show(&output));
    assert!(
        String::from_utf8_lossy(&output.stdout).contains(&stale),
        "{}",
        show(&output)
    );
}
