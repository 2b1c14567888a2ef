#!/usr/bin/env bash
# The main job until the conformance suites land ([suites-gate]): `epochal run`
# on the process runtime — etcd, a proxy per link and three brokers — runs a
# schedule that kills the leader under acks=all writes and restarts it, keeps
# the run in ./store, and prints the history's summary and every replica as the
# harness's own reader sees it; then `epochal inspect` prints one node's data.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q --workspace --bins
store=${EPOCHAL_STORE:-store}
schedule=harness/tests/schedules/crash_restart.toml
echo "== epochal run $schedule --store $store"
status=0
target/debug/epochal run "$schedule" --store "$store" || status=$?
echo
echo "== epochal inspect $store/latest/nodes/b1/data"
target/debug/epochal inspect "$store/latest/nodes/b1/data"
exit "$status"
