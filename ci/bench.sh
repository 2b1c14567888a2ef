#!/usr/bin/env bash
# The benchmarks of issue 22: every figure users feel, each against a baseline
# measured in the same run, marked met or missed against its goal, in one
# table at the end; each bench's results also as JSON under target/bench/ for
# CI to keep and compare with the previous run.
#
#   bash ci/bench.sh           # full sizes, release build (about 10 minutes on 2 cores)
#   bash ci/bench.sh --quick   # small sizes on the debug build CI already has, to keep
#                              # the benches from rotting (numbers not comparable)
#
# Benches:
#   checkers  (harness/benches/checkers.rs)  1 M history ops checked in <= 2 s, <= 1 GiB;
#                                            10x the ops <= 12x the time
#   proxy     (faults/benches/proxy.rs)      echo throughput vs direct loopback (>= 0.5),
#                                            added RTT p50 (<= +25 us), partition takes effect
#   cluster   (harness/benches/cluster.rs)   cluster ready vs etcd alone (<= 5x), pause takes
#                                            effect, background workload acks/s vs librdkafka
#                                            (kcat), acks=all RF 3 vs acks=1 RF 1
#   report    (harness/benches/report.rs)   report.html of a 100,000-op run loads in headless
#                                            Chromium within 3 s
#   gate      (here)                         gate wall time with --jobs 2 vs the sum of its
#                                            cases, and every case's time
#   systems   (ci/bench_systems.py)          the same workload on each system under test
#                                            (epochal, tansu) side by side: ready time,
#                                            acked sends/s, send p50/p99, back to serving
#                                            after a broker kill
#
# A missed goal is printed, not an exit status: timings on a shared machine
# are evidence to read, not a gate. A bench that cannot run fails the script.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=()
for arg in "$@"; do
  case $arg in
    --quick) quick=(--quick) ;;
    *) echo "usage: bash ci/bench.sh [--quick]" >&2; exit 2 ;;
  esac
done
target=${CARGO_TARGET_DIR:-target}
mkdir -p "$target/bench"
out="$(cd "$target/bench" && pwd)"

if [[ ${#quick[@]} -gt 0 ]]; then
  # The debug build the tests use: nothing more to compile but the benches.
  profile=(--profile dev)
  bins="$(cd "$target" && pwd)/debug"
  cargo build -q --workspace --bins
else
  profile=()
  bins="$(cd "$target" && pwd)/release"
  echo "== cargo build --release --workspace --bins"
  cargo build -q --release --workspace --bins
fi
# Where the cluster and proxy benches find epochal, epochal-broker, epochal-proxy.
export EPOCHAL_BENCH_BIN_DIR=$bins EPOCHAL_BIN_DIR=$bins

bench() {
  local package=$1 name=$2
  echo
  echo "== $name (cargo bench -p $package --bench $name)"
  cargo bench -q "${profile[@]}" -p "$package" --bench "$name" -- "${quick[@]}" --json "$out/$name.json"
}
bench epochal checkers
bench epochal-faults proxy
bench epochal cluster
bench epochal report

echo
echo "== systems (ci/bench_systems.py: the same workload on each system under test)"
bash ci/tools.sh tansu
python3 ci/bench_systems.py --bin-dir "$bins" "${quick[@]}" --json "$out/systems.json"

# The gate: wall time with --jobs 2 against the sum of its cases' own times
# (what --jobs 1 would take at best), and each case's time in the JSON, so the
# scenarios dominated by lease waits stand out. Quick: the bug suite only.
echo
echo "== gate (epochal gate --jobs 2)"
suites=(suites/)
[[ ${#quick[@]} -gt 0 ]] && suites=(suites/bugs.toml --shard 1/6)
store=$(mktemp -d)
trap 'rm -rf "$store"' EXIT
start=$(date +%s.%N)
gate_status=0
"$bins/epochal" gate "${suites[@]}" --jobs 2 --store "$store" --junit "$out/gate.xml" \
  > "$out/gate.txt" 2>&1 || gate_status=$?
end=$(date +%s.%N)
tail -n 1 "$out/gate.txt"
python3 - "$out/gate.xml" "$start" "$end" "$gate_status" "$out/gate.json" "${quick[*]:-full}" <<'EOF'
import json, sys, xml.etree.ElementTree as ET
junit, start, end, status, path, mode = sys.argv[1:7]
cases = [
    {"case": f'{s.get("name")}/{c.get("name")}', "seconds": float(c.get("time", 0)),
     "met": c.find("failure") is None and c.find("error") is None}
    for s in ET.parse(junit).iter("testsuite") for c in s.iter("testcase")
]
wall = float(end) - float(start)
total = sum(c["seconds"] for c in cases)
cases.sort(key=lambda c: -c["seconds"])
print("| slowest cases | time |\n|---|---|")
for c in cases[:8]:
    print(f'| {c["case"]} | {c["seconds"]:.1f} s |')
figures = [{
    "figure": "gate wall time (--jobs 2)",
    "measured": f"{wall:.0f} s ({len(cases)} cases, {'all met' if status == '0' else 'NOT all met'})",
    "baseline": f"{total:.0f} s (sum of cases)",
    "goal": "report both",
    "met": None,
}]
json.dump({"bench": "gate", "mode": "quick" if mode == "--quick" else "full",
           "wall_s": wall, "sum_of_cases_s": total, "gate_exit": int(status),
           "cases": cases, "figures": figures}, open(path, "w"), indent=2)
EOF
[[ $gate_status -eq 0 ]] || echo "the gate did not pass (exit $gate_status): $out/gate.txt" >&2

echo
echo "== every figure (JSON: $out/*.json)"
# EPOCHAL_BENCH_PREVIOUS: a directory holding an earlier run's JSON (the
# nightly restores the last one); each figure then shows what it was.
python3 - "$out" "${EPOCHAL_BENCH_PREVIOUS:-}" <<'EOF'
import json, os, sys
out, previous_dir = sys.argv[1], sys.argv[2]
def figures(directory, name):
    try:
        data = json.load(open(os.path.join(directory, f"{name}.json")))
    except (OSError, ValueError):
        return {}
    return {f["figure"]: f for f in data.get("figures", [])}
print("| bench | figure | measured | baseline | goal | | previous run |")
print("|---|---|---|---|---|---|---|")
for name in ["checkers", "proxy", "cluster", "report", "gate"]:
    before = figures(previous_dir, name) if previous_dir else {}
    for f in figures(out, name).values():
        met = {True: "met", False: "MISSED", None: "—"}[f.get("met")]
        was = before.get(f["figure"], {}).get("measured", "—")
        print(f'| {name} | {f["figure"]} | {f["measured"]} | {f.get("baseline") or "—"} | {f["goal"]} | {met} | {was} |')
EOF
[[ $gate_status -eq 0 ]]
