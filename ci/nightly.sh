#!/usr/bin/env bash
# Nightly: the full gate on both runtimes, then ci/determinism (every scripted
# scenario five times against its snapshot), then campaigns (ci/campaigns.sh:
# seeded random faults on the fixed settings), then the power table
# (ci/power.sh: detection rates on the era settings, false alarms on the fixed
# ones; about 90 minutes, so run by hand unsharded only: the workflow gives it
# a job of its own, whose history it keeps between nights). EPOCHAL_SHARD=I/N (a CI
# matrix) runs the I-th slice of the gate's cases and of the campaign seeds;
# the determinism check and the fuzzing (ci/fuzz.sh) run on the first slice only. The store (every run's history,
# nodes' data directories, logs and results, and the JUnit files) is left in
# $EPOCHAL_STORE (default ./store) for the workflow to keep as an artifact.
# Runs by hand the same way: bash ci/nightly.sh
set -uo pipefail
cd "$(dirname "$0")/.."
status=0
shard=${EPOCHAL_SHARD:-1/1}
bash ci/gate.sh process docker || status=1
if [[ $shard == 1/* ]]; then
  bash ci/determinism 5 || status=1
  # Every fuzz target, five minutes each (ci/fuzz.sh; nightly Rust).
  bash ci/fuzz.sh 300 || status=1
fi
if [[ $shard == 1/* ]]; then
  # noida (systems/noida.toml), a single-node system whose gate holds two
  # positive controls of its own bugs (docs/findings/noida-*.md): installed
  # once per machine by ci/tools.sh, two scenarios at once (about 40 s).
  { bash ci/tools.sh noida &&
    target/debug/epochal gate --system noida suites/systems --jobs 2 \
      --store "${EPOCHAL_STORE:-store}/noida" &&
    target/debug/epochal gate --system noida suites/systems --jobs 2 --runtime docker \
      --store "${EPOCHAL_STORE:-store}/noida-docker"; } || status=1
  # nisshi (systems/nisshi.toml) over one PostgreSQL: its build takes about
  # an hour of one core the first time on a machine (cached after), so CI
  # leaves it to the nightly; both runtimes.
  { bash ci/tools.sh nisshi &&
    target/debug/epochal gate --system nisshi suites/systems \
      --store "${EPOCHAL_STORE:-store}/nisshi" &&
    target/debug/epochal gate --system nisshi suites/systems --runtime docker \
      --store "${EPOCHAL_STORE:-store}/nisshi-docker"; } || status=1
fi
if [[ $shard == 1/* ]]; then
  # librdkafka 2.0.2's own integration suite against epochal up (about 26
  # minutes; docs/librdkafka.md): a failure off ci/librdkafka-allow.txt fails.
  bash ci/librdkafka.sh || status=1
fi
bash ci/campaigns.sh "$shard" || status=1
if [[ $shard == 1/1 ]]; then
  bash ci/power.sh || status=1
fi
exit $status
