#!/usr/bin/env python3
"""Systems side by side ([systems]): the same workload on each system under
test, as `epochal run --system NAME` runs it, every figure read from what the
run stored (harness.log, history.jsonl), so both systems are measured by one
yardstick:

- ready: from the run's start to "cluster ready" (runtime start, topic
  creation, every partition served), in the harness's own log;
- acknowledged sends/s and p50/p99 send latency (invoke to ok) of 8
  background producers, acks=all, after a warm-up, before any fault;
- back to serving after a broker kill: the broker the producers were using
  for t-0 (the reference broker: t-0's leader; tansu: b1, which every client
  reaches first) is crashed; from the crash's completion to the first
  acknowledged send, invoked after it, to a partition that broker was
  serving.

  python3 ci/bench_systems.py --bin-dir target/release [--quick] [--json OUT] [--systems epochal,tansu]

The reference broker's topic has replication factor 3; tansu's has 1 (it
has no replicas: durability is its database's). A figure that cannot be
measured fails the bench; timings on a shared machine are evidence, not a
gate.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

# Per system: the replication factor of its topic and whom to crash.
SYSTEMS = {
    "epochal": {"replication_factor": 3, "crash": "leader of t-0"},
    "tansu": {"replication_factor": 1, "crash": "b1"},
}
WARMUP_ACKS = 200
SCHEDULE = """\
[cluster]
brokers = 3

[[cluster.topic]]
name = "t"
partitions = 3
replication_factor = {replication_factor}

[workload]
acks = "all"
await_timeout_ms = 60000

[workload.background]
producers = 8
consumers = 0
interval_ms = 0

[[step]]
await = "{warmup} more writes acknowledged"

[[step]]
await = "{measured} more writes acknowledged"

[[step]]
fault = {{ crash = "{crash}" }}

[[step]]
await = "{after} more writes acknowledged"
"""


def percentile(values, p):
    values = sorted(values)
    if not values:
        raise ValueError("no values")
    k = min(len(values) - 1, max(0, round(p / 100 * (len(values) - 1))))
    return values[k]


def measure(bin_dir, system, quick, store):
    spec = SYSTEMS[system]
    measured = 500 if quick else 5000
    text = SCHEDULE.format(
        warmup=WARMUP_ACKS, measured=measured, after=300, **spec
    )
    schedule = os.path.join(store, f"bench-{system}.toml")
    with open(schedule, "w") as f:
        f.write(text)
    run = subprocess.run(
        [os.path.join(bin_dir, "epochal"), "run", schedule, "--system", system,
         "--store", os.path.join(store, system), "--quiet"],
        capture_output=True, text=True, timeout=600,
    )
    run_dir = os.path.realpath(os.path.join(store, system, "latest"))
    if not os.path.isdir(run_dir):
        raise RuntimeError(f"{system}: no run stored\n{run.stdout}\n{run.stderr}")
    ready_s = None
    with open(os.path.join(run_dir, "harness.log")) as log:
        for line in log:
            m = re.match(r"\[\s*([0-9.]+)s\] cluster ready", line)
            if m:
                ready_s = float(m.group(1))
    if ready_s is None:
        raise RuntimeError(f"{system}: the cluster never became ready ({run_dir})")

    ops = [json.loads(l) for l in open(os.path.join(run_dir, "history.jsonl"))]
    invoked = {}
    sends = []  # (invoke ns, complete ns, type, node, partition)
    crash = None  # (invoke ns, complete ns, nodes)
    for op in ops:
        if op["process"] == "nemesis":
            if op["f"] == "crash":
                if op["type"] == "invoke":
                    crash = [op["time_ns"], None, None]
                elif crash is not None:
                    crash[1] = op["time_ns"]
                    crash[2] = op["value"].get("nodes") or []
            continue
        if op["f"] != "send":
            continue
        if op["type"] == "invoke":
            invoked[op["process"]] = op
            continue
        start = invoked.pop(op["process"], None)
        if start is not None:
            v = start["value"]
            sends.append((start["time_ns"], op["time_ns"], op["type"], v.get("node"), v["partition"]))
    if crash is None or crash[1] is None:
        raise RuntimeError(f"{system}: no completed crash in {run_dir}")
    crash_invoke, crash_done, crashed = crash
    before = sorted((s for s in sends if s[2] == "ok" and s[1] < crash_invoke), key=lambda s: s[1])
    window = before[WARMUP_ACKS:]
    if len(window) < 50:
        raise RuntimeError(f"{system}: only {len(window)} acks in the measured window")
    seconds = (window[-1][1] - window[0][1]) / 1e9
    latencies_ms = [(s[1] - s[0]) / 1e6 for s in window]
    # What the crashed broker was serving in the second before the crash.
    served = {s[4] for s in before if s[3] in crashed and s[1] > crash_invoke - 1e9}
    after = [s for s in sends if s[2] == "ok" and s[0] > crash_done and s[4] in served]
    if not served or not after:
        raise RuntimeError(f"{system}: no acknowledged send to {sorted(served)} after the crash ({run_dir})")
    recovered_ms = (min(s[1] for s in after) - crash_done) / 1e6
    return {
        "system": system,
        "run": run_dir,
        "verdict": json.load(open(os.path.join(run_dir, "results.json")))["verdict"]
        if os.path.exists(os.path.join(run_dir, "results.json")) else None,
        "ready_s": round(ready_s, 3),
        "acked_sends_per_s": round(len(window) / seconds, 1) if seconds > 0 else None,
        "send_p50_ms": round(percentile(latencies_ms, 50), 2),
        "send_p99_ms": round(percentile(latencies_ms, 99), 2),
        "crashed": crashed,
        "partitions_served": sorted(served),
        "back_to_serving_ms": round(recovered_ms, 1),
        "measured_acks": len(window),
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-dir", required=True)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json")
    parser.add_argument("--systems", default="epochal,tansu")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as store:
        for system in args.systems.split(","):
            rows.append(measure(args.bin_dir, system, args.quick, store))
            rows[-1]["run"] = None  # the store is temporary
    figures = [
        ("cluster ready", "ready_s", "s"),
        ("acked sends/s (8 producers, acks=all)", "acked_sends_per_s", "/s"),
        ("send latency p50", "send_p50_ms", "ms"),
        ("send latency p99", "send_p99_ms", "ms"),
        ("back to serving after a broker kill", "back_to_serving_ms", "ms"),
        ("run verdict", "verdict", ""),
    ]
    width = max(len(f[0]) for f in figures)
    print(f"{'':{width}}  " + "  ".join(f"{r['system']:>14}" for r in rows))
    for label, key, unit in figures:
        cells = "  ".join(f"{str(r[key]) + (' ' + unit if unit else ''):>14}" for r in rows)
        print(f"{label:{width}}  {cells}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"quick": args.quick, "systems": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
