#!/usr/bin/env bash
# Fuzzing the parsers that take untrusted bytes (issue [reliability]): each
# cargo-fuzz target in fuzz/ runs SECONDS on nightly, its corpus seeded from
# the project's fixtures, and the script ends with a table, one line per
# target — executions, executions per second, corpus size — and fails naming
# the artifact if any target crashed (a panic, an abort, more than 2 GB of
# memory, or one input taking more than 10 s). A crash found becomes a
# regression test beside the code it broke. Needs rustup and python3 (the
# request seeds); installs nightly and cargo-fuzz when missing. The nightly
# workflow runs it (ci/nightly.sh); by hand:
#
#   bash ci/fuzz.sh 60                  # every target, 60 s each
#   bash ci/fuzz.sh 300 broker_request  # one target
#
# Everything it writes is under fuzz/ and git-ignored: fuzz/target (the ASan
# build, apart from the workspace's target/), fuzz/corpus (seeds plus what the
# fuzzer found; kept between runs, so later runs start further),
# fuzz/artifacts (crashing inputs), fuzz/logs (one libFuzzer log per target).
# Reproduce a crash with `cargo +nightly fuzz run TARGET ARTIFACT`, shrink it
# with `cargo +nightly fuzz tmin TARGET ARTIFACT`.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:?usage: bash ci/fuzz.sh SECONDS [TARGET...]}
shift
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] ||
  targets=(reader_segment checkpoints broker_request record_batch schedule proxy_toxic)

# Nightly Rust (cargo-fuzz needs -Zsanitizer) and cargo-fuzz itself. The list
# is read whole first: `rustup ... | grep -q` can fail under pipefail when grep
# exits before rustup has written everything.
toolchains=$(rustup toolchain list)
if ! grep -q '^nightly' <<<"$toolchains"; then
  rustup toolchain install nightly --profile minimal
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  cargo install --locked cargo-fuzz
fi

# The fuzz crate is its own workspace with its own lock file: start it from the
# workspace's, so the fuzzed dependencies (kafka-protocol above all) are the
# versions the broker and the harness ship with.
if [[ ! -f fuzz/Cargo.lock || Cargo.lock -nt fuzz/Cargo.lock ]]; then
  cp Cargo.lock fuzz/Cargo.lock
fi

# Seeds: real files the project keeps (segments, checkpoints, schedules), the
# request frames fuzz/seed_requests.py encodes, and toxics as the harness posts
# them. Copied in under fixed names, so re-running does not pile up copies.
segments() {
  find harness/tests/fixtures -type f -name '[0-9]*.log' -size -1024k | sort
}
seed_from() {
  local dir=$1 f
  shift
  if [[ $# -eq 0 ]]; then
    echo "fuzz: no seeds for $dir (a fixture glob in ci/fuzz.sh matches nothing)" >&2
    exit 2
  fi
  for f in "$@"; do
    cp "$f" "$dir/seed-${f//\//_}"
  done
}
seed() {
  local target=$1 dir=fuzz/corpus/$1
  mkdir -p "$dir"
  case $target in
    reader_segment | record_batch)
      mapfile -t files < <(segments)
      seed_from "$dir" "${files[@]}" ;;
    checkpoints)
      mapfile -t files < <(find harness/tests/fixtures -type f -name '*-checkpoint' | sort)
      seed_from "$dir" "${files[@]}" ;;
    schedule)
      # Schedules only (a [[step]] table), not the suite files beside them.
      mapfile -t files < <(find suites harness/tests -type f -name '*.toml' -print0 |
        xargs -0 grep -l '^\[\[step\]\]' | sort)
      seed_from "$dir" "${files[@]}" ;;
    broker_request)
      python3 fuzz/seed_requests.py "$dir" \
        harness/tests/fixtures/reader-basic/t-0/00000000000000000010.log ;;
    proxy_toxic)
      local kind
      printf '%s' '{"name":"p","type":"partition","stream":"upstream","toxicity":1.0,"attributes":{"on_heal":"reset"}}' >"$dir/partition"
      printf '%s' '{"name":"l","type":"latency","stream":"downstream","toxicity":0.5,"attributes":{"latency":100,"jitter":10}}' >"$dir/latency"
      printf '%s' '{"type":"slicer","attributes":{"average_size":64,"size_variation":8,"delay":10}}' >"$dir/slicer"
      printf '%s' '{"type":"bandwidth","stream":"upstream","attributes":{"rate":100}}' >"$dir/bandwidth"
      for kind in timeout reset_peer slow_close limit_data; do
        printf '{"type":"%s","attributes":{}}' "$kind" >"$dir/$kind"
      done
      # Boundary values: the API takes any u64 for a numeric attribute.
      local max=18446744073709551615 half=9223372036854775807
      printf '{"type":"latency","attributes":{"latency":%s,"jitter":%s}}' $half $half >"$dir/latency-max"
      printf '{"type":"slicer","attributes":{"average_size":%s,"size_variation":%s,"delay":%s}}' $max $max $max >"$dir/slicer-max"
      printf '{"type":"bandwidth","attributes":{"rate":%s}}' $max >"$dir/bandwidth-max"
      for kind in timeout reset_peer; do
        printf '{"type":"%s","attributes":{"timeout":%s}}' "$kind" $max >"$dir/$kind-max"
      done
      printf '{"type":"slow_close","attributes":{"delay":%s}}' $max >"$dir/slow_close-max"
      printf '{"type":"limit_data","attributes":{"bytes":%s}}' $max >"$dir/limit_data-max" ;;
    *)
      echo "fuzz: no target $target (targets: fuzz/fuzz_targets/)" >&2
      exit 2 ;;
  esac
}

for target in "${targets[@]}"; do
  seed "$target"
done

# One build of every target before any run: a compile error stops here, no
# target's SECONDS include a build, and the binaries run below are the ones
# built here (`cargo fuzz run` builds again first, once per target, which
# costs minutes whenever the sources changed in between).
cargo +nightly fuzz build
bin_dir=fuzz/target/$(rustc +nightly -vV | sed -n 's/^host: //p')/release
# What `cargo fuzz run` sets, and a backtrace for a panic.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_odr_violation=0}
export RUST_BACKTRACE=${RUST_BACKTRACE:-1}
fuzz() {
  local target=$1
  shift
  mkdir -p "fuzz/artifacts/$target"
  "$bin_dir/$target" -artifact_prefix="fuzz/artifacts/$target/" "$@"
}

mkdir -p fuzz/logs
# The request seeds are encoded by hand (fuzz/seed_requests.py): each must
# decode, or the fuzzer would start from frames refused at the header.
for target in "${targets[@]}"; do
  [[ $target == broker_request ]] || continue
  if ! EPOCHAL_FUZZ_EXPECT_DECODE=1 fuzz broker_request fuzz/corpus/broker_request/seed-* \
      >fuzz/logs/broker_request-seeds.log 2>&1; then
    echo "fuzz: a broker_request seed does not decode (fuzz/logs/broker_request-seeds.log):" >&2
    grep -E 'panicked at|does not decode' fuzz/logs/broker_request-seeds.log | head -3 >&2 || true
    exit 1
  fi
done

failed=()
summary=()
for target in "${targets[@]}"; do
  log=fuzz/logs/$target.log
  echo "fuzz $target: ${seconds}s ..." >&2
  # -timeout: an input running 10 s is a hang; -rss_limit_mb is libFuzzer's
  # default (2 GB) spelled out; -print_final_stats gives the figures below.
  if fuzz "$target" "fuzz/corpus/$target" -max_total_time="$seconds" \
      -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 >"$log" 2>&1; then
    status=ok
  else
    status=FAILED
    failed+=("$target")
  fi
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1 || true)
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1 || true)
  corpus=$(find "fuzz/corpus/$target" -type f | wc -l)
  summary+=("$(printf '%-16s %-7s %12s %10s %8s' "$target" "$status" "${execs:-?}" "${rate:-?}" "$corpus")")
  if [[ $status == FAILED ]]; then
    echo "fuzz $target: FAILED (log: $log)" >&2
    grep -E 'panicked at|ERROR: libFuzzer|ERROR: AddressSanitizer|out-of-memory|timeout after|Test unit written to|^Output of' "$log" |
      head -8 >&2 || true
  fi
done

printf '%-16s %-7s %12s %10s %8s\n' target status executions exec/s corpus
printf '%s\n' "${summary[@]}"
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzz: crashes in ${failed[*]} (inputs under fuzz/artifacts/; logs under fuzz/logs/)" >&2
  exit 1
fi
