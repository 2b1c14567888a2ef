//! What Docker holds of a run, asked through the `docker` CLI exactly as a
//! person would check it (`docker ps -a`, `docker network ls`, filtered by the
//! run's label). Docker must be reachable: a test that needs it fails saying
//! so, it is never skipped.

use std::path::Path;
use std::process::Command;

/// The run id a Docker run wrote in its nodes dir (`nodes/docker-run-id`).
pub fn run_id(run_dir: &Path) -> String {
    let file = run_dir.join("nodes/docker-run-id");
    std::fs::read_to_string(&file)
        .unwrap_or_else(|e| panic!("{}: {e}", file.display()))
        .trim()
        .to_owned()
}

fn docker(args: &[&str]) -> String {
    let output = Command::new("docker")
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "running `docker {}`: {e}; is the Docker CLI installed?",
                args.join(" ")
            )
        });
    assert!(
        output.status.success(),
        "`docker {}` failed (is Docker running and reachable?): {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Panics with a clear message unless the Docker daemon answers.
pub fn require_docker() {
    docker(&["version", "--format", "{{.Server.Version}}"]);
}

/// Names of the containers (running or not) with label `epochal.run=<run>`.
pub fn containers(run: &str) -> Vec<String> {
    let filter = format!("label=epochal.run={run}");
    let out = docker(&["ps", "-a", "--filter", &filter, "--format", "{{.Names}}"]);
    let mut names: Vec<String> = out.lines().map(str::to_owned).collect();
    names.sort();
    names
}

/// Names of the networks with label `epochal.run=<run>`.
pub fn networks(run: &str) -> Vec<String> {
    let filter = format!("label=epochal.run={run}");
    let out = docker(&[
        "network",
        "ls",
        "--filter",
        &filter,
        "--format",
        "{{.Name}}",
    ]);
    out.lines().map(str::to_owned).collect()
}

/// Asserts nothing of the run is left in Docker.
pub fn assert_nothing_left(run: &str, when: &str) {
    let (containers, networks) = (containers(run), networks(run));
    assert!(
        containers.is_empty() && networks.is_empty(),
        "{when}: run {run} left containers {containers:?} and networks {networks:?}"
    );
}

/// Removes whatever a failed test left of run `run` (best effort), so one
/// failure does not leave containers for the next test.
pub struct Cleanup(pub Option<String>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some(run) = &self.0 {
            let script = epochal::runtime::reaper::docker_cleanup_script("epochal.run", run);
            let _ = Command::new("/bin/sh").args(["-c", &script]).status();
        }
    }
}
