#!/usr/bin/env bash
# Fuzzing the parsers that take untrusted bytes (issue [reliability]): each
# cargo-fuzz target in fuzz/ runs SECONDS on nightly, its corpus seeded from
# the project's fixtures, and the script prints one line per target —
# executions per second, corpus size — and fails naming the artifact if any
# target crashed. A crash found becomes a regression test beside the code it
# broke. The nightly workflow runs it; by hand:
#
#   bash ci/fuzz.sh 60                  # every target, 60 s each
#   bash ci/fuzz.sh 300 broker_request  # one target
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:?usage: bash ci/fuzz.sh SECONDS [TARGET...]}
shift
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] ||
  targets=(reader_segment checkpoints broker_request record_batch schedule proxy_toxic)

rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
cargo +nightly fuzz --version >/dev/null 2>&1 || cargo install --locked cargo-fuzz

# Seeds: real files the project already keeps, and a few request frames.
seed() {
  local target=$1 dir=fuzz/corpus/$1
  mkdir -p "$dir"
  case $target in
    reader_segment | record_batch)
      local i=0
      for f in $(find harness/tests/fixtures -name '*.log' -size -1M); do
        cp "$f" "$dir/seed-$i.log"; i=$((i + 1))
      done ;;
    checkpoints)
      local i=0
      for f in $(find harness/tests/fixtures -name '*checkpoint*'); do
        cp "$f" "$dir/seed-$i"; i=$((i + 1))
      done ;;
    schedule)
      local i=0
      for f in suites/*.toml harness/tests/schedules/*.toml; do
        cp "$f" "$dir/seed-$i.toml"; i=$((i + 1))
      done ;;
    broker_request)
      # ApiVersions v0 and Metadata v0 (no topics), client id "fz".
      printf '\x00\x12\x00\x00\x00\x00\x00\x01\x00\x02fz' >"$dir/api-versions-v0"
      printf '\x00\x03\x00\x00\x00\x00\x00\x02\x00\x02fz\x00\x00\x00\x00' >"$dir/metadata-v0" ;;
    proxy_toxic)
      printf '%s' '{"name":"p","type":"partition","stream":"upstream","toxicity":1.0,"attributes":{"on_heal":"reset"}}' >"$dir/partition"
      printf '%s' '{"name":"l","type":"latency","stream":"downstream","toxicity":0.5,"attributes":{"latency":100,"jitter":10}}' >"$dir/latency" ;;
  esac
}

mkdir -p fuzz/logs
failed=()
for target in "${targets[@]}"; do
  seed "$target"
  log=fuzz/logs/$target.log
  if cargo +nightly fuzz run "$target" "fuzz/corpus/$target" -- \
      -max_total_time="$seconds" -print_final_stats=1 >"$log" 2>&1; then
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
    rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
    corpus=$(find "fuzz/corpus/$target" -type f | wc -l)
    echo "fuzz $target: ok, $execs runs, $rate/s, corpus $corpus files"
  else
    echo "fuzz $target: FAILED (log: $log)" >&2
    grep -E 'panicked|ERROR|artifact' "$log" | head -5 >&2 || true
    failed+=("$target")
  fi
done
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzz: crashes in ${failed[*]} (artifacts under fuzz/artifacts/)" >&2
  exit 1
fi
