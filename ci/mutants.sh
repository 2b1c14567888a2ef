#!/usr/bin/env bash
# The mutation score (docs/power.md, "Mutation score"): cargo-mutants mutates
# the broker's protocol code; the mutants the broker's own tests do not kill
# are what a release would ship, and each is run against a small campaign
# set (ci/mutants.py): a campaign that ends invalid kills it. The score is
# the share of those survivors the campaigns kill.
#
#   bash ci/mutants.sh                        # every module below
#   bash ci/mutants.sh broker/src/replica/isr.rs   # some files only
#   EPOCHAL_MUTANTS_SHARD=2/8 bash ci/mutants.sh   # one slice (nightly)
#   EPOCHAL_MUTANTS_SEEDS=1,2 EPOCHAL_MUTANTS_DURATION=60s bash ci/mutants.sh
#
# Everything goes under $EPOCHAL_MUTANTS_OUT (default target/mutants): stage
# one's mutants.out/, stage two's campaigns.jsonl (resumed when present), the
# worktree the mutants are made in and its target dir, every campaign's store.
# Remove the worktree with `git worktree remove --force target/mutants/tree`.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${EPOCHAL_MUTANTS_OUT:-target/mutants}
shard=${EPOCHAL_MUTANTS_SHARD:-0/1}
seeds=${EPOCHAL_MUTANTS_SEEDS:-1,2}
duration=${EPOCHAL_MUTANTS_DURATION:-60s}
files=("$@")
if [[ ${#files[@]} -eq 0 ]]; then
  # The protocol code: replication, the controller, storage, transactions,
  # committed offsets and groups.
  files=(broker/src/replica broker/src/controller broker/src/storage
    broker/src/transactions broker/src/offsets broker/src/group)
fi
command -v cargo-mutants >/dev/null 2>&1 || cargo install --locked cargo-mutants
mkdir -p "$out"
# The mutants are made in a git worktree of HEAD, in place (cargo-mutants'
# --in-place), never in this checkout; its builds share one target dir, so
# each mutant rebuilds only the broker.
tree=$out/tree
[[ -d $tree ]] || git worktree add --detach "$tree" HEAD >/dev/null
export CARGO_TARGET_DIR=$PWD/$out/target
# No debug info: a mutant's build is mostly linking, and nothing here is
# debugged.
export CARGO_PROFILE_DEV_DEBUG=${CARGO_PROFILE_DEV_DEBUG:-0}
file_args=()
for f in "${files[@]}"; do
  if [[ -d $f ]]; then file_args+=(--file "$f/**/*.rs"); else file_args+=(--file "$f"); fi
done
echo "== stage 1: cargo mutants over ${files[*]} (shard $shard), the broker's own tests"
cargo mutants --dir "$tree" --list --json -p epochal-broker "${file_args[@]}" >"$out/list.json"
# The broker's own tests: its unit tests and its integration tests that
# start no cluster (storage, truncation, failpoints; `--skip cluster_` leaves
# out the ones that start etcd and brokers, which the campaigns stand for).
broker_tests=(--lib --test integration --test failpoint_follower_truncate_to_hw
  --test storage_recovery_warning -- --skip cluster_)
# Exit 2 (mutants missed) and 3 (timeouts) are results here, not failures.
status=0
cargo mutants --dir "$tree" --in-place -p epochal-broker "${file_args[@]}" --shard "$shard" \
  --sharding round-robin --output "$out" --no-shuffle -- "${broker_tests[@]}" || status=$?
if [[ $status -ne 0 && $status -ne 2 && $status -ne 3 ]]; then
  echo "cargo mutants failed (exit $status)" >&2
  exit "$status"
fi
echo "== stage 2: the survivors against campaigns (seeds $seeds, $duration each)"
python3 ci/mutants.py --outcomes "$out/mutants.out/outcomes.json" --list "$out/list.json" \
  --tree "$tree" --out "$out" --seeds "$seeds" --duration "$duration"
