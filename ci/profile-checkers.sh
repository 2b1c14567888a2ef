#!/usr/bin/env bash
# The checkers' cost counted, not timed (issue 22): the checkers bench's own
# child (`--size N --reps 1`: one synthetic run, every checker) under
# valgrind's callgrind with its cache simulation, at two sizes 10x apart.
# Prints, per checker and in all, the instructions executed and the data reads
# and writes that missed the simulated last-level cache, each with its growth.
#
#   bash ci/profile-checkers.sh                  # 100000 and 1000000 ops (about 10 minutes)
#   bash ci/profile-checkers.sh 10000 100000     # any two sizes
#
# Why beside ci/bench.sh: the bench's "10x the ops <= 12x the time" is judged
# on wall time, which on a shared VM moves by a quarter from run to run.
# Instruction counts are a property of the code and the input (the same total
# twice, whatever else the machine runs), so they say whether the checkers'
# work is linear; the simulated misses say how much of the time growth is the
# run's data outgrowing the cache. The simulation has no hardware prefetcher,
# so a miss here is not a stall there: compare the growths, not the counts with
# a time. Collection is on only inside each checker (`checker::run_one`): the
# run's generation is not counted. The child also runs each checker once alone
# after the full check, so every count is two checks' worth, at both sizes.
set -euo pipefail
cd "$(dirname "$0")/.."
small=${1:-100000}
large=${2:-1000000}
for n in "$small" "$large"; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "usage: bash ci/profile-checkers.sh [SMALL LARGE]" >&2; exit 2; }
done
for tool in valgrind callgrind_annotate python3; do
  command -v "$tool" >/dev/null || { echo "profile-checkers: $tool not found (Debian: valgrind, python3)" >&2; exit 2; }
done

target=${CARGO_TARGET_DIR:-target}
out="$target/bench/callgrind"
mkdir -p "$out"
echo "== cargo bench -p epochal --bench checkers --no-run"
exe=$(cargo bench -q -p epochal --bench checkers --no-run --message-format=json \
  | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "checkers" and m.get("executable"):
        print(m["executable"])')
[[ -x $exe ]] || { echo "profile-checkers: no checkers bench executable from cargo" >&2; exit 1; }

# The simulated last-level cache is this machine's, as Linux lists cpu0's
# (sysfs): valgrind's own guess from CPUID can be far off in a VM (256 MiB,
# direct-mapped, on this project's 32 MiB, 16-way machines). Without sysfs,
# valgrind guesses.
ll=()
best=0
for dir in /sys/devices/system/cpu/cpu0/cache/index*; do
  [[ -r $dir/level && $(cat "$dir/type" 2>/dev/null) != Instruction ]] || continue
  level=$(cat "$dir/level")
  size=$(cat "$dir/size" 2>/dev/null) || continue
  case $size in
    *K) bytes=$((${size%K} << 10)) ;;
    *M) bytes=$((${size%M} << 20)) ;;
    *) continue ;;
  esac
  if ((level > best)); then
    best=$level
    ll=("--LL=$bytes,$(cat "$dir/ways_of_associativity"),$(cat "$dir/coherency_line_size")")
  fi
done
echo "== simulated last-level cache: ${ll[*]:-as valgrind guesses (sysfs lists no cache)}"

for n in "$small" "$large"; do
  echo "== $n ops under callgrind (log: $out/checkers.$n.log)"
  started=$SECONDS
  if ! valgrind --tool=callgrind --cache-sim=yes "${ll[@]}" --collect-atstart=no \
      '--toggle-collect=*checker::run_one*' \
      --callgrind-out-file="$out/checkers.$n.out" \
      "$exe" --size "$n" --reps 1 >"$out/checkers.$n.json" 2>"$out/checkers.$n.log"; then
    echo "profile-checkers: the $n-op run failed; its log:" >&2
    tail -n 20 "$out/checkers.$n.log" >&2
    exit 1
  fi
  echo "   $((SECONDS - started)) s"
done

python3 - "$out" "$small" "$large" <<'EOF'
import json, re, subprocess, sys

out, small, large = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

def counts(n):
    """Inclusive (instructions, last-level data misses) per checker, and the
    cache the simulation used."""
    text = subprocess.run(
        ["callgrind_annotate", "--inclusive=yes", "--show=Ir,DLmr,DLmw",
         "--threshold=100", f"{out}/checkers.{n}.out"],
        check=True, capture_output=True, text=True).stdout
    cache = next((l.strip() for l in text.splitlines() if l.startswith("LL cache:")), "LL cache: ?")
    rows = {}
    number = r"([\d,]+|\.)(?: \(\s*[\d.]+%\))?"
    for line in text.splitlines():
        m = re.match(rf"\s*{number}\s+{number}\s+{number}\s+(.*)$", line)
        if not m:
            continue
        ir, dlmr, dlmw = (0 if v == "." else int(v.replace(",", "")) for v in m.groups()[:3])
        name = m.group(4)
        if "PROGRAM TOTALS" in name:
            rows["all checkers"] = (ir, dlmr + dlmw)
            continue
        # Rows are named by the checker's module (`leaders` holds
        # one-leader-per-epoch, `fencing` stale-controller-fenced).
        c = re.search(r"epochal::checker::([a-z_]+)::check \[", name)
        if c:
            rows[c.group(1).replace("_", "-")] = (ir, dlmr + dlmw)
    return rows, cache

a, cache = counts(small)
b, _ = counts(large)
print()
print(f"checkers under callgrind, {small} -> {large} ops ({cache}; two checks' worth at each size)")
print()
print(f"| checker (module) | instructions, {small} | instructions, {large} | growth | LL data misses, {small} | LL data misses, {large} | growth |")
print("|---|---|---|---|---|---|---|")
order = sorted((k for k in b if k != "all checkers"), key=lambda k: -b[k][0]) + ["all checkers"]
result = {"small_ops": small, "large_ops": large, "cache": cache, "checkers": {}}
for name in order:
    (ia, ma), (ib, mb) = a.get(name, (0, 0)), b[name]
    gi = ib / ia if ia else float("nan")
    gm = mb / ma if ma else float("nan")
    print(f"| {name} | {ia:,} | {ib:,} | {gi:.1f}× | {ma:,} | {mb:,} | {gm:.1f}× |")
    result["checkers"][name] = {"instructions": [ia, ib], "ll_data_misses": [ma, mb]}
with open(f"{out}/checkers-callgrind.json", "w") as f:
    json.dump(result, f, indent=1)
print()
print(f"(JSON: {out}/checkers-callgrind.json; callgrind files beside it for callgrind_annotate)")
EOF
