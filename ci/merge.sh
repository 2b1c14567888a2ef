#!/usr/bin/env bash
# One JUnit report per runtime from a sharded nightly: every
# `junit-<runtime>.xml` under DIR (the shards' downloaded stores) merged by
# `epochal merge` into OUT/junit-<runtime>.xml. Exits non-zero if any shard's
# case failed or a report is unreadable.
#
#   bash ci/merge.sh shards merged
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:?usage: ci/merge.sh DIR [OUT]}
out=${2:-merged}
mkdir -p "$out"
cargo build -q -p epochal --bin epochal
status=0
for runtime in process docker; do
  mapfile -t reports < <(find "$dir" -name "junit-$runtime.xml" | sort)
  [[ ${#reports[@]} -gt 0 ]] || { echo "merge: no junit-$runtime.xml under $dir" >&2; status=1; continue; }
  target/debug/epochal merge "${reports[@]}" --junit "$out/junit-$runtime.xml" || status=1
done
exit $status
