#!/usr/bin/env bash
# The main job until the harness exists (README "Status"): the broker's storage
# engine writes a partition log across two leader epochs and a segment roll, then
# the harness's independent reader prints that data directory back, as Kafka's
# DumpLogSegments would. The two share no code, so agreement here is a check.
set -euo pipefail
cd "$(dirname "$0")/.."
data_dir=$(mktemp -d -t epochal-demo.XXXXXX)
trap 'rm -rf "$data_dir"' EXIT
echo "== broker storage writes $data_dir"
cargo run -q -p epochal-broker --example storage_demo -- "$data_dir"
echo
echo "== epochal inspect $data_dir"
cargo run -q -p epochal --bin epochal -- inspect "$data_dir"
