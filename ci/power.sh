#!/usr/bin/env bash
# The power table (issue [power]; docs/power.md): campaigns on each era
# setting of suites/power/table.toml (known-positive controls: each reproduces a
# documented bug) and on the fixed settings (the negative control), and a
# table of how many seeds went invalid, how soon, with which anomaly kinds,
# and the false alarms. Its JSON goes to $EPOCHAL_STORE/power/power.json and
# one summary line is appended to the history file, whose last comparable
# line each row is printed beside (a weakened nemesis shows as a drop).
#
#   bash ci/power.sh           # the full table: every setting, seeds 1..10, 60 s each
#                              # (about 100 minutes on 2 cores: 90 campaigns of about 67 s; the nightly's)
#   bash ci/power.sh --quick   # by hand: 2 settings x 2 seeds x 60 s, two at once (about
#                              # 2.5 minutes);
#                              # fails unless the positive control is detected by
#                              # at least one seed and the negative control by none
#
# EPOCHAL_STORE (default ./store), EPOCHAL_POWER_HISTORY (default
# $EPOCHAL_STORE/power/history.jsonl), EPOCHAL_POWER_JOBS (campaigns at once,
# default 1, and 2 for --quick, as the full tables its choice rests on ran:
# more share the machine and stretch every timing window).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=()
for arg in "$@"; do
  case $arg in
    --quick) mode=(--quick) ;;
    *) echo "usage: bash ci/power.sh [--quick]" >&2; exit 2 ;;
  esac
done
store=${EPOCHAL_STORE:-store}
history=${EPOCHAL_POWER_HISTORY:-$store/power/history.jsonl}
default_jobs=1
if [ ${#mode[@]} -gt 0 ]; then default_jobs=2; fi
jobs=${EPOCHAL_POWER_JOBS:-$default_jobs}
target=${CARGO_TARGET_DIR:-target}
mkdir -p "$store" "$(dirname "$history")"
cargo build -q --workspace --bins
echo "== epochal power ${mode[*]:-} --jobs $jobs"
exec "$target/debug/epochal" power ${mode[@]+"${mode[@]}"} --jobs "$jobs" --store "$store" \
  --history "$history"
