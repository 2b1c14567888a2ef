#!/usr/bin/env bash
# The release gate: every suite in suites/ on each runtime given (default: both),
# each a JUnit report under the store. Exits non-zero if any scenario misses its
# expectation on any runtime — an unexpected pass of a bug reproduction, an
# unknown, or a guarantee broken — so a release workflow can stop on it.
# Runs by hand as it runs in CI:
#
#   bash ci/gate.sh                    # process and docker
#   bash ci/gate.sh process            # one runtime
#   EPOCHAL_STORE=/tmp/store bash ci/gate.sh docker
#   EPOCHAL_SHARD=2/4 bash ci/gate.sh  # the second of four slices of the cases
#   EPOCHAL_SUITES="suites/slips.toml" bash ci/gate.sh docker  # some suites only
set -euo pipefail
cd "$(dirname "$0")/.."
runtimes=("$@")
[[ ${#runtimes[@]} -gt 0 ]] || runtimes=(process docker)
store=${EPOCHAL_STORE:-store}
jobs=${EPOCHAL_JOBS:-2}
shard=${EPOCHAL_SHARD:-1/1}
# Suite files or folders, split on spaces (default: every suite).
read -r -a suites <<<"${EPOCHAL_SUITES:-suites/}"
mkdir -p "$store"
cargo build -q --workspace --bins
failed=()
for runtime in "${runtimes[@]}"; do
  echo "== epochal gate ${suites[*]} --runtime $runtime --shard $shard"
  if ! target/debug/epochal gate "${suites[@]}" --runtime "$runtime" --jobs "$jobs" --shard "$shard" \
      --store "$store/$runtime" --junit "$store/junit-$runtime.xml"; then
    failed+=("$runtime")
  fi
done
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "gate: unmet expectations on: ${failed[*]} (tables above; runs under $store)" >&2
  exit 1
fi
echo "gate: every expectation met on: ${runtimes[*]}"
