#!/usr/bin/env bash
# librdkafka's own integration test suite against a cluster of the reference
# broker. The suite is the tests/ directory of Debian's librdkafka source
# package (bookworm: 2.0.2), fetched with `apt-get source` and built once per
# machine into the tools dir ($EPOCHAL_TOOLS, else ~/.cache/epochal/tools, as
# ci/tools.sh), outside any checkout. Every broker test librdkafka's test.c
# lists then runs in its own test-runner process, with a deadline, against
# `epochal up --brokers 3`; tests librdkafka flags local (no broker, or its
# mock cluster), manual or known-issue are not run. docs/librdkafka.md has the
# results and how to run one test by hand.
#
#   bash ci/librdkafka.sh                # every broker test, every sub-test
#   bash ci/librdkafka.sh 0001 0081      # only these test numbers
#   bash ci/librdkafka.sh --quick        # librdkafka's quick mode (-Q): it
#                                        # skips every SUB_TEST not marked quick
#   bash ci/librdkafka.sh --jobs 2       # two test processes at a time
#   bash ci/librdkafka.sh --keep         # keep the clusters' stores
#
# Environment: LIBRDKAFKA_TEST_TIMEOUT (seconds per test process, 300),
# TEST_KAFKA_VERSION (the broker version the suite assumes, 3.1.0: its
# tests/Makefile's KAFKA_VERSION), LIBRDKAFKA_OUT (logs, target/librdkafka).
# Exit 0 when every failure is on ci/librdkafka-allow.txt, 1 otherwise, 2 on
# a bad argument or a set-up error.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

version=2.0.2
tools=${EPOCHAL_TOOLS:-$HOME/.cache/epochal/tools}
root=$tools/librdkafka-$version
allow_list=$repo/ci/librdkafka-allow.txt
test_timeout=${LIBRDKAFKA_TEST_TIMEOUT:-300}
kafka_version=${TEST_KAFKA_VERSION:-3.1.0}
out=${LIBRDKAFKA_OUT:-$repo/target/librdkafka}
# Without SSL, SASL (GSSAPI) and libcurl: the reference broker has plaintext
# listeners only, so the tests that need those are not applicable anyway, and
# libssl/libsasl2/libcurl headers are not needed to build. The compression
# codecs stay in (zlib, zstd, Debian's lz4), as Debian builds them.
configure_flags=(--disable-ssl --disable-gssapi --disable-curl --no-download)

quick=
jobs=1
keep=0
only=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --quick) quick=-Q ;;
    --keep) keep=1 ;;
    --jobs)
      [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || { echo "librdkafka: --jobs takes a count" >&2; exit 2; }
      jobs=$2
      shift
      ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
      exit 0
      ;;
    [0-9][0-9][0-9][0-9]) only+=("$1") ;;
    *)
      echo "librdkafka: unknown argument $1 (a test number is four digits, e.g. 0081)" >&2
      exit 2
      ;;
  esac
  shift
done

job_start=$SECONDS
step() { printf '== [%d:%02d] %s\n' $(((SECONDS - job_start) / 60)) $(((SECONDS - job_start) % 60)) "$*"; }

# --- Debian packages -------------------------------------------------------
# What the build needs (Debian's Build-Depends for librdkafka less libssl-dev,
# libsasl2-dev and debhelper), dpkg-dev for `apt-get source`, and etcd for the
# cluster. Installed only when missing, only as root, as ci/dev.sh does.
debian_packages=(gcc g++ make pkg-config python3 dpkg-dev zlib1g-dev libzstd-dev liblz4-dev
  rapidjson-dev etcd-server)
declare -A provides=([gcc]=gcc [g++]=g++ [make]=make [pkg-config]=pkg-config [python3]=python3
  [dpkg-dev]=dpkg-source [etcd-server]=etcd)

ensure_debian_packages() {
  local missing=() pkg
  for pkg in "${debian_packages[@]}"; do
    if [[ -n ${provides[$pkg]:-} ]]; then
      command -v "${provides[$pkg]}" >/dev/null 2>&1 || missing+=("$pkg")
    else
      dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
    fi
  done
  [[ ${#missing[@]} -eq 0 ]] && return 0
  if [[ $(id -u) -ne 0 ]]; then
    echo "librdkafka: the suite's build needs these Debian packages: ${missing[*]}" >&2
    echo "run as root, or install them first:" >&2
    echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
    exit 2
  fi
  step "installing Debian packages: ${missing[*]}"
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# --- Debian's source package -----------------------------------------------
deb_src_file=/etc/apt/sources.list.d/epochal-deb-src.sources

# The Debian source version of librdkafka $version apt knows, if any.
source_version() {
  apt-cache showsrc librdkafka 2>/dev/null | sed -n 's/^Version: //p' | grep "^$version-" | sort -V | tail -1
}

# A deb-src stanza for every enabled `deb` entry of this release's suites
# (the codename and codename-*, so Debian's own archive and security, not a
# third party's repository), in deb822 form.
deb_src_stanzas() {
  python3 - <<'PY'
import glob, os, re
codename = ""
with open("/etc/os-release") as f:
    for line in f:
        if line.startswith("VERSION_CODENAME="):
            codename = line.split("=", 1)[1].strip().strip('"')
def ours(suite):
    return suite == codename or suite.startswith(codename + "-")
entries = []  # (uris, suites, components, signed_by)
lists = ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*.list"))
for path in lists:
    if not os.path.exists(path):
        continue
    for line in open(path):
        line = line.split("#", 1)[0].strip()
        m = re.match(r"deb\s+(\[[^\]]*\]\s+)?(\S+)\s+(\S+)\s+(.*)", line)
        if not m or not ours(m.group(3)):
            continue
        opts = dict(o.split("=", 1) for o in (m.group(1) or "").strip("[] \t").split() if "=" in o)
        entries.append((m.group(2), m.group(3), m.group(4), opts.get("signed-by", "")))
for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
    if path.endswith("epochal-deb-src.sources"):
        continue
    for block in re.split(r"\n\s*\n", open(path).read()):
        fields = {}
        for line in block.splitlines():
            if line.startswith("#") or ":" not in line or line[0].isspace():
                continue
            key, value = line.split(":", 1)
            fields[key.strip().lower()] = value.strip()
        if "deb" not in fields.get("types", "").split() or fields.get("enabled", "yes") == "no":
            continue
        suites = [s for s in fields.get("suites", "").split() if ours(s)]
        if suites:
            entries.append((fields["uris"], " ".join(suites), fields.get("components", "main"),
                            fields.get("signed-by", "")))
print("# Source packages for ci/librdkafka.sh (apt-get source librdkafka), written by it.")
for uris, suites, components, signed_by in entries:
    print(f"\nTypes: deb-src\nURIs: {uris}\nSuites: {suites}\nComponents: {components}")
    if signed_by:
        print(f"Signed-By: {signed_by}")
PY
}

ensure_source_list() {
  [[ -n $(source_version) ]] && return 0
  if [[ $(id -u) -ne 0 ]]; then
    echo "librdkafka: apt knows no source package librdkafka $version; as root this script adds" >&2
    echo "a deb-src list for the machine's Debian suites ($deb_src_file)." >&2
    echo "Run it as root, or add deb-src entries for them and run: sudo apt-get update" >&2
    exit 2
  fi
  if ! grep -qsE '^[[:space:]]*deb-src[[:space:]]|^Types:.*deb-src' \
    /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; then
    local stanzas
    stanzas=$(deb_src_stanzas)
    if ! grep -q '^Types: deb-src' <<<"$stanzas"; then
      echo "librdkafka: no Debian archive among the apt sources to take deb-src entries from" >&2
      exit 2
    fi
    step "adding deb-src entries for this release's suites: $deb_src_file"
    printf '%s\n' "$stanzas" >"$deb_src_file"
  fi
  apt-get update -q
  if [[ -z $(source_version) ]]; then
    echo "librdkafka: apt has no source package librdkafka $version-* for this release;" >&2
    echo "it has: $(apt-cache showsrc librdkafka 2>/dev/null | sed -n 's/^Version: //p' | xargs)" >&2
    exit 2
  fi
}

# --- the build, once per machine -------------------------------------------
built_stamp=$root/.epochal-built

ensure_suite() {
  if [[ -x $root/tests/test-runner && -f $built_stamp &&
    $(cat "$built_stamp") == "${configure_flags[*]}" ]]; then
    step "librdkafka $version: built ($root)"
    return 0
  fi
  ensure_source_list
  local debian_version work started=$SECONDS
  debian_version=$(source_version)
  step "fetching and building librdkafka $debian_version (Debian source) into $root"
  mkdir -p "$tools"
  rm -rf "$root.partial"
  mkdir -p "$root.partial"
  work=$root.partial
  (cd "$work" && apt-get source -q "librdkafka=$debian_version") >"$work.log" 2>&1 || {
    cat "$work.log" >&2
    exit 2
  }
  local src=$work/librdkafka-$version
  {
    (cd "$src" && ./configure "${configure_flags[@]}") &&
      make -C "$src" -j"$(nproc)" libs &&
      make -C "$src/tests" -j"$(nproc)" build
  } >>"$work.log" 2>&1 || {
    tail -40 "$work.log" >&2
    echo "librdkafka: the build failed; its log: $work.log" >&2
    exit 2
  }
  rm -rf "$root"
  mv "$src" "$root"
  rm -rf "$work"
  mv "$work.log" "$root/.epochal-build.log"
  echo "${configure_flags[*]}" >"$built_stamp"
  step "librdkafka $version built in $((SECONDS - started)) s: $root/tests/test-runner"
}

# --- the test list -----------------------------------------------------------
# From tests/test.c's tests[] table: name, flags, scenario, minimum broker
# version (TEST_BRKVER), one test a line, tab-separated.
list_tests() {
  python3 - "$root/tests/test.c" <<'PY'
import re, sys
src = open(sys.argv[1]).read()
table = src[src.index("struct test tests[] = {"):]
table = table[:table.index("{NULL}")]
for m in re.finditer(r"_TEST\(\s*(\w+)\s*,(.*?)\)\s*,\s*(?=_TEST|\n\s*(#|/\*|$))", table, re.S):
    name, rest = m.group(1), m.group(2)
    flags = ",".join(re.findall(r"TEST_F_\w+", rest)) or "-"
    scen = re.search(r'\.scenario\s*=\s*"([^"]*)"', rest)
    ver = re.search(r"TEST_BRKVER\((\d+),\s*(\d+),\s*(\d+),\s*(\d+)\)", rest)
    if "TEST_BRKVER_TOPIC_ADMINAPI" in rest:
        minver = "0.10.2.0"
    else:
        minver = ".".join(ver.groups()) if ver else "-"
    print(name, flags, scen.group(1) if scen else "default", minver, sep="\t")
PY
}

# --- the cluster -------------------------------------------------------------
up_pid=
up_name=
store=
up_status=
declare -A verdicts=()

# Starts `epochal up` for a scenario, with librdkafka's scenario settings
# (tests/scenarios/*.json: 4 partitions, replication factor 3 for
# auto-created topics, auto-creation on or off); sets $bootstrap.
start_cluster() {
  local name=$1
  shift
  store=$(mktemp -d "${TMPDIR:-/tmp}/epochal-librdkafka-$name.XXXXXX")
  up_name=$name
  step "epochal up --brokers 3 --store $store $*"
  # Its own session (setsid): a Ctrl-C at the terminal reaches this script,
  # whose trap then sends `epochal up` the one SIGINT that ends it cleanly.
  setsid "$repo/target/debug/epochal" up --brokers 3 --store "$store" --quiet \
    --set num_partitions=4 --set default_replication_factor=3 "$@" \
    >"$out/up-$name.out" 2>"$out/up-$name.err" </dev/null &
  up_pid=$!
  local deadline=$((SECONDS + 180))
  bootstrap=
  while [[ -z $bootstrap ]]; do
    if ! kill -0 "$up_pid" 2>/dev/null; then
      wait "$up_pid" || true
      up_pid=
      echo "librdkafka: epochal up exited before the cluster was ready:" >&2
      tail -20 "$out/up-$name.out" "$out/up-$name.err" >&2
      exit 2
    fi
    if ((SECONDS > deadline)); then
      echo "librdkafka: no bootstrap servers from epochal up within 180 s" >&2
      exit 2
    fi
    sleep 0.5
    bootstrap=$(sed -n 's/^bootstrap servers: //p' "$out/up-$name.out")
  done
  # setsid execs in place when it need not fork (no job control here), so
  # $up_pid is epochal's own: the SIGINT below must reach it.
  if [[ $(cat "/proc/$up_pid/comm" 2>/dev/null) != epochal ]]; then
    echo "librdkafka: pid $up_pid is not epochal up (setsid forked?)" >&2
    exit 2
  fi
  step "cluster up: $bootstrap ($(sed -n 's/^run directory: //p' "$out/up-$name.out"))"
}

# SIGINT to `epochal up`, and wait for it: it heals, quiesces, checks the run
# and exits with its verdict. A second SIGINT after 300 s kills it all at once
# (its own rule), then SIGKILL to its session as the last resort.
stop_cluster() {
  [[ -n $up_pid ]] || return 0
  local pid=$up_pid waited=0
  up_pid=
  kill -INT "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null && ((waited < 600)); do
    sleep 0.5
    waited=$((waited + 1))
    if ((waited == 600)); then
      echo "librdkafka: epochal up still checking after 300 s: second SIGINT" >&2
      kill -INT "$pid" 2>/dev/null || true
      sleep 30
      kill -KILL -- -"$pid" 2>/dev/null || true
    fi
  done
  up_status=0
  wait "$pid" 2>/dev/null || up_status=$?
  case $up_status in
    0) verdicts[$up_name]="valid" ;;
    1) verdicts[$up_name]="INVALID (exit 1)" ;;
    2) verdicts[$up_name]="unknown (exit 2)" ;;
    *) verdicts[$up_name]="exit $up_status" ;;
  esac
  step "cluster $up_name stopped: epochal up's verdict: ${verdicts[$up_name]}"
  if [[ $keep -eq 1 || $up_status -eq 1 ]]; then
    echo "   store kept: $store"
  else
    rm -rf "$store"
  fi
}

cleanup() {
  # Test processes still running (an interrupted run): each `timeout` by its
  # id, which passes the signal on to its test-runner.
  local file
  for file in "$out"/*/*.pid; do
    [[ -f $file ]] && kill -TERM "$(cat "$file")" 2>/dev/null || true
  done
  stop_cluster
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- one test number ---------------------------------------------------------
# tests/run-test.sh's `bare` mode, less its `git rev-parse`: test-runner with
# the built libraries on LD_LIBRARY_PATH, from tests/ (test 0053 reads
# ../src/statistics_schema.json), under `timeout`.
run_number() {
  local num=$1 scenario=$2 dir=$out/$2 status=0 started=$SECONDS pid
  (
    cd "$root/tests"
    export TESTS=$num TEST_KAFKA_VERSION=$kafka_version RDKAFKA_TEST_CONF=$out/test.conf \
      TEST_MODE=bare RDKAFKA_GITVER="debian-$version" \
      LD_LIBRARY_PATH=$root/src:$root/src-cpp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    # stdout line-buffered: a failing test-runner ends in assert(), which
    # would lose a buffered summary.
    # shellcheck disable=SC2086 # $quick is a flag or nothing
    exec timeout -k 10 "$test_timeout" stdbuf -oL ./test-runner -L $quick -s "$scenario"
  ) >"$dir/$num.log" 2>&1 </dev/null &
  pid=$!
  echo "$pid" >"$dir/$num.pid"
  # (wait's stderr dropped: bash's "Aborted" notice for an assert()ing runner)
  wait "$pid" 2>/dev/null || status=$?
  rm -f "$dir/$num.pid"
  echo "$status $((SECONDS - started))" >"$dir/$num.status"
}

# Runs every number in $@ for a scenario, $jobs at a time.
run_numbers() {
  local scenario=$1
  shift
  mkdir -p "$out/$scenario"
  rm -f "$out/$scenario"/*.log "$out/$scenario"/*.status "$out/$scenario"/*.pid
  printf 'metadata.broker.list=%s\n' "$bootstrap" >"$out/test.conf"
  local num done=0 total=$#
  for num in "$@"; do
    while (($(jobs -pr | grep -vcx "$up_pid") >= jobs)); do
      wait -n || true
    done
    run_number "$num" "$scenario" &
    done=$((done + 1))
    if ((done % 10 == 0)); then step "$scenario: started $done of $total"; fi
  done
  while (($(jobs -pr | grep -vcx "$up_pid") > 0)); do
    wait -n || true
  done
}

# --- main ------------------------------------------------------------------
ensure_debian_packages
ensure_suite
step "cargo build --workspace --bins"
cargo build -q --workspace --bins
mkdir -p "$out"

list_tests >"$out/tests.tsv"
# Numbers to run in each scenario: tests with no local, manual or
# known-issue flag (the default run of librdkafka's runner skips the last
# two; -L the first), chosen by --only.
numbers_for() {
  local scenario=$1
  awk -F'\t' -v s="$scenario" '
    $2 !~ /TEST_F_LOCAL|TEST_F_MANUAL|TEST_F_KNOWN_ISSUE($|,)/ && index($3, s) {
      print substr($1, 1, 4)
    }' "$out/tests.tsv" | sort -u | while read -r n; do
    if [[ ${#only[@]} -eq 0 || " ${only[*]} " == *" $n "* ]]; then echo "$n"; fi
  done
}
mapfile -t default_numbers < <(numbers_for default)
mapfile -t noauto_numbers < <(numbers_for noautocreate)
step "tests: ${#default_numbers[@]} numbers in scenario default, ${#noauto_numbers[@]} in" \
  "noautocreate; ${test_timeout} s each at most, $jobs at a time${quick:+, quick mode (-Q)}"

if [[ ${#default_numbers[@]} -gt 0 ]]; then
  start_cluster default
  run_numbers default "${default_numbers[@]}"
  stop_cluster
fi
if [[ ${#noauto_numbers[@]} -gt 0 ]]; then
  start_cluster noautocreate --set auto_create_topics_enable=false
  run_numbers noautocreate "${noauto_numbers[@]}"
  stop_cluster
fi

# --- the table -----------------------------------------------------------------
verdict_lines=()
for name in "${!verdicts[@]}"; do verdict_lines+=("$name=${verdicts[$name]}"); done
status=0
python3 - "$out" "$allow_list" "$kafka_version" "$((SECONDS - job_start))" \
  "${only[*]:-}" "${verdict_lines[@]}" <<'PY' || status=$?
import os, re, sys
out, allow_path, kafka_version, seconds, only = sys.argv[1:6]
verdicts = dict(v.split("=", 1) for v in sys.argv[6:])
only = only.split()
ansi = re.compile(r"\x1b\[[0-9;]*m")

def version(s):
    parts = [int(x) for x in s.split(".")]
    return tuple(parts + [0] * (4 - len(parts)))

# TEST /CAUSE/ WHY, one a line (ci/librdkafka-allow.txt).
allow = {}
for number, line in enumerate(open(allow_path), 1):
    line = line.strip()
    if not line or line.startswith("#"):
        continue
    m = re.match(r"(\S+)\s+/((?:[^/\\]|\\.)*)/\s*(.*)$", line)
    if not m:
        sys.exit(f"{allow_path}:{number}: expected TEST /CAUSE/ WHY")
    allow[m.group(1)] = (re.compile(m.group(2)), m.group(3))

def allowed(name, note):
    """The allow-list's entry for this test: (why, whether the cause matches)."""
    for key, (pattern, why) in allow.items():
        if name == key or name.startswith(key + "_"):
            return why, bool(pattern.search(note))
    return None, False

def cause(text):
    """A failure's message, less its `file.c:123: function: ` prefix."""
    text = text.strip().splitlines()[0] if text.strip() else ""
    text = re.sub(r"^\S+\.(c|cpp|h):\d+:\s*", "", text)
    text = re.sub(r"^[A-Za-z_]\w*(\(\))?:\s+", "", text)
    return text[:120]

# Each number's exit status, time, summary rows and first failure of each
# test, from its log.
def summary(scenario, num):
    log = os.path.join(out, scenario, num + ".log")
    st = os.path.join(out, scenario, num + ".status")
    if not os.path.exists(st):
        return None, None, {}, {}
    code, secs = (int(x) for x in open(st).read().split())
    rows, fails = {}, {}
    lines = [ansi.sub("", l).rstrip("\n") for l in open(log, errors="replace")]
    for i, line in enumerate(lines):
        m = re.match(r"^\|\s*(\S+)\s*\|\s*(\w+)\s*\|\s*([\d.]+)s\s*\|\s?(.*)$", line)
        if m:
            rows[m.group(1)] = (m.group(2), float(m.group(3)), m.group(4).strip())
        m = re.match(r'^### Test "([^" ]+)(?: \(([^"]*)\))?" failed at ', line)
        if m and m.group(1) not in fails and i + 1 < len(lines):
            sub = (m.group(2) or "").split(":")[0]
            fails[m.group(1)] = (sub + ": " if sub else "") + lines[i + 1].strip()[:150]
    return code, secs, rows, fails

def last_failure(scenario, num):
    """A crashed or killed runner's last words: its last `### Test ... failed`
    message if it printed one, else its log's last line."""
    log = os.path.join(out, scenario, num + ".log")
    lines = [ansi.sub("", l).strip() for l in open(log, errors="replace")]
    lines = [l for l in lines if l]
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith("### Test") and i + 1 < len(lines):
            return cause(lines[i + 1])
    return lines[-1][:120] if lines else "empty log"

results = []  # (result, name, secs, note)
for line in open(os.path.join(out, "tests.tsv")):
    name, flags, scenario, minver = line.rstrip("\n").split("\t")
    num = name[:4]
    if only and num not in only:
        continue
    fl = flags.split(",")
    if "TEST_F_MANUAL" in fl:
        results.append(("n/a", name, None, "TEST_F_MANUAL: a manual test"))
        continue
    if "TEST_F_LOCAL" in fl:
        results.append(("n/a", name, None, "TEST_F_LOCAL: no broker, or librdkafka's mock cluster"))
        continue
    if "TEST_F_KNOWN_ISSUE" in fl:
        results.append(("n/a", name, None, "TEST_F_KNOWN_ISSUE: librdkafka's runner skips it"))
        continue
    if minver != "-" and version(minver) > version(kafka_version):
        results.append(("n/a", name, None, f"needs Kafka {minver}"))
        continue
    scen = "noautocreate" if "noautocreate" in scenario.split(",") else "default"
    code, secs, rows, fails = summary(scen, num)
    if code is None:
        results.append(("n/a", name, None, "not run"))
        continue
    state, dur, text = rows.get(name, (None, secs, ""))
    if state == "PASSED" and code == 0:
        results.append(("pass", name, dur, ""))
    elif state == "SKIPPED":
        results.append(("skip", name, dur, cause(text)))
    elif name in fails:
        results.append(("fail", name, dur, fails[name]))
    elif state == "FAILED":
        results.append(("fail", name, dur, cause(text)))
    elif code in (124, 137):
        results.append(("fail", name, secs, f"timeout: killed after {secs} s ({last_failure(scen, num)})"))
    elif state == "PASSED":
        results.append(("fail", name, dur, f"runner exit {code}: " + fails.get("<MAIN>", "")))
    else:
        results.append(("fail", name, secs, f"exit {code}, no summary ({last_failure(scen, num)})"))

final = []
for result, name, secs, note in results:
    if result == "fail":
        why, matches = allowed(name, note)
        if why is not None and matches:
            final.append(("allowed", name, secs, f"{note} [allow-list: {why}]"))
            continue
        if why is not None:
            note += " [on the allow-list for another cause]"
        final.append(("FAIL", name, secs, note))
    else:
        final.append((result, name, secs, note))

print(f"\n== librdkafka {os.environ.get('LIBRDKAFKA_VERSION', '2.0.2')} test suite against "
      f"the reference broker (TEST_KAFKA_VERSION={kafka_version})")
print(f"{'result':<8} {'test':<48} {'time':>5}  note")
for result, name, secs, note in final:
    t = f"{secs:.0f}s" if secs is not None else ""
    print(f"{result:<8} {name:<48} {t:>5}  {note}".rstrip())
count = lambda r: sum(1 for f in final if f[0] == r)
# A run epochal's checkers call invalid after librdkafka's traffic is a
# broker bug too.
unexpected = count("FAIL") + sum(1 for v in verdicts.values() if v.startswith("INVALID"))
for name, v in sorted(verdicts.items()):
    print(f"epochal up ({name}): {v}")
stale = [k for k in allow if not any(f[1] == k or f[1].startswith(k + "_") for f in final if f[0] == "allowed")]
if stale and not only:
    print("allow-list entries that matched no failure: " + ", ".join(stale))
print(f"librdkafka: {count('pass')} passed, {count('FAIL') + count('allowed')} failed"
      f" ({count('allowed')} on the allow-list), {count('skip')} skipped,"
      f" {count('n/a')} not applicable; {int(seconds) // 60} min {int(seconds) % 60} s"
      f": {'FAIL' if unexpected else 'PASS'}")
sys.exit(1 if unexpected else 0)
PY
exit "$status"
