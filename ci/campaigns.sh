#!/usr/bin/env bash
# Nightly campaigns: seeded randomized runs (`epochal campaign`) on the fixed
# broker settings, each of which must come out valid — a failure is a broker
# bug nobody wrote a scenario for, and its run directory (kept in the store)
# holds the realised schedule to replay and shrink. A CI matrix gives each
# runner one shard of the seeds; by hand it runs them all:
#
#   bash ci/campaigns.sh                 # seeds 1..20, 120 s each, process runtime
#   bash ci/campaigns.sh 2/4             # the second of four slices of the seeds
#   EPOCHAL_SEEDS=1..5 EPOCHAL_DURATION=30s EPOCHAL_RUNTIME=docker bash ci/campaigns.sh
set -euo pipefail
cd "$(dirname "$0")/.."
shard=${1:-${EPOCHAL_SHARD:-1/1}}
store=${EPOCHAL_STORE:-store}
seeds=${EPOCHAL_SEEDS:-1..20}
duration=${EPOCHAL_DURATION:-120s}
runtime=${EPOCHAL_RUNTIME:-process}
mkdir -p "$store"
cargo build -q --workspace --bins
echo "== epochal campaign --seeds $seeds --shard $shard --duration $duration --runtime $runtime"
# Every fault kind by default; EPOCHAL_KINDS narrows the mix.
kinds=${EPOCHAL_KINDS:-pause,crash,stop,power-loss,truncate-log,isolate,majority-minority,one-way,bridge,node-from-etcd}
exec target/debug/epochal campaign --seeds "$seeds" --shard "$shard" --duration "$duration" \
  --runtime "$runtime" --store "$store/campaigns" --quiet --kinds "$kinds" \
  --set truncation=current --set controller_epoch_fencing=true
