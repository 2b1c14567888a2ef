#!/usr/bin/env python3
"""The mutation score's second stage (ci/mutants.sh runs the first): every
mutant of the broker that its own tests did not kill is built into a broker
binary of its own and run against a small campaign set; a campaign that ends
invalid kills it.

Input: cargo-mutants' `outcomes.json` (stage one) and its `--list --json`
of every mutant (for the span and replacement of each). Output: one JSON
line per survivor in `OUT/campaigns.jsonl` (kept between invocations, so an
interrupted stage resumes where it stopped) and the table on stdout.

A mutant is applied to the git worktree stage one mutated in (never to the
checkout itself), its broker built there with the target dir stage one used
(incremental from one mutant to the next), and the workspace's own `epochal` runs the
campaigns with EPOCHAL_BIN_DIR naming the mutant's broker and the
checkout's proxy. The worktree's file is restored after each mutant,
whatever happened.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

# Which campaign workloads meet the code of each broker module, one per seed
# in turn: the default mix (producers, consumers, every fault kind) for the
# replication path, and on the second seed a client deleting and re-creating
# a topic beside it (`--lives`: a replica's deletion is replication code too);
# committing groups for group/ and offsets/; transactional producers for
# transactions/. The controller also creates the internal topics groups and
# transactions need (a mutant that never creates one went unseen under the
# default mix alone), so its second seed commits, and it carries topic
# deletions through, so its first deletes topics.
COMMITS = ["--commits", "--subscribers", "2"]
LIVES = ["--lives"]
WORKLOADS = {
    "group": [COMMITS],
    "offsets": [COMMITS],
    "transactions": [["--transactional", "2"]],
    "controller": [LIVES, COMMITS],
}
DEFAULT_WORKLOADS: list[list[str]] = [[], LIVES]
# The fixed settings every campaign runs on: a mutant is judged where the
# broker is meant to be correct.
FIXED = ["--set", "truncation=current", "--set", "controller_epoch_fencing=true"]


def module_of(path: str) -> str:
    parts = Path(path).parts
    # broker/src/<module>/...
    return parts[2] if len(parts) > 3 else Path(parts[-1]).stem


def mutant_name(m: dict) -> str:
    return m["name"] if "name" in m else describe(m)


def describe(m: dict) -> str:
    span = m["span"]["start"]
    return f'{m["file"]}:{span["line"]}:{span["column"]}: {m.get("genre", "")} {m.get("replacement", "")}'


def apply(tree: Path, m: dict) -> tuple[Path, str]:
    """Writes the mutant into the worktree; returns the file and its text before."""
    path = tree / m["file"]
    before = path.read_text()
    lines = before.split("\n")
    start, end = m["span"]["start"], m["span"]["end"]
    # cargo-mutants' spans: 1-based lines and columns, the end exclusive.
    def offset(pos: dict) -> int:
        return sum(len(l) + 1 for l in lines[: pos["line"] - 1]) + pos["column"] - 1

    a, b = offset(start), offset(end)
    path.write_text(before[:a] + m["replacement"] + before[b:])
    return path, before


def run(cmd: list[str], env: dict | None = None, timeout: float | None = None) -> int:
    try:
        return subprocess.run(cmd, env=env, timeout=timeout,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    except subprocess.TimeoutExpired:
        return -1


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--outcomes", required=True, type=Path)
    ap.add_argument("--list", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--tree", required=True, type=Path, help="the git worktree mutants are made in")
    ap.add_argument("--seeds", default="1,2")
    ap.add_argument("--duration", default="60s")
    ap.add_argument("--limit", type=int, default=0, help="at most this many survivors (0: all)")
    args = ap.parse_args()

    outcomes = json.loads(args.outcomes.read_text())
    every = json.loads(args.list.read_text())
    by_name = {mutant_name(m): m for m in every}

    survivors = []
    for o in outcomes["outcomes"]:
        scenario = o.get("scenario")
        if not isinstance(scenario, dict) or "Mutant" not in scenario:
            continue
        if o.get("summary") != "MissedMutant":
            continue
        name = mutant_name(scenario["Mutant"])
        survivors.append(by_name.get(name, scenario["Mutant"]))
    if args.limit:
        survivors = survivors[: args.limit]

    args.out.mkdir(parents=True, exist_ok=True)
    done_file = args.out / "campaigns.jsonl"
    done = {}
    if done_file.exists():
        for line in done_file.read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                done[r["mutant"]] = r

    tree = args.tree
    bin_dir = args.out / "bin"
    bin_dir.mkdir(exist_ok=True)
    target = Path(os.environ.get("CARGO_TARGET_DIR", args.out / "target"))
    # The harness and the proxy come from the worktree before any mutant is
    # applied (HEAD), built once: every campaign of the stage judges with the
    # same harness, whatever happens in the checkout meanwhile.
    env = dict(os.environ, CARGO_TARGET_DIR=str(target))
    if run(["cargo", "build", "-q", "--manifest-path", str(tree / "Cargo.toml"),
            "-p", "epochal", "-p", "epochal-faults", "--bins"], env=env) != 0:
        print(f"cannot build the harness and proxy in {tree}", file=sys.stderr)
        return 1
    for binary in ("epochal", "epochal-proxy"):
        shutil.copy2(target / "debug" / binary, bin_dir / binary)
    seeds = [s for s in args.seeds.split(",") if s]

    for i, m in enumerate(survivors, 1):
        name = mutant_name(m)
        if name in done:
            continue
        started = time.time()
        path, before = apply(tree, m)
        try:
            env = dict(os.environ, CARGO_TARGET_DIR=str(target))
            built = run(["cargo", "build", "-q", "--manifest-path", str(tree / "Cargo.toml"),
                         "-p", "epochal-broker", "--bin", "epochal-broker"], env=env)
            if built != 0:
                result = {"mutant": name, "outcome": "unviable", "runs": []}
            else:
                shutil.copy2(target / "debug/epochal-broker", bin_dir / "epochal-broker")
                runs = []
                workloads = WORKLOADS.get(module_of(m["file"]), DEFAULT_WORKLOADS)
                for k, seed in enumerate(seeds):
                    workload = workloads[k % len(workloads)]
                    store = args.out / "store" / f"{i:04d}"
                    code = run([str(bin_dir / "epochal"), "campaign", "--seed", seed,
                                "--duration", args.duration, "--store", str(store), *FIXED,
                                *workload],
                               env=dict(os.environ, EPOCHAL_BIN_DIR=str(bin_dir)),
                               timeout=900)
                    runs.append({"seed": seed, "workload": workload, "exit": code})
                    # Exit 1: a forbidden anomaly. Exit 4: a broker that would
                    # not start or serve, which the harness names too.
                    if code in (1, 4):
                        break
                codes = [r["exit"] for r in runs]
                if 1 in codes:
                    outcome = "killed"
                elif 4 in codes:
                    # The cluster never became ready (or a broker would not
                    # start): visible to any user, but no checker's finding.
                    outcome = "killed-not-ready"
                elif -1 in codes:
                    outcome = "timeout"
                elif 2 in codes:
                    outcome = "unknown"
                else:
                    outcome = "survived"
                result = {"mutant": name, "outcome": outcome, "runs": runs,
                          "store": str(args.out / "store" / f"{i:04d}")}
        finally:
            path.write_text(before)
        result["seconds"] = round(time.time() - started)
        with done_file.open("a") as f:
            f.write(json.dumps(result) + "\n")
        done[name] = result
        print(f"[{i}/{len(survivors)}] {result['outcome']:9} {name}", flush=True)

    counts: dict[str, int] = {}
    for m in survivors:
        r = done.get(mutant_name(m))
        if r:
            counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
    print("== survivors of the unit tests, run against campaigns:")
    for outcome in ("killed", "killed-not-ready", "survived", "unknown", "timeout", "unviable"):
        print(f"   {counts.get(outcome, 0):5}  {outcome}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
