#!/usr/bin/env bash
# The main job: the conformance gate over suites/ on the process runtime. Every
# scenario runs under every setting its suite names — a real etcd, a proxy per
# link and the brokers as processes — and must reach its expected verdict: each
# documented bug reproduces on the setting that had it and is shown fixed on the
# ones after (GUARANTEES.md). Runs are kept in ./store; the JUnit report goes to
# store/junit.xml.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q --workspace --bins
store=${EPOCHAL_STORE:-store}
mkdir -p "$store"
echo "== epochal gate suites/ --store $store --junit $store/junit.xml"
exec target/debug/epochal gate suites/ --store "$store" --junit "$store/junit.xml" --jobs "${EPOCHAL_JOBS:-2}"
