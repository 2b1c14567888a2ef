#!/usr/bin/env bash
# The cluster and Docker tests, N rounds, with one core kept busy by a CPU hog
# this script starts and always reaps: a release gate must not flake under load
# (issue 21). Each round then runs the gate's campaign cases on the Docker
# runtime (suites/campaigns.toml: seeded faults under load, where a stop that
# raced its broker's exit once failed a landing, issue [stop-race]) and counts
# the harness errors their runs logged. Every round runs to the end; the
# summary gives each round's result and wall time, and the script fails if
# any round did.
#
#   bash ci/stress.sh 20
#
# Needs what `bash ci/dev.sh test` needs (run it once first: it installs them).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-}
if ! [[ $rounds =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: bash ci/stress.sh ROUNDS" >&2
  exit 2
fi

# The hog: one busy loop, in a process group of its own so it and anything it
# forks die together, on every exit path (Ctrl-C included).
setsid bash -c 'while :; do :; done' &
hog=$!
trap 'kill -- -"$hog" 2>/dev/null || kill "$hog" 2>/dev/null; wait "$hog" 2>/dev/null || true' EXIT

cargo nextest run --workspace --profile ci --no-run
cargo build -q --workspace --bins
log=target/stress
mkdir -p "$log"
failed=()
summary=()
all_start=$SECONDS
for round in $(seq 1 "$rounds"); do
  start=$SECONDS
  status=0
  # Cluster tests (process runtime, the gate included) and Docker tests.
  cargo nextest run --workspace --profile ci -E 'test(/(^|::)(cluster|docker)_/)' \
    > "$log/round-$round.txt" 2>&1 || status=$?
  result=$({ grep -E '^\s+Summary' "$log/round-$round.txt" || echo "no nextest summary"; } | tail -n 1 | sed 's/^ *//')
  store="$log/round-$round-store"
  rm -rf "$store"
  target/debug/epochal gate suites/campaigns.toml --runtime docker --jobs 2 --store "$store" \
    > "$log/round-$round-gate.txt" 2>&1 || status=$?
  # grep finds nothing on a good round: its exit 1 must not end the script.
  harness_errors=$({ grep -rh --include=harness.log 'harness error:' "$store" 2>/dev/null || true; } | wc -l)
  [[ $harness_errors -eq 0 ]] || status=1
  result="$result; docker campaign gate: $(grep -E '^gate: ' "$log/round-$round-gate.txt" | tail -n 1 || true), $harness_errors harness errors"
  took=$((SECONDS - start))
  if [[ $status -ne 0 ]]; then
    failed+=("$round")
    summary+=("round $round: FAILED in ${took}s — $result (log: $log/round-$round.txt)")
  else
    summary+=("round $round: passed in ${took}s — $result")
  fi
  echo "${summary[-1]}"
done
echo
echo "stress: $((rounds - ${#failed[@]}))/$rounds rounds passed, one core busy, $((SECONDS - all_start))s in all"
[[ ${#failed[@]} -eq 0 ]] || { echo "failed rounds: ${failed[*]}" >&2; exit 1; }
