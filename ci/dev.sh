#!/usr/bin/env bash
# epochal's one entry point for set-up, the main job and the tests.
#
#   bash ci/dev.sh demo   # the main job: `epochal gate suites/` on the process runtime
#   bash ci/dev.sh test   # fmt, a build with clippy's lints, every test, the gate
#                         # on docker, tansu and noida gates
#
# It installs what the build and the tests need when it is missing: Debian's
# etcd-server (the coordinator under test clusters), protobuf-compiler (etcd-client's
# build runs protoc), kcat (a real Kafka client for the wire tests), cargo-nextest,
# the Python Toxiproxy client and Kafka clients (kafka-python, confluent-kafka) the tests drive, and
# pkg-config + libssl-dev (the toxiproxy_rust dev-dependency builds native-tls),
# chromium (headless: the run report's test and bench load the page in it),
# postgresql (the runtimes' PostgreSQL service, for systems that need one),
# sqlite3 (the harness reads a system's SQLite database with it: tansu's), and,
# for `test`, the third-party systems under test whose tests and gates CI runs
# (ci/tools.sh tansu noida: installed once per machine and cached outside the checkout).
set -euo pipefail
cd "$(dirname "$0")/.."

debian_packages=(etcd-server protobuf-compiler kcat python3 python3-venv pkg-config libssl-dev chromium postgresql sqlite3)
# What each package provides, to tell whether it is already there.
declare -A provides=([etcd-server]=etcd [protobuf-compiler]=protoc [kcat]=kcat [python3]=python3 [pkg-config]=pkg-config [chromium]=chromium [sqlite3]=sqlite3)

ensure_debian_packages() {
  local missing=()
  for pkg in "${debian_packages[@]}"; do
    if [[ -n "${provides[$pkg]:-}" ]]; then
      command -v "${provides[$pkg]}" >/dev/null 2>&1 || missing+=("$pkg")
    else
      dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
    fi
  done
  [[ ${#missing[@]} -eq 0 ]] && return 0
  if [[ $(id -u) -ne 0 ]]; then
    echo "epochal needs these Debian packages: ${missing[*]}" >&2
    echo "run as root, or install them first:" >&2
    echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  echo "== installing Debian packages: ${missing[*]}"
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
}

# The Docker runtime's tests and gate need a running Docker engine (images are
# built locally from the workspace's binaries; nothing is pulled).
ensure_docker() {
  if ! docker info >/dev/null 2>&1; then
    echo "epochal's Docker runtime tests need a running Docker engine and its CLI" >&2
    echo "(docker info failed); install docker.io and start dockerd first" >&2
    exit 1
  fi
}

ensure_nextest() {
  cargo nextest --version >/dev/null 2>&1 && return 0
  echo "== installing cargo-nextest"
  cargo install --locked cargo-nextest
}

# A private virtualenv under target/ for the Python Toxiproxy client and the
# real Kafka clients the idempotence test drives (kafka-python, confluent-kafka),
# so nothing is installed into the system's Python.
ensure_python_client() {
  local venv=target/py
  if [[ ! -x $venv/bin/python ]]; then
    python3 -m venv "$venv"
  fi
  "$venv/bin/python" -c 'import toxiproxy, kafka, confluent_kafka' 2>/dev/null \
    || "$venv/bin/python" -m pip install -q toxiproxy-python==0.1.1 \
      kafka-python==3.0.12 confluent-kafka==2.16.1
  export EPOCHAL_PYTHON="$PWD/$venv/bin/python"
}

# Each step of `test` starts with a line naming it and the minutes since the
# job began, and the job ends with the table of how long each took, so a CI
# log says where its time went (the budget is 35 minutes).
job_start=$SECONDS
phase_names=()
phase_starts=()
phase() {
  local now=$((SECONDS - job_start))
  if [[ ${#phase_names[@]} -gt 0 && $1 == done ]]; then
    echo "== time per step (s):"
    local i next
    for i in "${!phase_names[@]}"; do
      next=${phase_starts[$((i + 1))]:-$now}
      printf '   %5d  %s\n' $((next - phase_starts[i])) "${phase_names[$i]}"
    done
    printf '   %5d  total (set-up before the first step included)\n' "$now"
    return
  fi
  phase_names+=("$1")
  phase_starts+=("$now")
  printf '== [%d:%02d] %s\n' $((now / 60)) $((now % 60)) "$1"
}

cmd=${1:-}
case "$cmd" in
  demo)
    ensure_debian_packages
    cargo build --workspace --bins
    exec bash ci/demo.sh
    ;;
  test)
    ensure_debian_packages
    ensure_docker
    ensure_nextest
    ensure_python_client
    # The third-party systems build (tansu at opt-level 1: 625 s on 2 cores
    # alone) goes on beside everything up to the tests that need it, at the
    # lowest CPU priority (nice 19): the workspace's build and the tests take
    # the cores they need, and the build fills what they leave idle (the
    # cluster tests mostly wait on timers and sockets). Only the tests of
    # third-party systems (cluster_systems) and their gates wait for it below.
    # Its output goes to a log printed once it ends. It runs in its own
    # process group (setsid), so the trap stops cargo and rustc too on any
    # exit.
    #
    # Only the systems CI tests and gates are built, named here: `bash
    # ci/tools.sh` alone builds every system file's tool, and nisshi's build
    # (systems/nisshi.toml) took about an hour of one niced core; its test
    # (cluster_nisshi) skips when it is not installed, and its gate runs by
    # hand (`bash ci/tools.sh nisshi` first). noida's gate runs nightly,
    # which installs it (ci/nightly.sh).
    mkdir -p target
    setsid nice -n 19 bash ci/tools.sh tansu noida >target/tools.log 2>&1 &
    tools_pid=$!
    trap 'kill -- -"$tools_pid" 2>/dev/null || true' EXIT
    phase "cargo fmt --check"
    cargo fmt --all -- --check
    phase "cargo build, every target, with clippy's lints"
    # clippy lints the workspace while cargo builds it, not in a build of its
    # own: `cargo clippy` is `cargo check` with clippy-driver as the rustc
    # of the workspace's crates (RUSTC_WORKSPACE_WRAPPER), and check mode
    # compiles every dependency a second time, as metadata only, which the
    # build cannot use (on a fresh machine the separate `cargo clippy` step
    # took 423-748 s beside a build of 464-977 s). Here clippy-driver is the
    # workspace's rustc in the one build (dependencies are compiled by plain
    # rustc, as under `cargo clippy`), with the lints `cargo clippy --
    # -D warnings -D clippy::too_many_lines` gives it (CLIPPY_ARGS, each
    # argument followed by cargo-clippy's separator): every function of the
    # libraries, binaries, tests, benches and examples within clippy.toml's
    # 120 lines, no warning anywhere. The variables stay set for the rest of
    # the job so the tests and ci/gate.sh reuse this build: the wrapper is
    # part of cargo's fingerprint, and a plain `cargo build` afterwards
    # compiles the workspace's own crates again (not the dependencies).
    clippy_driver=$(rustup which clippy-driver 2>/dev/null || command -v clippy-driver)
    export RUSTC_WORKSPACE_WRAPPER=$clippy_driver
    export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__-D__CLIPPY_HACKERY__clippy::too_many_lines__CLIPPY_HACKERY__"
    cargo build --workspace --all-targets
    # The test binaries are the build's (cargo's test profile is dev's).
    cargo nextest run --workspace --profile ci --no-run
    phase "cargo nextest (all but third-party systems' tests)"
    cargo nextest run --workspace --profile ci -E 'not test(/^cluster_systems::/)'
    cp target/nextest/ci/junit.xml target/nextest/ci/junit-workspace.xml
    # The process runtime's full gate ran as a test (cluster_gate.rs). On the
    # Docker runtime CI runs the suites that put every fault kind through the
    # runtime's own mechanisms (guarantees: each kind under load, valid on
    # `current`; slips: a detection and its fix each; campaigns: random faults),
    # alone, as a user runs them; the bug suite's cases on docker repeat what
    # the process gate proved about the checkers and run nightly
    # (ci/nightly.sh, the full gate on both runtimes), as does the release
    # workflow. docker_gate.rs runs the bug suite's KAFKA-532 case on docker.
    #
    # It runs beside the third-party systems' steps below, not before them:
    # each is a few scenarios at a time whose length the scenarios' own
    # timers set (the gate's 26 cases took 204 s alone, the third-party
    # steps 300-330 s), so one after the other left a core mostly idle for
    # eight minutes. Its output goes to a log printed once it ends; it runs
    # in its own process group, stopped by the trap on any exit.
    phase "gate on docker (guarantees, slips, campaigns), in the background"
    mkdir -p target/ci-store
    docker_gate_started=$SECONDS
    EPOCHAL_STORE=target/ci-store \
      EPOCHAL_SUITES="suites/guarantees.toml suites/slips.toml suites/campaigns.toml" \
      setsid bash ci/gate.sh docker >target/ci-store/docker-gate.log 2>&1 &
    docker_gate_pid=$!
    trap 'kill -- -"$tools_pid" -"$docker_gate_pid" 2>/dev/null || true' EXIT
    phase "third-party systems (ci/tools.sh)"
    tools_status=0
    wait "$tools_pid" || tools_status=$?
    cat target/tools.log
    if [[ $tools_status -ne 0 ]]; then
      echo "ci/tools.sh failed (exit $tools_status); its output is above" >&2
      exit "$tools_status"
    fi
    phase "cargo nextest (third-party systems' tests)"
    cargo nextest run --workspace --profile ci -E 'test(/^cluster_systems::/)'
    # The third-party guarantees suite (suites/systems/) on tansu, on both
    # runtimes, each with its own JUnit report.
    phase "epochal gate --system tansu suites/systems"
    target/debug/epochal gate --system tansu suites/systems --store target/ci-store/tansu \
      --junit target/ci-store/junit-tansu.xml
    phase "epochal gate --system tansu suites/systems --runtime docker"
    target/debug/epochal gate --system tansu suites/systems --runtime docker \
      --store target/ci-store/tansu-docker --junit target/ci-store/junit-tansu-docker.xml
    # noida (systems/noida.toml), one node a scenario, two scenarios at once
    # (about 40 s a runtime): its gate holds two positive controls of its own
    # bugs (docs/findings/noida-*.md).
    phase "epochal gate --system noida suites/systems (process, docker)"
    target/debug/epochal gate --system noida suites/systems --jobs 2 \
      --store target/ci-store/noida --junit target/ci-store/junit-noida.xml
    target/debug/epochal gate --system noida suites/systems --jobs 2 --runtime docker \
      --store target/ci-store/noida-docker --junit target/ci-store/junit-noida-docker.xml
    phase "waiting for the gate on docker"
    docker_gate_status=0
    wait "$docker_gate_pid" || docker_gate_status=$?
    trap - EXIT
    cat target/ci-store/docker-gate.log
    echo "== the gate on docker took $((SECONDS - docker_gate_started)) s beside the steps above"
    if [[ $docker_gate_status -ne 0 ]]; then
      echo "the gate on docker failed (exit $docker_gate_status); its output is above" >&2
      exit "$docker_gate_status"
    fi
    # The power table (ci/power.sh) and the benchmarks (ci/bench.sh) run
    # nightly at full size (ci/workflows/nightly.yml, jobs `power` and
    # `bench`), not here: their quick modes took 6-8 of CI's 35 minutes for
    # figures the debug build cannot compare (docs/benchmarks.md, "CI time").
    phase "done"
    ;;
  *)
    echo "usage: bash ci/dev.sh demo|test" >&2
    exit 2
    ;;
esac
